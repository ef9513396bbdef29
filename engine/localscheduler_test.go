package engine

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// retryIndex is a RetryIndexer over a fixed list of entries.
type retryIndex []RetryEntry

func (ix retryIndex) RetryIndex(_ context.Context, fn func(RetryEntry) error) error {
	for _, e := range ix {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// claimWithin returns what Claim hands out within d, or nil.
func claimWithin(t *testing.T, s *LocalScheduler, d time.Duration) []Work {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ws, err := s.Claim(ctx, 0)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	return ws
}

// TestLocalScheduler_Contract walks one scheduler through its contract,
// each step on the state the one before left. It runs in a synctest
// bubble: every wait is on the bubble's fake clock, and synctest.Wait
// says when a claim is waiting. A bubble cannot hold t.Run, so the steps
// are blocks, each named in a comment.
func TestLocalScheduler_Contract(t *testing.T) {
	synctest.Test(t, testLocalSchedulerContract)
}

func testLocalSchedulerContract(t *testing.T) {
	a := Work{DeliveryID: "dlv_a", TenantID: "acme", EndpointID: "ep_1"}
	b := Work{DeliveryID: "dlv_b", TenantID: "acme", EndpointID: "ep_1"}
	g := Work{DeliveryID: "dlv_g", TenantID: "globex", EndpointID: "ep_2"}
	now := time.Now()

	s := NewLocalScheduler(retryIndex{
		{Due: now.Add(-time.Hour), DeliveryID: a.DeliveryID, EndpointID: a.EndpointID, TenantID: a.TenantID},
		{Due: now.Add(time.Hour), DeliveryID: g.DeliveryID, EndpointID: g.EndpointID, TenantID: g.TenantID},
	})
	n, err := s.Recover(context.Background(), func(due time.Time) time.Time { return due })
	if err != nil || n != 2 {
		t.Fatalf("Recover = %d, %v; want 2", n, err)
	}
	if total, waiting := s.Counts(); total != 2 || waiting != 2 || s.Pending("acme") != 1 || s.Pending("globex") != 1 {
		t.Fatalf("after Recover: total %d, waiting %d, acme %d, globex %d", total, waiting, s.Pending("acme"), s.Pending("globex"))
	}

	{ // what is due is claimed once
		if ws := claimWithin(t, s, time.Second); len(ws) != 1 || ws[0] != a {
			t.Fatalf("Claim = %+v, want %+v", ws, a)
		}
		if ws := claimWithin(t, s, 20*time.Millisecond); len(ws) != 0 {
			t.Fatalf("Claim again = %+v, want nothing: a is claimed and g is an hour out", ws)
		}
		if total, waiting := s.Counts(); !s.Holds(a.DeliveryID) || waiting != 1 || total != 2 {
			t.Errorf("claimed a: holds %v, waiting %d, total %d", s.Holds(a.DeliveryID), waiting, total)
		}
	}
	{ // scheduled while claimed: handed back at settle
		if s.Schedule(a, now) {
			t.Fatal("Schedule of a claimed delivery claimed it again")
		}
		if !s.Settle(a, time.Time{}) {
			t.Fatal("Settle did not hand back a delivery scheduled while claimed")
		}
		if s.Settle(a, time.Time{}) {
			t.Fatal("the second Settle handed it back again")
		}
		if s.Holds(a.DeliveryID) || s.Pending("acme") != 0 {
			t.Errorf("settled not pending: holds %v, acme %d", s.Holds(a.DeliveryID), s.Pending("acme"))
		}
	}
	{ // settled with a next time: offered then, not before
		if !s.Schedule(b, time.Now()) {
			t.Fatal("Schedule of a due delivery did not claim it")
		}
		if s.Settle(b, time.Now().Add(50*time.Millisecond)) {
			t.Fatal("Settle with a later next claimed it at once")
		}
		if ws := claimWithin(t, s, 10*time.Millisecond); len(ws) != 0 {
			t.Fatalf("offered %+v before its time", ws)
		}
		if ws := claimWithin(t, s, time.Second); len(ws) != 1 || ws[0] != b {
			t.Fatalf("Claim = %+v, want %+v at its time", ws, b)
		}
		s.Settle(b, time.Time{})
	}
	{ // an earlier schedule wakes a waiting claim
		done := make(chan []Work, 1)
		go func() { done <- claimWithin(t, s, 5*time.Second) }()
		synctest.Wait() // the claim waits for g, an hour out
		if s.Schedule(b, time.Now().Add(10*time.Millisecond)) {
			t.Fatal("a delivery due later was claimed at once")
		}
		select {
		case ws := <-done:
			if len(ws) != 1 || ws[0] != b {
				t.Fatalf("Claim = %+v, want %+v", ws, b)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("the waiting claim did not wake for the earlier delivery")
		}
		s.Settle(b, time.Time{})
	}
	{ // forget a tenant
		s.Schedule(b, time.Now().Add(time.Hour))
		s.ForgetTenant("globex")
		if total, _ := s.Counts(); s.Holds(g.DeliveryID) || s.Pending("globex") != 0 || !s.Holds(b.DeliveryID) || total != 1 {
			t.Errorf("after ForgetTenant(globex): holds g %v, globex %d, holds b %v, total %d", s.Holds(g.DeliveryID), s.Pending("globex"), s.Holds(b.DeliveryID), total)
		}
	}
	{ // claim ends with its context
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := s.Claim(ctx, 0); !errors.Is(err, context.Canceled) {
			t.Errorf("Claim on an ended context = %v", err)
		}
	}
}
