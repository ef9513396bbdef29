package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/webhookd/webhookd/engine"
)

// Portal links (engine/portal.go): the operator's backend asks for a link
// (POST /v1/tenants/:tenant/portal-links, admin), and the customer's
// browser opens it: GET /console/portal/:link shows a page whose one
// button (pressed by console.js at once) POSTs to the same URL, which
// opens the session and lands on the tenant's deliveries. Opening the
// link takes a POST so that a link scanner or a prefetch that GETs it
// does not use it up; the POST must come from the console's own page
// (Origin), so another site cannot log a browser into a tenant of its
// choosing.

// ValidOrigin accepts a web origin as CSP frame-ancestors and portal
// link URLs take it: http or https, a host, an optional port, nothing
// else (no path, query, user info or wildcard).
func ValidOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(o, " ;,*'\"") {
		return errors.New(`must be an origin like "https://app.example.com" (scheme, host, optional port; no path)`)
	}
	return nil
}

// ValidBrand reports what is wrong with b, naming the field: a name of
// at most 60 characters that engine.ValidateText takes as
// identifier-like text, an accent "#rrggbb", a logo at an absolute http
// or https URL.
func ValidBrand(b Brand) (field string, err error) {
	if engine.ValidateText("name", b.Name, 60, engine.IdentifierText) != nil {
		return "name", errors.New("must be at most 60 visible characters and spaces: no control characters, no invisible formatting")
	}
	if b.Accent != "" && !accentRE.MatchString(b.Accent) {
		return "accent", errors.New(`must be a colour like "#2456c7"`)
	}
	if b.LogoURL != "" {
		u, err := url.Parse(b.LogoURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || strings.ContainsAny(b.LogoURL, " ;,'\"") {
			return "logo_url", errors.New("must be an absolute http or https URL of an image")
		}
	}
	return "", nil
}

var accentRE = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

// portalLink is the answer of POST …/portal-links.
type portalLink struct {
	ID        string    `json:"id"` // the link's token ID: listed and revocable with the tenant's access tokens
	URL       string    `json:"url"`
	Expires   time.Time `json:"expires"`
	ReturnURL string    `json:"return_url,omitempty"`
}

// handleCreatePortalLink: POST /v1/tenants/:tenant/portal-links
func (s *server) handleCreatePortalLink(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var in engine.PortalLinkInput
	if err := decodeJSON(w, r, s.maxBody, &in, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	t, link, err := s.svc.IssuePortalLink(r.Context(), ps.ByName("tenant"), in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store") // the URL opens a session
	s.writeJSON(w, r, http.StatusCreated, portalLink{
		ID: t.ID, URL: s.publicBase(r) + "/console/portal/" + link, Expires: t.Expires, ReturnURL: t.ReturnURL,
	})
}

// publicBase is the scheme and host browsers reach webhookd at:
// ConsoleOptions.PublicURL, else the request's.
func (s *server) publicBase(r *http.Request) string {
	if u := strings.TrimSuffix(s.opts.Console.PublicURL, "/"); u != "" {
		return u
	}
	scheme := "http"
	if secureRequest(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// portalData is the portal page's own data.
type portalData struct {
	Action string // where the button POSTs: the link's own URL
}

// handlePortalPage: GET /console/portal/:link shows the button that opens
// the link; it does not use the link up.
func (s *server) handlePortalPage(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	p := s.newPage(nil, "Open the portal", "")
	p.Data = portalData{Action: "/console/portal/" + url.PathEscape(ps.ByName("link"))}
	s.render(w, r, http.StatusOK, "portal", p)
}

// handlePortalOpen: POST /console/portal/:link opens the link's session.
func (s *server) handlePortalOpen(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	s.console.headers(w)
	if !sameOrigin(r) {
		s.consoleError(w, r, nil, engine.Errorf(engine.CodeForbidden, "", "a portal link opens only from its own page: open the link itself"))
		return
	}
	link, _, token, err := s.svc.RedeemPortalLink(r.Context(), ps.ByName("link"), s.opts.Console.SessionTTL)
	if err != nil {
		if engine.ErrorCode(err) == engine.CodeUnauthorized {
			var e *engine.Error
			errors.As(err, &e)
			// A customer has no token to log in with: the way back is
			// a new link, from the app.
			back, _, _ := s.svc.PortalWayBack(r.Context(), ps.ByName("link"))
			s.portalEnded(w, r, http.StatusUnauthorized, "Link not valid", e.Message, back)
			return
		}
		s.consoleError(w, r, nil, err)
		return
	}
	s.console.setCookie(w, r, sessionCookie, encodeSession(token))
	http.Redirect(w, r, tenantPath(link.TenantID, "deliveries"), http.StatusSeeOther)
}
