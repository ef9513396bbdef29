package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// TestAPI_EndpointRateLimit: an endpoint takes rate_limit on create and
// PATCH and answers it with its burst filled in; PATCH without it leaves
// it, null removes it (and the answer has none); anything out of bounds
// or of the wrong shape is 422 invalid_field naming the field, and
// changes nothing.
func TestAPI_EndpointRateLimit(t *testing.T) {
	e := newAPIEnv(t)
	ep := e.fixture()
	type limitJSON struct {
		PerSecond float64 `json:"per_second"`
		Burst     int     `json:"burst"`
	}
	type endpointLimit struct {
		ID        string     `json:"id"`
		RateLimit *limitJSON `json:"rate_limit"`
		Effective *limitJSON `json:"effective_rate_limit"`
	}
	var got endpointLimit
	raw := func(path string) map[string]json.RawMessage {
		t.Helper()
		var m map[string]json.RawMessage
		e.must(req{method: "GET", path: path}, 200, &m)
		return m
	}
	if _, ok := raw("/v1/tenants/acme/endpoints/" + ep.ID)["rate_limit"]; ok {
		t.Error("an endpoint without a rate limit answers rate_limit; want it absent")
	}

	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/limited","event_types":["*"],"rate_limit":{"per_second":2.5}}`}, 201, &got)
	if got.RateLimit == nil || *got.RateLimit != (limitJSON{2.5, 2}) {
		t.Fatalf("created with rate_limit %+v, want {2.5 2} (the burst by default)", got.RateLimit)
	}
	if got.Effective == nil || *got.Effective != *got.RateLimit {
		t.Errorf("created with effective_rate_limit %+v, want its own without endpoint_rate", got.Effective)
	}
	limited := got.ID
	got = endpointLimit{}
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/none","event_types":["*"],"rate_limit":null}`}, 201, &got)
	if got.RateLimit != nil || got.Effective != nil {
		t.Errorf("created with rate_limit null: answers %+v, effective %+v; want none", got.RateLimit, got.Effective)
	}
	path := "/v1/tenants/acme/endpoints/" + limited
	e.must(req{method: "PATCH", path: path, body: `{"description":"orders"}`}, 200, &got)
	if got.RateLimit == nil || *got.RateLimit != (limitJSON{2.5, 2}) {
		t.Errorf("after a PATCH without rate_limit: %+v, want it left as {2.5 2}", got.RateLimit)
	}
	e.must(req{method: "PATCH", path: path, body: `{"rate_limit":{"per_second":20,"burst":5}}`}, 200, &got)
	if got.RateLimit == nil || *got.RateLimit != (limitJSON{20, 5}) {
		t.Errorf("after a PATCH to 20/s burst 5: %+v", got.RateLimit)
	}
	e.must(req{method: "GET", path: path}, 200, &got)
	if got.RateLimit == nil || *got.RateLimit != (limitJSON{20, 5}) || got.Effective == nil || *got.Effective != (limitJSON{20, 5}) {
		t.Errorf("read after the PATCH: %+v, effective %+v; want {20 5} both", got.RateLimit, got.Effective)
	}

	before := e.snapshot()
	create := func(limit string) string {
		return `{"url":"https://hooks.example.com/bad","event_types":["*"],"rate_limit":` + limit + `}`
	}
	for _, tc := range []struct{ method, path, body, field, hint string }{
		{"POST", "/v1/tenants/acme/endpoints", create(`{"per_second":0}`), "rate_limit.per_second", "from 0.01"},
		{"POST", "/v1/tenants/acme/endpoints", create(`{}`), "rate_limit.per_second", "from 0.01"},
		{"POST", "/v1/tenants/acme/endpoints", create(`{"per_second":-1}`), "rate_limit.per_second", "from 0.01"},
		{"POST", "/v1/tenants/acme/endpoints", create(`{"per_second":0.001}`), "rate_limit.per_second", "from 0.01"},
		{"POST", "/v1/tenants/acme/endpoints", create(`{"per_second":10001}`), "rate_limit.per_second", "to 10000"},
		{"POST", "/v1/tenants/acme/endpoints", create(`{"per_second":1e400}`), "rate_limit", "out of range"},
		{"POST", "/v1/tenants/acme/endpoints", create(`{"per_second":5,"burst":0}`), "rate_limit.burst", "from 1 to 10000"},
		{"POST", "/v1/tenants/acme/endpoints", create(`{"per_second":5,"burst":10001}`), "rate_limit.burst", "from 1 to 10000"},
		{"POST", "/v1/tenants/acme/endpoints", create(`{"per_second":5,"burst":1.5}`), "rate_limit", "burst"},
		{"POST", "/v1/tenants/acme/endpoints", create(`{"per_second":"5"}`), "rate_limit", "per_second"},
		{"POST", "/v1/tenants/acme/endpoints", create(`{"per_second":5,"brust":3}`), "rate_limit", `unknown field "brust"`},
		{"POST", "/v1/tenants/acme/endpoints", create(`5`), "rate_limit", "object"},
		{"PATCH", path, `{"description":"changed","rate_limit":{"per_second":0}}`, "rate_limit.per_second", "rate_limit null"},
		{"PATCH", path, `{"rate_limit":{"per_second":5,"burst":-2}}`, "rate_limit.burst", "from 1 to 10000"},
		{"PATCH", path, `{"rate_limit":{"per_second":5,"per_second":6}}`, "rate_limit", "duplicate"},
		{"PATCH", path, `{"rate_limit":[]}`, "rate_limit", "object"},
		{"PATCH", path, `{"rate_limit":{"per_second":5,"extra":true}}`, "rate_limit", `unknown field "extra"`},
	} {
		code := engine.CodeInvalidField
		status := 422
		if tc.hint == "duplicate" {
			code, status = engine.CodeInvalidJSON, 400
		}
		p := checkProblem(t, e.do(req{method: tc.method, path: tc.path, body: tc.body}), status, code, tc.field)
		if !strings.Contains(p.Detail, tc.hint) {
			t.Errorf("%s %s: detail %q, want it to say %q", tc.method, tc.body, p.Detail, tc.hint)
		}
	}
	if after := e.snapshot(); after != before {
		t.Errorf("a refused change changed the state:\n%s\nwant\n%s", after, before)
	}

	got = endpointLimit{}
	e.must(req{method: "PATCH", path: path, body: `{"rate_limit":null}`}, 200, &got)
	if got.RateLimit != nil {
		t.Errorf("after PATCH rate_limit null: %+v, want none", got.RateLimit)
	}
	for _, member := range []string{"rate_limit", "effective_rate_limit"} {
		if _, ok := raw(path)[member]; ok {
			t.Errorf("after rate_limit null the endpoint still answers %s; want it absent", member)
		}
	}
}
