package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// fanOutTests hold a store to the contract of an owed fan-out
// (engine.Log.AppendEvent, FanOut): whether a store leaves the fan-out
// owed or stores it with the event, the deliveries an acknowledgement
// names are the ones stored, to the endpoints as they were at the
// acknowledgement, once each, whatever happens between the two (a
// repeat, a change of endpoints, a deleted tenant, a crash).
var fanOutTests = []test{
	{"the deliveries an ingest answers are the ones FanOut stores", testOwedStored},
	{"a repeat during the fan-out answers the deliveries planned; none is made twice", testOwedRepeat},
	{"the endpoints at the acknowledgement get the event, not those created or deleted after", testOwedEndpointsAtAck},
	{"a crash between the acknowledgement and the fan-out loses nothing (reopen)", testOwedCrash},
	{"a tenant deleted before its fan-out gets no delivery, and its purge leaves nothing", testOwedTenantDeleted},
	{"retention keeps an event whose fan-out is owed", testOwedRetention},
	{"a backfill counts an owed delivery as made and makes none twice", testOwedBackfill},
	{"the pending bounds see nothing of an owed fan-out in the store; FanOut with none owed stores none", testOwedNothing},
}

// owedIngest ingests events to tenant's endpoints without storing the
// fan-out (as the moment between an acknowledgement and its fan-out).
func (f *fixture) owedIngest(t *testing.T, in engine.NewEvent) engine.IngestResult {
	t.Helper()
	res, err := f.s.AppendEvent(t.Context(), in)
	if err != nil {
		t.Fatalf("AppendEvent: %v", err)
	}
	for _, d := range res.Deliveries {
		if d.State != engine.StatePending && d.State != engine.StatePaused {
			t.Errorf("ingest answered delivery %s %s, want pending (or paused)", d.ID, d.State)
		}
	}
	return res
}

// wantStored fails t unless the deliveries of res's event, as stored
// and read by their IDs, are those res answered (by ID and endpoint),
// each pending and due at once, in the retry index.
func (f *fixture) wantStored(t *testing.T, res engine.IngestResult) {
	t.Helper()
	_, ds, err := f.s.Event(t.Context(), res.Event.TenantID, res.Event.ID)
	if err != nil {
		t.Fatalf("Event(%s): %v", res.Event.ID, err)
	}
	wantEqual(t, "deliveries of "+res.Event.ID, deliveryViews(ds), deliveryViews(res.Deliveries))
	indexed := map[string]bool{}
	for _, e := range f.retryIndex(t) {
		indexed[e.DeliveryID] = true
	}
	for _, d := range res.Deliveries {
		got, err := f.s.Delivery(t.Context(), d.TenantID, d.ID)
		if err != nil {
			t.Errorf("Delivery(%s) after the fan-out: %v", d.ID, err)
			continue
		}
		if got.State != engine.StatePending || !got.NextAttemptAt.Equal(res.Event.Created) || !indexed[d.ID] {
			t.Errorf("delivery %s stored %s due %v (in the retry index: %v), want pending due at %v", d.ID, got.State, got.NextAttemptAt, indexed[d.ID], res.Event.Created)
		}
	}
}

// deliveryView is what an acknowledgement promises of a delivery.
type deliveryView struct{ ID, EndpointID string }

