package postgres

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres/pgtest"
)

// manualClock is a store clock a test moves by hand.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// nodes opens n stores on one schema, as n webhookd processes would, on
// clock.
func nodes(t testing.TB, n int, clock *manualClock) []*Store {
	t.Helper()
	url, schema := pgtest.URL(t), pgtest.Schema(t)
	var out []*Store
	for range n {
		s, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 16, Now: clock.now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out = append(out, s)
	}
	return out
}

// pendingFor makes a tenant with one endpoint and n events for it, due
// at the clock's now, and returns the endpoint's ID.
func pendingFor(t *testing.T, s *Store, clock *manualClock, n int) string {
	t.Helper()
	ctx := t.Context()
	now := clock.now()
	ep := acme(t, s, now, 1)[0]
	for range n {
		ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: now, APIVersion: "1", Body: []byte(`{}`)}
		if _, err := s.AppendEvent(ctx, engine.NewEvent{Event: ev}); err != nil {
			t.Fatal(err)
		}
	}
	return ep
}

// acme makes tenant acme, the type order.created, and endpoints
// endpoints of acme's that subscribe to it, and returns their IDs.
func acme(tb testing.TB, s *Store, now time.Time, endpoints int) []string {
	tb.Helper()
	ctx := tb.Context()
	if _, _, err := s.PutTenant(ctx, engine.Tenant{ID: "acme", Created: now, Updated: now}); err != nil {
		tb.Fatal(err)
	}
	if _, _, err := s.PutEventType(ctx, engine.EventType{Name: "order.created", Created: now, Updated: now}); err != nil {
		tb.Fatal(err)
	}
	var ids []string
	for range endpoints {
		ep := engine.Endpoint{ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/hook", EventTypes: []string{"order.created"},
			Created: now, Updated: now, Secrets: []engine.Secret{{Key: engine.NewSecret()}}}
		if err := s.CreateEndpoint(ctx, ep, 0); err != nil {
			tb.Fatal(err)
		}
		ids = append(ids, ep.ID)
	}
	return ids
}

// claimNow returns what c claims within a short wait (nothing due: none).
func claimNow(t *testing.T, c *Scheduler) []engine.Work {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	ws, err := c.Claim(ctx, 0)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Claim: %v", err)
	}
	return ws
}

