package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/storage"
)

const (
	testToken = "s3cret-test-token"
	maxBody   = 4096
	jsonType  = "application/json"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// apiEnv is a real API over a real Service over a real store in t.TempDir.
type apiEnv struct {
	t    *testing.T
	db   *storage.DB
	svc  *engine.Service
	srv  *httptest.Server
	logs *syncBuffer
}

func newAPIEnv(t *testing.T) *apiEnv {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	svc := engine.NewService(db, nil, engine.ServiceOptions{LookupHost: publicLookup, Tasks: engine.TaskOptions{MaxPerTenant: maxTasks}}) // no DNS in tests
	t.Cleanup(func() { svc.StopTasks(context.Background()) })                                                                             // before the store closes
	logs := new(syncBuffer)
	h := httpapi.New(svc, httpapi.Options{
		Tokens:  []string{"another-token", testToken},
		MaxBody: maxBody,
		Logger:  slog.New(slog.NewTextHandler(logs, nil)),
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if strings.Contains(logs.String(), testToken) {
			t.Errorf("the token was logged: %s", logs.String())
		}
	})
	return &apiEnv{t: t, db: db, svc: svc, srv: srv, logs: logs}
}

// response is what a test needs of an HTTP response.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string { return string(r.body) }

// req is one request. A body is sent as application/json with the test
// token unless header says otherwise; a header value of "-" removes it.
type req struct {
	method, path, body string
	header             map[string]string
}

func (e *apiEnv) do(rq req) response {
	e.t.Helper()
	hr := e.request(rq)
	resp, err := e.srv.Client().Do(hr)
	if err != nil {
		e.t.Fatalf("%s %s: %v", rq.method, rq.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	// An ingest's deliveries are stored just after its answer: the
	// tests that read or change them in the store directly (e.db) find
	// them there, as every read through the API does.
	if err := e.svc.WaitFanOut(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// request returns the HTTP request do sends for rq.
func (e *apiEnv) request(rq req) *http.Request {
	e.t.Helper()
	var body io.Reader
	if rq.body != "" {
		body = strings.NewReader(rq.body)
	}
	hr, err := http.NewRequestWithContext(e.t.Context(), rq.method, e.srv.URL+rq.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+testToken)
	if rq.body != "" {
		hr.Header.Set("Content-Type", jsonType)
	}
	for k, v := range rq.header {
		if v == "-" {
			hr.Header.Del(k)
		} else {
			hr.Header.Set(k, v)
		}
	}
	return hr
}

// must does rq and fails unless it gets status; it decodes the body into v
// when v is not nil.
func (e *apiEnv) must(rq req, status int, v any) response {
	e.t.Helper()
	r := e.do(rq)
	if r.status != status {
		e.t.Fatalf("%s %s = %d %s, want %d", rq.method, rq.path, r.status, r.body, status)
	}
	if v != nil {
		if err := json.Unmarshal(r.body, v); err != nil {
			e.t.Fatalf("%s %s: decode %s: %v", rq.method, rq.path, r.body, err)
		}
	}
	return r
}

// problemBody is the problem+json body.
type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
	Field  string `json:"field"`
}

// checkProblem fails unless r is a problem with status, code and field.
func checkProblem(t *testing.T, r response, status int, code engine.Code, field string) problemBody {
	t.Helper()
	if r.status != status {
		t.Errorf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	if got, want := r.header.Get("Content-Type"), "application/problem+json"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	var p problemBody
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("problem body %s: %v", r.body, err)
	}
	if got, want := p.Code, string(code); got != want {
		t.Errorf("code = %q, want %q; detail %q", got, want, p.Detail)
	}
	if got, want := p.Field, field; got != want {
		t.Errorf("field = %q, want %q; detail %q", got, want, p.Detail)
	}
	if got, want := p.Type, "urn:webhookd:problem:"+string(code); got != want {
		t.Errorf("type = %q, want %q", got, want)
	}
	if p.Status != r.status || p.Title == "" || p.Detail == "" {
		t.Errorf("problem = %+v, status %d", p, r.status)
	}
	return p
}

// endpointJSON is an endpoint as the API shows it.
type endpointJSON struct {
	ID          string    `json:"id"`
	Tenant      string    `json:"tenant"`
	URL         string    `json:"url"`
	EventTypes  []string  `json:"event_types"`
	Description string    `json:"description"`
	Disabled    bool      `json:"disabled"`
	Created     time.Time `json:"created"`
	Updated     time.Time `json:"updated"`
	Secret      string    `json:"secret"`
}

type ingestJSON struct {
	ID         string    `json:"id"`
	Created    time.Time `json:"created"`
	Deliveries []struct {
		ID         string `json:"id"`
		EndpointID string `json:"endpoint_id"`
		State      string `json:"state"`
	} `json:"deliveries"`
}

// pendingDeliveries lists the retry index: with no dispatcher, every
// delivery ever created is still pending there.
func (e *apiEnv) pendingDeliveries() []string {
	e.t.Helper()
	var ids []string
	err := e.db.RetryIndex(context.Background(), func(re engine.RetryEntry) error {
		ids = append(ids, re.DeliveryID)
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return ids
}

// fixture makes tenant "acme", event type "payment.succeeded" and one
// endpoint subscribed to it; it returns the endpoint.
func (e *apiEnv) fixture() endpointJSON {
	e.t.Helper()
	e.must(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme"}`}, 201, nil)
	e.must(req{method: "PUT", path: "/v1/event-types/payment.succeeded", body: `{"description":"A payment went through."}`}, 201, nil)
	var ep endpointJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/in","event_types":["payment.succeeded"]}`}, 201, &ep)
	return ep
}

// snapshot is every observable piece of state the bad-input cases could
// touch.
func (e *apiEnv) snapshot() string {
	e.t.Helper()
	var b strings.Builder
	for _, p := range []string{"/v1/tenants/acme", "/v1/event-types", "/v1/tenants/acme/endpoints", "/v1/tenants/acme/dead-letters", "/v1/tenants/nobody", "/v1/tasks"} {
		r := e.do(req{method: "GET", path: p})
		b.WriteString(p + " " + http.StatusText(r.status) + " " + string(r.body) + "\n")
	}
	b.WriteString("pending " + strings.Join(e.pendingDeliveries(), ",") + "\n")
	return b.String()
}

func TestHealth(t *testing.T) {
	e := newAPIEnv(t)
	var got map[string]string
	r := e.must(req{method: "GET", path: "/healthz", header: map[string]string{"Authorization": "-"}}, 200, &got)
	if got["status"] != "ok" || len(got) != 1 {
		t.Errorf("body = %s", r.body)
	}
	if got, want := r.header.Get("Content-Type"), jsonType; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
}

// TestAPI_HappyPath walks every route in the order a sender would use them.
func TestAPI_HappyPath(t *testing.T) {
	e := newAPIEnv(t)
	var ep endpointJSON
	var ing ingestJSON

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"put tenant creates", func(t *testing.T) {
			var got engine.Tenant
			e.must(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme"}`}, 201, &got)
			if got.ID != "acme" || got.Name != "Acme" || got.Created.IsZero() {
				t.Errorf("tenant = %+v", got)
			}
		}},
		{"put tenant updates", func(t *testing.T) {
			var got engine.Tenant
			e.must(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme Inc."}`}, 200, &got)
			if got.Name != "Acme Inc." {
				t.Errorf("tenant = %+v", got)
			}
		}},
		{"put tenant empty body", func(t *testing.T) {
			var got engine.Tenant
			e.must(req{method: "PUT", path: "/v1/tenants/globex"}, 201, &got)
			if got.ID != "globex" || got.Name != "" {
				t.Errorf("tenant = %+v", got)
			}
		}},
		{"get tenant", func(t *testing.T) {
			var got engine.Tenant
			e.must(req{method: "GET", path: "/v1/tenants/acme"}, 200, &got)
			if got.ID != "acme" || got.Name != "Acme Inc." {
				t.Errorf("tenant = %+v", got)
			}
		}},
		{"put event type creates", func(t *testing.T) {
			var got engine.EventType
			e.must(req{method: "PUT", path: "/v1/event-types/payment.succeeded", body: `{"description":"Paid."}`}, 201, &got)
			if got.Name != "payment.succeeded" || got.Description != "Paid." {
				t.Errorf("event type = %+v", got)
			}
		}},
		{"put event type updates", func(t *testing.T) {
			var got engine.EventType
			e.must(req{method: "PUT", path: "/v1/event-types/payment.succeeded", body: `{"description":"A payment went through."}`}, 200, &got)
			if got.Description != "A payment went through." {
				t.Errorf("event type = %+v", got)
			}
			e.must(req{method: "PUT", path: "/v1/event-types/invoice.paid"}, 201, nil)
		}},
		{"list event types", func(t *testing.T) {
			var got struct{ Data []engine.EventType }
			e.must(req{method: "GET", path: "/v1/event-types"}, 200, &got)
			var names []string
			for _, et := range got.Data {
				names = append(names, et.Name)
			}
			if want := []string{"invoice.paid", "payment.succeeded"}; !slices.Equal(names, want) {
				t.Errorf("names = %q, want %q", names, want)
			}
		}},
		{"create endpoint", func(t *testing.T) {
			r := e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/in","event_types":["payment.succeeded"],"description":"main"}`}, 201, &ep)
			if !strings.HasPrefix(ep.ID, "ep_") || ep.Tenant != "acme" || ep.URL != "https://hooks.example.com/in" ||
				!slices.Equal(ep.EventTypes, []string{"payment.succeeded"}) || ep.Description != "main" || ep.Disabled {
				t.Errorf("endpoint = %+v", ep)
			}
			if !strings.HasPrefix(ep.Secret, "whsec_") {
				t.Errorf("secret = %q, want whsec_...", ep.Secret)
			}
			if got, want := r.header.Get("Location"), "/v1/tenants/acme/endpoints/"+ep.ID; got != want {
				t.Errorf("Location = %q, want %q", got, want)
			}
		}},
		{"list endpoints", func(t *testing.T) {
			var got struct{ Data []endpointJSON }
			e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints"}, 200, &got)
			if len(got.Data) != 1 || got.Data[0].ID != ep.ID {
				t.Errorf("endpoints = %+v", got.Data)
			}
			var empty map[string]json.RawMessage
			e.must(req{method: "GET", path: "/v1/tenants/globex/endpoints"}, 200, &empty)
			if got := string(empty["data"]); got != "[]" {
				t.Errorf("empty list data = %s, want []", got)
			}
		}},
		{"get endpoint", func(t *testing.T) {
			var got endpointJSON
			e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints/" + ep.ID}, 200, &got)
			if got.ID != ep.ID || got.URL != ep.URL {
				t.Errorf("endpoint = %+v", got)
			}
		}},
		{"patch endpoint", func(t *testing.T) {
			var got endpointJSON
			e.must(req{method: "PATCH", path: "/v1/tenants/acme/endpoints/" + ep.ID, body: `{"description":"primary","event_types":["payment.succeeded","invoice.paid"]}`}, 200, &got)
			if got.Description != "primary" || !slices.Equal(got.EventTypes, []string{"payment.succeeded", "invoice.paid"}) || got.URL != ep.URL {
				t.Errorf("endpoint = %+v", got)
			}
		}},
		{"ingest", func(t *testing.T) {
			r := e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{"amount": 1299, "currency":"eur"}}`}, 202, &ing)
			if !strings.HasPrefix(ing.ID, "evt_") || ing.Created.IsZero() {
				t.Errorf("ingest = %+v", ing)
			}
			if len(ing.Deliveries) != 1 || ing.Deliveries[0].EndpointID != ep.ID || ing.Deliveries[0].State != "pending" {
				t.Errorf("deliveries = %+v", ing.Deliveries)
			}
			if r.header.Get("Idempotent-Replayed") != "" {
				t.Errorf("Idempotent-Replayed set on a first ingest")
			}
		}},
		{"get event", func(t *testing.T) {
			var got struct {
				Event      json.RawMessage
				Deliveries []engine.Delivery
			}
			e.must(req{method: "GET", path: "/v1/tenants/acme/events/" + ing.ID}, 200, &got)
			var env struct {
				ID, Type, APIVersion string
				Created              time.Time
				Data                 json.RawMessage
			}
			if err := json.Unmarshal(got.Event, &env); err != nil {
				t.Fatal(err)
			}
			if env.ID != ing.ID || env.Type != "payment.succeeded" || !env.Created.Equal(ing.Created) ||
				string(env.Data) != `{"amount":1299,"currency":"eur"}` {
				t.Errorf("event = %s", got.Event)
			}
			if len(got.Deliveries) != 1 || got.Deliveries[0].ID != ing.Deliveries[0].ID || got.Deliveries[0].EventID != ing.ID {
				t.Errorf("deliveries = %+v", got.Deliveries)
			}
		}},
		{"get delivery", func(t *testing.T) {
			var got engine.Delivery
			r := e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + ing.Deliveries[0].ID}, 200, &got)
			if got.ID != ing.Deliveries[0].ID || got.State != engine.StatePending || got.EndpointID != ep.ID || got.NextAttemptAt.IsZero() {
				t.Errorf("delivery = %+v", got)
			}
			var raw map[string]json.RawMessage
			json.Unmarshal(r.body, &raw)
			for _, k := range []string{"attempts", "replays"} {
				if got := string(raw[k]); got != "[]" {
					t.Errorf("%s = %s, want []", k, got)
				}
			}
		}},
		{"replay", func(t *testing.T) {
			var got engine.Delivery
			e.must(req{method: "POST", path: "/v1/tenants/acme/deliveries/" + ing.Deliveries[0].ID + "/replay"}, 202, &got)
			if got.State != engine.StatePending || got.Cycle != 2 || len(got.Replays) != 1 || got.Replays[0].By != "admin" {
				t.Errorf("delivery = %+v", got)
			}
			var again engine.Delivery
			e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + ing.Deliveries[0].ID}, 200, &again)
			if len(again.Replays) != 1 || again.Cycle != 2 {
				t.Errorf("replay not recorded: %+v", again)
			}
		}},
		{"dead letters empty", func(t *testing.T) {
			r := e.must(req{method: "GET", path: "/v1/tenants/acme/dead-letters?limit=10"}, 200, nil)
			if got, want := strings.TrimSpace(string(r.body)), `{"data":[],"next_cursor":null,"has_more":false}`; got != want {
				t.Errorf("body = %s, want %s", got, want)
			}
		}},
		{"delete endpoint", func(t *testing.T) {
			r := e.must(req{method: "DELETE", path: "/v1/tenants/acme/endpoints/" + ep.ID}, 204, nil)
			if len(r.body) != 0 {
				t.Errorf("body = %q, want none", r.body)
			}
			checkProblem(t, e.do(req{method: "GET", path: "/v1/tenants/acme/endpoints/" + ep.ID}), 404, engine.CodeEndpointNotFound, "id")
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			t.FailNow() // later steps build on this one
		}
	}
}

// TestAPI_SecretShownOnce checks the signing secret is in the create
// response and in no other response.
func TestAPI_SecretShownOnce(t *testing.T) {
	e := newAPIEnv(t)
	ep := e.fixture()
	if !strings.HasPrefix(ep.Secret, "whsec_") {
		t.Fatalf("create response secret = %q", ep.Secret)
	}
	ing := e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, nil)
	var in ingestJSON
	json.Unmarshal(ing.body, &in)

	for _, rq := range []req{
		{method: "GET", path: "/v1/tenants/acme/endpoints"},
		{method: "GET", path: "/v1/tenants/acme/endpoints/" + ep.ID},
		{method: "PATCH", path: "/v1/tenants/acme/endpoints/" + ep.ID, body: `{"disabled":true}`},
		{method: "GET", path: "/v1/tenants/acme/events/" + in.ID},
		{method: "GET", path: "/v1/tenants/acme/deliveries/" + in.Deliveries[0].ID},
	} {
		t.Run(rq.method+" "+rq.path, func(t *testing.T) {
			r := e.do(rq)
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if bytes.Contains(r.body, []byte(ep.Secret)) || bytes.Contains(r.body, []byte("whsec_")) || bytes.Contains(r.body, []byte(`"secret"`)) {
				t.Errorf("response shows a secret: %s", r.body)
			}
		})
	}
	if strings.Contains(e.logs.String(), ep.Secret) {
		t.Errorf("secret logged")
	}
}

// TestAPI_BadInput sends each bad request and checks its problem and that
// it changed nothing.
func TestAPI_BadInput(t *testing.T) {
	e := newAPIEnv(t)
	ep := e.fixture()
	epPath := "/v1/tenants/acme/endpoints/" + ep.ID
	big := `{"type":"payment.succeeded","data":"` + strings.Repeat("x", maxBody) + `"}`
	noAuth := map[string]string{"Authorization": "-"}

	tests := []struct {
		name   string
		rq     req
		status int
		code   engine.Code
		field  string
		detail string // substring, when set
		header [2]string
	}{
		// Malformed JSON.
		{"ingest syntax error", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{"a":}}`}, 400, engine.CodeInvalidJSON, "", "byte offset 40", [2]string{}},
		{"ingest truncated", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{`}, 400, engine.CodeInvalidJSON, "", "byte offset", [2]string{}},
		{"ingest not json", req{method: "POST", path: "/v1/tenants/acme/events", body: `type=payment.succeeded`}, 400, engine.CodeInvalidJSON, "", "", [2]string{}},
		{"ingest array", req{method: "POST", path: "/v1/tenants/acme/events", body: `[{"type":"payment.succeeded","data":{}}]`}, 400, engine.CodeInvalidJSON, "", "JSON object", [2]string{}},
		{"ingest trailing data", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}} {"type":"payment.succeeded","data":{}}`}, 400, engine.CodeInvalidJSON, "", "after the JSON object", [2]string{}},
		{"ingest empty body", req{method: "POST", path: "/v1/tenants/acme/events", header: map[string]string{"Content-Type": jsonType}}, 400, engine.CodeInvalidJSON, "", "required", [2]string{}},
		{"endpoint syntax error", req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url": "https://x.example/h",}`}, 400, engine.CodeInvalidJSON, "", "byte offset", [2]string{}},
		{"patch empty body", req{method: "PATCH", path: epPath}, 400, engine.CodeInvalidJSON, "", "", [2]string{}},
		{"tenant syntax error", req{method: "PUT", path: "/v1/tenants/acme", body: `{"name": "Evil"`}, 400, engine.CodeInvalidJSON, "", "", [2]string{}},

		// Unknown fields.
		{"endpoint unknown field", req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://x.example/h","event_types":["*"],"signing_key":"whsec_AAAA"}`}, 422, engine.CodeInvalidField, "signing_key", "", [2]string{}},
		{"endpoint secret too short", req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://x.example/h","event_types":["*"],"secret":"whsec_AAAA"}`}, 422, engine.CodeInvalidField, "secret", "", [2]string{}},
		{"ingest unknown field", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{},"idempotency_key":"k"}`}, 422, engine.CodeInvalidField, "idempotency_key", "", [2]string{}},
		{"patch unknown field", req{method: "PATCH", path: epPath, body: `{"id":"ep_x"}`}, 422, engine.CodeInvalidField, "id", "", [2]string{}},
		{"tenant unknown field", req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Evil","id":"x"}`}, 422, engine.CodeInvalidField, "id", "", [2]string{}},

		// Wrong types.
		{"endpoint url number", req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":42,"event_types":["*"]}`}, 422, engine.CodeInvalidField, "url", "must be a string", [2]string{}},
		{"endpoint event_types string", req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://x.example/h","event_types":"*"}`}, 422, engine.CodeInvalidField, "event_types", "must be an array", [2]string{}},
		{"patch disabled string", req{method: "PATCH", path: epPath, body: `{"disabled":"yes"}`}, 422, engine.CodeInvalidField, "disabled", "must be a boolean", [2]string{}},
		{"ingest type number", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":1,"data":{}}`}, 422, engine.CodeInvalidField, "type", "", [2]string{}},
		{"event type description bool", req{method: "PUT", path: "/v1/event-types/payment.succeeded", body: `{"description":true}`}, 422, engine.CodeInvalidField, "description", "", [2]string{}},

		// Bad values (from the engine).
		{"ingest unknown event type", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.refunded","data":{}}`}, 422, engine.CodeUnknownEventType, "type", "add it with PUT /v1/event-types/payment.refunded", [2]string{}},
		{"ingest misspelled event type", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeded","data":{}}`}, 422, engine.CodeUnknownEventType, "type", `did you mean "payment.succeeded"?`, [2]string{}},
		{"endpoint misspelled event type", req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://x.example/h","event_types":["payment.suceeded"]}`}, 422, engine.CodeUnknownEventType, "event_types[0]", `did you mean "payment.succeeded"?`, [2]string{}},
		{"endpoint url without scheme", req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"hooks.example.com/in","event_types":["*"]}`}, 422, engine.CodeInvalidField, "url", "url has no scheme: write it whole, like https://hooks.example.com/in", [2]string{}},
		{"endpoint url host and port without scheme", req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"localhost:8080/in","event_types":["*"]}`}, 422, engine.CodeInvalidField, "url", "url has no scheme", [2]string{}},
		{"ingest bad type name", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"Payment","data":{}}`}, 422, engine.CodeInvalidField, "type", "", [2]string{}},
		{"ingest no type", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"data":{}}`}, 422, engine.CodeInvalidField, "type", "", [2]string{}},
		{"ingest no data", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded"}`}, 422, engine.CodeInvalidField, "data", "", [2]string{}},
		{"ingest long idempotency key", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`, header: map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}}, 422, engine.CodeInvalidField, "Idempotency-Key", "", [2]string{}},
		{"endpoint unknown event type", req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://x.example/h","event_types":["payment.refunded"]}`}, 422, engine.CodeUnknownEventType, "event_types[0]", "", [2]string{}},
		{"endpoint bad url", req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"ftp://x.example/h","event_types":["*"]}`}, 422, engine.CodeInvalidField, "url", "", [2]string{}},
		{"endpoint no event types", req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://x.example/h"}`}, 422, engine.CodeInvalidField, "event_types", "", [2]string{}},
		{"patch bad url", req{method: "PATCH", path: epPath, body: `{"url":"https://user:pw@x.example/h"}`}, 422, engine.CodeInvalidField, "url", "", [2]string{}},
		{"bad tenant id", req{method: "PUT", path: "/v1/tenants/-acme", body: `{"name":"x"}`}, 422, engine.CodeInvalidField, "tenant", "", [2]string{}},
		{"bad event type name", req{method: "PUT", path: "/v1/event-types/Payment"}, 422, engine.CodeInvalidField, "type", "", [2]string{}},

		// Auth.
		{"missing auth", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`, header: noAuth}, 401, engine.CodeUnauthorized, "", "missing or invalid bearer token", [2]string{"WWW-Authenticate", "Bearer"}},
		{"wrong token", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`, header: map[string]string{"Authorization": "Bearer " + testToken + "x"}}, 401, engine.CodeUnauthorized, "", "missing or invalid bearer token", [2]string{"WWW-Authenticate", "Bearer"}},
		{"basic scheme", req{method: "GET", path: "/v1/tenants/acme", header: map[string]string{"Authorization": "Basic " + testToken}}, 401, engine.CodeUnauthorized, "", "", [2]string{"WWW-Authenticate", "Bearer"}},
		{"empty bearer", req{method: "GET", path: "/v1/event-types", header: map[string]string{"Authorization": "Bearer "}}, 401, engine.CodeUnauthorized, "", "", [2]string{}},
		{"auth before body", req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Evil"}`, header: noAuth}, 401, engine.CodeUnauthorized, "", "", [2]string{}},

		// Size and media type.
		{"oversize ingest", req{method: "POST", path: "/v1/tenants/acme/events", body: big}, 413, engine.CodeBodyTooLarge, "", "larger than 4096 bytes, the bound set by [ingest] max_body", [2]string{}},
		{"oversize endpoint", req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://x.example/` + strings.Repeat("a", maxBody) + `","event_types":["*"]}`}, 413, engine.CodeBodyTooLarge, "", "", [2]string{}},
		{"text/plain ingest", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`, header: map[string]string{"Content-Type": "text/plain"}}, 415, engine.CodeUnsupportedMedia, "Content-Type", "", [2]string{}},
		{"no content type ingest", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`, header: map[string]string{"Content-Type": "-"}}, 415, engine.CodeUnsupportedMedia, "Content-Type", "", [2]string{}},
		{"form tenant", req{method: "PUT", path: "/v1/tenants/acme", body: `name=Evil`, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 415, engine.CodeUnsupportedMedia, "Content-Type", "", [2]string{}},

		// Not found.
		{"ingest unknown tenant", req{method: "POST", path: "/v1/tenants/nobody/events", body: `{"type":"payment.succeeded","data":{}}`}, 404, engine.CodeTenantNotFound, "tenant", "", [2]string{}},
		{"get unknown tenant", req{method: "GET", path: "/v1/tenants/nobody"}, 404, engine.CodeTenantNotFound, "tenant", "", [2]string{}},
		{"endpoint unknown tenant", req{method: "POST", path: "/v1/tenants/nobody/endpoints", body: `{"url":"https://x.example/h","event_types":["*"]}`}, 404, engine.CodeTenantNotFound, "tenant", "", [2]string{}},
		{"list endpoints unknown tenant", req{method: "GET", path: "/v1/tenants/nobody/endpoints"}, 404, engine.CodeTenantNotFound, "tenant", "", [2]string{}},
		{"dead letters unknown tenant", req{method: "GET", path: "/v1/tenants/nobody/dead-letters"}, 404, engine.CodeTenantNotFound, "tenant", "", [2]string{}},
		{"unknown endpoint", req{method: "GET", path: "/v1/tenants/acme/endpoints/ep_00000000000000000000000000"}, 404, engine.CodeEndpointNotFound, "id", "", [2]string{}},
		{"malformed endpoint id", req{method: "DELETE", path: "/v1/tenants/acme/endpoints/nope"}, 404, engine.CodeEndpointNotFound, "id", "", [2]string{}},
		{"endpoint of another tenant", req{method: "GET", path: "/v1/tenants/nobody/endpoints/" + ep.ID}, 404, engine.CodeEndpointNotFound, "id", "", [2]string{}},
		{"unknown event", req{method: "GET", path: "/v1/tenants/acme/events/evt_00000000000000000000000000"}, 404, engine.CodeEventNotFound, "id", "", [2]string{}},
		{"unknown delivery", req{method: "GET", path: "/v1/tenants/acme/deliveries/dlv_00000000000000000000000000"}, 404, engine.CodeDeliveryNotFound, "id", "", [2]string{}},
		{"replay unknown delivery", req{method: "POST", path: "/v1/tenants/acme/deliveries/dlv_00000000000000000000000000/replay"}, 404, engine.CodeDeliveryNotFound, "id", "", [2]string{}},
		{"unknown route", req{method: "GET", path: "/v1/nope"}, 404, engine.CodeNotFound, "", "/v1/nope", [2]string{}},
		{"unknown root route", req{method: "GET", path: "/", header: noAuth}, 404, engine.CodeNotFound, "", "", [2]string{}},
		{"trailing slash", req{method: "GET", path: "/v1/tenants/acme/"}, 404, engine.CodeNotFound, "", "", [2]string{}},

		// Wrong method.
		{"patch tenant", req{method: "PATCH", path: "/v1/tenants/acme", body: `{}`}, 405, engine.CodeMethodNotAllowed, "", "", [2]string{"Allow", "DELETE, GET, HEAD, OPTIONS, PUT"}},
		{"post event types", req{method: "POST", path: "/v1/event-types", body: `{}`}, 405, engine.CodeMethodNotAllowed, "", "", [2]string{"Allow", "GET, HEAD, OPTIONS"}},
		{"get replay", req{method: "GET", path: "/v1/tenants/acme/deliveries/dlv_00000000000000000000000000/replay"}, 405, engine.CodeMethodNotAllowed, "", "", [2]string{"Allow", "OPTIONS, POST"}},
		{"post healthz", req{method: "POST", path: "/healthz", header: noAuth}, 405, engine.CodeMethodNotAllowed, "", "", [2]string{"Allow", "GET, HEAD, OPTIONS"}},

		// Query parameters.
		{"limit zero", req{method: "GET", path: "/v1/tenants/acme/dead-letters?limit=0"}, 422, engine.CodeInvalidField, "limit", "", [2]string{}},
		{"limit word", req{method: "GET", path: "/v1/tenants/acme/dead-letters?limit=ten"}, 422, engine.CodeInvalidField, "limit", "", [2]string{}},
		{"limit too big", req{method: "GET", path: "/v1/tenants/acme/dead-letters?limit=1001"}, 422, engine.CodeInvalidField, "limit", "", [2]string{}},
		{"limit negative", req{method: "GET", path: "/v1/tenants/acme/dead-letters?limit=-5"}, 422, engine.CodeInvalidField, "limit", "", [2]string{}},
		{"malformed type filter", req{method: "GET", path: "/v1/tenants/acme/deliveries?type=Payment"}, 422, engine.CodeInvalidField, "type", "", [2]string{}},
		{"unknown list parameter", req{method: "GET", path: "/v1/tenants/acme/deliveries?iterator=abc"}, 400, engine.CodeUnknownParameter, "iterator", "takes state, type, endpoint, status, since, until, limit, cursor, channel", [2]string{}},
		{"misspelled filter", req{method: "GET", path: "/v1/tenants/acme/dead-letters?limt=5"}, 400, engine.CodeUnknownParameter, "limt", "takes limit, cursor", [2]string{}},
		{"ingest with a query", req{method: "POST", path: "/v1/tenants/acme/events?dry_run=true", body: `{"type":"payment.succeeded","data":{}}`}, 400, engine.CodeUnknownParameter, "dry_run", "takes none", [2]string{}},
		{"delete with a misspelled force", req{method: "DELETE", path: "/v1/tenants/acme?forced=true"}, 400, engine.CodeUnknownParameter, "forced", "takes force", [2]string{}},
		{"liveness with a query", req{method: "GET", path: "/healthz?verbose=1", header: noAuth}, 400, engine.CodeUnknownParameter, "verbose", "takes none", [2]string{}},
		{"readiness with a query", req{method: "GET", path: "/readyz?full", header: noAuth}, 400, engine.CodeUnknownParameter, "full", "takes none", [2]string{}},
		{"unknown parameter, no token", req{method: "GET", path: "/v1/tenants/acme/deliveries?iterator=abc", header: noAuth}, 401, engine.CodeUnauthorized, "", "", [2]string{}},
		// A parameter given twice: Svix's lists take ?event_types=a&event_types=b,
		// and a client used to that would otherwise get type a's alone.
		{"since after until", req{method: "GET", path: "/v1/tenants/acme/deliveries?since=2026-12-02T15:00:00Z&until=2026-12-02T14:00:00Z"}, 422, engine.CodeInvalidField, "until", "after since", [2]string{}},
		{"since equal to until", req{method: "GET", path: "/v1/tenants/acme/deliveries?since=2026-12-02T14:00:00Z&until=2026-12-02T14:00:00Z"}, 422, engine.CodeInvalidField, "until", "after since", [2]string{}},
		{"type twice", req{method: "GET", path: "/v1/tenants/acme/deliveries?type=payment.succeeded&type=payment.failed"}, 422, engine.CodeInvalidField, "type", "given 2 times", [2]string{}},
		{"state twice", req{method: "GET", path: "/v1/tenants/acme/deliveries?state=dead&state=failed"}, 422, engine.CodeInvalidField, "state", "given 2 times", [2]string{}},
		{"limit twice", req{method: "GET", path: "/v1/tenants/acme/dead-letters?limit=1&limit=1001"}, 422, engine.CodeInvalidField, "limit", "given 2 times", [2]string{}},
		{"cursor twice in the feed", req{method: "GET", path: "/v1/tenants/acme/events?cursor=1&cursor=2"}, 422, engine.CodeInvalidField, "cursor", "given 2 times", [2]string{}},
		{"force twice", req{method: "DELETE", path: "/v1/tenants/acme?force=false&force=true"}, 422, engine.CodeInvalidField, "force", "given 2 times", [2]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.snapshot()
			r := e.do(tt.rq)
			p := checkProblem(t, r, tt.status, tt.code, tt.field)
			if !strings.Contains(p.Detail, tt.detail) {
				t.Errorf("detail = %q, want it to contain %q", p.Detail, tt.detail)
			}
			if h := tt.header; h[0] != "" {
				if got := r.header.Get(h[0]); got != h[1] {
					t.Errorf("%s = %q, want %q", h[0], got, h[1])
				}
			}
			if after := e.snapshot(); after != before {
				t.Errorf("state changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	t.Run("no events or deliveries", func(t *testing.T) {
		if got := e.pendingDeliveries(); len(got) != 0 {
			t.Errorf("deliveries after rejected ingests: %q", got)
		}
		var eps struct{ Data []endpointJSON }
		e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints"}, 200, &eps)
		if len(eps.Data) != 1 || eps.Data[0].ID != ep.ID || eps.Data[0].Disabled || eps.Data[0].Description != "" {
			t.Errorf("endpoints after rejected requests: %+v", eps.Data)
		}
	})
	if strings.Contains(e.logs.String(), "level=ERROR") {
		t.Errorf("client errors were logged as internal: %s", e.logs.String())
	}
}

// TestAPI_ListsPage: every listing has one shape (data, next_cursor,
// has_more) and one cursor parameter; the catalogue, a tenant's
// endpoints and the tenants (GET /v1/tenants, admin) page by limit and
// cursor like the delivery log, each item once, in ID order.
func TestAPI_ListsPage(t *testing.T) {
	e := newAPIEnv(t)
	e.fixture()
	for _, name := range []string{"invoice.paid", "order.created", "order.shipped", "refund.issued"} {
		e.must(req{method: "PUT", path: "/v1/event-types/" + name, body: `{}`}, 201, nil)
	}
	for i := range 4 {
		e.must(req{method: "PUT", path: fmt.Sprintf("/v1/tenants/t%d", i), body: `{}`}, 201, nil)
		e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/in","event_types":["*"]}`}, 201, nil)
	}
	walk := func(path, key string) []string {
		t.Helper()
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatalf("%s: more than 10 pages", path)
			}
			var page struct {
				Data       []map[string]any `json:"data"`
				NextCursor *string          `json:"next_cursor"`
				HasMore    *bool            `json:"has_more"`
			}
			p := path + "?limit=2"
			if cursor != "" {
				p += "&cursor=" + url.QueryEscape(cursor)
			}
			e.must(req{method: "GET", path: p}, 200, &page)
			if page.HasMore == nil || len(page.Data) > 2 {
				t.Fatalf("%s: %d items, has_more %v", p, len(page.Data), page.HasMore)
			}
			for _, it := range page.Data {
				got = append(got, it[key].(string))
			}
			if !*page.HasMore {
				if page.NextCursor != nil {
					t.Errorf("%s: the last page has next_cursor %q", p, *page.NextCursor)
				}
				return got
			}
			if page.NextCursor == nil || *page.NextCursor == "" {
				t.Fatalf("%s: has_more without next_cursor", p)
			}
			cursor = *page.NextCursor
		}
	}
	for _, tc := range []struct {
		path, key string
		want      int
	}{
		{"/v1/event-types", "name", 5},
		{"/v1/tenants/acme/endpoints", "id", 5},
		{"/v1/tenants", "id", 5},
	} {
		got := walk(tc.path, tc.key)
		if len(got) != tc.want || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Errorf("%s paged through %v; want %d, each once, in order", tc.path, got, tc.want)
		}
	}
	checkProblem(t, e.do(req{method: "GET", path: "/v1/tenants?limit=1001"}), 422, engine.CodeInvalidField, "limit")

	// The feed takes cursor= too, and says where to resume.
	for range 3 {
		e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, nil)
	}
	var feed struct {
		Data       []json.RawMessage `json:"data"`
		NextCursor string            `json:"next_cursor"`
		HasMore    bool              `json:"has_more"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/events?limit=2"}, 200, &feed)
	if len(feed.Data) != 2 || !feed.HasMore || feed.NextCursor == "" {
		t.Fatalf("feed page 1: %d events, has_more %v, next %q", len(feed.Data), feed.HasMore, feed.NextCursor)
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/events?limit=2&cursor=" + feed.NextCursor}, 200, &feed)
	if len(feed.Data) != 1 || feed.HasMore || feed.NextCursor == "" {
		t.Errorf("feed page 2: %d events, has_more %v, next %q; want 1, false, where to resume", len(feed.Data), feed.HasMore, feed.NextCursor)
	}
	checkProblem(t, e.do(req{method: "GET", path: "/v1/tenants/acme/events?after=" + feed.NextCursor}), 400, engine.CodeUnknownParameter, "after")
	checkProblem(t, e.do(req{method: "GET", path: "/v1/tenants/acme/events?cursor=nope"}), 422, engine.CodeInvalidField, "cursor")
}

func TestAPI_Idempotency(t *testing.T) {
	e := newAPIEnv(t)
	e.fixture()
	key := map[string]string{"Idempotency-Key": "order-1234"}
	body := `{"type":"payment.succeeded","data":{"amount":100}}`

	var first ingestJSON
	r := e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: body, header: key}, 202, &first)
	if r.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("first ingest marked as replayed")
	}
	if len(first.Deliveries) != 1 {
		t.Fatalf("deliveries = %+v", first.Deliveries)
	}

	t.Run("same key same body", func(t *testing.T) {
		// Whitespace differs; the data is the same JSON.
		var again ingestJSON
		r := e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"data": {"amount": 100}, "type": "payment.succeeded"}`, header: key}, 202, &again)
		if got, want := r.header.Get("Idempotent-Replayed"), "true"; got != want {
			t.Errorf("Idempotent-Replayed = %q, want %q", got, want)
		}
		if again.ID != first.ID || !again.Created.Equal(first.Created) {
			t.Errorf("replayed ingest = %+v, want id %s", again, first.ID)
		}
		if len(again.Deliveries) != 1 || again.Deliveries[0].ID != first.Deliveries[0].ID {
			t.Errorf("replayed deliveries = %+v, want %+v", again.Deliveries, first.Deliveries)
		}
		if got := e.pendingDeliveries(); len(got) != 1 {
			t.Errorf("pending deliveries = %q, want one", got)
		}
	})
	t.Run("same key other body", func(t *testing.T) {
		r := e.do(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{"amount":200}}`, header: key})
		checkProblem(t, r, 409, engine.CodeIdempotencyConflict, "Idempotency-Key")
		if got := e.pendingDeliveries(); len(got) != 1 {
			t.Errorf("pending deliveries = %q, want one", got)
		}
	})
	t.Run("other key", func(t *testing.T) {
		var other ingestJSON
		r := e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: body, header: map[string]string{"Idempotency-Key": "order-1235"}}, 202, &other)
		if other.ID == first.ID || r.header.Get("Idempotent-Replayed") != "" {
			t.Errorf("other key ingest = %+v replayed %q", other, r.header.Get("Idempotent-Replayed"))
		}
	})
	t.Run("no key", func(t *testing.T) {
		var a, b ingestJSON
		e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: body}, 202, &a)
		e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: body}, 202, &b)
		if a.ID == b.ID {
			t.Errorf("two ingests without a key got one id %s", a.ID)
		}
	})
	t.Run("rejected ingest stores no key", func(t *testing.T) {
		k := map[string]string{"Idempotency-Key": "order-9"}
		checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.refunded","data":{}}`, header: k}), 422, engine.CodeUnknownEventType, "type")
		r := e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: body, header: k}, 202, nil)
		if r.header.Get("Idempotent-Replayed") != "" {
			t.Errorf("a rejected ingest left its key behind")
		}
	})
}

