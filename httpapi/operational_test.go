package httpapi_test

import (
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
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
