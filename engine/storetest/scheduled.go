package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// scheduledTests hold a store to what deliver_at needs of it: a
// scheduled event and its deliveries keep their time, the deliveries are
// in the retry index at it (so a restarted node's timers have them), a
// scheduler does not offer them before it and does after, and a
// duplicate ingest answers the first event's time.
var scheduledTests = []test{
	{"a scheduled event and its deliveries keep deliver_at, due then", testScheduledStored},
	{"a scheduled delivery is not offered before its time, and is after", testScheduledDue},
	{"an idempotent repeat at another deliver_at conflicts", testScheduledIdempotency},
	{"a scheduled event keeps deliver_at without deliveries, in the event feed too", testScheduledEventOnly},
}

// scheduledEvent prepares an event of typ for tenant as the service
// does, created at t0 and scheduled for at, with key (none: "").
func scheduledEvent(t *testing.T, tenant, typ, key string, at time.Time) engine.NewEvent {
	t.Helper()
	ne, err := engine.PrepareEvent(tenant, engine.IngestInput{Type: typ, Data: []byte(`{"s":1}`), IdempotencyKey: key, DeliverAt: at},
		engine.IngestOptions{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	return ne
}

func testScheduledStored(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	at := t0.Add(90 * time.Minute).Truncate(time.Millisecond)
	res := f.ingest(t, scheduledEvent(t, "acme", typ, "", at))
	plain := f.deliver(t, ep, typ)
	if !plain.DeliverAt.IsZero() {
		t.Errorf("an unscheduled delivery reads back deliver_at %v", plain.DeliverAt)
	}
	ev, ds, err := f.s.Event(t.Context(), "acme", res.Event.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "the event's deliver_at", ev.DeliverAt, at)
	if len(ds) != 1 {
		t.Fatalf("%d deliveries, want 1", len(ds))
	}
	d := ds[0]
	wantEqual(t, "the delivery's state", d.State, engine.StatePending)
	wantEqual(t, "the delivery's deliver_at", d.DeliverAt, at)
	wantEqual(t, "its next attempt", d.NextAttemptAt, at)
	wantEqual(t, "its cycle start", d.CycleStart, at)
	if got, err := f.s.Delivery(t.Context(), "acme", d.ID); err != nil || !got.DeliverAt.Equal(at) {
		t.Errorf("Delivery: deliver_at %v, %v; want %v", got.DeliverAt, err, at)
	}
	var due []time.Time
	if err := f.s.RetryIndex(t.Context(), func(e engine.RetryEntry) error {
		if e.DeliveryID == d.ID {
			due = append(due, e.Due)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "its retry index entries", due, []time.Time{at})
	// A listing carries it too.
	page, _, err := f.s.ListDeliveries(t.Context(), "acme", engine.DeliveryFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(page, func(x engine.Delivery) bool { return x.ID == d.ID })
	if i < 0 || !page[i].DeliverAt.Equal(at) {
		t.Errorf("the delivery log shows %v", page)
	}
}

func testScheduledDue(t *testing.T, f *fixture) {
	start := time.Now()
	f.tenant(t, "acme")
	_, typ := f.lane(t, "acme")
	// The suite's schedulers see t0+1h as now: a local one from when
	// f.scheduler recovers (after start), a store's own clock (the
	// postgres harness's) from when the store opened (a moment before
	// start). So this delivery is due about 2 s after start, give or
	// take how long the store took to open: not in the first second,
	// and by the fifth.
	at := t0.Add(time.Hour + 2*time.Second)
	res := f.ingest(t, scheduledEvent(t, "acme", typ, "", at))
	id := res.Deliveries[0].ID
	s, n := f.scheduler(t)
	if n != 1 {
		t.Errorf("recovered %d pending, want 1", n)
	}
	if got := claim(t, s, time.Until(start.Add(time.Second))); len(got) != 0 {
		t.Fatalf("offered %v %s after start, before its time", workIDs(got), time.Since(start))
	}
	got := claim(t, s, 5*time.Second)
	if !slices.Equal(workIDs(got), []string{id}) {
		t.Fatalf("after its time: offered %v, want %s", workIDs(got), id)
	}
	// Not 1.5 s: under load a store may open well before start, and its
	// clock runs from then (CI once saw 1.38 s).
	if el := time.Since(start); el < time.Second {
		t.Errorf("offered %s after start, before its time (about 2 s)", el)
	}
}

func testScheduledIdempotency(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	_, typ := f.lane(t, "acme")
	at := t0.Add(time.Hour).Truncate(time.Millisecond)
	first := f.ingest(t, scheduledEvent(t, "acme", typ, "k", at))
	dup := f.ingest(t, scheduledEvent(t, "acme", typ, "k", at))
	if !dup.Duplicate || dup.Event.ID != first.Event.ID {
		t.Fatalf("the same request again: %+v, want the first, a duplicate", dup)
	}
	wantEqual(t, "the duplicate's deliver_at", dup.Event.DeliverAt, at)
	_, err := f.appendEvent(t, scheduledEvent(t, "acme", typ, "k", at.Add(time.Second)))
	if engine.ErrorCode(err) != engine.CodeIdempotencyConflict {
		t.Fatalf("another deliver_at: %v, want an idempotency conflict", err)
	}
	unscheduled := scheduledEvent(t, "acme", typ, "k", time.Time{})
	if _, err := f.appendEvent(t, unscheduled); engine.ErrorCode(err) != engine.CodeIdempotencyConflict {
		t.Fatalf("no deliver_at: %v, want an idempotency conflict", err)
	}
}

// testScheduledEventOnly: the event itself keeps its deliver_at, not only
// its deliveries: an event no endpoint takes answers it from Event and
// from the event feed (ListEvents), as one that has deliveries does.
func testScheduledEventOnly(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	_, typ := f.lane(t, "acme")
	f.eventType(t, "nobody.listened")
	at := t0.Add(2 * time.Hour).Truncate(time.Millisecond)
	lone := f.ingest(t, scheduledEvent(t, "acme", "nobody.listened", "", at))
	if len(lone.Deliveries) != 0 {
		t.Fatalf("%d deliveries of a type no endpoint takes, want 0", len(lone.Deliveries))
	}
	wantEqual(t, "the ingest's deliver_at", lone.Event.DeliverAt, at)
	taken := f.ingest(t, scheduledEvent(t, "acme", typ, "", at.Add(time.Minute)))
	ev, _, err := f.s.Event(t.Context(), "acme", lone.Event.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "Event's deliver_at", ev.DeliverAt, at)
	page, _, err := f.s.ListEvents(t.Context(), "acme", engine.EventFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Time{lone.Event.ID: at, taken.Event.ID: at.Add(time.Minute)}
	for _, e := range page {
		if w, ok := want[e.ID]; ok {
			wantEqual(t, "the feed's deliver_at of "+e.Type, e.DeliverAt, w)
			delete(want, e.ID)
		}
	}
	if len(want) != 0 {
		t.Errorf("the feed left out %v", want)
	}
}
