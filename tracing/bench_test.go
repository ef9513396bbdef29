package tracing_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/storage"
	"github.com/webhookd/webhookd/tracing"
)

// benchTracer returns a Tracer at the default sampler exporting to a
// sink that reads and discards each export, as the bench's does.
func benchTracer(b *testing.B) *tracing.Tracer {
	b.Helper()
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(sink.Close)
	tr, err := tracing.New(b.Context(), tracing.Config{Endpoint: sink.URL + "/v1/traces", Sampler: "parentbased_traceidratio", Ratio: 1, ServiceName: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tr.Shutdown(ctx)
	})
	return tr
}

// BenchmarkTracer_Ingest is one ingest's span, exported: what tracing
// adds to an ingest's CPU.
func BenchmarkTracer_Ingest(b *testing.B) {
	tr := benchTracer(b)
	res := engine.IngestResult{Event: engine.Event{ID: "evt_06h49r7ex8fm6fb0vf1t3x835g"}, Deliveries: make([]engine.Delivery, 3)}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, span := tr.StartIngest(context.Background(), "acme", "order.created")
			_ = span.TraceParent()
			span.End(res, nil)
		}
	})
}

// BenchmarkTracer_Attempt is one attempt's span, linked and exported.
func BenchmarkTracer_Attempt(b *testing.B) {
	tr := benchTracer(b)
	a := engine.AttemptTrace{TenantID: "acme", EventID: "evt_06h49r7ex8fm6fb0vf1t3x835g", EventType: "order.created", DeliveryID: "dlv_06h49r7ex8fm6fb0vf1t3x835g", EndpointID: "ep_06h49r7ex8fm6fb0vf1t3x835g",
		Cycle: 1, Number: 1, IngestTrace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	at := engine.Attempt{Cycle: 1, Number: 1, Status: 204, Duration: 3 * time.Millisecond, Outcome: engine.OutcomeSuccess}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			span := tr.StartAttempt(context.Background(), a)
			_ = span.TraceParent()
			span.End(at, engine.StateSucceeded)
		}
	})
}

// BenchmarkTracer_Commit is one commit's span, exported.
func BenchmarkTracer_Commit(b *testing.B) {
	tr := benchTracer(b)
	c := storage.Commit{Start: time.Now(), Duration: time.Millisecond, Writes: 20, Runs: 1, WriteSync: 800 * time.Microsecond, Pages: 19}
	b.ReportAllocs()
	for b.Loop() {
		tr.ObserveCommit(c)
	}
}
