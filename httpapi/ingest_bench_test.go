package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/storage"
)

// Benchmarks of the ingest path through the real handler, service and
// bbolt store (fsync on every commit):
//
//	go test ./httpapi -run '^$' -bench Ingest -benchmem
//
// The disk sets the wall clock of a lone ingest, so the benchmarks also
// report the process's CPU time per event (cpu-ns/op), the figure the
// ingest path's code decides.

// benchIngestBody is a 1 KiB event, shaped like bench's load (bench/load.go).
var benchIngestBody = []byte(`{"type":"order.created","data":{"pad":"` + strings.Repeat("x", 1024-48) + `"}}`)

// newBenchHandler returns the API over a real store in b.TempDir with
// tenant "acme", event type "order.created" and endpoints endpoints for it.
func newBenchHandler(b *testing.B, endpoints int) http.Handler {
	h, _ := newBenchService(b, endpoints)
	return h
}

// newBenchService is newBenchHandler with its Service.
func newBenchService(b *testing.B, endpoints int) (http.Handler, *engine.Service) {
	b.Helper()
	db, err := storage.Open(filepath.Join(b.TempDir(), "db"), storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := db.Close(); err != nil {
			b.Error(err)
		}
	})
	ctx := context.Background()
	svc := engine.NewService(db, nil, engine.ServiceOptions{LookupHost: publicLookup})
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
		b.Fatal(err)
	}
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
		b.Fatal(err)
	}
	for range endpoints {
		if _, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "https://hooks.example.com/in", EventTypes: []string{"order.created"}}); err != nil {
			b.Fatal(err)
		}
	}
	return httpapi.New(svc, httpapi.Options{Tokens: []string{testToken}}), svc
}

// serveIngest sends one ingest through h and fails unless it is accepted.
func serveIngest(b *testing.B, h http.Handler, body []byte) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/v1/tenants/acme/events", bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+testToken)
	r.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, r)
	if rec.Code != http.StatusAccepted {
		b.Errorf("ingest = %d %s", rec.Code, rec.Body)
	}
}

// cpuTime is the CPU time, user and system, the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIngest is one client ingesting 1 KiB events one after another:
// every event waits for its own commit.
func BenchmarkIngest(b *testing.B) {
	h := newBenchHandler(b, 1)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchIngestBody)))
	start := cpuTime(b)
	for b.Loop() {
		serveIngest(b, h, benchIngestBody)
	}
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkIngest_Parallel is many clients ingesting at once, their events
// sharing commits (group commit), so that the code, not the disk, sets the
// pace.
func BenchmarkIngest_Parallel(b *testing.B) { benchIngestParallel(b, 1) }

// BenchmarkIngest_Parallel_FanOut10 is BenchmarkIngest_Parallel with ten
// endpoints for the type: every event makes ten deliveries in its commit,
// as in the bench's fanout and dispatch scenarios.
func BenchmarkIngest_Parallel_FanOut10(b *testing.B) { benchIngestParallel(b, 10) }

func benchIngestParallel(b *testing.B, endpoints int) {
	h, svc := newBenchService(b, endpoints)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchIngestBody)))
	b.SetParallelism(32)
	start := cpuTime(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			serveIngest(b, h, benchIngestBody)
		}
	})
	// The deliveries the answers named are written after them (the
	// fan-out): their cost is the ingest's too.
	if err := svc.WaitFanOut(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}
