package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the JSON file -json writes: every scenario run in one
// invocation.
type Report struct {
	Machine Machine   `json:"machine"`
	Started time.Time `json:"started"`
	Runs    []*Result `json:"runs"`
}

// Result is one scenario's run.
type Result struct {
	Scenario string    `json:"scenario"`
	About    string    `json:"about"`
	Target   string    `json:"target"` // "in-process" or the URL
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"` // the whole scenario, baselines included
	Settings Settings  `json:"settings"`

	Baselines    Baselines      `json:"baselines"`
	Ingest       *IngestStats   `json:"ingest,omitempty"`
	IngestSingle *IngestStats   `json:"ingest_single_client,omitempty"`
	Delivery     *DeliveryStats `json:"delivery,omitempty"`
	Storage      *StorageStats  `json:"storage,omitempty"`
	Memory       Memory         `json:"memory"`
	Backlog      *BacklogStats  `json:"backlog,omitempty"`
	Slow         *SlowStats     `json:"slow_receiver,omitempty"`
	Noisy        *SlowStats     `json:"noisy_tenant,omitempty"`
	Cluster      *ClusterStats  `json:"cluster,omitempty"`
	Ordered      *OrderedStats  `json:"ordered,omitempty"`
	Schema       *SchemaStats   `json:"schema,omitempty"`
	Tracing      *TracingStats  `json:"tracing,omitempty"`
	Series       []Point        `json:"series,omitempty"`
	Targets      []Target       `json:"targets,omitempty"`
	Notes        []string       `json:"notes,omitempty"`
}

// Settings are the resolved knobs of a run.
type Settings struct {
	Events              int      `json:"events"`
	Clients             int      `json:"clients"`
	Rate                float64  `json:"rate,omitempty"`
	Endpoints           int      `json:"endpoints"`
	EventSize           int      `json:"event_size"`
	Faults              string   `json:"faults,omitempty"`
	Workers             int      `json:"workers"`
	EndpointConcurrency int      `json:"endpoint_concurrency"`
	TenantConcurrency   int      `json:"tenant_concurrency"`
	Schedule            []string `json:"schedule,omitempty"`
	AttemptTimeout      string   `json:"attempt_timeout,omitempty"`
	Tracing             bool     `json:"tracing,omitempty"` // -tracing: [tracing] on, exporting to the bench's sink
}

// IngestStats is one ingest load.
type IngestStats struct {
	Clients   int     `json:"clients"`
	Events    int     `json:"events"` // acknowledged
	Errors    int64   `json:"errors"`
	Throttled int64   `json:"throttled"`
	Seconds   float64 `json:"seconds"`
	Rate      float64 `json:"events_per_second"`
	Ratio     float64 `json:"ratio_to_ceiling,omitempty"` // Rate / Baselines.Ingest; 0 for a paced load
	// FloorRatio is Rate / Baselines.DurableFloor: the share of what any
	// bbolt-backed durable ingest reaches here that webhookd reached (a
	// paced load: the share its pace took). 0: the floor was not measured.
	FloorRatio float64 `json:"ratio_to_durable_floor,omitempty"`
	Latency    Latency `json:"latency"`
	CPU        float64 `json:"cpu_cores"` // process CPU time / wall time (harness included); of Machine.Cores
	FirstErr   string  `json:"first_error,omitempty"`
}

// DeliveryStats is what reached the receivers, counted by them, and what
// webhookd recorded.
type DeliveryStats struct {
	Expected     int64   `json:"expected"`  // deliveries webhookd created
	Delivered    int64   `json:"delivered"` // distinct (event, endpoint) the receivers answered 2xx
	FirstAttempt int64   `json:"first_attempt"`
	Retried      int64   `json:"retry_successes"`
	Duplicates   int64   `json:"duplicates"`
	Requests     int64   `json:"requests"`
	BadSignature int64   `json:"bad_signatures"`
	Effective    float64 `json:"effective_rate"` // Delivered / Expected
	Seconds      float64 `json:"seconds"`
	CPU          float64 `json:"cpu_cores"` // process CPU time / wall time over Seconds (harness included)
	Rate         float64 `json:"deliveries_per_second"`
	Ratio        float64 `json:"ratio_to_ceiling,omitempty"`
	EventRate    float64 `json:"events_per_second_end_to_end,omitempty"`
	EndToEnd     Latency `json:"end_to_end"`       // ingest ack → receiver got it (0 when it got it first)
	FromSend     Latency `json:"send_to_receiver"` // ingest request sent → receiver got it
	PendingAtEnd int     `json:"pending_at_end"`
	// Webhookd's own records, read back after the run (-1: not read).
	Succeeded int64 `json:"webhookd_succeeded"`
	Dead      int64 `json:"webhookd_dead"`
	Paused    int64 `json:"webhookd_paused"` // endpoint disabled (a 410 disables it)
	Pending   int64 `json:"webhookd_pending"`
	Attempts  int64 `json:"webhookd_attempts"`

	lat latencies // the end-to-end latencies, for pooling
}

