package engine_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
)

// rateReceiver notes when each request came, by the path of its
// endpoint's URL, measured from start.
type rateReceiver struct {
	mu    sync.Mutex
	start time.Time
	at    map[string][]time.Duration
}

func newRateReceiver() *rateReceiver {
	return &rateReceiver{start: time.Now(), at: map[string][]time.Duration{}}
}

func (rc *rateReceiver) receive(r *http.Request) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.at[r.URL.Path] = append(rc.at[r.URL.Path], time.Since(rc.start))
	return http.StatusOK
}

// count is how many requests path has had.
func (rc *rateReceiver) count(path string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.at[path])
}

// times returns path's request times.
func (rc *rateReceiver) times(path string) []time.Duration {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]time.Duration(nil), rc.at[path]...)
}

// rateEndpoints makes tenant acme, the type order.created, and for each
// path an endpoint at base+path that takes every type, with its rate
// limit (nil: none); it returns their IDs by path.
func rateEndpoints(t *testing.T, svc *engine.Service, base string, limits map[string]*engine.RateLimitInput) map[string]string {
	t.Helper()
	ctx := t.Context()
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for path, rl := range limits {
		ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: base + path, EventTypes: []string{"*"}, RateLimit: rl})
		if err != nil {
			t.Fatal(err)
		}
		ids[path] = ep.ID
	}
	return ids
}

// ingestN ingests n events of acme's.
func ingestN(t *testing.T, svc *engine.Service, n int) {
	t.Helper()
	for range n {
		if _, err := svc.Ingest(t.Context(), "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
}

// sleepUntil sleeps until d after rc.start (the bubble's clock), and
// waits for every goroutine to block.
func (rc *rateReceiver) sleepUntil(d time.Duration) {
	time.Sleep(time.Until(rc.start.Add(d)))
	synctest.Wait()
}

// wantCounts fails t unless each path has had its count of requests.
func (rc *rateReceiver) wantCounts(t *testing.T, when string, want map[string]int) {
	t.Helper()
	for path, n := range want {
		if got := rc.count(path); got != n {
			t.Errorf("%s: %s has had %d requests, want %d (times: %v)", when, path, got, n, rc.times(path))
		}
	}
}

// TestDispatcher_EndpointRateLimit: an endpoint with a rate limit of its
// own gets its burst at once and then its rate, from its very first
// attempts (its limit is read with the first; until then it has one
// attempt at a time, so a backlog ready at start cannot pass it), while
// an endpoint of the same tenant without one is not slowed. In a
// synctest bubble the counts are exact.
func TestDispatcher_EndpointRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := newRateReceiver()
		node := bubbleNode(t, nil, rc.receive, engine.DispatcherOptions{Workers: 16})
		svc := node.Service
		rateEndpoints(t, svc, "http://127.0.0.1:9", map[string]*engine.RateLimitInput{
			"/limited": {PerSecond: 5}, // burst 5
			"/slow":    {PerSecond: 2, Burst: intp(1)},
			"/free":    nil,
		})
		ingestN(t, svc, 40) // before Start: all of it ready at once
		if err := node.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer node.Stop(context.Background())

		rc.sleepUntil(0)
		rc.wantCounts(t, "at once", map[string]int{"/limited": 5, "/slow": 1, "/free": 40})
		rc.sleepUntil(3*time.Second + 100*time.Millisecond)
		rc.wantCounts(t, "after 3.1 s", map[string]int{"/limited": 5 + 15, "/slow": 1 + 6, "/free": 40})
		rc.sleepUntil(7*time.Second + 100*time.Millisecond)
		rc.wantCounts(t, "after 7.1 s", map[string]int{"/limited": 40, "/slow": 1 + 14})
		for path, gap := range map[string]time.Duration{"/limited": 200 * time.Millisecond, "/slow": 500 * time.Millisecond} {
			at := rc.times(path)
			for i := 1; i < len(at); i++ {
				if at[i] > 0 && at[i]-at[i-1] < gap-time.Millisecond {
					t.Errorf("%s: requests %d and %d %v apart, want at least %v once the burst is spent", path, i-1, i, at[i]-at[i-1], gap)
				}
			}
		}
	})
}

