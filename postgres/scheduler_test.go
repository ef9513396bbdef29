package postgres

import (
	"context"
	"errors"
	"sync"
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
	if _, _, err := s.PutTenant(ctx, engine.Tenant{ID: "acme", Created: now, Updated: now}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutEventType(ctx, engine.EventType{Name: "order.created", Created: now, Updated: now}); err != nil {
		t.Fatal(err)
	}
	ep := engine.Endpoint{ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/hook", EventTypes: []string{"*"},
		Created: now, Updated: now, Secrets: []engine.Secret{{Key: engine.NewSecret()}}}
	if err := s.CreateEndpoint(ctx, ep, 0); err != nil {
		t.Fatal(err)
	}
	for range n {
		ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: now, APIVersion: "1", Body: []byte(`{}`)}
		if _, err := s.AppendEvent(ctx, engine.NewEvent{Event: ev}); err != nil {
			t.Fatal(err)
		}
	}
	return ep.ID
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
