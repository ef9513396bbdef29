package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// backfillTests hold a store to Log.Backfill: a step makes a delivery to
// the endpoint for exactly the events it wants (BackfillStep.Wants: in
// the range, not a test event, the endpoint's types and channels) that
// have none to it, in log order, stored as ingest stores one; it counts
// those that had one and those over Max; it reads at most Scan events
// and says where to go on; and the check and the write are one
// transaction, so steps at once make each delivery once.
var backfillTests = []test{
	{"a backfill makes exactly the missing deliveries, stored as ingest's", testBackfillExact},
	{"a second backfill makes none", testBackfillAgain},
	{"types, channels, test events and the range decide, as at ingest", testBackfillFilter},
	{"Max bounds the deliveries made; the rest are counted and made later", testBackfillMax},
	{"Scan bounds the events one step reads, and Next goes on from there", testBackfillScan},
	{"backfills at once make each delivery once", testBackfillConcurrent},
	{"an ordered endpoint's backfilled deliveries join its lines in sequence order", testBackfillOrdered},
	{"a disabled endpoint's backfilled deliveries are held", testBackfillDisabled},
	{"an unknown endpoint, or another tenant's, is not found", testBackfillNotFound},
}

// backfillT0 is the time the suite's backfill events are created from,
// apart from the others' (newEvent's clock) so that ranges are exact.
var backfillT0 = t0.Add(24 * time.Hour)

// backfillStep is a step of a backfill of ep over [since, until) made at
// at, with no bound on what it makes.
func backfillStep(ep engine.Endpoint, since, until, at time.Time) engine.BackfillStep {
	return engine.BackfillStep{
		Tenant: ep.TenantID, EndpointID: ep.ID, Since: since, Until: until,
		Scan: 1000, Max: 1000, At: at, By: "token tok_storetest",
	}
}

// backfill runs step and the steps after it, as a backfill task does
// (with the same Max each), and returns what they made and counted.
func (f *fixture) backfill(t *testing.T, step engine.BackfillStep) (created []engine.Delivery, existing, missing int) {
	t.Helper()
	created = []engine.Delivery{}
	for steps := 0; ; steps++ {
		if steps > 1000 {
			t.Fatalf("Backfill(%+v) does not end", step)
		}
		res, err := f.s.Backfill(t.Context(), step)
		if err != nil {
			t.Fatalf("Backfill: %v", err)
		}
		if res.Created == nil {
			t.Fatal("Backfill answered Created nil, want [] when it made none")
		}
		if len(res.Created) > step.Max {
			t.Fatalf("Backfill with Max %d made %d", step.Max, len(res.Created))
		}
		created = append(created, res.Created...)
		existing, missing = existing+res.Existing, missing+res.Missing
		if res.Next == 0 {
			return created, existing, missing
		}
		if res.Next <= step.After {
			t.Fatalf("Backfill after %d answered Next %d: not forward", step.After, res.Next)
		}
		step.After = res.Next
	}
}

// ingestAt ingests an event of typ for tenant created at at, on
// channels, and returns it.
func (f *fixture) ingestAt(t *testing.T, tenant, typ string, at time.Time, channels ...string) engine.IngestResult {
	t.Helper()
	in := newEventAt(tenant, typ, fmt.Sprintf(`{"at":%q}`, at.Format(time.RFC3339Nano)), at)
	in.Event.Channels = channels
	return f.ingest(t, in)
}

// deliveriesTo returns the deliveries of event id of tenant to endpoint
// ep, as stored.
func (f *fixture) deliveriesTo(t *testing.T, tenant, id, ep string) []engine.Delivery {
	t.Helper()
	_, ds, err := f.s.Event(t.Context(), tenant, id)
	if err != nil {
		t.Fatalf("Event(%s): %v", id, err)
	}
	var out []engine.Delivery
	for _, d := range ds {
		if d.EndpointID == ep {
			out = append(out, d)
		}
	}
	return out
}

// byEvent returns the event IDs of ds, in their order.
func byEvent(ds []engine.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.EventID
	}
	return out
}

