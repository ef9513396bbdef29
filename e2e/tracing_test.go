package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/tracing"
	"github.com/webhookd/webhookd/tracing/tracingtest"
)

// traceReceiver is an endpoint that answers 204 and records the
// traceparent header each event's request carried.
type traceReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string][]string // webhook-id → its Traceparent values
}

func newTraceReceiver(t *testing.T) *traceReceiver {
	rc := &traceReceiver{got: map[string][]string{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rc.mu.Lock()
		rc.got[r.Header.Get("webhook-id")] = r.Header.Values("Traceparent")
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// traceparent returns the Traceparent values of event id's request, and
// whether one came.
func (rc *traceReceiver) traceparent(id string) ([]string, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	tp, ok := rc.got[id]
	return tp, ok
}

// TestTracing_LinkAcrossRestart: with [tracing] on, an ingest that
// carries a traceparent continues the caller's trace; webhookd stops
// before the event's delivery is due and starts again on the same
// database; the attempt, made by the second process, is a trace of its
// own linked to the first process's ingest span, and the endpoint, which
// asks for it, gets the attempt's traceparent. Both processes export to
// the same in-test OTLP/HTTP collector.
func TestTracing_LinkAcrossRestart(t *testing.T) {
	t.Parallel()
	col := tracingtest.New(t)
	rc := newTraceReceiver(t)
	dir := t.TempDir()
	config := configWith(t, testConfig, map[string]any{"tracing.enabled": true, "tracing.endpoint": col.URL(), "tracing.service_name": "webhookd-e2e"})
	in := startInstance(t, dir, config)
	in.setup()
	var ep endpointCreated
	in.mustCall(201, "POST", "/v1/tenants/acme/endpoints", map[string]any{"url": rc.srv.URL + "/hook", "event_types": []string{"payment.succeeded"}, "send_traceparent": true}, &ep)

	const callerTrace, callerSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	due := time.Now().Add(4 * time.Second).UTC().Format(time.RFC3339Nano)
	var res ingestResponse
	in.mustCall(202, "POST", "/v1/tenants/acme/events", fmt.Sprintf(`{"type":"payment.succeeded","data":{"n":1},"deliver_at":%q}`, due), &res,
		"traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	in.stop() // before the delivery is due; the shutdown exports the ingest's span
	if _, ok := rc.traceparent(res.ID); ok {
		t.Fatal("the event was delivered before the restart: the test proves nothing")
	}
	spans := col.Wait(t, 10*time.Second, "the ingest span", func(ss []tracingtest.Span) bool {
		return len(tracingtest.Named(ss, tracing.SpanIngest)) == 1
	})
	ingest := tracingtest.Named(spans, tracing.SpanIngest)[0]
	if ingest.TraceID() != callerTrace || ingest.ParentSpanID() != callerSpan {
		t.Errorf("the ingest span is in trace %s under %s, want the caller's %s under %s", ingest.TraceID(), ingest.ParentSpanID(), callerTrace, callerSpan)
	}
	if id, _ := ingest.Attr(tracing.AttrEventID); id != res.ID {
		t.Errorf("the ingest span's event %q, want %s", id, res.ID)
	}
	if got := ingest.Resource["service.name"]; got != "webhookd-e2e" {
		t.Errorf("service.name %q", got)
	}

	again := startInstance(t, dir, config)
	var sent []string
	if !poll(20*time.Second, func() bool { var ok bool; sent, ok = rc.traceparent(res.ID); return ok }) {
		t.Fatal("the event was not delivered after the restart")
	}
	again.stop() // exports the attempt's span
	spans = col.Wait(t, 10*time.Second, "the attempt span", func(ss []tracingtest.Span) bool {
		return len(tracingtest.Named(ss, tracing.SpanAttempt)) == 1
	})
	a := tracingtest.Named(spans, tracing.SpanAttempt)[0]
	if a.TraceID() == callerTrace || a.ParentSpanID() != "" {
		t.Errorf("the attempt span is in trace %s under %q, want a trace of its own", a.TraceID(), a.ParentSpanID())
	}
	if links := a.Links(); len(links) != 1 || links[0] != callerTrace+"-"+ingest.SpanID() {
		t.Errorf("the attempt span links %v, want the ingest span %s-%s made before the restart", links, callerTrace, ingest.SpanID())
	}
	for key, want := range map[string]string{tracing.AttrEndpointID: ep.ID, tracing.AttrEventID: res.ID, tracing.AttrAttempt: "1", tracing.AttrStatus: "204", tracing.AttrOutcome: "success"} {
		if got, _ := a.Attr(key); got != want {
			t.Errorf("attempt span: %s = %q, want %q", key, got, want)
		}
	}
	if want := "00-" + a.TraceID() + "-" + a.SpanID() + "-01"; len(sent) != 1 || sent[0] != want {
		t.Errorf("the receiver got traceparent %q, want the attempt's %q", sent, want)
	}
}

// TestTracing_OffByDefault: without [tracing] enabled, nothing is sent
// to a collector (even one its endpoint names), and an endpoint that
// asks for send_traceparent gets no traceparent header: there is no
// span to name.
func TestTracing_OffByDefault(t *testing.T) {
	t.Parallel()
	col := tracingtest.New(t)
	rc := newTraceReceiver(t)
	in := startInstance(t, t.TempDir(), configWith(t, testConfig, map[string]any{"tracing.endpoint": col.URL()}))
	in.setup()
	var ep struct {
		ID              string `json:"id"`
		SendTraceparent bool   `json:"send_traceparent"`
	}
	in.mustCall(201, "POST", "/v1/tenants/acme/endpoints", map[string]any{"url": rc.srv.URL + "/hook", "event_types": []string{"payment.succeeded"}, "send_traceparent": true}, &ep)
	if !ep.SendTraceparent {
		t.Errorf("the endpoint's answer: %+v, want send_traceparent true", ep)
	}
	res := in.ingest("payment.succeeded", `{"n":1}`, "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	var sent []string
	if !poll(15*time.Second, func() bool { var ok bool; sent, ok = rc.traceparent(res.ID); return ok }) {
		t.Fatal("the event was not delivered")
	}
	if len(sent) != 0 {
		t.Errorf("tracing off, the receiver got traceparent %q", sent)
	}
	in.stop()
	if n, _ := col.Requests(); n != 0 {
		t.Errorf("tracing off, the collector got %d export requests", n)
	}
}
