package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiclient "github.com/webhookd/webhookd/client"
	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/storage"
	"github.com/webhookd/webhookd/verify"
)

// Scenario is a named, repeatable run. Its numbers are defaults that the
// Options fields of the same names override.
type Scenario struct {
	Name  string
	About string

	Events    int
	Duration  time.Duration // bound on the load
	Clients   int
	Rate      float64
	Endpoints int
	Faults    string

	// Schedule and AttemptTimeout replace the default retry policy's
	// (in-process only), so that retries happen within the run.
	Schedule       []time.Duration
	AttemptTimeout time.Duration

	// InProcessOnly scenarios stop and restart webhookd.
	InProcessOnly bool
	// NeedsDatabase scenarios run webhookd on PostgreSQL
	// (Options.DatabaseURL).
	NeedsDatabase bool

	// KeepGoneEndpoints runs webhookd with [delivery] disable_on_gone =
	// false: the fault mix's 410s are random, one delivery each, and
	// model a permanent failure of that request, not an endpoint that is
	// gone (which would pause every later delivery of that endpoint).
	KeepGoneEndpoints bool

	run func(*runner) error
}

// compareTracing reports whether sc, with -tracing, compares a traced
// webhookd with an untraced one (tracing.go) rather than trace its own.
func (sc *Scenario) compareTracing() bool {
	return sc.Name == "ingest-only" || sc.Name == "dispatch"
}

// DefaultFaults is mixed-faults' fault mix.
const DefaultFaults = "502:5%,timeout:1%,429:1%,410:0.5%"

// Scenarios are the named runs of `webhookd bench -scenario NAME`.
var Scenarios = []Scenario{
	{
		Name: "ingest-only", About: "durable ingest of 1 KiB events, no endpoints: 64 clients, then 1 client",
		Events: 50000, Duration: time.Minute, Clients: 64,
		run: (*runner).ingestOnly,
	},
	{
		Name: "light", About: "20 events/s to 1 endpoint: end-to-end latency at light load",
		Events: 400, Duration: time.Minute, Clients: 8, Rate: 20, Endpoints: 1,
		run: (*runner).light,
	},
	{
		// 5% over the target's 5 000/s: a paced load's rate from first
		// send to last delivery is always a little under what is offered,
		// so offering exactly 5 000/s could never show 5 000/s.
		Name: "sustained", About: "ingest and delivery at once, 5250 events/s offered by up to 64 clients, 1 endpoint",
		Events: 52500, Duration: time.Minute, Clients: 64, Rate: 5250, Endpoints: 1,
		run: (*runner).sustained,
	},
	{
		Name: "fanout", About: "ingest and delivery at once, each event to 10 endpoints",
		Events: 10000, Duration: time.Minute, Clients: 64, Endpoints: 10,
		run: (*runner).fanout,
	},
	{
		Name: "dispatch", About: "a backlog ingested with the dispatcher stopped, then dispatched to 10 healthy endpoints",
		Events: 10000, Duration: time.Minute, Clients: 64, Endpoints: 10, InProcessOnly: true,
		run: (*runner).dispatch,
	},
	{
		Name: "mixed-faults", About: "receivers failing 5% 502, 1% timeout, 1% 429, 0.5% 410; schedule shortened",
		Events: 5000, Duration: time.Minute, Clients: 64, Endpoints: 4, Faults: DefaultFaults,
		Schedule:          []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond},
		AttemptTimeout:    time.Second,
		KeepGoneEndpoints: true,
		run:               (*runner).mixedFaults,
	},
	{
		Name: "slow-receiver", About: "100 events/s to 10 endpoints, once all healthy, once with one hanging for the whole attempt timeout",
		Events: 2000, Duration: time.Minute, Clients: 64, Rate: 100, Endpoints: 10,
		run: (*runner).slowReceiver,
	},
	{
		Name: "noisy-tenant", About: "100 events/s to a tenant's 10 endpoints, once alone, once beside a tenant with a backlog of 1 000 events to 10 endpoints that all hang",
		Events: 2000, Duration: time.Minute, Clients: 64, Rate: 100, Endpoints: 10, InProcessOnly: true,
		run: (*runner).noisyTenant,
	},
	{
		Name: "ordered", About: "ingest and delivery at once to 1 endpoint answering in 2 ms, with ordering none, key over 1, 10, 100 and 1 000 keys, and endpoint",
		Events: 3000, Duration: 20 * time.Second, Clients: 64, Endpoints: 1, InProcessOnly: true,
		run: (*runner).ordered,
	},
	{
		Name: "cluster", About: "the same load on 1 bbolt node, 1 node on PostgreSQL, 3 nodes on one PostgreSQL schema; then 1 of 3 nodes killed under load",
		Events: 200000, Duration: 10 * time.Second, Clients: 64, Endpoints: 2, InProcessOnly: true, NeedsDatabase: true,
		run: (*runner).cluster,
	},
	{
		Name: "backlog", About: "1 000 000 pending retries: restart recovery time and memory of the timer, then all fire once",
		Events: 1000000, Duration: 10 * time.Minute, Clients: 512, Endpoints: 1, InProcessOnly: true,
		run: (*runner).backlog,
	},
}

// runner runs one scenario.
type runner struct {
	ctx    context.Context
	o      Options // resolved: scenario defaults filled in
	sc     *Scenario
	dir    string
	res    *Result
	faults Faults
	policy engine.RetryPolicy // zero: webhookd's default
	body   []byte
	tenant string
	sent   atomic.Int64 // events acknowledged (backlog: seeded), for progress
	prof   *os.File
	trace  *os.File
	many   bool      // one of several scenarios: profile names get a suffix
	dbPath string    // the last in-process database opened, compacted at the end
	sink   *otlpSink // -tracing: where the in-process webhookd exports its spans
}