func deliveryViews(ds []engine.Delivery) []deliveryView {
	out := make([]deliveryView, len(ds))
	for i, d := range ds {
		out[i] = deliveryView{d.ID, d.EndpointID}
	}
	slices.SortFunc(out, func(a, b deliveryView) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out
}

func testOwedStored(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	a, b := f.endpoint(t, "acme", "*"), f.endpoint(t, "acme", "order.created")
	var acks []engine.IngestResult
	for range 3 {
		res := f.owedIngest(t, newEvent("acme", "order.created", `{}`))
		if len(res.Deliveries) != 2 {
			t.Fatalf("ingest answered %d deliveries, want 2 (to %s and %s)", len(res.Deliveries), a.ID, b.ID)
		}
		// Read whole, the event has the deliveries answered, stored or not.
		_, ds, err := f.s.Event(t.Context(), "acme", res.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "deliveries of the event before its fan-out", deliveryViews(ds), deliveryViews(res.Deliveries))
		acks = append(acks, res)
	}
	f.check(t)
	done := f.fanOut(t)
	stored := map[string][]engine.Delivery{}
	var order []string
	for _, e := range done {
		stored[e.EventID] = e.Deliveries
		order = append(order, e.EventID)
	}
	var owed []string
	for _, res := range acks {
		if res.Owed {
			owed = append(owed, res.Event.ID)
			wantEqual(t, "deliveries FanOut stored for "+res.Event.ID, deliveryViews(stored[res.Event.ID]), deliveryViews(res.Deliveries))
		}
		f.wantStored(t, res)
	}
	wantEqual(t, "events FanOut stored, in order", order, owed)
}

func testOwedRepeat(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	f.endpoint(t, "acme", "*")
	f.endpoint(t, "acme", "*")
	keyed := func(at time.Time) engine.NewEvent {
		in := newEventAt("acme", "order.created", `{"k":1}`, at)
		in.IdempotencyKey, in.RequestHash, in.IdempotencyExpires = "k1", [32]byte{1}, at.Add(time.Hour)
		return in
	}
	first := f.owedIngest(t, keyed(t0))
	again := f.owedIngest(t, keyed(t0.Add(time.Second)))
	if !again.Duplicate || again.Event.ID != first.Event.ID || again.Owed != first.Owed {
		t.Fatalf("repeat = event %s duplicate %v owed %v, want the duplicate of %s, owed %v", again.Event.ID, again.Duplicate, again.Owed, first.Event.ID, first.Owed)
	}
	wantEqual(t, "deliveries the repeat answered", deliveryViews(again.Deliveries), deliveryViews(first.Deliveries))
	f.fanOut(t)
	f.wantStored(t, first)
	later := f.ingest(t, keyed(t0.Add(2*time.Second)))
	if !later.Duplicate || later.Owed {
		t.Errorf("repeat after the fan-out: duplicate %v owed %v, want a duplicate, not owed", later.Duplicate, later.Owed)
	}
	wantEqual(t, "deliveries the repeat after the fan-out answered", deliveryViews(later.Deliveries), deliveryViews(first.Deliveries))
	if n := len(f.retryIndex(t)); n != 2 {
		t.Errorf("%d deliveries in the retry index, want 2: none made twice", n)
	}
}

func testOwedEndpointsAtAck(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	kept, deleted := f.endpoint(t, "acme", "*"), f.endpoint(t, "acme", "*")
	disabled := f.endpoint(t, "acme", "*")
	res := f.owedIngest(t, newEvent("acme", "order.created", `{}`))
	// Between the acknowledgement and the fan-out: one endpoint is
	// deleted, one disabled, one created.
	if err := f.s.DeleteEndpoint(t.Context(), "acme", deleted.ID); err != nil {
		t.Fatal(err)
	}
	f.setEnabled(t, disabled, false, t0.Add(time.Second))
	late := f.endpoint(t, "acme", "*")
	f.fanOut(t)
	_, ds, err := f.s.Event(t.Context(), "acme", res.Event.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]engine.State{}
	for _, d := range ds {
		got[d.EndpointID] = d.State
	}
	want := map[string]engine.State{kept.ID: engine.StatePending, deleted.ID: engine.StatePending, disabled.ID: engine.StatePending}
	wantEqual(t, "deliveries by endpoint (the endpoints at the acknowledgement)", got, want)
	if _, ok := got[late.ID]; ok {
		t.Errorf("endpoint %s, created after the acknowledgement, got the event", late.ID)
	}
	f.wantStored(t, res)
}

func testOwedCrash(t *testing.T, f *fixture) {
	if f.h.Reopen == nil {
		t.Skip("the store cannot be reopened (Harness.Reopen)")
	}
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	f.endpoint(t, "acme", "*")
	f.endpoint(t, "acme", "*")
	var acks []engine.IngestResult
	for range 5 {
		acks = append(acks, f.owedIngest(t, newEvent("acme", "order.created", `{}`)))
	}
	f.s = f.h.Reopen(t, f.s) // the process stopped before any fan-out
	// Before anything claims work, the deliveries are stored: the
	// retry index has them, with nothing left to fan out.
	for _, res := range acks {
		f.wantStored(t, res)
	}
	if done := f.fanOut(t); len(done) != 0 {
		t.Errorf("FanOut after the reopen stored %d fan-outs, want none: they were stored at the start", len(done))
	}
	if n := len(f.retryIndex(t)); n != 10 {
		t.Errorf("%d deliveries in the retry index, want 10", n)
	}
	f.check(t)
	f.closed = true // the reopened store is the harness's to close (and check)
}

func testOwedTenantDeleted(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	f.eventType(t, "order.created")
	f.endpoint(t, "acme", "*")
	f.endpoint(t, "globex", "*")
	gone := f.owedIngest(t, newEvent("acme", "order.created", `{}`))
	kept := f.owedIngest(t, newEvent("globex", "order.created", `{}`))
	f.deleteTenant(t, "acme", t0.Add(time.Second))
	for _, e := range f.fanOut(t) {
		if e.TenantID == "acme" && len(e.Deliveries) != 0 {
			t.Errorf("FanOut stored %d deliveries of deleted tenant acme's event %s", len(e.Deliveries), e.EventID)
		}
	}
	for _, e := range f.retryIndex(t) {
		if slices.ContainsFunc(gone.Deliveries, func(d engine.Delivery) bool { return d.ID == e.DeliveryID }) {
			t.Errorf("deleted tenant's delivery %s is in the retry index", e.DeliveryID)
		}
	}
	f.wantStored(t, kept)
}

func testOwedRetention(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	f.endpoint(t, "acme", "*")
	res := f.owedIngest(t, newEvent("acme", "order.created", `{}`))
	// Everything that is final and older than far in the future goes.
	far := t0.Add(1000 * time.Hour)
	pruned := f.prune(t, engine.Retention{SucceededBefore: far, DeadBefore: far}, 10)
	if pruned.Events != 0 {
		t.Fatalf("retention deleted %d events, want none: the only event's deliveries are still to be made", pruned.Events)
	}
	f.fanOut(t)
	f.wantStored(t, res)
}

func testOwedBackfill(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	ep := f.endpoint(t, "acme", "*")
	res := f.owedIngest(t, newEvent("acme", "order.created", `{}`))
	created, existing, _ := f.backfill(t, backfillStep(ep, t0.Add(-time.Hour), t0.Add(1000*time.Hour), t0.Add(1000*time.Hour)))
	if len(created) != 0 || existing != 1 {
		t.Errorf("backfill made %d and found %d existing, want none made and 1 existing", len(created), existing)
	}
	f.fanOut(t)
	f.wantStored(t, res)
	if got := f.deliveriesTo(t, "acme", res.Event.ID, ep.ID); len(got) != 1 {
		t.Errorf("event has %d deliveries to %s, want 1", len(got), ep.ID)
	}
}

func testOwedNothing(t *testing.T, f *fixture) {
	if done, err := f.s.FanOut(t.Context(), 10); err != nil || len(done) != 0 {
		t.Fatalf("FanOut of an empty store = %v, %v; want none", done, err)
	}
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	f.endpoint(t, "acme", "*")
	f.owedIngest(t, newEvent("acme", "order.created", `{}`))
	f.fanOut(t)
	if done, err := f.s.FanOut(t.Context(), 10); err != nil || len(done) != 0 {
		t.Errorf("FanOut with every fan-out stored = %v, %v; want none", done, err)
	}
	f.wantHeld(t, "acme", engine.Held{}, engine.Held{})
}
