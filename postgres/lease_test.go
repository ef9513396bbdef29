package postgres

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres/pgtest"
)

// TestDispatcher_NoAttemptOnALeaseNearItsEnd: a delivery claimed and
// waiting in the dispatcher while its lease runs down (the process was
// stalled: no renewal reached the database) is not sent under that
// lease once less than the attempt timeout is left of it; it goes back,
// is claimed again under a lease of its own, and only then sent. Every
// request the receiver gets comes while the delivery's lease in the
// database has at least the attempt timeout to run.
func TestDispatcher_NoAttemptOnALeaseNearItsEnd(t *testing.T) {
	clock := &manualClock{t: time.Now()}
	s := nodes(t, 1, clock)[0]
	ctx := t.Context()
	policy := engine.DefaultRetryPolicy()

	var mu sync.Mutex
	var left []time.Duration // the lease left, at each request
	arrived := make(chan struct{}, 8)
	release := make(chan struct{})
	first := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var until int64
		if err := s.pool.QueryRow(context.Background(), "SELECT lease_until FROM deliveries WHERE event_id = $1", r.Header.Get("webhook-id")).Scan(&until); err != nil {
			t.Errorf("read the lease: %v", err)
		}
		mu.Lock()
		left = append(left, time.Unix(0, until).Sub(clock.now()))
		hold := first
		first = false
		mu.Unlock()
		arrived <- struct{}{}
		if hold { // the endpoint's one slot stays taken meanwhile
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	now := clock.now()
	acme(t, s, now, 0)
	ep := engine.Endpoint{ID: engine.NewID("ep"), TenantID: "acme", URL: srv.URL, EventTypes: []string{"order.created"},
		Created: now, Updated: now, Secrets: []engine.Secret{{Key: engine.NewSecret()}}}
	if err := s.CreateEndpoint(ctx, ep, 0); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 2 {
		ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: now, APIVersion: "1", Body: []byte(`{}`)}
		res, err := s.AppendEvent(ctx, engine.NewEvent{Event: ev})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Deliveries[0].ID)
	}
	sched := s.Scheduler(SchedulerOptions{EndpointConcurrency: 1, Poll: 50 * time.Millisecond})
	d := engine.NewDispatcher(s, engine.DispatcherOptions{Scheduler: sched, ClaimAhead: 8, Workers: 4, EndpointConcurrency: 1, Policy: policy,
		Targets: engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}})
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Stop(stop)
		sched.Close()
	}()

	<-arrived
	// Both are claimed: one in flight, the other waiting for the slot.
	if !poll(10*time.Second, func() bool { return sched.Holds(ids[0]) && sched.Holds(ids[1]) }) {
		t.Fatal("the two deliveries were not both claimed within 10 s")
	}
	// The lease runs down to less than the attempt timeout, as it does
	// for a process stopped past its renewals.
	clock.add(s.lease - policy.AttemptTimeout/2)
	close(release)

	for _, id := range ids {
		var dl engine.Delivery
		if !poll(15*time.Second, func() bool {
			var err error
			if dl, err = s.Delivery(ctx, "acme", id); err != nil {
				t.Fatal(err)
			}
			return dl.State == engine.StateSucceeded
		}) {
			t.Fatalf("delivery %s is %s 15 s on", id, dl.State)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(left) != 2 {
		t.Errorf("%d requests, want 2", len(left))
	}
	for i, l := range left {
		if l < policy.AttemptTimeout {
			t.Errorf("request %d was sent with %s left of its lease, less than the attempt timeout (%s)", i+1, l, policy.AttemptTimeout)
		}
	}
}

// TestDispatchers_EndpointConcurrencyAtColdStart: three nodes started
// together (a tenth of a second apart) on a schema with a backlog for
// one slow endpoint keep its concurrency between them from their first
// attempts: none starts at the whole bound before it has heard of the
// others. The documented allowance while nodes join is the bound and
// one node's share more.
func TestDispatchers_EndpointConcurrencyAtColdStart(t *testing.T) {
	const bound, nodesN, events = 8, 3, 48
	const lease = 5 * time.Second
	srv := newSlowReceiver(t, 300*time.Millisecond)

	dbURL, schema := pgtest.URL(t), pgtest.Schema(t)
	ctx := t.Context()
	var ss []*Store
	for range nodesN {
		s, err := Open(ctx, dbURL, Options{Schema: schema, MaxConns: 16, Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		ss = append(ss, s)
	}
	now := time.Now()
	const tenant = "cold"
	if _, _, err := ss[0].PutTenant(ctx, engine.Tenant{ID: tenant, Created: now, Updated: now}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ss[0].PutEventType(ctx, engine.EventType{Name: "order.created", Created: now, Updated: now}); err != nil {
		t.Fatal(err)
	}
	ep := engine.Endpoint{ID: engine.NewID("ep"), TenantID: tenant, URL: srv.URL, EventTypes: []string{"order.created"},
		Created: now, Updated: now, Secrets: []engine.Secret{{Key: engine.NewSecret()}}}
	if err := ss[0].CreateEndpoint(ctx, ep, 0); err != nil {
		t.Fatal(err)
	}
	for range events {
		ev := engine.Event{ID: engine.NewID("evt"), TenantID: tenant, Type: "order.created", Created: now, APIVersion: "1", Body: []byte(`{}`)}
		if _, err := ss[0].AppendEvent(ctx, engine.NewEvent{Event: ev}); err != nil {
			t.Fatal(err)
		}
	}

	for i, s := range ss {
		if i > 0 {
			time.Sleep(100 * time.Millisecond) // real nodes on a real server, started a tenth of a second apart: the scenario
		}
		sched := s.Scheduler(coldStartOptions(bound, lease))
		policy := engine.DefaultRetryPolicy()
		policy.AttemptTimeout = 2 * time.Second // under the lease, as the config requires
		d := engine.NewDispatcher(s, engine.DispatcherOptions{Scheduler: sched, ClaimAhead: 32, Workers: 16, EndpointConcurrency: bound, Policy: policy,
			Targets: engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}})
		startDispatcher(t, d, sched)
	}
	waitDelivered(t, &srv.got, events)
	allowance := int64(bound + (bound+nodesN-1)/nodesN)
	t.Logf("at most %d attempts in flight at once (bound %d, allowance while nodes join %d)", srv.most.Load(), bound, allowance)
	if m := srv.most.Load(); m > allowance {
		t.Errorf("%d attempts of one endpoint were in flight at once as %d nodes started together, bound %d, allowance %d", m, nodesN, bound, allowance)
	}
}

// coldStartOptions are the SchedulerOptions of a node as webhookd wires
// them, for an endpoint concurrency of bound and a lease of lease.
func coldStartOptions(bound int, lease time.Duration) SchedulerOptions {
	return SchedulerOptions{EndpointConcurrency: bound, PreClaim: 64, JoinWait: lease / 10}
}
