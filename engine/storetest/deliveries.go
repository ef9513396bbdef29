package storetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// deliveryTests: UpdateDelivery, UpdateDeliveries and the retry index.
var deliveryTests = []test{
	{"each transition puts the delivery where its state says", testTransitions},
	{"UpdateDelivery stores nothing when fn fails", testUpdateDeliveryAbort},
	{"UpdateDelivery refuses a delivery it cannot keep", testUpdateDeliveryRefused},
	{"concurrent updates of a delivery all land", testUpdateDeliveryConcurrent},
	{"an endpoint's paused deliveries are resumed each once", testResumePaused},
	{"dead letters that died in a range are replayed each once", testReplayDeadRange},
	{"UpdateDeliveries selects by paused or dead only", testSelectionRefused},
	{"UpdateDeliveries stores all or none", testUpdateDeliveriesAllOrNone},
	{"the retry index is in due order", testRetryIndex},
	{"RetryIndex stops at fn's error and at the context's end", testRetryIndexStops},
}

// step is one transition as the dispatcher or the service decides it:
// what it does to a delivery, given the delivery as the decider read it
// (the dispatcher decides on what it read before the attempt; the
// service's replay decides on nothing it read).
type step struct {
	name  string
	stale bool // decided on the delivery as it was before the previous step
	make  func(read engine.Delivery) func(engine.Delivery) engine.Delivery
}

func attemptStep(state engine.State, at, next time.Time) step {
	return step{name: "attempt → " + string(state), make: func(read engine.Delivery) func(engine.Delivery) engine.Delivery {
		rec := attemptRecord(read, state, at, next)
		return func(d engine.Delivery) engine.Delivery { return engine.RecordAttempt(d, rec) }
	}}
}

func pauseStep(at time.Time) step {
	return step{name: "pause", make: func(read engine.Delivery) func(engine.Delivery) engine.Delivery {
		return func(d engine.Delivery) engine.Delivery { return engine.PauseDelivery(d, read.Cycle, at) }
	}}
}

func holdStep(next, at time.Time) step {
	return step{name: "hold", make: func(read engine.Delivery) func(engine.Delivery) engine.Delivery {
		return func(d engine.Delivery) engine.Delivery {
			return engine.HoldDelivery(d, read.Cycle, next, "endpoint not verified: no answer yet; held until it answers the challenge", at)
		}
	}}
}

func replayStep(at time.Time) step {
	return step{name: "replay", make: func(engine.Delivery) func(engine.Delivery) engine.Delivery {
		r := engine.Replay{At: at, By: "admin"}
		return func(d engine.Delivery) engine.Delivery { return engine.ReplayDelivery(d, r, "") }
	}}
}

func dropStep(at time.Time) step {
	return step{name: "drop held", make: func(engine.Delivery) func(engine.Delivery) engine.Delivery {
		return func(d engine.Delivery) engine.Delivery { return engine.DropHeldDelivery(d, at) }
	}}
}

// stale is s decided on the delivery as it was before the previous step.
func stale(s step) step {
	s.name, s.stale = s.name+" decided before the last step", true
	return s
}

