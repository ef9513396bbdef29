package storetest

import (
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// lineTests hold a store to the line rules of engine/lines.go: the store
// settles every ordered delivery it saves in its line and promotes the
// next when a head leaves, in the same transaction.
var lineTests = []test{
	{"an ordered delivery waits behind its line's head, out of the retry index", testLineEnter},
	{"ordering key: one line per key; an event without a key is not ordered", testLineKeys},
	{"the head's success promotes the lowest waiting delivery, due at once in a fresh cycle start", testLineAdvance},
	{"a head dead on a skip line records the skip and the line goes on", testLineDeadSkip},
	{"a head dead on a block line holds it until skipped; only a blocking head can be skipped", testLineBlock},
	{"a blocking head replayed stays the head; its success moves the line", testLineBlockReplay},
	{"a replayed delivery waits behind the head, and is promoted by its sequence", testLineReplayOrder},
	{"a range replay makes the lowest sequence of a line its head", testLineRangeReplay},
	{"a held head dropped (enabled from now on) moves the line whatever on_dead says", testLineDrop},
	{"a head whose endpoint is deleted dies and the line goes on", testLineEndpointDeleted},
	{"a deleted tenant's lines go with it", testLineTenantPurge},
}

// orderedLane is lane with ep's ordering and on_dead set.
func (f *fixture) orderedLane(t *testing.T, tenant string, ordering engine.Ordering, onDead engine.OnDead) (engine.Endpoint, string) {
	t.Helper()
	typ := "ordered" + engine.NewID("t")[2:] + ".created"
	f.eventType(t, typ)
	ep := newEndpoint(tenant, typ)
	ep.Ordering, ep.OnDead = ordering, onDead
	if err := f.s.CreateEndpoint(t.Context(), ep, 0); err != nil {
		t.Fatalf("CreateEndpoint: %v", err)
	}
	return ep, typ
}

// deliverKeyed is deliver of an event with ordering key key.
func (f *fixture) deliverKeyed(t *testing.T, ep engine.Endpoint, typ, key string) engine.Delivery {
	t.Helper()
	in := newEvent(ep.TenantID, typ, `{"n":1}`)
	in.Event.OrderingKey = key
	res := f.ingest(t, in)
	if len(res.Deliveries) != 1 || res.Deliveries[0].EndpointID != ep.ID {
		t.Fatalf("ingest of %s made deliveries %+v, want one to %s", typ, res.Deliveries, ep.ID)
	}
	if d := res.Deliveries[0]; d.Sequence != res.Event.Sequence || d.Sequence == 0 {
		t.Fatalf("delivery Sequence %d, want its event's, %d", d.Sequence, res.Event.Sequence)
	}
	return res.Deliveries[0]
}

// line ingests n events for ep (ordering endpoint) and returns their
// deliveries in order.
func (f *fixture) line(t *testing.T, ep engine.Endpoint, typ string, n int) []engine.Delivery {
	t.Helper()
	ds := make([]engine.Delivery, n)
	for i := range ds {
		ds[i] = f.deliverKeyed(t, ep, typ, "")
	}
	return ds
}

// wantHead fails t unless the line's head is want ("": none).
func (f *fixture) wantHead(t *testing.T, ep engine.Endpoint, line, want string) {
	t.Helper()
	h, ok, err := f.s.LineHead(t.Context(), ep.ID, line)
	if err != nil {
		t.Fatalf("LineHead: %v", err)
	}
	if got := map[bool]string{true: h.ID}[ok]; got != want {
		t.Errorf("head of line %q = %q (%s), want %q", line, got, h.State, want)
	}
}

// wantWaiting fails t unless each of ds is stored Waiting behind head.
func (f *fixture) wantWaiting(t *testing.T, head string, ds ...engine.Delivery) {
	t.Helper()
	for _, d := range ds {
		got := f.read(t, d)
		if got.State != engine.StateWaiting || got.WaitingBehind != head || !got.NextAttemptAt.IsZero() {
			t.Errorf("delivery %s (sequence %d) is %s behind %q due %v, want waiting behind %s", d.ID, d.Sequence, got.State, got.WaitingBehind, got.NextAttemptAt, head)
		}
	}
}

// wantPending fails t unless d is stored Pending, due at at, its cycle
// started at at (a promotion, or a replay at at).
func (f *fixture) wantPending(t *testing.T, d engine.Delivery, at time.Time) engine.Delivery {
	t.Helper()
	got := f.read(t, d)
	if got.State != engine.StatePending || !got.NextAttemptAt.Equal(at) || !got.CycleStart.Equal(at) || got.WaitingBehind != "" {
		t.Errorf("delivery %s = %s due %v, cycle start %v, behind %q; want pending due and started at %v",
			d.ID, got.State, got.NextAttemptAt, got.CycleStart, got.WaitingBehind, at)
	}
	return got
}

func testLineEnter(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadSkip)
	ds := f.line(t, ep, typ, 3)
	if ds[0].State != engine.StatePending || ds[0].Line != engine.LineEndpoint {
		t.Errorf("first delivery %s in line %q, want pending in %q", ds[0].State, ds[0].Line, engine.LineEndpoint)
	}
	for _, d := range ds[1:] {
		if d.State != engine.StateWaiting || d.WaitingBehind != ds[0].ID {
			t.Errorf("ingest returned %s behind %q, want waiting behind %s", d.State, d.WaitingBehind, ds[0].ID)
		}
	}
	f.wantWaiting(t, ds[0].ID, ds[1:]...)
	f.wantPlace(t, ds...)
	f.wantHead(t, ep, engine.LineEndpoint, ds[0].ID)
}

