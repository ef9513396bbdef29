// Package bench is webhookd's throughput harness: `webhookd bench` runs a
// named scenario on this machine (webhookd in-process on a temporary bbolt
// file, or a running webhookd at -target), with loopback receivers and
// concurrent ingest clients, and prints what it measured beside two
// ceilings measured in the same run: a bare net/http server answering 204
// (the loopback ceiling for ingest) and the dispatcher's HTTP client posting
// to bare 204 receivers (the ceiling for delivery). Absolute numbers on a
// shared machine drift from run to run; the ratios to the ceilings drift
// much less, so the targets are stated as ratios.
//
// The receivers count every request per (event id, endpoint) themselves, so
// the effective delivery rate, first-attempt and retry successes and
// duplicates are known independently of webhookd's own records, which are
// read back and reported beside them.
//
// All traffic stays on 127.0.0.1, and every load is bounded in count and
// in time.
package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apiclient "github.com/webhookd/webhookd/client"
)

// Options configure Run. A zero field means the scenario's default.
type Options struct {
	Scenario string // a name from Scenarios, or "all"

	// Target is the base URL of a running webhookd on this machine; ""
	// runs webhookd in-process on a temporary database. Token is its
	// admin token.
	Target string
	Token  string

	Events    int           // events to ingest (backlog: pending retries)
	Duration  time.Duration // bound on the load; it stops at Events or Duration
	Clients   int           // concurrent ingest clients
	Rate      float64       // events/s, paced (open loop); 0: the scenario's; negative: as fast as the clients go
	Endpoints int           // receivers, each an endpoint
	EventSize int           // bytes of each ingest request body
	Faults    string        // receivers' fault mix (see ParseFaults); "none": none
	// Schema makes ingest-only also compare, in one run, the durable
	// ingest of the same events to a type without a schema and to one
	// with a typical JSON Schema (schema.go).
	Schema bool
	// Tracing traces the in-process webhookd as [tracing] on does, at
	// the default sampler, exporting to an OTLP/HTTP sink in the bench
	// (tracing.go); ingest-only and dispatch then also compare, in one
	// run, two webhookds, one traced and one not.
	Tracing bool
	// TracingRatio is -tracing's sampler_ratio; 0: the default,
	// defaultTracingRatio.
	TracingRatio float64

	Workers             int // dispatcher workers (in-process); 0: webhookd's default, 64
	EndpointConcurrency int // per-endpoint attempts in flight (in-process); 0: 8
	TenantConcurrency   int // per-tenant attempts in flight (in-process); 0: three quarters of Workers

	Baseline time.Duration // how long each ceiling is measured; 0: 3s
	Drain    time.Duration // how long to wait for deliveries after the load; 0: 2m
	Dir      string        // where databases go; "": a temporary directory, removed after

	JSON       string // write the report here
	SVG        string // draw throughput and latency over time here
	CPUProfile string // CPU profile of each scenario's measured phase
	Trace      string // execution trace of each scenario's measured phase
	MemProfile string // heap profile at the end of each scenario

	// DatabaseURL is the PostgreSQL server of the cluster scenario, which
	// makes its own schemas there and drops them at the end.
	DatabaseURL string
	// Binary is the webhookd executable the cluster scenario runs as
	// child processes to kill one; "": this process's own.
	Binary string
	// Ordering is the ordering of the cluster scenario's endpoints in
	// its three load phases: "" or "none", "key" (the events over
	// orderedProfiled ordering keys, round-robin) or "endpoint". The kill
	// phase's endpoints are not ordered.
	Ordering string

	// Progress receives a live progress line (with \r); nil: none.
	Progress io.Writer
}