// TestScheduler_EndpointConcurrencyAcrossNodes: two nodes claiming from
// one database never hold more deliveries of an endpoint than its
// concurrency between them, and a settled one makes room for one more.
func TestScheduler_EndpointConcurrencyAcrossNodes(t *testing.T) {
	clock := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ss := nodes(t, 2, clock)
	pendingFor(t, ss[0], clock, 20)
	var cs []*Scheduler
	for _, s := range ss {
		c := s.Scheduler(SchedulerOptions{EndpointConcurrency: 3, Poll: 20 * time.Millisecond})
		if _, err := c.Recover(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		cs = append(cs, c)
	}
	a, b := claimNow(t, cs[0]), claimNow(t, cs[1])
	if len(a)+len(b) != 3 {
		t.Fatalf("the nodes claimed %d and %d deliveries of one endpoint, want 3 in all", len(a), len(b))
	}
	held, node := a, 0
	if len(held) == 0 {
		held, node = b, 1
	}
	w := held[0]
	if _, err := ss[node].RecordOutcome(t.Context(), w.DeliveryID, func(d engine.Delivery) (engine.Delivery, error) {
		return engine.RecordAttempt(d, engine.AttemptRecord{DeliveryID: d.ID, Cycle: d.Cycle, State: engine.StateSucceeded, At: clock.now(),
			Attempt: engine.Attempt{Cycle: d.Cycle, Number: 1, Start: clock.now(), Status: 204, Outcome: engine.OutcomeSuccess}}), nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	cs[node].Settle(w, time.Time{})
	if more := len(claimNow(t, cs[0])) + len(claimNow(t, cs[1])); more != 1 {
		t.Errorf("after one settled, the nodes claimed %d more, want 1", more)
	}
}

// TestScheduler_EndpointRateAcrossNodes: an endpoint's rate holds for
// the claims of all nodes together: a burst of one second's worth, then
// the rate.
func TestScheduler_EndpointRateAcrossNodes(t *testing.T) {
	clock := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ss := nodes(t, 2, clock)
	pendingFor(t, ss[0], clock, 40)
	var cs []*Scheduler
	for _, s := range ss {
		c := s.Scheduler(SchedulerOptions{EndpointRate: 5, Poll: 20 * time.Millisecond})
		if _, err := c.Recover(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		cs = append(cs, c)
	}
	claimed := func() int { return len(claimNow(t, cs[0])) + len(claimNow(t, cs[1])) }
	if n := claimed(); n != 5 {
		t.Errorf("at first the nodes claimed %d, want the burst of 5", n)
	}
	clock.add(200 * time.Millisecond)
	if n := claimed(); n != 1 {
		t.Errorf("200ms later they claimed %d, want 1 (5 per second)", n)
	}
	clock.add(time.Second)
	if n := claimed(); n != 5 {
		t.Errorf("a second later they claimed %d, want 5", n)
	}
}

// succeeded is the transition of the first attempt of cycle 1 (as the
// dispatcher read it), which got a 204 at at.
func succeeded(at time.Time) func(engine.Delivery) (engine.Delivery, error) {
	return func(d engine.Delivery) (engine.Delivery, error) {
		return engine.RecordAttempt(d, engine.AttemptRecord{DeliveryID: d.ID, Cycle: 1, State: engine.StateSucceeded, At: at,
			Attempt: engine.Attempt{Cycle: 1, Number: 1, Start: at, Status: 204, Outcome: engine.OutcomeSuccess}}), nil
	}
}

// TestRecordOutcome_TheHoldersRecord: the holder's record of an attempt
// as it read the delivery is one compare-and-set; a replay between the
// read and the record makes it apply to the replayed delivery instead
// (the attempt is kept, the new cycle stays pending and is handed back
// to the holder at once); a lease another node took over refuses it.
func TestRecordOutcome_TheHoldersRecord(t *testing.T) {
	clock := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ss := nodes(t, 2, clock)
	pendingFor(t, ss[0], clock, 3)
	c := ss[0].Scheduler(SchedulerOptions{Poll: 20 * time.Millisecond})
	if _, err := c.Recover(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ws := claimNow(t, c)
	if len(ws) != 3 {
		t.Fatalf("claimed %d, want 3", len(ws))
	}
	ctx := t.Context()
	for _, w := range ws {
		if _, err := ss[0].AttemptInput(ctx, w.DeliveryID); err != nil {
			t.Fatal(err)
		}
	}

	// As read: stored, and the lease is over.
	d, err := ss[0].RecordOutcome(ctx, ws[0].DeliveryID, succeeded(clock.now()), nil)
	if err != nil || d.State != engine.StateSucceeded {
		t.Fatalf("record as read: %v, %v", d.State, err)
	}
	if got, _ := ss[1].Delivery(ctx, "acme", d.ID); got.State != engine.StateSucceeded || len(got.Attempts) != 1 {
		t.Errorf("stored: %s with %d attempts, want succeeded with 1", got.State, len(got.Attempts))
	}
	if c.Settle(ws[0], time.Time{}) {
		t.Error("Settle handed back a delivery that succeeded")
	}

	// Replayed (from another node) between the read and the record.
	if _, err := ss[1].UpdateDelivery(ctx, ws[1].DeliveryID, func(d engine.Delivery) (engine.Delivery, error) {
		d.Replays = append(d.Replays, engine.Replay{At: clock.now(), By: "admin", Cycle: d.Cycle + 1})
		d.Cycle, d.CycleAttempts, d.CycleStart, d.NextAttemptAt = d.Cycle+1, 0, clock.now(), clock.now()
		return d, nil
	}); err != nil {
		t.Fatal(err)
	}
	d, err = ss[0].RecordOutcome(ctx, ws[1].DeliveryID, succeeded(clock.now()), nil)
	if err != nil {
		t.Fatalf("record after a replay: %v", err)
	}
	if d.State != engine.StatePending || d.Cycle != 2 || len(d.Attempts) != 1 || d.Attempts[0].Cycle != 1 {
		t.Errorf("after a replay: %s, cycle %d, attempts %+v; want the old cycle's attempt kept and the new cycle pending", d.State, d.Cycle, d.Attempts)
	}
	if !c.Settle(ws[1], time.Time{}) {
		t.Error("Settle did not hand back a delivery replayed while it was attempted")
	}

	// Taken over: the lease ended and another node claimed it.
	clock.add(time.Hour)
	other := ss[1].Scheduler(SchedulerOptions{Poll: 20 * time.Millisecond})
	if _, err := other.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	taken := claimNow(t, other)
	if !slices.ContainsFunc(taken, func(w engine.Work) bool { return w.DeliveryID == ws[2].DeliveryID }) {
		t.Fatalf("the other node claimed %v, not %s", taken, ws[2].DeliveryID)
	}
	if _, err := ss[0].RecordOutcome(ctx, ws[2].DeliveryID, succeeded(clock.now()), nil); !errors.Is(err, engine.ErrClaimLost) {
		t.Errorf("the stale holder's record: %v, want ErrClaimLost", err)
	}
	if got, _ := ss[1].Delivery(ctx, "acme", ws[2].DeliveryID); got.State != engine.StatePending || len(got.Attempts) != 0 {
		t.Errorf("after the refused record: %s with %d attempts, want pending with none", got.State, len(got.Attempts))
	}
}

// TestScheduler_EndpointConcurrencyUnderRacingClaims: two nodes claim and
// record one endpoint's deliveries as fast as they can, at the same
// time; the leases live at any moment never pass its concurrency.
func TestScheduler_EndpointConcurrencyUnderRacingClaims(t *testing.T) {
	clock := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ss := nodes(t, 2, clock)
	const n, bound = 120, 3
	pendingFor(t, ss[0], clock, n)
	ctx := t.Context()
	var done atomic.Int64
	var most atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() { // the watcher
		for {
			select {
			case <-stop:
				return
			default:
			}
			var live int64
			if err := ss[0].pool.QueryRow(ctx, "SELECT count(*) FROM deliveries WHERE state = 'pending' AND lease_token IS NOT NULL AND lease_until > $1", clock.now().UnixNano()).Scan(&live); err == nil && live > most.Load() {
				most.Store(live)
			}
		}
	}()
	for _, s := range ss {
		c := s.Scheduler(SchedulerOptions{EndpointConcurrency: bound, Poll: 5 * time.Millisecond})
		if _, err := c.Recover(ctx, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(30 * time.Second)
			for done.Load() < n && time.Now().Before(deadline) {
				cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				ws, _ := c.Claim(cctx, 0)
				cancel()
				for _, w := range ws {
					if _, err := s.AttemptInput(ctx, w.DeliveryID); err != nil {
						t.Error(err)
						return
					}
					if _, err := s.RecordOutcome(ctx, w.DeliveryID, succeeded(clock.now()), nil); err != nil {
						t.Error(err)
						return
					}
					c.Settle(w, time.Time{})
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if done.Load() != n {
		t.Fatalf("%d of %d recorded", done.Load(), n)
	}
	if m := most.Load(); m > bound {
		t.Errorf("%d leases of one endpoint were live at once, bound %d", m, bound)
	}
}
