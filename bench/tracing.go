package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webhookd/webhookd/tracing"
)

// otlpSink is the collector of a run with -tracing: an OTLP/HTTP traces
// endpoint on 127.0.0.1 that reads every export and answers it as a
// collector does (200, an empty ExportTraceServiceResponse), counting
// requests and bytes without decoding them, so the bench measures what
// webhookd spends on tracing (spans, batching, protobuf, the HTTP
// export) and little of a collector's own work. The in-process webhookd
// exports to it at the default sampler (parent-based, a tenth of the
// events traced, each whole), as [tracing] enabled = true would.
type otlpSink struct {
	srv      *http.Server
	url      string
	ratio    float64 // the sampler's
	requests atomic.Int64
	bytes    atomic.Int64

	mu    sync.Mutex
	spans tracing.Stats // of every tracer closed so far
}

// defaultTracingRatio is [tracing] sampler_ratio by default (main's
// DefaultTracingRatio, which says why).
const defaultTracingRatio = 0.1

func newOTLPSink(ratio float64) (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{url: "http://" + ln.Addr().String() + "/v1/traces", ratio: ratio}
	s.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := io.Copy(io.Discard, r.Body)
			s.requests.Add(1)
			s.bytes.Add(n)
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(http.StatusOK) // an empty body: the empty response message
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          discardLog,
	}
	go s.srv.Serve(ln)
	return s, nil
}

// tracer returns a Tracer exporting to the sink with [tracing]'s
// defaults, but the ratio -tracing-ratio sets.
func (s *otlpSink) tracer(ctx context.Context) (*tracing.Tracer, error) {
	return tracing.New(ctx, tracing.Config{
		Endpoint: s.url, Sampler: "parentbased_traceidratio", Ratio: s.ratio,
		ServiceName: "webhookd-bench", ServiceVersion: "bench",
	})
}

// done shuts tr down (its last spans exported) and adds its counts.
func (s *otlpSink) done(tr *tracing.Tracer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr.Shutdown(ctx)
	st := tr.Stats()
	s.mu.Lock()
	s.spans.Started += st.Started
	s.spans.Exported += st.Exported
	s.spans.Failed += st.Failed
	s.mu.Unlock()
}

// summary says what was traced and exported.
func (s *otlpSink) summary() string {
	s.mu.Lock()
	st := s.spans
	s.mu.Unlock()
	return fmt.Sprintf("-tracing: %d spans started, %d exported (%d failed) in %d requests, %.1f MiB, to the bench's OTLP/HTTP sink; sampler parentbased_traceidratio, ratio %g",
		st.Started, st.Exported, st.Failed, s.requests.Load(), float64(s.bytes.Load())/(1<<20), s.ratio)
}

func (s *otlpSink) close() {
	s.srv.Close()
}

// -tracing's comparison, in ingest-only and dispatch: what [tracing]
// costs, measured in one run. Two fresh webhookds in this process, one
// traced (exporting to the sink) and one not, take the same load in
// alternating rounds, each first in half of them, so that the machine's
// drift and the files' growth fall on both alike; each side's rate is
// its work over the time of its own rounds. The other scenarios, with
// -tracing, trace their one webhookd.

// tracingRounds is how many rounds each side of the comparison runs.
const tracingRounds = 8

// tracingTarget is the share of the rate without tracing that the rate
// with it must keep (issue 34: within 10%).
const tracingTarget = 0.90

// TracingStats is -tracing's comparison.
type TracingStats struct {
	Rounds int `json:"rounds"`
	// Without and With are ingest-only's sides.
	Without *IngestStats `json:"ingest_without,omitempty"`
	With    *IngestStats `json:"ingest_with,omitempty"`
	// DispatchWithout and DispatchWith are dispatch's sides.
	DispatchWithout *DispatchSide `json:"dispatch_without,omitempty"`
	DispatchWith    *DispatchSide `json:"dispatch_with,omitempty"`
	// Ratio is the rate with tracing over the rate without.
	Ratio float64 `json:"ratio"`
	// CPUWithout and CPUWith are the process's CPU per event (ingest)
	// or per delivery (dispatch), in µs, over each side's rounds (the
	// harness's part included, alike on both sides). CPURatio is
	// CPUWithout / CPUWith: the rate tracing keeps where the CPU is the
	// bound, which the machine's load moves less than the rate.
	CPUWithout float64 `json:"cpu_us_per_op_without"`
	CPUWith    float64 `json:"cpu_us_per_op_with"`
	CPURatio   float64 `json:"cpu_ratio"`
}

// DispatchSide is one side of dispatch's comparison: backlogs drained.
type DispatchSide struct {
	Deliveries int64   `json:"deliveries"`
	Seconds    float64 `json:"seconds"`
	Rate       float64 `json:"deliveries_per_second"`
	CPU        float64 `json:"cpu_cores"`
}

// tracingOrder returns the order of the sides in round i: untraced
// first in the even rounds, traced first in the odd ones.
func tracingOrder(i int) []bool {
	if i%2 == 1 {
		return []bool{true, false}
	}
	return []bool{false, true}
}