// TestAPI_DeadLetters lists dead deliveries, made dead through the store's
// own RecordAttempt as the dispatcher would.
func TestAPI_DeadLetters(t *testing.T) {
	e := newAPIEnv(t)
	e.fixture()
	var ids []string
	for range 3 {
		var ing ingestJSON
		e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, &ing)
		ids = append(ids, ing.Deliveries[0].ID)
	}
	now := time.Now().UTC()
	for i, id := range ids[:2] {
		at := now.Add(time.Duration(i) * time.Second)
		rec := engine.AttemptRecord{
			DeliveryID: id, Cycle: 1,
			Attempt: engine.Attempt{Cycle: 1, Number: 1, Start: at, Status: 410, Outcome: engine.OutcomePermanent},
			State:   engine.StateDead, Reason: "endpoint answered 410", LastStatus: 410, At: at,
		}
		_, err := e.db.UpdateDelivery(context.Background(), id, func(d engine.Delivery) (engine.Delivery, error) { return engine.RecordAttempt(d, rec), nil })
		if err != nil {
			t.Fatal(err)
		}
	}

	type page struct {
		Data       []engine.Delivery `json:"data"`
		NextCursor string            `json:"next_cursor"`
	}
	t.Run("all", func(t *testing.T) {
		var got page
		e.must(req{method: "GET", path: "/v1/tenants/acme/dead-letters"}, 200, &got)
		if len(got.Data) != 2 || got.Data[0].ID != ids[0] || got.Data[1].ID != ids[1] || got.NextCursor != "" {
			t.Fatalf("page = %+v", got)
		}
		if d := got.Data[0]; d.State != engine.StateDead || d.Reason != "endpoint answered 410" || len(d.Attempts) != 1 {
			t.Errorf("dead letter = %+v", d)
		}
	})
	t.Run("paged", func(t *testing.T) {
		var seen []string
		path := "/v1/tenants/acme/dead-letters?limit=1"
		for range 5 {
			var got page
			e.must(req{method: "GET", path: path}, 200, &got)
			for _, d := range got.Data {
				seen = append(seen, d.ID)
			}
			if got.NextCursor == "" {
				break
			}
			path = "/v1/tenants/acme/dead-letters?limit=1&cursor=" + got.NextCursor
		}
		if !slices.Equal(seen, ids[:2]) {
			t.Errorf("paged = %q, want %q", seen, ids[:2])
		}
	})
	t.Run("replay leaves the dead letters", func(t *testing.T) {
		var d engine.Delivery
		e.must(req{method: "POST", path: "/v1/tenants/acme/deliveries/" + ids[0] + "/replay"}, 202, &d)
		if d.State != engine.StatePending || len(d.Replays) != 1 || d.Replays[0].By != "admin" || d.Cycle != 2 {
			t.Errorf("replayed = %+v", d)
		}
		var got page
		e.must(req{method: "GET", path: "/v1/tenants/acme/dead-letters"}, 200, &got)
		if len(got.Data) != 1 || got.Data[0].ID != ids[1] {
			t.Errorf("dead letters after replay = %+v", got.Data)
		}
	})
}

