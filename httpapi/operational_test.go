package httpapi_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
)

// TestAPI_OperatorTenantUnreachable: no route under /v1/tenants/{tenant}
// reaches the reserved operator tenant, whatever it holds: every one of
// them answers as for a tenant that does not exist, with or without an
// ID that exists in it (before, GET, PATCH and DELETE of its endpoint
// by ID reached it).
func TestAPI_OperatorTenantUnreachable(t *testing.T) {
	e := newAPIEnv(t)
	e.fixture()
	ops := engine.NewService(e.db, nil, engine.ServiceOptions{LookupHost: publicLookup})
	if err := ops.EnsureOperatorEndpoint(t.Context(), "https://ops.example.com/alerts", engine.NewSecret()); err != nil {
		t.Fatal(err)
	}
	eps, err := e.db.Endpoints(t.Context(), engine.OperatorTenant)
	if err != nil || len(eps) != 1 {
		t.Fatalf("operator endpoints %v (%v)", eps, err)
	}
	ep := eps[0].ID
	base := "/v1/tenants/" + engine.OperatorTenant
	for _, c := range []struct{ method, path, body string }{
		{"GET", base, ""},
		{"DELETE", base + "?force=true", ""},
		{"GET", base + "/endpoints", ""},
		{"POST", base + "/endpoints", `{"url":"https://x.example.com","event_types":["*"]}`},
		{"GET", base + "/endpoints/" + ep, ""},
		{"PATCH", base + "/endpoints/" + ep, `{"url":"https://evil.example.com"}`},
		{"DELETE", base + "/endpoints/" + ep, ""},
		{"POST", base + "/endpoints/" + ep + "/secret/rotate", `{}`},
		{"POST", base + "/endpoints/" + ep + "/secret/revoke", `{}`},
		{"POST", base + "/endpoints/" + ep + "/secret/reveal", `{}`},
		{"POST", base + "/endpoints/" + ep + "/verify", ""},
		{"POST", base + "/endpoints/" + ep + "/test-events", `{}`},
		{"POST", base + "/endpoints/" + ep + "/backfill", `{}`},
		{"POST", base + "/events", `{"type":"delivery.dead","data":{}}`},
		{"GET", base + "/events", ""},
		{"GET", base + "/events/evt_01jh0000000000000000000000", ""},
		{"GET", base + "/deliveries", ""},
		{"GET", base + "/deliveries/dlv_01jh0000000000000000000000", ""},
		{"POST", base + "/deliveries/dlv_01jh0000000000000000000000/replay", ""},
		{"POST", base + "/deliveries/dlv_01jh0000000000000000000000/skip", ""},
		{"GET", base + "/dead-letters", ""},
		{"POST", base + "/dead-letters/replay", `{}`},
		{"GET", base + "/report", ""},
		{"POST", base + "/access-tokens", `{}`},
		{"GET", base + "/access-tokens", ""},
		{"DELETE", base + "/access-tokens/tok_01jh0000000000000000000000", ""},
		{"POST", base + "/portal-links", `{}`},
	} {
		r := e.do(req{method: c.method, path: c.path, body: c.body})
		if r.status != 404 || !strings.Contains(string(r.body), `"tenant_not_found"`) {
			t.Errorf("%s %s = %d %s, want 404 tenant_not_found", c.method, c.path, r.status, r.body)
		}
	}
	// PUT makes a tenant: the id is refused as any other that cannot be one.
	checkProblem(t, e.do(req{method: "PUT", path: base, body: `{"name":"x"}`}), 422, engine.CodeInvalidField, "tenant")
	after, err := e.db.Endpoints(t.Context(), engine.OperatorTenant)
	if err != nil || len(after) != 1 || after[0].URL != "https://ops.example.com/alerts" {
		t.Errorf("the operator endpoint after the requests: %+v (%v)", after, err)
	}
}

// opEndpointJSON is an operational endpoint as the API shows it.
type opEndpointJSON struct {
	ID             string   `json:"id"`
	URL            string   `json:"url"`
	EventTypes     []string `json:"event_types"`
	Description    string   `json:"description"`
	Disabled       bool     `json:"disabled"`
	DisabledReason string   `json:"disabled_reason"`
	Source         string   `json:"source"`
	Created        string   `json:"created"`
	Updated        string   `json:"updated"`
	Secret         string   `json:"secret"`
	Previous       string   `json:"previous_secret_expires"`
}

