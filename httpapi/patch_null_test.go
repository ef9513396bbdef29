package httpapi_test

import (
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// TestAPI_PatchRefusesNull: a PATCH of an endpoint (or an operational
// endpoint) with null for a member the document does not let be null is
// 422 invalid_field naming it, and changes nothing: a client clearing a
// description with null, as a JSON merge patch would, got 200 and the old
// description. headers and rate_limit, whose null means something, still
// take it.
func TestAPI_PatchRefusesNull(t *testing.T) {
	e := newAPIEnv(t)
	ep := e.fixture()
	path := "/v1/tenants/acme/endpoints/" + ep.ID
	e.must(req{method: "PATCH", path: path, body: `{"description":"the billing service"}`}, 200, nil)
	for _, field := range []string{"description", "url", "event_types", "ordering", "on_dead", "retry_policy", "disabled", "send_traceparent", "deliver_held", "channels"} {
		t.Run(field, func(t *testing.T) {
			before := e.snapshot()
			p := checkProblem(t, e.do(req{method: "PATCH", path: path, body: `{"` + field + `":null}`}), 422, engine.CodeInvalidField, field)
			if !strings.Contains(p.Detail, "null") {
				t.Errorf("detail %q: want it to say null", p.Detail)
			}
			if after := e.snapshot(); after != before {
				t.Errorf("state changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	var got endpointJSON
	e.must(req{method: "PATCH", path: path, body: `{"headers":null,"rate_limit":null}`}, 200, &got)
	if got.Description != "the billing service" {
		t.Errorf("description %q after the refused patches, want it kept", got.Description)
	}

	var op struct {
		ID string `json:"id"`
	}
	e.must(req{method: "POST", path: "/v1/operational-endpoints", body: `{"url":"https://ops.example.com/in","event_types":["*"]}`}, 201, &op)
	checkProblem(t, e.do(req{method: "PATCH", path: "/v1/operational-endpoints/" + op.ID, body: `{"disabled":false,"description":null}`}), 422, engine.CodeInvalidField, "description")
}
