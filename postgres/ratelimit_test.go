package postgres

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres/pgtest"
)

// TestDispatcher_RateLimitedEndpointHoldsNoClaimsBack: on a node of a
// cluster (ClaimAhead), the backlog of an endpoint waiting for its rate
// limit neither counts as claimed ahead nor is claimed further while it
// waits, so the other endpoints of the same tenant are claimed and
// delivered at once instead of behind it.
func TestDispatcher_RateLimitedEndpointHoldsNoClaimsBack(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, pgtest.URL(t), Options{Schema: pgtest.Schema(t), MaxConns: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var mu sync.Mutex
	got := map[string][]time.Duration{}
	start := time.Now()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.URL.Path] = append(got[r.URL.Path], time.Since(start))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	count := func(path string) int {
		mu.Lock()
		defer mu.Unlock()
		return len(got[path])
	}

	// No preclaim: every delivery reaches the dispatcher through its
	// claim loop, which is what this is about.
	sched := s.Scheduler(SchedulerOptions{EndpointConcurrency: 2, Poll: 50 * time.Millisecond})
	targets := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	d := engine.NewDispatcher(s, engine.DispatcherOptions{Scheduler: sched, ClaimAhead: 8, Workers: 4, EndpointConcurrency: 2, Targets: targets})
	svc := engine.NewService(s, d, engine.ServiceOptions{Targets: targets})
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	// Created first, its deliveries come first in every claim.
	for _, ep := range []struct {
		path  string
		limit *engine.RateLimitInput
	}{{"/limited", &engine.RateLimitInput{PerSecond: 2}}, {"/free", nil}} {
		if _, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: srv.URL + ep.path, EventTypes: []string{"*"}, RateLimit: ep.limit}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 40
	for range n {
		if _, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	start = time.Now()
	mu.Unlock()
	startDispatcher(t, d, sched)

	if !poll(5*time.Second, func() bool { return count("/free") >= n }) {
		t.Errorf("the endpoint without a limit got %d of %d deliveries in 5 s: the limited endpoint's backlog holds it back", count("/free"), n)
	}
	time.Sleep(time.Second)
	mu.Lock()
	defer mu.Unlock()
	limited := got["/limited"]
	// 2 per second, burst 2: in the first 3 s at most 2 + 2×3.
	late := 0
	for _, at := range limited {
		if at <= 3*time.Second {
			late++
		}
	}
	if late > 8 {
		t.Errorf("the limited endpoint got %d requests in its first 3 s, want at most 8 (2 per second, burst 2): %v", late, limited)
	}
}

// TestImport_RefusesBadRateLimit: an endpoint whose rate limit the API
// would refuse is refused by the import, naming the endpoint and the
// member at fault, and the import cannot finish.
func TestImport_RefusesBadRateLimit(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	im, _, err := s.Import(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	feedImport(t, im, 1, false)
	ep := engine.Endpoint{ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/in", EventTypes: []string{"*"},
		Created: importT0, Updated: importT0, Secrets: []engine.Secret{{Key: engine.NewSecret()}}, RateLimit: engine.RateLimit{PerSecond: 5, Burst: -1}}
	err = im.Endpoint(ep)
	if engine.ErrorCode(err) != engine.CodeInvalidField || !strings.Contains(err.Error(), ep.ID) || !strings.Contains(err.Error(), "rate_limit.burst") {
		t.Errorf("Import.Endpoint = %v, want invalid_field naming the endpoint and rate_limit.burst", err)
	}
	if _, err := im.Finish(Counts{Tenants: 1, EventTypes: 1, Endpoints: 1}); err == nil {
		t.Error("Finish after a refused endpoint succeeded")
	}
}

// TestImport_RefusesBadSource: an endpoint whose source is none the
// engine writes, or a customer's with one, is refused, naming it.
func TestImport_RefusesBadSource(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	im, _, err := s.Import(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	feedImport(t, im, 1, false)
	ep := engine.Endpoint{ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/in", EventTypes: []string{"*"},
		Created: importT0, Updated: importT0, Secrets: []engine.Secret{{Key: engine.NewSecret()}}, Source: engine.SourceConfig}
	err = im.Endpoint(ep)
	if engine.ErrorCode(err) != engine.CodeInvalidField || !strings.Contains(err.Error(), ep.ID) || !strings.Contains(err.Error(), "source") {
		t.Errorf("Import.Endpoint = %v, want invalid_field naming the endpoint and its source", err)
	}
}
