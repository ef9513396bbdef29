package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// traceTests hold a store to what tracing needs of it: an event keeps
// the span context of its ingest (Event.IngestTrace), and every attempt
// of its deliveries reads it (AttemptInput.IngestTrace), whichever way
// the event was appended and the delivery made or claimed, so that an
// attempt's span links to its ingest after a restart too; and an
// endpoint keeps SendTraceparent.
var traceTests = []test{
	{"an event keeps its ingest's trace, and each attempt's input reads it", testTraceKept},
	{"an endpoint keeps send_traceparent", testTraceEndpoint},
}

// traceparent returns a W3C traceparent with trace ID and span ID n.
func traceparent(n int) string {
	return fmt.Sprintf("00-%032x-%016x-01", n+1, n+1)
}

func testTraceKept(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	_, typ := f.lane(t, "acme")
	_, otyp := f.orderedLane(t, "acme", engine.OrderingKey, engine.OnDeadSkip)

	// Events appended every way: plain (a store may take a shorter path
	// from the second on), with an idempotency key, with an ordering
	// key, and without a trace.
	type appended struct {
		res   engine.IngestResult
		trace string
	}
	var all []appended
	for i := range 3 {
		in := newEvent("acme", typ, `{"n":1}`)
		in.Event.IngestTrace = traceparent(i)
		all = append(all, appended{f.ingest(t, in), traceparent(i)})
	}
	keyed := newEvent("acme", typ, `{"n":2}`)
	keyed.Event.IngestTrace = traceparent(10)
	keyed.IdempotencyKey, keyed.RequestHash, keyed.IdempotencyExpires = "trace-key", [32]byte{1}, t0.Add(time.Hour)
	all = append(all, appended{f.ingest(t, keyed), traceparent(10)})
	line := newEvent("acme", otyp, `{"n":3}`)
	line.Event.OrderingKey, line.Event.IngestTrace = "order-1", traceparent(11)
	all = append(all, appended{f.ingest(t, line), traceparent(11)})
	all = append(all, appended{f.ingest(t, newEvent("acme", typ, `{"n":4}`)), ""})

	// An idempotent repeat answers the first ingest's trace, not its own.
	again := newEvent("acme", typ, `{"n":2}`)
	again.Event.IngestTrace = traceparent(12)
	again.IdempotencyKey, again.RequestHash, again.IdempotencyExpires = "trace-key", [32]byte{1}, t0.Add(time.Hour)
	dup := f.ingest(t, again)
	if !dup.Duplicate {
		t.Fatalf("the repeat is no duplicate: %+v", dup)
	}
	wantEqual(t, "the duplicate's trace", dup.Event.IngestTrace, traceparent(10))

	for _, a := range all {
		wantEqual(t, "AppendEvent's answer's trace", a.res.Event.IngestTrace, a.trace)
		ev, ds, err := f.s.Event(t.Context(), "acme", a.res.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "Event's trace", ev.IngestTrace, a.trace)
		if len(ds) != 1 {
			t.Fatalf("%d deliveries, want 1", len(ds))
		}
		in, err := f.s.AttemptInput(t.Context(), ds[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "AttemptInput's trace of "+ds[0].ID, in.IngestTrace, a.trace)
		// Read twice: a store that keeps what it read keeps the trace.
		if in, err = f.s.AttemptInput(t.Context(), ds[0].ID); err != nil || in.IngestTrace != a.trace {
			t.Errorf("AttemptInput again: trace %q, %v; want %q", in.IngestTrace, err, a.trace)
		}
	}

	// The attempts a scheduler hands out read it as they are claimed.
	s, _ := f.scheduler(t)
	want := map[string]string{}
	for _, a := range all {
		want[a.res.Deliveries[0].ID] = a.trace
	}
	seen := 0
	for _, w := range claim(t, s, time.Second) {
		trace, ok := want[w.DeliveryID]
		if !ok {
			continue
		}
		seen++
		in, err := f.s.AttemptInput(t.Context(), w.DeliveryID)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "a claimed delivery's trace", in.IngestTrace, trace)
	}
	if seen == 0 {
		t.Error("the scheduler handed out none of the deliveries")
	}

	// A delivery made later, by a backfill, links to its event's ingest.
	late := f.endpoint(t, "acme", typ)
	created, _, _ := f.backfill(t, engine.BackfillStep{
		Tenant: "acme", EndpointID: late.ID, Since: t0.Add(-time.Hour), Until: t0.Add(time.Hour),
		Scan: 100, Max: 100, At: t0.Add(time.Minute), By: "admin",
	})
	if len(created) == 0 {
		t.Fatal("the backfill made no delivery")
	}
	for _, d := range created {
		in, err := f.s.AttemptInput(t.Context(), d.ID)
		if err != nil {
			t.Fatal(err)
		}
		var trace string
		for _, a := range all {
			if a.res.Event.ID == d.EventID {
				trace = a.trace
			}
		}
		wantEqual(t, "a backfilled delivery's trace", in.IngestTrace, trace)
	}
}

func testTraceEndpoint(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	typ := "trace.created"
	f.eventType(t, typ)
	on := newEndpoint("acme", typ)
	on.SendTraceparent = true
	if err := f.s.CreateEndpoint(t.Context(), on, 0); err != nil {
		t.Fatal(err)
	}
	off := f.endpoint(t, "acme", typ)
	read := func(id string) engine.Endpoint {
		t.Helper()
		ep, err := f.s.Endpoint(t.Context(), "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		return ep
	}
	wantEqual(t, "send_traceparent of the endpoint created with it", read(on.ID).SendTraceparent, true)
	wantEqual(t, "send_traceparent of the endpoint created without it", read(off.ID).SendTraceparent, false)
	eps, err := f.s.Endpoints(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range eps {
		wantEqual(t, "Endpoints' send_traceparent of "+ep.ID, ep.SendTraceparent, ep.ID == on.ID)
	}
	res := f.ingest(t, newEvent("acme", typ, `{"n":1}`))
	for _, d := range res.Deliveries {
		in, err := f.s.AttemptInput(t.Context(), d.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "AttemptInput's endpoint's send_traceparent", in.Endpoint.SendTraceparent, d.EndpointID == on.ID)
	}
	for _, c := range []struct {
		ep   engine.Endpoint
		send bool
	}{{on, false}, {off, true}} {
		got, err := f.s.UpdateEndpoint(t.Context(), "acme", c.ep.ID, func(ep *engine.Endpoint) error {
			ep.SendTraceparent = c.send
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "UpdateEndpoint's answer", got.SendTraceparent, c.send)
		wantEqual(t, "the endpoint updated", read(c.ep.ID).SendTraceparent, c.send)
	}
}