func testBackfillExact(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	typ := "backfill" + engine.NewID("t")[2:] + ".created"
	f.eventType(t, typ)
	old := f.endpoint(t, "acme", typ) // receives them all at ingest
	var before []engine.IngestResult
	for i := range 4 {
		before = append(before, f.ingestAt(t, "acme", typ, backfillT0.Add(time.Duration(i)*time.Second), "ch"))
	}
	ep := f.endpoint(t, "acme", typ)
	after := f.ingestAt(t, "acme", typ, backfillT0.Add(10*time.Second))
	if len(after.Deliveries) != 2 {
		t.Fatalf("the event after the endpoint has %d deliveries, want 2", len(after.Deliveries))
	}

	at := backfillT0.Add(time.Hour + 7*time.Nanosecond)
	created, existing, missing := f.backfill(t, backfillStep(ep, backfillT0, backfillT0.Add(time.Minute), at))
	if existing != 1 || missing != 0 {
		t.Errorf("existing %d, missing %d; want 1 (the event ingested after the endpoint), 0", existing, missing)
	}
	want := make([]string, len(before))
	for i, res := range before {
		want[i] = res.Event.ID
	}
	wantEqual(t, "events backfilled, in log order", byEvent(created), want)
	if len(created) != len(want) {
		t.FailNow()
	}
	for i, d := range created {
		ev := before[i].Event
		w := engine.Delivery{
			ID: d.ID, TenantID: "acme", EventID: ev.ID, EventType: typ, EndpointID: ep.ID, State: engine.StatePending,
			Sequence: ev.Sequence, Channels: ev.Channels,
			Cycle: 1, CycleStart: at, NextAttemptAt: at, Created: ev.Created, Updated: at,
			Attempts: []engine.Attempt{}, Replays: []engine.Replay{},
			Backfill: &engine.Backfill{At: at, By: "token tok_storetest"},
		}
		wantEqual(t, "backfilled delivery", d, w)
		wantEqual(t, "backfilled delivery as read", f.read(t, d), w)
		got := f.deliveriesTo(t, "acme", ev.ID, ep.ID)
		wantEqual(t, "the event's deliveries to the endpoint", got, []engine.Delivery{w})
		if n := len(f.deliveriesTo(t, "acme", ev.ID, old.ID)); n != 1 {
			t.Errorf("event %s has %d deliveries to the first endpoint, want 1", ev.ID, n)
		}
	}
	f.wantPlace(t, created...)
	// The delivery log lists them under their events, created when
	// their events were.
	var live string
	for _, d := range after.Deliveries {
		if d.EndpointID == ep.ID {
			live = d.ID
		}
	}
	log := []string{live}
	for _, d := range slices.Backward(created) {
		log = append(log, d.ID)
	}
	wantEqual(t, "the endpoint's delivery log", slices.Concat(f.deliveryPages(t, "acme", engine.DeliveryFilter{EndpointID: ep.ID, Limit: 2})...), log)
	since := engine.DeliveryFilter{EndpointID: ep.ID, Since: backfillT0.Add(2 * time.Second), Limit: 2}
	wantEqual(t, "the endpoint's delivery log since the third event", slices.Concat(f.deliveryPages(t, "acme", since)...), log[:3])
	f.check(t)
}

func testBackfillAgain(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep0, typ := f.lane(t, "acme")
	for i := range 3 {
		f.ingestAt(t, "acme", typ, backfillT0.Add(time.Duration(i)*time.Second))
	}
	if err := f.s.DeleteEndpoint(t.Context(), "acme", ep0.ID); err != nil {
		t.Fatal(err)
	}
	ep := f.endpoint(t, "acme", typ)
	step := backfillStep(ep, backfillT0, backfillT0.Add(time.Hour), backfillT0.Add(2*time.Hour))
	first, _, _ := f.backfill(t, step)
	if len(first) != 3 {
		t.Fatalf("first backfill made %d, want 3", len(first))
	}
	step.At = step.At.Add(time.Minute)
	again, existing, missing := f.backfill(t, step)
	if len(again) != 0 || existing != 3 || missing != 0 {
		t.Errorf("second backfill made %d, existing %d, missing %d; want 0, 3, 0", len(again), existing, missing)
	}
	for _, d := range first {
		if n := len(f.deliveriesTo(t, "acme", d.EventID, ep.ID)); n != 1 {
			t.Errorf("event %s has %d deliveries to the endpoint, want 1", d.EventID, n)
		}
	}
	// A replay or a success changes nothing of it.
	f.settle(t, first[0], engine.StateSucceeded, step.At, time.Time{})
	if again, existing, _ := f.backfill(t, step); len(again) != 0 || existing != 3 {
		t.Errorf("after a success: made %d, existing %d; want 0, 3", len(again), existing)
	}
}

