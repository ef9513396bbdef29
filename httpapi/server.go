package httpapi

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/webhookd/webhookd/engine"
)

// DefaultMaxBody is the request body limit when Options.MaxBody is zero.
const DefaultMaxBody = 256 << 10

// MaxHeaderBytes bounds a request's head: its request line and header
// lines as HTTP/1.1 sends them, each with its CRLF, and the blank line
// that ends them. The handler answers a request over it 431
// headers_too_large, as problem+json like every other error. It must
// read the request first: the http.Server in front has to take heads
// larger than this (ServerMaxHeaderBytes).
const MaxHeaderBytes = 64 << 10

// ServerMaxHeaderBytes is the http.Server's MaxHeaderBytes that serves
// the handler (main's): far enough above MaxHeaderBytes that a head the
// API refuses reaches the handler, which says why as problem+json. Past
// it (and Go's 4 KiB of slack) Go's server answers 431 itself, in plain
// text, before any handler: the one answer that is not problem+json.
const ServerMaxHeaderBytes = 1 << 20

// Options configure the handler New returns. The zero value of each field
// means what its comment says.
type Options struct {
	// Tokens are the bearer tokens that may call /v1, for the live
	// environment (they may act on test tenants too). Only their SHA-256
	// hashes are kept; a token written "sha256:<64 hex digits>" is given by
	// its hash. Empty strings are ignored; with no token at all every /v1
	// request is answered 401.
	Tokens []string
	// TestTokens are bearer tokens for the test environment, kept like
	// Tokens: they act on test tenants only (see authorize).
	TestTokens []string
	// IngestRate limits event ingest per token, in requests per second,
	// with bursts of IngestBurst (0: the rate rounded up, at least 1);
	// over it ingest answers 429 rate_limited with Retry-After. Zero:
	// unlimited.
	IngestRate  float64
	IngestBurst int
	// TenantTokenTTL is the lifetime of a tenant access token issued
	// without a "ttl" (POST /v1/tenants/:tenant/access-tokens); at most
	// engine.MaxAccessTokenTTL. Zero: engine.DefaultAccessTokenTTL (24h).
	TenantTokenTTL time.Duration
	// MaxBody is the largest request body accepted, in bytes; a larger one
	// is answered 413. Zero or negative: DefaultMaxBody (256 KiB).
	MaxBody int64
	// Logger receives internal errors and recovered panics, for the
	// operator, and the audit line of each secret reveal ("endpoint
	// secret revealed", info). It never receives a token, a secret or a
	// request body. Nil: logs are discarded.
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
	// ObserveIngest, when set, is told of every acknowledged ingest:
	// repeat is true when the Idempotency-Key named an event already
	// stored, so nothing new was stored.
	ObserveIngest func(repeat bool)
	// Console configures the web console's embedding (portal.go).
	Console ConsoleOptions
}

// ConsoleOptions are the console's [console] settings.
type ConsoleOptions struct {
	// SessionTTL is how long a session opened by a portal link lasts.
	// Zero: engine.DefaultPortalSessionTTL.
	SessionTTL time.Duration
	// FrameAncestors are the origins ("https://app.example.com") allowed
	// to show the console in a frame (CSP frame-ancestors). Empty: none,
	// and X-Frame-Options DENY. With any, the console's cookies are
	// SameSite=None; Secure; Partitioned, so that they work inside a
	// cross-site frame (browsers keep Secure cookies over HTTPS, and over
	// plain HTTP only for localhost). Each must pass ValidOrigin.
	FrameAncestors []string
	// PublicURL is the base URL browsers reach webhookd at
	// ("https://hooks.example.com"), which portal links start with. "":
	// the scheme and host of the request that asks for the link.
	PublicURL string
	// Brand white-labels the console.
	Brand Brand
	// Secret is what the key of the console's CSRF tokens (its forms',
	// its login form's) is derived from. Every node a browser may reach
	// at one address (a cluster behind a load balancer) must be given
	// the same, or a form one node served is refused by another (403);
	// a process given the same after a restart keeps the forms of open
	// pages good. Empty: a random key per process. Keep it secret: with
	// it, a site that can set the console's cookies in a browser could
	// make forms it accepts.
	Secret []byte
}

