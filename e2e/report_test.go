package e2e

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestReport_CountsAddUp: with a delivery in every state a report knows
// (delivered at once, after a retry, after a replay; in flight; waiting
// in its line; paused; dead and blocking), each is in one bucket of the
// tenant's report, the admin report's total and the console's report,
// and the buckets add up to the deliveries.
func TestReport_CountsAddUp(t *testing.T) {
	t.Parallel()
	in, held, release := startHeld(t)
	defer release()
	endpoint := func(typ string, answer func(int, http.ResponseWriter, *http.Request), extra map[string]any) string {
		t.Helper()
		in.mustCall(201, "PUT", "/v1/event-types/"+typ, map[string]string{"description": "report test"}, nil)
		rc := newReceiver(t, answer)
		body := map[string]any{"url": rc.srv.URL, "event_types": []string{typ}}
		for k, v := range extra {
			body[k] = v
		}
		var ep endpointCreated
		in.mustCall(201, "POST", "/v1/tenants/acme/endpoints", body, &ep)
		rc.setSecret(ep.Secret)
		return ep.ID
	}
	one := func(typ string) string {
		t.Helper()
		return in.ingest(typ, `{}`).Deliveries[0].ID
	}

	endpoint("first.sent", status(200), nil)
	in.waitState(one("first.sent"), "succeeded")

	endpoint("retry.sent", func(n int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader([]int{500, 200}[min(n, 2)-1])
	}, nil)
	in.waitState(one("retry.sent"), "succeeded")

	var refuse atomic.Bool
	refuse.Store(true)
	endpoint("replay.sent", func(_ int, w http.ResponseWriter, _ *http.Request) {
		if refuse.Load() {
			w.WriteHeader(400)
			return
		}
		w.WriteHeader(200)
	}, nil)
	replayed := one("replay.sent")
	in.waitState(replayed, "dead")
	refuse.Store(false)
	in.mustCall(202, "POST", "/v1/tenants/acme/deliveries/"+replayed+"/replay", nil, nil)
	in.waitState(replayed, "succeeded")

	endpoint("pending.sent", held.answer, nil)
	inFlight := one("pending.sent")
	waitFor(t, "an attempt in flight", func() bool { return in.delivery(inFlight).State == "delivering" })

	paused := endpoint("paused.sent", status(200), nil)
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+paused, `{"disabled": true}`, nil)
	in.waitState(one("paused.sent"), "paused")

	endpoint("ordered.sent", status(400), map[string]any{"ordering": "endpoint", "on_dead": "block"})
	in.waitState(one("ordered.sent"), "dead")
	in.waitState(one("ordered.sent"), "waiting")

	type report struct {
		Tenant                string `json:"tenant"`
		Deliveries            int    `json:"deliveries"`
		FirstAttemptSuccesses int    `json:"first_attempt_successes"`
		RetrySuccesses        int    `json:"retry_successes"`
		Replayed              int    `json:"replayed"`
		Pending               int    `json:"pending"`
		Waiting               int    `json:"waiting"`
		Paused                int    `json:"paused"`
		Dead                  int    `json:"dead"`
		Blocking              int    `json:"blocking"`
		Checks                []struct {
			Name string `json:"name"`
			OK   bool   `json:"ok"`
		} `json:"checks"`
	}
	check := func(what string, r report) {
		t.Helper()
		buckets := []int{r.FirstAttemptSuccesses, r.RetrySuccesses, r.Replayed, r.Pending, r.Waiting, r.Paused, r.Dead}
		sum := 0
		for i, n := range buckets {
			sum += n
			if n != 1 {
				t.Errorf("%s: bucket %d of first, retry, replayed, pending, waiting, paused, dead is %d, want 1: %+v", what, i, n, r)
			}
		}
		if r.Deliveries != 7 || sum != r.Deliveries || r.Blocking != 1 {
			t.Errorf("%s: the buckets sum to %d of %d deliveries (blocking %d), want 7 of 7 (1)", what, sum, r.Deliveries, r.Blocking)
		}
		counted := false
		for _, c := range r.Checks {
			if c.Name == "every delivery is counted once" {
				counted = c.OK
			}
		}
		if !counted {
			t.Errorf("%s: checks %+v, want every delivery counted once", what, r.Checks)
		}
	}
	var tenant report
	in.mustCall(200, "GET", "/v1/tenants/acme/report", nil, &tenant)
	check("the tenant's report", tenant)
	var all struct {
		Tenants []report `json:"tenants"`
		Total   report   `json:"total"`
	}
	in.mustCall(200, "GET", "/v1/admin/report", nil, &all)
	check("the admin report's total", all.Total)

	status, page := in.consoleGet("/console/t/acme/report")
	if status != 200 {
		t.Fatalf("console report: %d", status)
	}
	for _, id := range []string{"first", "retry", "replayed", "pending", "waiting", "paused", "dead"} {
		if !strings.Contains(page, `id="`+id+`">1<`) {
			t.Errorf("the console's report does not show 1 %s", id)
		}
	}
}
