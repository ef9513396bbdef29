package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/postgres/pgtest"
)

// TestCluster_OrderedLines runs three webhookd processes on one
// PostgreSQL schema with a 3 s lease and two ordered endpoints of one
// receiver (ordering key over ten keys, and ordering endpoint), ingests
// through all three at once while the receiver answers 502 to one
// request in ten and holds one in a hundred past the attempt timeout,
// and SIGKILLs one node a third of the way in. It checks:
//
//   - at the key endpoint each key's requests, at the endpoint endpoint
//     all of them, arrived in sequence order (a retry, or a resend of the
//     killed node's attempt, repeats its sequence; nothing later came
//     before the one ahead of it had succeeded or died);
//   - mid-load, every waiting delivery waits behind a head;
//   - every delivery settled (none pending or waiting), and every
//     acknowledged event succeeded or died at each endpoint: nothing
//     acknowledged is lost.
func TestCluster_OrderedLines(t *testing.T) {
	clusterTest(t)
	// Not parallel: three more processes beside TestCluster_KillNode's
	// on two cores made its load miss its bound.
	const lease = 3 * time.Second
	events := 300
	if testing.Short() {
		events = 120
	}
	schema := pgtest.Schema(t)
	webhookdBinary(t)
	started := time.Now()
	cfg := configWith(t, clusterConfig(t, schema, lease, ""), map[string]any{
		"delivery.attempt_timeout":      "1s", // under the lease: a claim outlasts its attempt
		"delivery.schedule":             []string{"20ms", "50ms", "100ms", "200ms", "500ms"},
		"delivery.deadline":             "5m",
		"delivery.workers":              16,
		"delivery.endpoint_concurrency": 16,
		"log.level":                     "warn",
	})
	procs, bases := clusterProcs(t, t.TempDir(), cfg, 3)
	rc := newOrderedReceiver(t, 1500*time.Millisecond)
	in := &instance{t: t, base: bases[0]} // never killed
	in.setup()
	in.createOrderedEndpoint(rc.srv.URL+"/key", "key")
	in.createOrderedEndpoint(rc.srv.URL+"/endpoint", "endpoint")

	// Four clients; event n has key k(n mod 10) and Idempotency-Key n,
	// goes first to node n mod 3, and is sent again to the next node
	// until acknowledged.
	var next, acked atomic.Int64
	alive := make([]atomic.Bool, len(bases))
	for i := range alive {
		alive[i].Store(true)
	}
	deadline := time.Now().Add(40 * time.Second)
	prefix := fmt.Sprintf("ordered-%d", time.Now().UnixNano())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			client := &http.Client{Timeout: 5 * time.Second}
			for {
				n := int(next.Add(1)) - 1
				if n >= events {
					return
				}
				for node := n; ; node++ {
					if time.Now().After(deadline) {
						return
					}
					if !alive[node%len(bases)].Load() {
						continue
					}
					if ok, _ := postKeyed(client, bases[node%len(bases)], fmt.Sprintf("k%d", n%10), fmt.Sprintf("%s-%d", prefix, n)); ok {
						acked.Add(1)
						break
					}
					time.Sleep(10 * time.Millisecond) // a client's pause before it retries
				}
				time.Sleep(10 * time.Millisecond) // the client's rate (the load under test)
			}
		})
	}
	if !poll(30*time.Second, func() bool { return acked.Load() >= int64(events/3) }) {
		t.Fatalf("only %d of %d events acknowledged in 30 s", acked.Load(), events)
	}
	alive[2].Store(false)
	procs[2].kill()
	ackedAtKill := acked.Load()
	// Any snapshot of the lines is consistent: each change of a line
	// commits whole.
	checkLinesOnPostgres(t, "mid-load, after the kill", schema)
	wg.Wait()
	if acked.Load() < int64(events) {
		t.Fatalf("%d of %d events acknowledged by the deadline", acked.Load(), events)
	}

	// Every line drains, the faults still on: the killed node's heads
	// when their leases end.
	if !poll(60*time.Second, func() bool { return in.unsettled() == 0 }) {
		t.Fatalf("%d deliveries still pending or waiting 60 s after the load", in.unsettled())
	}
	var dead struct {
		Data []json.RawMessage `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/tenants/acme/dead-letters?limit=1000", nil, &dead)
	for path, byKey := range map[string]bool{"/key": true, "/endpoint": false} {
		if bad := rc.outOfOrder(path, byKey); len(bad) > 0 {
			t.Errorf("%s: %d requests out of order, the first: %s", path, len(bad), strings.Join(bad[:min(len(bad), 5)], "; "))
		}
		ok, requests := rc.successes(path)
		if ok+len(dead.Data) < int(acked.Load()) {
			t.Errorf("%s: %d events succeeded and %d deliveries are dead in all, of %d acknowledged", path, ok, len(dead.Data), acked.Load())
		}
		t.Logf("%s: %d of %d acknowledged events succeeded in %d requests; %d dead letters in all", path, ok, acked.Load(), requests, len(dead.Data))
	}
	rc.mu.Lock()
	if len(rc.problems) > 0 {
		t.Errorf("receiver problems: %v", rc.problems)
	}
	rc.mu.Unlock()
	for _, p := range procs[:2] {
		p.stop()
	}
	t.Logf("3 nodes, lease %s, node killed after %d acknowledged; %d events; took %s",
		lease, ackedAtKill, events, time.Since(started).Round(100*time.Millisecond))
}
