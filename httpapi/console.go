package httpapi

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/webhookd/webhookd/engine"
)

// The web console: server-rendered HTML under /console/, for a tenant's
// people (logged in with a tenant access token) and for the operator
// (logged in with an admin token, who picks a tenant). It calls the
// engine.Service directly, as the API does, and is usable without
// JavaScript; console.js only adds niceties (a confirmation before a
// range replay, a reload while a delivery is in flight, copying a secret).
// A secret is shown on the page that made it (a new endpoint, a rotation)
// and on the endpoint's page after its "Reveal secret" form, a POST that
// is recorded on the endpoint; never on a GET.
//
// Session: logging in POSTs a token, which is checked as the API checks a
// bearer token (identify, security.go) and then kept in the cookie
// webhookd_session (webhookd_session_<port> when the browser's Host names
// a port: cookies ignore ports, and two consoles on one host must not end
// each other's sessions; see cookieName) — HttpOnly, SameSite=Strict, Path=/console, Secure when
// the request came over TLS (or X-Forwarded-Proto says https), no
// Max-Age (it ends with the browser session). Every request checks the
// token again, so an expired or revoked token logs the browser out at
// once; there is no server-side session state.
//
// CSRF: every form that changes something carries a token,
// HMAC-SHA256(key, session token), where key is derived from
// ConsoleOptions.Secret (the same on every node of a cluster, so that
// any node takes the form another served), or random per process; every
// POST checks it (in constant time) and, when the browser sends Origin
// (or else Referer), that it names this host. The login form carries
// HMAC(key, nonce) with the nonce in its own SameSite=Strict cookie, so
// another site cannot log a browser in either. With a random key, a
// restart makes the forms of open pages stale (403, "reload the page").
//
// Every page is sent with Content-Security-Policy default-src 'self' (no
// inline script or style), frame-ancestors 'none' and X-Frame-Options
// DENY, nosniff, Referrer-Policy same-origin and Cache-Control no-store
// (pages show tenant data, and a rotation or a reveal shows a secret). Everything
// user-controlled — URLs, reasons, response excerpts, payloads — is
// escaped by html/template; response excerpts and payloads are shown as
// text in <pre>.

//go:embed console/templates/*.html console/static/*
var consoleFiles embed.FS

// Cookie names of the console, as cookieName suffixes them; both are
// Path=/console.
const (
	sessionCookie = "webhookd_session" // base64url of the token
	loginCookie   = "webhookd_login"   // the login form's CSRF nonce
)

// consolePageSize is how many rows a console listing shows per page.
const consolePageSize = 50

// consoleStatsWindow and consoleStatsLimit bound the endpoints page's
// success rate: attempts made in the last 24 hours, of the newest
// deliveries created in that window, at most this many.
const (
	consoleStatsWindow = 24 * time.Hour
	consoleStatsLimit  = 1000
)

// console holds the console's parsed pages, its CSRF key and how it may
// be framed.
type console struct {
	pages  map[string]*template.Template
	static http.Handler
	key    [32]byte // HMAC key of CSRF tokens: from ConsoleOptions.Secret, or random per process
	// brandCSS is /console/brand.css, made once from the brand's accent.
	brandCSS string
	opts     ConsoleOptions
	csp      string // the Content-Security-Policy of every page
}

