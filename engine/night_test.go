package engine_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/storage"
)

// TestDispatcher_ExtendedPolicyOutlivesANight: a receiver is down for
// eight hours, longer than the standard policy's 75-minute window, and
// webhookd itself restarts in the middle of it. On the bbolt file, in a
// synctest bubble (the test clock: a day passes at no cost in real
// time), the delivery to the endpoint on the standard policy is dead
// after its 6 attempts; the one to the endpoint that follows its
// tenant's extended policy keeps its schedule through the restart (its
// timer rebuilt from the retry index) and succeeds at the first attempt
// after the receiver is back, the 7th, 17 h 35 m after ingest.
func TestDispatcher_ExtendedPolicyOutlivesANight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "webhookd.db")
		var down atomic.Bool
		down.Store(true)
		var mu sync.Mutex
		arrived := map[string][]time.Time{} // by URL path
		answer := func(r *http.Request) int {
			mu.Lock()
			arrived[r.URL.Path] = append(arrived[r.URL.Path], time.Now())
			mu.Unlock()
			if down.Load() {
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		}
		open := func() (*storage.DB, *engine.Node) {
			db, err := storage.Open(path, storage.Options{})
			if err != nil {
				t.Fatal(err)
			}
			node := engine.NewNode(db, engine.NodeOptions{
				Dispatcher: engine.DispatcherOptions{
					Workers: 2, Client: bubbleClient(answer), Targets: bubbleTargets, Random: func() float64 { return 0.5 },
					Policies: map[string]engine.RetryPolicy{engine.ExtendedRetryPolicyName: engine.ExtendedRetryPolicy()},
				},
				Service: engine.ServiceOptions{Targets: bubbleTargets},
			})
			if err := node.Start(ctx); err != nil {
				t.Fatal(err)
			}
			return db, node
		}
		stop := func(db *storage.DB, node *engine.Node) {
			if err := node.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}

		db, node := open()
		running := true
		defer func() {
			if running {
				stop(db, node)
			}
		}()
		svc := node.Service
		if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme", RetryPolicy: engine.ExtendedRetryPolicyName}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
			t.Fatal(err)
		}
		standard, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/standard", EventTypes: []string{"*"}, RetryPolicy: engine.StandardRetryPolicy})
		if err != nil {
			t.Fatal(err)
		}
		extended, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/extended", EventTypes: []string{"*"}})
		if err != nil || extended.EffectiveRetryPolicy != engine.ExtendedRetryPolicyName {
			t.Fatalf("endpoint without a policy follows %q, %v; want the tenant's extended", extended.EffectiveRetryPolicy, err)
		}
		start := time.Now()
		res, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{"id":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]string{}
		for _, d := range res.Deliveries {
			ids[d.EndpointID] = d.ID
		}
		read := func(svc *engine.Service, ep engine.Endpoint) engine.Delivery {
			t.Helper()
			d, err := svc.Delivery(ctx, "acme", ids[ep.ID])
			if err != nil {
				t.Fatal(err)
			}
			return d
		}

		// 3 h: past the standard window, before the extended's 6th attempt.
		time.Sleep(3 * time.Hour)
		synctest.Wait()
		if d := read(svc, standard); d.State != engine.StateDead || len(d.Attempts) != 6 || d.RetryPolicy != "" {
			t.Errorf("standard delivery at 3 h: %s after %d attempts on %q (%q), want dead after 6 on standard", d.State, len(d.Attempts), d.RetryPolicy, d.Reason)
		}
		if d := read(svc, extended); d.State != engine.StatePending || len(d.Attempts) != 5 {
			t.Errorf("extended delivery at 3 h: %s after %d attempts (%q), want pending after 5", d.State, len(d.Attempts), d.Reason)
		}

		// webhookd is down from 3 h to 4 h; the receiver from 0 to 8 h.
		running = false
		stop(db, node)
		time.Sleep(time.Hour)
		db, node = open()
		running = true
		svc = node.Service
		time.Sleep(time.Until(start.Add(8 * time.Hour)))
		down.Store(false)
		time.Sleep(time.Until(start.Add(30 * time.Hour)))
		synctest.Wait()

		d := read(svc, extended)
		if d.State != engine.StateSucceeded || len(d.Attempts) != 7 || d.Attempts[6].Status != http.StatusNoContent {
			t.Fatalf("extended delivery after 30 h: %s after %d attempts (%q), want succeeded at the 7th", d.State, len(d.Attempts), d.Reason)
		}
		// Random 0.5: no jitter, so each attempt is at its schedule's time.
		want := []time.Duration{0, 5 * time.Second, 5*time.Minute + 5*time.Second, 35*time.Minute + 5*time.Second,
			2*time.Hour + 35*time.Minute + 5*time.Second, 7*time.Hour + 35*time.Minute + 5*time.Second, 17*time.Hour + 35*time.Minute + 5*time.Second}
		mu.Lock()
		got := arrived["/extended"]
		standardRequests := len(arrived["/standard"])
		mu.Unlock()
		if len(got) != len(want) {
			t.Fatalf("the extended receiver got %d requests, want %d", len(got), len(want))
		}
		for i, at := range got {
			if off := at.Sub(start); off < want[i] || off > want[i]+time.Second {
				t.Errorf("extended attempt %d at +%s, want +%s", i+1, off, want[i])
			}
		}
		if standardRequests != 6 {
			t.Errorf("the standard receiver got %d requests, want its 6 and none once its delivery died", standardRequests)
		}
		if !strings.Contains(read(svc, standard).Reason, "all 6 attempts failed") {
			t.Errorf("standard delivery's reason %q, want all 6 attempts failed", read(svc, standard).Reason)
		}
		if err := db.Check(); err != nil {
			t.Errorf("Check: %v", err)
		}
	})
}