// TestNew_NoTokens checks that with no token configured nothing under /v1
// is reachable, not even with an empty bearer.
func TestNew_NoTokens(t *testing.T) {
	h := httpapi.New(nil, httpapi.Options{Tokens: []string{""}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer  "} {
		rq, _ := http.NewRequest("GET", srv.URL+"/v1/event-types", nil)
		if auth != "" {
			rq.Header.Set("Authorization", auth)
		}
		resp, err := srv.Client().Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got, want := resp.StatusCode, http.StatusUnauthorized; got != want {
			t.Errorf("Authorization %q: status = %d, want %d", auth, got, want)
		}
	}
}

// TestAPI_DurationsInBodies: a duration in a body is a Go duration
// string or a whole number of seconds (name_seconds), one or the other.
func TestAPI_DurationsInBodies(t *testing.T) {
	e := newAPIEnv(t)
	ep := e.fixture()
	rotate := "/v1/tenants/acme/endpoints/" + ep.ID + "/secret/rotate"
	var rot struct {
		Expires time.Time `json:"previous_secret_expires"`
	}
	before := time.Now()
	e.must(req{method: "POST", path: rotate, body: `{"grace_seconds":3600}`}, 200, &rot)
	if got := rot.Expires.Sub(before); got < 3599*time.Second || got > 3601*time.Second+time.Since(before) {
		t.Errorf("grace_seconds 3600: the previous secret expires in %s, want 1h", got)
	}
	var tok struct {
		Created time.Time `json:"created"`
		Expires time.Time `json:"expires"`
	}
	e.must(req{method: "POST", path: "/v1/tenants/acme/access-tokens", body: `{"ttl_seconds":90}`}, 201, &tok)
	if got := tok.Expires.Sub(tok.Created); got != 90*time.Second {
		t.Errorf("ttl_seconds 90: the token lives %s, want 1m30s", got)
	}
	for _, tc := range []struct{ path, body, field string }{
		{rotate, `{"grace":"1h","grace_seconds":3600}`, "grace_seconds"},
		{rotate, `{"grace_seconds":-1}`, "grace_seconds"},
		{rotate, `{"grace_seconds":1.5}`, "grace_seconds"},
		{rotate, `{"grace_seconds":604801}`, "grace_seconds"},
		{rotate, `{"grace":"8d"}`, "grace"},
		{"/v1/tenants/acme/access-tokens", `{"ttl":"1h","ttl_seconds":60}`, "ttl_seconds"},
		{"/v1/tenants/acme/access-tokens", `{"ttl_seconds":0}`, "ttl_seconds"},
	} {
		before := e.snapshot()
		checkProblem(t, e.do(req{method: "POST", path: tc.path, body: tc.body}), 422, engine.CodeInvalidField, tc.field)
		if after := e.snapshot(); after != before {
			t.Errorf("%s %s changed the state", tc.path, tc.body)
		}
	}
}

// TestIngest_Sequence: each event of a tenant gets the next sequence,
// in its envelope and the feed, with its ordering key; a bad ordering key
// is refused, naming the field, and takes no number.
func TestIngest_Sequence(t *testing.T) {
	e := newAPIEnv(t)
	e.fixture()
	before := e.snapshot()
	for name, key := range map[string]string{
		"too long":          strings.Repeat("k", engine.MaxOrderingKey+1),
		"control character": "order\u0007",
	} {
		t.Run(name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"type": "payment.succeeded", "data": map[string]int{"n": 1}, "ordering_key": key})
			r := e.do(req{method: "POST", path: "/v1/tenants/acme/events", body: string(body)})
			checkProblem(t, r, 422, engine.CodeInvalidField, "ordering_key")
		})
	}
	if after := e.snapshot(); after != before {
		t.Errorf("a refused ingest changed the state:\n%s\nwant\n%s", after, before)
	}
	for i, key := range []string{"order_1", "", "order_1"} {
		body := `{"type":"payment.succeeded","data":{}}`
		if key != "" {
			body = `{"type":"payment.succeeded","ordering_key":"` + key + `","data":{}}`
		}
		var ing ingestJSON
		e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: body}, 202, &ing)
		var ev struct {
			Event struct {
				Sequence    uint64  `json:"sequence"`
				OrderingKey *string `json:"ordering_key"`
			} `json:"event"`
		}
		e.must(req{method: "GET", path: "/v1/tenants/acme/events/" + ing.ID}, 200, &ev)
		if ev.Event.Sequence != uint64(i+1) {
			t.Errorf("event %d: sequence %d, want %d", i, ev.Event.Sequence, i+1)
		}
		if key == "" && ev.Event.OrderingKey != nil || key != "" && (ev.Event.OrderingKey == nil || *ev.Event.OrderingKey != key) {
			t.Errorf("event %d: ordering_key %v, want %q (absent when none)", i, ev.Event.OrderingKey, key)
		}
	}
	var feed struct {
		Data []struct {
			Event struct {
				Sequence uint64 `json:"sequence"`
			} `json:"event"`
		} `json:"data"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/events"}, 200, &feed)
	for i, item := range feed.Data {
		if item.Event.Sequence != uint64(i+1) {
			t.Errorf("feed item %d: sequence %d", i, item.Event.Sequence)
		}
	}
	if len(feed.Data) != 3 {
		t.Errorf("feed has %d events, want 3", len(feed.Data))
	}
}

// TestAPI_EndpointOrdering: an endpoint answers its ordering and on_dead
// (none and skip unless asked); create and PATCH take them, refuse
// anything else naming the field with the nearest value, and an ordered
// endpoint's second delivery in a line waits behind the first.
func TestAPI_EndpointOrdering(t *testing.T) {
	e := newAPIEnv(t)
	ep := e.fixture()
	var got struct {
		Ordering string `json:"ordering"`
		OnDead   string `json:"on_dead"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints/" + ep.ID}, 200, &got)
	if got.Ordering != "none" || got.OnDead != "skip" {
		t.Errorf("default endpoint: ordering %q, on_dead %q; want none, skip", got.Ordering, got.OnDead)
	}
	before := e.snapshot()
	for _, tc := range []struct{ method, path, body, field, hint string }{
		{"POST", "/v1/tenants/acme/endpoints", `{"url":"https://hooks.example.com/a","event_types":["*"],"ordering":"keys"}`, "ordering", `did you mean "key"?`},
		{"POST", "/v1/tenants/acme/endpoints", `{"url":"https://hooks.example.com/a","event_types":["*"],"on_dead":"blok"}`, "on_dead", `did you mean "block"?`},
		{"PATCH", "/v1/tenants/acme/endpoints/" + ep.ID, `{"ordering":"fifo"}`, "ordering", "not one of none, key, endpoint"},
	} {
		p := checkProblem(t, e.do(req{method: tc.method, path: tc.path, body: tc.body}), 422, engine.CodeInvalidField, tc.field)
		if !strings.Contains(p.Detail, tc.hint) {
			t.Errorf("%s %s: detail %q, want it to say %q", tc.method, tc.body, p.Detail, tc.hint)
		}
	}
	if after := e.snapshot(); after != before {
		t.Errorf("a refused change changed the state:\n%s\nwant\n%s", after, before)
	}
	e.must(req{method: "PATCH", path: "/v1/tenants/acme/endpoints/" + ep.ID, body: `{"ordering":"key","on_dead":"block"}`}, 200, &got)
	if got.Ordering != "key" || got.OnDead != "block" {
		t.Errorf("after PATCH: ordering %q, on_dead %q; want key, block", got.Ordering, got.OnDead)
	}
	var first, second ingestJSON
	body := `{"type":"payment.succeeded","ordering_key":"order_1","data":{}}`
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: body}, 202, &first)
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: body}, 202, &second)
	var d struct {
		State         string `json:"state"`
		Line          string `json:"line"`
		Sequence      uint64 `json:"sequence"`
		WaitingBehind string `json:"waiting_behind"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + second.Deliveries[0].ID}, 200, &d)
	if d.State != "waiting" || d.Line != "key:order_1" || d.Sequence != 2 || d.WaitingBehind != first.Deliveries[0].ID {
		t.Errorf("second delivery = %+v, want waiting in line key:order_1 with sequence 2 behind %s", d, first.Deliveries[0].ID)
	}
}

// killDelivery makes delivery id dead, as a 410 would (with response
// headers, so that the answers that show it show them).
func killDelivery(t *testing.T, e *apiEnv, id string) {
	t.Helper()
	at := time.Now().UTC()
	rec := engine.AttemptRecord{
		DeliveryID: id, Cycle: 1,
		Attempt: engine.Attempt{Cycle: 1, Number: 1, Start: at, Duration: 3 * time.Millisecond, Status: 410, Response: "gone", Outcome: engine.OutcomePermanent,
			ResponseHeaders: []engine.Header{{Name: "Content-Type", Value: "text/plain"}, {Name: "X-Request-Id", Value: "req_1"}}},
		State: engine.StateDead, Reason: "endpoint answered 410", LastStatus: 410, At: at,
	}
	if _, err := e.db.UpdateDelivery(context.Background(), id, func(d engine.Delivery) (engine.Delivery, error) { return engine.RecordAttempt(d, rec), nil }); err != nil {
		t.Fatal(err)
	}
}
