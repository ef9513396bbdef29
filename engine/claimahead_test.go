package engine_test

import (
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/webhookd/webhookd/engine"
)

// TestDispatcher_ClaimAheadBoundsWhatWaits: with ClaimAhead set (a node
// of a cluster), the dispatcher claims no more due work than its workers
// are busy with plus ClaimAhead waiting, so the rest stays in the
// scheduler for other nodes; without it, every due delivery is claimed.
// In a synctest bubble, "no more" is exact: the counts are read once
// every goroutine waits (synctest.Wait), when nothing more can be
// claimed until a request ends.
func TestDispatcher_ClaimAheadBoundsWhatWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			ahead, wantReady int
		}{{3, 3}, {0, 18}} {
			release := make(chan struct{})
			node := bubbleNode(t, nil, func(*http.Request) int {
				<-release
				return http.StatusNoContent
			}, engine.DispatcherOptions{Workers: 2, EndpointConcurrency: 2, TenantConcurrency: 2, ClaimAhead: tc.ahead})
			ctx := t.Context()
			svc := node.Service
			acmeEndpoint(t, svc, bubbleURL)
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
			synctest.Wait() // both workers' requests wait; the claim loop claimed all it would
			if st := node.Dispatcher.Stats(); st.InFlight != 2 || st.Ready != tc.wantReady {
				t.Errorf("ClaimAhead %d: %d in flight and %d claimed and waiting, want 2 and %d", tc.ahead, st.InFlight, st.Ready, tc.wantReady)
			}
			close(release)
			node.Stop(ctx)
		}
	})
}
