// Package tracing traces webhookd with OpenTelemetry, exported over
// OTLP/HTTP to a collector ([tracing] in the config; off by default):
//
//   - a span for each ingest ("webhookd.ingest", kind server), under the
//     caller's trace when its request carries a W3C traceparent (and
//     tracestate): Handler extracts it;
//   - a span for each attempt ("webhookd.attempt", kind client), the
//     root of a trace of its own (an attempt is a background job,
//     perhaps hours after its ingest, perhaps on another node), linked
//     to the span of the ingest of its event, whose context the event
//     keeps on disk (engine.Event.IngestTrace), so the link survives a
//     restart and a migration;
//   - a span for each commit of the bbolt file's group-commit loop
//     ("webhookd.commit", kind internal), with its batch size and the
//     time it spent writing and fsyncing (ObserveCommit, which main sets
//     as storage.Options.ObserveCommit).
//
// A span shows IDs, the event type, an ingest's outcome, an attempt's
// number, HTTP status, duration and outcome, a commit's batch and times;
// never an event's payload, a secret or token, a custom header's value,
// or anything of the target URL (a path can hold a token). The attribute
// keys are the Attr constants.
//
// # Who imports what
//
// The engine does not import OpenTelemetry, not even its API-only
// package go.opentelemetry.io/otel/trace (which would be acceptable: it
// is a no-op until an SDK is installed). It declares a small hook,
// engine.Tracer (StartIngest, StartAttempt), in its own words, and this
// package implements it: engine stays on the standard library and
// x/time/rate (TestImports), the rule every other dependency follows,
// and what a span may show is decided where the data is (the engine
// hands the tracer only the fields above: engine.AttemptTrace), not in
// a library that sees whole records. storage does not import it either:
// it exposes storage.Options.ObserveCommit, and main passes
// ObserveCommit.
// Only main (and the bench, which wires a node as main does) imports
// this package.
//
// # Cost
//
// Off ([tracing] enabled = false), nothing of this package runs: the
// engine checks a nil Tracer, nothing is stored with an event, no
// header is read. On, spans are batched and exported in the background
// (the SDK's batch processor, which drops spans rather than wait when
// its queue is full: tracing never slows ingest or delivery down to the
// collector's pace), and an event stores its ingest's traceparent (55
// bytes). docs/performance.md has the measured cost.
package tracing

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/storage"
)

// Samplers are the sampler names Config.Sampler takes: those of the
// OpenTelemetry specification's OTEL_TRACES_SAMPLER. The parent-based
// ones follow the caller's sampling decision for an ingest that
// continues its trace; the ratio ones sample Config.Ratio of the traces
// they start (by trace ID, so a whole trace is in or out).
var Samplers = []string{"parentbased_traceidratio", "parentbased_always_on", "parentbased_always_off", "traceidratio", "always_on", "always_off"}

// Config configures New. Every field is required but Headers.
type Config struct {
	// Endpoint is the OTLP/HTTP traces URL of the collector, path
	// included: "http://localhost:4318/v1/traces".
	Endpoint string
	// Headers are sent with every export (an API key a hosted
	// collector wants). Their values are secrets: never logged.
	Headers map[string]string
	// Sampler is one of Samplers; Ratio is the fraction of traces a
	// ratio sampler keeps, from 0 to 1.
	Sampler string
	Ratio   float64
	// ServiceName and ServiceVersion name the process in the traces
	// (the resource's service.name and service.version).
	ServiceName, ServiceVersion string
	// Logger gets the exporter's errors (a collector that cannot be
	// reached), at most one a minute; nil: discarded.
	Logger *slog.Logger
}