// newConsole parses the embedded templates (a broken template is a bug
// caught by any test: it panics) and makes a fresh CSRF key.
func newConsole(opts ConsoleOptions) *console {
	c := &console{pages: map[string]*template.Template{}, opts: opts}
	ancestors := "'none'"
	if len(opts.FrameAncestors) > 0 {
		ancestors = strings.Join(opts.FrameAncestors, " ")
	}
	imgs := "'self' data:"
	if u, err := url.Parse(opts.Brand.LogoURL); err == nil && opts.Brand.LogoURL != "" {
		imgs += " " + u.Scheme + "://" + u.Host
	}
	c.csp = "default-src 'self'; img-src " + imgs + "; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors " + ancestors
	if opts.Brand.Name == "" {
		c.opts.Brand.Name = "webhookd"
	}
	c.brandCSS = brandCSS(opts.Brand.Accent)
	if len(opts.Secret) > 0 {
		m := hmac.New(sha256.New, opts.Secret)
		m.Write([]byte("webhookd console csrf key"))
		copy(c.key[:], m.Sum(nil))
	} else {
		rand.Read(c.key[:]) // never returns an error: it crashes the program instead (Go 1.24)
	}
	names, err := fs.Glob(consoleFiles, "console/templates/*.html")
	if err != nil {
		panic(err)
	}
	for _, name := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(name, "console/templates/"), ".html")
		if base == "layout" {
			continue
		}
		t := template.New(base).Funcs(consoleFuncs)
		c.pages[base] = template.Must(t.ParseFS(consoleFiles, "console/templates/layout.html", name))
	}
	static, err := fs.Sub(consoleFiles, "console/static")
	if err != nil {
		panic(err)
	}
	c.static = http.FileServerFS(static)
	return c
}

// mac returns base64url(HMAC-SHA256(key, purpose ‖ 0 ‖ value)).
func (c *console) mac(purpose, value string) string {
	m := hmac.New(sha256.New, c.key[:])
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(value))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkMAC reports whether got is mac(purpose, value), in constant time.
func (c *console) checkMAC(purpose, value, got string) bool {
	return hmac.Equal([]byte(c.mac(purpose, value)), []byte(got))
}

// consoleRoutes lists the console's routes. Paths under /console/t/:tenant
// are a tenant's pages; every other segment at that level is static, and
// no :param sits beside a static segment.
func (s *server) consoleRoutes() {
	s.handle("GET", "/console", s.handleConsoleRoot)
	s.handle("GET", "/console/", s.handleConsoleRoot)
	s.handle("GET", "/console/static/*file", s.handleConsoleStatic)
	s.handle("GET", "/console/brand.css", s.handleBrandCSS)
	s.handle("GET", "/console/login", s.handleLoginPage)
	s.handle("POST", "/console/login", s.handleLogin)
	s.handle("POST", "/console/logout", s.handleLogout)
	s.handle("GET", "/console/portal/:link", s.handlePortalPage)
	s.handle("POST", "/console/portal/:link", s.handlePortalOpen)
	s.handle("GET", "/console/tenants", s.consoleSession(s.handleTenantsPage))
	s.handle("POST", "/console/tenants", s.consoleSession(s.handleConsoleCreateTenant))
	s.handle("GET", "/console/operational-endpoints", s.consoleOperator(s.handleOperationalPage))
	s.handle("POST", "/console/operational-endpoints", s.consoleOperator(s.handleConsoleCreateOperational))
	s.handle("POST", "/console/operational-endpoints/:id/disable", s.consoleOperator(s.handleConsoleDisableOperational))
	s.handle("POST", "/console/operational-endpoints/:id/enable", s.consoleOperator(s.handleConsoleEnableOperational))
	s.handle("POST", "/console/operational-endpoints/:id/rotate", s.consoleOperator(s.handleConsoleRotateOperational))
	s.handle("POST", "/console/operational-endpoints/:id/delete", s.consoleOperator(s.handleConsoleDeleteOperational))
	s.handle("GET", "/console/tasks", s.consoleSession(s.handleTasksPage))
	s.handle("GET", "/console/tasks/:id", s.consoleSession(s.handleTaskPage))

	s.handle("GET", "/console/t/:tenant/endpoints", s.consoleTenant(s.handleEndpointsPage))
	s.handle("POST", "/console/t/:tenant/endpoints", s.consoleTenant(s.handleConsoleCreateEndpoint))
	s.handle("GET", "/console/t/:tenant/endpoints/:id/edit", s.consoleTenant(s.handleEditEndpointPage))
	s.handle("POST", "/console/t/:tenant/endpoints/:id", s.consoleTenant(s.handleConsoleUpdateEndpoint))
	s.handle("POST", "/console/t/:tenant/endpoints/:id/rotate", s.consoleTenant(s.handleConsoleRotate))
	s.handle("POST", "/console/t/:tenant/endpoints/:id/reveal", s.consoleTenant(s.handleConsoleReveal))
	s.handle("POST", "/console/t/:tenant/endpoints/:id/disable", s.consoleTenant(s.handleConsoleDisable))
	s.handle("POST", "/console/t/:tenant/endpoints/:id/enable", s.consoleTenant(s.handleConsoleEnable))
	s.handle("POST", "/console/t/:tenant/endpoints/:id/test", s.consoleTenant(s.handleConsoleTestEvent))
	s.handle("POST", "/console/t/:tenant/endpoints/:id/backfill", s.consoleTenant(s.handleConsoleBackfill))
	s.handle("POST", "/console/t/:tenant/endpoints/:id/delete", s.consoleTenant(s.handleConsoleDeleteEndpoint))
	s.handle("GET", "/console/t/:tenant/deliveries", s.consoleTenant(s.handleDeliveriesPage))
	s.handle("GET", "/console/t/:tenant/deliveries/:id", s.consoleTenant(s.handleDeliveryPage))
	s.handle("POST", "/console/t/:tenant/deliveries/:id/resend", s.consoleTenant(s.handleConsoleResend))
	s.handle("POST", "/console/t/:tenant/deliveries/:id/skip", s.consoleTenant(s.handleConsoleSkip))
	s.handle("GET", "/console/t/:tenant/dead-letters", s.consoleTenant(s.handleDeadLettersPage))
	s.handle("POST", "/console/t/:tenant/dead-letters/replay", s.consoleTenant(s.handleConsoleReplayRange))
	s.handle("GET", "/console/t/:tenant/report", s.consoleTenant(s.handleReportPage))
	s.handle("GET", "/console/t/:tenant/event-types", s.consoleTenant(s.handleCataloguePage))
	s.handle("GET", "/console/t/:tenant/search", s.consoleTenant(s.handleSearch))
	s.handle("POST", "/console/t/:tenant/replay-selected", s.consoleTenant(s.handleConsoleReplaySelected))
	s.handle("GET", "/console/t/:tenant/events", s.consoleTenant(s.handleEventsPage))
	s.handle("GET", "/console/t/:tenant/events/:id", s.consoleTenant(s.handleEventPage))
	s.handle("GET", "/console/t/:tenant/tasks", s.consoleTenant(s.handleTenantTasksPage))
	s.handle("GET", "/console/t/:tenant/tasks/:id", s.consoleTenant(s.handleTenantTaskPage))
}