func testLineKeys(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.orderedLane(t, "acme", engine.OrderingKey, engine.OnDeadSkip)
	a1, b1, a2, none1, none2 := f.deliverKeyed(t, ep, typ, "a"), f.deliverKeyed(t, ep, typ, "b"),
		f.deliverKeyed(t, ep, typ, "a"), f.deliverKeyed(t, ep, typ, ""), f.deliverKeyed(t, ep, typ, "")
	for _, d := range []engine.Delivery{a1, b1, none1, none2} {
		if got := f.read(t, d); got.State != engine.StatePending {
			t.Errorf("delivery %s (line %q) is %s, want pending", d.ID, d.Line, got.State)
		}
	}
	if none1.Line != "" || a1.Line != engine.LineKeyPrefix+"a" {
		t.Errorf("lines %q and %q, want \"\" and %q", none1.Line, a1.Line, engine.LineKeyPrefix+"a")
	}
	f.wantWaiting(t, a1.ID, a2)
	f.wantHead(t, ep, engine.LineKeyPrefix+"b", b1.ID)
}

func testLineAdvance(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadSkip)
	ds := f.line(t, ep, typ, 3)
	at := t0.Add(time.Hour)
	f.settle(t, ds[0], engine.StatePending, at.Add(-time.Minute), at.Add(time.Minute)) // a retry keeps the head
	f.wantWaiting(t, ds[0].ID, ds[1:]...)
	f.settle(t, f.read(t, ds[0]), engine.StateSucceeded, at, time.Time{})
	f.wantPending(t, ds[1], at)
	f.wantWaiting(t, ds[1].ID, ds[2])
	f.wantHead(t, ep, engine.LineEndpoint, ds[1].ID)
	f.wantPlace(t, ds...)

	f.settle(t, f.read(t, ds[1]), engine.StateSucceeded, at.Add(time.Second), time.Time{})
	last := f.wantPending(t, ds[2], at.Add(time.Second))
	f.settle(t, last, engine.StateSucceeded, at.Add(2*time.Second), time.Time{})
	f.wantHead(t, ep, engine.LineEndpoint, "")
}

func testLineDeadSkip(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadSkip)
	ds := f.line(t, ep, typ, 2)
	at := t0.Add(time.Hour)
	dead := f.settle(t, ds[0], engine.StateDead, at, time.Time{})
	if dead.State != engine.StateDead || len(dead.Skips) != 1 || dead.Skips[0].By != engine.SkipByOnDead || !dead.Skips[0].At.Equal(at) || dead.Skips[0].Cycle != 1 {
		t.Errorf("dead head = %s with skips %+v, want dead with one skip by %q at %v", dead.State, dead.Skips, engine.SkipByOnDead, at)
	}
	wantEqual(t, "dead head as read", f.read(t, ds[0]), dead)
	if next := f.wantPending(t, ds[1], at); next.Reason != "" || next.Cycle != 1 || next.CycleAttempts != 0 {
		t.Errorf("promoted delivery has reason %q, cycle %d, %d attempts; want none, 1, 0", next.Reason, next.Cycle, next.CycleAttempts)
	}
	f.wantPlace(t, ds...)
}