// Brand is how the console names and colours itself, for an operator
// who shows it to its customers as its own. Each field must pass
// ValidBrand; a zero field keeps webhookd's own.
type Brand struct {
	Name    string // in the header and every page's title; "": webhookd
	Accent  string // the colour of links and buttons, "#rrggbb"
	LogoURL string // an http(s) image shown before the name; its origin joins the pages' img-src
}

// server holds what the handlers share.
type server struct {
	opts    Options
	svc     *engine.Service
	tokens  []credential // see security.go
	maxBody int64
	log     *slog.Logger
	router  *httprouter.Router
	console *console // the web console's templates and keys (console.go)
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
	s.tokens = credentials(opts)
	s.console = newConsole(opts.Console)

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
	return http.HandlerFunc(s.serveHTTP)
}

// serveHTTP refuses a request whose head is over MaxHeaderBytes, on any
// path and before its credentials are looked at, and routes the others.
// A HEAD of a path that takes GET is routed as the GET (RFC 9110 §9.3.2:
// the same status and headers; net/http sends no body for the request it
// read, still a HEAD), so that a monitor probing /healthz with HEAD sees
// it up; a HEAD of another path is 405.
func (s *server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if n := headBytes(r); n > MaxHeaderBytes {
		s.writeError(w, r, engine.Errorf(engine.CodeHeadersTooLarge, "",
			"the request line and headers are %d bytes; at most %d (64 KiB)", n, MaxHeaderBytes))
		return
	}
	if r.Method == http.MethodHead {
		if h, _, _ := s.router.Lookup(http.MethodGet, r.URL.Path); h != nil {
			get := *r
			get.Method = http.MethodGet
			r = &get
		}
	}
	s.router.ServeHTTP(w, r)
}

// headBytes returns the size of r's head as HTTP/1.1 sends it: the
// request line, a line for Host and for each header value ("Name:
// value" and CRLF), and the blank line. It is what was read for a
// client that writes canonical names with one space after the colon,
// as clients do; optional whitespace around a value is not counted.
func headBytes(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	if r.Host != "" {
		n += len("Host: ") + len(r.Host) + 2
	}
	for name, values := range r.Header {
		for _, v := range values {
			n += len(name) + 2 + len(v) + 2
		}
	}
	return n + 2
}

