package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/storage"
	"github.com/webhookd/webhookd/tracing"
	"github.com/webhookd/webhookd/tracing/tracingtest"
)

const token = "tracing-test-admin-token-0123456789"

// node is a webhookd wired as main wires it with [tracing] on: a bbolt
// file whose commits are traced, a node whose ingests and attempts are,
// and the API behind the tracer's Handler.
type node struct {
	api    *httptest.Server
	tracer *tracing.Tracer
	db     *storage.DB
}

func startNode(t *testing.T, col *tracingtest.Collector) *node {
	return startNodeRatio(t, col, 1)
}

// startNodeRatio is startNode with the default sampler at ratio.
func startNodeRatio(t *testing.T, col *tracingtest.Collector, ratio float64) *node {
	t.Helper()
	tr, err := tracing.New(t.Context(), tracing.Config{
		Endpoint: col.URL(), Headers: map[string]string{"X-Collector-Key": "collector-key-secret"},
		Sampler: "parentbased_traceidratio", Ratio: ratio, ServiceName: "webhookd-test", ServiceVersion: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	db, err := storage.Open(filepath.Join(t.TempDir(), "webhookd.db"), storage.Options{ObserveCommit: tr.ObserveCommit})
	if err != nil {
		t.Fatal(err)
	}
	loopback := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	n := engine.NewNode(db, engine.NodeOptions{
		Tracer:     tr,
		Dispatcher: engine.DispatcherOptions{Targets: loopback},
		Service:    engine.ServiceOptions{Targets: loopback},
	})
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(tr.Handler(httpapi.New(n.Service, httpapi.Options{Tokens: []string{token}})))
	t.Cleanup(func() {
		api.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Stop(ctx)
		db.Close()
		tr.Shutdown(ctx)
	})
	return &node{api: api, tracer: tr, db: db}
}

// call makes an API request and decodes its answer into out (when not
// nil), failing t unless the status is want.
func (n *node) call(t *testing.T, want int, method, path string, body any, out any, header ...string) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, n.api.URL+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatal(err)
		}
	}
}