func testLineBlock(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadBlock)
	ds := f.line(t, ep, typ, 3)
	at := t0.Add(time.Hour)
	dead := f.settle(t, ds[0], engine.StateDead, at, time.Time{})
	if !dead.Blocking() || len(dead.Skips) != 0 {
		t.Errorf("dead head with skips %+v is not blocking", dead.Skips)
	}
	f.wantWaiting(t, ds[0].ID, ds[1:]...)
	f.wantHead(t, ep, engine.LineEndpoint, ds[0].ID)
	f.wantPlace(t, ds...)

	_, err := f.s.UpdateDelivery(t.Context(), ds[1].ID, func(d engine.Delivery) (engine.Delivery, error) {
		return engine.SkipDelivery(d, engine.Skip{At: at, By: "admin"})
	})
	wantCode(t, err, engine.CodeNotBlocking, "id")

	skipAt := at.Add(time.Minute)
	skipped, err := f.s.UpdateDelivery(t.Context(), ds[0].ID, func(d engine.Delivery) (engine.Delivery, error) {
		return engine.SkipDelivery(d, engine.Skip{At: skipAt, By: "admin"})
	})
	if err != nil {
		t.Fatalf("skip: %v", err)
	}
	if skipped.State != engine.StateDead || skipped.Blocking() || len(skipped.Skips) != 1 || skipped.Skips[0].By != "admin" {
		t.Errorf("skipped head = %s, skips %+v; want dead with admin's skip", skipped.State, skipped.Skips)
	}
	f.wantPending(t, ds[1], skipAt)
	f.wantWaiting(t, ds[1].ID, ds[2])
	f.wantPlace(t, ds...)
}