// visit is one console request of a logged-in principal.
type visit struct {
	p       principal
	session string        // the token, to make the CSRF token from
	tenant  engine.Tenant // the tenant of a /console/t/:tenant page; zero elsewhere
}

// consoleHandler is a console page or action of a logged-in principal.
type consoleHandler func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit)

// headers sets the headers every console page carries.
func (c *console) headers(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", c.csp)
	if len(c.opts.FrameAncestors) == 0 {
		h.Set("X-Frame-Options", "DENY") // it cannot name origins: frame-ancestors does, for browsers that take it
	}
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// consoleSession wraps h: it runs only for a request with a valid session
// (else a GET is sent to the login page and a POST refused), and a POST
// only with a valid CSRF token from this site.
func (s *server) consoleSession(h consoleHandler) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		s.console.headers(w)
		token := sessionToken(r)
		p, err := s.identify(r.Context(), token)
		if err != nil {
			if engine.ErrorCode(err) != engine.CodeUnauthorized {
				s.consoleError(w, r, nil, err)
				return
			}
			if back, portal, err := s.svc.PortalWayBack(r.Context(), token); err == nil && portal {
				// The cookie stays: it keeps saying where the way back
				// is, and opens nothing.
				s.portalEnded(w, r, http.StatusUnauthorized, "Your session ended", "", back)
				return
			}
			s.console.clearCookie(w, r, sessionCookie)
			if r.Method == http.MethodGet {
				target := "/console/login"
				if token != "" {
					target += "?m=ended"
				}
				http.Redirect(w, r, target, http.StatusSeeOther)
				return
			}
			s.consoleError(w, r, nil, errUnauthorized())
			return
		}
		r = r.WithContext(withPrincipal(r.Context(), p))
		v := &visit{p: p, session: token}
		if r.Method == http.MethodPost {
			if err := s.checkForm(w, r, "csrf", token); err != nil {
				s.consoleError(w, r, v, err)
				return
			}
		}
		h(w, r, ps, v)
	}
}