// StorageStats are the commit loop's counters over the measured phase.
type StorageStats struct {
	Commits         uint64  `json:"commits"`
	Writes          uint64  `json:"writes"`
	WritesPerCommit float64 `json:"writes_per_commit"`
	MeanCommitMs    float64 `json:"mean_commit_ms"`
	MeanWriteMs     float64 `json:"mean_write_ms"`    // of a commit, writing its pages and syncing the file
	PagesPerCommit  float64 `json:"pages_per_commit"` // pages written by a commit
	FileBytes       int64   `json:"file_bytes"`
	CompactedBytes  int64   `json:"compacted_bytes"` // the file after `webhookd compact`
}

// BacklogStats is the backlog scenario: pending retries in the timer and a
// restart.
type BacklogStats struct {
	Pending         int     `json:"pending_retries"`
	SeedSeconds     float64 `json:"seed_seconds"`
	OpenSeconds     float64 `json:"open_seconds"`     // storage.Open
	RecoverySeconds float64 `json:"recovery_seconds"` // Dispatcher.Start
	ReadySeconds    float64 `json:"ready_seconds"`    // both: restart until ready to dispatch
	Scheduled       int     `json:"scheduled_after_recovery"`
	RSSBefore       uint64  `json:"rss_before_bytes"`
	RSSAfter        uint64  `json:"rss_after_bytes"`
	RSSAnonAfter    uint64  `json:"rss_anon_after_bytes"`
	RSSFileAfter    uint64  `json:"rss_file_after_bytes"`
	PeakRSS         uint64  `json:"peak_rss_bytes"` // VmHWM from before the restart to after recovery
	HeapBefore      uint64  `json:"heap_before_bytes"`
	HeapAfter       uint64  `json:"heap_after_bytes"`
	FiredEarly      int64   `json:"fired_early"` // requests while every retry was an hour out
	FileBytes       int64   `json:"file_bytes"`
}

// SlowStats compares the healthy endpoints' latency without and with one
// endpoint hanging (slow-receiver), or the healthy tenant's without and
// with a tenant whose endpoints all hang beside it (noisy-tenant).
type SlowStats struct {
	Rounds     int     `json:"rounds"` // of each phase, alternating; latencies pooled
	Baseline   Latency `json:"baseline"`
	WithHang   Latency `json:"with_hang"`
	P99Change  float64 `json:"p99_change"` // (with − baseline) / baseline
	P50Change  float64 `json:"p50_change"`
	HangingReq int64   `json:"hanging_requests"`
}

// Target is one of the targets, checked.
type Target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Pass bool   `json:"pass"`
}

func (r *Result) target(name, want, got string, pass bool) {
	r.Targets = append(r.Targets, Target{Name: name, Want: want, Got: got, Pass: pass})
}