// ingestTracing is ingest-only's comparison: the run's clients, each
// side all the run's events, in tracingRounds rounds.
func (r *runner) ingestTracing() error {
	sides := map[bool]*instance{}
	for _, traced := range []bool{false, true} {
		in, err := r.openTraced(fmt.Sprintf("tracing-%v.db", traced), true, traced)
		if err != nil {
			return err
		}
		defer in.close(5 * time.Second)
		if err := r.setup(in, nil); err != nil {
			return err
		}
		sides[traced] = in
	}
	per := max(100, r.o.Events/tracingRounds)
	rounds := map[bool][]loadResult{}
	for i := range tracingRounds {
		for _, traced := range tracingOrder(i) {
			lr := runLoad(r.ctx, sides[traced].api, r.spec(r.o.Clients, per), &r.sent)
			if len(lr.acks) == 0 {
				return fmt.Errorf("tracing comparison (traced %v): no event acknowledged: %v", traced, lr.firstErr)
			}
			rounds[traced] = append(rounds[traced], lr)
		}
	}
	t := &TracingStats{Rounds: tracingRounds, Without: r.roundsStats(rounds[false]), With: r.roundsStats(rounds[true])}
	if t.Without.Rate > 0 {
		t.Ratio = t.With.Rate / t.Without.Rate
	}
	cpuPer := func(lrs []loadResult) float64 {
		var cpu time.Duration
		n := 0
		for _, lr := range lrs {
			cpu += lr.cpu
			n += len(lr.acks)
		}
		return float64(cpu.Microseconds()) / float64(max(1, n))
	}
	t.setCPU(cpuPer(rounds[false]), cpuPer(rounds[true]))
	r.res.Tracing = t
	r.tracingTarget("ingest with tracing on", t)
	return nil
}

// dispatchTracing is dispatch's comparison: each side's file gets a
// backlog of the run's events over tracingRounds rounds, ingested with
// no dispatcher, then drained by a dispatcher started on it (its
// recovery included, as the scenario's), to receivers of its own.
func (r *runner) dispatchTracing() error {
	type side struct {
		file   string
		rs     *receiverSet
		set    bool // its tenant and endpoints are made
		d      DispatchSide
		cpu    time.Duration
		traced bool
	}
	sides := map[bool]*side{}
	for _, traced := range []bool{false, true} {
		rs, err := startReceivers(r.o.Endpoints, 0, r.faults)
		if err != nil {
			return err
		}
		defer rs.close()
		sides[traced] = &side{file: fmt.Sprintf("tracing-%v.db", traced), rs: rs, traced: traced}
	}
	per := max(100, r.o.Events/tracingRounds)
	round := func(s *side) error {
		in, err := r.openTraced(s.file, false, s.traced)
		if err != nil {
			return err
		}
		if !s.set {
			if err := r.setup(in, s.rs); err != nil {
				in.close(time.Second)
				return err
			}
			s.set = true
		}
		lr := runLoad(r.ctx, in.api, r.spec(r.o.Clients, per), &r.sent)
		if err := in.close(5 * time.Second); err != nil {
			return err
		}
		if len(lr.acks) == 0 {
			return fmt.Errorf("tracing comparison (traced %v): no event acknowledged: %v", s.traced, lr.firstErr)
		}
		start, cpu0 := time.Now(), cpuTime()
		if in, err = r.openTraced(s.file, true, s.traced); err != nil {
			return err
		}
		ok := r.drain(r.o.Drain, func() bool { return in.pending() == 0 })
		secs, cpu := time.Since(start).Seconds(), cpuTime()-cpu0
		pending := in.pending()
		if err := in.close(5 * time.Second); err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("tracing comparison (traced %v): %d deliveries still pending after %s", s.traced, pending, r.o.Drain)
		}
		s.d.Deliveries += int64(len(lr.acks) * r.o.Endpoints)
		s.d.Seconds += secs
		s.cpu += cpu
		return nil
	}
	for i := range tracingRounds {
		for _, traced := range tracingOrder(i) {
			if err := round(sides[traced]); err != nil {
				return err
			}
		}
	}
	t := &TracingStats{Rounds: tracingRounds}
	for _, s := range sides {
		if s.d.Seconds > 0 {
			s.d.Rate = float64(s.d.Deliveries) / s.d.Seconds
			s.d.CPU = s.cpu.Seconds() / s.d.Seconds
		}
	}
	t.DispatchWithout, t.DispatchWith = &sides[false].d, &sides[true].d
	if t.DispatchWithout.Rate > 0 {
		t.Ratio = t.DispatchWith.Rate / t.DispatchWithout.Rate
	}
	per1 := func(s *side) float64 { return float64(s.cpu.Microseconds()) / float64(max(1, s.d.Deliveries)) }
	t.setCPU(per1(sides[false]), per1(sides[true]))
	r.res.Tracing = t
	r.tracingTarget("dispatch with tracing on", t)
	return nil
}

// setCPU sets the CPU per operation of both sides and their ratio.
func (t *TracingStats) setCPU(without, with float64) {
	t.CPUWithout, t.CPUWith = without, with
	if with > 0 {
		t.CPURatio = without / with
	}
}

// tracingTarget checks the comparison's rate against tracingTarget.
func (r *runner) tracingTarget(name string, t *TracingStats) {
	r.res.target(name, fmt.Sprintf("≥ %.0f%% of the rate without", 100*tracingTarget),
		fmt.Sprintf("%.1f%% (CPU per op %.1f → %.1f µs: %.1f%%)", 100*t.Ratio, t.CPUWithout, t.CPUWith, 100*t.CPURatio), t.Ratio >= tracingTarget)
}
