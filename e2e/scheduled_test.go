package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// scheduledSlack is how late after its deliver_at a scheduled event may
// arrive: the "within a second of its time".
const scheduledSlack = time.Second

// ingestScheduled sends an event of payment.succeeded scheduled for at
// and checks the answer carries it.
func ingestScheduled(t *testing.T, in *instance, at time.Time, n int) ingestResponse {
	t.Helper()
	var res struct {
		ingestResponse
		DeliverAt time.Time `json:"deliver_at"`
	}
	body := fmt.Sprintf(`{"type":"payment.succeeded","data":{"n":%d},"deliver_at":%q}`, n, at.Format(time.RFC3339Nano))
	in.mustCall(202, "POST", "/v1/tenants/acme/events", body, &res)
	if !res.DeliverAt.Equal(at.Truncate(time.Millisecond)) || len(res.Deliveries) != 1 {
		t.Fatalf("ingest answered deliver_at %v, %d deliveries; want %v, one", res.DeliverAt, len(res.Deliveries), at)
	}
	return res.ingestResponse
}

// arrivals waits until rc has had n requests or limit passes, and
// returns what it had.
func arrivals(rc *receiver, n int, limit time.Duration) []received {
	poll(limit, func() bool { return len(rc.got()) >= n })
	return rc.got()
}

// checkOnTime fails t unless rc got exactly one request, for event id, no
// earlier than at and within scheduledSlack after it.
func checkOnTime(t *testing.T, got []received, id string, at time.Time) {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("the receiver got %d requests, want 1", len(got))
	}
	if got[0].sigErr != nil {
		t.Errorf("signature: %v", got[0].sigErr)
	}
	if env := envelopeID(t, got[0].body); env != id {
		t.Errorf("the receiver got event %s, want %s", env, id)
	}
	// webhookd keeps deliver_at to the millisecond: the time it was
	// asked for, cut, is the one it must not deliver before.
	at = at.Truncate(time.Millisecond)
	if early := at.Sub(got[0].at); early > 0 {
		t.Errorf("delivered %s before its deliver_at", early)
	}
	if late := got[0].at.Sub(at); late > scheduledSlack {
		t.Errorf("delivered %s after its deliver_at, want within %s", late, scheduledSlack)
	}
	t.Logf("delivered %s after its deliver_at", got[0].at.Sub(at).Round(time.Millisecond))
}

// TestScheduled_DeliveredAtItsTime runs the binary with a loopback
// receiver: an event with deliver_at 2 s ahead is pending and shown
// "scheduled" until then, arrives within a second of its time and not
// before, once; an unscheduled event sent after it arrives at once.
func TestScheduled_DeliveredAtItsTime(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	rc := newReceiver(t, status(http.StatusOK))
	ep := in.createEndpoint(rc.srv.URL+"/hooks", "payment.succeeded")
	rc.setSecret(ep.Secret)

	at := time.Now().Add(2 * time.Second)
	res := ingestScheduled(t, in, at, 1)
	if d := in.delivery(res.Deliveries[0].ID); d.State != "pending" || len(d.Attempts) != 0 {
		t.Fatalf("the scheduled delivery is %s with %d attempts, want pending with none", d.State, len(d.Attempts))
	}

	// Not in its way: an unscheduled event goes at once.
	now := in.ingest("payment.succeeded", `{"n":2}`)
	first := arrivals(rc, 1, 5*time.Second)
	if len(first) != 1 || envelopeID(t, first[0].body) != now.ID || !first[0].at.Before(at) {
		t.Fatalf("the unscheduled event: got %d requests (first at %v), want it before %v", len(first), first, at)
	}

	arrivals(rc, 2, time.Until(at)+5*time.Second)
	time.Sleep(300 * time.Millisecond) // a second attempt would show by now
	checkOnTime(t, rc.got()[1:], res.ID, at)
	in.waitState(res.Deliveries[0].ID, "succeeded")
}

