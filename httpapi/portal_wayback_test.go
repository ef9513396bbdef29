package httpapi_test

import (
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
)

// TestPortal_ErrorsOutsideItsTenantLeadBack: a portal session that opens
// a page that is not its tenant's (another tenant's, the operator's, a
// task that is none) gets an error page that leads back to its own pages
// and speaks of no token: the customer has none to log in with.
func TestPortal_ErrorsOutsideItsTenantLeadBack(t *testing.T) {
	e, _ := portalEnv(t, httpapi.ConsoleOptions{})
	b := e.browser()
	b.open(link(e, `{}`))
	tags := regexp.MustCompile(`(?s)<[^>]*>`)
	for _, path := range []string{
		"/console/t/globex/endpoints",
		"/console/t/globex/deliveries/dlv_00000000000000000000000000",
		"/console/operational-endpoints",
		"/console/tasks/task_00000000000000000000000000",
	} {
		p := b.get(path)
		if p.status < 400 {
			t.Errorf("%s: %d, want an error page", path, p.status)
			continue
		}
		text := html.UnescapeString(tags.ReplaceAllString(p.body, " "))
		if strings.Contains(p.body, `href="/console/login"`) || !strings.Contains(p.body, `href="/console/"`) || strings.Contains(text, "token") {
			t.Errorf("%s: %d, want a way back to the portal's own pages (/console/) and no login or token:\n%s", path, p.status, p.body)
		}
		// The way back opens the session's own tenant.
		if home := b.get("/console/"); home.status != http.StatusSeeOther || home.header.Get("Location") != "/console/t/acme/endpoints" {
			t.Errorf("/console/ from a portal session: %d to %q", home.status, home.header.Get("Location"))
		}
	}
}

// TestConsole_UnknownPageIsAPage: a console path that is no page (a
// mistyped or stale link, a trailing slash) or a page asked with a method
// it does not take answers the console's HTML error page, with the way
// back a session has (a portal's to its own pages), not the API's
// problem+json, which a customer's frame would show as raw JSON with no
// way out. The API's unknown paths stay problem+json.
func TestConsole_UnknownPageIsAPage(t *testing.T) {
	e, _ := portalEnv(t, httpapi.ConsoleOptions{})
	b := e.browser()
	b.open(link(e, `{}`))
	for _, path := range []string{"/console/t/acme/nope", "/console/t/acme/deliveries/", "/console/nope"} {
		p := b.get(path)
		if p.status != http.StatusNotFound || !strings.HasPrefix(p.header.Get("Content-Type"), "text/html") ||
			!strings.Contains(p.body, `href="/console/"`) || strings.Contains(p.body, `href="/console/login"`) {
			t.Errorf("%s in a portal session: %d %s, want the console's 404 page leading back:\n%s", path, p.status, p.header.Get("Content-Type"), p.body)
		}
	}
	// A form's address opened with GET.
	if p := b.get("/console/logout"); p.status != http.StatusMethodNotAllowed || !strings.HasPrefix(p.header.Get("Content-Type"), "text/html") || p.header.Get("Allow") == "" {
		t.Errorf("GET of a form's address: %d %s Allow %q, want the console's 405 page with Allow", p.status, p.header.Get("Content-Type"), p.header.Get("Allow"))
	}
	// Without a session the page leads to the login, and the API's
	// unknown paths are problems as ever.
	if p := e.browser().get("/console/nope"); p.status != http.StatusNotFound || !strings.HasPrefix(p.header.Get("Content-Type"), "text/html") {
		t.Errorf("/console/nope without a session: %d %s", p.status, p.header.Get("Content-Type"))
	}
	checkProblem(t, e.do(req{method: "GET", path: "/v1/nope"}), 404, engine.CodeNotFound, "")
	checkProblem(t, e.do(req{method: "GET", path: "/consoles"}), 404, engine.CodeNotFound, "")
}