func testBackfillFilter(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "other")
	typ := "backfill" + engine.NewID("t")[2:] + ".created"
	otherTyp := "backfill" + engine.NewID("t")[2:] + ".deleted"
	f.eventType(t, typ)
	f.eventType(t, otherTyp)
	since, until := backfillT0.Add(time.Minute), backfillT0.Add(2*time.Minute)
	at := func(s int) time.Time { return since.Add(time.Duration(s) * time.Second) }

	f.ingestAt(t, "acme", typ, since.Add(-time.Nanosecond), "a")
	atSince := f.ingestAt(t, "acme", typ, since, "a")
	onA := f.ingestAt(t, "acme", typ, at(1), "a")
	onAB := f.ingestAt(t, "acme", typ, at(2), "b", "a")
	f.ingestAt(t, "acme", typ, at(3), "b")
	f.ingestAt(t, "acme", typ, at(4)) // on no channel
	f.ingestAt(t, "acme", otherTyp, at(5), "a")
	f.ingestAt(t, "other", typ, at(6), "a")
	test := newEventAt("acme", typ, `{}`, at(7))
	test.Event.Test, test.Event.Channels = true, []string{"a"}
	f.ingest(t, test)
	f.ingestAt(t, "acme", typ, until, "a")
	// After the range by less than a minute: read, and left out.
	f.ingestAt(t, "acme", typ, until.Add(30*time.Second), "a")

	ep := newEndpoint("acme", typ)
	ep.Channels = []string{"a"}
	if err := f.s.CreateEndpoint(t.Context(), ep, 0); err != nil {
		t.Fatal(err)
	}
	created, existing, missing := f.backfill(t, backfillStep(ep, since, until, until.Add(time.Hour)))
	wantEqual(t, "events backfilled", byEvent(created), []string{atSince.Event.ID, onA.Event.ID, onAB.Event.ID})
	if existing != 0 || missing != 0 {
		t.Errorf("existing %d, missing %d; want 0, 0", existing, missing)
	}
	for _, d := range created {
		if d.Test {
			t.Errorf("delivery %s is marked test", d.ID)
		}
	}

	// Every type ("*") and no channel filter: every event of the
	// tenant in the range but the test event.
	all := f.endpoint(t, "acme", "*")
	created, _, _ = f.backfill(t, backfillStep(all, since, until, until.Add(time.Hour)))
	if len(created) != 6 {
		t.Errorf("a backfill of an endpoint of every type made %d (events %v), want 6", len(created), byEvent(created))
	}
}

func testBackfillMax(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep0, typ := f.lane(t, "acme")
	if err := f.s.DeleteEndpoint(t.Context(), "acme", ep0.ID); err != nil {
		t.Fatal(err)
	}
	var evs []string
	for i := range 5 {
		evs = append(evs, f.ingestAt(t, "acme", typ, backfillT0.Add(time.Duration(i)*time.Second)).Event.ID)
	}
	ep := f.endpoint(t, "acme", typ)
	step := backfillStep(ep, backfillT0, backfillT0.Add(time.Hour), backfillT0.Add(2*time.Hour))

	step.Max = 0
	created, existing, missing := f.backfill(t, step)
	if len(created) != 0 || existing != 0 || missing != 5 {
		t.Errorf("Max 0: made %d, existing %d, missing %d; want 0, 0, 5", len(created), existing, missing)
	}
	f.wantHeld(t, "acme", engine.Held{}, engine.Held{})
	if ix := f.retryIndex(t); len(ix) != 0 {
		t.Errorf("Max 0 wrote %d retry index entries", len(ix))
	}

	step.Max = 2
	created, existing, missing = f.backfill(t, step)
	wantEqual(t, "Max 2 made, in log order", byEvent(created), evs[:2])
	if existing != 0 || missing != 3 {
		t.Errorf("Max 2: existing %d, missing %d; want 0, 3", existing, missing)
	}
	step.Max = 1000
	rest, existing, missing := f.backfill(t, step)
	wantEqual(t, "the next backfill made", byEvent(rest), evs[2:])
	if existing != 2 || missing != 0 {
		t.Errorf("then: existing %d, missing %d; want 2, 0", existing, missing)
	}
}