// consoleTenant is consoleSession for a page of the tenant in the path:
// the principal must be allowed that tenant's routes, exactly as on the
// API (allow, security.go). A tenant token on another tenant's page gets
// the same 403 whether that tenant exists or not.
func (s *server) consoleTenant(h consoleHandler) httprouter.Handle {
	return s.consoleSession(func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
		id := ps.ByName("tenant")
		if err := s.allow(r.Context(), v.p, scopeTenant, id); err != nil {
			s.consoleError(w, r, v, err)
			return
		}
		t, err := s.svc.Tenant(r.Context(), id)
		if err != nil {
			s.consoleError(w, r, v, err)
			return
		}
		v.tenant = t
		h(w, r, ps, v)
	})
}

// checkForm parses a POST's form (at most 64 KiB) and reports CodeForbidden
// unless it comes from this site (Origin, else Referer, when sent) and its
// field carries mac(purpose, value).
func (s *server) checkForm(w http.ResponseWriter, r *http.Request, purpose, value string) error {
	stale := engine.Errorf(engine.CodeForbidden, "", "this form is stale or did not come from this console: reload the page and try again")
	if !sameOrigin(r) {
		return stale
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		return engine.Errorf(engine.CodeInvalidField, "", "the form could not be read")
	}
	if value == "" || !s.console.checkMAC(purpose, value, r.PostForm.Get(purpose)) {
		return stale
	}
	return nil
}