// Attribute keys of webhookd's spans. Each span has what issue 34 asks
// of it and little more, set in one call as it ends: every attribute
// costs the SDK a copy and a slot in the map it dedupes them with as the
// span ends, and the OTLP exporter three allocations (its KeyValue,
// AnyValue and the value's wrapper). With fifteen attributes set at
// start and end an attempt's span took 9.2 KB in 44 allocations
// (BenchmarkTracer_Attempt), with six set once 2.3 KB in 15; a traced
// delivery (BenchmarkDispatch_Traced) took 5.6 KB and 54 allocations
// more than an untraced one with eight. What a span leaves out is a link
// or a query away: an attempt's tenant and event type are on its
// ingest's span, its delivery is its event's to its endpoint, the
// endpoint's host is the endpoint's.
const (
	AttrTenant        = "webhookd.tenant.id"
	AttrEventID       = "webhookd.event.id"
	AttrEventType     = "webhookd.event.type"
	AttrEndpointID    = "webhookd.endpoint.id"
	AttrIngestOutcome = "webhookd.ingest.outcome" // accepted, duplicate, or the error's code (engine.Code)
	AttrAttempt       = "webhookd.attempt.number" // 1-based within its cycle
	AttrAttemptMillis = "webhookd.attempt.duration_ms"
	AttrOutcome       = "webhookd.attempt.outcome" // success, retry, permanent (engine.Outcome)
	AttrCommitWrites  = "webhookd.commit.writes"   // the batch: writes committed together
	AttrCommitRefused = "webhookd.commit.refused"  // writes that failed on their own, left out (only when some were)
	AttrCommitPages   = "webhookd.commit.pages"
	AttrCommitSync    = "webhookd.commit.write_sync_ms" // writing the pages and fsyncing the file
	// The OpenTelemetry semantic conventions' HTTP client key.
	AttrStatus = "http.response.status_code"
)

// Span names.
const (
	SpanIngest  = "webhookd.ingest"
	SpanAttempt = "webhookd.attempt"
	SpanCommit  = "webhookd.commit"
)

// Tracer traces one webhookd process. It implements engine.Tracer.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	exported atomic.Int64 // spans handed to the exporter
	failed   atomic.Int64 // of which its export failed
	started  atomic.Int64 // sampled spans started
}

var _ engine.Tracer = (*Tracer)(nil)

// New returns a Tracer exporting to cfg.Endpoint. It dials nothing:
// the first export does, in the background. Shutdown flushes what is
// batched and stops it.
func New(ctx context.Context, cfg Config) (*Tracer, error) {
	sampler, err := newSampler(cfg.Sampler, cfg.Ratio)
	if err != nil {
		return nil, err
	}
	if cfg.Endpoint == "" {
		return nil, errors.New("tracing: no endpoint")
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(cfg.Endpoint)}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: exporter: %w", err)
	}
	t := &Tracer{}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", cfg.ServiceName),
		attribute.String("service.version", cfg.ServiceVersion),
	))
	if err != nil {
		res = resource.NewSchemaless(attribute.String("service.name", cfg.ServiceName), attribute.String("service.version", cfg.ServiceVersion))
	}
	t.provider = sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sampler),
		sdktrace.WithResource(res),
		sdktrace.WithBatcher(countingExporter{exp, t}),
	)
	t.tracer = t.provider.Tracer("github.com/webhookd/webhookd")
	otel.SetErrorHandler(newErrorLog(cfg.Logger))
	return t, nil
}

// newSampler returns the sampler named name with ratio.
func newSampler(name string, ratio float64) (sdktrace.Sampler, error) {
	if !(ratio >= 0 && ratio <= 1) {
		return nil, fmt.Errorf("tracing: sampler ratio %v: must be from 0 to 1", ratio)
	}
	switch name {
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(followIngest{sdktrace.TraceIDRatioBased(ratio)}), nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(followIngest{sdktrace.AlwaysSample()}), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(followIngest{sdktrace.NeverSample()}), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	}
	return nil, fmt.Errorf("tracing: sampler %q: want one of %v", name, Samplers)
}

// followIngest is the root sampler of the parent-based samplers: a span
// without a parent that links to a span (an attempt, linked to its
// event's ingest) follows that span's sampling decision, so that an
// event is traced whole or not at all, its ingest and every attempt of
// it, decided once at ingest (by the caller's traceparent or the ratio).
// Any other root (a commit, an ingest without a traceparent, an attempt
// of an event stored with tracing off) is root's to decide.
type followIngest struct{ root sdktrace.Sampler }