// runScenario runs sc in dir and returns its result.
func runScenario(ctx context.Context, o Options, sc *Scenario, dir string, many bool) (*Result, error) {
	o.Events = or(o.Events, sc.Events)
	o.Duration = or(o.Duration, sc.Duration)
	o.Clients = or(o.Clients, sc.Clients)
	o.Rate = or(o.Rate, sc.Rate)
	if o.Rate < 0 {
		o.Rate = 0 // -rate -1: as fast as the clients go
	}
	o.Endpoints = or(o.Endpoints, sc.Endpoints)
	o.EventSize = or(o.EventSize, 1024)
	o.Faults = or(o.Faults, sc.Faults)
	o.Workers = or(o.Workers, 64)
	o.EndpointConcurrency = or(o.EndpointConcurrency, 8)
	o.TenantConcurrency = or(o.TenantConcurrency, max(1, o.Workers*3/4))
	o.Baseline = or(o.Baseline, 3*time.Second)
	o.Drain = or(o.Drain, 2*time.Minute)
	if o.Faults == "none" {
		o.Faults = ""
	}
	faults, err := ParseFaults(o.Faults)
	if err != nil {
		return nil, err
	}
	r := &runner{ctx: ctx, o: o, sc: sc, dir: dir, faults: faults, body: eventBody(o.EventSize), many: many}
	r.tenant = "bench-" + strings.ToLower(rand.Text()[:10])
	if len(sc.Schedule) > 0 {
		r.policy = engine.DefaultRetryPolicy()
		r.policy.Schedule = sc.Schedule
		r.policy.AttemptTimeout = sc.AttemptTimeout
		r.policy.Deadline = time.Minute
	}
	target := "in-process"
	if o.Target != "" {
		target = o.Target
	}
	r.res = &Result{
		Scenario: sc.Name, About: sc.About, Target: target, Started: time.Now().UTC(),
		Settings: Settings{
			Events: o.Events, Clients: o.Clients, Rate: o.Rate, Endpoints: o.Endpoints, EventSize: o.EventSize,
			Faults: faults.String(), Workers: o.Workers, EndpointConcurrency: o.EndpointConcurrency,
			TenantConcurrency: o.TenantConcurrency, Tracing: o.Tracing,
		},
	}
	if r.policy.Deadline != 0 {
		for _, w := range r.policy.Schedule {
			r.res.Settings.Schedule = append(r.res.Settings.Schedule, w.String())
		}
		r.res.Settings.AttemptTimeout = r.policy.AttemptTimeout.String()
		if o.Target != "" {
			r.res.note("the retry schedule is the target's own; for this scenario configure it as %s", strings.Join(r.res.Settings.Schedule, " "))
		}
	}
	if o.Target != "" {
		r.res.note("-target: webhookd's commits, memory and file size are not visible from here; memory is the harness's")
		cleanup, cerr := r.cleanTarget()
		if cerr != nil {
			return r.res, cerr
		}
		defer cleanup()
	}
	if o.Tracing {
		if r.sink, err = newOTLPSink(or(o.TracingRatio, defaultTracingRatio)); err != nil {
			return r.res, err
		}
		defer r.sink.close()
	}
	start := time.Now()
	mem := startMemSampler()
	err = sc.run(r)
	if r.sink != nil {
		r.res.note("%s", r.sink.summary())
	}
	r.stopProfile()
	if err == nil && r.res.Storage != nil && r.dbPath != "" {
		// The scenario closed its database: what would compaction give back?
		if _, after, cerr := storage.Compact(r.dbPath+".compacted", r.dbPath, time.Second); cerr == nil {
			r.res.Storage.CompactedBytes = after
			os.Remove(r.dbPath + ".compacted")
		} else {
			r.res.note("compaction of the file failed: %v", cerr)
		}
	}
	r.res.Memory = mem.finish()
	r.res.Seconds = time.Since(start).Seconds()
	if o.MemProfile != "" {
		if f, ferr := os.Create(suffixed(o.MemProfile, sc.Name, many)); ferr == nil {
			runtime.GC()
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	return r.res, err
}

// cleanTarget returns what removes from -target, after the run, what the
// run adds to it: the scenario's tenant with its endpoints, events and
// deliveries (deleted with ?force=true, since the receivers are gone by
// then), and the event type, unless the target had it before. What it
// could not remove is noted in the result.
func (r *runner) cleanTarget() (func(), error) {
	api := newAPIClient(r.o.Target, r.o.Token, 1)
	c, err := api.client()
	if err != nil {
		return nil, err
	}
	hadType := false
	for et, err := range c.EventTypes(r.ctx, apiclient.ListOptions{}) {
		if err != nil {
			return nil, fmt.Errorf("-target: list event types: %w", err)
		}
		if et.Name == eventType {
			hadType = true
			break
		}
	}
	return func() {
		ctx := context.WithoutCancel(r.ctx)
		_, err := c.DeleteTenant(ctx, r.tenant, true) // its purge goes on in the target
		if apiclient.CodeOf(err) == apiclient.CodeTenantNotFound {
			err = nil // the run failed before it made the tenant
		}
		if err != nil {
			r.res.note("-target: could not delete tenant %s: %v", r.tenant, err)
		}
		if !hadType {
			if err := c.DeleteEventType(ctx, eventType); err != nil {
				r.res.note("-target: could not delete event type %s: %v", eventType, err)
			}
		}
		api.hc.CloseIdleConnections()
	}, nil
}

// or returns v, or def when v is zero.
func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// baselines measures the ceilings: ingest always; in-process, the bbolt
// commit and, when the load can reach it, the durable floor; delivery
// when the scenario has endpoints.
func (r *runner) baselines(endpoints int) error {
	b := &r.res.Baselines
	var err error
	if r.o.Target == "" {
		if b.Commits, b.Commit, err = commitCeiling(r.ctx, r.dir, r.o.Baseline/3); err != nil {
			return fmt.Errorf("commit ceiling: %w", err)
		}
	}
	b.IngestClients = r.o.Clients
	if b.Ingest, err = ingestCeiling(r.ctx, r.o.Clients, r.body, r.o.Baseline); err != nil {
		return fmt.Errorf("ingest ceiling: %w", err)
	}
	// The floor bounds a load as fast as its clients go, or one paced
	// faster than one write per commit keeps up with; below that (light,
	// slow-receiver) it bounds nothing the run shows.
	if r.o.Target == "" && (r.o.Rate == 0 || r.o.Rate > b.Commits) {
		path := filepath.Join(r.dir, "durable-floor.db")
		b.DurableFloor, err = durableFloor(r.ctx, path, r.o.Clients, r.body, r.o.Baseline)
		os.Remove(path)
		if err != nil {
			return fmt.Errorf("durable floor: %w", err)
		}
	}
	if endpoints > 0 {
		b.Endpoints = endpoints
		if b.Delivery, b.Conns, err = deliveryCeiling(r.ctx, r.o.Workers, r.o.EndpointConcurrency, endpoints, r.body, r.o.Baseline); err != nil {
			return fmt.Errorf("delivery ceiling: %w", err)
		}
	}
	return nil
}

// open starts webhookd in-process on the database file name in the
// scenario's directory, or returns the remote target.
// With -tracing it is traced, unless the scenario compares (ingest-only
// and dispatch: their own loads run untraced, then the comparison).
func (r *runner) open(name string, dispatch bool, clockShift time.Duration) (*instance, error) {
	return r.openAt(name, dispatch, clockShift, r.sink != nil && !r.sc.compareTracing())
}

// openTraced is open with tracing on or off, whatever -tracing says.
func (r *runner) openTraced(name string, dispatch, traced bool) (*instance, error) {
	return r.openAt(name, dispatch, 0, traced)
}

func (r *runner) openAt(name string, dispatch bool, clockShift time.Duration, traced bool) (*instance, error) {
	conns := r.o.Clients + 8
	if r.o.Target != "" {
		return remoteInstance(r.o.Target, r.o.Token, conns)
	}
	r.dbPath = filepath.Join(r.dir, name)
	o := instanceOptions{
		path: r.dbPath, dispatch: dispatch, policy: r.policy,
		workers: r.o.Workers, perHost: r.o.EndpointConcurrency, perTenant: r.o.TenantConcurrency, clockShift: clockShift,
		keepGone: r.sc.KeepGoneEndpoints,
	}
	if traced {
		o.traceTo = r.sink
	}
	return openInstance(r.ctx, o, conns)
}

// openWithReceivers starts the scenario's receivers (the first hang of them
// hanging), opens webhookd on file in the scenario's directory, and makes
// the tenant and an endpoint per receiver. On an error it closes what it
// opened; otherwise the caller closes both.
func (r *runner) openWithReceivers(file string, hang int, dispatch bool) (*receiverSet, *instance, error) {
	rs, err := startReceivers(r.o.Endpoints, hang, r.faults)
	if err != nil {
		return nil, nil, err
	}
	in, err := r.open(file, dispatch, 0)
	if err != nil {
		rs.close()
		return nil, nil, err
	}
	if err := r.setup(in, rs); err != nil {
		in.close(time.Second)
		rs.close()
		return nil, nil, err
	}
	return rs, in, nil
}

// setup creates the tenant, the event type and an endpoint per receiver,
// and gives each receiver its endpoint's secret to check signatures with.
func (r *runner) setup(in *instance, rs *receiverSet) error {
	_, err := r.endpoints(in, rs)
	return err
}

// endpoints is setup, returning the endpoints in the receivers' order.
func (r *runner) endpoints(in *instance, rs *receiverSet) ([]endpointInfo, error) {
	var urls []string
	if rs != nil {
		for _, rc := range rs.rs {
			urls = append(urls, rc.url)
		}
	}
	eps, err := in.api.setup(r.ctx, r.tenant, eventType, urls)
	if err != nil {
		return nil, err
	}
	for i, ep := range eps {
		rs.rs[i].verifier.Store(&verify.Verifier{Secrets: []string{ep.Secret}})
	}
	return eps, nil
}

// startProfile starts the CPU profile and the execution trace of the
// measured phase, if asked.
func (r *runner) startProfile() {
	if r.o.Trace != "" && r.trace == nil {
		if f, err := os.Create(suffixed(r.o.Trace, r.sc.Name, r.many)); err != nil {
			r.res.note("trace: %v", err)
		} else if err := trace.Start(f); err != nil {
			f.Close()
			r.res.note("trace: %v", err)
		} else {
			r.trace = f
		}
	}
	if r.o.CPUProfile == "" || r.prof != nil {
		return
	}
	f, err := os.Create(suffixed(r.o.CPUProfile, r.sc.Name, r.many))
	if err != nil {
		r.res.note("cpu profile: %v", err)
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		r.res.note("cpu profile: %v", err)
		return
	}
	r.prof = f
}

func (r *runner) stopProfile() {
	if r.trace != nil {
		trace.Stop()
		r.trace.Close()
		r.trace = nil
	}
	if r.prof == nil {
		return
	}
	pprof.StopCPUProfile()
	r.prof.Close()
	r.prof = nil
}

// spec is the scenario's load with clients clients.
func (r *runner) spec(clients int, events int) loadSpec {
	return loadSpec{tenant: r.tenant, clients: clients, rate: r.o.Rate, events: events, duration: r.o.Duration, body: r.body}
}

// watch prints a progress line every 250ms until the returned func is
// called, when o.Progress is set.
func (r *runner) watch(phase string, in *instance, rs *receiverSet) (stop func()) {
	w := r.o.Progress
	if w == nil {
		return func() {}
	}
	delivered := func() int64 {
		if rs == nil {
			return 0
		}
		return rs.delivered.Load()
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		lastT, lastS, lastD := time.Now(), r.sent.Load(), delivered()
		for {
			select {
			case <-quit:
				fmt.Fprint(w, "\r\033[K")
				return
			case now := <-t.C:
				s, d := r.sent.Load(), delivered()
				dt := now.Sub(lastT).Seconds()
				pending := "?"
				if in != nil && in.pending() >= 0 {
					pending = fmt.Sprint(in.pending())
				}
				fmt.Fprintf(w, "\r\033[K  %s %s: sent %d  delivered %d  pending %s  rate %.0f ev/s in, %.0f/s out",
					r.sc.Name, phase, s, d, pending, float64(s-lastS)/dt, float64(d-lastD)/dt)
				lastT, lastS, lastD = now, s, d
			}
		}
	}()
	return func() { close(quit); <-done }
}

// drain waits until done reports true, for at most timeout. It reports
// whether done did.
func (r *runner) drain(timeout time.Duration, done func() bool) bool {
	deadline := time.Now().Add(timeout)
	for r.ctx.Err() == nil && time.Now().Before(deadline) {
		if done() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return done()
}

// drained is drain's usual condition: in-process, nothing pending in the
// dispatcher; remote, every expected delivery arrived, or none arrived for
// 10s (dead letters never do).
func (r *runner) drained(in *instance, rs *receiverSet, expected int64) func() bool {
	if p := in.pending(); p >= 0 {
		return func() bool { return in.pending() == 0 }
	}
	last, at := int64(-1), time.Now()
	return func() bool {
		n := rs.delivered.Load()
		if n != last {
			last, at = n, time.Now()
		}
		return n >= expected || time.Since(at) > 10*time.Second
	}
}

// ingestStats summarizes a load.
func (r *runner) ingestStats(lr loadResult, clients int) *IngestStats {
	lat := make(latencies, len(lr.acks))
	last := lr.start
	for i, a := range lr.acks {
		lat[i] = a.acked.Sub(a.sent)
		if a.acked.After(last) {
			last = a.acked
		}
	}
	secs := last.Sub(lr.start).Seconds()
	s := &IngestStats{
		Clients: clients, Events: len(lr.acks), Errors: lr.errors, Throttled: lr.throttled,
		Seconds: secs, Latency: lat.summary(),
	}
	if wall := lr.end.Sub(lr.start).Seconds(); wall > 0 {
		s.CPU = lr.cpu.Seconds() / wall
	}
	if secs > 0 {
		s.Rate = float64(len(lr.acks)) / secs
	}
	if r.res.Baselines.Ingest > 0 && r.o.Rate == 0 {
		s.Ratio = s.Rate / r.res.Baselines.Ingest
	}
	if f := r.res.Baselines.DurableFloor; f > 0 {
		s.FloorRatio = s.Rate / f
	}
	if lr.firstErr != nil {
		s.FirstErr = lr.firstErr.Error()
	}
	return s
}

// ingestSeries buckets acknowledgements by second since from.
func ingestSeries(from time.Time, acks []ack) *series {
	s := newSeries(from)
	for _, a := range acks {
		s.add(a.acked, a.acked.Sub(a.sent))
	}
	return s
}

// deliveryStats summarizes what the receivers for which use is true got,
// from from on. With e2e, latency is measured from each event's ack; the
// series is filled in either way.
func (r *runner) deliveryStats(rs *receiverSet, acks []ack, from time.Time, use func(int) bool, e2e bool) (*DeliveryStats, *series) {
	// Delivered counts the acknowledged events only, as Expected does: an
	// event sent as the load window closed may be committed and delivered
	// without its 202 read.
	var acked map[string]bool
	if len(acks) > 0 {
		acked = make(map[string]bool, len(acks))
		for _, a := range acks {
			acked[a.id] = true
		}
	}
	var ackAt map[string]*ack
	if e2e {
		ackAt = make(map[string]*ack, len(acks))
		for i := range acks {
			ackAt[acks[i].id] = &acks[i]
		}
	}
	ser := newSeries(from)
	var lat, fromSend latencies
	last := from
	var n int64
	rs.deliveredTimes(use, func(id string, at time.Time) {
		if acked != nil && !acked[id] {
			return
		}
		n++
		if at.After(last) {
			last = at
		}
		var l time.Duration
		if e2e {
			a, ok := ackAt[id]
			if !ok {
				return
			}
			l = max(0, at.Sub(a.acked)) // the receiver may get it before the client reads the 202
			lat = append(lat, l)
			fromSend = append(fromSend, at.Sub(a.sent))
		}
		ser.add(at, l)
	})
	c := rs.counts(acked)
	d := &DeliveryStats{
		Delivered: c.Delivered, FirstAttempt: c.FirstAttempt, Retried: c.Retried,
		Duplicates: c.Duplicates, Requests: c.Requests, BadSignature: c.BadSignature,
		EndToEnd: lat.summary(), FromSend: fromSend.summary(), Succeeded: -1, Dead: -1, Paused: -1, Pending: -1, Attempts: -1,
		lat: lat,
	}
	for _, a := range acks {
		d.Expected += int64(len(a.deliveries))
	}
	if d.Expected > 0 {
		d.Effective = float64(d.Delivered) / float64(d.Expected)
	}
	if secs := last.Sub(from).Seconds(); secs > 0 {
		d.Seconds = secs
		d.Rate = float64(n) / secs
		if eps := r.o.Endpoints; eps > 0 {
			d.EventRate = d.Rate / float64(eps)
		}
	}
	if r.res.Baselines.Delivery > 0 && r.o.Rate == 0 {
		d.Ratio = d.Rate / r.res.Baselines.Delivery
	}
	return d, ser
}

// maxAudit bounds how many deliveries are read back from webhookd.
const maxAudit = 300000

// audit reads back every delivery of acks from webhookd and counts their
// states and attempts into d.
func (r *runner) audit(in *instance, acks []ack, d *DeliveryStats) {
	var ids []string
	for _, a := range acks {
		ids = append(ids, a.deliveries...)
	}
	if len(ids) > maxAudit {
		r.res.note("webhookd's records not read back: %d deliveries is more than %d", len(ids), maxAudit)
		return
	}
	var succeeded, dead, paused, pending, attempts, failed atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ids) || r.ctx.Err() != nil {
					return
				}
				var state string
				var n int
				var err error
				if in.inProcess() {
					var dl engine.Delivery
					dl, err = in.svc.Delivery(r.ctx, r.tenant, ids[i])
					state, n = string(dl.State), len(dl.Attempts)
				} else {
					state, n, err = in.api.deliveryState(r.ctx, r.tenant, ids[i])
				}
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				attempts.Add(int64(n))
				switch engine.State(state) {
				case engine.StateSucceeded:
					succeeded.Add(1)
				case engine.StateDead:
					dead.Add(1)
				case "paused":
					paused.Add(1)
				default:
					pending.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		r.res.note("%d deliveries could not be read back: %v", failed.Load(), firstErr)
	}
	d.Succeeded, d.Dead, d.Paused, d.Pending, d.Attempts = succeeded.Load(), dead.Load(), paused.Load(), pending.Load(), attempts.Load()
	if d.Paused > 0 {
		r.res.note("%d deliveries paused: webhookd disables an endpoint that answers 410 Gone and holds its later deliveries until it is enabled again", d.Paused)
	}
}

// storageStats returns the commit loop's counters since before.
func storageStats(in *instance, before storage.Stats) *StorageStats {
	if in.db == nil {
		return nil
	}
	s := in.db.Stats()
	st := &StorageStats{
		Commits: s.Commits - before.Commits, Writes: s.Ops - before.Ops,
		FileBytes: in.fileSize(),
	}
	if st.Commits > 0 {
		st.WritesPerCommit = float64(st.Writes) / float64(st.Commits)
		st.MeanCommitMs = ms(s.CommitTime-before.CommitTime) / float64(st.Commits)
		st.MeanWriteMs = ms(s.WriteTime-before.WriteTime) / float64(st.Commits)
		st.PagesPerCommit = float64(s.PagesWritten-before.PagesWritten) / float64(st.Commits)
	}
	return st
}

func dbStats(in *instance) storage.Stats {
	if in.db == nil {
		return storage.Stats{}
	}
	return in.db.Stats()
}

func all(int) bool { return true }

// startCPU starts measuring the process's CPU use; the returned func gives
// the mean number of cores busy since.
func startCPU() func() float64 {
	t0, c0 := time.Now(), cpuTime()
	return func() float64 {
		if wall := time.Since(t0).Seconds(); wall > 0 {
			return (cpuTime() - c0).Seconds() / wall
		}
		return 0
	}
}

// ingestOnly: durable ingest with no endpoints, C clients then one.
func (r *runner) ingestOnly() error {
	if err := r.baselines(0); err != nil {
		return err
	}
	in, err := r.open("webhookd.db", true, 0)
	if err != nil {
		return err
	}
	defer in.close(5 * time.Second)
	if err := r.setup(in, nil); err != nil {
		return err
	}
	before := dbStats(in)
	if !r.o.Schema { // with -schema, the profile is of the comparison
		r.startProfile()
	}
	stop := r.watch("ingest", in, nil)
	lr := runLoad(r.ctx, in.api, r.spec(r.o.Clients, r.o.Events), &r.sent)
	r.res.Ingest = r.ingestStats(lr, r.o.Clients)
	r.res.Storage = storageStats(in, before)
	lr1 := runLoad(r.ctx, in.api, r.spec(1, max(200, min(3000, r.o.Events/20))), &r.sent)
	stop()
	if !r.o.Schema {
		r.stopProfile()
	}
	r.res.IngestSingle = r.ingestStats(lr1, 1)
	r.res.IngestSingle.Ratio, r.res.IngestSingle.FloorRatio = 0, 0
	if r.o.Target == "" {
		// The same one-client load on the durable floor, at once: the
		// part of the one-client latency that is the disk's and the
		// loopback's, not webhookd's.
		flr, err := floorLoad(r.ctx, filepath.Join(r.dir, "durable-floor-1.db"), r.spec(1, len(lr1.acks)))
		if err != nil {
			return err
		}
		fl := r.ingestStats(flr, 1).Latency
		r.res.Baselines.FloorSingle = &fl
	}
	r.res.Series = points(ingestSeries(lr.start, lr.acks), nil)
	if len(lr.acks) == 0 {
		return fmt.Errorf("no event acknowledged: %v", lr.firstErr)
	}

	if r.o.Schema {
		r.startProfile()
		err := r.schemaComparison(in)
		r.stopProfile()
		if err != nil {
			return err
		}
	}
	if r.o.Tracing {
		if err := r.ingestTracing(); err != nil {
			return err
		}
	}

	in64, one := r.res.Ingest, r.res.IngestSingle
	r.res.target("durable ingest rate", fmt.Sprintf("≥ %.0f%% of the durable floor", 100*ingestFloorTarget),
		fmt.Sprintf("%.1f%% (%s of %s ev/s)", 100*in64.FloorRatio, num(in64.Rate), num(r.res.Baselines.DurableFloor)), in64.FloorRatio >= ingestFloorTarget)
	r.res.target(fmt.Sprintf("ingest p99, %d clients", r.o.Clients), "≤ 15 ms", f2(in64.Latency.P99)+" ms", in64.Latency.P99 <= 15)
	if f := r.res.Baselines.FloorSingle; f != nil && f.P99 > 0 {
		r.res.target("ingest p99, 1 client", "≤ 1.5× the durable floor's, 1 client",
			fmt.Sprintf("%s ms = %.2f× (floor %s ms)", f2(one.Latency.P99), one.Latency.P99/f.P99, f2(f.P99)), one.Latency.P99 <= 1.5*f.P99)
	} else {
		r.res.target("ingest p99, 1 client", "≤ 3 ms", f2(one.Latency.P99)+" ms", one.Latency.P99 <= 3)
	}
	return nil
}

// ingestFloorTarget is the share of the durable floor that ingest-only
// must reach; while delivering (fanout), ingest must keep half of it.
const ingestFloorTarget = 0.90

// ingestWhileDelivering sets the targets of ingest during a scenario that
// delivers at the same time: its p99 within 25 ms and, when the clients go
// as fast as they can (not paced), at least half of ingestFloorTarget of
// the same run's durable floor. An application's request path is ingest:
// it must stay fast while webhookd is busy delivering.
func (r *runner) ingestWhileDelivering(paced bool) {
	in := r.res.Ingest
	if in == nil {
		return
	}
	if !paced && in.FloorRatio > 0 {
		r.res.target("ingest rate while delivering", fmt.Sprintf("≥ %.0f%% of the durable floor", 50*ingestFloorTarget),
			fmt.Sprintf("%.1f%% (%s of %s ev/s)", 100*in.FloorRatio, num(in.Rate), num(r.res.Baselines.DurableFloor)), in.FloorRatio >= ingestFloorTarget/2)
	}
	r.res.target("ingest p99 while delivering", "≤ 25 ms", f2(in.Latency.P99)+" ms", in.Latency.P99 <= 25)
}

// ingestAndDeliver is the flow of light, sustained, fanout and
// mixed-faults: receivers, webhookd, a load, then a bounded wait for the
// deliveries.
func (r *runner) ingestAndDeliver() (*DeliveryStats, error) {
	if err := r.baselines(r.o.Endpoints); err != nil {
		return nil, err
	}
	rs, in, err := r.openWithReceivers("webhookd.db", 0, true)
	if err != nil {
		return nil, err
	}
	defer rs.close()
	defer in.close(5 * time.Second)
	before := dbStats(in)
	r.startProfile()
	stop := r.watch("run", in, rs)
	cpu := startCPU()
	lr := runLoad(r.ctx, in.api, r.spec(r.o.Clients, r.o.Events), &r.sent)
	var expected int64
	for _, a := range lr.acks {
		expected += int64(len(a.deliveries))
	}
	ok := r.drain(r.o.Drain, r.drained(in, rs, expected))
	cores := cpu()
	stop()
	r.stopProfile()
	if len(lr.acks) == 0 {
		return nil, fmt.Errorf("no event acknowledged: %v", lr.firstErr)
	}
	r.res.Ingest = r.ingestStats(lr, r.o.Clients)
	r.res.Storage = storageStats(in, before)
	d, ser := r.deliveryStats(rs, lr.acks, lr.start, all, true)
	d.PendingAtEnd, d.CPU = in.pending(), cores
	if !in.inProcess() {
		d.PendingAtEnd = max(0, int(expected-d.Delivered))
	}
	if !ok {
		r.res.note("deliveries still pending after the %s drain", r.o.Drain)
	}
	r.audit(in, lr.acks, d)
	r.res.Delivery = d
	r.res.Series = points(ingestSeries(lr.start, lr.acks), ser)
	return d, nil
}

func (r *runner) light() error {
	d, err := r.ingestAndDeliver()
	if err != nil {
		return err
	}
	r.res.target("end-to-end p50 at 20 events/s", "≤ 5 ms", f2(d.EndToEnd.P50)+" ms", d.EndToEnd.P50 <= 5)
	r.res.target("end-to-end p99 at 20 events/s", "≤ 20 ms", f2(d.EndToEnd.P99)+" ms", d.EndToEnd.P99 <= 20)
	return nil
}

func (r *runner) sustained() error {
	d, err := r.ingestAndDeliver()
	if err != nil {
		return err
	}
	// Sustained: the rate at which events went in and came out, over the
	// whole run (first send to last delivery), when nothing was left.
	r.res.target("events end to end", "≥ 5000 /s", num(d.EventRate)+" /s", d.EventRate >= 4999.5 && d.Delivered == d.Expected)
	r.res.target("end-to-end p99", "≤ 100 ms", f2(d.EndToEnd.P99)+" ms", d.EndToEnd.P99 <= 100)
	r.res.target("pending at the end", "0", fmt.Sprint(d.PendingAtEnd), d.PendingAtEnd == 0 && d.Delivered == d.Expected)
	r.ingestWhileDelivering(r.o.Rate > 0)
	return nil
}

func (r *runner) fanout() error {
	d, err := r.ingestAndDeliver()
	if err != nil {
		return err
	}
	r.res.target("all delivered, none twice", "delivered = expected, 0 duplicates",
		fmt.Sprintf("%d of %d, %d duplicates", d.Delivered, d.Expected, d.Duplicates), d.Delivered == d.Expected && d.Duplicates == 0)
	r.res.target("pending at the end", "0", fmt.Sprint(d.PendingAtEnd), d.PendingAtEnd == 0)
	r.ingestWhileDelivering(r.o.Rate > 0)
	return nil
}

func (r *runner) mixedFaults() error {
	d, err := r.ingestAndDeliver()
	if err != nil {
		return err
	}
	r.res.target("webhookd's count = receivers' count", "succeeded = delivered",
		fmt.Sprintf("%d succeeded, receivers counted %d", d.Succeeded, d.Delivered), d.Succeeded == d.Delivered)
	r.res.target("effective delivery rate", "≥ 99%", fmt.Sprintf("%.3f%%", 100*d.Effective), d.Effective >= 0.99)
	return nil
}

// dispatch: ingest a backlog with no dispatcher, then start one on the
// same file and time how fast it drains to healthy endpoints.
func (r *runner) dispatch() error {
	if err := r.baselines(r.o.Endpoints); err != nil {
		return err
	}
	rs, in, err := r.openWithReceivers("webhookd.db", 0, false)
	if err != nil {
		return err
	}
	defer rs.close()
	stop := r.watch("ingest", in, rs)
	lr := runLoad(r.ctx, in.api, r.spec(r.o.Clients, r.o.Events), &r.sent)
	stop()
	r.res.Ingest = r.ingestStats(lr, r.o.Clients)
	if err := in.close(5 * time.Second); err != nil {
		return err
	}
	if len(lr.acks) == 0 {
		return fmt.Errorf("no event acknowledged: %v", lr.firstErr)
	}

	r.startProfile()
	start, cpu := time.Now(), startCPU()
	in, err = r.open("webhookd.db", true, 0)
	if err != nil {
		return err
	}
	defer in.close(5 * time.Second)
	r.res.note("restart with %d deliveries pending: open %s, recovery %s", in.pending(), in.opened.Round(time.Millisecond), in.recovered.Round(time.Millisecond))
	stop = r.watch("dispatch", in, rs)
	ok := r.drain(r.o.Drain, func() bool { return in.pending() == 0 })
	cores := cpu()
	stop()
	r.stopProfile()
	st := storageStats(in, storage.Stats{})
	d, ser := r.deliveryStats(rs, lr.acks, start, all, false)
	d.PendingAtEnd, d.CPU = in.pending(), cores
	if !ok {
		r.res.note("deliveries still pending after the %s drain", r.o.Drain)
	}
	r.audit(in, lr.acks, d)
	r.res.Delivery, r.res.Storage = d, st
	r.res.Series = points(nil, ser)
	r.res.target("dispatch rate, 10 healthy endpoints", "≥ 50% of the client→204 ceiling",
		fmt.Sprintf("%.1f%% (%s of %s /s)", 100*d.Ratio, num(d.Rate), num(r.res.Baselines.Delivery)), d.Ratio >= 0.50)
	if r.o.Tracing {
		return r.dispatchTracing()
	}
	return nil
}

// slowReceiver runs the same paced load on a fresh webhookd each time,
// alternating all endpoints healthy and the first one hanging on every
// request until the attempt times out, slowRounds times each. It compares
// the healthy endpoints' end-to-end latency, pooled over the rounds so
// that the machine's drift falls on both sides alike.
func (r *runner) slowReceiver() error {
	if r.o.Endpoints < 2 {
		return errors.New("slow-receiver needs at least 2 endpoints")
	}
	if err := r.baselines(r.o.Endpoints); err != nil {
		return err
	}
	phase := func(name string, hang int) (phaseResult, error) {
		rs, in, err := r.openWithReceivers(name+".db", hang, true)
		if err != nil {
			return phaseResult{}, err
		}
		defer rs.close()
		defer in.close(time.Second) // cancels the hanging attempts
		res, err := r.measureHealthy(name, in, rs, hang)
		res.hangingReq = rs.rs[0].requests.Load()
		return res, err
	}
	sl, err := r.compareRounds(
		func(round int) (phaseResult, error) { return phase(fmt.Sprintf("healthy-%d", round), 0) },
		func(round int) (phaseResult, error) { return phase(fmt.Sprintf("hanging-%d", round), 1) })
	if err != nil {
		return err
	}
	r.res.Slow = sl
	r.res.note("delivery figures are the last run with the hanging endpoint; latencies are of the %d healthy endpoints; the hanging one's deliveries stay pending", r.o.Endpoints-1)
	r.res.target("healthy endpoints' p99 with one hanging", "≤ +20%",
		fmt.Sprintf("%+.1f%% (%s → %s ms)", 100*sl.P99Change, f2(sl.Baseline.P99), f2(sl.WithHang.P99)), sl.P99Change <= 0.20)
	return nil
}

// slowRounds is how many times slow-receiver and noisy-tenant run each
// of their two phases.
const slowRounds = 2

// phaseResult is one phase of slow-receiver or noisy-tenant.
type phaseResult struct {
	d          *DeliveryStats // of the healthy endpoints
	ser        *series
	lr         loadResult
	hangingReq int64 // requests the hanging receivers got
}

// measureHealthy runs the scenario's load on in and waits until every
// event reached the healthy receivers of rs (all but the first hang).
func (r *runner) measureHealthy(name string, in *instance, rs *receiverSet, hang int) (phaseResult, error) {
	healthy := func(i int) bool { return i >= hang }
	stop := r.watch(name, in, rs)
	cpu := startCPU()
	lr := runLoad(r.ctx, in.api, r.spec(r.o.Clients, r.o.Events), &r.sent)
	want := int64(len(lr.acks)) * int64(r.o.Endpoints-hang)
	r.drain(r.o.Drain, func() bool {
		var n int64
		for _, rc := range rs.rs[hang:] {
			n += rc.okPairs.Load()
		}
		return n >= want
	})
	cores := cpu()
	stop()
	d, ser := r.deliveryStats(rs, lr.acks, lr.start, healthy, true)
	d.PendingAtEnd, d.CPU = in.pending(), cores
	if len(lr.acks) == 0 {
		return phaseResult{}, fmt.Errorf("no event acknowledged: %v", lr.firstErr)
	}
	return phaseResult{d: d, ser: ser, lr: lr}, nil
}

// compareRounds runs slowRounds rounds of a baseline phase and a
// disturbed one, alternating, pools each's latencies and compares them;
// the last disturbed phase, profiled, gives the report's figures.
func (r *runner) compareRounds(baseline, disturbed func(round int) (phaseResult, error)) (*SlowStats, error) {
	var base, hung latencies
	sl := &SlowStats{Rounds: slowRounds}
	for round := range slowRounds {
		p, err := baseline(round)
		if err != nil {
			return nil, err
		}
		base = append(base, p.d.lat...)
		if round == slowRounds-1 {
			r.startProfile()
		}
		p, err = disturbed(round)
		if err != nil {
			return nil, err
		}
		hung = append(hung, p.d.lat...)
		sl.HangingReq += p.hangingReq
		if round == slowRounds-1 {
			r.stopProfile()
			r.res.Ingest = r.ingestStats(p.lr, r.o.Clients)
			r.res.Delivery = p.d
			r.res.Series = points(ingestSeries(p.lr.start, p.lr.acks), p.ser)
		}
	}
	sl.Baseline, sl.WithHang = base.summary(), hung.summary()
	if sl.Baseline.P99 > 0 {
		sl.P99Change = sl.WithHang.P99/sl.Baseline.P99 - 1
	}
	if sl.Baseline.P50 > 0 {
		sl.P50Change = sl.WithHang.P50/sl.Baseline.P50 - 1
	}
	return sl, nil
}

// noisy-tenant's other tenant: its endpoints, all hanging for the whole
// attempt timeout, and the most events of its backlog (no more than the
// run's own events, so that a small run stays small).
const (
	noisyTenant    = "bench-noisy"
	noisyEndpoints = 10
	noisyBacklog   = 1000
)

// noisyTenant measures a tenant's end-to-end latency alone, and beside
// another tenant with a backlog of deliveries to endpoints that all hang
// (a customer whose receivers are down in the slowest way): more of them
// due than there are workers, each holding its worker for the attempt
// timeout. The dispatcher's tenant turns and tenant_concurrency keep
// workers for the healthy tenant.
func (r *runner) noisyTenant() error {
	if err := r.baselines(r.o.Endpoints); err != nil {
		return err
	}
	phase := func(name string, noisy bool) (phaseResult, error) {
		rs, in, err := r.openWithReceivers(name+".db", 0, true)
		if err != nil {
			return phaseResult{}, err
		}
		defer rs.close()
		defer in.close(time.Second) // cancels the hanging attempts
		var ns *receiverSet
		if noisy {
			if ns, err = r.noisyBacklog(in); err != nil {
				return phaseResult{}, err
			}
			defer ns.close()
		}
		res, err := r.measureHealthy(name, in, rs, 0)
		if ns != nil {
			for _, rc := range ns.rs {
				res.hangingReq += rc.requests.Load()
			}
		}
		return res, err
	}
	sl, err := r.compareRounds(
		func(round int) (phaseResult, error) { return phase(fmt.Sprintf("alone-%d", round), false) },
		func(round int) (phaseResult, error) { return phase(fmt.Sprintf("noisy-%d", round), true) })
	if err != nil {
		return err
	}
	r.res.Noisy = sl
	r.res.note("delivery figures are the last run beside the noisy tenant, of the healthy tenant's %d endpoints; the noisy tenant's deliveries stay pending", r.o.Endpoints)
	r.res.target("healthy tenant's p99 beside a backlogged one", "≤ +20%",
		fmt.Sprintf("%+.1f%% (%s → %s ms)", 100*sl.P99Change, f2(sl.Baseline.P99), f2(sl.WithHang.P99)), sl.P99Change <= 0.20)
	return nil
}

// noisyBacklog makes noisy-tenant's other tenant on in, with endpoints at
// receivers that all hang, sends it its backlog and waits until its
// attempts hold the workers it may have.
func (r *runner) noisyBacklog(in *instance) (*receiverSet, error) {
	ns, err := startReceivers(noisyEndpoints, noisyEndpoints, nil)
	if err != nil {
		return nil, err
	}
	urls := make([]string, len(ns.rs))
	for i, rc := range ns.rs {
		urls[i] = rc.url
	}
	if _, err := in.api.setup(r.ctx, noisyTenant, eventType, urls); err != nil {
		ns.close()
		return nil, err
	}
	backlog := min(noisyBacklog, r.o.Events)
	lr := runLoad(r.ctx, in.api, loadSpec{tenant: noisyTenant, clients: 16, events: backlog, duration: r.o.Duration, body: r.body}, new(atomic.Int64))
	if len(lr.acks) < backlog {
		ns.close()
		return nil, fmt.Errorf("noisy tenant's backlog: %d of %d events acknowledged: %v", len(lr.acks), backlog, lr.firstErr)
	}
	// Its attempts take the workers they may have at once: wait for them.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if in.disp.Stats().InFlight >= min(r.o.TenantConcurrency, noisyEndpoints*r.o.EndpointConcurrency) {
			break
		}
	}
	return ns, nil
}

