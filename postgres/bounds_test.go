package postgres

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres/pgtest"
)

// boundedNode is a webhookd node on PostgreSQL as far as ingest's bounds
// go: a Service whose Dispatcher runs on the store's Scheduler, which
// counts once at start and not again for an hour. Its endpoints are at
// url ("": one that refuses connections, so every delivery stays
// pending or waiting).
func boundedNode(t *testing.T, perTenant, all int, url string) (*engine.Service, *engine.Dispatcher, *Store, *Scheduler) {
	t.Helper()
	ctx := t.Context()
	s, err := Open(ctx, pgtest.URL(t), Options{Schema: pgtest.Schema(t), MaxConns: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if url == "" {
		url = "http://127.0.0.1:9/hook"
	}
	sched := s.Scheduler(SchedulerOptions{PreClaim: 16, CountEvery: time.Hour})
	targets := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	d := engine.NewDispatcher(s, engine.DispatcherOptions{Scheduler: sched, Workers: 4, Targets: targets})
	svc := engine.NewService(s, d, engine.ServiceOptions{MaxPending: all, MaxPendingPerTenant: perTenant, Targets: targets})
	for _, tenant := range []string{"acme", "globex"} {
		if _, _, err := svc.PutTenant(ctx, tenant, engine.TenantInput{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	// acme: one endpoint unordered (pending deliveries), one ordered as a
	// whole (one pending head, the others waiting behind it); globex: one
	// unordered.
	for _, ep := range []struct {
		tenant   string
		ordering engine.Ordering
	}{{"acme", ""}, {"acme", engine.OrderingEndpoint}, {"globex", ""}} {
		if _, _, err := svc.CreateEndpoint(ctx, ep.tenant, engine.EndpointInput{URL: url, EventTypes: []string{"order.created"}, Ordering: ep.ordering}); err != nil {
			t.Fatal(err)
		}
	}
	startDispatcher(t, d, sched)
	return svc, d, s, sched
}

// flood ingests events of tenant from loops goroutines at once until
// ingest refuses one, at most max in all, and returns how many it
// acknowledged and the code of the first refusal.
func flood(t *testing.T, svc *engine.Service, tenant string, loops, max int) (int, engine.Code) {
	var mu sync.Mutex
	acked, sent := 0, 0
	var refused engine.Code
	var wg sync.WaitGroup
	for range loops {
		wg.Go(func() {
			for {
				mu.Lock()
				if refused != "" || sent >= max {
					mu.Unlock()
					return
				}
				sent++
				mu.Unlock()
				_, err := svc.Ingest(t.Context(), tenant, engine.IngestInput{Type: "order.created", Data: []byte(`{}`)})
				mu.Lock()
				switch code := engine.ErrorCode(err); {
				case err == nil:
					acked++
				case code == engine.CodeTenantOverloaded || code == engine.CodeOverloaded:
					if refused == "" {
						refused = code
					}
				default:
					t.Errorf("ingest of %s: %v", tenant, err)
					refused = code
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return acked, refused
}

// TestScheduler_BoundsBetweenCounts: a node counts what its own ingests
// made pending or waiting since the cluster's last count, so a tenant
// that sends fast on one node is refused at pending_per_tenant, and then
// every tenant at max_pending, long before the next count; by no more
// than what the node has in flight at once (one ingest per loop). The
// next count replaces what the node noted, without counting any of it
// twice.
func TestScheduler_BoundsBetweenCounts(t *testing.T) {
	const perTenant, all, loops = 40, 60, 4
	svc, d, s, sched := boundedNode(t, perTenant, all, "")
	ctx := t.Context()
	// Each acme event makes two deliveries: one pending, one pending (the
	// line's first) or waiting.
	acked, refused := flood(t, svc, "acme", loops, 4*perTenant)
	t.Logf("acme: %d events, %d deliveries, acknowledged before %q (bound %d)", acked, 2*acked, refused, perTenant)
	if refused != engine.CodeTenantOverloaded || 2*acked < perTenant || 2*acked > perTenant+2*(loops-1)+1 {
		t.Errorf("acme: %d events (%d deliveries) acknowledged, then %q; want refused with %s at %d deliveries, or up to %d more ingests in flight",
			acked, 2*acked, refused, engine.CodeTenantOverloaded, perTenant, loops-1)
	}
	held := 2 * acked
	acked, refused = flood(t, svc, "globex", loops, 2*all)
	t.Logf("globex: %d events acknowledged before %q, %d in all (bound %d)", acked, refused, held+acked, all)
	if refused != engine.CodeOverloaded || held+acked < all || held+acked > all+loops-1 {
		t.Errorf("globex: %d events acknowledged over acme's %d deliveries, then %q; want refused with %s at %d in all, or up to %d more",
			acked, held, refused, engine.CodeOverloaded, all, loops-1)
	}

	backlog := func() (acme, all int) {
		t.Helper()
		mine, every, err := d.Backlog(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		return mine.Total(), every.Total()
	}
	exact := func() (acme, all int) {
		t.Helper()
		err := s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE tenant_id = 'acme'), count(*) FROM deliveries
			WHERE state = 'pending' OR `+heldSQL).Scan(&acme, &all)
		if err != nil {
			t.Fatal(err)
		}
		return acme, all
	}
	wantAcme, wantAll := exact()
	if gotAcme, gotAll := backlog(); gotAcme != wantAcme || gotAll != wantAll {
		t.Errorf("before the next count: acme's backlog %d, all %d; the database has %d, %d", gotAcme, gotAll, wantAcme, wantAll)
	}
	if err := sched.refreshCounts(ctx); err != nil {
		t.Fatal(err)
	}
	if gotAcme, gotAll := backlog(); gotAcme != wantAcme || gotAll != wantAll {
		t.Errorf("after the count: acme's backlog %d, all %d; the database has %d, %d", gotAcme, gotAll, wantAcme, wantAll)
	}
	// A note that comes after the count that saw its ingest counts
	// nothing; an ingest after the count counts until the next.
	ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: time.Now(), APIVersion: "1", Body: []byte(`{}`)}
	res, err := s.AppendEvent(ctx, engine.NewEvent{Event: ev})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := backlog(); got != wantAcme+2 {
		t.Errorf("acme's backlog after an ingest since the count: %d, want %d", got, wantAcme+2)
	}
	if err := sched.refreshCounts(ctx); err != nil {
		t.Fatal(err)
	}
	sched.noteIngested(res)
	if got, _ := backlog(); got != wantAcme+2 {
		t.Errorf("acme's backlog after a late note of an ingest the count saw: %d, want %d", got, wantAcme+2)
	}
}

// TestScheduler_BoundsFollowOutcomes: between counts, a delivery this
// node's ingest made leaves the backlog the node answers with when this
// node records its success, so a tenant whose deliveries succeed as it
// sends is not refused at its bound for them.
func TestScheduler_BoundsFollowOutcomes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	const perTenant = 4
	svc, d, _, _ := boundedNode(t, perTenant, 0, srv.URL)
	ctx := t.Context()
	for i := range 3 * perTenant {
		if _, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)}); err != nil {
			t.Fatalf("ingest %d: %v", i, err)
		}
		var backlog engine.Backlog
		drained := poll(10*time.Second, func() bool {
			var err error
			if backlog, _, err = d.Backlog(ctx, "acme"); err != nil {
				t.Fatal(err)
			}
			return backlog.Total() == 0
		})
		if !drained {
			t.Fatalf("after ingest %d succeeded at both endpoints, acme's backlog is still %s", i, backlog)
		}
	}
}

// poll is the postgres tests' one bounded poller, for a state of the
// real server (or of real receivers) that nothing signals: it calls cond
// at once and then every 10 ms until it holds or d has passed, and
// reports whether it held.
func poll(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) { // the real server: nothing signals it
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func TestSnapshot_Sees(t *testing.T) {
	for _, tc := range []struct {
		text string
		xid  uint64
		want bool
	}{
		{"10:20:", 9, true},
		{"10:20:", 10, true},
		{"10:20:", 19, true},
		{"10:20:", 20, false},
		{"10:20:10,14", 10, false},
		{"10:20:10,14", 14, false},
		{"10:20:10,14", 15, true},
		{"10:10:", 10, false},
	} {
		snap, err := parseSnapshot(tc.text)
		if err != nil {
			t.Fatal(err)
		}
		if got := snap.sees(tc.xid); got != tc.want {
			t.Errorf("%s sees %d = %t, want %t", tc.text, tc.xid, got, tc.want)
		}
	}
	if (snapshot{}).sees(1) {
		t.Error("the zero snapshot sees a transaction")
	}
	for _, bad := range []string{"", "10:20", "x:20:", "10:20:1,y"} {
		if _, err := parseSnapshot(bad); err == nil {
			t.Errorf("parseSnapshot(%q): no error", bad)
		}
	}
}

// TestScheduler_BoundsCountReplays: between counts, the dead letters a
// range replay brings back into the backlog (UpdateDeliveries) count in
// the backlog this node answers with, as a backfill's deliveries do, so
// that a range replay paced by the pending bounds sees them before the
// next count; a resume of paused deliveries, which were in the backlog
// already, adds nothing.
func TestScheduler_BoundsCountReplays(t *testing.T) {
	var refuse atomic.Bool // the receiver answers 400; once false, it hangs
	refuse.Store(true)
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !refuse.Load() {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hang) })
	svc, d, s, sched := boundedNode(t, 0, 0, srv.URL)
	ctx := t.Context()
	for i := range 5 {
		if _, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)}); err != nil {
			t.Fatalf("ingest %d: %v", i, err)
		}
	}
	dead := func() int {
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE tenant_id = 'acme' AND state = 'dead'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if !poll(10*time.Second, func() bool { return dead() == 10 }) {
		t.Fatalf("%d of acme's 10 deliveries dead, want all", dead())
	}
	refuse.Store(false) // the replayed ones hang: they stay pending
	if err := sched.refreshCounts(ctx); err != nil {
		t.Fatal(err)
	}
	backlog := func() int {
		t.Helper()
		mine, _, err := d.Backlog(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		return mine.Total()
	}
	if got := backlog(); got != 0 {
		t.Fatalf("acme's backlog with every delivery dead: %d, want 0", got)
	}
	r := engine.Replay{At: time.Now(), By: "test"}
	ds, err := s.UpdateDeliveries(ctx, engine.Selection{Tenant: "acme", State: engine.StateDead}, 4, func(d engine.Delivery) engine.Delivery {
		return engine.ReplayDelivery(d, r, "")
	})
	if err != nil || len(ds) != 4 {
		t.Fatalf("replay of 4 dead letters: %d replayed, %v", len(ds), err)
	}
	if got := backlog(); got != 4 {
		t.Errorf("acme's backlog right after 4 dead letters were replayed, before the next count: %d, want 4", got)
	}
	if err := sched.refreshCounts(ctx); err != nil {
		t.Fatal(err)
	}
	if got := backlog(); got != 4 {
		t.Errorf("acme's backlog after the next count: %d, want 4 (nothing counted twice)", got)
	}
}