// routes lists every method and path of the API. httprouter v1.3 forbids a
// static segment beside a :param at the same position; the paths are laid
// out so that never happens.
func (s *server) routes() {
	// The probes take no parameter, as every route of the API: a probe
	// configured with one (?verbose, ?full) learns it is not read.
	s.handle("GET", "/healthz", s.takes(s.handleHealth))
	s.handle("GET", "/readyz", s.takes(s.handleReady))
	s.handle("GET", "/metrics", s.handleMetrics)
	s.handle("GET", "/v1/openapi.json", s.takes(s.handleOpenAPI))

	s.handle("GET", "/v1/tenants", s.auth(s.takes(s.handleListTenants, "limit", "cursor")))
	s.handle("PUT", "/v1/tenants/:tenant", s.auth(s.takes(s.handlePutTenant)))
	s.handle("GET", "/v1/tenants/:tenant", s.tenantAuth(s.takes(s.handleGetTenant)))
	s.handle("DELETE", "/v1/tenants/:tenant", s.auth(s.takes(s.handleDeleteTenant, "force")))

	s.handle("PUT", "/v1/event-types/:type", s.auth(s.takes(s.handlePutEventType)))
	s.handle("DELETE", "/v1/event-types/:type", s.auth(s.takes(s.handleDeleteEventType)))
	s.handle("GET", "/v1/event-types", s.anyAuth(s.takes(s.handleListEventTypes, "limit", "cursor")))
	s.handle("GET", "/v1/retry-policies", s.anyAuth(s.takes(s.handleListRetryPolicies, "limit", "cursor")))

	s.handle("POST", "/v1/tenants/:tenant/endpoints", s.tenantAuth(s.takes(s.handleCreateEndpoint)))
	s.handle("GET", "/v1/tenants/:tenant/endpoints", s.tenantAuth(s.takes(s.handleListEndpoints, "limit", "cursor")))
	s.handle("GET", "/v1/tenants/:tenant/endpoints/:id", s.tenantAuth(s.takes(s.handleGetEndpoint)))
	s.handle("PATCH", "/v1/tenants/:tenant/endpoints/:id", s.tenantAuth(s.takes(s.handleUpdateEndpoint)))
	s.handle("DELETE", "/v1/tenants/:tenant/endpoints/:id", s.tenantAuth(s.takes(s.handleDeleteEndpoint)))
	s.handle("POST", "/v1/tenants/:tenant/endpoints/:id/secret/rotate", s.tenantAuth(s.takes(s.handleRotateSecret)))
	s.handle("POST", "/v1/tenants/:tenant/endpoints/:id/secret/revoke", s.tenantAuth(s.takes(s.handleRevokeSecret)))
	s.handle("POST", "/v1/tenants/:tenant/endpoints/:id/secret/reveal", s.tenantAuth(s.takes(s.handleRevealSecret)))
	s.handle("POST", "/v1/tenants/:tenant/endpoints/:id/verify", s.tenantAuth(s.takes(s.handleVerifyEndpoint)))
	s.handle("POST", "/v1/tenants/:tenant/endpoints/:id/test-events", s.tenantAuth(s.takes(s.handleSendTestEvent)))
	s.handle("POST", "/v1/tenants/:tenant/endpoints/:id/backfill", s.tenantAuth(s.takes(s.handleBackfill)))

	s.handle("POST", "/v1/tenants/:tenant/events", s.auth(s.limitIngest(s.takes(s.handleIngest))))
	s.handle("GET", "/v1/tenants/:tenant/events/:id", s.tenantAuth(s.takes(s.handleGetEvent)))

	s.handle("GET", "/v1/tenants/:tenant/deliveries/:id", s.tenantAuth(s.takes(s.handleGetDelivery)))
	s.handle("POST", "/v1/tenants/:tenant/deliveries/:id/replay", s.tenantAuth(s.takes(s.handleReplay)))
	s.handle("POST", "/v1/tenants/:tenant/deliveries/:id/skip", s.tenantAuth(s.takes(s.handleSkip)))

	s.handle("GET", "/v1/tenants/:tenant/dead-letters", s.tenantAuth(s.takes(s.handleListDeadLetters, "limit", "cursor")))
	s.handle("POST", "/v1/tenants/:tenant/dead-letters/replay", s.tenantAuth(s.takes(s.handleReplayDeadLetters)))
	s.handle("GET", "/v1/tenants/:tenant/deliveries", s.tenantAuth(s.takes(s.handleListDeliveries, "state", "type", "endpoint", "status", "since", "until", "limit", "cursor", "channel")))
	s.handle("GET", "/v1/tenants/:tenant/events", s.tenantAuth(s.takes(s.handleListEvents, "cursor", "type", "since", "limit", "channel")))
	s.handle("GET", "/v1/tenants/:tenant/report", s.tenantAuth(s.takes(s.handleReport, "last")))
	s.handle("GET", "/v1/tenants/:tenant/tasks", s.tenantAuth(s.takes(s.handleListTenantTasks, "limit", "cursor")))
	s.handle("GET", "/v1/tenants/:tenant/tasks/:id", s.tenantAuth(s.takes(s.handleGetTenantTask)))

	// Tenant access tokens (access_tokens.go): admin tokens only.
	s.handle("POST", "/v1/tenants/:tenant/access-tokens", s.auth(s.takes(s.handleIssueAccessToken)))
	s.handle("GET", "/v1/tenants/:tenant/access-tokens", s.auth(s.takes(s.handleListAccessTokens, "limit", "cursor")))
	s.handle("DELETE", "/v1/tenants/:tenant/access-tokens/:id", s.auth(s.takes(s.handleRevokeAccessToken)))
	s.handle("POST", "/v1/tenants/:tenant/portal-links", s.auth(s.takes(s.handleCreatePortalLink)))

	// Operational endpoints (operational.go): admin tokens only.
	s.handle("POST", "/v1/operational-endpoints", s.auth(s.takes(s.handleCreateOperationalEndpoint)))
	s.handle("GET", "/v1/operational-endpoints", s.auth(s.takes(s.handleListOperationalEndpoints, "limit", "cursor")))
	s.handle("GET", "/v1/operational-endpoints/:id", s.auth(s.takes(s.handleGetOperationalEndpoint)))
	s.handle("PATCH", "/v1/operational-endpoints/:id", s.auth(s.takes(s.handleUpdateOperationalEndpoint)))
	s.handle("DELETE", "/v1/operational-endpoints/:id", s.auth(s.takes(s.handleDeleteOperationalEndpoint)))
	s.handle("POST", "/v1/operational-endpoints/:id/secret/rotate", s.auth(s.takes(s.handleRotateOperationalSecret)))

	s.handle("GET", "/v1/admin/backup", s.auth(s.takes(s.handleBackup)))
	s.handle("GET", "/v1/admin/report", s.auth(s.takes(s.handleReportAll, "last")))

	// Background tasks (tasks.go): every tenant's and the operator's.
	s.handle("GET", "/v1/tasks", s.auth(s.takes(s.handleListTasks, "limit", "cursor")))
	s.handle("GET", "/v1/tasks/:id", s.auth(s.takes(s.handleGetTask)))

	// The web console (console.go): HTML, its own session and CSRF checks.
	s.consoleRoutes()
}

