package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
)

// retryPolicyEnv is an API whose server knows the standard, extended
// and "deploys" policies (a minute apart, three times, retrying 404).
func retryPolicyEnv(t *testing.T) *apiEnv {
	return newSecurityEnv(t, engine.ServiceOptions{RetryPolicies: map[string]engine.RetryPolicy{
		engine.StandardRetryPolicy:     engine.DefaultRetryPolicy(),
		engine.ExtendedRetryPolicyName: engine.ExtendedRetryPolicy(),
		"deploys":                      {Schedule: []time.Duration{time.Minute, time.Minute, time.Minute}, Jitter: 0.1, Deadline: 5 * time.Minute, RetryStatuses: []int{404}},
	}}, httpapi.Options{})
}

// wantProblem checks that r is a 422 invalid_field naming field.
func wantProblem(t *testing.T, r response, field string) {
	t.Helper()
	var p struct {
		Code  string `json:"code"`
		Field string `json:"field"`
	}
	if err := json.Unmarshal(r.body, &p); err != nil || r.status != http.StatusUnprocessableEntity || p.Code != "invalid_field" || p.Field != field {
		t.Fatalf("got %d %s, want 422 invalid_field on %s", r.status, r.body, field)
	}
}

// TestAPI_RetryPolicies: a tenant's retry_policy and an endpoint's are
// taken among the server's policies only (else 422 naming retry_policy,
// and nothing stored), and shown: the tenant's always, an endpoint's
// own when it has one and the one it follows, a delivery's.
func TestAPI_RetryPolicies(t *testing.T) {
	e := retryPolicyEnv(t)
	r := e.do(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme","retry_policy":"nightly"}`})
	wantProblem(t, r, "retry_policy")
	if !strings.Contains(string(r.body), "deploys, extended, standard") {
		t.Errorf("the problem does not list the policies: %s", r.body)
	}
	if r := e.do(req{method: "GET", path: "/v1/tenants/acme"}); r.status != http.StatusNotFound {
		t.Fatalf("a refused PUT made the tenant: %d %s", r.status, r.body)
	}
	var tn struct {
		RetryPolicy string `json:"retry_policy"`
	}
	r = e.do(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme"}`})
	if err := json.Unmarshal(r.body, &tn); err != nil || r.status != http.StatusCreated || tn.RetryPolicy != "standard" {
		t.Fatalf("PUT without a policy = %d %s, want 201 with retry_policy standard", r.status, r.body)
	}
	r = e.do(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme","retry_policy":"extended"}`})
	if err := json.Unmarshal(r.body, &tn); err != nil || r.status != http.StatusOK || tn.RetryPolicy != "extended" {
		t.Fatalf("PUT with extended = %d %s", r.status, r.body)
	}
	r = e.do(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme Inc."}`})
	if err := json.Unmarshal(r.body, &tn); err != nil || tn.RetryPolicy != "extended" {
		t.Fatalf("PUT without a policy changed it: %s", r.body)
	}
	if r := e.do(req{method: "PUT", path: "/v1/event-types/order.created", body: `{}`}); r.status != http.StatusCreated {
		t.Fatalf("PUT event type: %d %s", r.status, r.body)
	}

	wantProblem(t, e.do(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/a","event_types":["*"],"retry_policy":"nightly"}`}), "retry_policy")
	wantProblem(t, e.do(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/a","event_types":["*"],"retry_policy":"` + strings.Repeat("x", 40) + `"}`}), "retry_policy")
	if r := e.do(req{method: "GET", path: "/v1/tenants/acme/endpoints"}); !strings.Contains(string(r.body), `"data":[]`) {
		t.Fatalf("a refused create stored an endpoint: %s", r.body)
	}
	type endpoint struct {
		ID        string  `json:"id"`
		Own       *string `json:"retry_policy"`
		Effective string  `json:"effective_retry_policy"`
	}
	var own, inherits endpoint
	r = e.do(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/a","event_types":["*"],"retry_policy":"deploys"}`})
	if err := json.Unmarshal(r.body, &own); err != nil || own.Own == nil || *own.Own != "deploys" || own.Effective != "deploys" {
		t.Fatalf("create with deploys = %d %s", r.status, r.body)
	}
	r = e.do(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/b","event_types":["*"]}`})
	if err := json.Unmarshal(r.body, &inherits); err != nil || inherits.Own != nil || inherits.Effective != "extended" {
		t.Fatalf("create without a policy = %d %s, want no retry_policy and effective_retry_policy extended", r.status, r.body)
	}
	wantProblem(t, e.do(req{method: "PATCH", path: "/v1/tenants/acme/endpoints/" + own.ID, body: `{"retry_policy":"nightly"}`}), "retry_policy")
	var got endpoint
	r = e.do(req{method: "PATCH", path: "/v1/tenants/acme/endpoints/" + own.ID, body: `{"retry_policy":""}`})
	if err := json.Unmarshal(r.body, &got); err != nil || got.Own != nil || got.Effective != "extended" {
		t.Fatalf("PATCH to the tenant's = %d %s", r.status, r.body)
	}
	r = e.do(req{method: "PATCH", path: "/v1/tenants/acme/endpoints/" + own.ID, body: `{"retry_policy":"deploys"}`})
	if err := json.Unmarshal(r.body, &got); err != nil || got.Own == nil || *got.Own != "deploys" {
		t.Fatalf("PATCH to deploys = %d %s", r.status, r.body)
	}
	r = e.do(req{method: "GET", path: "/v1/tenants/acme/endpoints/" + inherits.ID})
	if err := json.Unmarshal(r.body, &got); err != nil || got.Effective != "extended" {
		t.Fatalf("GET endpoint = %d %s", r.status, r.body)
	}

	// Each delivery says the policy its cycle follows.
	r = e.do(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"order.created","data":{}}`})
	var ing struct {
		ID         string `json:"id"`
		Deliveries []struct {
			ID         string `json:"id"`
			EndpointID string `json:"endpoint_id"`
		} `json:"deliveries"`
	}
	if err := json.Unmarshal(r.body, &ing); err != nil || len(ing.Deliveries) != 2 {
		t.Fatalf("ingest = %d %s", r.status, r.body)
	}
	want := map[string]string{own.ID: "deploys", inherits.ID: "extended"}
	for _, d := range ing.Deliveries {
		var dv struct {
			RetryPolicy string `json:"retry_policy"`
		}
		r := e.do(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + d.ID})
		if err := json.Unmarshal(r.body, &dv); err != nil || dv.RetryPolicy != want[d.EndpointID] {
			t.Errorf("delivery to %s: %s, want retry_policy %s", d.EndpointID, r.body, want[d.EndpointID])
		}
	}
}

// TestAPI_ListRetryPolicies: GET /v1/retry-policies lists the server's
// policies in name order, with their schedule in milliseconds, to any
// token.
func TestAPI_ListRetryPolicies(t *testing.T) {
	e := retryPolicyEnv(t)
	r := e.do(req{method: "GET", path: "/v1/retry-policies", header: bearer(testEnvTk)})
	var page struct {
		Data []struct {
			Name          string  `json:"name"`
			Summary       string  `json:"summary"`
			MaxAttempts   int     `json:"max_attempts"`
			ScheduleMS    []int64 `json:"schedule_ms"`
			Jitter        float64 `json:"jitter"`
			DeadlineMS    int64   `json:"deadline_ms"`
			RetryStatuses []int   `json:"retry_statuses"`
		} `json:"data"`
		HasMore bool `json:"has_more"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil || r.status != http.StatusOK || len(page.Data) != 3 || page.HasMore {
		t.Fatalf("GET /v1/retry-policies = %d %s", r.status, r.body)
	}
	d := page.Data[0]
	if d.Name != "deploys" || d.MaxAttempts != 4 || len(d.ScheduleMS) != 3 || d.ScheduleMS[0] != 60000 || d.DeadlineMS != 300000 || d.Jitter != 0.1 ||
		len(d.RetryStatuses) != 1 || d.RetryStatuses[0] != 404 || d.Summary != "4 attempts within 5 min, retries 404" {
		t.Errorf("deploys = %+v", d)
	}
	if page.Data[1].Name != "extended" || page.Data[1].Summary != "8 attempts within 28 h" || page.Data[2].Name != "standard" || page.Data[2].RetryStatuses == nil {
		t.Errorf("policies = %+v", page.Data)
	}
}
