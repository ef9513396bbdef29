package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/webhookd/webhookd/engine"
)

// DefaultMaxBody is the request body limit when Options.MaxBody is zero.
const DefaultMaxBody = 256 << 10

// Options configure the handler New returns. The zero value of each field
// means what its comment says.
type Options struct {
	// Tokens are the bearer tokens that may call /v1. Only their SHA-256
	// hashes are kept. Empty strings are ignored; with no token at all
	// every /v1 request is answered 401.
	Tokens []string
	// MaxBody is the largest request body accepted, in bytes; a larger one
	// is answered 413. Zero or negative: DefaultMaxBody (256 KiB).
	MaxBody int64
	// Logger receives internal errors and recovered panics, for the
	// operator. It never receives a token, a secret or a request body.
	// Nil: logs are discarded.
	Logger *slog.Logger
	// Backup writes a consistent copy of the database for
	// GET /v1/admin/backup. Nil: the route answers 404.
	Backup io.WriterTo
	// Ready reports whether the service can take work, for /readyz: nil
	// means ready. Nil func: always ready.
	Ready func() error
	// Metrics serves /metrics (no auth: it carries no tenant data). Nil:
	// the route answers 404.
	Metrics http.Handler
	// ObserveRequest, when set, is told of every routed request: the route
	// pattern (not the path, so tenants are not labels), the status and the
	// time taken.
	ObserveRequest func(method, route string, status int, d time.Duration)
}

// server holds what the handlers share.
type server struct {
	opts    Options
	svc     *engine.Service
	tokens  [][sha256.Size]byte
	maxBody int64
	log     *slog.Logger
	router  *httprouter.Router
}

// New returns the HTTP handler of the webhookd API over svc. The routes,
// their bodies and the error vocabulary are listed in the package doc.
func New(svc *engine.Service, opts Options) http.Handler {
	s := &server{opts: opts, svc: svc, maxBody: opts.MaxBody, log: opts.Logger}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBody
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for _, t := range opts.Tokens {
		if t != "" {
			s.tokens = append(s.tokens, sha256.Sum256([]byte(t)))
		}
	}

	r := httprouter.New()
	// Answer unknown paths with a 404 problem instead of redirecting to a
	// near miss: clients of a JSON API should send the path they mean.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.NotFound = http.HandlerFunc(s.handleNotFound)
	r.MethodNotAllowed = http.HandlerFunc(s.handleMethodNotAllowed)
	r.PanicHandler = s.handlePanic
	s.router = r
	s.routes()
	return r
}

// routes lists every method and path of the API. httprouter v1.3 forbids a
// static segment beside a :param at the same position; the paths are laid
// out so that never happens.
func (s *server) routes() {
	s.handle("GET", "/healthz", s.handleHealth)
	s.handle("GET", "/readyz", s.handleReady)
	s.handle("GET", "/metrics", s.handleMetrics)

	s.handle("PUT", "/v1/tenants/:tenant", s.auth(s.handlePutTenant))
	s.handle("GET", "/v1/tenants/:tenant", s.auth(s.handleGetTenant))

	s.handle("PUT", "/v1/event-types/:type", s.auth(s.handlePutEventType))
	s.handle("GET", "/v1/event-types", s.auth(s.handleListEventTypes))

	s.handle("POST", "/v1/tenants/:tenant/endpoints", s.auth(s.handleCreateEndpoint))
	s.handle("GET", "/v1/tenants/:tenant/endpoints", s.auth(s.handleListEndpoints))
	s.handle("GET", "/v1/tenants/:tenant/endpoints/:id", s.auth(s.handleGetEndpoint))
	s.handle("PATCH", "/v1/tenants/:tenant/endpoints/:id", s.auth(s.handleUpdateEndpoint))
	s.handle("DELETE", "/v1/tenants/:tenant/endpoints/:id", s.auth(s.handleDeleteEndpoint))

	s.handle("POST", "/v1/tenants/:tenant/events", s.auth(s.handleIngest))
	s.handle("GET", "/v1/tenants/:tenant/events/:id", s.auth(s.handleGetEvent))

	s.handle("GET", "/v1/tenants/:tenant/deliveries/:id", s.auth(s.handleGetDelivery))
	s.handle("POST", "/v1/tenants/:tenant/deliveries/:id/replay", s.auth(s.handleReplay))

	s.handle("GET", "/v1/tenants/:tenant/dead-letters", s.auth(s.handleListDeadLetters))

	s.handle("GET", "/v1/admin/backup", s.auth(s.handleBackup))
}

// handle registers h for method and path, measured by ObserveRequest.
func (s *server) handle(method, path string, h httprouter.Handle) {
	if s.opts.ObserveRequest != nil {
		inner, observe := h, s.opts.ObserveRequest
		h = func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
			start := time.Now()
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			inner(sw, r, ps)
			observe(method, path, sw.status, time.Since(start))
		}
	}
	s.router.Handle(method, path, h)
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// auth wraps h so that it runs only for a request bearing one of the
// configured tokens. The presented token is hashed and compared in constant
// time against every configured hash, without stopping at a match.
func (s *server) auth(h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if !s.authorized(r.Header.Get("Authorization")) {
			s.writeError(w, r, engine.Errorf(engine.CodeUnauthorized, "", "missing or invalid bearer token"))
			return
		}
		h(w, r, ps)
	}
}

// authorized reports whether header is "Bearer <token>" with a configured
// token. The scheme is case-insensitive (RFC 9110).
func (s *server) authorized(header string) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return false
	}
	sum := sha256.Sum256([]byte(token))
	match := 0
	for i := range s.tokens {
		match |= subtle.ConstantTimeCompare(sum[:], s.tokens[i][:])
	}
	return match == 1
}

func (s *server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, engine.Errorf(engine.CodeNotFound, "", "no route for %s", r.URL.Path))
}

// handleMethodNotAllowed runs after httprouter has set the Allow header.
func (s *server) handleMethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, engine.Errorf(engine.CodeMethodNotAllowed, "", "%s is not allowed here; allowed: %s", r.Method, w.Header().Get("Allow")))
}

// handlePanic answers a panic in a handler with a 500 problem and logs it
// with its stack. http.ErrAbortHandler is re-raised so the server aborts the
// response as it asked.
func (s *server) handlePanic(w http.ResponseWriter, r *http.Request, v any) {
	if v == http.ErrAbortHandler {
		panic(v)
	}
	s.log.ErrorContext(r.Context(), "httpapi: panic in handler",
		slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
	s.writeProblem(w, r, engine.CodeInternal, internalDetail, "")
}
