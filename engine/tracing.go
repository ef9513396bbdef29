package engine

import "context"

// Tracer is told of each ingest and each attempt, to trace them (package
// tracing implements it over OpenTelemetry, and main sets it when
// [tracing] is on: NodeOptions.Tracer). The engine imports no tracing
// library: it says when a span starts and ends and what it may show, and
// stores the ingest's span context with its event (Event.IngestTrace), so
// that each attempt, a background job in a trace of its own, links to the
// ingest that made it, across restarts. Nil: nothing is traced, and
// nothing of it is stored or sent.
//
// What the engine hands a Tracer is all a span may show: IDs, the event
// type, counts, the attempt's status, duration and outcome. Never the
// payload, a secret, a custom header's value, or anything of the
// endpoint's URL (a path can hold a token:
// https://hooks.example.com/services/T0/B0/secret).
//
// Its methods run on the request's goroutine (StartIngest) and on a
// worker (StartAttempt): they must be fast and must not block.
type Tracer interface {
	// StartIngest starts the span of one ingest of an event of
	// eventType for tenant, under the caller's trace when ctx carries
	// one (the W3C traceparent of its request, extracted by main). It
	// returns the context the ingest goes on in, and the span.
	StartIngest(ctx context.Context, tenant, eventType string) (context.Context, IngestSpan)
	// StartAttempt starts the span of one attempt: the root of a trace
	// of its own, linked to the span of the ingest of its event
	// (a.IngestTrace) when there is one.
	StartAttempt(ctx context.Context, a AttemptTrace) AttemptSpan
}

// IngestSpan is the span of one ingest (Tracer.StartIngest).
type IngestSpan interface {
	// TraceParent is the span's context as a W3C traceparent
	// ("00-<trace id>-<span id>-<flags>"), stored with the event
	// (Event.IngestTrace); "" when it has none.
	TraceParent() string
	// End ends the span with what the ingest did: res when err is nil
	// (an idempotent repeat has res.Duplicate), else its error.
	End(res IngestResult, err error)
}

// AttemptSpan is the span of one attempt (Tracer.StartAttempt).
type AttemptSpan interface {
	// TraceParent is the span's context as a W3C traceparent, sent to
	// the receiver when its endpoint asks for it
	// (Endpoint.SendTraceparent); "" when it has none.
	TraceParent() string
	// End ends the span with the attempt as made: its status,
	// duration and outcome, and state, what its delivery moves to.
	End(a Attempt, state State)
}

// AttemptTrace is what the span of an attempt may show.
type AttemptTrace struct {
	TenantID, EventID, EventType, DeliveryID, EndpointID string
	Cycle, Number                                        int // the attempt's (Attempt.Cycle, Attempt.Number)
	// IngestTrace is the traceparent of the ingest of the event
	// (Event.IngestTrace): the span to link to; "" for none.
	IngestTrace string
}

// traceIngest is Ingest, traced: the ingest's span continues the
// caller's trace in ctx, and its context is stored with the event.
func (s *Service) traceIngest(ctx context.Context, tenant string, in IngestInput) (IngestResult, error) {
	ctx, span := s.opts.Tracer.StartIngest(ctx, tenant, in.Type)
	res, err := func() (IngestResult, error) {
		ne, err := s.prepare(tenant, in)
		if err != nil {
			return IngestResult{}, err
		}
		if tp := span.TraceParent(); ValidTraceParent(tp) {
			ne.Event.IngestTrace = tp
		}
		return s.appendEvent(ctx, tenant, ne, nil)
	}()
	span.End(res, err)
	return res, err
}

// startAttemptSpan starts the span of the attempt rec of in, or returns
// nil when the dispatcher has no Tracer.
func (d *Dispatcher) startAttemptSpan(ctx context.Context, in *AttemptInput, rec *AttemptRecord) AttemptSpan {
	if d.opts.Tracer == nil {
		return nil
	}
	dl := in.Delivery
	a := AttemptTrace{
		TenantID: dl.TenantID, EventID: dl.EventID, EventType: dl.EventType, DeliveryID: dl.ID, EndpointID: dl.EndpointID,
		Cycle: rec.Attempt.Cycle, Number: rec.Attempt.Number,
		IngestTrace: in.IngestTrace,
	}
	return d.opts.Tracer.StartAttempt(ctx, a)
}

// ValidTraceParent reports whether s is a W3C traceparent of version 00
// with a trace ID and a span ID that are not zero:
// "00-" 32 lower-case hex digits "-" 16 "-" 2. It is what a store keeps
// as Event.IngestTrace.
func ValidTraceParent(s string) bool {
	if len(s) != 55 || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return false
	}
	hex := func(h string) (nonZero bool, ok bool) {
		for i := 0; i < len(h); i++ {
			c := h[i]
			switch {
			case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
			default:
				return false, false
			}
			nonZero = nonZero || c != '0'
		}
		return nonZero, true
	}
	traceID, ok1 := hex(s[3:35])
	spanID, ok2 := hex(s[36:52])
	_, ok3 := hex(s[53:55])
	return ok1 && ok2 && ok3 && traceID && spanID
}