// TestAPI_OperationalEndpoints: the operational endpoints are made,
// listed, read, changed, rotated and deleted by an admin token, and by
// nothing else; bad input is refused naming its field, with nothing
// stored; the secret is shown once; the [alerts] endpoint says it is the
// config's, and the API refuses what the file sets.
func TestAPI_OperationalEndpoints(t *testing.T) {
	e := newSecurityEnv(t, engine.ServiceOptions{}, httpapi.Options{})
	e.must(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme"}`}, 201, nil)
	const base = "/v1/operational-endpoints"

	var list struct {
		Data    []opEndpointJSON `json:"data"`
		HasMore bool             `json:"has_more"`
	}
	e.must(req{method: "GET", path: base}, 200, &list)
	if len(list.Data) != 0 {
		t.Fatalf("operational endpoints before any: %+v", list.Data)
	}

	// Bad input, each refused with its field; nothing stored.
	for _, c := range []struct {
		body  string
		code  engine.Code
		field string
	}{
		{`{"event_types":["*"]}`, engine.CodeInvalidField, "url"},
		{`{"url":"ftp://ops.example.com","event_types":["*"]}`, engine.CodeInvalidField, "url"},
		{`{"url":"https://ops.example.com"}`, engine.CodeInvalidField, "event_types"},
		{`{"url":"https://ops.example.com","event_types":[]}`, engine.CodeInvalidField, "event_types"},
		{`{"url":"https://ops.example.com","event_types":["invoice.paid"]}`, engine.CodeUnknownEventType, "event_types[0]"},
		{`{"url":"https://ops.example.com","event_types":["delivery.dead","*"]}`, engine.CodeInvalidField, "event_types[1]"},
		{`{"url":"https://ops.example.com","event_types":["delivery.dead","delivery.dead"]}`, engine.CodeInvalidField, "event_types[1]"},
		{`{"url":"https://ops.example.com","event_types":["*"],"description":"` + strings.Repeat("x", engine.MaxDescriptionLen+1) + `"}`, engine.CodeInvalidField, "description"},
		{`{"url":"https://ops.example.com","event_types":["*"],"ordering":"key"}`, engine.CodeInvalidField, "ordering"},
	} {
		checkProblem(t, e.do(req{method: "POST", path: base, body: c.body}), 422, c.code, c.field)
	}
	e.must(req{method: "GET", path: base}, 200, &list)
	if len(list.Data) != 0 {
		t.Fatalf("bad input stored %+v", list.Data)
	}

	// Made, shown once with its secret.
	var made opEndpointJSON
	r := e.must(req{method: "POST", path: base, body: `{"url":"https://ops.example.com/hooks","event_types":["delivery.dead","endpoint.failing"],"description":"pager"}`}, 201, &made)
	if r.header.Get("Cache-Control") != "no-store" || r.header.Get("Location") != base+"/"+made.ID {
		t.Errorf("create: Cache-Control %q, Location %q", r.header.Get("Cache-Control"), r.header.Get("Location"))
	}
	if !strings.HasPrefix(made.Secret, "whsec_") || made.Source != "api" || made.Disabled || !strings.HasPrefix(made.ID, "ep_") || len(made.Created) != len("2006-01-02T15:04:05.000Z") {
		t.Errorf("made %+v", made)
	}
	var got opEndpointJSON
	r = e.must(req{method: "GET", path: base + "/" + made.ID}, 200, &got)
	if got.Secret != "" || strings.Contains(r.String(), made.Secret) || got.URL != made.URL || got.Description != "pager" {
		t.Errorf("read %s", r)
	}

	// Changed, disabled, enabled.
	e.must(req{method: "PATCH", path: base + "/" + made.ID, body: `{"url":"https://ops2.example.com/hooks","event_types":["*"],"disabled":true}`}, 200, &got)
	if got.URL != "https://ops2.example.com/hooks" || !slices.Equal(got.EventTypes, []string{"*"}) || !got.Disabled || got.DisabledReason != "disabled by request (admin)" {
		t.Errorf("patched %+v", got)
	}
	checkProblem(t, e.do(req{method: "PATCH", path: base + "/" + made.ID, body: `{"event_types":["nope"]}`}), 422, engine.CodeUnknownEventType, "event_types[0]")
	e.must(req{method: "PATCH", path: base + "/" + made.ID, body: `{"disabled":false}`}, 200, &got)
	if got.Disabled {
		t.Errorf("enabled %+v", got)
	}

	// Rotated: a new secret, the old one kept for the grace.
	var rotated opEndpointJSON
	e.must(req{method: "POST", path: base + "/" + made.ID + "/secret/rotate", body: `{"grace":"1h"}`}, 200, &rotated)
	if rotated.Secret == made.Secret || !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.Previous == "" {
		t.Errorf("rotated %+v", rotated)
	}
	checkProblem(t, e.do(req{method: "POST", path: base + "/" + made.ID + "/secret/rotate", body: `{"grace":"200h"}`}), 422, engine.CodeInvalidField, "grace")

	// Nobody but an admin; no tenant route reaches them.
	tok := e.issue("acme", "")
	for _, c := range []struct{ method, path, body string }{
		{"GET", base, ""}, {"POST", base, `{"url":"https://x.example.com","event_types":["*"]}`},
		{"GET", base + "/" + made.ID, ""}, {"PATCH", base + "/" + made.ID, `{}`},
		{"DELETE", base + "/" + made.ID, ""}, {"POST", base + "/" + made.ID + "/secret/rotate", `{}`},
	} {
		checkProblem(t, e.do(req{method: c.method, path: c.path, body: c.body, header: bearer(tok.Token)}), 403, engine.CodeForbidden, "")
		checkProblem(t, e.do(req{method: c.method, path: c.path, body: c.body, header: bearer(testEnvTk)}), 403, engine.CodeForbidden, "")
		checkProblem(t, e.do(req{method: c.method, path: c.path, body: c.body, header: map[string]string{"Authorization": "-"}}), 401, engine.CodeUnauthorized, "")
	}
	var tenants struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	e.must(req{method: "GET", path: "/v1/tenants"}, 200, &tenants)
	if len(tenants.Data) != 1 || tenants.Data[0].ID != "acme" {
		t.Errorf("GET /v1/tenants lists %+v, want acme alone", tenants.Data)
	}
	var report struct {
		Tenants []struct {
			Tenant string `json:"tenant"`
		} `json:"tenants"`
	}
	e.must(req{method: "GET", path: "/v1/admin/report"}, 200, &report)
	if len(report.Tenants) != 1 || report.Tenants[0].Tenant != "acme" {
		t.Errorf("the admin report covers %+v, want acme alone", report.Tenants)
	}

	// The [alerts] endpoint.
	ops := engine.NewService(e.db, nil, engine.ServiceOptions{LookupHost: publicLookup})
	if err := ops.EnsureOperatorEndpoint(t.Context(), "https://ops.example.com/alerts", engine.NewSecret()); err != nil {
		t.Fatal(err)
	}
	e.must(req{method: "GET", path: base}, 200, &list)
	if len(list.Data) != 2 || list.Data[0].ID != made.ID || list.Data[1].Source != "config" {
		t.Fatalf("listed %+v, want the API's then the config's", list.Data)
	}
	config := list.Data[1].ID
	checkProblem(t, e.do(req{method: "PATCH", path: base + "/" + config, body: `{"url":"https://evil.example.com"}`}), 409, engine.CodeConfigManaged, "url")
	checkProblem(t, e.do(req{method: "POST", path: base + "/" + config + "/secret/rotate", body: `{}`}), 409, engine.CodeConfigManaged, "secret")
	checkProblem(t, e.do(req{method: "DELETE", path: base + "/" + config}), 409, engine.CodeConfigManaged, "id")
	e.must(req{method: "PATCH", path: base + "/" + config, body: `{"event_types":["*"],"description":"all of it"}`}, 200, &got)
	if got.Source != "config" || got.Description != "all of it" || got.URL != "https://ops.example.com/alerts" {
		t.Errorf("the [alerts] endpoint patched: %+v", got)
	}

	// Deleted.
	e.must(req{method: "DELETE", path: base + "/" + made.ID}, 204, nil)
	checkProblem(t, e.do(req{method: "GET", path: base + "/" + made.ID}), 404, engine.CodeEndpointNotFound, "id")
	checkProblem(t, e.do(req{method: "DELETE", path: base + "/" + made.ID}), 404, engine.CodeEndpointNotFound, "id")
	checkProblem(t, e.do(req{method: "GET", path: base + "/nope"}), 404, engine.CodeEndpointNotFound, "id")
	// An ID of a customer's endpoint is no operational endpoint.
	var customer endpointJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/in","event_types":["*"]}`}, 201, &customer)
	checkProblem(t, e.do(req{method: "GET", path: base + "/" + customer.ID}), 404, engine.CodeEndpointNotFound, "id")
	checkProblem(t, e.do(req{method: "PATCH", path: base + "/" + customer.ID, body: `{"description":"x"}`}), 404, engine.CodeEndpointNotFound, "id")
}

// TestAPI_OperationalEndpointsBound: the API makes at most
// engine.MaxOperationalEndpoints; the [alerts] endpoint is not counted.
func TestAPI_OperationalEndpointsBound(t *testing.T) {
	e := newSecurityEnv(t, engine.ServiceOptions{}, httpapi.Options{})
	ops := engine.NewService(e.db, nil, engine.ServiceOptions{LookupHost: publicLookup})
	if err := ops.EnsureOperatorEndpoint(t.Context(), "https://ops.example.com/alerts", engine.NewSecret()); err != nil {
		t.Fatal(err)
	}
	for range engine.MaxOperationalEndpoints {
		e.must(req{method: "POST", path: "/v1/operational-endpoints", body: `{"url":"https://ops.example.com/x","event_types":["*"]}`}, 201, nil)
	}
	checkProblem(t, e.do(req{method: "POST", path: "/v1/operational-endpoints", body: `{"url":"https://ops.example.com/x","event_types":["*"]}`}), 409, engine.CodeLimitReached, "")
}
