package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// TestAPI_Backfill: POST …/endpoints/:id/backfill makes the deliveries a
// new endpoint is missing and answers how many (202), a second call makes
// none, each delivery shows the backfill that made it, the operator's log
// gets one line; a bad range is 422 naming since or until and stores
// nothing, an unknown endpoint 404.
func TestAPI_Backfill(t *testing.T) {
	e := newAPIEnv(t)
	e.fixture()
	since := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano)
	for range 3 {
		e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, nil)
	}
	var late endpointJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/late","event_types":["*"]}`}, 201, &late)
	path := "/v1/tenants/acme/endpoints/" + late.ID + "/backfill"

	before := e.snapshot()
	for _, tc := range []struct {
		body, field string
		code        engine.Code
	}{
		{`{}`, "since", engine.CodeInvalidField},
		{`{"until":"2030-01-01T00:00:00Z"}`, "since", engine.CodeInvalidField},
		{`{"since":"` + since + `","until":"` + since + `"}`, "until", engine.CodeInvalidField},
		{`{"since":"2030-01-02T00:00:00Z","until":"2030-01-01T00:00:00Z"}`, "until", engine.CodeInvalidField},
		{`{"since":"2099-01-01T00:00:00Z"}`, "until", engine.CodeInvalidField}, // until is now, before since
		{`{"since":"yesterday"}`, "since", engine.CodeInvalidField},
		{`{"since":"` + since + `","endpoint":"x"}`, "endpoint", engine.CodeInvalidField},
	} {
		r := e.do(req{method: "POST", path: path, body: tc.body})
		if r.status != 422 && r.status != 400 {
			t.Errorf("%s: status %d, want 422", tc.body, r.status)
			continue
		}
		checkProblem(t, r, r.status, tc.code, tc.field)
	}
	checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/acme/endpoints/ep_nope/backfill", body: `{"since":"` + since + `"}`}), 404, engine.CodeEndpointNotFound, "id")
	checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/nobody/endpoints/" + late.ID + "/backfill", body: `{"since":"` + since + `"}`}), 404, engine.CodeTenantNotFound, "tenant")
	if after := e.snapshot(); after != before {
		t.Errorf("a refused backfill changed the state:\n%s\nwant\n%s", after, before)
	}

	var got map[string]any
	e.must(req{method: "POST", path: path, body: `{"since":"` + since + `"}`}, 202, &got)
	if want := map[string]any{"created": 3.0, "skipped_existing": 0.0, "remaining": 0.0}; !equalJSON(got, want) {
		t.Errorf("backfill answered %v, want %v", got, want)
	}
	e.must(req{method: "POST", path: path, body: `{"since":"` + since + `","until":"` + time.Now().UTC().Add(time.Minute).Format(time.RFC3339) + `"}`}, 202, &got)
	if want := map[string]any{"created": 0.0, "skipped_existing": 3.0, "remaining": 0.0}; !equalJSON(got, want) {
		t.Errorf("second backfill answered %v, want %v", got, want)
	}
	var page struct {
		Data []struct {
			ID       string `json:"id"`
			Backfill *struct {
				At string `json:"at"`
				By string `json:"by"`
			} `json:"backfill"`
		} `json:"data"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries?endpoint=" + late.ID}, 200, &page)
	if len(page.Data) != 3 {
		t.Fatalf("%d deliveries to the late endpoint, want 3", len(page.Data))
	}
	for _, d := range page.Data {
		if d.Backfill == nil || d.Backfill.By != "admin" || d.Backfill.At == "" {
			t.Errorf("delivery %s shows backfill %+v, want one by admin", d.ID, d.Backfill)
		}
	}
	if logs := e.logs.String(); strings.Count(logs, `msg="endpoint backfilled"`) != 2 || !strings.Contains(logs, "endpoint="+late.ID) || !strings.Contains(logs, "created=3") {
		t.Errorf("the log has not one line per backfill:\n%s", logs)
	}
}

// equalJSON reports whether got has exactly want's members.
func equalJSON(got, want map[string]any) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
