package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// The Scheduler contract (engine/scheduler.go), over the store under
// test: each scheduler stands for one process. The suite's deliveries are
// due at t0 and just after; a scheduler sees them due now.

// scheduler returns a new scheduler over f's store, recovered.
func (f *fixture) scheduler(t *testing.T) (engine.Scheduler, int) {
	t.Helper()
	var s engine.Scheduler
	if f.h.Scheduler != nil {
		s = f.h.Scheduler(f.s)
	} else {
		s = engine.NewLocalScheduler(f.s)
	}
	now := time.Now()
	n, err := s.Recover(t.Context(), func(due time.Time) time.Time { return now.Add(due.Sub(t0) - time.Hour) })
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	return s, n
}

// claim returns what s hands out within d.
func claim(t *testing.T, s engine.Scheduler, d time.Duration) []engine.Work {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	ws, err := s.Claim(ctx, 0)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Claim: %v", err)
	}
	return ws
}

// claimedOne makes one pending delivery in a store of its own tenant and
// lane, and returns a scheduler over the store that has claimed it.
func (f *fixture) claimedOne(t *testing.T) (engine.Scheduler, engine.Work) {
	t.Helper()
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	d := f.deliver(t, ep, typ)
	s, _ := f.scheduler(t)
	ws := claim(t, s, time.Second)
	if len(ws) != 1 || ws[0].DeliveryID != d.ID {
		t.Fatalf("Claim = %v, want %s", workIDs(ws), d.ID)
	}
	return s, ws[0]
}

// workIDs returns the delivery IDs of ws, sorted.
func workIDs(ws []engine.Work) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.DeliveryID)
	}
	slices.Sort(out)
	return out
}

// settleAs stores w's attempt as the dispatcher does, leaving it in
// state, and settles w due again wait from now (a zero wait: no longer
// pending). It returns when w is due again.
func (f *fixture) settleAs(t *testing.T, s engine.Scheduler, w engine.Work, state engine.State, wait time.Duration) time.Time {
	t.Helper()
	if _, err := f.s.UpdateDelivery(t.Context(), w.DeliveryID, func(d engine.Delivery) (engine.Delivery, error) {
		return engine.RecordAttempt(d, attemptRecord(d, state, t0.Add(time.Minute), t0.Add(2*time.Minute))), nil
	}); err != nil {
		t.Fatalf("UpdateDelivery: %v", err)
	}
	var next time.Time
	if wait > 0 {
		next = time.Now().Add(wait)
	}
	if s.Settle(w, next) {
		t.Fatalf("Settle handed %s back at once", w.DeliveryID)
	}
	return next
}