// takes wraps h, a handler of the API, so that a request with a query
// parameter h does not read is refused (400 unknown_parameter, naming
// it) instead of ignored: a client that misspells a filter or a cursor
// would otherwise get an unfiltered first page and never know. A
// parameter it takes given more than once is refused too (422
// invalid_field, naming it): each takes one value, and a client that
// repeats one to ask for several (Svix's ?event_types=a&event_types=b)
// would otherwise get the first one's page alone. It runs inside the
// authentication, so that only a caller who may use the route learns
// what it takes.
func (s *server) takes(h httprouter.Handle, params ...string) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if r.URL.RawQuery != "" {
			q := r.URL.Query()
			for name := range q {
				if !slices.Contains(params, name) {
					s.writeError(w, r, unknownParameter(name, params))
					return
				}
			}
			for _, name := range params { // in the route's order, so the answer is stable
				if n := len(q[name]); n > 1 {
					s.writeError(w, r, engine.Errorf(engine.CodeInvalidField, name,
						"query parameter %q is given %d times; it takes one value, given once", name, n))
					return
				}
			}
		}
		h(w, r, ps)
	}
}

// unknownParameter is the error for a query parameter name that a route
// taking params does not take.
func unknownParameter(name string, params []string) error {
	if len(params) == 0 {
		return engine.Errorf(engine.CodeUnknownParameter, name, "unknown query parameter %q: this route takes none", name)
	}
	return engine.Errorf(engine.CodeUnknownParameter, name, "unknown query parameter %q: this route takes %s", name, strings.Join(params, ", "))
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
	if method == http.MethodGet {
		// Never reached (serveHTTP routes a HEAD of a GET path as the
		// GET): registered so that Allow, on a 405 and an OPTIONS, lists it.
		s.router.Handle(http.MethodHead, path, h)
	}
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
// configured tokens, and a test token only where it may act: see
// authorize, in security.go. Tenant access tokens get 403.
func (s *server) auth(h httprouter.Handle) httprouter.Handle {
	return s.authorize(scopeAdmin, h)
}

// tenantAuth is auth that also admits a tenant access token on its own
// tenant's routes.
func (s *server) tenantAuth(h httprouter.Handle) httprouter.Handle {
	return s.authorize(scopeTenant, h)
}

// anyAuth admits every valid token: test and tenant tokens included.
func (s *server) anyAuth(h httprouter.Handle) httprouter.Handle {
	return s.authorize(scopeAnyToken, h)
}

// handleNotFound answers a path no route takes: problem+json, but under
// /console the console's error page (consoleNotRouted).
func (s *server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	if isConsolePath(r.URL.Path) {
		s.consoleNotRouted(w, r, engine.Errorf(engine.CodeNotFound, "", "there is no page at this address"))
		return
	}
	s.writeError(w, r, engine.Errorf(engine.CodeNotFound, "", "no route for %s", r.URL.Path))
}

// handleMethodNotAllowed runs after httprouter has set the Allow header.
func (s *server) handleMethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	if isConsolePath(r.URL.Path) {
		s.consoleNotRouted(w, r, engine.Errorf(engine.CodeMethodNotAllowed, "", "this address takes %s, not %s: it is not a page to open", w.Header().Get("Allow"), r.Method))
		return
	}
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