func testTransitions(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	tests := []struct {
		name  string
		steps []step
		want  engine.State
	}{
		{"retried", []step{attemptStep(engine.StatePending, at(time.Second), at(30*time.Second))}, engine.StatePending},
		{"retried twice", []step{
			attemptStep(engine.StatePending, at(time.Second), at(30*time.Second)),
			attemptStep(engine.StatePending, at(31*time.Second), at(3*time.Minute)),
		}, engine.StatePending},
		{"retried earlier than due", []step{attemptStep(engine.StatePending, at(time.Second), at(-time.Hour))}, engine.StatePending},
		{"succeeded", []step{attemptStep(engine.StateSucceeded, at(time.Second), time.Time{})}, engine.StateSucceeded},
		{"dead", []step{attemptStep(engine.StateDead, at(time.Second), time.Time{})}, engine.StateDead},
		{"paused", []step{pauseStep(at(time.Second))}, engine.StatePaused},
		{"held", []step{holdStep(at(time.Minute), at(time.Second))}, engine.StatePending},
		{"dead, replayed", []step{attemptStep(engine.StateDead, at(time.Second), time.Time{}), replayStep(at(time.Hour))}, engine.StatePending},
		{"succeeded, replayed twice", []step{
			attemptStep(engine.StateSucceeded, at(time.Second), time.Time{}), replayStep(at(time.Hour)), replayStep(at(2 * time.Hour)),
		}, engine.StatePending},
		{"paused, replayed", []step{pauseStep(at(time.Second)), replayStep(at(time.Hour))}, engine.StatePending},
		{"paused, dropped", []step{pauseStep(at(time.Second)), dropStep(at(time.Hour))}, engine.StateDead},
		{"dead, replayed, dead again", []step{
			attemptStep(engine.StateDead, at(time.Second), time.Time{}), replayStep(at(time.Hour)),
			attemptStep(engine.StateDead, at(2*time.Hour), time.Time{}),
		}, engine.StateDead},
		{"an attempt of an older cycle is only logged", []step{
			replayStep(at(time.Hour)), stale(attemptStep(engine.StateDead, at(time.Hour+time.Second), time.Time{})),
		}, engine.StatePending},
		{"a pause of an older cycle changes nothing", []step{replayStep(at(time.Hour)), stale(pauseStep(at(2 * time.Hour)))}, engine.StatePending},
		{"an attempt after success is only logged", []step{
			attemptStep(engine.StateSucceeded, at(time.Second), time.Time{}),
			stale(attemptStep(engine.StatePending, at(2*time.Second), at(time.Minute))),
		}, engine.StateSucceeded},
		{"a drop of a pending delivery changes nothing", []step{dropStep(at(time.Hour))}, engine.StatePending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep, typ := f.lane(t, "acme")
			d := f.deliver(t, ep, typ)
			want, before := d, d
			for _, s := range tt.steps {
				read := want
				if s.stale {
					read = before
				}
				fn := s.make(read)
				before, want = want, fn(want)
				got := f.update(t, d.ID, fn)
				wantEqual(t, "UpdateDelivery after "+s.name, got, want)
				wantEqual(t, "Delivery after "+s.name, f.read(t, d), want)
				f.wantPlace(t, d)
			}
			if want.State != tt.want {
				t.Fatalf("the transitions left the delivery %s, the test wants %s", want.State, tt.want)
			}
			f.check(t)
			paused := f.takePaused(t, ep, at(24*time.Hour))
			if tt.want == engine.StatePaused {
				wantEqual(t, "paused deliveries of the endpoint", paused, []engine.Delivery{engine.DropHeldDelivery(want, at(24*time.Hour))})
				f.wantPlace(t, d) // dead now
			} else {
				wantEmpty(t, "paused deliveries of the endpoint", paused)
			}
		})
	}
}