func (f followIngest) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	for _, l := range p.Links {
		if l.SpanContext.IsValid() {
			d := sdktrace.Drop
			if l.SpanContext.IsSampled() {
				d = sdktrace.RecordAndSample
			}
			return sdktrace.SamplingResult{Decision: d, Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
		}
	}
	return f.root.ShouldSample(p)
}

func (f followIngest) Description() string {
	return "FollowIngest{" + f.root.Description() + "}"
}

// Shutdown exports what is batched, within ctx, and stops the Tracer;
// spans started after it are dropped.
func (t *Tracer) Shutdown(ctx context.Context) error {
	return t.provider.Shutdown(ctx)
}

// Flush exports every span ended so far, within ctx.
func (t *Tracer) Flush(ctx context.Context) error {
	return t.provider.ForceFlush(ctx)
}

// Stats are what a Tracer has done since New.
type Stats struct {
	Started  int64 // sampled spans started
	Exported int64 // spans handed to the exporter (a span the batch queue dropped never is)
	Failed   int64 // of those, spans whose export failed
}

// Stats returns the Tracer's counts.
func (t *Tracer) Stats() Stats {
	return Stats{Started: t.started.Load(), Exported: t.exported.Load(), Failed: t.failed.Load()}
}

// Handler passes each request to h with the W3C trace context
// (traceparent, tracestate) of its headers in its context, when it has
// one: the ingest's span continues that trace.
func (t *Tracer) Handler(h http.Handler) http.Handler {
	prop := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Header["Traceparent"]; ok {
			r = r.WithContext(prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		h.ServeHTTP(w, r)
	})
}

// StartIngest starts the span of an ingest (engine.Tracer). Its
// attributes are set once, when it ends (one copy, one dedupe).
func (t *Tracer) StartIngest(ctx context.Context, tenant, eventType string) (context.Context, engine.IngestSpan) {
	ctx, span := t.tracer.Start(ctx, SpanIngest, trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		t.started.Add(1)
	}
	return ctx, ingestSpan{span: span, tenant: tenant, eventType: eventType}
}

type ingestSpan struct {
	span              trace.Span
	tenant, eventType string
}

func (s ingestSpan) TraceParent() string { return TraceParent(s.span.SpanContext()) }

func (s ingestSpan) End(res engine.IngestResult, err error) {
	if s.span.IsRecording() {
		outcome := "accepted"
		switch {
		case err != nil:
			code := engine.ErrorCode(err)
			outcome = string(code)
			if code == engine.CodeInternal || code == engine.CodeUnavailable {
				// The server's failure; a refusal of the request is not
				// (the semantic conventions' rule for 4xx on a server).
				s.span.SetStatus(codes.Error, string(code))
			}
		case res.Duplicate:
			outcome = "duplicate"
		}
		if err != nil {
			s.span.SetAttributes(attribute.String(AttrTenant, s.tenant), attribute.String(AttrEventType, s.eventType), attribute.String(AttrIngestOutcome, outcome))
		} else {
			s.span.SetAttributes(attribute.String(AttrTenant, s.tenant), attribute.String(AttrEventType, s.eventType), attribute.String(AttrIngestOutcome, outcome),
				attribute.String(AttrEventID, res.Event.ID))
		}
	}
	s.span.End()
}

// StartAttempt starts the span of an attempt (engine.Tracer): the root of
// a trace of its own, linked to a.IngestTrace. Its attributes are set
// when it ends.
func (t *Tracer) StartAttempt(ctx context.Context, a engine.AttemptTrace) engine.AttemptSpan {
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindClient)}
	if sc, ok := ParseTraceParent(a.IngestTrace); ok {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	_, span := t.tracer.Start(ctx, SpanAttempt, opts...)
	if span.IsRecording() {
		t.started.Add(1)
	}
	return attemptSpan{span: span, event: a.EventID, endpoint: a.EndpointID}
}