func testLineBlockReplay(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadBlock)
	ds := f.line(t, ep, typ, 2)
	at := t0.Add(time.Hour)
	f.settle(t, ds[0], engine.StateDead, at, time.Time{})
	replayed, err := f.replay(t, "acme", ds[0].ID, engine.Replay{At: at.Add(time.Minute), By: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	if replayed.State != engine.StatePending {
		t.Errorf("replayed blocking head is %s, want pending", replayed.State)
	}
	f.wantWaiting(t, ds[0].ID, ds[1])
	f.settle(t, replayed, engine.StateSucceeded, at.Add(2*time.Minute), time.Time{})
	f.wantPending(t, ds[1], at.Add(2*time.Minute))
}

func testLineReplayOrder(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadSkip)
	ds := f.line(t, ep, typ, 3)
	at := t0.Add(time.Hour)
	f.settle(t, ds[0], engine.StateSucceeded, at, time.Time{}) // ds[1] heads
	replayed, err := f.replay(t, "acme", ds[0].ID, engine.Replay{At: at.Add(time.Minute), By: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	if replayed.State != engine.StateWaiting || replayed.Cycle != 2 || replayed.WaitingBehind != ds[1].ID {
		t.Errorf("replay = %s in cycle %d behind %q, want waiting in cycle 2 behind %s", replayed.State, replayed.Cycle, replayed.WaitingBehind, ds[1].ID)
	}
	f.wantWaiting(t, ds[1].ID, ds[0], ds[2])
	// ds[0] has the lower sequence: it goes before ds[2].
	f.settle(t, f.read(t, ds[1]), engine.StateSucceeded, at.Add(2*time.Minute), time.Time{})
	f.wantPending(t, ds[0], at.Add(2*time.Minute))
	f.wantWaiting(t, ds[0].ID, ds[2])

	// With the line empty, a replay heads it.
	f.settle(t, f.read(t, ds[0]), engine.StateSucceeded, at.Add(3*time.Minute), time.Time{})
	f.settle(t, f.read(t, ds[2]), engine.StateSucceeded, at.Add(4*time.Minute), time.Time{})
	again, err := f.replay(t, "acme", ds[2].ID, engine.Replay{At: at.Add(5 * time.Minute), By: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	if again.State != engine.StatePending {
		t.Errorf("replay into an empty line is %s, want pending", again.State)
	}
	f.wantHead(t, ep, engine.LineEndpoint, ds[2].ID)
}

func testLineRangeReplay(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadSkip)
	ds := f.line(t, ep, typ, 3)
	at := t0.Add(time.Hour)
	// Each dies in turn; then ds[0] is replayed and dies again, last:
	// the dead letters are ds[1], ds[2], ds[0] in death order.
	for i, d := range ds {
		f.settle(t, f.read(t, d), engine.StateDead, at.Add(time.Duration(i)*time.Second), time.Time{})
	}
	r, err := f.replay(t, "acme", ds[0].ID, engine.Replay{At: at.Add(time.Minute), By: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	f.settle(t, r, engine.StateDead, at.Add(2*time.Minute), time.Time{})
	wantEqual(t, "dead letters", ids(f.deadLetters(t, "acme")), []string{ds[1].ID, ds[2].ID, ds[0].ID})

	replayAt := at.Add(time.Hour)
	sel := engine.Selection{Tenant: "acme", State: engine.StateDead, Since: t0, Until: replayAt}
	got := f.selectAll(t, sel, 10, func(d engine.Delivery) engine.Delivery {
		return engine.ReplayDelivery(d, engine.Replay{At: replayAt, By: "admin"}, "")
	})
	wantEqual(t, "replayed, in the selection's order", ids(got), []string{ds[1].ID, ds[2].ID, ds[0].ID})
	f.wantPending(t, ds[0], replayAt)
	f.wantWaiting(t, ds[0].ID, ds[1], ds[2])
	f.wantPlace(t, ds...)
	f.settle(t, f.read(t, ds[0]), engine.StateSucceeded, replayAt.Add(time.Second), time.Time{})
	f.wantPending(t, ds[1], replayAt.Add(time.Second))
}

func testLineDrop(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadBlock)
	ds := f.line(t, ep, typ, 2)
	at := t0.Add(time.Hour)
	ep = f.setEnabled(t, ep, false, at)
	f.pause(t, ds[0], at) // the dispatcher found the endpoint disabled
	f.wantHead(t, ep, engine.LineEndpoint, ds[0].ID)
	later := f.deliverKeyed(t, ep, typ, "") // held: behind the paused head
	f.wantWaiting(t, ds[0].ID, ds[1], later)

	f.setEnabled(t, ep, true, at.Add(time.Minute))
	dropped := f.takePaused(t, ep, at.Add(time.Minute))
	wantEqual(t, "dropped", ids(dropped), []string{ds[0].ID})
	if d := dropped[0]; d.State != engine.StateDead || d.Blocking() || len(d.Skips) != 1 || d.Skips[0].By != engine.SkipByDropped {
		t.Errorf("dropped head = %s, skips %+v; want dead, skipped by %q", d.State, d.Skips, engine.SkipByDropped)
	}
	f.wantPending(t, ds[1], at.Add(time.Minute))
	f.wantWaiting(t, ds[1].ID, later)
}

func testLineEndpointDeleted(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadBlock)
	ds := f.line(t, ep, typ, 2)
	if err := f.s.DeleteEndpoint(t.Context(), "acme", ep.ID); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(time.Hour)
	rec := attemptRecord(ds[0], engine.StateDead, at, time.Time{})
	rec.Reason = engine.ReasonEndpointDeleted
	dead := f.record(t, rec)
	if dead.Blocking() {
		t.Error("the head of a deleted endpoint blocks its line")
	}
	f.wantPending(t, ds[1], at)
}

func testLineTenantPurge(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadBlock)
	ds := f.line(t, ep, typ, 3)
	f.settle(t, ds[0], engine.StateDead, t0.Add(time.Hour), time.Time{}) // blocking
	f.deleteTenant(t, "acme", t0.Add(2*time.Hour))
	f.wantHead(t, ep, engine.LineEndpoint, "")
}