// sameOrigin reports whether a request's Origin header (or, without one,
// its Referer) names this host; a request with neither passes, and is
// then judged by its CSRF token alone.
func sameOrigin(r *http.Request) bool {
	from := r.Header.Get("Origin")
	if from == "" {
		from = r.Header.Get("Referer")
	}
	if from == "" {
		return true
	}
	u, err := url.Parse(from)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// encodeSession is the session cookie's value for token.
func encodeSession(token string) string { return base64.RawURLEncoding.EncodeToString([]byte(token)) }

// sessionToken returns the token in the session cookie, "" when none.
func sessionToken(r *http.Request) string {
	c, err := r.Cookie(cookieName(r, sessionCookie))
	if err != nil {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || len(b) > 512 {
		return ""
	}
	return string(b)
}

// secureRequest reports whether the browser reached us over TLS, directly
// or through a proxy that says so. A spoofed header only makes the
// cookie stricter.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// setCookie sets a console cookie: HttpOnly, Path=/console, for the
// browser session; SameSite=Strict and Secure over TLS, or, when the
// console may be framed, SameSite=None, Secure and Partitioned (a cookie
// of the frame's own, keyed by the top-level site, which browsers that
// block third-party cookies still keep). CSRF protection does not rest
// on SameSite: every form carries its token and is checked for Origin.
func (c *console) setCookie(w http.ResponseWriter, r *http.Request, name, value string) {
	http.SetCookie(w, c.cookie(r, name, value))
}

func (c *console) clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	k := c.cookie(r, name, "")
	k.MaxAge = -1
	http.SetCookie(w, k)
}

// cookieName is the console's cookie base as this console's browsers
// know it: base_<port> when the request's Host names a port, else base.
// A browser sends a host's cookies to every port of it, so two consoles
// on one host (a staging and a production node, two local instances)
// would otherwise share one session cookie and log each other out.
func cookieName(r *http.Request, base string) string {
	_, port, err := net.SplitHostPort(r.Host)
	if err != nil || port == "" || strings.Trim(port, "0123456789") != "" {
		return base
	}
	return base + "_" + port
}

func (c *console) cookie(r *http.Request, name, value string) *http.Cookie {
	k := &http.Cookie{
		Name: cookieName(r, name), Value: value, Path: "/console",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secureRequest(r),
	}
	if len(c.opts.FrameAncestors) > 0 {
		k.SameSite, k.Secure, k.Partitioned = http.SameSiteNoneMode, true, true
	}
	return k
}

// page is what every console template gets.
type page struct {
	Title  string
	Nav    string        // the active tab: endpoints, event-types, deliveries, dead-letters, report, tasks, tenants, all-tasks, operational
	Tenant engine.Tenant // zero outside a tenant's pages
	Who    string        // who is logged in, for the header; "" when nobody
	Admin  bool          // the principal may pick any tenant
	Ops    bool          // the principal is an admin of the live environment: the operational webhooks are theirs
	CSRF   string        // the CSRF token every form carries
	Notice string        // a success message
	Error  string        // an error message
	Return string        // a portal session's link back to the operator's app; "" for none
	// Portal is a portal session's page: a customer's, which shows
	// nothing of the operator's (token IDs, tenant IDs, API paths).
	Portal bool
	Brand  Brand // the console's name and logo
	Data   any   // the page's own data
}

// newPage returns the page frame for v.
func (s *server) newPage(v *visit, title, nav string) page {
	p := page{Title: title, Nav: nav, Brand: s.console.opts.Brand}
	if v == nil {
		return p
	}
	p.Tenant, p.Return = v.tenant, v.p.returnURL
	p.CSRF = s.console.mac("csrf", v.session)
	switch {
	case v.p.portal:
		p.Portal = true
	case v.p.tenant != "":
		p.Who = fmt.Sprintf("%s (tenant %s, expires %s)", v.p.name, v.p.tenant, fmtTime(v.p.expires))
	default:
		p.Who = fmt.Sprintf("%s (%s)", v.p.name, v.p.env)
		p.Admin = true
		p.Ops = v.p.env == engine.EnvironmentLive
	}
	return p
}

// render executes the named page into a buffer and sends it with status.
func (s *server) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	t, ok := s.console.pages[name]
	if !ok {
		s.log.ErrorContext(r.Context(), "httpapi: no console template", slog.String("name", name))
		http.Error(w, internalDetail, http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		s.log.ErrorContext(r.Context(), "httpapi: render console page",
			slog.String("page", name), slog.String("path", r.URL.Path), slog.String("error", err.Error()))
		http.Error(w, internalDetail, http.StatusInternalServerError)
		return
	}
	s.console.headers(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes()) // the status is sent; a write error means the client went away
}

// isConsolePath reports whether path is the console's: /console or
// under /console/.
func isConsolePath(path string) bool {
	return path == "/console" || strings.HasPrefix(path, "/console/")
}

// consoleNotRouted answers a console path that no route takes, or not
// with this method (err), with the console's error page rather than
// problem+json: a browser shows it, inside a customer's frame too, with
// the way back its session has (none without one: the login).
func (s *server) consoleNotRouted(w http.ResponseWriter, r *http.Request, err error) {
	var v *visit
	if token := sessionToken(r); token != "" {
		if p, ierr := s.identify(r.Context(), token); ierr == nil {
			v = &visit{p: p, session: token}
		}
	}
	s.consoleError(w, r, v, err)
}

// consoleError renders err as an error page with the status the API
// would give it. Uncoded errors are logged and shown as "internal error".
func (s *server) consoleError(w http.ResponseWriter, r *http.Request, v *visit, err error) {
	code := engine.ErrorCode(err)
	entry, known := statusTable[code]
	detail := internalDetail
	if !known || code == engine.CodeInternal {
		s.log.ErrorContext(r.Context(), "httpapi: console internal error",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("error", err.Error()))
		entry = statusTable[engine.CodeInternal]
	} else if e, ok := errors.AsType[*engine.Error](err); ok {
		detail = e.Message
	}
	if v != nil && v.p.portal && code == engine.CodeForbidden && detail == tenantTokenForbidden {
		// A customer has no token: the API's words would mislead them.
		detail = "this page is not one of your webhooks' pages"
	}
	p := s.newPage(v, entry.title, "")
	p.Error = detail
	p.Data = struct{ Status int }{entry.status}
	s.render(w, r, entry.status, "error", p)
}

// handleConsoleRoot sends a browser to its start page: the login page, a
// tenant token's endpoints, or an admin's tenant picker.
func (s *server) handleConsoleRoot(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.console.headers(w)
	token := sessionToken(r)
	p, err := s.identify(r.Context(), token)
	if err != nil {
		if back, portal, err := s.svc.PortalWayBack(r.Context(), token); err == nil && portal {
			s.portalEnded(w, r, http.StatusUnauthorized, "Your session ended", "", back)
			return
		}
		http.Redirect(w, r, "/console/login", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, homeOf(p), http.StatusSeeOther)
}

// homeOf is where a principal lands after logging in.
func homeOf(p principal) string {
	if p.tenant != "" {
		return tenantPath(p.tenant, "endpoints")
	}
	return "/console/tenants"
}

// handleConsoleStatic serves the embedded CSS and JavaScript.
func (s *server) handleConsoleStatic(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "public, max-age=300")
	r2 := r.Clone(r.Context())
	r2.URL.Path = ps.ByName("file")
	s.console.static.ServeHTTP(w, r2)
}

// handleBrandCSS serves the brand's accent colour as the console's
// --accent (ValidBrand checked it), in a shade that reads on each
// palette (brandCSS); empty without one.
func (s *server) handleBrandCSS(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "public, max-age=300")
	io.WriteString(w, s.console.brandCSS)
}