func (r *Result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// writeJSON writes rep to path.
func writeJSON(path string, rep *Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// printResult writes one scenario's table.
func printResult(w io.Writer, m Machine, r *Result) {
	fmt.Fprintf(w, "\n== %s: %s\n", r.Scenario, r.About)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "  %s\t%s\n", k, fmt.Sprintf(format, args...)) }
	s := r.Settings
	row("machine", "%d cores (GOMAXPROCS %d), %s, %s %s", m.Cores, m.GOMAXPROCS, m.CPU, m.GoVersion, m.OS)
	row("target", "%s; %d workers, endpoint concurrency %d, tenant concurrency %d", r.Target, s.Workers, s.EndpointConcurrency, s.TenantConcurrency)
	load := fmt.Sprintf("%d events of %d B, %d clients", s.Events, s.EventSize, s.Clients)
	if s.Rate > 0 {
		load = fmt.Sprintf("%d events of %d B at %g/s", s.Events, s.EventSize, s.Rate)
	}
	row("load", "%s, %d endpoints%s%s", load, s.Endpoints, ifs(s.Faults != "", ", faults "+s.Faults), ifs(s.Tracing, ", tracing on (-tracing)"))
	if len(s.Schedule) > 0 {
		row("retry schedule", "%s, attempt timeout %s", strings.Join(s.Schedule, " "), s.AttemptTimeout)
	}
	b := r.Baselines
	if b.Ingest > 0 {
		row("ceiling: bare 204 server", "%s req/s (%d keep-alive clients, same body)", num(b.Ingest), b.IngestClients)
	}
	if b.DurableFloor > 0 {
		row("ceiling: durable floor", "%s events/s (bare durable ingest: 202 after a group commit into bbolt, fsync on; same clients and body)", num(b.DurableFloor))
	}
	if b.Commits > 0 {
		lat := ""
		if c := b.Commit; c != nil && c.N > 0 {
			lat = fmt.Sprintf(", commit p50 %.2f  p99 %.2f ms", c.P50, c.P99)
		}
		row("ceiling: bbolt fsync", "%s commits/s (one 1 KiB write per commit, same disk%s)", num(b.Commits), lat)
	}
	if b.Delivery > 0 {
		row("ceiling: client → 204", "%s req/s (dispatcher's client, %d endpoints, %d in flight)", num(b.Delivery), b.Endpoints, b.Conns)
	}
	printIngest := func(name string, in *IngestStats) {
		if in == nil {
			return
		}
		ratio := ""
		if in.Ratio > 0 {
			ratio = fmt.Sprintf("  = %.1f%% of ceiling", 100*in.Ratio)
		}
		if in.FloorRatio > 0 {
			ratio += fmt.Sprintf("  = %.1f%% of the durable floor", 100*in.FloorRatio)
		}
		row(name, "%s events/s%s (%d acknowledged in %.2fs, %d client%s, %d errors, %d throttled)",
			num(in.Rate), ratio, in.Events, in.Seconds, in.Clients, ifs(in.Clients != 1, "s"), in.Errors, in.Throttled)
		row("  ingest latency", "p50 %s  p99 %s  max %s ms; process CPU %.2f cores", f2(in.Latency.P50), f2(in.Latency.P99), f2(in.Latency.Max), in.CPU)
		if in.FirstErr != "" {
			row("  first error", "%s", in.FirstErr)
		}
	}
	printIngest("durable ingest", r.Ingest)
	printIngest("durable ingest, 1 client", r.IngestSingle)
	if f := b.FloorSingle; f != nil && r.IngestSingle != nil {
		row("  durable floor, 1 client", "p50 %s  p99 %s  max %s ms (the same load on the durable floor, right after)", f2(f.P50), f2(f.P99), f2(f.Max))
	}
	if sc := r.Schema; sc != nil {
		row("schema comparison", "the same typical orders, %d alternating rounds each: with a schema %.1f%% of the rate without", sc.Rounds, 100*sc.Ratio)
		printIngest("  without a schema", sc.Without)
		printIngest("  with a typical schema", sc.With)
	}
	if t := r.Tracing; t != nil {
		row("tracing comparison", "two fresh webhookds, %d alternating rounds each, one traced to the bench's sink: %.1f%% of the rate without; CPU per op %.1f → %.1f µs (%.1f%%)",
			t.Rounds, 100*t.Ratio, t.CPUWithout, t.CPUWith, 100*t.CPURatio)
		printIngest("  without tracing", t.Without)
		printIngest("  with tracing", t.With)
		for _, s := range []struct {
			name string
			d    *DispatchSide
		}{{"  dispatch without tracing", t.DispatchWithout}, {"  dispatch with tracing", t.DispatchWith}} {
			if s.d != nil {
				row(s.name, "%s /s (%d in %.2fs; process CPU %.2f cores)", num(s.d.Rate), s.d.Deliveries, s.d.Seconds, s.d.CPU)
			}
		}
	}
	if d := r.Delivery; d != nil {
		ratio := ""
		if d.Ratio > 0 {
			ratio = fmt.Sprintf("  = %.1f%% of ceiling", 100*d.Ratio)
		}
		row("deliveries", "%s /s%s (%d in %.2fs; process CPU %.2f cores)", num(d.Rate), ratio, d.Delivered, d.Seconds, d.CPU)
		if d.EventRate > 0 {
			row("  events end to end", "%s /s", num(d.EventRate))
		}
		if d.EndToEnd.N > 0 {
			row("  end-to-end latency", "p50 %s  p99 %s  max %s ms (ingest ack → receiver)", f2(d.EndToEnd.P50), f2(d.EndToEnd.P99), f2(d.EndToEnd.Max))
			row("  send → receiver", "p50 %s  p99 %s  max %s ms (ingest request sent → receiver)", f2(d.FromSend.P50), f2(d.FromSend.P99), f2(d.FromSend.Max))
		}
		row("  receivers counted", "%d of %d delivered = %.3f%% effective; %d first attempt, %d after retries; %d duplicates; %d requests; %d bad signatures",
			d.Delivered, d.Expected, 100*d.Effective, d.FirstAttempt, d.Retried, d.Duplicates, d.Requests, d.BadSignature)
		if d.Succeeded >= 0 {
			row("  webhookd recorded", "%d succeeded, %d dead, %d paused, %d pending, %d attempts", d.Succeeded, d.Dead, d.Paused, d.Pending, d.Attempts)
		}
		row("  pending at the end", "%d", d.PendingAtEnd)
	}
	if st := r.Storage; st != nil {
		row("commits", "%d for %d writes = %.1f writes/commit, %.2f ms mean commit (%.2f ms writing %.1f pages and syncing); file %s (compacted %s)",
			st.Commits, st.Writes, st.WritesPerCommit, st.MeanCommitMs, st.MeanWriteMs, st.PagesPerCommit, mib(uint64(st.FileBytes)), mib(uint64(st.CompactedBytes)))
	}
	if bl := r.Backlog; bl != nil {
		row("backlog", "%d pending retries seeded in %.1fs; file %s", bl.Pending, bl.SeedSeconds, mib(uint64(bl.FileBytes)))
		row("  restart", "ready to dispatch in %.2fs (open %.2fs, recovery %.2fs), %d in the timer",
			bl.ReadySeconds, bl.OpenSeconds, bl.RecoverySeconds, bl.Scheduled)
		row("  memory", "RSS %s → %s (anon %s, file-backed %s), peak %s; Go heap %s → %s",
			mib(bl.RSSBefore), mib(bl.RSSAfter), mib(bl.RSSAnonAfter), mib(bl.RSSFileAfter), mib(bl.PeakRSS), mib(bl.HeapBefore), mib(bl.HeapAfter))
		row("  fired early", "%d", bl.FiredEarly)
	}
	if sl := r.Slow; sl != nil {
		row("healthy endpoints, all healthy", "e2e p50 %s  p99 %s ms (%d rounds of each, alternating, pooled)", f2(sl.Baseline.P50), f2(sl.Baseline.P99), sl.Rounds)
		row("healthy endpoints, one hanging", "e2e p50 %s  p99 %s ms (p99 %+.1f%%, p50 %+.1f%%); hanging endpoint got %d requests",
			f2(sl.WithHang.P50), f2(sl.WithHang.P99), 100*sl.P99Change, 100*sl.P50Change, sl.HangingReq)
	}
	if sl := r.Noisy; sl != nil {
		row("healthy tenant, alone", "e2e p50 %s  p99 %s ms (%d rounds of each, alternating, pooled)", f2(sl.Baseline.P50), f2(sl.Baseline.P99), sl.Rounds)
		row("healthy tenant, beside a noisy one", "e2e p50 %s  p99 %s ms (p99 %+.1f%%, p50 %+.1f%%); the noisy tenant's hanging endpoints got %d requests",
			f2(sl.WithHang.P50), f2(sl.WithHang.P99), 100*sl.P99Change, 100*sl.P50Change, sl.HangingReq)
	}
	if cs := r.Cluster; cs != nil {
		for _, p := range cs.Phases {
			in, d := p.Ingest, p.Delivery
			order := ""
			if p.Ordering != "" {
				order = fmt.Sprintf("; ordering %s, %d order violations", p.Ordering, p.Violations)
			}
			row(p.Name, "%s deliveries/s end to end = %.1f%% of 1 bbolt node; %d of %d delivered, %d duplicates; ingest %s events/s, p50 %s  p99 %s ms; e2e p50 %s  p99 %s ms; CPU %.2f cores%s",
				num(d.Rate), 100*p.Ratio, d.Delivered, d.Expected, d.Duplicates, num(in.Rate), f2(in.Latency.P50), f2(in.Latency.P99), f2(d.EndToEnd.P50), f2(d.EndToEnd.P99), d.CPU, order)
		}
		if k := cs.Kill; k != nil {
			row("kill 1 of 3 nodes (SIGKILL)", "at %.1fs of a load of %s events/s, lease %s; %d events acknowledged through the 3 nodes", k.KilledAt, num(k.Rate), k.Lease, k.Acked)
			row("  clients failing over", "%d sends failed over, the longest waited %.0f ms for its 202; longest with no 202 to any client after the kill: %.0f ms",
				k.Failovers, k.FailoverWaitMs, k.AckGapMs)
			row("  killed node's claims", "%d, their leases ended %.2f s after the kill; %d claimed again within %.2f s, all succeeded within %.2f s of the kill",
				k.Claims, k.LeaseEndSec, k.Reoffered, k.ReofferSec, k.SettledSec)
			if d := k.Delivery; d != nil {
				row("  acknowledged events lost", "%d of %d (%d deliveries of %d received, %d duplicates)", k.Lost, k.Acked, d.Delivered, d.Expected, d.Duplicates)
			}
		}
	}
	if ord := r.Ordered; ord != nil {
		row("receivers", "answer 2xx after %s ms; phases that ran twice (alternating) are pooled", f2(ord.ReceiverMs))
		for i, p := range ord.Phases {
			order := fmt.Sprintf("%d order violations", p.Violations)
			if i == 0 {
				order = fmt.Sprintf("%d arrivals after a later event (no order promised)", p.Violations)
			}
			row(p.Name, "%s deliveries/s end to end = %.1f%% of none; e2e p50 %s  p99 %s ms = %.2f× none; %d of %d delivered in %d run%s, %s; ingest %s events/s; CPU %.2f cores",
				num(p.Rate), 100*p.RateRatio, f2(p.EndToEnd.P50), f2(p.EndToEnd.P99), p.P99Ratio, p.Delivered, p.Expected, p.Runs, ifs(p.Runs != 1, "s"), order, num(p.IngestRate), p.CPU)
			if p.Ordering == "endpoint" {
				row("  endpoint ordering's bound", "%s deliveries/s measured; 1 / the receiver's latency = %s /s", num(p.Rate), num(1000/ord.ReceiverMs))
			}
		}
	}
	mem := r.Memory
	row("memory", "peak RSS %s%s, peak Go heap %s (harness included)", mib(mem.PeakRSS), ifs(!mem.PeakIsOfRun, " (process lifetime)"), mib(mem.PeakHeap))
	row("time", "%.1fs", r.Seconds)
	tw.Flush()
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if len(r.Targets) > 0 {
		fmt.Fprintln(w, "  targets:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, t := range r.Targets {
			fmt.Fprintf(tw, "    %s\t%s\t%s\tgot %s\n", passMiss(t.Pass), t.Name, t.Want, t.Got)
		}
		tw.Flush()
	}
}