// TestScheduled_SurvivesKillNine ingests an event scheduled 3 s ahead,
// kills the binary with SIGKILL at once, starts it again on the same
// database, and checks that the event still arrives once, within a
// second of its time and not before.
func TestScheduled_SurvivesKillNine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := startInstance(t, dir, testConfig)
	in.setup()
	rc := newReceiver(t, status(http.StatusOK))
	ep := in.createEndpoint(rc.srv.URL+"/hooks", "payment.succeeded")
	rc.setSecret(ep.Secret)

	at := time.Now().Add(3 * time.Second)
	res := ingestScheduled(t, in, at, 1)
	n := in.node
	in.node = nil // killed here, not stopped at the end
	n.kill()
	killed := time.Now()
	if got := rc.got(); len(got) != 0 {
		t.Fatalf("the receiver got %d requests before the kill", len(got))
	}

	again := startInstance(t, dir, testConfig)
	t.Logf("restarted %s after the kill, %s before deliver_at", time.Since(killed).Round(time.Millisecond), time.Until(at).Round(time.Millisecond))
	if time.Until(at) <= 0 {
		t.Skip("the restart took longer than the schedule: nothing left to check on time")
	}
	arrivals(rc, 1, time.Until(at)+5*time.Second)
	time.Sleep(500 * time.Millisecond) // a second delivery would show by now
	checkOnTime(t, rc.got(), res.ID, at)
	again.waitState(res.Deliveries[0].ID, "succeeded")
}

// envelopeID returns the id of the envelope body.
func envelopeID(t *testing.T, body []byte) string {
	t.Helper()
	var env struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("envelope %q: %v", body, err)
	}
	return env.ID
}

// TestScheduled_OrderedLineWaits: on an endpoint ordered as one line, an
// event scheduled 2 s ahead holds the events sent after it: they arrive
// after it, in order, and it arrives on time.
func TestScheduled_OrderedLineWaits(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	rc := newReceiver(t, status(http.StatusOK))
	var ep endpointCreated
	in.mustCall(201, "POST", "/v1/tenants/acme/endpoints", map[string]any{"url": rc.srv.URL + "/hooks", "event_types": []string{"payment.succeeded"}, "ordering": "endpoint"}, &ep)
	rc.setSecret(ep.Secret)

	at := time.Now().Add(2 * time.Second)
	first := ingestScheduled(t, in, at, 1)
	second := in.ingest("payment.succeeded", `{"n":2}`)
	if d := in.delivery(second.Deliveries[0].ID); d.State != "waiting" {
		t.Errorf("the event after the scheduled one is %s, want waiting", d.State)
	}
	got := arrivals(rc, 2, time.Until(at)+5*time.Second)
	if len(got) != 2 {
		t.Fatalf("the receiver got %d requests, want 2", len(got))
	}
	checkOnTime(t, got[:1], first.ID, at)
	if id := envelopeID(t, got[1].body); id != second.ID || got[1].at.Before(got[0].at) {
		t.Errorf("second request: event %s at %v, want %s after the scheduled one", id, got[1].at, second.ID)
	}

	// Behind an unscheduled head, a scheduled event reaches the head
	// early (once the head is delivered) and waits there for its time,
	// and the line with it.
	head := in.ingest("payment.succeeded", `{"n":3}`)
	at = time.Now().Add(1500 * time.Millisecond)
	mid := ingestScheduled(t, in, at, 4)
	tail := in.ingest("payment.succeeded", `{"n":5}`)
	got = arrivals(rc, 5, time.Until(at)+5*time.Second)
	if len(got) != 5 {
		t.Fatalf("the receiver got %d requests, want 5", len(got))
	}
	if id := envelopeID(t, got[2].body); id != head.ID || !got[2].at.Before(at) {
		t.Errorf("third request: event %s at %v, want %s before %v", id, got[2].at, head.ID, at)
	}
	checkOnTime(t, got[3:4], mid.ID, at)
	if id := envelopeID(t, got[4].body); id != tail.ID || got[4].at.Before(got[3].at) {
		t.Errorf("fifth request: event %s, want %s after the scheduled one", id, tail.ID)
	}
}