var schedulerTests = []test{
	{"offered when due, to one claim", func(t *testing.T, f *fixture) {
		f.tenant(t, "acme")
		ep, typ := f.lane(t, "acme")
		a, b := f.deliver(t, ep, typ), f.deliver(t, ep, typ)
		s, n := f.scheduler(t)
		if n != 2 {
			t.Fatalf("Recover found %d pending, want 2", n)
		}
		if total, waiting := s.Counts(); total != 2 || waiting != 2 {
			t.Errorf("recovered: Counts() = %d, %d; want 2, 2", total, waiting)
		}
		got := workIDs(claim(t, s, time.Second))
		if want := []string{a.ID, b.ID}; !slices.Equal(got, want) {
			t.Fatalf("Claim = %v, want %v", got, want)
		}
		if again := claim(t, s, 20*time.Millisecond); len(again) != 0 {
			t.Errorf("claimed again before settling: %v", workIDs(again))
		}
		if s.Pending("acme") != 2 || !s.Holds(a.ID) {
			t.Errorf("claimed: pending %d, holds %v; want 2, true", s.Pending("acme"), s.Holds(a.ID))
		}
	}},
	{"settled is never offered again", func(t *testing.T, f *fixture) {
		s, w := f.claimedOne(t)
		f.settleAs(t, s, w, engine.StateSucceeded, 0)
		if again := claim(t, s, 20*time.Millisecond); len(again) != 0 || s.Holds(w.DeliveryID) {
			t.Errorf("offered again after it succeeded: %v", workIDs(again))
		}
		next, n := f.scheduler(t) // the next process
		if n != 0 {
			t.Errorf("the next process recovered %d pending, want 0", n)
		}
		if again := claim(t, next, 20*time.Millisecond); len(again) != 0 {
			t.Errorf("the next process offered %v", workIDs(again))
		}
	}},
	{"a claim whose lease ends is offered again", func(t *testing.T, f *fixture) {
		first, w := f.claimedOne(t)
		// Never settled: its process dies, or holds it past its lease.
		if f.h.EndLeases != nil {
			f.h.EndLeases(first)
		}
		second, _ := f.scheduler(t)
		if got := workIDs(claim(t, second, time.Second)); !slices.Equal(got, []string{w.DeliveryID}) {
			t.Errorf("after the lease ended: Claim = %v, want %s again", got, w.DeliveryID)
		}
	}},
	{"settled with a next time is offered then, not before", func(t *testing.T, f *fixture) {
		s, w := f.claimedOne(t)
		next := f.settleAs(t, s, w, engine.StatePending, 50*time.Millisecond)
		got := workIDs(claim(t, s, 5*time.Second))
		if at := time.Now(); at.Before(next) {
			t.Errorf("offered %s before its time", next.Sub(at))
		}
		if !slices.Equal(got, []string{w.DeliveryID}) {
			t.Errorf("at its time: Claim = %v, want %v", got, []string{w.DeliveryID})
		}
	}},
	{"a claim released without an outcome is offered again", func(t *testing.T, f *fixture) {
		first, w := f.claimedOne(t)
		first.Release(w) // the dispatcher stops with w not attempted
		if first.Holds(w.DeliveryID) {
			t.Errorf("still holds %s after releasing it", w.DeliveryID)
		}
		second, _ := f.scheduler(t) // the next process, or another
		if got := workIDs(claim(t, second, 5*time.Second)); !slices.Equal(got, []string{w.DeliveryID}) {
			t.Errorf("after the release: Claim = %v, want %s again", got, w.DeliveryID)
		}
	}},
	{"a deleted tenant's deliveries are forgotten", func(t *testing.T, f *fixture) {
		f.tenant(t, "acme")
		ep, typ := f.lane(t, "acme")
		d := f.deliver(t, ep, typ)
		s, n := f.scheduler(t)
		if n != 1 {
			t.Fatalf("Recover found %d pending, want 1", n)
		}
		f.deleteTenant(t, "acme", t0.Add(time.Minute))
		s.ForgetTenant("acme")
		if got := claim(t, s, 100*time.Millisecond); len(got) != 0 || s.Holds(d.ID) {
			t.Errorf("after the tenant's deletion: Claim = %v, holds %v; want none", workIDs(got), s.Holds(d.ID))
		}
	}},
	{"scheduled while claimed is handed back at settle", func(t *testing.T, f *fixture) {
		s, w := f.claimedOne(t)
		if s.Schedule(w, time.Now()) {
			t.Fatal("Schedule of a claimed delivery claimed it a second time")
		}
		if !s.Settle(w, time.Time{}) {
			t.Error("Settle did not hand back a delivery scheduled (replayed) while claimed")
		}
	}},
	{"the holder's outcome, decided before a replay, is refused; read again, it records", func(t *testing.T, f *fixture) {
		s, w := f.claimedOne(t)
		in, err := f.s.AttemptInput(t.Context(), w.DeliveryID)
		if err != nil {
			t.Fatal(err)
		}
		// The replay, as the service makes it while the attempt runs.
		replayed, err := f.replay(t, w.TenantID, w.DeliveryID, engine.Replay{At: t0.Add(30 * time.Second), By: "admin"})
		if err != nil {
			t.Fatal(err)
		}
		if s.Schedule(w, replayed.NextAttemptAt) {
			t.Fatal("Schedule of a claimed delivery claimed it a second time")
		}
		rec := attemptRecord(in.Delivery, engine.StateSucceeded, t0.Add(time.Minute), time.Time{})
		if _, err := f.s.RecordOutcome(t.Context(), engine.NewOutcomeUpdate(in.Delivery, rec)); !errors.Is(err, engine.ErrDeliveryChanged) {
			t.Fatalf("RecordOutcome of an outcome decided before the replay: %v, want ErrDeliveryChanged", err)
		}
		wantEqual(t, "the delivery after the conflict", f.read(t, replayed), replayed)
		got, err := f.s.RecordOutcome(t.Context(), engine.NewOutcomeUpdate(f.read(t, replayed), rec))
		if err != nil {
			t.Fatalf("RecordOutcome read again: %v", err)
		}
		if got.State != engine.StatePending || got.Cycle != 2 || len(got.Attempts) != 1 || got.Attempts[0].Cycle != 1 {
			t.Errorf("recorded again: %s in cycle %d, attempts %+v; want the new cycle pending, the attempt logged in cycle 1", got.State, got.Cycle, got.Attempts)
		}
		if !s.Settle(w, time.Time{}) {
			t.Error("Settle did not hand back the delivery replayed while it was attempted")
		}
	}},
}