// Main is `webhookd bench`: it parses args, runs the scenario and prints
// the table to stdout.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("webhookd bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	list := fs.Bool("list", false, "list the scenarios and exit")
	fs.StringVar(&o.Scenario, "scenario", "ingest-only", "scenario `name`, or all (see -list)")
	fs.StringVar(&o.Target, "target", "", "base `URL` of a running webhookd on this machine (default: in-process on a temporary database)")
	fs.StringVar(&o.Token, "token", getenv("WEBHOOKD_TOKEN"), "admin `token` of -target (env WEBHOOKD_TOKEN)")
	fs.IntVar(&o.Events, "n", 0, "events to ingest; backlog: pending retries (default: the scenario's)")
	fs.DurationVar(&o.Duration, "d", 0, "stop the load after this `duration` even if -n is not reached (default: the scenario's)")
	fs.IntVar(&o.Clients, "c", 0, "concurrent ingest clients (default: the scenario's)")
	fs.Float64Var(&o.Rate, "rate", 0, "pace ingest at this many events/s (default: the scenario's; -1: as fast as the clients go)")
	fs.IntVar(&o.Endpoints, "endpoints", 0, "loopback receiver endpoints (default: the scenario's)")
	fs.IntVar(&o.EventSize, "size", 0, "bytes of each event's request body (default 1024)")
	fs.BoolVar(&o.Schema, "schema", false, "ingest-only: also ingest -n typical orders to a type without a schema and -n to one with a typical JSON Schema, in alternating rounds, and compare the rates")
	fs.BoolVar(&o.Tracing, "tracing", false, "in-process: trace as [tracing] enabled does, at the default sampler, to an OTLP/HTTP sink in the bench; ingest-only and dispatch compare a traced and an untraced webhookd in alternating rounds")
	fs.Float64Var(&o.TracingRatio, "tracing-ratio", 0, "-tracing's [tracing] sampler_ratio, 0 to 1 (default: the default, 0.1)")
	fs.StringVar(&o.Faults, "fail", "", "receivers' fault `mix`, like 502:5%,timeout:1%,429:1%,410:0.5% (none: no faults)")
	fs.IntVar(&o.Workers, "workers", 0, "dispatcher workers (in-process; default webhookd's, 64)")
	fs.IntVar(&o.EndpointConcurrency, "endpoint-concurrency", 0, "attempts in flight per endpoint (in-process; default webhookd's, 8)")
	fs.IntVar(&o.TenantConcurrency, "tenant-concurrency", 0, "attempts in flight per tenant (in-process; default webhookd's, three quarters of -workers)")
	fs.StringVar(&o.DatabaseURL, "database-url", getenv(DatabaseURLEnv), "PostgreSQL `URL` for the cluster scenario (env "+DatabaseURLEnv+")")
	fs.StringVar(&o.Ordering, "ordering", "", "the cluster scenario's endpoints' `ordering` in its load phases: key (events over 100 ordering keys) or endpoint (default none)")
	fs.DurationVar(&o.Baseline, "baseline", 0, "how long each ceiling is measured (default 3s)")
	fs.DurationVar(&o.Drain, "drain", 0, "how long to wait for deliveries after the load (default 2m)")
	fs.StringVar(&o.Dir, "dir", "", "directory for the databases (default: a temporary one, removed after)")
	fs.StringVar(&o.JSON, "json", "", "write the results as JSON to `file`")
	fs.StringVar(&o.SVG, "svg", "", "draw throughput and p99 latency per second as SVG to `file`")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the measured phase to `file` (with -schema: of the schema comparison)")
	fs.StringVar(&o.MemProfile, "memprofile", "", "write a heap profile at the end to `file`")
	fs.StringVar(&o.Trace, "trace", "", "write an execution trace of the measured phase to `file` (go tool trace)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return UsageError{err}
	}
	if fs.NArg() > 0 {
		return UsageError{fmt.Errorf("bench: unexpected argument %q", fs.Arg(0))}
	}
	if *list {
		for _, sc := range Scenarios {
			fmt.Fprintf(stdout, "%-14s %s\n", sc.Name, sc.About)
		}
		return nil
	}
	if isTerminal(stdout) {
		o.Progress = stdout
	}
	_, err := Run(ctx, o, stdout)
	return err
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Run runs the scenario(s) o names, prints each table to out, and writes
// the files o asks for. It returns the report even when a scenario failed
// (with the runs that finished).
func Run(ctx context.Context, o Options, out io.Writer) (*Report, error) {
	var scs []*Scenario
	if o.Scenario == "all" {
		for i := range Scenarios {
			if Scenarios[i].InProcessOnly && o.Target != "" {
				continue
			}
			if Scenarios[i].NeedsDatabase && o.DatabaseURL == "" {
				fmt.Fprintf(out, "webhookd bench: skipping %s: it needs -database-url or %s\n", Scenarios[i].Name, DatabaseURLEnv)
				continue
			}
			scs = append(scs, &Scenarios[i])
		}
	} else {
		sc := scenario(o.Scenario)
		if sc == nil {
			names := make([]string, len(Scenarios))
			for i, s := range Scenarios {
				names[i] = s.Name
			}
			return nil, UsageError{fmt.Errorf("bench: no scenario %q; have %s, all", o.Scenario, strings.Join(names, ", "))}
		}
		if sc.InProcessOnly && o.Target != "" {
			return nil, fmt.Errorf("bench: scenario %s needs webhookd in-process (it stops and restarts it); drop -target", sc.Name)
		}
		if sc.NeedsDatabase && o.DatabaseURL == "" {
			return nil, fmt.Errorf("bench: %w", errNoDatabase)
		}
		scs = append(scs, sc)
	}
	switch o.Ordering {
	case "", "none", string(apiclient.OrderingKey), string(apiclient.OrderingEndpoint):
	default:
		return nil, fmt.Errorf("bench: -ordering %q: want none, key or endpoint", o.Ordering)
	}
	if o.TracingRatio < 0 || o.TracingRatio > 1 || o.TracingRatio > 0 && !o.Tracing {
		return nil, UsageError{errors.New("bench: -tracing-ratio is -tracing's sampler ratio, from 0 to 1")}
	}
	if o.Tracing && o.Target != "" {
		return nil, UsageError{errors.New("bench: -tracing traces the in-process webhookd; drop -target (trace a running one with its own [tracing])")}
	}
	if o.Faults != "" && o.Faults != "none" {
		if _, err := ParseFaults(o.Faults); err != nil {
			return nil, fmt.Errorf("bench: -fail: %w", err)
		}
	}
	dir := o.Dir
	var err error
	if dir == "" {
		if dir, err = os.MkdirTemp("", "webhookd-bench-"); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	rep := &Report{Machine: machine(), Started: time.Now().UTC()}
	fmt.Fprintf(out, "webhookd bench: %d cores (GOMAXPROCS %d), %s, %s %s\n",
		rep.Machine.Cores, rep.Machine.GOMAXPROCS, rep.Machine.CPU, rep.Machine.GoVersion, rep.Machine.OS)
	var errs []error
	for _, sc := range scs {
		if ctx.Err() != nil {
			break
		}
		sub := filepath.Join(dir, sc.Name)
		if err := os.MkdirAll(sub, 0o700); err != nil {
			return rep, fmt.Errorf("bench: %w", err)
		}
		res, err := runScenario(ctx, o, sc, sub, len(scs) > 1)
		if res != nil {
			rep.Runs = append(rep.Runs, res)
			printResult(out, rep.Machine, res)
			if o.SVG != "" {
				if err := writeSVG(suffixed(o.SVG, sc.Name, len(scs) > 1), res); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if err != nil {
			fmt.Fprintf(out, "  FAILED: %v\n", err)
			errs = append(errs, fmt.Errorf("%s: %w", sc.Name, err))
		}
		os.RemoveAll(sub)
	}
	if len(rep.Runs) > 1 {
		printSummary(out, rep)
	}
	if o.JSON != "" {
		if err := writeJSON(o.JSON, rep); err != nil {
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

// suffixed inserts "-name" before path's extension when many is set, so
// that each scenario of "all" gets its own file.
func suffixed(path, name string, many bool) string {
	if !many {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-" + name + ext
}

// scenario returns the scenario called name, or nil.
func scenario(name string) *Scenario {
	i := slices.IndexFunc(Scenarios, func(s Scenario) bool { return s.Name == name })
	if i < 0 {
		return nil
	}
	return &Scenarios[i]
}

// UsageError is a command line Main cannot take: an unknown flag, a
// flag's bad value, an extra argument. webhookd exits 2 for it, as for
// its own (UsageError reports true).
type UsageError struct{ Err error }

func (e UsageError) Error() string    { return e.Err.Error() }
func (e UsageError) Unwrap() error    { return e.Err }
func (e UsageError) UsageError() bool { return true }