// gatedInputs is a store whose AttemptInput waits until open is closed,
// counting the reads that wait.
type gatedInputs struct {
	engine.Store
	open    chan struct{}
	mu      sync.Mutex
	waiting int
}

func (s *gatedInputs) AttemptInput(ctx context.Context, id string) (engine.AttemptInput, error) {
	s.mu.Lock()
	s.waiting++
	s.mu.Unlock()
	<-s.open
	return s.Store.AttemptInput(ctx, id)
}

// TestDispatcher_EndpointRateLimitReadFirst: until the dispatcher has
// read an endpoint's limit (with its first attempt), it makes one attempt
// of it at a time, so that a backlog ready at start cannot pass a limit
// not yet read, however slow that read.
func TestDispatcher_EndpointRateLimitReadFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := newRateReceiver()
		store := &gatedInputs{Store: memstore.New(), open: make(chan struct{})}
		node := bubbleNode(t, store, rc.receive, engine.DispatcherOptions{Workers: 16})
		svc := node.Service
		rateEndpoints(t, svc, "http://127.0.0.1:9", map[string]*engine.RateLimitInput{"/limited": {PerSecond: 5}})
		ingestN(t, svc, 40)
		if err := node.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer node.Stop(context.Background())
		synctest.Wait()
		store.mu.Lock()
		waiting := store.waiting
		store.mu.Unlock()
		if waiting != 1 {
			t.Errorf("%d attempts read their delivery before the endpoint's limit was known, want 1", waiting)
		}
		close(store.open)
		rc.sleepUntil(0)
		rc.wantCounts(t, "at once", map[string]int{"/limited": 5})
	})
}

// TestDispatcher_EndpointRateLimitWithinTheGlobal: [delivery]
// endpoint_rate is the ceiling of every endpoint's own limit, rate and
// burst: an endpoint that asks for more is held to it, one that asks
// for less is held to its own, one without any to the global.
func TestDispatcher_EndpointRateLimitWithinTheGlobal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := newRateReceiver()
		node := bubbleNode(t, nil, rc.receive, engine.DispatcherOptions{Workers: 16, EndpointRate: 2})
		svc := node.Service
		rateEndpoints(t, svc, "http://127.0.0.1:9", map[string]*engine.RateLimitInput{
			"/above": {PerSecond: 50, Burst: intp(50)},
			"/below": {PerSecond: 1},
			"/none":  nil,
		})
		ingestN(t, svc, 20)
		if err := node.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer node.Stop(context.Background())

		rc.sleepUntil(0)
		rc.wantCounts(t, "at once", map[string]int{"/above": 2, "/below": 1, "/none": 2})
		rc.sleepUntil(3*time.Second + 100*time.Millisecond)
		rc.wantCounts(t, "after 3.1 s", map[string]int{"/above": 2 + 6, "/below": 1 + 3, "/none": 2 + 6})
	})
}

