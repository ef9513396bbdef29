package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// TestAPI_Backfill: POST …/endpoints/:id/backfill answers 202 with a
// task that makes the deliveries a new endpoint is missing and counts
// them; a second one makes none, each delivery shows the backfill that
// made it, the operator's log gets one line per backfill; a bad range is
// 422 naming since or until and stores nothing, an unknown endpoint 404.
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

	got := e.startTask(req{method: "POST", path: path, body: `{"since":"` + since + `"}`})
	if got.Kind != "endpoint.backfill" || got.Tenant != "acme" || got.Params["endpoint"] != late.ID || got.By != "admin" {
		t.Errorf("backfill answered %+v", got)
	}
	if done := e.waitTask(got); done.State != "succeeded" || done.Done != 3 || done.Skipped != 0 || done.Total == nil || *done.Total != 3 {
		t.Errorf("the backfill task ended %+v, want succeeded, 3 made", done)
	}
	got = e.startTask(req{method: "POST", path: path, body: `{"since":"` + since + `","until":"` + time.Now().UTC().Add(time.Minute).Format(time.RFC3339) + `"}`})
	if done := e.waitTask(got); done.State != "succeeded" || done.Done != 0 || done.Skipped != 3 {
		t.Errorf("the second backfill ended %+v, want 3 skipped", done)
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
	if logs := e.logs.String(); strings.Count(logs, `msg="endpoint backfill started"`) != 2 || !strings.Contains(logs, "endpoint="+late.ID) {
		t.Errorf("the log has not one line per backfill:\n%s", logs)
	}
}
