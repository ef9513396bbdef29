// Package tracingtest is an OTLP/HTTP trace receiver for tests: an
// httptest server on 127.0.0.1 that decodes each export request with the
// collector's own request type (go.opentelemetry.io/proto/otlp), keeps
// every span, and answers as a collector does. Tests of package tracing,
// of main's wiring and the end-to-end tests point [tracing] at it.
package tracingtest

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Collector receives OTLP/HTTP trace exports at URL()+"/v1/traces".
type Collector struct {
	srv *httptest.Server

	mu       sync.Mutex
	spans    []Span
	requests int
	headers  []http.Header // of each export request
	errs     []string
}

// Span is a received span with its resource's attributes.
type Span struct {
	*tracepb.Span
	Resource map[string]string
}

// New starts a Collector, closed when tb ends.
func New(tb testing.TB) *Collector {
	tb.Helper()
	c := &Collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	tb.Cleanup(func() {
		c.srv.Close()
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, e := range c.errs {
			tb.Errorf("tracingtest: %s", e)
		}
	})
	return c
}

// URL is the traces endpoint: what [tracing] endpoint names.
func (c *Collector) URL() string { return c.srv.URL + "/v1/traces" }

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	fail := func(format string, args ...any) {
		c.mu.Lock()
		c.errs = append(c.errs, fmt.Sprintf(format, args...))
		c.mu.Unlock()
		http.Error(w, "bad request", http.StatusBadRequest)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		fail("%s %s: want POST /v1/traces", r.Method, r.URL.Path)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		fail("Content-Type %q, want application/x-protobuf", ct)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		fail("read: %v", err)
		return
	}
	var req collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		fail("decode: %v", err)
		return
	}
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		res := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			res[kv.GetKey()] = Value(kv.GetValue())
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{Span: s, Resource: res})
			}
		}
	}
	c.mu.Lock()
	c.spans = append(c.spans, got...)
	c.requests++
	c.headers = append(c.headers, r.Header.Clone())
	c.mu.Unlock()
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// Spans returns every span received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Requests returns how many export requests came, and their headers.
func (c *Collector) Requests() (int, []http.Header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests, append([]http.Header(nil), c.headers...)
}

// Wait returns the received spans once match holds for them, or fails tb
// after limit.
func (c *Collector) Wait(tb testing.TB, limit time.Duration, what string, match func([]Span) bool) []Span {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for {
		spans := c.Spans()
		if match(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			tb.Fatalf("tracingtest: no %s within %s; got %d spans: %s", what, limit, len(spans), Describe(spans))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Named returns the spans named name.
func Named(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.GetName() == name {
			out = append(out, s)
		}
	}
	return out
}

// Attr returns the value of span s's attribute key, as text, and whether
// it has one.
func (s Span) Attr(key string) (string, bool) {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return Value(kv.GetValue()), true
		}
	}
	return "", false
}

// TraceID, SpanID and ParentSpanID are the span's IDs in hex ("" when
// not set).
func (s Span) TraceID() string      { return hex.EncodeToString(s.GetTraceId()) }
func (s Span) SpanID() string       { return hex.EncodeToString(s.GetSpanId()) }
func (s Span) ParentSpanID() string { return hex.EncodeToString(s.GetParentSpanId()) }

// Links returns the span's links as "traceid-spanid".
func (s Span) Links() []string {
	var out []string
	for _, l := range s.GetLinks() {
		out = append(out, hex.EncodeToString(l.GetTraceId())+"-"+hex.EncodeToString(l.GetSpanId()))
	}
	return out
}

// Texts returns every text a span shows: its name, each attribute's key
// and value, its status message, its events' names and attributes, its
// links' attributes and trace state, and its resource's attributes. A
// test searches them for what must never be in a trace.
func (s Span) Texts() []string {
	out := []string{s.GetName(), s.GetStatus().GetMessage(), s.GetTraceState()}
	kvs := func(list []*commonpb.KeyValue) {
		for _, kv := range list {
			out = append(out, kv.GetKey(), Value(kv.GetValue()))
		}
	}
	kvs(s.GetAttributes())
	for _, e := range s.GetEvents() {
		out = append(out, e.GetName())
		kvs(e.GetAttributes())
	}
	for _, l := range s.GetLinks() {
		out = append(out, l.GetTraceState())
		kvs(l.GetAttributes())
	}
	for k, v := range s.Resource {
		out = append(out, k, v)
	}
	return out
}

// Value returns an attribute value as text.
func Value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_BytesValue:
		return string(x.BytesValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, Value(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case *commonpb.AnyValue_KvlistValue:
		var parts []string
		for _, kv := range x.KvlistValue.GetValues() {
			parts = append(parts, kv.GetKey()+"="+Value(kv.GetValue()))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	return ""
}

// Describe lists spans by name, IDs and attributes, for a failure's
// message.
func Describe(spans []Span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "\n  %s trace %s span %s parent %s links %v:", s.GetName(), s.TraceID(), s.SpanID(), s.ParentSpanID(), s.Links())
		for _, kv := range s.GetAttributes() {
			fmt.Fprintf(&b, " %s=%s", kv.GetKey(), Value(kv.GetValue()))
		}
	}
	return b.String()
}