// backlog seeds Events pending retries (an ingest and a failed first
// attempt each, the next attempt an hour out), restarts webhookd and
// measures how long until it is ready to dispatch and what the timer
// costs in memory; then restarts it with its clock an hour ahead, so that
// every retry falls due, and checks each fires once.
func (r *runner) backlog() error {
	rs, in, err := r.openWithReceivers("webhookd.db", 0, false)
	if err != nil {
		return err
	}
	defer rs.close()

	// Seed through the domain API, as a failed first attempt leaves it.
	n := r.o.Events
	seedStart := time.Now()
	due := seedStart.Add(time.Hour)
	var next atomic.Int64
	var wg sync.WaitGroup
	var seedErr error
	var errOnce sync.Once
	ctx, cancel := context.WithTimeout(r.ctx, r.o.Duration)
	defer cancel()
	stop := r.watch("seed", nil, nil)
	for range r.o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				if err := seedRetry(ctx, in, r.tenant, due.Add(time.Duration(i)*time.Microsecond)); err != nil {
					errOnce.Do(func() { seedErr = err; cancel() })
					return
				}
				r.sent.Add(1)
			}
		}()
	}
	wg.Wait()
	stop()
	seeded := int(r.sent.Load())
	bl := &BacklogStats{Pending: seeded, SeedSeconds: time.Since(seedStart).Seconds()}
	r.res.Backlog = bl
	if err := in.close(5 * time.Second); err != nil {
		return err
	}
	if seedErr != nil {
		return fmt.Errorf("seed: %w", seedErr)
	}
	if seeded < n {
		r.res.note("seeded %d of %d pending retries within %s", seeded, n, r.o.Duration)
	}

	// Restart: time to ready, memory of the timer.
	runtime.GC()
	debug.FreeOSMemory()
	st := procStatus()
	bl.RSSBefore, bl.HeapBefore = st["VmRSS"], heapBytes()
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	start := time.Now()
	in, err = r.open("webhookd.db", true, 0)
	if err != nil {
		return err
	}
	bl.ReadySeconds = time.Since(start).Seconds()
	bl.OpenSeconds, bl.RecoverySeconds = in.opened.Seconds(), in.recovered.Seconds()
	bl.Scheduled = in.disp.Stats().Scheduled
	bl.PeakRSS = procStatus()["VmHWM"]
	runtime.GC()
	st = procStatus()
	bl.RSSAfter, bl.RSSAnonAfter, bl.RSSFileAfter, bl.HeapAfter = st["VmRSS"], st["RssAnon"], st["RssFile"], heapBytes()
	bl.PeakRSS = max(bl.PeakRSS, st["VmHWM"])
	hold := 2 * time.Second // nothing is due for an hour: nothing may fire
	if seeded < 10000 {
		hold = 200 * time.Millisecond
	}
	time.Sleep(hold)
	bl.FiredEarly = rs.rs[0].requests.Load()
	bl.FileBytes = in.fileSize()
	if err := in.close(5 * time.Second); err != nil {
		return err
	}

	// Fire: the clock an hour ahead, every retry is due at once.
	r.startProfile()
	const shift = time.Hour + time.Minute
	rs.shiftClock(shift)
	start, cpu := time.Now(), startCPU()
	in, err = r.open("webhookd.db", true, shift)
	if err != nil {
		return err
	}
	defer in.close(5 * time.Second)
	stop = r.watch("fire", in, rs)
	ok := r.drain(max(r.o.Drain, 10*time.Minute), func() bool { return in.pending() == 0 })
	cores := cpu()
	stop()
	r.stopProfile()
	d, ser := r.deliveryStats(rs, nil, start, all, false)
	d.CPU = cores
	d.Expected = int64(seeded)
	if seeded > 0 {
		d.Effective = float64(d.Delivered) / float64(seeded)
	}
	d.PendingAtEnd = in.pending()
	if !ok {
		r.res.note("retries still pending after the drain")
	}
	r.res.Delivery = d
	r.res.Storage = storageStats(in, storage.Stats{})
	r.res.Series = points(nil, ser)

	r.res.target("memory of 1M pending retries", "peak RSS ≤ 300 MB",
		fmt.Sprintf("%.0f MB peak, %.0f MB settled (%d pending)", float64(bl.PeakRSS)/1e6, float64(bl.RSSAfter)/1e6, bl.Scheduled), bl.PeakRSS <= 300e6)
	r.res.target("restart ready to dispatch", "≤ 5 s", fmt.Sprintf("%.2f s", bl.ReadySeconds), bl.ReadySeconds <= 5)
	r.res.target("no retry fires twice", "each once, none early",
		fmt.Sprintf("%d of %d fired, %d duplicates, %d early", d.Delivered, seeded, d.Duplicates, bl.FiredEarly),
		d.Duplicates == 0 && bl.FiredEarly == 0 && d.Delivered == int64(seeded))
	return nil
}

