package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres/pgtest"
)

// TestRun_tiny runs small versions of the scenarios end to end, so that
// the harness does not rot: a few hundred events each, ceilings measured
// for a tenth of a second. The real runs are `webhookd bench`.
func TestRun_tiny(t *testing.T) {
	cases := []struct {
		o     Options
		check func(t *testing.T, r *Result)
	}{
		{Options{Scenario: "ingest-only", Events: 300, Clients: 4}, func(t *testing.T, r *Result) {
			if r.Ingest == nil || r.Ingest.Events != 300 || r.Ingest.Errors != 0 {
				t.Errorf("ingest = %+v, want 300 events and no error", r.Ingest)
			}
			if r.IngestSingle == nil || r.IngestSingle.Events != 200 {
				t.Errorf("single-client ingest = %+v, want 200 events", r.IngestSingle)
			}
			if r.Storage == nil || r.Storage.Commits == 0 || r.Storage.Writes < 300 {
				t.Errorf("storage = %+v, want commits counted", r.Storage)
			}
			if f := r.Baselines.FloorSingle; f == nil || f.N != 200 || f.P50 <= 0 {
				t.Errorf("durable floor, 1 client = %+v, want 200 latencies", f)
			}
			if c := r.Baselines.Commit; c == nil || c.N == 0 || c.P50 <= 0 || c.P99 < c.P50 {
				t.Errorf("commit latency = %+v, want the probe's commits measured", c)
			}
			if r.Baselines.DurableFloor <= 0 || r.Ingest == nil || r.Ingest.FloorRatio <= 0 || r.IngestSingle == nil || r.IngestSingle.FloorRatio != 0 {
				t.Errorf("durable floor %g, ratios %+v, %+v: want a floor, and a ratio to it for the 4 clients only", r.Baselines.DurableFloor, r.Ingest, r.IngestSingle)
			}
		}},
		{Options{Scenario: "ingest-only", Events: 800, Clients: 4, Schema: true}, func(t *testing.T, r *Result) {
			// 8 rounds of 100 events each side.
			sc := r.Schema
			if sc == nil || sc.Without == nil || sc.With == nil {
				t.Fatalf("schema comparison = %+v, want both sides", sc)
			}
			for name, side := range map[string]*IngestStats{"without": sc.Without, "with": sc.With} {
				if side.Events != 800 || side.Errors != 0 || side.Rate <= 0 {
					t.Errorf("%s a schema: %+v, want 800 events, no error", name, side)
				}
			}
			if sc.Ratio <= 0 {
				t.Errorf("ratio %g", sc.Ratio)
			}
			found := false
			for _, tg := range r.Targets {
				found = found || strings.HasPrefix(tg.Name, "ingest with a typical schema")
			}
			if !found {
				t.Errorf("targets %+v lack the schema comparison's", r.Targets)
			}
		}},
		{Options{Scenario: "mixed-faults", Events: 200, Clients: 8, Endpoints: 2, Faults: "502:10%,429:5%,400:2%"}, func(t *testing.T, r *Result) {
			d := r.Delivery
			if d == nil || d.Expected != 400 {
				t.Fatalf("delivery = %+v, want 400 expected", d)
			}
			if d.Succeeded != d.Delivered || d.Succeeded+d.Dead+d.Paused != d.Expected || d.Pending != 0 {
				t.Errorf("webhookd recorded %d succeeded, %d dead, %d paused, %d pending; receivers counted %d of %d",
					d.Succeeded, d.Dead, d.Paused, d.Pending, d.Delivered, d.Expected)
			}
			if d.Retried == 0 || d.Duplicates != 0 || d.BadSignature != 0 {
				t.Errorf("%d retry successes, %d duplicates, %d bad signatures; want some, none, none", d.Retried, d.Duplicates, d.BadSignature)
			}
		}},
		{Options{Scenario: "light", Events: 20, Rate: 100}, func(t *testing.T, r *Result) {
			if d := r.Delivery; d == nil || d.Delivered != 20 || d.EndToEnd.N != 20 {
				t.Errorf("delivery = %+v, want 20 delivered with latencies", d)
			}
		}},
		{Options{Scenario: "dispatch", Events: 100, Clients: 8, Endpoints: 3}, func(t *testing.T, r *Result) {
			if d := r.Delivery; d == nil || d.Delivered != 300 || d.Succeeded != 300 || d.Rate <= 0 {
				t.Errorf("delivery = %+v, want 300 delivered", d)
			}
		}},
		{Options{Scenario: "dispatch", Events: 100, Clients: 8, Endpoints: 3, Tracing: true, TracingRatio: 1}, func(t *testing.T, r *Result) {
			if d := r.Delivery; d == nil || d.Delivered != 300 || d.Succeeded != 300 {
				t.Errorf("delivery = %+v, want 300 delivered", d)
			}
			// Each side 8 rounds of 100 events to 3 endpoints; the traced (ratio 1)
			// side's ingests, attempts and commits exported, every one.
			tr := r.Tracing
			if tr == nil || tr.DispatchWithout == nil || tr.DispatchWith == nil || tr.DispatchWithout.Deliveries != 2400 || tr.DispatchWith.Deliveries != 2400 || tr.Ratio <= 0 || tr.CPURatio <= 0 {
				t.Fatalf("tracing comparison = %+v", tr)
			}
			var started, exported, requests int
			for _, n := range r.Notes {
				fmt.Sscanf(n, "-tracing: %d spans started, %d exported (0 failed) in %d requests", &started, &exported, &requests)
			}
			if !r.Settings.Tracing || started < 3200 || exported != started || requests == 0 {
				t.Errorf("tracing %v: %d spans started, %d exported in %d requests; notes %q", r.Settings.Tracing, started, exported, requests, r.Notes)
			}
		}},
		{Options{Scenario: "ingest-only", Events: 800, Clients: 4, Tracing: true}, func(t *testing.T, r *Result) {
			tr := r.Tracing
			if tr == nil || tr.Without == nil || tr.With == nil || tr.Without.Events != 800 || tr.With.Events != 800 || tr.Ratio <= 0 {
				t.Fatalf("tracing comparison = %+v, want 800 events each side", tr)
			}
			found := false
			for _, tg := range r.Targets {
				found = found || tg.Name == "ingest with tracing on"
			}
			if !found {
				t.Errorf("targets %+v lack the tracing comparison's", r.Targets)
			}
		}},
		{Options{Scenario: "noisy-tenant", Events: 40, Rate: 200, Endpoints: 2}, func(t *testing.T, r *Result) {
			sl, d := r.Noisy, r.Delivery
			if sl == nil || sl.Baseline.N != 2*80 || sl.WithHang.N != 2*80 || sl.HangingReq == 0 {
				t.Fatalf("noisy = %+v, want 80 deliveries a round, 2 rounds each, and the noisy tenant's attempts made", sl)
			}
			if d == nil || d.Delivered != 80 || d.Duplicates != 0 {
				t.Errorf("delivery = %+v, want the healthy tenant's 80 delivered once each", d)
			}
		}},
		{Options{Scenario: "ordered", Events: 100, Clients: 8}, func(t *testing.T, r *Result) {
			ord := r.Ordered
			if ord == nil || len(ord.Phases) != len(orderedPhases) {
				t.Fatalf("ordered = %+v, want %d phases", ord, len(orderedPhases))
			}
			for i, p := range ord.Phases {
				if want := int64(100 * p.Runs); p.Runs == 0 || p.Expected != want || p.Delivered != want || p.Duplicates != 0 || p.RateRatio <= 0 || p.P99Ratio <= 0 {
					t.Errorf("%s: %d of %d delivered in %d runs, %d duplicates, ratios %g and %g; want 100 a run, each once, ratios to none",
						p.Name, p.Delivered, p.Expected, p.Runs, p.Duplicates, p.RateRatio, p.P99Ratio)
				}
				if i > 0 && p.Violations != 0 {
					t.Errorf("%s: %d order violations, want 0", p.Name, p.Violations)
				}
			}
		}},
		{Options{Scenario: "backlog", Events: 300, Clients: 8}, func(t *testing.T, r *Result) {
			bl, d := r.Backlog, r.Delivery
			if bl == nil || bl.Pending != 300 || bl.Scheduled != 300 || bl.FiredEarly != 0 {
				t.Fatalf("backlog = %+v, want 300 pending, all in the timer, none fired early", bl)
			}
			if d == nil || d.Delivered != 300 || d.Duplicates != 0 {
				t.Errorf("delivery = %+v, want 300 fired once each", d)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.o.Scenario, func(t *testing.T) {
			dir := t.TempDir()
			o := tc.o
			o.Baseline = 100 * time.Millisecond
			o.Drain = 20 * time.Second
			o.Dir = dir
			o.JSON = filepath.Join(dir, "bench.json")
			o.SVG = filepath.Join(dir, "bench.svg")
			var out bytes.Buffer
			rep, err := Run(context.Background(), o, &out)
			if err != nil {
				t.Fatalf("Run: %v\n%s", err, out.String())
			}
			if len(rep.Runs) != 1 {
				t.Fatalf("%d runs, want 1", len(rep.Runs))
			}
			r := rep.Runs[0]
			tc.check(t, r)
			if len(r.Targets) == 0 && o.Scenario != "ingest-only" {
				t.Logf("no targets checked")
			}
			if !strings.Contains(out.String(), "== "+o.Scenario) {
				t.Errorf("output has no table for %s:\n%s", o.Scenario, out.String())
			}
			var back Report
			if b, err := os.ReadFile(o.JSON); err != nil {
				t.Error(err)
			} else if err := json.Unmarshal(b, &back); err != nil || len(back.Runs) != 1 {
				t.Errorf("JSON report: %v, %d runs", err, len(back.Runs))
			}
			if b, err := os.ReadFile(o.SVG); err != nil || !bytes.HasPrefix(b, []byte("<svg")) {
				t.Errorf("SVG: %v", err)
			}
		})
	}
}

// TestDurableFloor measures the durable floor briefly and then reads its
// file back: every write the rate counted must be in it, verbatim, under
// NextSequence keys.
func TestDurableFloor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "floor.db")
	body := eventBody(1024)
	const d = 200 * time.Millisecond
	rate, err := durableFloor(context.Background(), path, 4, body, d)
	if err != nil {
		t.Fatalf("durableFloor: %v", err)
	}
	if rate <= 0 {
		t.Fatalf("rate = %g, want > 0", rate)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var keys int
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(floorBucket)
		if b == nil {
			return errors.New("no bucket")
		}
		return b.ForEach(func(k, v []byte) error {
			keys++
			if len(k) != 8 || binary.BigEndian.Uint64(k) != uint64(keys) {
				return fmt.Errorf("key %d is %x, want the sequence %d in 8 bytes", keys, k, keys)
			}
			if !bytes.Equal(v, body) {
				return fmt.Errorf("key %d holds %d bytes, want the %d-byte body", keys, len(v), len(body))
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	// The rate counts the 202s of the last nine tenths of d: each of them
	// is a committed write, so the file holds at least that many.
	if want := int(rate*0.9*d.Seconds()) - 1; keys < max(1, want) {
		t.Errorf("%d writes in the file, want at least %d (%.0f acknowledged/s for %s)", keys, max(1, want), rate, 9*d/10)
	}
}

func TestParseFaults(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{"", "", false},
		{"502:5%,timeout:1%,429:1%,410:0.5%", "502:5%,timeout:1%,429:1%,410:0.5%", false},
		{" 503:10 ", "503:10%", false},
		{"502", "", true},
		{"200:5%", "", true},
		{"slow:5%", "", true},
		{"502:x%", "", true},
		{"502:60%,503:50%", "", true},
	}
	for _, tt := range tests {
		got, err := ParseFaults(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseFaults(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if err == nil && got.String() != tt.want {
			t.Errorf("ParseFaults(%q) = %q, want %q", tt.in, got.String(), tt.want)
		}
	}
}

func TestFaults_pick(t *testing.T) {
	fs, err := ParseFaults("502:10%,timeout:5%")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		r      float64
		status int
		tmo    bool
		ok     bool
	}{
		{0, 502, false, true}, {0.099, 502, false, true}, {0.1, 0, true, true}, {0.149, 0, true, true}, {0.151, 0, false, false}, {0.99, 0, false, false},
	} {
		f, ok := fs.pick(tt.r)
		if ok != tt.ok || f.Status != tt.status || f.Timeout != tt.tmo {
			t.Errorf("pick(%g) = %+v, %v; want status %d timeout %v, %v", tt.r, f, ok, tt.status, tt.tmo, tt.ok)
		}
	}
}

func TestLatencies_quantile(t *testing.T) {
	var l latencies
	for i := 100; i >= 1; i-- {
		l = append(l, time.Duration(i)*time.Millisecond)
	}
	for _, tt := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := l.quantile(tt.q); got != tt.want {
			t.Errorf("quantile(%g) = %s, want %s", tt.q, got, tt.want)
		}
	}
	if got := latencies(nil).quantile(0.5); got != 0 {
		t.Errorf("quantile of nothing = %s, want 0", got)
	}
}

// TestRun_targetCleansUp runs a scenario against a running webhookd
// (-target) and checks that it leaves nothing behind: its tenant (with
// its endpoints at the receivers' now dead ports, its events and
// deliveries) is deleted and purged, and its event type removed, since
// the target did not have it before.
func TestRun_targetCleansUp(t *testing.T) {
	ctx := context.Background()
	target, err := openInstance(ctx, instanceOptions{path: filepath.Join(t.TempDir(), "target.db"), dispatch: true}, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer target.close(time.Second)
	o := Options{Scenario: "light", Events: 20, Rate: 100, Target: target.api.base, Token: benchToken,
		Baseline: 100 * time.Millisecond, Drain: 20 * time.Second, Dir: t.TempDir()}
	var out bytes.Buffer
	if _, err := Run(ctx, o, &out); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "could not delete") {
		t.Errorf("cleanup failed:\n%s", out.String())
	}
	tenants, err := target.db.Tenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tenants) != 0 {
		t.Errorf("the target has %d tenants after the run, want 0: %+v", len(tenants), tenants)
	}
	types, err := target.db.EventTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(types) != 0 {
		t.Errorf("the target's catalogue has %+v after the run, want it empty", types)
	}
	// What is left of the tenant goes with the purge, which main runs in
	// the background; run it here.
	for {
		res, err := target.db.PurgeDeletedTenants(ctx, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.Tenant == "" {
			break
		}
	}
	n := 0
	if err := target.db.ForEachEvent(ctx, func(engine.Event, []engine.Delivery) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d events left in the target after the purge", n)
	}
}

// TestRun_cluster runs a small cluster scenario on the test server
// (pgtest): the three configurations, then a node of three, a child
// process of a webhookd built for the test, killed with SIGKILL.
func TestRun_cluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds webhookd and runs four loads on PostgreSQL")
	}
	url := pgtest.URL(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH: cannot build a webhookd binary to run")
	}
	bin := filepath.Join(t.TempDir(), "webhookd")
	if out, err := exec.Command(goBin, "build", "-o", bin, "..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var out bytes.Buffer
	rep, err := Run(context.Background(), Options{
		Scenario: "cluster", DatabaseURL: url, Binary: bin,
		Events: 300, Clients: 8, Duration: 1500 * time.Millisecond, Baseline: 100 * time.Millisecond,
	}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	cs := rep.Runs[0].Cluster
	if cs == nil || len(cs.Phases) != 3 || cs.Kill == nil {
		t.Fatalf("cluster = %+v, want 3 phases and a kill\n%s", cs, out.String())
	}
	for _, p := range cs.Phases {
		if d := p.Delivery; d.Expected == 0 || d.Delivered < d.Expected || d.Rate <= 0 {
			t.Errorf("%s: %d of %d delivered at %g/s, want all", p.Name, d.Delivered, d.Expected, d.Rate)
		}
	}
	if k := cs.Kill; k.Acked == 0 || k.Lost != 0 || k.Reoffered != k.Claims || k.Failovers == 0 {
		t.Errorf("kill = %+v, want events acknowledged, none lost, every claim re-offered, sends failed over", k)
	}
	if !strings.Contains(out.String(), "kill 1 of 3 nodes") {
		t.Errorf("the table has no kill phase:\n%s", out.String())
	}
}

// TestRun_clusterNeedsDatabase: without a database the cluster scenario
// says what it needs.
func TestRun_clusterNeedsDatabase(t *testing.T) {
	_, err := Run(context.Background(), Options{Scenario: "cluster"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-database-url") {
		t.Errorf("err = %v, want one naming -database-url", err)
	}
}

func TestReceiverSet_orderViolations(t *testing.T) {
	key := map[string]string{"a1": "a", "a2": "a", "a3": "a", "b1": "b", "b2": "b"}
	rs := &receiverSet{rs: []*receiver{
		// a: 1, 3, 2 (late), 3 again (a repeat); b: 2, 1 (late).
		{arrivals: []arrival{{"a1", 1}, {"b2", 5}, {"a3", 3}, {"a2", 2}, {"a3", 3}, {"b1", 4}}},
		// Another endpoint: its lines are its own.
		{arrivals: []arrival{{"a3", 3}, {"a1", 1}}},
	}}
	if got, want := rs.orderViolations(func(id string) string { return key[id] }), int64(3); got != want {
		t.Errorf("by key: %d violations, want %d", got, want)
	}
	if got, want := rs.orderViolations(func(string) string { return "" }), int64(5); got != want {
		t.Errorf("by endpoint: %d violations, want %d", got, want)
	}
}

// TestLineViolations: events the load did not see acknowledged (sent as
// it ended) are each a line of their own, not one line of no key.
func TestLineViolations(t *testing.T) {
	lr := loadResult{acks: []ack{{id: "a1", key: "a"}, {id: "a2", key: "a"}}}
	rs := &receiverSet{rs: []*receiver{
		{arrivals: []arrival{{"x9", 9}, {"a2", 2}, {"x8", 8}, {"a1", 1}}},
	}}
	if got, want := lineViolations(rs, lr), int64(1); got != want {
		t.Errorf("%d violations, want %d (a1 after a2)", got, want)
	}
}

// TestRun_orderingRefused: -ordering takes none, key or endpoint.
func TestRun_orderingRefused(t *testing.T) {
	_, err := Run(context.Background(), Options{Scenario: "cluster", DatabaseURL: "postgres://x", Ordering: "keys"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-ordering") {
		t.Errorf("err = %v, want one naming -ordering", err)
	}
}

// TestDeliveryStats_countsAcknowledgedOnly: an event the receivers got
// whose 202 the load never read (sent as the load window closed, and
// committed after) is not counted as delivered: the effective rate is
// delivered over acknowledged, never above 100%.
func TestDeliveryStats_countsAcknowledgedOnly(t *testing.T) {
	at := time.Now()
	rs := &receiverSet{}
	for i := range 2 {
		rs.rs = append(rs.rs, &receiver{index: i, delivered: &rs.delivered, pairs: map[string]*pair{}})
	}
	for _, rc := range rs.rs {
		rc.record("evt_acked1", 0, at, true)
		rc.record("evt_acked2", 0, at, false) // a retry, then a success
		rc.record("evt_acked2", 0, at.Add(time.Millisecond), true)
		rc.record("evt_late", 0, at, true) // committed after the window: no 202 read
		rc.record("evt_late", 0, at, true)
	}
	acks := []ack{
		{id: "evt_acked1", sent: at, acked: at, deliveries: []string{"dlv_1a", "dlv_1b"}},
		{id: "evt_acked2", sent: at, acked: at, deliveries: []string{"dlv_2a", "dlv_2b"}},
		{id: "evt_missing", sent: at, acked: at, deliveries: []string{"dlv_3a", "dlv_3b"}},
	}
	r := &runner{o: Options{Endpoints: 2}, res: &Result{}}
	d, _ := r.deliveryStats(rs, acks, at.Add(-time.Second), func(int) bool { return true }, true)
	if d.Expected != 6 || d.Delivered != 4 {
		t.Errorf("delivered %d of %d, want 4 of 6 (the late event is not one of them)", d.Delivered, d.Expected)
	}
	if d.FirstAttempt != 2 || d.Retried != 2 || d.Duplicates != 0 {
		t.Errorf("first attempt %d, retried %d, duplicates %d; want 2, 2, 0", d.FirstAttempt, d.Retried, d.Duplicates)
	}
	if d.Effective > 1 {
		t.Errorf("effective %.3f, above 100%%", d.Effective)
	}
}