// TestDispatcher_EndpointRateLimitChange: a change of an endpoint's limit
// applies from its next attempt, which the old limit set the time of;
// rate_limit null lifts it there.
func TestDispatcher_EndpointRateLimitChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := newRateReceiver()
		node := bubbleNode(t, nil, rc.receive, engine.DispatcherOptions{Workers: 16})
		svc := node.Service
		ids := rateEndpoints(t, svc, "http://127.0.0.1:9", map[string]*engine.RateLimitInput{"/ep": {PerSecond: 1}})
		ingestN(t, svc, 30)
		if err := node.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer node.Stop(context.Background())
		set := func(p engine.RateLimitPatch) {
			t.Helper()
			if _, err := svc.UpdateEndpoint(t.Context(), "acme", ids["/ep"], engine.EndpointPatch{RateLimit: p}); err != nil {
				t.Fatal(err)
			}
		}

		rc.sleepUntil(2*time.Second + 50*time.Millisecond)
		rc.wantCounts(t, "at 1/s after 2.05 s", map[string]int{"/ep": 3})
		set(engine.RateLimitPatch{Set: true, Limit: &engine.RateLimitInput{PerSecond: 10, Burst: intp(1)}})
		rc.sleepUntil(2*time.Second + 950*time.Millisecond)
		rc.wantCounts(t, "2.95 s: the next attempt is the old limit's, at 3 s", map[string]int{"/ep": 3})
		rc.sleepUntil(4*time.Second + 50*time.Millisecond)
		rc.wantCounts(t, "4.05 s: at 10/s from 3 s", map[string]int{"/ep": 4 + 10})
		set(engine.RateLimitPatch{Set: true})
		rc.sleepUntil(4*time.Second + 150*time.Millisecond)
		rc.wantCounts(t, "4.15 s: unlimited from the attempt at 4.1 s", map[string]int{"/ep": 30})
	})
}

// switchedInputs is a store whose AttemptInput waits while a gate is
// set, until it is closed.
type switchedInputs struct {
	engine.Store
	mu   sync.Mutex
	gate chan struct{}
}

func (s *switchedInputs) setGate(g chan struct{}) {
	s.mu.Lock()
	s.gate = g
	s.mu.Unlock()
}

func (s *switchedInputs) AttemptInput(ctx context.Context, id string) (engine.AttemptInput, error) {
	s.mu.Lock()
	g := s.gate
	s.mu.Unlock()
	if g != nil {
		<-g
	}
	return s.Store.AttemptInput(ctx, id)
}

// TestDispatcher_EndpointRateLimitChangeWhileParked: when the attempt
// that reads a changed limit finds its endpoint's next delivery already
// waiting for a token of the old limit, that delivery waits by the new
// one. (CI once saw it wait the old second, when the next delivery
// reserved its token before the attempt read the record.)
func TestDispatcher_EndpointRateLimitChangeWhileParked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := newRateReceiver()
		store := &switchedInputs{Store: memstore.New()}
		node := bubbleNode(t, store, rc.receive, engine.DispatcherOptions{Workers: 16})
		svc := node.Service
		ids := rateEndpoints(t, svc, "http://127.0.0.1:9", map[string]*engine.RateLimitInput{"/ep": {PerSecond: 1, Burst: intp(1)}})
		ingestN(t, svc, 10)
		if err := node.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer node.Stop(context.Background())

		rc.sleepUntil(500 * time.Millisecond)
		rc.wantCounts(t, "0.5 s", map[string]int{"/ep": 1})
		gate := make(chan struct{})
		store.setGate(gate)
		// At 1 s the second attempt takes its token and waits to read
		// its delivery; the third waits for the old limit's next token.
		rc.sleepUntil(time.Second + 10*time.Millisecond)
		if _, err := svc.UpdateEndpoint(t.Context(), "acme", ids["/ep"], engine.EndpointPatch{RateLimit: engine.RateLimitPatch{Set: true, Limit: &engine.RateLimitInput{PerSecond: 10, Burst: intp(1)}}}); err != nil {
			t.Fatal(err)
		}
		store.setGate(nil)
		close(gate)
		rc.sleepUntil(time.Second + 150*time.Millisecond)
		rc.wantCounts(t, "1.15 s: the third attempt at 1.1 s, by the new limit", map[string]int{"/ep": 3})
	})
}

// shareScheduler is the LocalScheduler as one of two processes that
// share the endpoints' bounds: each gets half (BoundSharer). Its claims
// have no lease to watch.
type shareScheduler struct{ *engine.LocalScheduler }

func (shareScheduler) LeaseLeft(engine.Work) (time.Duration, bool) { return 0, false }
func (shareScheduler) EndpointShare(_ string, concurrency int, rate float64) (int, float64) {
	return max(1, concurrency/2), rate / 2
}
func (s shareScheduler) ClaimSkipping(ctx context.Context, max int, _ func() engine.ClaimSkip) ([]engine.Work, error) {
	return s.Claim(ctx, max)
}
func (shareScheduler) Held(string) (engine.Held, engine.Held) { return engine.Held{}, engine.Held{} }

