package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestBackfill_DeliversExactlyTheMissing runs the binary with a loopback
// receiver behind an endpoint made after some events were stored, and
// backfills it (a task, waited for): the receiver gets exactly the events
// of its type that it had not received (count and IDs), signed, once
// each; an event of another type is not sent; a second backfill makes
// nothing and sends nothing more.
func TestBackfill_DeliversExactlyTheMissing(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	since := time.Now().UTC().Add(-time.Second)

	const before = 5
	var missing []string
	for range before {
		missing = append(missing, in.ingest("payment.succeeded", `{"n":1}`).ID)
	}
	other := in.ingest("invoice.paid", `{"n":2}`)

	rc := newReceiver(t, status(http.StatusOK))
	ep := in.createEndpoint(rc.srv.URL+"/hooks", "payment.succeeded")
	rc.setSecret(ep.Secret)
	live := in.ingest("payment.succeeded", `{"n":3}`)
	if len(live.Deliveries) != 1 {
		t.Fatalf("the event after the endpoint made %d deliveries, want 1", len(live.Deliveries))
	}
	in.waitState(live.Deliveries[0].ID, "succeeded")

	path := "/v1/tenants/acme/endpoints/" + ep.ID + "/backfill"
	got := in.waitTask(in.startTask("POST", path, map[string]any{"since": since.Format(time.RFC3339Nano)}))
	if got.State != "succeeded" || got.Done != before || got.Skipped != 1 || got.Total == nil || *got.Total != before+1 {
		t.Fatalf("the backfill ended %+v, want %d made and 1 skipped", got, before)
	}

	var log struct {
		Data []struct {
			ID       string `json:"id"`
			EventID  string `json:"event_id"`
			Backfill *struct {
				By string `json:"by"`
			} `json:"backfill"`
		} `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/tenants/acme/deliveries?endpoint="+ep.ID, nil, &log)
	if len(log.Data) != before+1 {
		t.Fatalf("the endpoint has %d deliveries, want %d", len(log.Data), before+1)
	}
	var made []string
	for _, d := range log.Data {
		in.waitState(d.ID, "succeeded")
		if d.EventID == live.ID {
			continue
		}
		if d.Backfill == nil || d.Backfill.By == "" {
			t.Errorf("backfilled delivery %s shows no backfill", d.ID)
		}
		made = append(made, d.EventID)
	}
	slices.Sort(made)
	if w := slices.Sorted(slices.Values(missing)); !slices.Equal(made, w) {
		t.Errorf("backfilled events %v, want exactly %v", made, w)
	}

	received := func() []string {
		var ids []string
		for _, r := range rc.got() {
			var env struct{ ID string }
			if err := json.Unmarshal(r.body, &env); err != nil {
				t.Fatalf("a body that is not an envelope: %q", r.body)
			}
			ids = append(ids, env.ID)
		}
		slices.Sort(ids)
		return ids
	}
	want := slices.Sorted(slices.Values(append(slices.Clone(missing), live.ID)))
	if ids := received(); !slices.Equal(ids, want) {
		t.Errorf("the receiver got %v, want exactly %v (not %s, of another type)", ids, want, other.ID)
	}
	rc.checkSignatures()

	// A second backfill, over a range that reaches past now: nothing.
	got = in.waitTask(in.startTask("POST", path, map[string]any{"since": since.Format(time.RFC3339Nano), "until": time.Now().UTC().Add(time.Minute).Format(time.RFC3339Nano)}))
	if got.State != "succeeded" || got.Done != 0 || got.Skipped != before+1 {
		t.Errorf("second backfill ended %+v, want %d skipped", got, before+1)
	}
	in.mustCall(200, "GET", "/v1/tenants/acme/deliveries?endpoint="+ep.ID, nil, &log)
	if len(log.Data) != before+1 {
		t.Errorf("after a second backfill the endpoint has %d deliveries, want %d", len(log.Data), before+1)
	}
	time.Sleep(200 * time.Millisecond) // what a stray delivery would need to arrive
	if ids := received(); !slices.Equal(ids, want) {
		t.Errorf("after a second backfill the receiver got %v, want still %v", ids, want)
	}

	// A bad range: 422 naming the field.
	if code := in.call("POST", path, `{"until":"2030-01-01T00:00:00Z"}`, nil); code != 422 {
		t.Errorf("a backfill without since: %d, want 422", code)
	}
}