// loginData is the login page's own data.
type loginData struct {
	LoginCSRF string
}

// loginMessages are the notices the login page shows for ?m=.
var loginMessages = map[string]string{
	"ended": "Your session ended: the token expired or was revoked. Log in again.",
	"out":   "You are logged out.",
}

// handleLoginPage shows the login form, with a fresh nonce cookie for its
// CSRF token.
func (s *server) handleLoginPage(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.renderLogin(w, r, http.StatusOK, loginMessages[r.URL.Query().Get("m")], "")
}

func (s *server) renderLogin(w http.ResponseWriter, r *http.Request, status int, notice, errMsg string) {
	var raw [16]byte
	rand.Read(raw[:]) // never returns an error (Go 1.24)
	nonce := base64.RawURLEncoding.EncodeToString(raw[:])
	s.console.setCookie(w, r, loginCookie, nonce)
	p := s.newPage(nil, "Log in", "")
	p.Notice, p.Error = notice, errMsg
	p.Data = loginData{LoginCSRF: s.console.mac("login", nonce)}
	s.render(w, r, status, "login", p)
}

// handleLogin checks the pasted token as the API would and, if it is
// good, keeps it in the session cookie.
func (s *server) handleLogin(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.console.headers(w)
	nonce := ""
	if c, err := r.Cookie(cookieName(r, loginCookie)); err == nil {
		nonce = c.Value
	}
	if err := s.checkForm(w, r, "login", nonce); err != nil {
		s.renderLogin(w, r, http.StatusForbidden, "", "The login form was stale or did not come from this console. Try again.")
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	if len(token) > 512 {
		token = ""
	}
	p, err := s.identify(r.Context(), token)
	if err != nil {
		if engine.ErrorCode(err) != engine.CodeUnauthorized {
			s.consoleError(w, r, nil, err)
			return
		}
		s.renderLogin(w, r, http.StatusUnauthorized, "", "That token is not valid: it may be mistyped, expired or revoked.")
		return
	}
	s.console.clearCookie(w, r, loginCookie)
	s.console.setCookie(w, r, sessionCookie, encodeSession(token))
	http.Redirect(w, r, homeOf(p), http.StatusSeeOther)
}

// handleLogout forgets the session cookie. It needs the CSRF token of the
// session it ends, so another site cannot log a browser out; without a
// valid session there is nothing to end.
//
// A portal session's token exists for this browser only, so logging out
// revokes it: the cookie, replayed, opens nothing. The browser then goes
// back to the link's return_url, or to a page that says where to open
// the portal again: a customer has no token to log in with. A token the
// user pasted (a tenant's or an admin's) lives on; only the cookie goes.
func (s *server) handleLogout(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.console.headers(w)
	token := sessionToken(r)
	var p principal
	if token != "" {
		if err := s.checkForm(w, r, "csrf", token); err != nil {
			s.consoleError(w, r, nil, err)
			return
		}
		p, _ = s.identify(r.Context(), token) // an ended session: nothing to revoke
	}
	if p.portal {
		if _, err := s.svc.RevokeAccessToken(r.Context(), p.tenant, p.tokenID); err != nil {
			s.consoleError(w, r, nil, err)
			return
		}
	}
	switch {
	case p.portal:
		// The logout form posts inside the frame: a cross-site frame's
		// cookie is partitioned under the app's site, so a post to the
		// top window would come without it. console.js posts it and
		// then sends the top window to the return_url; without
		// JavaScript this page offers the same way back. The cookie of
		// the revoked token stays: a page opened later leads back to
		// the app too (consoleSession).
		s.portalEnded(w, r, http.StatusOK, "You are logged out", "", p.returnURL)
	default:
		s.console.clearCookie(w, r, sessionCookie)
		http.Redirect(w, r, "/console/login?m=out", http.StatusSeeOther)
	}
}

// portalEnded renders the page a customer gets where a portal link or
// session no longer opens (used, expired, logged out): why, and the way
// back, never the operator's login, which asks for a token a customer
// does not have. The way back is the link's return_url, opened in the top
// window so the app does not open inside its own frame, or, without one,
// where to open the portal again (portalFrom).
func (s *server) portalEnded(w http.ResponseWriter, r *http.Request, status int, title, msg, returnURL string) {
	p := s.newPage(nil, title, "")
	p.Portal, p.Return, p.Error = true, returnURL, msg
	p.Data = struct{ From string }{s.portalFrom()}
	s.render(w, r, status, "ended", p)
}

// portalFrom names where a customer opens the portal again: the
// operator's brand when one is configured (the console's default name,
// webhookd, is no app of theirs), else the app in general words.
func (s *server) portalFrom() string {
	if n := s.opts.Console.Brand.Name; n != "" {
		return n
	}
	return "the app that sent you here"
}

// tenantsData is the tenant picker's data.
type tenantsData struct {
	Tenants []engine.Tenant
	// Reports are each shown tenant's delivery report over its last
	// consoleReportEvents events, by tenant ID; Total sums them.
	Reports map[string]engine.Report
	Total   engine.Report
	Last    int
	// Env is the environment a new tenant gets by default: the token's.
	Env engine.Environment
}

// consoleReportEvents is how many of each tenant's last events the
// tenants page reports on.
const consoleReportEvents = 1000

// handleTenantsPage is the admin's tenant picker: every tenant its
// environment may see. A tenant token is sent to its own tenant.
func (s *server) handleTenantsPage(w http.ResponseWriter, r *http.Request, _ httprouter.Params, v *visit) {
	if v.p.tenant != "" {
		http.Redirect(w, r, homeOf(v.p), http.StatusSeeOther)
		return
	}
	all, err := s.svc.Tenants(r.Context())
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	var shown []engine.Tenant
	for _, t := range all {
		if v.p.env == engine.EnvironmentTest && t.Environment != engine.EnvironmentTest {
			continue // a test token acts on test tenants only
		}
		shown = append(shown, t)
	}
	data := tenantsData{Tenants: shown, Reports: map[string]engine.Report{}, Last: consoleReportEvents, Env: v.p.env}
	if len(shown) > 0 {
		rep, err := s.svc.ReportAll(r.Context(), consoleReportEvents)
		if err != nil {
			s.consoleError(w, r, v, err)
			return
		}
		var mine []engine.Report
		for _, tr := range rep.Tenants {
			if slices.ContainsFunc(shown, func(t engine.Tenant) bool { return t.ID == tr.Tenant }) {
				data.Reports[tr.Tenant] = tr
				mine = append(mine, tr)
			}
		}
		data.Total = rep.Total
		if len(mine) != len(rep.Tenants) { // a test token: the total of what it sees
			data.Total = engine.SumReports(mine)
		}
	}
	p := s.newPage(v, "Tenants", "tenants")
	p.Notice = notice(r)
	p.Data = data
	s.render(w, r, http.StatusOK, "tenants", p)
}

// tenantPath returns /console/t/{tenant}/{parts...}, each part escaped.
func tenantPath(tenant string, parts ...string) string {
	var b strings.Builder
	b.WriteString("/console/t/")
	b.WriteString(url.PathEscape(tenant))
	for _, p := range parts {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(p))
	}
	return b.String()
}