type attemptSpan struct {
	span            trace.Span
	event, endpoint string
}

func (s attemptSpan) TraceParent() string { return TraceParent(s.span.SpanContext()) }

func (s attemptSpan) End(a engine.Attempt, _ engine.State) {
	if s.span.IsRecording() {
		attrs := [6]attribute.KeyValue{
			attribute.String(AttrEventID, s.event),
			attribute.String(AttrEndpointID, s.endpoint),
			attribute.Int(AttrAttempt, a.Number),
			attribute.Float64(AttrAttemptMillis, float64(a.Duration)/float64(time.Millisecond)),
			attribute.String(AttrOutcome, string(a.Outcome)),
		}
		n := 5
		if a.Status != 0 {
			attrs[n] = attribute.Int(AttrStatus, a.Status)
			n++
		}
		s.span.SetAttributes(attrs[:n]...)
		if a.Outcome != engine.OutcomeSuccess {
			// The classification's reason: it names no address the URL
			// does not, and nothing of the body (engine.classify).
			s.span.SetStatus(codes.Error, a.Error)
		}
	}
	s.span.End()
}

// ObserveCommit traces c, one commit of the bbolt file's commit loop:
// main passes it as storage.Options.ObserveCommit. The span runs from the
// commit's start to its end, on the commit loop's clock.
func (t *Tracer) ObserveCommit(c storage.Commit) {
	_, span := t.tracer.Start(context.Background(), SpanCommit, trace.WithNewRoot(), trace.WithTimestamp(c.Start))
	if span.IsRecording() {
		t.started.Add(1)
		attrs := [4]attribute.KeyValue{
			attribute.Int(AttrCommitWrites, c.Writes),
			attribute.Int(AttrCommitPages, c.Pages),
			attribute.Float64(AttrCommitSync, float64(c.WriteSync)/float64(time.Millisecond)),
		}
		n := 3
		if c.Refused > 0 {
			attrs[n] = attribute.Int(AttrCommitRefused, c.Refused)
			n++
		}
		span.SetAttributes(attrs[:n]...)
		if c.Err != nil {
			span.SetStatus(codes.Error, "commit failed")
		}
	}
	span.End(trace.WithTimestamp(c.Start.Add(c.Duration)))
}

// TraceParent returns sc as a W3C traceparent, "" when it is not valid.
func TraceParent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	var b [55]byte
	copy(b[:], "00-")
	tid, sid := sc.TraceID(), sc.SpanID()
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// ParseTraceParent returns the remote span context of a W3C traceparent
// as TraceParent writes it (engine.ValidTraceParent), and whether it is
// one.
func ParseTraceParent(s string) (trace.SpanContext, bool) {
	if !engine.ValidTraceParent(s) {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	hex.Decode(tid[:], []byte(s[3:35]))
	hex.Decode(sid[:], []byte(s[36:52]))
	hex.Decode(flags[:], []byte(s[53:55]))
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]), Remote: true}), true
}

// countingExporter is an exporter that counts what it exports (Stats).
type countingExporter struct {
	sdktrace.SpanExporter
	t *Tracer
}

func (e countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.t.exported.Add(int64(len(spans)))
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		e.t.failed.Add(int64(len(spans)))
	}
	return err
}

// errorLog logs OpenTelemetry's errors (an export that failed), at most
// one a minute, and counts the others.
type errorLog struct {
	log     *slog.Logger
	mu      sync.Mutex
	last    time.Time
	dropped int
}

func newErrorLog(l *slog.Logger) *errorLog {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return &errorLog{log: l}
}

// Handle logs err unless it logged one less than a minute ago. An
// exporter's error names the collector's URL, never the headers.
func (e *errorLog) Handle(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now := time.Now(); now.Sub(e.last) >= time.Minute {
		e.log.Warn("tracing: export failed; spans are dropped until the collector answers", "err", err, "errors_not_logged", e.dropped)
		e.last, e.dropped = now, 0
		return
	}
	e.dropped++
}
