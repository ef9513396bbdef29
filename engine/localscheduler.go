package engine

import (
	"context"
	"sync"
	"time"
)

// RetryIndexer is what LocalScheduler needs of a Store: the pending
// deliveries, in due order (Log.RetryIndex).
type RetryIndexer interface {
	RetryIndex(ctx context.Context, fn func(RetryEntry) error) error
}

// LocalScheduler is the Scheduler of a store that one process owns (the
// bbolt file, whose lock keeps every other process out): every pending
// delivery lives in a timer queue in memory, rebuilt by Recover from the
// store's retry index, and a claim lasts until it is settled or the
// process ends. A crash loses the claims with the process; the next
// process's Recover offers their deliveries again (at-least-once).
//
// Its "now" is time.Now, never a wall clock passed in: every Scheduler
// time is a monotonic reading (see Scheduler), and only the monotonic
// part of two readings is compared.
//
// It holds about 140 bytes of heap per pending delivery (see
// BenchmarkDispatcher_Recover): an entry of the timer heap, its index
// entry, and its delivery ID; endpoint IDs are shared.
type LocalScheduler struct {
	store RetryIndexer

	mu      sync.Mutex
	timers  *timerQueue
	claimed map[string]bool  // delivery IDs claimed by the caller
	rerun   map[string]bool  // scheduled while claimed: handed back at Settle
	known   map[string]known // by endpoint ID
	pending map[string]int   // per tenant: waiting or claimed
	total   int
	wake    chan struct{} // the earliest timer moved earlier
}

// NewLocalScheduler returns a LocalScheduler over store's retry index.
func NewLocalScheduler(store RetryIndexer) *LocalScheduler {
	return &LocalScheduler{
		store:   store,
		timers:  newTimerQueue(),
		claimed: make(map[string]bool),
		rerun:   make(map[string]bool),
		known:   make(map[string]known),
		pending: make(map[string]int),
		wake:    make(chan struct{}, 1),
	}
}

var _ Scheduler = (*LocalScheduler)(nil)

// Recover puts every entry of the retry index into the timer queue at
// dueAt(its due time): what was pending or claimed when the last process
// stopped (crash included) is offered again. Entries go in as they are
// read, not through a slice of them all: at a million pending that slice
// was a third of the peak memory of recovery.
func (s *LocalScheduler) Recover(ctx context.Context, dueAt func(time.Time) time.Time) (int, error) {
	n := 0
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.store.RetryIndex(ctx, func(e RetryEntry) error {
		w := s.internLocked(Work{DeliveryID: e.DeliveryID, TenantID: e.TenantID, EndpointID: e.EndpointID})
		s.scheduleLocked(w, dueAt(e.Due), time.Time{}) // Claim hands out what is due
		n++
		return nil
	})
	return n, err
}

// known is what LocalScheduler keeps of an endpoint: the one copy of its
// ID that every timer entry of it shares, and its tenant.
type known struct {
	endpointID, tenant string
}

// internLocked records w's endpoint's tenant, and returns w with the
// endpoint ID and tenant every entry of that endpoint shares. An
// endpoint's tenant never changes; the first one heard of is kept.
func (s *LocalScheduler) internLocked(w Work) Work {
	if k, ok := s.known[w.EndpointID]; ok {
		w.EndpointID, w.TenantID = k.endpointID, k.tenant
		return w
	}
	s.known[w.EndpointID] = known{w.EndpointID, w.TenantID}
	return w
}

// Schedule implements Scheduler.
func (s *LocalScheduler) Schedule(w Work, at time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w = s.internLocked(w)
	if s.claimed[w.DeliveryID] {
		s.rerun[w.DeliveryID] = true
		return false
	}
	return s.scheduleLocked(w, at, time.Now())
}

// scheduleLocked puts w in the timer queue at at, or claims it when it is
// due at now (never, for a zero now). It reports whether it claimed it.
func (s *LocalScheduler) scheduleLocked(w Work, at, now time.Time) bool {
	if _, waiting := s.timers.index[w.DeliveryID]; !waiting {
		s.pending[w.TenantID]++
		s.total++
	}
	if !now.IsZero() && !at.After(now) {
		s.timers.remove(w.DeliveryID)
		s.claimed[w.DeliveryID] = true
		return true
	}
	if s.timers.set(w.DeliveryID, w.EndpointID, at) {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return false
}

// Claim implements Scheduler.
func (s *LocalScheduler) Claim(ctx context.Context, max int) ([]Work, error) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.mu.Lock()
		now := time.Now()
		var out []Work
		for max <= 0 || len(out) < max {
			e, ok := s.timers.popDue(now)
			if !ok {
				break
			}
			s.claimed[e.id] = true
			out = append(out, Work{DeliveryID: e.id, TenantID: s.known[e.endpointID].tenant, EndpointID: e.endpointID})
		}
		wait := time.Hour
		if next, ok := s.timers.next(); ok {
			wait = next.Sub(now)
		}
		s.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		t.Reset(wait)
		select {
		case <-t.C:
		case <-s.wake:
		case <-ctx.Done():
		}
	}
}

// Settle implements Scheduler.
func (s *LocalScheduler) Settle(w Work, next time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.claimed[w.DeliveryID] {
		return false // forgotten meanwhile (ForgetTenant), or never claimed
	}
	w = s.internLocked(w)
	delete(s.claimed, w.DeliveryID)
	s.pending[w.TenantID]--
	s.total--
	if s.rerun[w.DeliveryID] {
		delete(s.rerun, w.DeliveryID)
		next = time.Now()
	}
	if next.IsZero() {
		s.dropEmptyLocked(w.TenantID)
		return false
	}
	return s.scheduleLocked(w, next, time.Now())
}

// Release implements Scheduler: the claim is dropped, and the delivery
// with it until the next process recovers it.
func (s *LocalScheduler) Release(w Work) {
	s.Settle(w, time.Time{})
}

// ForgetTenant implements Scheduler.
func (s *LocalScheduler) ForgetTenant(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, e := range s.timers.index {
		if s.known[e.endpointID].tenant == tenant {
			s.timers.remove(id)
			s.pending[tenant]--
			s.total--
		}
	}
	s.dropEmptyLocked(tenant)
}

// dropEmptyLocked forgets tenant's count once it is zero, so that the map
// holds only tenants with pending work.
func (s *LocalScheduler) dropEmptyLocked(tenant string) {
	if s.pending[tenant] == 0 {
		delete(s.pending, tenant)
	}
}

// Holds implements Scheduler.
func (s *LocalScheduler) Holds(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, waiting := s.timers.index[id]
	return waiting || s.claimed[id]
}

// Pending implements Scheduler.
func (s *LocalScheduler) Pending(tenant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending[tenant]
}

// Counts implements Scheduler.
func (s *LocalScheduler) Counts() (total, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total, s.timers.len()
}
