package httpapi_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// TestConsole_OperationalEndpoints: an admin of the live environment
// lists, makes (seeing the secret once), disables, enables, rotates and
// deletes operational endpoints on the console; the [alerts] endpoint is
// shown as the config file's, without what the file sets; a test token,
// a tenant token and a form without its CSRF token get nothing.
func TestConsole_OperationalEndpoints(t *testing.T) {
	e := newConsoleEnv(t)
	b := e.browser()
	b.mustLogin(testToken, "/console/tenants")
	if p := b.get("/console/tenants"); !strings.Contains(p.body, `href="/console/operational-endpoints"`) {
		t.Errorf("the admin's pages do not link the operational webhooks:\n%s", p.body)
	}
	const base = "/console/operational-endpoints"
	p := b.get(base)
	if p.status != 200 || !strings.Contains(p.body, "No operational endpoints yet") {
		t.Fatalf("the operational webhooks page: %d\n%s", p.status, p.body)
	}
	csrf := p.field(t, csrfField)

	// Made: the secret is shown once.
	if p := b.do("POST", base, url.Values{"url": {"https://ops.example.com/hooks"}, "type": {"delivery.dead"}}); p.status < 400 {
		t.Errorf("a create without the CSRF token: %d", p.status)
	}
	p = b.do("POST", base, url.Values{"csrf": {csrf}, "url": {"https://ops.example.com/hooks"}, "description": {"pager"}, "type": {"delivery.dead", "endpoint.failing"}})
	secret := regexp.MustCompile(`<code id="secret">(whsec_[^<]+)</code>`).FindStringSubmatch(p.body)
	if p.status != 200 || secret == nil {
		t.Fatalf("create: %d\n%s", p.status, p.body)
	}
	var list struct {
		Data []opEndpointJSON `json:"data"`
	}
	e.must(req{method: "GET", path: "/v1/operational-endpoints"}, 200, &list)
	if len(list.Data) != 1 || list.Data[0].Description != "pager" || strings.Join(list.Data[0].EventTypes, ",") != "delivery.dead,endpoint.failing" {
		t.Fatalf("after the console's create: %+v", list.Data)
	}
	id := list.Data[0].ID
	if p := b.get(base); !strings.Contains(p.body, id) || strings.Contains(p.body, secret[1]) {
		t.Errorf("the page lists %s without its secret? \n%s", id, p.body)
	}

	// Disabled, enabled, rotated.
	p = b.do("POST", base+"/"+id+"/disable", url.Values{"csrf": {csrf}})
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), base+"?m=op-disabled") {
		t.Fatalf("disable: %d to %q", p.status, p.header.Get("Location"))
	}
	var got opEndpointJSON
	e.must(req{method: "GET", path: "/v1/operational-endpoints/" + id}, 200, &got)
	if !got.Disabled {
		t.Errorf("after the console's disable: %+v", got)
	}
	if p := b.do("POST", base+"/"+id+"/enable", url.Values{"csrf": {csrf}, "deliver_held": {"1"}}); p.status != http.StatusSeeOther {
		t.Fatalf("enable: %d", p.status)
	}
	e.must(req{method: "GET", path: "/v1/operational-endpoints/" + id}, 200, &got)
	if got.Disabled {
		t.Errorf("after the console's enable: %+v", got)
	}
	p = b.do("POST", base+"/"+id+"/rotate", url.Values{"csrf": {csrf}, "grace": {"1h"}})
	rotated := regexp.MustCompile(`<code id="secret">(whsec_[^<]+)</code>`).FindStringSubmatch(p.body)
	if p.status != 200 || rotated == nil || rotated[1] == secret[1] || !strings.Contains(p.body, "keeps signing") {
		t.Fatalf("rotate: %d\n%s", p.status, p.body)
	}

	// The [alerts] endpoint: shown as the config file's, nothing to
	// rotate or delete; the forms refuse it all the same.
	ops := engine.NewService(e.db, nil, engine.ServiceOptions{LookupHost: publicLookup})
	if err := ops.EnsureOperatorEndpoint(t.Context(), "https://ops.example.com/alerts", engine.NewSecret()); err != nil {
		t.Fatal(err)
	}
	e.must(req{method: "GET", path: "/v1/operational-endpoints"}, 200, &list)
	config := list.Data[1].ID
	p = b.get(base)
	if !strings.Contains(p.body, "config file") || strings.Contains(p.body, base+"/"+config+"/delete") || strings.Contains(p.body, base+"/"+config+"/rotate") {
		t.Errorf("the [alerts] endpoint's row:\n%s", p.body)
	}
	if p := b.do("POST", base+"/"+config+"/delete", url.Values{"csrf": {csrf}, "confirm": {"yes"}}); p.status != http.StatusConflict {
		t.Errorf("delete of the [alerts] endpoint: %d, want 409", p.status)
	}

	// Deleted, once confirmed.
	if p := b.do("POST", base+"/"+id+"/delete", url.Values{"csrf": {csrf}}); p.status < 400 {
		t.Errorf("delete without the confirm box: %d", p.status)
	}
	if p := b.do("POST", base+"/"+id+"/delete", url.Values{"csrf": {csrf}, "confirm": {"yes"}}); p.status != http.StatusSeeOther {
		t.Fatalf("delete: %d", p.status)
	}
	e.must(req{method: "GET", path: "/v1/operational-endpoints/" + id}, 404, nil)

	// Nobody else.
	for _, token := range []string{testEnvTk, e.token.Token} {
		o := e.browser()
		if p := o.login(token); p.status != http.StatusSeeOther {
			t.Fatalf("login: %d", p.status)
		}
		home := o.get(o.get("/console/").header.Get("Location"))
		if strings.Contains(home.body, `href="/console/operational-endpoints"`) {
			t.Errorf("a page of %s links the operational webhooks", token[:8])
		}
		if p := o.get(base); p.status != http.StatusForbidden {
			t.Errorf("the operational webhooks page for %s: %d, want 403", token[:8], p.status)
		}
		csrf := home.field(t, csrfField)
		if p := o.do("POST", base, url.Values{"csrf": {csrf}, "url": {"https://x.example.com"}, "type": {"*"}}); p.status != http.StatusForbidden {
			t.Errorf("a create by %s: %d, want 403", token[:8], p.status)
		}
	}
	e.must(req{method: "GET", path: "/v1/operational-endpoints"}, 200, &list)
	if len(list.Data) != 1 {
		t.Errorf("operational endpoints at the end: %+v, want the [alerts] one alone", list.Data)
	}
}