// flush exports what the tracer has batched.
func (n *node) flush(t *testing.T) {
	t.Helper()
	if err := n.tracer.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// receiver records the traceparent of each request it gets, by event ID.
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string][]string // event ID → the Traceparent header's values
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{got: map[string][]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.got[req.Header.Get("webhook-id")] = req.Header.Values("Traceparent")
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// wait returns the traceparent values the request of event id carried,
// once it came.
func (r *receiver) wait(t *testing.T, id string) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		tp, ok := r.got[id]
		r.mu.Unlock()
		if ok {
			return tp
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %s never reached the receiver", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type created struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

type ingested struct {
	ID string `json:"id"`
}

// The secrets and the payload of TestTracer: none may be in a span.
const (
	payloadMarker = "payload-marker-7f3a"
	headerSecret  = "header-secret-7f3a"
	pathSecret    = "path-secret-7f3a"
	querySecret   = "query-secret-7f3a"
)

// TestTracer: an ingest that carries a traceparent continues that trace;
// each attempt is a trace of its own, linked to its event's ingest,
// with its endpoint, number, status, duration and outcome; an endpoint
// with send_traceparent gets the attempt span's traceparent and one
// without gets none; commits are traced with their batch; and no span
// shows the payload, a secret, a header's value, the admin token or the
// URL's path and query.
func TestTracer(t *testing.T) {
	col := tracingtest.New(t)
	n := startNode(t, col)
	recv := newReceiver(t)

	n.call(t, 201, "PUT", "/v1/tenants/acme", map[string]any{"name": "Acme"}, nil)
	n.call(t, 201, "PUT", "/v1/event-types/order.created", map[string]any{"description": "an order"}, nil)
	var sends, quiet created
	n.call(t, 201, "POST", "/v1/tenants/acme/endpoints", map[string]any{
		"url":         recv.srv.URL + "/hooks/" + pathSecret + "?token=" + querySecret,
		"event_types": []string{"order.created"}, "send_traceparent": true,
		"headers": map[string]string{"Authorization": "Bearer " + headerSecret},
	}, &sends)
	quietRecv := newReceiver(t)
	n.call(t, 201, "POST", "/v1/tenants/acme/endpoints", map[string]any{
		"url": quietRecv.srv.URL + "/quiet", "event_types": []string{"order.created"},
	}, &quiet)

	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	var ev ingested
	n.call(t, 202, "POST", "/v1/tenants/acme/events", map[string]any{"type": "order.created", "data": map[string]string{"note": payloadMarker}}, &ev,
		"traceparent", "00-"+callerTrace+"-"+callerSpan+"-01", "tracestate", "vendor=opaque")
	sent := recv.wait(t, ev.ID)
	if got := quietRecv.wait(t, ev.ID); len(got) != 0 {
		t.Errorf("the endpoint without send_traceparent got traceparent %q", got)
	}

	var spans []tracingtest.Span
	attempted := func(ss []tracingtest.Span) bool {
		return len(tracingtest.Named(ss, tracing.SpanAttempt)) == 2 && len(tracingtest.Named(ss, tracing.SpanIngest)) == 1
	}
	for range 50 {
		n.flush(t)
		if spans = col.Spans(); attempted(spans) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	spans = col.Wait(t, time.Second, "ingest and two attempts", attempted)

	ingest := tracingtest.Named(spans, tracing.SpanIngest)[0]
	if ingest.TraceID() != callerTrace || ingest.ParentSpanID() != callerSpan {
		t.Errorf("the ingest span is in trace %s under %s, want the caller's %s under %s", ingest.TraceID(), ingest.ParentSpanID(), callerTrace, callerSpan)
	}
	for key, want := range map[string]string{
		tracing.AttrTenant: "acme", tracing.AttrEventType: "order.created", tracing.AttrEventID: ev.ID,
		tracing.AttrIngestOutcome: "accepted",
	} {
		if got, _ := ingest.Attr(key); got != want {
			t.Errorf("ingest span: %s = %q, want %q", key, got, want)
		}
	}
	if got := ingest.Resource["service.name"]; got != "webhookd-test" {
		t.Errorf("service.name %q, want webhookd-test", got)
	}

	for _, a := range tracingtest.Named(spans, tracing.SpanAttempt) {
		ep, _ := a.Attr(tracing.AttrEndpointID)
		if a.TraceID() == callerTrace || a.ParentSpanID() != "" {
			t.Errorf("attempt to %s: in trace %s under %q, want a trace of its own", ep, a.TraceID(), a.ParentSpanID())
		}
		if links := a.Links(); len(links) != 1 || links[0] != callerTrace+"-"+ingest.SpanID() {
			t.Errorf("attempt to %s: links %v, want the ingest span %s-%s", ep, links, callerTrace, ingest.SpanID())
		}
		for key, want := range map[string]string{
			tracing.AttrEventID: ev.ID, tracing.AttrAttempt: "1", tracing.AttrStatus: "204", tracing.AttrOutcome: "success",
		} {
			if got, _ := a.Attr(key); got != want {
				t.Errorf("attempt to %s: %s = %q, want %q", ep, key, got, want)
			}
		}
		if d, ok := a.Attr(tracing.AttrAttemptMillis); !ok || d == "0" {
			t.Errorf("attempt to %s: duration %q", ep, d)
		}
		switch ep {
		case sends.ID:
			want := "00-" + a.TraceID() + "-" + a.SpanID() + "-01"
			if len(sent) != 1 || sent[0] != want {
				t.Errorf("the endpoint with send_traceparent got %q, want its attempt's %q", sent, want)
			}
		case quiet.ID:
		default:
			t.Errorf("an attempt to endpoint %q", ep)
		}
	}

	commits := tracingtest.Named(spans, tracing.SpanCommit)
	if len(commits) == 0 {
		t.Error("no commit span")
	}
	for _, c := range commits {
		if w, _ := c.Attr(tracing.AttrCommitWrites); w == "" || w == "0" {
			t.Errorf("a commit span of %q writes", w)
		}
		if _, ok := c.Attr(tracing.AttrCommitSync); !ok {
			t.Error("a commit span without its write and fsync time")
		}
	}

	for _, s := range spans {
		for _, text := range s.Texts() {
			for _, never := range []string{payloadMarker, headerSecret, pathSecret, querySecret, sends.Secret, quiet.Secret, token, "/hooks", "/quiet"} {
				if never != "" && strings.Contains(text, never) {
					t.Errorf("span %s shows %q: %q", s.GetName(), never, text)
				}
			}
		}
	}
	// The collector's key went with the exports, as a header.
	if _, headers := col.Requests(); len(headers) == 0 || headers[0].Get("X-Collector-Key") != "collector-key-secret" {
		t.Errorf("the exports' headers: %v", headers)
	}
}

// TestTracer_AnEventIsTracedWhole: the sampling decision is made once per
// event, at its ingest, and its attempts follow it: at ratio 0 an event
// under a caller's sampled trace is traced, ingest and attempt, and one
// without a traceparent is not; at ratio 1 an event under a caller's
// unsampled trace has no span, its attempt's included.
func TestTracer_AnEventIsTracedWhole(t *testing.T) {
	const sampled, unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	for _, c := range []struct {
		ratio       float64
		traceparent string
		traced      bool
	}{
		{0, sampled, true},
		{0, "", false},
		{1, unsampled, false},
		{1, "", true},
	} {
		t.Run(fmt.Sprintf("ratio %v traceparent %q", c.ratio, c.traceparent), func(t *testing.T) {
			col := tracingtest.New(t)
			n := startNodeRatio(t, col, c.ratio)
			recv := newReceiver(t)
			n.call(t, 201, "PUT", "/v1/tenants/acme", map[string]any{"name": "Acme"}, nil)
			n.call(t, 201, "PUT", "/v1/event-types/order.created", map[string]any{"description": "an order"}, nil)
			n.call(t, 201, "POST", "/v1/tenants/acme/endpoints", map[string]any{"url": recv.srv.URL + "/h", "event_types": []string{"*"}}, nil)
			var header []string
			if c.traceparent != "" {
				header = []string{"traceparent", c.traceparent}
			}
			var ev ingested
			n.call(t, 202, "POST", "/v1/tenants/acme/events", map[string]any{"type": "order.created", "data": map[string]string{}}, &ev, header...)
			recv.wait(t, ev.ID)
			for range 500 { // the attempt's span ends as its outcome is recorded
				var got struct {
					Deliveries []struct {
						State string `json:"state"`
					} `json:"deliveries"`
				}
				n.call(t, 200, "GET", "/v1/tenants/acme/events/"+ev.ID, nil, &got)
				if len(got.Deliveries) == 1 && got.Deliveries[0].State == "succeeded" {
					break
				}
				time.Sleep(10 * time.Millisecond) // the dispatcher records the outcome
			}
			var ingests, attempts int
			for range 50 {
				n.flush(t)
				spans := col.Spans()
				ingests, attempts = len(tracingtest.Named(spans, tracing.SpanIngest)), len(tracingtest.Named(spans, tracing.SpanAttempt))
				if !c.traced || attempts == 1 {
					break
				}
				time.Sleep(20 * time.Millisecond) // the attempt's span ends after the receiver's answer
			}
			if want := map[bool]int{true: 1}[c.traced]; ingests != want || attempts != want {
				t.Errorf("%d ingest and %d attempt spans, want %d of each", ingests, attempts, want)
			}
		})
	}
}

// TestTracer_IngestOutcomes: an ingest without a traceparent is the root
// of its trace; a repeat with the same Idempotency-Key is "duplicate", a
// refused one its error's code, without an event ID.
func TestTracer_IngestOutcomes(t *testing.T) {
	col := tracingtest.New(t)
	n := startNode(t, col)
	n.call(t, 201, "PUT", "/v1/tenants/acme", map[string]any{"name": "Acme"}, nil)
	n.call(t, 201, "PUT", "/v1/event-types/order.created", map[string]any{"description": "an order"}, nil)
	var first, again ingested
	body := map[string]any{"type": "order.created", "data": 1}
	n.call(t, 202, "POST", "/v1/tenants/acme/events", body, &first, "Idempotency-Key", "k1")
	n.call(t, 202, "POST", "/v1/tenants/acme/events", body, &again, "Idempotency-Key", "k1")
	n.call(t, 422, "POST", "/v1/tenants/acme/events", map[string]any{"type": "order.unknown", "data": 1}, nil)
	n.flush(t)
	spans := col.Wait(t, 5*time.Second, "three ingests", func(ss []tracingtest.Span) bool {
		return len(tracingtest.Named(ss, tracing.SpanIngest)) == 3
	})
	var outcomes []string
	for _, s := range tracingtest.Named(spans, tracing.SpanIngest) {
		o, _ := s.Attr(tracing.AttrIngestOutcome)
		id, _ := s.Attr(tracing.AttrEventID)
		outcomes = append(outcomes, o+" "+id)
		if s.ParentSpanID() != "" {
			t.Errorf("an ingest without a traceparent has parent %s", s.ParentSpanID())
		}
	}
	want := fmt.Sprintf("[accepted %s duplicate %s unknown_event_type ]", first.ID, first.ID)
	if got := fmt.Sprint(outcomes); got != want {
		t.Errorf("outcomes %s, want %s", got, want)
	}
}

// TestTraceParent: a span context and its traceparent go both ways, and
// what is not a traceparent parses as none.
func TestTraceParent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc, ok := tracing.ParseTraceParent(tp)
	if !ok || !sc.IsRemote() || !sc.IsSampled() {
		t.Fatalf("ParseTraceParent(%s) = %v, %v", tp, sc, ok)
	}
	if got := tracing.TraceParent(sc); got != tp {
		t.Errorf("TraceParent = %s, want %s", got, tp)
	}
	for _, bad := range []string{"", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", tp + "-x"} {
		if _, ok := tracing.ParseTraceParent(bad); ok {
			t.Errorf("ParseTraceParent(%q) took it", bad)
		}
	}
}

// TestNew_Config: a sampler New does not know, or a ratio out of [0, 1],
// is refused by name; each sampler it lists is taken.
func TestNew_Config(t *testing.T) {
	col := tracingtest.New(t)
	for _, s := range tracing.Samplers {
		tr, err := tracing.New(t.Context(), tracing.Config{Endpoint: col.URL(), Sampler: s, Ratio: 0.5, ServiceName: "w"})
		if err != nil {
			t.Errorf("sampler %s: %v", s, err)
			continue
		}
		tr.Shutdown(t.Context())
	}
	for _, c := range []struct {
		sampler string
		ratio   float64
		want    string
	}{{"sometimes", 1, `sampler "sometimes"`}, {"traceidratio", 1.5, "ratio 1.5"}, {"traceidratio", -0.1, "ratio -0.1"}} {
		if _, err := tracing.New(t.Context(), tracing.Config{Endpoint: col.URL(), Sampler: c.sampler, Ratio: c.ratio}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("sampler %s ratio %v: %v, want an error naming %s", c.sampler, c.ratio, err, c.want)
		}
	}
}
