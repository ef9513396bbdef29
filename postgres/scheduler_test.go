package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
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

// TestScheduler_EndpointSharesAcrossNodes: the live nodes split each
// endpoint's bounds among them: every node gets at least one attempt,
// together they get the concurrency (or one each, with more nodes than
// that) and the rate; a node that stops, or dies, leaves its share to
// the others at their next heartbeat.
func TestScheduler_EndpointSharesAcrossNodes(t *testing.T) {
	clock := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ss := nodes(t, 4, clock)
	ctx := t.Context()
	var cs []*Scheduler
	for _, s := range ss {
		c := s.Scheduler(SchedulerOptions{Poll: 20 * time.Millisecond})
		if _, err := c.Recover(ctx, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		cs = append(cs, c)
	}
	beat := func(cs ...*Scheduler) {
		t.Helper()
		for _, c := range cs {
			if err := c.heartbeat(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(what string, cs ...*Scheduler) {
		t.Helper()
		for _, bound := range []int{1, 2, 3, 4, 8, 100} {
			for i := range 50 {
				ep := fmt.Sprintf("ep_%d", i)
				sum, rate := 0, 0.0
				for _, c := range cs {
					n, r := c.EndpointShare(ep, bound, 10)
					if n < 1 {
						t.Fatalf("%s: a node's share of %d for %s is %d", what, bound, ep, n)
					}
					sum, rate = sum+n, rate+r
				}
				if want := max(bound, len(cs)); sum != want {
					t.Fatalf("%s: the %d nodes' shares of %d for %s add up to %d, want %d", what, len(cs), bound, ep, sum, want)
				}
				if math.Abs(rate-10) > 1e-9 {
					t.Fatalf("%s: the nodes' rates for %s add up to %v, want 10", what, ep, rate)
				}
			}
		}
	}
	beat(cs...)
	check("four nodes", cs...)
	// The larger parts fall to different nodes for different endpoints.
	got := map[int]bool{}
	for i := range 50 {
		for j, c := range cs {
			if n, _ := c.EndpointShare(fmt.Sprintf("ep_%d", i), 5, 0); n == 2 {
				got[j] = true
			}
		}
	}
	if len(got) != len(cs) {
		t.Errorf("over 50 endpoints, only nodes %v had the larger share of 5", got)
	}

	cs[3].Close() // stops: leaves at once
	beat(cs[:3]...)
	check("after one stopped", cs[:3]...)

	// cs[2] dies: no heartbeat for more than a lease, while the others
	// go on beating every third of one.
	for range 4 {
		clock.add(DefaultLease / 3)
		beat(cs[:2]...)
	}
	check("after one died", cs[:2]...)
}

// dispatchingNodes starts two nodes on one schema, each with a
// dispatcher of opts on its leased scheduler, for tenant acme with one
// endpoint at url, and returns a function that ingests n events through
// them in turn as the service does (appended, then handed to the
// ingesting node's dispatcher).
func dispatchingNodes(t *testing.T, url string, opts engine.DispatcherOptions) (ss []*Store, ingest func(n int)) {
	t.Helper()
	dbURL, schema := pgtest.URL(t), pgtest.Schema(t)
	ctx := t.Context()
	var ds []*engine.Dispatcher
	for i := range 2 {
		s, err := Open(ctx, dbURL, Options{Schema: schema, MaxConns: 16, Lease: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if i == 0 {
			now := time.Now()
			if _, _, err := s.PutTenant(ctx, engine.Tenant{ID: "acme", Created: now, Updated: now}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.PutEventType(ctx, engine.EventType{Name: "order.created", Created: now, Updated: now}); err != nil {
				t.Fatal(err)
			}
			ep := engine.Endpoint{ID: engine.NewID("ep"), TenantID: "acme", URL: url, EventTypes: []string{"order.created"},
				Created: now, Updated: now, Secrets: []engine.Secret{{Key: engine.NewSecret()}}}
			if err := s.CreateEndpoint(ctx, ep, 0); err != nil {
				t.Fatal(err)
			}
		}
		sched := s.Scheduler(SchedulerOptions{EndpointConcurrency: opts.EndpointConcurrency, PreClaim: 48})
		o := opts
		o.Scheduler, o.ClaimAhead, o.Workers = sched, 32, 16
		o.Policy = engine.DefaultRetryPolicy()
		o.Policy.AttemptTimeout = 2 * time.Second // under the lease, as the config requires
		o.Targets = engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
		d := engine.NewDispatcher(s, o)
		startDispatcher(t, d, sched)
		ss, ds = append(ss, s), append(ds, d)
	}
	for _, s := range ss { // both count both before the load
		if err := s.preclaimer.Load().heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return ss, func(n int) {
		t.Helper()
		for i := range n {
			s, d := ss[i%2], ds[i%2]
			ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: time.Now().UTC(), APIVersion: "1", Body: []byte(`{}`)}
			res, err := s.AppendEvent(ctx, engine.NewEvent{Event: ev})
			if err != nil {
				t.Fatal(err)
			}
			for _, dl := range res.Deliveries {
				d.Enqueue(dl.ID, dl.TenantID, dl.EndpointID, dl.NextAttemptAt)
			}
		}
	}
}

// startDispatcher starts d, whose Scheduler is sched, and stops both
// when t ends.
func startDispatcher(t *testing.T, d *engine.Dispatcher, sched *Scheduler) {
	t.Helper()
	if err := d.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Stop(stop)
		sched.Close()
	})
}

// waitDelivered waits up to 30 s until got counts n deliveries, and
// fails the test if it does not.
func waitDelivered(t *testing.T, got *atomic.Int64, n int64) {
	t.Helper()
	if !poll(30*time.Second, func() bool { return got.Load() >= n }) {
		t.Fatalf("%d of %d delivered", got.Load(), n)
	}
}

// slowReceiver is a loopback endpoint that answers 204 after hold and
// counts the requests it answered and the most it held at once.
type slowReceiver struct {
	*httptest.Server
	inflight, most, got atomic.Int64
}

func newSlowReceiver(t *testing.T, hold time.Duration) *slowReceiver {
	rc := &slowReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := rc.inflight.Add(1)
		for m := rc.most.Load(); n > m && !rc.most.CompareAndSwap(m, n); m = rc.most.Load() {
		}
		time.Sleep(hold) // a real receiver on loopback, slow: the scenario
		rc.inflight.Add(-1)
		rc.got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// TestDispatchers_EndpointConcurrencyAcrossNodes: two nodes ingesting
// and delivering to one slow endpoint at once never have more than its
// concurrency of attempts in flight between them, and deliver all.
func TestDispatchers_EndpointConcurrencyAcrossNodes(t *testing.T) {
	const bound, events = 4, 120
	srv := newSlowReceiver(t, 20*time.Millisecond)
	ss, ingest := dispatchingNodes(t, srv.URL, engine.DispatcherOptions{EndpointConcurrency: bound})
	ingest(events)
	waitDelivered(t, &srv.got, events)
	if m := srv.most.Load(); m > bound {
		t.Errorf("%d attempts of one endpoint were in flight at once, bound %d", m, bound)
	}
	if ss[0].cachedIngests.Load()+ss[1].cachedIngests.Load() == 0 {
		t.Error("no ingest took the one-round-trip path (and claimed its deliveries)")
	}
}

// TestDispatchers_EndpointRateAcrossNodes: two nodes delivering to one
// endpoint at once keep its rate between them: 40 deliveries at 10 per
// second, after a burst of 10 (5 per node), take at least 3 seconds
// (with each node at the whole rate they took 1).
func TestDispatchers_EndpointRateAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 3 s")
	}
	const rate, events = 10, 40
	var got atomic.Int64
	var first, last atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		last.Store(now)
		got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	_, ingest := dispatchingNodes(t, srv.URL, engine.DispatcherOptions{EndpointRate: rate})
	ingest(events)
	waitDelivered(t, &got, events)
	// The first attempts are the burst; the other 30 come at 10/s.
	if took := time.Duration(last.Load() - first.Load()); took < 2800*time.Millisecond {
		t.Errorf("%d deliveries at %d/s between two nodes took %v, want 3 s at least", events, rate, took)
	}
}

// succeeded is the first attempt of cycle 1 of delivery id, which got a
// 204 at at.
func succeeded(id string, at time.Time) engine.AttemptRecord {
	return engine.AttemptRecord{DeliveryID: id, Cycle: 1, State: engine.StateSucceeded, At: at,
		Attempt: engine.Attempt{Cycle: 1, Number: 1, Start: at, Status: 204, Outcome: engine.OutcomeSuccess}}
}

// TestRecordOutcome_TheHoldersRecord: the holder's record of an attempt
// as it read the delivery is one compare-and-set; a replay between the
// read and the record refuses it as changed, and decided again on the
// delivery read again it applies to the replayed delivery (the attempt
// is kept, the new cycle stays pending and is handed back to the holder
// at once); a lease another node took over refuses it.
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
	read := make([]engine.Delivery, len(ws))
	for i, w := range ws {
		in, err := ss[0].AttemptInput(ctx, w.DeliveryID)
		if err != nil {
			t.Fatal(err)
		}
		read[i] = in.Delivery
	}

	// As read: stored, and the lease is over.
	d, err := ss[0].RecordOutcome(ctx, engine.NewOutcomeUpdate(read[0], succeeded(ws[0].DeliveryID, clock.now())))
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
	if _, err := ss[0].RecordOutcome(ctx, engine.NewOutcomeUpdate(read[1], succeeded(ws[1].DeliveryID, clock.now()))); !errors.Is(err, engine.ErrDeliveryChanged) {
		t.Fatalf("record as read before a replay: %v, want ErrDeliveryChanged", err)
	}
	again, err := ss[0].Delivery(ctx, "acme", ws[1].DeliveryID)
	if err != nil {
		t.Fatal(err)
	}
	d, err = ss[0].RecordOutcome(ctx, engine.NewOutcomeUpdate(again, succeeded(ws[1].DeliveryID, clock.now())))
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
	if _, err := ss[0].RecordOutcome(ctx, engine.NewOutcomeUpdate(read[2], succeeded(ws[2].DeliveryID, clock.now()))); !errors.Is(err, engine.ErrClaimLost) {
		t.Errorf("the stale holder's record: %v, want ErrClaimLost", err)
	}
	if got, _ := ss[1].Delivery(ctx, "acme", ws[2].DeliveryID); got.State != engine.StatePending || len(got.Attempts) != 0 {
		t.Errorf("after the refused record: %s with %d attempts, want pending with none", got.State, len(got.Attempts))
	}
}

// attemptAt is the outcome of attempt n of cycle 1 of read (the delivery
// as the dispatcher read it) at at: a 204, or, with next set, a 500 due
// again at next.
func attemptAt(read engine.Delivery, n int, at, next time.Time) engine.OutcomeUpdate {
	rec := engine.AttemptRecord{DeliveryID: read.ID, Cycle: 1, State: engine.StateSucceeded, At: at,
		Attempt: engine.Attempt{Cycle: 1, Number: n, Start: at, Status: 204, Outcome: engine.OutcomeSuccess}}
	if !next.IsZero() {
		rec.State, rec.NextAttemptAt, rec.LastStatus = engine.StatePending, next, 500
		rec.Attempt.Status, rec.Attempt.Outcome = 500, engine.OutcomeRetry
	}
	return engine.NewOutcomeUpdate(read, rec)
}

// attemptInput is AttemptInput's delivery; it fails t on an error.
func attemptInput(t *testing.T, s *Store, id string) engine.Delivery {
	t.Helper()
	in, err := s.AttemptInput(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return in.Delivery
}

// heldOne makes one pending delivery, claims it with a scheduler of its
// store, and reads it for its attempt as the dispatcher does; it returns
// the delivery as read.
func heldOne(t *testing.T) (*Store, *Scheduler, engine.Work, engine.Delivery, *manualClock) {
	t.Helper()
	clock := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := nodes(t, 1, clock)[0]
	pendingFor(t, s, clock, 1)
	c := s.Scheduler(SchedulerOptions{Poll: 20 * time.Millisecond})
	if _, err := c.Recover(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ws := claimNow(t, c)
	if len(ws) != 1 {
		t.Fatalf("claimed %d, want 1", len(ws))
	}
	return s, c, ws[0], attemptInput(t, s, ws[0].DeliveryID), clock
}

// TestScheduler_NoSecondClaimOfAHeldDelivery: a delivery this process
// holds is not claimed again here before its holder settles it, even
// when the holder's record ended the lease and its retry has come due
// since: the claim that takes it from the database is the holder's, and
// Settle hands it back under it. (Claim handed such a delivery to the
// dispatcher a second time, and the holder's Settle then ended the new
// claim's lease: the node claimed it a third time and made its next
// attempt twice at once.)
func TestScheduler_NoSecondClaimOfAHeldDelivery(t *testing.T) {
	s, c, w, read, clock := heldOne(t)
	ctx := t.Context()

	// Attempt 1 fails; the retry is due 20 ms later, and a second later
	// the holder has still not settled it.
	now := clock.now()
	if d, err := s.RecordOutcome(ctx, attemptAt(read, 1, now, now.Add(20*time.Millisecond))); err != nil || d.State != engine.StatePending {
		t.Fatalf("record attempt 1: %s, %v", d.State, err)
	}
	clock.add(time.Second)
	if again := claimNow(t, c); len(again) != 0 {
		t.Errorf("claimed %v again while this process held it", again)
	}
	if !c.Settle(w, time.Now()) {
		t.Error("Settle did not hand the due retry back to its holder")
	}

	// Attempt 2, by the holder, under the lease the claim took.
	d, err := s.RecordOutcome(ctx, attemptAt(attemptInput(t, s, w.DeliveryID), 2, clock.now(), time.Time{}))
	if err != nil {
		t.Fatalf("record attempt 2: %v", err)
	}
	if d.State != engine.StateSucceeded || len(d.Attempts) != 2 {
		t.Errorf("after attempt 2: %s with %d attempts, want succeeded with 2", d.State, len(d.Attempts))
	}
	if c.Settle(w, time.Time{}) {
		t.Error("Settle handed back a delivery that succeeded")
	}
	if again := claimNow(t, c); len(again) != 0 {
		t.Errorf("claimed %v after it succeeded", again)
	}
}

// TestScheduler_NoSecondClaimWhileTheHolderRecords: the same when the
// claim comes between the commit of the holder's record and the moment
// its writer notes what became of the lease.
func TestScheduler_NoSecondClaimWhileTheHolderRecords(t *testing.T) {
	s, c, w, _, clock := heldOne(t)
	ctx := t.Context()
	token, _, _, ok := s.claims.asRead(w.DeliveryID) // the record starts
	if !ok {
		t.Fatal("nothing read under the claim")
	}
	// Its commit: the lease is over, the retry due.
	if _, err := s.pool.Exec(ctx, "UPDATE deliveries SET lease_token = NULL, lease_until = NULL, due_at = $2 WHERE id = $1",
		w.DeliveryID, clock.now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	if again := claimNow(t, c); len(again) != 0 {
		t.Errorf("claimed %v again while its holder's record was being written", again)
	}
	s.claims.recorded(w.DeliveryID, token, leaseEnd) // the record returns
	if !c.Settle(w, time.Now()) {
		t.Error("Settle did not hand the due delivery back to its holder")
	}
	if _, err := s.RecordOutcome(ctx, attemptAt(attemptInput(t, s, w.DeliveryID), 1, clock.now(), time.Time{})); err != nil {
		t.Errorf("the holder's record under the lease the claim took: %v", err)
	}
}
