package postgres

import (
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// TestScheduler_CountsHeld: a node's Scheduler counts the held deliveries
// of the cluster (engine.HeldCounter) with the pending ones, as the store
// stores them: another node's ingest shows at its next count.
func TestScheduler_CountsHeld(t *testing.T) {
	clock := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ss := nodes(t, 2, clock)
	ctx := t.Context()
	now := clock.now()
	acme(t, ss[1], now, 0)
	ep := engine.Endpoint{ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/hook", EventTypes: []string{"order.created"},
		Ordering: engine.OrderingEndpoint, Created: now, Updated: now, Secrets: []engine.Secret{{Key: engine.NewSecret()}}}
	if err := ss[1].CreateEndpoint(ctx, ep, 0); err != nil {
		t.Fatal(err)
	}
	c := ss[0].Scheduler(SchedulerOptions{})
	if _, err := c.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for range 4 {
		ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: now, APIVersion: "1", Body: []byte(`{}`)}
		if _, err := ss[1].AppendEvent(ctx, engine.NewEvent{Event: ev}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.refreshCounts(ctx); err != nil {
		t.Fatal(err)
	}
	mine, all := c.Held("acme")
	if want := (engine.Held{Waiting: 3}); mine != want || all != want || c.Pending("acme") != 1 {
		t.Errorf("counted Held %+v, all %+v, pending %d; want %+v of acme and in all, 1 pending", mine, all, c.Pending("acme"), want)
	}
	if got, all := c.Held("globex"); got != (engine.Held{}) || all.Waiting != 3 {
		t.Errorf("Held(globex) = %+v, all %+v", got, all)
	}
	if got, gotAll, err := ss[1].Held(ctx, "acme"); err != nil || got != mine || gotAll != all {
		t.Errorf("the store's Held = %+v, %+v, %v; want the scheduler's count", got, gotAll, err)
	}
}