func testUpdateDeliveryAbort(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	d := f.deliver(t, ep, typ)
	sentinel := errors.New("refused by fn")
	_, err := f.s.UpdateDelivery(t.Context(), d.ID, func(cur engine.Delivery) (engine.Delivery, error) {
		return engine.RecordAttempt(cur, attemptRecord(cur, engine.StateDead, t0.Add(time.Second), time.Time{})), sentinel
	})
	if err != sentinel {
		t.Errorf("error = %v, want fn's error itself", err)
	}
	wantEqual(t, "the delivery after an aborted update", f.read(t, d), d)
	f.wantPlace(t, d)

	_, err = f.s.UpdateDelivery(t.Context(), "dlv_nope", func(cur engine.Delivery) (engine.Delivery, error) {
		t.Error("fn called for a delivery that does not exist")
		return cur, nil
	})
	wantError(t, err, engine.DeliveryNotFound())

	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = f.s.UpdateDelivery(canceled, d.ID, func(cur engine.Delivery) (engine.Delivery, error) {
		return engine.RecordAttempt(cur, attemptRecord(cur, engine.StateSucceeded, t0.Add(time.Second), time.Time{})), nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("UpdateDelivery with an ended context: %v, want context.Canceled", err)
	}
	wantEqual(t, "the delivery after an update with an ended context", f.read(t, d), d)
}

func testUpdateDeliveryRefused(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	ep, typ := f.lane(t, "acme")
	other, _ := f.lane(t, "acme")
	d := f.deliver(t, ep, typ)
	tests := []struct {
		name string
		bad  func(*engine.Delivery)
	}{
		{"delivering is never stored", func(d *engine.Delivery) { d.State = engine.StateDelivering }},
		{"an unknown state", func(d *engine.Delivery) { d.State = "lost" }},
		{"pending with no time to be due", func(d *engine.Delivery) { d.NextAttemptAt = time.Time{} }},
		{"another tenant's", func(d *engine.Delivery) { d.TenantID = "globex" }},
		{"another endpoint's", func(d *engine.Delivery) { d.EndpointID = other.ID }},
		{"another event's", func(d *engine.Delivery) { d.EventID = "evt_other" }},
		{"another id", func(d *engine.Delivery) { d.ID = "dlv_other" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.s.UpdateDelivery(t.Context(), d.ID, func(cur engine.Delivery) (engine.Delivery, error) {
				tt.bad(&cur)
				return cur, nil
			})
			if err == nil {
				t.Error("UpdateDelivery stored it")
			}
			wantEqual(t, "the delivery after the refusal", f.read(t, d), d)
			f.wantPlace(t, d)
		})
	}
}

func testUpdateDeliveryConcurrent(t *testing.T, f *fixture) {
	// Late outcomes of one succeeded delivery (each only logged) and the
	// first attempts of others, all at once: every attempt is kept.
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	d := f.settle(t, f.deliver(t, ep, typ), engine.StateSucceeded, t0.Add(time.Second), time.Time{})
	var others []engine.Delivery
	for range 8 {
		others = append(others, f.deliver(t, ep, typ))
	}
	const late = 16
	var wg sync.WaitGroup
	for i := range late {
		wg.Go(func() {
			rec := attemptRecord(d, engine.StatePending, t0.Add(time.Duration(i)*time.Second), t0.Add(time.Hour))
			if _, err := f.s.UpdateDelivery(t.Context(), d.ID, func(cur engine.Delivery) (engine.Delivery, error) {
				return engine.RecordAttempt(cur, rec), nil
			}); err != nil {
				t.Errorf("UpdateDelivery: %v", err)
			}
		})
	}
	for _, o := range others {
		wg.Go(func() {
			rec := attemptRecord(o, engine.StateSucceeded, t0.Add(time.Second), time.Time{})
			if _, err := f.s.UpdateDelivery(t.Context(), o.ID, func(cur engine.Delivery) (engine.Delivery, error) {
				return engine.RecordAttempt(cur, rec), nil
			}); err != nil {
				t.Errorf("UpdateDelivery: %v", err)
			}
		})
	}
	wg.Wait()
	got := f.read(t, d)
	if got.State != engine.StateSucceeded || len(got.Attempts) != 1+late || got.CycleAttempts != 1 {
		t.Errorf("after %d late outcomes: %s with %d attempts (%d this cycle), want succeeded with %d (1)", late, got.State, len(got.Attempts), got.CycleAttempts, 1+late)
	}
	for _, o := range others {
		if got := f.read(t, o); got.State != engine.StateSucceeded || len(got.Attempts) != 1 {
			t.Errorf("delivery %s: %s with %d attempts, want succeeded with 1", o.ID, got.State, len(got.Attempts))
		}
	}
	wantEmpty(t, "the retry index", f.retryIndex(t))
}

func testResumePaused(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "acme.eu")
	ep, typ := f.lane(t, "acme")
	sibling := f.endpoint(t, "acme", typ)
	foreign, foreignTyp := f.lane(t, "acme.eu")

	pending := f.ingest(t, newEvent("acme", typ, `{}`)).Deliveries // one each: ep, sibling
	ep = f.setEnabled(t, ep, false, t0)
	sibling = f.setEnabled(t, sibling, false, t0)
	foreign = f.setEnabled(t, foreign, false, t0)
	var held, siblingHeld []engine.Delivery
	for range 5 {
		for _, d := range f.ingest(t, newEvent("acme", typ, `{}`)).Deliveries {
			if d.State != engine.StatePaused {
				t.Fatalf("ingest for a disabled endpoint made a %s delivery", d.State)
			}
			if d.EndpointID == ep.ID {
				held = append(held, d)
			} else {
				siblingHeld = append(siblingHeld, d)
			}
		}
	}
	// One more, pending when ingested, paused by the dispatcher.
	for _, d := range pending {
		p := f.pause(t, d, t0.Add(time.Second))
		if d.EndpointID == ep.ID {
			held = append(held, p)
		} else {
			siblingHeld = append(siblingHeld, p)
		}
	}
	foreignHeld := f.deliver(t, foreign, foreignTyp)

	r := engine.Replay{At: t0.Add(time.Hour), By: "admin"}
	ep = f.setEnabled(t, ep, true, r.At)
	resumed := f.resume(t, ep, true, r, 2)
	slices.SortFunc(resumed, byID)
	var want []engine.Delivery
	for _, d := range held {
		want = append(want, engine.ReplayDelivery(d, r, ""))
	}
	slices.SortFunc(want, byID)
	wantEqual(t, "resumed deliveries", resumed, want)
	for _, d := range resumed {
		wantEqual(t, "a resumed delivery as stored", f.read(t, d), d)
	}
	f.wantPlace(t, resumed...)
	wantEmpty(t, "paused deliveries of the endpoint after resuming", f.takePaused(t, ep, t0.Add(2*time.Hour)))

	// The others stay paused: enabling "from now on" finds each.
	sibling = f.setEnabled(t, sibling, true, r.At)
	dropped := f.resume(t, sibling, false, r, 4)
	wantEqual(t, "the sibling's paused deliveries", sorted(ids(dropped)), sorted(ids(siblingHeld)))
	for _, d := range dropped {
		if d.State != engine.StateDead || d.Reason != engine.ReasonHeldNotSent || !d.DeadAt.Equal(r.At) {
			t.Errorf("dropped delivery = %+v, want dead at %v with %q", d, r.At, engine.ReasonHeldNotSent)
		}
	}
	f.wantPlace(t, dropped...)
	wantEqual(t, "the other tenant's paused delivery", ids(f.takePaused(t, foreign, r.At)), []string{foreignHeld.ID})
}

