package httpapi_test

import (
	"strings"
	"testing"
	"time"
)

// TestConsole_DeliverAt: a scheduled delivery is shown "scheduled for"
// its time in the delivery log and on its page (with the event's
// deliver_at), and on its event's page; an unscheduled one is not.
func TestConsole_DeliverAt(t *testing.T) {
	e := newConsoleEnv(t)
	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	var sched, plain ingestJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{},"deliver_at":"` + at.Format(time.RFC3339) + `"}`}, 202, &sched)
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, &plain)
	if len(sched.Deliveries) != 1 || len(plain.Deliveries) != 1 {
		t.Fatalf("deliveries: %d scheduled, %d not; want 1 and 1", len(sched.Deliveries), len(plain.Deliveries))
	}
	shown := "scheduled for <time datetime=\"" + at.Format(time.RFC3339) + "\">" + at.Format("2006-01-02 15:04:05 UTC") + "</time>"
	if log := b.get("/console/t/acme/deliveries"); strings.Count(log.body, shown) != 1 {
		t.Errorf("the delivery log shows %q %d times, want once:\n%s", shown, strings.Count(log.body, shown), log.body)
	}
	p := b.get("/console/t/acme/deliveries/" + sched.Deliveries[0].ID)
	if !strings.Contains(p.body, `id="scheduled"`) || !strings.Contains(p.body, shown) || !strings.Contains(p.body, `id="deliver-at"`) {
		t.Errorf("the scheduled delivery's page does not show its time:\n%s", p.body)
	}
	if p := b.get("/console/t/acme/events/" + sched.ID); !strings.Contains(p.body, `id="deliver-at"`) || !strings.Contains(p.body, shown) {
		t.Errorf("the scheduled event's page does not show its time:\n%s", p.body)
	}
	for _, path := range []string{"/console/t/acme/deliveries/" + plain.Deliveries[0].ID, "/console/t/acme/events/" + plain.ID} {
		if p := b.get(path); strings.Contains(p.body, "scheduled for") || strings.Contains(p.body, `id="deliver-at"`) {
			t.Errorf("%s (not scheduled) shows a schedule:\n%s", path, p.body)
		}
	}
}
