package engine

import "testing"

// TestDispatcher_noteRateLimit_allocs: once an endpoint's limit is known,
// each attempt's look at it (noteRateLimit) costs no allocation, limited
// or not: an endpoint without a limit costs what it cost before limits.
func TestDispatcher_noteRateLimit_allocs(t *testing.T) {
	d := NewDispatcher(nil, DispatcherOptions{Scheduler: NewLocalScheduler(nil)})
	for _, rl := range []RateLimit{{}, {PerSecond: 5, Burst: 5}} {
		d.mu.Lock()
		eq := &endpointQueue{id: "ep_1", tenant: d.tenantQueueLocked("acme"), rate: d.rateLocked("ep_1")}
		d.mu.Unlock()
		in := &AttemptInput{Endpoint: Endpoint{ID: "ep_1", RateLimit: rl}, EndpointFound: true}
		d.noteRateLimit(eq, in) // learnt
		if got := *eq.rate.seen.Load(); got != rl {
			t.Fatalf("learnt %+v, want %+v", got, rl)
		}
		if n := testing.AllocsPerRun(100, func() { d.noteRateLimit(eq, in) }); n != 0 {
			t.Errorf("limit %+v: %v allocations per attempt once known, want 0", rl, n)
		}
	}
}
