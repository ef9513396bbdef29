package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

// TestSubscriberViews drives the delivery log, the reconciliation feed,
// range replay and the report over the real API.
func TestSubscriberViews(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	var healthy atomic.Bool
	ok := newReceiver(t, status(200))
	flaky := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if healthy.Load() {
			w.WriteHeader(200)
			return
		}
		w.WriteHeader(http.StatusNotFound) // permanent: dead at once
	})
	epOK := in.createEndpoint(ok.srv.URL, "*")
	ok.setSecret(epOK.Secret)
	epFlaky := in.createEndpoint(flaky.srv.URL, "payment.succeeded")
	flaky.setSecret(epFlaky.Secret)

	start := time.Now().UTC()
	var events []ingestResponse
	for i := range 6 {
		typ := "invoice.paid"
		if i%2 == 0 {
			typ = "payment.succeeded"
		}
		events = append(events, in.ingest(typ, fmt.Sprintf(`{"n":%d}`, i)))
	}
	// 6 deliveries to epOK, 3 to epFlaky (dead).
	for _, ev := range events {
		for _, d := range ev.Deliveries {
			want := "succeeded"
			if d.EndpointID == epFlaky.ID {
				want = "dead"
			}
			in.waitState(d.ID, want)
		}
	}

	type page struct {
		Data       []deliveryView `json:"data"`
		NextCursor string         `json:"next_cursor"`
	}
	t.Run("delivery log: filters and cursor paging, newest first", func(t *testing.T) {
		var all []deliveryView
		cursor := ""
		for range 10 {
			var p page
			in.mustCall(200, "GET", "/v1/tenants/acme/deliveries?limit=4&cursor="+url.QueryEscape(cursor), nil, &p)
			all = append(all, p.Data...)
			if cursor = p.NextCursor; cursor == "" {
				break
			}
		}
		if len(all) != 9 {
			t.Fatalf("listed %d deliveries, want 9", len(all))
		}
		if all[0].EventID != events[5].ID || all[len(all)-1].EventID != events[0].ID {
			t.Error("not newest first")
		}
		var dead page
		in.mustCall(200, "GET", "/v1/tenants/acme/deliveries?state=dead&endpoint="+epFlaky.ID, nil, &dead)
		if len(dead.Data) != 3 {
			t.Errorf("state=dead&endpoint: %d, want 3", len(dead.Data))
		}
		var typed page
		in.mustCall(200, "GET", "/v1/tenants/acme/deliveries?type=invoice.paid&since="+start.Format(time.RFC3339Nano), nil, &typed)
		if len(typed.Data) != 3 {
			t.Errorf("type=invoice.paid: %d, want 3", len(typed.Data))
		}
		var p map[string]any
		if code := in.call("GET", "/v1/tenants/acme/deliveries?state=lost", nil, &p); code != 422 || p["field"] != "state" {
			t.Errorf("bad state: %d %v", code, p)
		}
	})

	t.Run("reconciliation feed: every event in log order, resumable", func(t *testing.T) {
		var got []string
		after := ""
		for range 10 {
			var feed struct {
				Data []struct {
					Cursor string `json:"cursor"`
					Event  struct {
						ID string `json:"id"`
					} `json:"event"`
				} `json:"data"`
				Next string `json:"next_cursor"`
			}
			in.mustCall(200, "GET", "/v1/tenants/acme/events?limit=4&cursor="+after, nil, &feed)
			for _, e := range feed.Data {
				got = append(got, e.Event.ID)
			}
			if len(feed.Data) == 0 {
				break
			}
			after = feed.Next
		}
		if len(got) != 6 || got[0] != events[0].ID || got[5] != events[5].ID {
			t.Errorf("feed %v, want the 6 events in order", got)
		}
	})

	t.Run("range replay, twice: each dead letter is sent once more", func(t *testing.T) {
		healthy.Store(true)
		before := len(flaky.got())
		body := fmt.Sprintf(`{"since":%q,"endpoint":%q}`, start.Add(-time.Minute).Format(time.RFC3339Nano), epFlaky.ID)
		first, second := in.startTask("POST", "/v1/tenants/acme/dead-letters/replay", body), in.startTask("POST", "/v1/tenants/acme/dead-letters/replay", body)
		a, b := in.waitTask(first), in.waitTask(second)
		if a.State != "succeeded" || b.State != "succeeded" || a.Done+b.Done != 3 {
			t.Fatalf("the replays ended %+v and %+v, want 3 replayed in all", a, b)
		}
		for _, ev := range events {
			for _, d := range ev.Deliveries {
				if d.EndpointID == epFlaky.ID {
					got := in.waitState(d.ID, "succeeded")
					if len(got.Replays) != 1 {
						t.Errorf("delivery %s has %d replay records", d.ID, len(got.Replays))
					}
				}
			}
		}
		if n := len(flaky.got()) - before; n != 3 {
			t.Errorf("the endpoint got %d requests from the replays, want 3", n)
		}
	})

	t.Run("report", func(t *testing.T) {
		var rep struct {
			Events                int            `json:"events"`
			Deliveries            int            `json:"deliveries"`
			FirstAttemptSuccesses int            `json:"first_attempt_successes"`
			EffectiveDeliveryRate float64        `json:"effective_delivery_rate"`
			Replayed              int            `json:"replayed"`
			Dead                  int            `json:"dead"`
			DeadByReason          map[string]int `json:"dead_by_reason"`
			MeetsTarget           bool           `json:"meets_target"`
			Checks                []struct {
				OK bool `json:"ok"`
			} `json:"checks"`
		}
		in.mustCall(200, "GET", "/v1/tenants/acme/report?last=1000", nil, &rep)
		if rep.Events != 6 || rep.Deliveries != 9 || rep.FirstAttemptSuccesses != 6 || rep.Replayed != 3 {
			t.Errorf("report %+v", rep)
		}
		if rep.EffectiveDeliveryRate > 0.67 || rep.EffectiveDeliveryRate < 0.66 || rep.MeetsTarget {
			t.Errorf("effective rate %.3f (target met: %v), want 6/9 and not met", rep.EffectiveDeliveryRate, rep.MeetsTarget)
		}
		for _, c := range rep.Checks {
			if !c.OK {
				t.Errorf("check failed: %+v", rep.Checks)
			}
		}
		if code := in.call("GET", "/v1/tenants/acme/report?last=abc", nil, nil); code != 422 {
			t.Errorf("bad last: %d", code)
		}
	})
}