func testReplayDeadRange(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	ep, typ := f.lane(t, "acme")
	other, otherTyp := f.lane(t, "acme")
	foreign, foreignTyp := f.lane(t, "globex")
	minute := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	kill := func(ep engine.Endpoint, typ string, m int) engine.Delivery {
		return f.settle(t, f.deliver(t, ep, typ), engine.StateDead, minute(m), time.Time{})
	}
	var mine, others []engine.Delivery // died in [1, 4)
	for _, m := range []int{3, 0, 1, 4, 2, 5, 1} {
		d := kill(ep, typ, m)
		o := kill(other, otherTyp, m)
		kill(foreign, foreignTyp, m)
		if m >= 1 && m < 4 {
			mine, others = append(mine, d), append(others, o)
		}
	}
	r := engine.Replay{At: t0.Add(time.Hour), By: "admin"}
	replay := func(d engine.Delivery) engine.Delivery { return engine.ReplayDelivery(d, r, "") }
	sel := engine.Selection{Tenant: "acme", State: engine.StateDead, EndpointID: ep.ID, Since: minute(1), Until: minute(4)}

	got := f.selectAll(t, sel, 2, replay)
	wantEqual(t, "replayed of the endpoint", sorted(ids(got)), sorted(ids(mine)))
	for _, d := range got {
		wantEqual(t, "a replayed delivery as stored", f.read(t, d), d)
		if d.State != engine.StatePending || d.Cycle != 2 {
			t.Errorf("replayed delivery = %+v, want pending in cycle 2", d)
		}
	}
	f.wantPlace(t, got...)
	if again := f.selectAll(t, sel, 2, replay); len(again) != 0 {
		t.Errorf("the range replayed again: %v; a dead letter must be replayed once", ids(again))
	}

	sel.EndpointID = ""
	got = f.selectAll(t, sel, 3, replay)
	wantEqual(t, "replayed of any endpoint", sorted(ids(got)), sorted(ids(others)))
	f.wantPlace(t, got...)

	left := f.deadLetters(t, "acme")
	for _, d := range left {
		if !d.DeadAt.Before(minute(1)) && d.DeadAt.Before(minute(4)) {
			t.Errorf("dead letter %s died at %v, inside the replayed range", d.ID, d.DeadAt)
		}
	}
	if len(left) != 6 { // minutes 0, 4 and 5 of each endpoint
		t.Errorf("%d dead letters left, want 6", len(left))
	}
	if n := len(f.deadLetters(t, "globex")); n != 7 {
		t.Errorf("globex has %d dead letters, want its 7", n)
	}
	wantEmpty(t, "a selection of another tenant", f.selectAll(t, engine.Selection{Tenant: "initech", State: engine.StateDead, Since: minute(0), Until: minute(10)}, 10, replay))
}