// printSummary writes one line per scenario.
func printSummary(w io.Writer, rep *Report) {
	m := rep.Machine
	fmt.Fprintf(w, "\n== summary: %d cores, %s, %s\n", m.Cores, m.CPU, m.GoVersion)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tingest ceil/s\tdurable floor/s\tingest ev/s\t(ratio)\t(of floor)\tingest p99 ms\tdeliv ceil/s\tdeliveries/s\t(ratio)\te2e p50 ms\te2e p99 ms\ttargets\t")
	for _, r := range rep.Runs {
		cols := []string{r.Scenario, dash(r.Baselines.Ingest), dash(r.Baselines.DurableFloor), "", "", "", "", dash(r.Baselines.Delivery), "", "", "", "", ""}
		if in := r.Ingest; in != nil {
			cols[3], cols[4], cols[5], cols[6] = num(in.Rate), pct(in.Ratio), pct(in.FloorRatio), f2(in.Latency.P99)
		}
		if d := r.Delivery; d != nil {
			cols[8], cols[9] = num(d.Rate), pct(d.Ratio)
			if d.EndToEnd.N > 0 {
				cols[10], cols[11] = f2(d.EndToEnd.P50), f2(d.EndToEnd.P99)
			}
		}
		pass := 0
		for _, t := range r.Targets {
			if t.Pass {
				pass++
			}
		}
		cols[12] = fmt.Sprintf("%d/%d", pass, len(r.Targets))
		fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	}
	tw.Flush()
}

func passMiss(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

func ifs(ok bool, s string) string {
	if ok {
		return s
	}
	return ""
}

func num(f float64) string {
	switch {
	case f >= 100:
		return fmt.Sprintf("%.0f", f)
	case f >= 10:
		return fmt.Sprintf("%.1f", f)
	}
	return fmt.Sprintf("%.2f", f)
}

func dash(f float64) string {
	if f == 0 {
		return "-"
	}
	return num(f)
}

func pct(f float64) string {
	if f == 0 {
		return ""
	}
	return fmt.Sprintf("%.0f%%", 100*f)
}

func f2(f float64) string { return fmt.Sprintf("%.2f", f) }

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