// consoleFuncs are the template functions of the console.
var consoleFuncs = template.FuncMap{
	"ts":     timeHTML,
	"dur":    fmtDuration,
	"pct":    fmtPercent,
	"tpath":  tenantPath,
	"short":  shorten,
	"result": attemptResult,
	"add":    func(a, b int) int { return a + b },
	"reason": reasonNow,
	"indent": func(b json.RawMessage) string { return indentJSON(b) },
	"count":  countOf,
	"wrap":   wrapAt,
	"join":   strings.Join,
	"kind":   taskKind,
	"epLabel": func(e *engine.Endpoint) string {
		if e.Description == "" {
			return shorten(e.URL, 60)
		}
		return shorten(e.URL, 60) + " — " + shorten(e.Description, 40)
	},
}

// wrapAt is s, escaped, with a line break opportunity (<wbr>) after each
// '/', '.', '?', '&', '=' and '_': a URL or an event type that does not
// fit its column wraps between its parts, never inside a word (the CSS
// breaks no word of them).
func wrapAt(s string) template.HTML {
	var b strings.Builder
	for {
		i := strings.IndexAny(s, "/.?&=_")
		if i < 0 {
			b.WriteString(template.HTMLEscapeString(s))
			return template.HTML(b.String())
		}
		b.WriteString(template.HTMLEscapeString(s[:i+1]))
		b.WriteString("<wbr>")
		s = s[i+1:]
	}
}

