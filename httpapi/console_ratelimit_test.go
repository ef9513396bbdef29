package httpapi_test

import (
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/storage"
)

// rateEnv is a security env whose Service has a (stopped) dispatcher
// holding every endpoint to endpointRate attempts per second.
func rateEnv(t *testing.T, endpointRate float64) *apiEnv {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	node := engine.NewNode(db, engine.NodeOptions{
		Dispatcher: engine.DispatcherOptions{EndpointRate: endpointRate},
		Service:    engine.ServiceOptions{LookupHost: publicLookup},
	})
	logs := new(syncBuffer)
	srv := httptest.NewServer(httpapi.New(node.Service, httpapi.Options{
		Tokens: []string{testToken, liveToken}, TestTokens: []string{testEnvTk}, MaxBody: maxBody,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}))
	t.Cleanup(srv.Close)
	return &apiEnv{t: t, db: db, svc: node.Service, srv: srv, logs: logs}
}

// TestConsole_EndpointRateLimit: the endpoint forms take a rate limit
// (attempts per second and burst, both optional: empty is none, an empty
// burst the default); a burst without a rate or a word is refused naming
// the field and makes nothing; the edit form shows the limit, and to an
// operator the bound that holds once [delivery] endpoint_rate caps it,
// which a portal session does not show; the list shows the limit.
func TestConsole_EndpointRateLimit(t *testing.T) {
	e := rateEnv(t, 10)
	e.fixture()
	tok := e.issue("acme", "")
	b := e.browser()
	b.mustLogin(tok.Token, "/console/t/acme/endpoints")
	list := b.get("/console/t/acme/endpoints")
	for _, want := range []string{`name="rate_per_second"`, `name="rate_burst"`} {
		if !strings.Contains(list.body, want) {
			t.Fatalf("the new endpoint form lacks %s", want)
		}
	}
	csrf := list.field(t, csrfField)
	post := func(path string, form url.Values) page {
		return b.do("POST", path, form, "Origin", e.srv.URL)
	}
	type limitJSON struct {
		PerSecond float64 `json:"per_second"`
		Burst     int     `json:"burst"`
	}
	type endpointJSON struct {
		ID        string     `json:"id"`
		URL       string     `json:"url"`
		RateLimit *limitJSON `json:"rate_limit"`
		Effective *limitJSON `json:"effective_rate_limit"`
	}
	endpoints := func() []endpointJSON {
		t.Helper()
		var eps struct{ Data []endpointJSON }
		e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints"}, 200, &eps)
		return eps.Data
	}

	form := func(rate, burst string) url.Values {
		return url.Values{"csrf": {csrf}, "url": {"https://hooks.example.com/limited"}, "type": {"*"}, "rate_per_second": {rate}, "rate_burst": {burst}}
	}
	alert := regexp.MustCompile(`<p class="error" role="alert" id="error">([^<]*)</p>`)
	for _, tc := range []struct{ rate, burst, hint string }{
		{"", "3", "a burst needs a rate"},
		{"five", "", "attempts per second must be a number"},
		{"5", "1.5", "the burst must be a whole number"},
		{"0", "", "rate_limit.per_second must be a number of attempts per second from 0.01"},
		{"5", "0", "rate_limit.burst must be a whole number of attempts from 1 to 10000"},
	} {
		p := post("/console/t/acme/endpoints", form(tc.rate, tc.burst))
		if m := alert.FindStringSubmatch(p.body); p.status != http.StatusUnprocessableEntity || m == nil || !strings.Contains(html.UnescapeString(m[1]), tc.hint) {
			t.Errorf("add with rate %q burst %q: %d %q, want 422 saying %q", tc.rate, tc.burst, p.status, m, tc.hint)
		}
	}
	if eps := endpoints(); len(eps) != 1 {
		t.Fatalf("%d endpoints after refused forms, want 1", len(eps))
	}
	if p := post("/console/t/acme/endpoints", form("5", "")); p.status != http.StatusCreated {
		t.Fatalf("add with 5 per second: %d\n%s", p.status, p.body)
	}
	eps := endpoints()
	ep := eps[len(eps)-1]
	if ep.RateLimit == nil || *ep.RateLimit != (limitJSON{5, 5}) {
		t.Fatalf("added with rate limit %+v, want 5 per second, burst 5", ep.RateLimit)
	}
	if eps[0].RateLimit != nil {
		t.Errorf("the endpoint added without a rate has %+v, want none", eps[0].RateLimit)
	}

	editPath := "/console/t/acme/endpoints/" + ep.ID + "/edit"
	effective := regexp.MustCompile(`(?s)<span id="rate-effective">(.*?)</span>`)
	edit := b.get(editPath)
	for _, want := range []string{`name="rate_per_second" type="number" min="0.01" max="10000" step="any" placeholder="no limit" value="5"`, `name="rate_burst" type="number" min="1" max="10000" step="1" placeholder="= rate" value="5"`} {
		if !strings.Contains(edit.body, want) {
			t.Errorf("the edit form lacks %s", want)
		}
	}
	if m := effective.FindStringSubmatch(edit.body); m == nil || !strings.Contains(m[1], "held to 5 per second, burst 5.") {
		t.Errorf("the edit form's bound: %q, want held to 5 per second, burst 5", m)
	}
	save := func(rate, burst string) {
		t.Helper()
		f := url.Values{"csrf": {csrf}, "url": {ep.URL}, "type": {"*"}, "ordering": {"none"}, "on_dead": {"skip"}, "rate_per_second": {rate}, "rate_burst": {burst}}
		if p := post("/console/t/acme/endpoints/"+ep.ID, f); p.status != http.StatusSeeOther {
			t.Fatalf("save with rate %q burst %q: %d\n%s", rate, burst, p.status, p.body)
		}
	}
	save("50", "40")
	var got endpointJSON
	e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints/" + ep.ID}, 200, &got)
	if got.RateLimit == nil || *got.RateLimit != (limitJSON{50, 40}) {
		t.Errorf("after saving 50 per second, burst 40: %+v", got.RateLimit)
	}
	if got.Effective == nil || *got.Effective != (limitJSON{10, 10}) {
		t.Errorf("the API's effective_rate_limit of 50 per second under endpoint_rate 10: %+v, want 10 per second, burst 10", got.Effective)
	}
	if m := effective.FindStringSubmatch(b.get(editPath).body); m == nil || !strings.Contains(m[1], "[delivery] endpoint_rate holds it to 10 per second, burst 10.") {
		t.Errorf("the edit form's bound above endpoint_rate: %q, want it capped to 10 per second, burst 10", m)
	}
	if p := b.get("/console/t/acme/endpoints"); !strings.Contains(p.body, `<small class="ep-rate">at most 50 per second</small>`) {
		t.Error("the endpoints list does not show the rate limit")
	}
	if p := post("/console/t/acme/endpoints/"+ep.ID, url.Values{"csrf": {csrf}, "url": {ep.URL}, "type": {"*"}, "ordering": {"none"}, "on_dead": {"skip"}, "rate_per_second": {"20000"}}); p.status != http.StatusUnprocessableEntity {
		t.Errorf("save with 20000 per second: %d, want 422", p.status)
	}

	// A customer in the portal has the form, not the operator's bound.
	pb := e.browser()
	pb.open(link(e, `{"return_url":"https://app.example.com/hooks"}`))
	portal := pb.get(editPath)
	if portal.status != http.StatusOK || !strings.Contains(portal.body, `name="rate_per_second"`) {
		t.Fatalf("the portal's edit form: %d, without the rate limit\n%s", portal.status, portal.body)
	}
	if strings.Contains(portal.body, "endpoint_rate") || strings.Contains(portal.body, "rate-effective") {
		t.Error("the portal's edit form shows the operator's endpoint_rate")
	}

	save("", "")
	got = endpointJSON{}
	e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints/" + ep.ID}, 200, &got)
	if got.RateLimit != nil {
		t.Errorf("after saving empty fields: %+v, want no limit", got.RateLimit)
	}
	if got.Effective == nil || *got.Effective != (limitJSON{10, 10}) {
		t.Errorf("the API's effective_rate_limit without a limit of its own: %+v, want endpoint_rate's, 10 per second, burst 10", got.Effective)
	}
	if m := effective.FindStringSubmatch(b.get(editPath).body); m == nil || !strings.Contains(m[1], "held to 10 per second, burst 10 by [delivery] endpoint_rate.") {
		t.Errorf("the edit form's bound without a limit of its own: %q, want endpoint_rate's", m)
	}
}