func testSelectionRefused(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	d := f.deliver(t, ep, typ)
	for _, state := range []engine.State{engine.StatePending, engine.StateSucceeded, engine.StateDelivering, ""} {
		_, err := f.s.UpdateDeliveries(t.Context(), engine.Selection{Tenant: "acme", State: state, EndpointID: ep.ID}, 10, func(d engine.Delivery) engine.Delivery {
			t.Errorf("fn called for a selection by state %q", state)
			return d
		})
		if err == nil {
			t.Errorf("UpdateDeliveries by state %q: no error", state)
		}
	}
	wantEqual(t, "the delivery", f.read(t, d), d)
}

func testUpdateDeliveriesAllOrNone(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	ep = f.setEnabled(t, ep, false, t0)
	var held []engine.Delivery
	for range 3 {
		held = append(held, f.deliver(t, ep, typ))
	}
	calls := 0
	_, err := f.s.UpdateDeliveries(t.Context(), engine.Selection{Tenant: "acme", State: engine.StatePaused, EndpointID: ep.ID}, 10, func(d engine.Delivery) engine.Delivery {
		if calls++; calls == 2 {
			d.State = engine.StateDelivering // not a state a store keeps
			return d
		}
		return engine.ReplayDelivery(d, engine.Replay{At: t0.Add(time.Hour), By: "admin"}, "")
	})
	if err == nil {
		t.Fatal("UpdateDeliveries stored a delivery it cannot keep")
	}
	for _, d := range held {
		wantEqual(t, "a paused delivery after the refusal", f.read(t, d), d)
	}
	f.wantPlace(t, held...)
	wantEqual(t, "paused deliveries after the refusal", sorted(ids(f.takePaused(t, ep, t0.Add(time.Hour)))), sorted(ids(held)))
}

func testRetryIndex(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	ep, typ := f.lane(t, "acme")
	gone, goneTyp := f.lane(t, "acme")
	foreign, foreignTyp := f.lane(t, "globex")
	var want []engine.RetryEntry
	add := func(ep engine.Endpoint, typ string, minutes int) engine.Delivery {
		due := t0.Add(time.Duration(minutes) * time.Minute)
		d := f.settle(t, f.deliver(t, ep, typ), engine.StatePending, t0, due)
		want = append(want, engine.RetryEntry{Due: due, DeliveryID: d.ID, EndpointID: ep.ID, TenantID: ep.TenantID})
		return d
	}
	for _, m := range []int{3, 1, 2, 1, -5, 1, 1, 2, 1} { // ties: then by ID
		add(ep, typ, m)
	}
	add(foreign, foreignTyp, 1)
	add(gone, goneTyp, 2)
	if err := f.s.DeleteEndpoint(t.Context(), "acme", gone.ID); err != nil {
		t.Fatal(err)
	}
	want[len(want)-1].TenantID = "" // its endpoint is gone
	f.settle(t, f.deliver(t, ep, typ), engine.StateSucceeded, t0, time.Time{})
	f.settle(t, f.deliver(t, ep, typ), engine.StateDead, t0, time.Time{})
	f.pause(t, f.deliver(t, ep, typ), t0)

	// Due order, then delivery ID order.
	slices.SortFunc(want, func(a, b engine.RetryEntry) int {
		if c := a.Due.Compare(b.Due); c != 0 {
			return c
		}
		return strings.Compare(a.DeliveryID, b.DeliveryID)
	})
	wantEqual(t, "RetryIndex", f.retryIndex(t), want)
}

func testRetryIndexStops(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	for range 3 {
		f.deliver(t, ep, typ)
	}
	stop := errors.New("stop")
	n := 0
	err := f.s.RetryIndex(t.Context(), func(engine.RetryEntry) error {
		n++
		return stop
	})
	if err != stop || n != 1 {
		t.Errorf("RetryIndex = %v after %d calls, want fn's error itself after 1", err, n)
	}
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	if err := f.s.RetryIndex(canceled, func(engine.RetryEntry) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("RetryIndex with an ended context = %v, want context.Canceled", err)
	}
}