// countOf is n things: "1 attempt", "2 attempts", "0 attempts" (noun
// is the singular; every noun the pages count takes an s).
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// reasonNow is what the console shows as d's reason. A delivery replayed
// into a new cycle keeps the reason of the last attempt, from the cycle
// before; until the new cycle's first attempt it reads "none in cycle N
// yet (cycle N-1 ended: …)", so that a pending delivery is never shown
// beside a failure that is no longer its state.
func reasonNow(d engine.Delivery) string {
	switch d.State {
	case engine.StatePending, engine.StateDelivering, engine.StateWaiting:
		if d.CycleAttempts == 0 && d.Cycle > 1 {
			s := fmt.Sprintf("none in cycle %d yet", d.Cycle)
			if d.Reason != "" {
				s += fmt.Sprintf(" (cycle %d ended: %s)", d.Cycle-1, d.Reason)
			}
			return s
		}
	}
	return d.Reason
}

// timeHTML is t as the pages show it: fmtTime's text in a <time> whose
// datetime console.js reads to show the browser's local time and how
// long ago (the UTC text stays as its title); "—" for the zero time.
func timeHTML(t time.Time) template.HTML {
	if t.IsZero() {
		return "—"
	}
	return template.HTML(`<time datetime="` + t.UTC().Format(time.RFC3339) + `">` + fmtTime(t) + `</time>`)
}

// fmtTime shows t in UTC to the second; "—" for the zero time.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// fmtDuration shows d to the millisecond (to the microsecond below 1ms).
func fmtDuration(d time.Duration) string {
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// fmtPercent shows a fraction as a percentage with one decimal.
func fmtPercent(f float64) string {
	return fmt.Sprintf("%.1f%%", 100*f)
}

// attemptResult says how an attempt ended: its HTTP status and error,
// without saying the status twice ("HTTP 500 Internal Server Error").
func attemptResult(a engine.Attempt) string {
	status := ""
	if a.Status != 0 {
		status = fmt.Sprintf("HTTP %d", a.Status)
	}
	switch {
	case a.Error == "":
		return status
	case status == "" || strings.HasPrefix(a.Error, status):
		return a.Error
	}
	return status + ": " + a.Error
}

// shorten cuts s to n runes, marking the cut with "…".
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
