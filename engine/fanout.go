package engine

import (
	"context"
	"errors"
	"sync"
	"time"
)

// The fan-out: a store may leave an ingest's deliveries owed
// (IngestResult.Owed, see Log.AppendEvent), so that the commit a client
// waits for carries the event alone. The Service then stores them
// (Log.FanOut) on a goroutine of its own, started by the ingest that
// finds none running and ended when FanOut finds none owed, and hands
// each pending one to the dispatcher as ingest used to. While a delivery
// is owed it counts as pending toward the bounds (MaxPending,
// MaxPendingPerTenant): the backlog is the same whether or not its
// fan-out is done. After a crash the store finishes what was owed before
// the dispatcher starts (storage: Open), and the dispatcher's recovery
// finds the deliveries in the retry index.

// fanOutMax is how many owed fan-outs the Service asks FanOut to store in
// one transaction; a store may take fewer (storage: 16 while its commit
// also carries ingests).
const fanOutMax = 256

// fanOutRetry is how long the fan-out waits after FanOut failed (a full
// disk, say) before it tries again, doubled after each failure up to
// fanOutRetryMax. It never gives up while the store is open: what is
// owed was acknowledged, and at a light pace no later ingest leaves a
// fan-out owed that would start the loop again (storage: only a busy
// commit does), so a loop that stopped would leave those events
// undelivered until the next start. It logs the first failure and then
// one a minute.
const (
	fanOutRetry    = time.Second
	fanOutRetryMax = 30 * time.Second
	fanOutLogEvery = time.Minute
)

// fanOut is the Service's fan-out: whether it runs, and the deliveries
// owed by the ingests of this process, per event and per tenant, which
// count toward the backlog until they are stored.
type fanOut struct {
	mu      sync.Mutex
	running bool
	again   bool // an ingest left a fan-out owed while the loop was running
	events  map[string]owedEvent
	tenants map[string]int
	all     int
	waiters map[string][]chan struct{} // event ID → closed when its fan-out is stored
}

// owedEvent is an event of this process's ingest: while its append
// runs (appending), then while its fan-out is owed, with its tenant and
// how many deliveries it plans.
type owedEvent struct {
	tenant    string
	n         int
	appending bool // AppendEvent has not returned yet
	stored    bool // FanOut stored its fan-out before AppendEvent returned
}

// appending notes that the ingest of event id of tenant begins: FanOut
// may store its fan-out before AppendEvent has returned, and owe must
// know that it did.
func (s *Service) appending(id, tenant string) {
	f := &s.fan
	f.mu.Lock()
	if f.events == nil {
		f.events, f.tenants = map[string]owedEvent{}, map[string]int{}
	}
	f.events[id] = owedEvent{tenant: tenant, appending: true}
	f.mu.Unlock()
}

// owe records the outcome of the append of event id (appending): when
// it left its fan-out owed, the deliveries count as owed until FanOut
// stores them, and the loop is made sure to run.
func (s *Service) owe(id string, res IngestResult, err error) {
	f := &s.fan
	f.mu.Lock()
	o, ok := f.events[id]
	switch {
	case !ok:
	case err != nil || !res.Owed || res.Duplicate || res.Event.ID != id || o.stored || len(res.Deliveries) == 0:
		f.forgetLocked(id)
	default:
		o.appending, o.n = false, len(res.Deliveries)
		f.events[id] = o
		f.tenants[o.tenant] += o.n
		f.all += o.n
	}
	start := false
	if err == nil && res.Owed {
		start = !f.running
		f.running, f.again = true, !start
	}
	f.mu.Unlock()
	if start {
		go s.fanOutLoop()
	}
}

// forgetLocked drops event id, whose fan-out is stored (or was never
// owed), and wakes whoever waits for it. f.mu must be held.
func (f *fanOut) forgetLocked(id string) {
	o := f.events[id]
	delete(f.events, id)
	if o.n > 0 {
		f.tenants[o.tenant] -= o.n
		if f.tenants[o.tenant] <= 0 {
			delete(f.tenants, o.tenant)
		}
		f.all -= o.n
	}
	for _, c := range f.waiters[id] {
		close(c)
	}
	delete(f.waiters, id)
}

// forgetTenant drops what this process's ingests owe tenant, which is
// deleted: no store writes a delivery of a deleted tenant, and its purge
// may delete an event with its plan before FanOut comes to it, when
// FanOut never reports it. Counted still, its deliveries would take
// room under MaxPending for good, and the tenant's id, used again, would
// have every read wait settleBound for them.
func (s *Service) forgetTenant(tenant string) {
	f := &s.fan
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, o := range f.events {
		if o.tenant == tenant {
			f.forgetLocked(id)
		}
	}
}

// owed returns how many deliveries of tenant ("": of none) and of every
// tenant are owed by this process's ingests.
func (s *Service) owed(tenant string) (ofTenant, all int) {
	f := &s.fan
	f.mu.Lock()
	defer f.mu.Unlock()
	if tenant != "" {
		ofTenant = f.tenants[tenant]
	}
	return ofTenant, f.all
}

