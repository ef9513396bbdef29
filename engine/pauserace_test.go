package engine_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
)

// gatedStore holds the first UpdateDelivery made once it is armed until
// the test releases it: the write of a transition decided on a read
// made before (the dispatcher's pause of a delivery whose endpoint it
// read disabled) lands after what the test does meanwhile.
type gatedStore struct {
	engine.Store
	armed   atomic.Bool
	once    sync.Once
	reached chan struct{} // closed when the held call arrives
	release chan struct{} // closed by the test: the held call goes on
}

func (s *gatedStore) UpdateDelivery(ctx context.Context, id string, fn func(engine.Delivery) (engine.Delivery, error)) (engine.Delivery, error) {
	if s.armed.CompareAndSwap(true, false) {
		s.once.Do(func() { close(s.reached) })
		<-s.release
	}
	return s.Store.UpdateDelivery(ctx, id, fn)
}

// TestDispatcher_PauseCrossesEnable: the dispatcher reads a due
// delivery's endpoint disabled and pauses it; the endpoint is enabled
// (with its held deliveries) between that read and the pause's write,
// so the enabling finds nothing paused to resume. The delivery must not
// stay paused for good under an enabled endpoint: it is attempted, and
// succeeds, and nothing is left paused or held.
func TestDispatcher_PauseCrossesEnable(t *testing.T) {
	for _, deliverHeld := range []bool{true, false} {
		name := "deliver_held"
		if !deliverHeld {
			name = "from_now_on"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &gatedStore{Store: memstore.New(), reached: make(chan struct{}), release: make(chan struct{})}
				var status atomic.Int32
				status.Store(http.StatusServiceUnavailable)
				n := taskNode(t, store, func(*http.Request) int { return int(status.Load()) }, engine.ServiceOptions{}, nil)
				svc, ctx := n.Service, t.Context()
				setupTenant(t, svc, 0)
				ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"order.created"}})
				if err != nil {
					t.Fatal(err)
				}
				res, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{}`)})
				if err != nil {
					t.Fatal(err)
				}
				id := res.Deliveries[0].ID
				synctest.Wait() // the first attempt: 503, due again later
				if d, _ := svc.Delivery(ctx, "acme", id); d.State != engine.StatePending || len(d.Attempts) != 1 {
					t.Fatalf("after its first attempt the delivery is %s with %d attempts, want pending with 1", d.State, len(d.Attempts))
				}
				if _, _, err := svc.SetEndpointEnabled(ctx, "acme", ep.ID, false, false, "admin"); err != nil {
					t.Fatal(err)
				}
				status.Store(http.StatusOK)
				store.armed.Store(true)
				<-store.reached // the retry is due: the dispatcher read the endpoint disabled and pauses
				if _, resumed, err := svc.SetEndpointEnabled(ctx, "acme", ep.ID, true, deliverHeld, "admin"); err != nil || resumed != 0 {
					t.Fatalf("enabling while the pause is under way: %d resumed, %v; want none found paused yet", resumed, err)
				}
				close(store.release)
				d := waitState(t, svc, id, engine.StateSucceeded)
				if len(d.Attempts) != 2 {
					t.Errorf("the delivery succeeded after %d attempts, want 2", len(d.Attempts))
				}
				held, _, err := store.Held(ctx, "acme")
				if err != nil || held != (engine.Held{}) {
					t.Errorf("held deliveries of acme once it succeeded: %+v, %v; want none", held, err)
				}
				time.Sleep(time.Second)
			})
		})
	}
}
