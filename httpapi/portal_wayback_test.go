package httpapi_test

import (
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"

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