func testBackfillScan(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep0, typ := f.lane(t, "acme")
	other := "backfill" + engine.NewID("t")[2:] + ".other"
	f.eventType(t, other)
	if err := f.s.DeleteEndpoint(t.Context(), "acme", ep0.ID); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 7 {
		at := backfillT0.Add(time.Duration(i) * time.Second)
		if i%3 == 1 {
			f.ingestAt(t, "acme", other, at)
			continue
		}
		want = append(want, f.ingestAt(t, "acme", typ, at).Event.ID)
	}
	ep := f.endpoint(t, "acme", typ)
	step := backfillStep(ep, backfillT0, backfillT0.Add(time.Hour), backfillT0.Add(2*time.Hour))
	step.Scan = 2
	res, err := f.s.Backfill(t.Context(), step)
	if err != nil {
		t.Fatal(err)
	}
	if res.Next == 0 || len(res.Created) != 1 {
		t.Fatalf("a step of 2 of 7 events made %d, Next %d; want 1 (the other is of another type) and a place to go on from", len(res.Created), res.Next)
	}
	step.After = res.Next
	rest, _, _ := f.backfill(t, step)
	wantEqual(t, "events backfilled 2 by 2", byEvent(append(res.Created, rest...)), want)
}

func testBackfillConcurrent(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep0, typ := f.lane(t, "acme")
	if err := f.s.DeleteEndpoint(t.Context(), "acme", ep0.ID); err != nil {
		t.Fatal(err)
	}
	const events, callers = 30, 6
	for i := range events {
		f.ingestAt(t, "acme", typ, backfillT0.Add(time.Duration(i)*time.Millisecond))
	}
	ep := f.endpoint(t, "acme", typ)
	step := backfillStep(ep, backfillT0, backfillT0.Add(time.Hour), backfillT0.Add(2*time.Hour))
	step.Scan, step.Max = 7, 7
	var wg sync.WaitGroup
	made := make([][]engine.Delivery, callers)
	errs := make([]error, callers)
	for c := range callers {
		wg.Go(func() {
			s := step
			for range 100 {
				res, err := f.s.Backfill(t.Context(), s)
				if err != nil {
					errs[c] = err
					return
				}
				made[c] = append(made[c], res.Created...)
				if res.Next == 0 {
					return
				}
				s.After = res.Next
			}
			errs[c] = fmt.Errorf("caller %d: no end", c)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	all := slices.Concat(made...)
	if len(all) != events {
		t.Errorf("%d backfills at once made %d deliveries, want %d", callers, len(all), events)
	}
	seen := map[string]bool{}
	for _, d := range all {
		if seen[d.EventID] {
			t.Errorf("event %s backfilled twice", d.EventID)
		}
		seen[d.EventID] = true
		if n := len(f.deliveriesTo(t, "acme", d.EventID, ep.ID)); n != 1 {
			t.Errorf("event %s has %d deliveries to the endpoint, want 1", d.EventID, n)
		}
	}
}

func testBackfillOrdered(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadSkip)
	if err := f.s.DeleteEndpoint(t.Context(), "acme", ep.ID); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		f.ingestAt(t, "acme", typ, backfillT0.Add(time.Duration(i)*time.Second))
	}
	// A new ordered endpoint, with a head of its own from an event
	// ingested after it: the backfilled ones wait behind it.
	ep = newEndpoint("acme", typ)
	ep.Ordering = engine.OrderingEndpoint
	if err := f.s.CreateEndpoint(t.Context(), ep, 0); err != nil {
		t.Fatal(err)
	}
	live := f.ingestAt(t, "acme", typ, backfillT0.Add(10*time.Second)).Deliveries
	live = append(live, f.ingestAt(t, "acme", typ, backfillT0.Add(11*time.Second)).Deliveries...)
	if len(live) != 2 || live[0].State != engine.StatePending || live[1].State != engine.StateWaiting {
		t.Fatalf("live deliveries %+v, want a head and one waiting", live)
	}
	at := backfillT0.Add(time.Hour)
	created, _, _ := f.backfill(t, backfillStep(ep, backfillT0, backfillT0.Add(time.Minute), at))
	if len(created) != 3 {
		t.Fatalf("backfill made %d, want 3", len(created))
	}
	for i, d := range created {
		if d.Line != engine.LineEndpoint || d.Sequence == 0 || i > 0 && d.Sequence <= created[i-1].Sequence {
			t.Errorf("backfilled %d: line %q, sequence %d", i, d.Line, d.Sequence)
		}
	}
	f.wantWaiting(t, live[0].ID, created...)
	f.wantHeld(t, "acme", engine.Held{Waiting: 4}, engine.Held{Waiting: 4})
	f.wantPlace(t, append(created, live...)...)

	// The head's success promotes the lowest sequence: the backfilled
	// ones first, in order, then the newer live one.
	next := at.Add(time.Minute)
	f.settle(t, f.read(t, live[0]), engine.StateSucceeded, next, time.Time{})
	for _, want := range append(slices.Clone(created), live[1]) {
		head := f.wantPending(t, want, next)
		f.wantHead(t, ep, engine.LineEndpoint, want.ID)
		next = next.Add(time.Second)
		f.settle(t, head, engine.StateSucceeded, next, time.Time{})
	}
	f.wantHead(t, ep, engine.LineEndpoint, "")

	// A line with no head: the first backfilled becomes its head, and
	// every event of the range waits behind it in order.
	ep2 := newEndpoint("acme", typ)
	ep2.Ordering = engine.OrderingEndpoint
	if err := f.s.CreateEndpoint(t.Context(), ep2, 0); err != nil {
		t.Fatal(err)
	}
	created, _, _ = f.backfill(t, backfillStep(ep2, backfillT0, backfillT0.Add(time.Minute), at))
	if len(created) != 5 || created[0].State != engine.StatePending {
		t.Fatalf("backfill of a new line made %+v, want 5, the first pending", created)
	}
	f.wantHead(t, ep2, engine.LineEndpoint, created[0].ID)
	f.wantWaiting(t, created[0].ID, created[1:]...)
	f.wantPlace(t, created...)
}

func testBackfillDisabled(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep0, typ := f.lane(t, "acme")
	if err := f.s.DeleteEndpoint(t.Context(), "acme", ep0.ID); err != nil {
		t.Fatal(err)
	}
	f.ingestAt(t, "acme", typ, backfillT0)
	f.ingestAt(t, "acme", typ, backfillT0.Add(time.Second))
	ep := f.setEnabled(t, f.endpoint(t, "acme", typ), false, backfillT0)
	created, _, _ := f.backfill(t, backfillStep(ep, backfillT0, backfillT0.Add(time.Hour), backfillT0.Add(2*time.Hour)))
	if len(created) != 2 {
		t.Fatalf("made %d, want 2", len(created))
	}
	for _, d := range created {
		if d.State != engine.StatePaused || d.Reason != engine.ReasonPaused || !d.NextAttemptAt.IsZero() {
			t.Errorf("delivery %s to a disabled endpoint is %s (%q), want paused", d.ID, d.State, d.Reason)
		}
	}
	f.wantHeld(t, "acme", engine.Held{Paused: 2}, engine.Held{Paused: 2})
	f.wantPlace(t, created...)
	wantEqual(t, "paused deliveries", ids(f.takePaused(t, ep, backfillT0.Add(3*time.Hour))), sorted(ids(created)))
}

func testBackfillNotFound(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "other")
	ep, _ := f.lane(t, "other")
	step := backfillStep(ep, backfillT0, backfillT0.Add(time.Hour), backfillT0)
	step.Tenant = "acme"
	_, err := f.s.Backfill(t.Context(), step)
	wantError(t, err, engine.EndpointNotFound())
	step.Tenant, step.EndpointID = "other", "ep_nope"
	_, err = f.s.Backfill(t.Context(), step)
	wantError(t, err, engine.EndpointNotFound())
	step.Tenant = "nobody"
	_, err = f.s.Backfill(t.Context(), step)
	wantError(t, err, engine.EndpointNotFound())
}