// fanOutLoop stores owed fan-outs until none is owed and no ingest left
// one while it ran.
func (s *Service) fanOutLoop() {
	ctx := context.Background()
	failures, wait := 0, fanOutRetry
	var logged time.Time
	for {
		done, err := s.store.FanOut(ctx, fanOutMax)
		if err != nil {
			if errors.Is(err, ErrStorageClosed) {
				// The next start finishes what is owed.
				s.fan.mu.Lock()
				s.fan.running = false
				s.fan.mu.Unlock()
				return
			}
			failures++
			if s.disp != nil && (failures == 1 || time.Since(logged) >= fanOutLogEvery) {
				s.disp.log.Error("fan-out: storing the deliveries of acknowledged events failed; they stay owed and it is tried again", "err", err, "tries", failures, "next_in", wait)
				logged = time.Now()
			}
			time.Sleep(wait)
			wait = min(2*wait, fanOutRetryMax)
			continue
		}
		failures, wait = 0, fanOutRetry
		s.fannedOut(done)
		if len(done) > 0 {
			continue
		}
		f := &s.fan
		f.mu.Lock()
		if !f.again {
			f.running = false
			f.mu.Unlock()
			return
		}
		f.again = false
		f.mu.Unlock()
	}
}

// fannedOut hands the deliveries FanOut stored to the dispatcher and
// counts them no longer as owed.
func (s *Service) fannedOut(done []FannedOut) {
	for _, e := range done {
		if s.disp != nil {
			for _, d := range e.Deliveries {
				if d.State == StatePending {
					s.disp.Enqueue(d.ID, d.TenantID, d.EndpointID, d.NextAttemptAt)
				}
			}
		}
		f := &s.fan
		f.mu.Lock()
		if o, ok := f.events[e.EventID]; ok && o.appending {
			o.stored = true // owe forgets it
			f.events[e.EventID] = o
		} else if ok {
			f.forgetLocked(e.EventID)
		}
		f.mu.Unlock()
	}
}

// waitFannedOut returns once the owed fan-out of event id is stored (or
// ctx ends): for a caller that shows a delivery right after its ingest
// (a test event sent from the console).
func (s *Service) waitFannedOut(ctx context.Context, id string) error {
	f := &s.fan
	f.mu.Lock()
	if _, ok := f.events[id]; !ok {
		f.mu.Unlock()
		return nil
	}
	c := make(chan struct{})
	if f.waiters == nil {
		f.waiters = map[string][]chan struct{}{}
	}
	f.waiters[id] = append(f.waiters[id], c)
	f.mu.Unlock()
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// settled returns once every fan-out of tenant's events that this
// process's ingests left owed before the call is stored (or ctx ends):
// a read of deliveries by ID or in a listing waits for it, so that it
// sees every delivery an acknowledgement named, and so does a change of
// deliveries by ID (Replay, Skip) or by endpoint (the paused ones that
// SetEndpointEnabled resumes or drops and DeleteEndpoint drops), so that
// it changes them too. It costs nothing when none is owed, and otherwise
// about one commit.
func (s *Service) settled(ctx context.Context, tenant string) error {
	// Bounded, so that a store that fails to write (a full disk) slows
	// a read down rather than stops it: the read then shows what is
	// stored.
	_, err := s.settle(ctx, tenant, settleBound)
	return err
}

// settle is settled, waiting at most bound (0: until ctx ends), and
// reports whether every owed fan-out it waited for is stored. A caller
// that must not go on without them (SetEndpointEnabled: only its loop
// resumes the paused deliveries they plan) waits with no bound.
func (s *Service) settle(ctx context.Context, tenant string, bound time.Duration) (bool, error) {
	f := &s.fan
	f.mu.Lock()
	if f.tenants[tenant] == 0 {
		f.mu.Unlock()
		return true, nil
	}
	wait := f.waitLocked(func(o owedEvent) bool { return o.tenant == tenant })
	f.mu.Unlock()
	var expired <-chan time.Time
	if bound > 0 {
		t := time.NewTimer(bound)
		defer t.Stop()
		expired = t.C
	}
	for _, c := range wait {
		select {
		case <-c:
		case <-expired:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return true, nil
}

// waitLocked returns a channel for each owed event that which selects,
// closed when its fan-out is stored (forgetLocked). f.mu must be held.
func (f *fanOut) waitLocked(which func(owedEvent) bool) []chan struct{} {
	var wait []chan struct{}
	for id, o := range f.events {
		if !which(o) {
			continue
		}
		c := make(chan struct{})
		if f.waiters == nil {
			f.waiters = map[string][]chan struct{}{}
		}
		f.waiters[id] = append(f.waiters[id], c)
		wait = append(wait, c)
	}
	return wait
}

// settleBound is the longest a read waits for owed fan-outs (settled).
const settleBound = 2 * time.Second

// WaitFanOut returns once every fan-out this service's ingests left owed
// before the call is stored, or ctx ends. Reads through the Service wait
// for their tenant's by themselves; this is for a caller that reads the
// store directly (tests), or that is about to close it.
func (s *Service) WaitFanOut(ctx context.Context) error {
	f := &s.fan
	f.mu.Lock()
	wait := f.waitLocked(func(o owedEvent) bool { return !o.appending })
	f.mu.Unlock()
	for _, c := range wait {
		select {
		case <-c:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// OwedDeliveries returns how many deliveries of events this service
// acknowledged are not written yet (their fan-out is owed): the backlog
// the dispatcher does not hold yet, for a gauge beside its own.
func (s *Service) OwedDeliveries() int {
	_, all := s.owed("")
	return all
}
