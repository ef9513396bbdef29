package engine_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
)

// TestDispatcher_ClaimAheadBoundsWhatWaits: with ClaimAhead set (a node
// of a cluster), the dispatcher claims no more due work than its workers
// are busy with plus ClaimAhead waiting, so the rest stays in the
// scheduler for other nodes; without it, every due delivery is claimed.
func TestDispatcher_ClaimAheadBoundsWhatWaits(t *testing.T) {
	for _, tc := range []struct {
		ahead, wantReady int
	}{{3, 3}, {0, 18}} {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-release
			w.WriteHeader(http.StatusNoContent)
		}))
		node := engine.NewNode(memstore.New(), engine.NodeOptions{Dispatcher: engine.DispatcherOptions{
			Workers: 2, EndpointConcurrency: 2, TenantConcurrency: 2, ClaimAhead: tc.ahead,
			Client: loopbackClient(2), Targets: engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true},
		}, Service: engine.ServiceOptions{Targets: engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}}})
		ctx := t.Context()
		svc := node.Service
		acmeEndpoint(t, svc, srv.URL)
		for range 20 {
			if _, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}
		// Started after the ingests, so that all of them reach the
		// dispatcher through its claim loop (Recover), as a cluster's
		// scheduler hands them out, not at ingest.
		if err := node.Start(ctx); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		var st engine.DispatcherStats
		for st = node.Dispatcher.Stats(); (st.InFlight != 2 || st.Ready != tc.wantReady) && time.Now().Before(deadline); st = node.Dispatcher.Stats() {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // time to claim more, if it would
		if st = node.Dispatcher.Stats(); st.InFlight != 2 || st.Ready != tc.wantReady {
			t.Errorf("ClaimAhead %d: %d in flight and %d claimed and waiting, want 2 and %d", tc.ahead, st.InFlight, st.Ready, tc.wantReady)
		}
		close(release)
		node.Stop(ctx)
		srv.Close()
	}
}
