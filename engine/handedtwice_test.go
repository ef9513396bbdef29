package engine_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
)

// handScheduler is a Scheduler whose Claim hands out exactly the batches
// a test sends it, so that it can hand a delivery the dispatcher already
// holds, as a scheduler that breaks its contract would. Settle hands
// nothing back; settled receives every delivery settled.
type handScheduler struct {
	batches chan []engine.Work
	settled chan string
}

func (s *handScheduler) Recover(context.Context, func(time.Time) time.Time) (int, error) {
	return 0, nil
}
func (s *handScheduler) Schedule(engine.Work, time.Time) bool { return false }
func (s *handScheduler) Claim(ctx context.Context, _ int) ([]engine.Work, error) {
	select {
	case ws := <-s.batches:
		return ws, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
func (s *handScheduler) Settle(w engine.Work, _ time.Time) bool {
	s.settled <- w.DeliveryID
	return false
}
func (s *handScheduler) Release(engine.Work)          {}
func (s *handScheduler) ForgetTenant(string)          {}
func (s *handScheduler) Holds(string) bool            { return false }
func (s *handScheduler) Pending(string) int           { return 0 }
func (s *handScheduler) Counts() (total, waiting int) { return 0, 0 }

// attemptWatch is a store that sees each attempt of a delivery from its
// AttemptInput to its Settle (the dispatcher's "in flight"), and holds
// the first record of hold until release is closed.
type attemptWatch struct {
	engine.Store
	hold     string
	holding  chan struct{} // closed when the record of hold waits
	release  chan struct{}
	mu       sync.Mutex
	open     map[string]bool
	twice    []string // deliveries whose attempt started while another was open
	inputs   map[string]int
	recorded map[string]int
	barrier  string        // the delivery whose AttemptInput closes reached
	reached  chan struct{} //
}

func (s *attemptWatch) AttemptInput(ctx context.Context, id string) (engine.AttemptInput, error) {
	s.mu.Lock()
	if s.open[id] {
		s.twice = append(s.twice, id)
	}
	s.open[id] = true
	s.inputs[id]++
	if id == s.barrier {
		close(s.reached)
	}
	s.mu.Unlock()
	return s.Store.AttemptInput(ctx, id)
}

func (s *attemptWatch) RecordOutcome(ctx context.Context, u engine.OutcomeUpdate) (engine.Delivery, error) {
	id := u.Delivery.ID
	s.mu.Lock()
	s.recorded[id]++
	first := id == s.hold && s.recorded[id] == 1
	s.mu.Unlock()
	if first {
		close(s.holding)
		<-s.release
	}
	return s.Store.RecordOutcome(ctx, u)
}

// settled closes id's attempt.
func (s *attemptWatch) settled(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open[id] = false
}

// acmeEndpoint makes tenant acme, the event type order.created, and an
// endpoint of acme's at url that takes every type.
func acmeEndpoint(tb testing.TB, svc *engine.Service, url string) {
	tb.Helper()
	ctx := tb.Context()
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme"}); err != nil {
		tb.Fatal(err)
	}
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
		tb.Fatal(err)
	}
	if _, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: url, EventTypes: []string{"*"}}); err != nil {
		tb.Fatal(err)
	}
}

// TestDispatcher_AttemptsAHeldDeliveryOnce: a delivery that the
// scheduler hands to the dispatcher again while the dispatcher holds it
// (ready for a worker, or being attempted and its outcome recorded) is
// not attempted a second time meanwhile: the one claim is settled once,
// by the attempt already there. (The postgres Scheduler once re-claimed
// a delivery between its holder's record and its Settle, and the same
// node made attempt 2 twice at once.)
func TestDispatcher_AttemptsAHeldDeliveryOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		// first is handed at once; again after the first record of
		// delivery 0 waits. Indexes into the two deliveries; the last
		// delivery handed (1) is the barrier: with one worker, what
		// was queued before it has started by the time it does.
		first, again []int
	}{
		{"again while in flight", []int{0}, []int{0, 1}},
		{"twice while ready", []int{0, 0, 1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			requests := map[string]int{} // by event ID
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				requests[r.Header.Get("webhook-id")]++
				mu.Unlock()
				w.WriteHeader(http.StatusNoContent)
			}))
			defer srv.Close()
			store := &attemptWatch{Store: memstore.New(), holding: make(chan struct{}), release: make(chan struct{}),
				open: map[string]bool{}, inputs: map[string]int{}, recorded: map[string]int{}, reached: make(chan struct{})}
			sched := &handScheduler{batches: make(chan []engine.Work, 2), settled: make(chan string, 8)}
			targets := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
			// One worker: it is free again once a request is over (the
			// outcome is recorded off it), and takes the ready queue in
			// order.
			node := engine.NewNode(store, engine.NodeOptions{
				Dispatcher: engine.DispatcherOptions{Workers: 1, EndpointConcurrency: 2, Scheduler: sched, Client: loopbackClient(1), Targets: targets},
				Service:    engine.ServiceOptions{Targets: targets},
			})
			ctx := t.Context()
			svc := node.Service
			acmeEndpoint(t, svc, srv.URL)
			var ws []engine.Work
			var events []string
			for range 2 {
				res, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)})
				if err != nil {
					t.Fatal(err)
				}
				d := res.Deliveries[0]
				ws = append(ws, engine.Work{DeliveryID: d.ID, TenantID: d.TenantID, EndpointID: d.EndpointID})
				events = append(events, res.Event.ID)
			}
			store.hold, store.barrier = ws[0].DeliveryID, ws[1].DeliveryID
			if err := node.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer node.Stop(context.Background())
			pick := func(idx []int) []engine.Work {
				var out []engine.Work
				for _, i := range idx {
					out = append(out, ws[i])
				}
				return out
			}

			sched.batches <- pick(tc.first)
			wait := func(what string, ch chan struct{}) {
				t.Helper()
				select {
				case <-ch:
				case <-time.After(10 * time.Second):
					t.Fatalf("%s: not within 10 s", what)
				}
			}
			wait("the first record of delivery 0", store.holding)
			if tc.again != nil {
				sched.batches <- pick(tc.again)
			}
			wait("the attempt of delivery 1", store.reached)
			close(store.release)
			for range 2 {
				select {
				case id := <-sched.settled:
					store.settled(id)
				case <-time.After(10 * time.Second):
					t.Fatal("the two deliveries were not settled within 10 s")
				}
			}
			if err := node.Stop(ctx); err != nil {
				t.Fatal(err)
			}

			store.mu.Lock()
			defer store.mu.Unlock()
			if len(store.twice) > 0 {
				t.Errorf("attempts started while another attempt of the same delivery was in flight: %v", store.twice)
			}
			if n := store.inputs[ws[0].DeliveryID]; n != 1 {
				t.Errorf("delivery 0 attempted %d times, want once", n)
			}
			mu.Lock()
			defer mu.Unlock()
			for i, ev := range events {
				if requests[ev] != 1 {
					t.Errorf("the receiver got %d requests for delivery %d, want 1", requests[ev], i)
				}
			}
			select {
			case id := <-sched.settled:
				t.Errorf("%s settled again", id)
			default:
			}
		})
	}
}