// seedRetry ingests one small event and records a failed first attempt of
// its delivery, the next attempt due at due.
func seedRetry(ctx context.Context, in *instance, tenant string, due time.Time) error {
	res, err := in.svc.Ingest(ctx, tenant, engine.IngestInput{Type: eventType, Data: json.RawMessage(`{"seeded":true}`)})
	if err != nil {
		return err
	}
	if len(res.Deliveries) != 1 {
		return fmt.Errorf("ingest made %d deliveries, want 1", len(res.Deliveries))
	}
	dl := res.Deliveries[0]
	// Read through the service: it answers once the delivery is written
	// (the store may write it after the answer), as any API read does.
	if _, err := in.svc.Delivery(ctx, tenant, dl.ID); err != nil {
		return err
	}
	now := time.Now().UTC()
	rec := engine.AttemptRecord{
		DeliveryID: dl.ID, Cycle: dl.Cycle,
		Attempt: engine.Attempt{
			Cycle: dl.Cycle, Number: 1, Start: now, Duration: time.Millisecond,
			Status: 503, Error: "HTTP 503", Outcome: engine.OutcomeRetry,
		},
		State: engine.StatePending, NextAttemptAt: due, Reason: "HTTP 503", LastStatus: 503, At: now,
	}
	_, err = in.db.UpdateDelivery(ctx, dl.ID, func(d engine.Delivery) (engine.Delivery, error) { return engine.RecordAttempt(d, rec), nil })
	return err
}
