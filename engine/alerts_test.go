package engine_test

import (
	"sync"
	"testing"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
)

// TestEnsureOperatorEndpoint_NodesStartingAtOnce: the nodes of a cluster
// start together and each makes sure of the operator's alert endpoint;
// every one of them starts, and there is one endpoint.
func TestEnsureOperatorEndpoint_NodesStartingAtOnce(t *testing.T) {
	for round := range 1000 {
		st := memstore.New()
		var start, done sync.WaitGroup
		start.Add(1)
		errs := make([]error, 4)
		for i := range errs {
			done.Add(1)
			go func() {
				defer done.Done()
				svc := engine.NewService(st, nil, engine.ServiceOptions{})
				start.Wait()
				errs[i] = svc.EnsureOperatorEndpoint(t.Context(), "https://ops.example.com/alerts", engine.NewSecret())
			}()
		}
		start.Done()
		done.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: node %d: %v", round, i, err)
			}
		}
		eps, err := st.Endpoints(t.Context(), engine.OperatorTenant)
		if err != nil || len(eps) != 1 {
			t.Fatalf("round %d: %d operator endpoints (%v), want 1", round, len(eps), err)
		}
	}
}
