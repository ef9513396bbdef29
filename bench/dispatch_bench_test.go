package bench

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/verify"
)

// BenchmarkDispatch is the dispatch scenario per delivery, small enough
// for `go test -bench`: a backlog of 1 KiB events for 10 healthy loopback
// receivers is ingested with the dispatcher stopped, then webhookd is
// reopened and the time and allocations until every delivery is recorded
// are what is measured. Each op is one delivery: the request, its
// signature, its read and its durably recorded outcome, and the receiver
// that answers it (it runs in this process, as the ceiling's does).
// allocs/op is the steady figure to compare changes by; ns/op moves with
// the machine like every figure here.
//
//	go test ./bench -run '^$' -bench Dispatch -benchmem -benchtime 20000x
func BenchmarkDispatch(b *testing.B) { benchDispatch(b, nil) }

// BenchmarkDispatch_Traced is BenchmarkDispatch with -tracing's tracer:
// what [tracing] adds to a delivery.
func BenchmarkDispatch_Traced(b *testing.B) {
	sink, err := newOTLPSink(1)
	if err != nil {
		b.Fatal(err)
	}
	defer sink.close()
	benchDispatch(b, sink)
}

func benchDispatch(b *testing.B, sink *otlpSink) {
	const endpoints = 10
	events := (b.N + endpoints - 1) / endpoints
	ctx := context.Background()
	rs, err := startReceivers(endpoints, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rs.close()
	urls := make([]string, len(rs.rs))
	for i, rc := range rs.rs {
		urls[i] = rc.url
	}
	path := filepath.Join(b.TempDir(), "webhookd.db")
	const clients = 16
	in, err := openInstance(ctx, instanceOptions{path: path, traceTo: sink}, clients)
	if err != nil {
		b.Fatal(err)
	}
	tenant := "bench-dispatch"
	eps, err := in.api.setup(ctx, tenant, eventType, urls)
	if err != nil {
		b.Fatal(err)
	}
	for i, ep := range eps {
		rs.rs[i].verifier.Store(&verify.Verifier{Secrets: []string{ep.Secret}})
	}
	var sent atomic.Int64
	lr := runLoad(ctx, in.api, loadSpec{tenant: tenant, clients: clients, events: events, duration: 5 * time.Minute, body: eventBody(1024)}, &sent)
	if err := in.close(5 * time.Second); err != nil {
		b.Fatal(err)
	}
	if len(lr.acks) != events {
		b.Fatalf("%d of %d events acknowledged: %v", len(lr.acks), events, lr.firstErr)
	}

	b.ReportAllocs()
	b.ResetTimer()
	in, err = openInstance(ctx, instanceOptions{path: path, dispatch: true, traceTo: sink}, clients)
	if err != nil {
		b.Fatal(err)
	}
	defer in.close(5 * time.Second)
	deadline := time.Now().Add(10 * time.Minute)
	for in.pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // real receivers on loopback: the dispatch under measure
	}
	b.StopTimer()
	if got, want := rs.counts(nil).Delivered, int64(events*endpoints); got != want {
		b.Fatalf("receivers counted %d deliveries, want %d", got, want)
	}
}
