package httpapi_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/storage"
)

// attemptJSON is an attempt as the API shows it.
type attemptJSON struct {
	Status          int               `json:"status"`
	Response        string            `json:"response"`
	Outcome         string            `json:"outcome"`
	ResponseHeaders map[string]string `json:"response_headers"`
}

// TestAPI_AttemptResponseHeaders: a real dispatcher attempts a delivery
// to a receiver that answers 400 with credentials in Set-Cookie,
// WWW-Authenticate and Authorization, ten headers of 1000 bytes and fifty
// small ones. The attempt keeps the first headers by name within the
// bounds, never a credential one, and the API answer and the console's
// delivery page show them with the status and the body excerpt.
func TestAPI_AttemptResponseHeaders(t *testing.T) {
	const secret = "SECRET-c00k1e"
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/plain")
		h.Add("Set-Cookie", "session="+secret+"; HttpOnly")
		h.Add("Set-Cookie", "other="+secret)
		h.Set("WWW-Authenticate", `Bearer realm="hooks", nonce="`+secret+`"`)
		h.Set("Authorization", "Bearer "+secret)
		for i := range 10 {
			h.Set(fmt.Sprintf("Long-%d", i), strings.Repeat(string(rune('a'+i)), 1000))
		}
		for i := range 50 {
			h.Set(fmt.Sprintf("X-Header-%02d", i), fmt.Sprintf("v%02d", i))
		}
		w.WriteHeader(http.StatusBadRequest) // permanent: dead after one attempt
		w.Write([]byte("no"))
	}))
	defer hook.Close()
	e := newDispatchingAPIEnv(t)
	e.must(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme"}`}, 201, nil)
	e.must(req{method: "PUT", path: "/v1/event-types/payment.succeeded", body: `{}`}, 201, nil)
	var ep endpointJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"` + hook.URL + `/in","event_types":["*"]}`}, 201, &ep)
	var ing ingestJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, &ing)
	id := ing.Deliveries[0].ID

	var d struct {
		State    string        `json:"state"`
		Attempts []attemptJSON `json:"attempts"`
	}
	for deadline := time.Now().Add(10 * time.Second); d.State != "dead"; time.Sleep(5 * time.Millisecond) { // a real receiver on loopback
		if time.Now().After(deadline) {
			t.Fatalf("delivery %s is %s after 10s, want dead", id, d.State)
		}
		e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + id}, 200, &d)
	}
	r := e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + id}, 200, nil)
	if strings.Contains(string(r.body), secret) {
		t.Errorf("the answer shows a credential header's value:\n%s", r.body)
	}
	if len(d.Attempts) != 1 {
		t.Fatalf("%d attempts, want 1", len(d.Attempts))
	}
	a := d.Attempts[0]
	if a.Status != 400 || a.Response != "no" || a.Outcome != "permanent" {
		t.Errorf("attempt: status %d, response %q, outcome %s; want 400, \"no\", permanent", a.Status, a.Response, a.Outcome)
	}

	// By name: Content-Length, Content-Type, Date (70 bytes with their
	// values), then Long-0 to Long-6, each cut to 256 bytes (262 with the
	// name: 1904 in all); Long-7 to Long-9 do not fit in 2048, and the
	// X-Header-NN that follow (14 bytes each) do, up to the 20th header.
	want := []string{"Content-Length", "Content-Type", "Date"}
	for i := range 7 {
		want = append(want, fmt.Sprintf("Long-%d", i))
	}
	for i := range 10 {
		want = append(want, fmt.Sprintf("X-Header-%02d", i))
	}
	var names []string
	total := 0
	for name, v := range a.ResponseHeaders {
		names = append(names, name)
		total += len(name) + len(v)
		if len(v) > engine.MaxResponseHeaderValue {
			t.Errorf("%s: %d bytes, want at most %d", name, len(v), engine.MaxResponseHeaderValue)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("kept headers\n\t%v\nwant\n\t%v", names, want)
	}
	if total > engine.MaxResponseHeadersBytes || len(names) > engine.MaxResponseHeaders {
		t.Errorf("kept %d headers of %d bytes, want at most %d and %d", len(names), total, engine.MaxResponseHeaders, engine.MaxResponseHeadersBytes)
	}
	if got := a.ResponseHeaders["Long-0"]; got != strings.Repeat("a", engine.MaxResponseHeaderValue) {
		t.Errorf("Long-0 = %q (%d bytes), want its first %d bytes", got, len(got), engine.MaxResponseHeaderValue)
	}
	if got := a.ResponseHeaders["Content-Type"]; got != "text/plain" {
		t.Errorf("Content-Type = %q", got)
	}
	if got := a.ResponseHeaders["X-Header-07"]; got != "v07" {
		t.Errorf("X-Header-07 = %q", got)
	}

	// The console's delivery page: the status, the headers in a
	// details element with their count, in order, and the excerpt.
	b := e.browser()
	b.mustLogin(testToken, "/console/tenants")
	p := b.get("/console/t/acme/deliveries/" + id)
	if p.status != 200 {
		t.Fatalf("delivery page: %d\n%s", p.status, p.body)
	}
	body := html.UnescapeString(p.body)
	for _, s := range []string{
		"<summary>Response headers (20)</summary>",
		"Content-Type: text/plain\n",
		"Long-0: " + strings.Repeat("a", engine.MaxResponseHeaderValue) + "\n",
		"X-Header-09: v09",
		`<pre class="excerpt">no</pre>`,
		"HTTP 400",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the delivery page lacks %q:\n%s", s, p.body)
		}
	}
	if i, j := strings.Index(body, "Date: "), strings.Index(body, "Long-0: "); i < 0 || j < 0 || i > j {
		t.Errorf("headers not in name order (Date at %d, Long-0 at %d)", i, j)
	}
	for _, s := range []string{secret, "Set-Cookie", "X-Header-10"} {
		if strings.Contains(body, s) {
			t.Errorf("the delivery page shows %q", s)
		}
	}
}

// newDispatchingAPIEnv is an apiEnv whose service runs a dispatcher that
// may deliver to loopback receivers.
func newDispatchingAPIEnv(t *testing.T) *apiEnv {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	loopback := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	disp := engine.NewDispatcher(db, engine.DispatcherOptions{Targets: loopback, Policy: engine.RetryPolicy{
		Schedule: []time.Duration{time.Second}, Deadline: time.Minute, AttemptTimeout: 10 * time.Second}})
	if err := disp.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		disp.Stop(ctx)
	})
	svc := engine.NewService(db, disp, engine.ServiceOptions{Targets: loopback, LookupHost: publicLookup})
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{Tokens: []string{testToken}, MaxBody: maxBody}))
	t.Cleanup(srv.Close)
	return &apiEnv{t: t, db: db, svc: svc, srv: srv, logs: new(syncBuffer)}
}

// TestAPI_ListDeliveriesByStatus: ?status= lists the deliveries whose
// last attempt got a status of that class, or none (no response); a
// delivery never attempted is in no class; a bad value is 422 naming
// the field.
func TestAPI_ListDeliveriesByStatus(t *testing.T) {
	e := newAPIEnv(t)
	e.fixture()
	ingest := func() string {
		t.Helper()
		var ing ingestJSON
		e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, &ing)
		return ing.Deliveries[0].ID
	}
	attempt := func(id string, status int, state engine.State) {
		t.Helper()
		at := time.Now().UTC()
		rec := engine.AttemptRecord{DeliveryID: id, Cycle: 1, State: state, LastStatus: status, At: at,
			Attempt: engine.Attempt{Cycle: 1, Number: 1, Start: at, Duration: time.Millisecond, Status: status, Outcome: engine.OutcomeRetry}}
		if state == engine.StatePending {
			rec.NextAttemptAt = at.Add(time.Hour)
		}
		if status == 0 {
			rec.Attempt.Error, rec.Reason = "timeout: no answer in 10s", "timeout: no answer in 10s"
		}
		if _, err := e.db.UpdateDelivery(context.Background(), id, func(d engine.Delivery) (engine.Delivery, error) {
			return engine.RecordAttempt(d, rec), nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	never := ingest()
	ok := ingest()
	attempt(ok, 200, engine.StateSucceeded)
	gone := ingest()
	killDelivery(t, e, gone) // 410
	busy := ingest()
	attempt(busy, 503, engine.StatePending)
	timedOut := ingest()
	attempt(timedOut, 0, engine.StatePending)

	list := func(query string) []string {
		t.Helper()
		var page struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries?" + query}, 200, &page)
		ids := []string{}
		for _, d := range page.Data {
			ids = append(ids, d.ID)
		}
		return ids
	}
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"status=2xx", []string{ok}},
		{"status=3xx", []string{}},
		{"status=4xx", []string{gone}},
		{"status=5xx", []string{busy}},
		{"status=none", []string{timedOut}},
		{"status=none&state=pending", []string{timedOut}},
		{"status=5xx&state=dead", []string{}},
		{"state=pending", []string{timedOut, busy, never}},
	} {
		if got := list(tt.query); !slices.Equal(got, tt.want) {
			t.Errorf("?%s = %v, want %v", tt.query, got, tt.want)
		}
	}
	for _, bad := range []string{"4XX", "404", "4", "xx", "1xx", "6xx", "all", "none,2xx"} {
		checkProblem(t, e.do(req{method: "GET", path: "/v1/tenants/acme/deliveries?status=" + bad}), 422, engine.CodeInvalidField, "status")
	}
}

// TestConsole_DeliveriesByStatus: the deliveries page filters by the
// class of the last attempt's status, keeps the choice in its form and
// its paging links, and says what is wrong with a bad one.
func TestConsole_DeliveriesByStatus(t *testing.T) {
	e := newConsoleEnv(t) // one delivery, dead on a 500
	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	p := b.get("/console/t/acme/deliveries?status=5xx")
	if p.status != 200 || !strings.Contains(p.body, "/console/t/acme/deliveries/"+e.delivery) {
		t.Errorf("status=5xx: %d, want the dead delivery\n%s", p.status, p.body)
	}
	for _, s := range []string{`<select name="status">`, `<option value="5xx" selected>5xx</option>`, `<option value="none">no response</option>`} {
		if !strings.Contains(p.body, s) {
			t.Errorf("the filter form lacks %s", s)
		}
	}
	for _, class := range []string{"2xx", "4xx", "none"} {
		if p := b.get("/console/t/acme/deliveries?status=" + class); p.status != 200 || strings.Contains(p.body, e.delivery) {
			t.Errorf("status=%s: %d, lists the delivery whose last attempt got a 500", class, p.status)
		}
	}
	if p := b.get("/console/t/acme/deliveries?status=500"); p.status != 422 || !strings.Contains(p.body, "status must be 2xx, 3xx, 4xx, 5xx or none") {
		t.Errorf("status=500: %d\n%s", p.status, p.body)
	}
}

// TestConsole_DeadLettersFiltered: the dead-letters page filters by
// endpoint and by the class of the last attempt's status, as the
// delivery log does, keeps the filter in its form, and answers a class
// it does not know with 422 and the reason.
func TestConsole_DeadLettersFiltered(t *testing.T) {
	e := newConsoleEnv(t) // one delivery, dead on a 500
	var other struct {
		ID string `json:"id"`
	}
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://other.example/hook","event_types":["*"],"description":"the other one"}`}, 201, &other)
	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	link := "/console/t/acme/deliveries/" + e.delivery
	for _, c := range []struct {
		query  string
		listed bool
	}{
		{"", true},
		{"?status=5xx", true},
		{"?status=4xx", false},
		{"?status=none", false},
		{"?endpoint=" + e.endpoint.ID, true},
		{"?endpoint=" + other.ID, false},
		{"?endpoint=" + e.endpoint.ID + "&status=5xx", true},
	} {
		p := b.get("/console/t/acme/dead-letters" + c.query)
		if p.status != 200 || strings.Contains(p.body, link) != c.listed {
			t.Errorf("dead-letters%s: %d, listed %v, want %v", c.query, p.status, strings.Contains(p.body, link), c.listed)
		}
	}
	p := b.get("/console/t/acme/dead-letters?status=5xx&endpoint=" + e.endpoint.ID)
	for _, s := range []string{`<option value="5xx" selected>5xx</option>`, `<option value="` + e.endpoint.ID + `" selected>`, `the other one`} {
		if !strings.Contains(p.body, s) {
			t.Errorf("the filter form lacks %s", s)
		}
	}
	if p := b.get("/console/t/acme/dead-letters?status=500"); p.status != 422 || !strings.Contains(p.body, "status must be 2xx, 3xx, 4xx, 5xx or none") {
		t.Errorf("status=500: %d\n%s", p.status, p.body)
	}
}