// TestDispatcher_EndpointRateLimitShared: in a cluster each process holds
// an endpoint to its share of the endpoint's own limit (BoundSharer), as
// of the global bound: of two, half the rate and half the burst.
func TestDispatcher_EndpointRateLimitShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := newRateReceiver()
		store := memstore.New()
		node := bubbleNode(t, store, rc.receive, engine.DispatcherOptions{Workers: 16, Scheduler: shareScheduler{engine.NewLocalScheduler(store)}})
		svc := node.Service
		rateEndpoints(t, svc, "http://127.0.0.1:9", map[string]*engine.RateLimitInput{
			"/limited": {PerSecond: 10}, // burst 10: this process's share 5/s, burst 5
			"/odd":     {PerSecond: 3, Burst: intp(3)},
			"/free":    nil,
		})
		ingestN(t, svc, 40)
		if err := node.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer node.Stop(context.Background())

		rc.sleepUntil(0)
		rc.wantCounts(t, "at once", map[string]int{"/limited": 5, "/odd": 1, "/free": 40})
		rc.sleepUntil(3*time.Second + 100*time.Millisecond)
		rc.wantCounts(t, "after 3.1 s", map[string]int{"/limited": 5 + 15, "/odd": 1 + 4})
	})
}

// TestDispatcher_EndpointRateLimitOnTheWire: the same as
// TestDispatcher_EndpointRateLimit over real connections to a loopback
// receiver, in real time (2 s): the limited endpoint gets its burst and
// then its rate, within a tolerance for the machine; the other endpoint
// is not slowed.
func TestDispatcher_EndpointRateLimitOnTheWire(t *testing.T) {
	if testing.Short() {
		t.Skip("2 s of real time")
	}
	var mu sync.Mutex
	start := time.Now()
	at := map[string][]time.Duration{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at[r.URL.Path] = append(at[r.URL.Path], time.Since(start))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	targets := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	node := engine.NewNode(memstore.New(), engine.NodeOptions{
		Dispatcher: engine.DispatcherOptions{Workers: 16, Targets: targets},
		Service:    engine.ServiceOptions{Targets: targets},
	})
	svc := node.Service
	rateEndpoints(t, svc, srv.URL, map[string]*engine.RateLimitInput{"/limited": {PerSecond: 10}, "/free": nil})
	ingestN(t, svc, 100)
	mu.Lock()
	start = time.Now()
	mu.Unlock()
	if err := node.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer node.Stop(context.Background())

	const window = 2 * time.Second
	deadline := time.Now().Add(window + 5*time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		free, limited := len(at["/free"]), len(at["/limited"])
		mu.Unlock()
		if free == 100 && limited >= 1+int(window.Seconds()*10)+5 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	in := func(path string, by time.Duration) int {
		n := 0
		for _, d := range at[path] {
			if d <= by {
				n++
			}
		}
		return n
	}
	// At most the burst plus the rate over any time from the start; at
	// least 80% of that by the end of the window.
	for _, by := range []time.Duration{500 * time.Millisecond, time.Second, window} {
		most := 10 + int(by.Seconds()*10)
		if got := in("/limited", by); got > most {
			t.Errorf("the limited endpoint had %d requests in the first %v, want at most %d", got, by, most)
		}
	}
	if got, least := in("/limited", window), (10+int(window.Seconds()*10))*8/10; got < least {
		t.Errorf("the limited endpoint had %d requests in %v, want at least %d", got, window, least)
	}
	if free := at["/free"]; len(free) != 100 || free[99] > window/2 {
		last := time.Duration(0)
		if len(free) > 0 {
			last = free[len(free)-1]
		}
		t.Errorf("the endpoint without a limit had %d of 100 requests, the last at %v: slowed", len(free), last)
	}
}
