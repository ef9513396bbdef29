package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/storage"
)

// TestBackup_DuringLiveIngest takes a hot backup through the API while
// clients ingest, starts a second webhookd on the copy, and finds every
// event acknowledged before the backup began, with its deliveries.
func TestBackup_DuringLiveIngest(t *testing.T) {
	skipOnPostgres(t, "the hot backup streams the bbolt file (postgres: pg_dump)")
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	rc := newReceiver(t, status(200))
	ep := in.createEndpoint(rc.srv.URL, "*")
	rc.setSecret(ep.Secret)

	var mu sync.Mutex
	var acked []string
	hundred := make(chan struct{}) // closed at the 100th acknowledgement
	var stop atomic.Bool
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500 && !stop.Load(); i++ {
				ev := in.ingest("invoice.paid", fmt.Sprintf(`{"client":%d,"n":%d}`, c, i))
				mu.Lock()
				if acked = append(acked, ev.ID); len(acked) == 100 {
					close(hundred)
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-hundred:
	case <-time.After(15 * time.Second):
		stop.Store(true)
		wg.Wait()
		t.Fatalf("%d events acknowledged in 15s, want 100 before the backup", len(acked)) // the clients have ended
	}
	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()

	out := filepath.Join(t.TempDir(), "backup.db")
	msg, err := command(t, "backup", "-o", out, "-url", in.base, "-token", testToken)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, msg)
	}
	if !strings.Contains(msg, "written to") {
		t.Errorf("backup said %q", msg)
	}

	// The copy is sound, with webhookd's own invariants, before anything
	// opens it for writing.
	db, err := storage.Open(out, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Check(); err != nil {
		t.Errorf("the backup fails its check: %v", err)
	}
	db.Close()

	dir2 := t.TempDir()
	if err := os.Rename(out, filepath.Join(dir2, "webhookd.db")); err != nil {
		t.Fatal(err)
	}
	in2 := startInstance(t, dir2, testConfig)
	for _, id := range before {
		var got struct {
			Deliveries []deliveryView `json:"deliveries"`
		}
		if code := in2.call("GET", "/v1/tenants/acme/events/"+id, nil, &got); code != 200 {
			t.Fatalf("event %s acknowledged before the backup: status %d in the copy", id, code)
		}
		if len(got.Deliveries) != 1 {
			t.Errorf("event %s has %d deliveries in the copy, want 1", id, len(got.Deliveries))
		}
	}
	t.Logf("%d events acknowledged before the backup began, all in the copy", len(before))
}

func TestBackupAndCompact_StoppedFile(t *testing.T) {
	skipOnPostgres(t, "backup and compact of the stopped bbolt file, and its lock")
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "webhookd.db")
	in := startInstance(t, dir, testConfig)
	in.setup()
	rc := newReceiver(t, status(200))
	ep := in.createEndpoint(rc.srv.URL, "*")
	rc.setSecret(ep.Secret)
	var ids []string
	for i := range 50 {
		ev := in.ingest("invoice.paid", fmt.Sprintf(`{"n":%d,"pad":%q}`, i, strings.Repeat("x", 2000)))
		ids = append(ids, ev.ID)
	}
	for _, id := range ids {
		var ev struct {
			Deliveries []deliveryView `json:"deliveries"`
		}
		in.mustCall(200, "GET", "/v1/tenants/acme/events/"+id, nil, &ev)
		in.waitState(ev.Deliveries[0].ID, "succeeded")
	}

	// While it runs, the file cannot be copied or compacted directly. The
	// commands give up on the lock after [storage] lock_timeout (1s unless
	// set): 100ms here.
	lockCfg := filepath.Join(t.TempDir(), "lock.toml")
	if err := os.WriteFile(lockCfg, []byte("[storage]\nlock_timeout = \"100ms\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if msg, err := command(t, "backup", "-config", lockCfg, "-o", filepath.Join(dir, "b0.db"), "-db", dbPath); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("backup -db of a running database: %v %s, want an 'in use' error", err, msg)
	}
	if _, err := command(t, "compact", "-config", lockCfg, "-o", filepath.Join(dir, "c0.db"), "-db", dbPath); err == nil || !strings.Contains(err.Error(), "stop webhookd first") {
		t.Errorf("compact of a running database: %v, want 'stop webhookd first'", err)
	}
	in.stop()

	backup := filepath.Join(dir, "b1.db")
	if msg, err := command(t, "backup", "-o", backup, "-db", dbPath); err != nil {
		t.Fatalf("backup of a stopped file: %v %s", err, msg)
	}
	compacted := filepath.Join(dir, "c1.db")
	msg, err := command(t, "compact", "-o", compacted, "-db", dbPath)
	if err != nil {
		t.Fatalf("compact: %v %s", err, msg)
	}
	if _, err := command(t, "compact", "-o", compacted, "-db", dbPath); err == nil {
		t.Error("compact overwrote an existing file")
	}
	bi, _ := os.Stat(dbPath)
	ci, _ := os.Stat(compacted)
	if ci.Size() > bi.Size() {
		t.Errorf("compacted copy %d bytes, original %d", ci.Size(), bi.Size())
	}
	t.Logf("compact: %s", strings.TrimSpace(msg))

	for _, f := range []string{backup, compacted} {
		d := t.TempDir()
		if err := os.Rename(f, filepath.Join(d, "webhookd.db")); err != nil {
			t.Fatal(err)
		}
		in2 := startInstance(t, d, testConfig)
		for _, id := range ids {
			in2.mustCall(200, "GET", "/v1/tenants/acme/events/"+id, nil, nil)
		}
		in2.stop()
	}
}

func TestVersionAndReady(t *testing.T) {
	t.Parallel()
	msg, err := command(t, "version")
	if err != nil || !strings.HasPrefix(msg, "webhookd dev (commit ") {
		t.Errorf("version: %q %v", msg, err)
	}
	if msg2, _ := command(t, "-version"); msg2 != msg {
		t.Errorf("-version %q, version %q", msg2, msg)
	}
	in := startInstance(t, t.TempDir(), testConfig)
	in.mustCall(200, "GET", "/readyz", nil, nil)
	in.mustCall(200, "GET", "/healthz", nil, nil)
}

// TestMetrics_KnownLabelsStartAtZero: a dashboard or an alert on
// dead deliveries or permanent failures must see a series (at 0) before
// the first one happens, not "no data".
func TestMetrics_KnownLabelsStartAtZero(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	text := in.scrape()
	for _, want := range []string{
		`webhookd_attempts_total{outcome="success"} 0`,
		`webhookd_attempts_total{outcome="retry"} 0`,
		`webhookd_attempts_total{outcome="permanent"} 0`,
		`webhookd_attempt_duration_seconds_count{outcome="permanent"} 0`,
		`webhookd_deliveries_finished_total{state="succeeded"} 0`,
		`webhookd_deliveries_finished_total{state="dead"} 0`,
		`webhookd_dead_letters_total 0`,
		`webhookd_events_stored_total 0`,
		`webhookd_ingest_repeats_total 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics of a fresh start lacks %s", want)
		}
	}
}

// TestMetrics_DiskWrites: on the bbolt driver, /metrics counts the pages
// the commits wrote and the time they took to write and sync, and an
// ingest's commit adds to both.
func TestMetrics_DiskWrites(t *testing.T) {
	t.Parallel()
	if onPostgres {
		t.Skip("the postgres driver has no file of its own")
	}
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	sample := func(name string) float64 {
		t.Helper()
		for line := range strings.Lines(in.scrape()) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				return f
			}
		}
		t.Fatalf("/metrics lacks %s", name)
		return 0
	}
	pages, writing := sample("webhookd_commit_pages_written_total"), sample("webhookd_commit_write_seconds_total")
	if pages <= 0 || writing <= 0 {
		t.Fatalf("after set-up: %v pages written in %vs", pages, writing)
	}
	in.ingest("payment.succeeded", `{}`)
	if p, w := sample("webhookd_commit_pages_written_total"), sample("webhookd_commit_write_seconds_total"); p < pages+2 || w <= writing {
		t.Errorf("an ingest's commit: pages %v -> %v, seconds %v -> %v; want 2 pages or more and some time", pages, p, writing, w)
	}
}

// scrape returns the text of GET /metrics.
func (in *instance) scrape() string {
	in.t.Helper()
	resp, err := http.Get(in.base + "/metrics")
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		in.t.Fatal(err)
	}
	return string(body)
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(500)
			return
		}
		w.WriteHeader(200)
	})
	ep := in.createEndpoint(rc.srv.URL, "*")
	rc.setSecret(ep.Secret)
	ev := in.ingest("invoice.paid", `{"secret_tenant_data":"acme"}`, "Idempotency-Key", "k1")
	// The repeat is acknowledged too, but stores nothing: it is counted
	// apart from the stored events.
	if again := in.ingest("invoice.paid", `{"secret_tenant_data":"acme"}`, "Idempotency-Key", "k1"); again.ID != ev.ID {
		t.Fatalf("repeat answered event %s, want %s", again.ID, ev.ID)
	}
	in.waitState(ev.Deliveries[0].ID, "succeeded")

	wants := []string{
		`webhookd_attempts_total{outcome="retry"} 1`,
		`webhookd_attempts_total{outcome="success"} 1`,
		`webhookd_deliveries_finished_total{state="succeeded"} 1`,
		`webhookd_events_stored_total 1`,
		`webhookd_ingest_repeats_total 1`,
		`webhookd_http_requests_total{code="202",method="POST",route="/v1/tenants/:tenant/events"} 2`,
		`webhookd_endpoint_failures_total 1`,
		`webhookd_pending_deliveries 0`,
		`webhookd_commit_batch_writes_count`,
		`webhookd_oldest_pending_overdue_seconds 0`,
		`process_resident_memory_bytes`,
	}
	// The delivery reads as succeeded a moment before its worker lets go of
	// it, so poll until the gauges settle.
	var text string
	var missing []string
	poll(5*time.Second, func() bool {
		text = in.scrape()
		missing = nil
		for _, want := range wants {
			if !strings.Contains(text, want) {
				missing = append(missing, want)
			}
		}
		return len(missing) == 0
	})
	for _, m := range missing {
		t.Errorf("/metrics lacks %s", m)
	}
	if strings.Contains(text, "acme") {
		t.Error("/metrics carries a tenant name")
	}
}

// TestMetrics_NoTenantData: /metrics has no token, so no line of it
// names a tenant or an endpoint, however many fail: failures are one
// aggregate counter, and per-endpoint detail stays behind a token (the
// endpoint's health, the report).
func TestMetrics_NoTenantData(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	rc := newReceiver(t, status(500))
	tenants := []string{"custone", "custtwo", "custthree"}
	var ids []string
	var deliveries []string
	for _, tenant := range tenants {
		in.addTenant(tenant, rc.srv.URL)
		for n := range 2 {
			var res ingestResponse
			in.mustCall(202, "POST", "/v1/tenants/"+tenant+"/events", fmt.Sprintf(`{"type":"invoice.paid","data":{"n":%d}}`, n), &res)
			ids = append(ids, res.ID, res.Deliveries[0].EndpointID)
			deliveries = append(deliveries, tenant+"/"+res.Deliveries[0].ID)
		}
		ids = append(ids, tenant)
	}
	for _, d := range deliveries {
		tenant, id, _ := strings.Cut(d, "/")
		waitFor(t, "delivery "+id+" dead", func() bool {
			var got deliveryView
			return in.call("GET", "/v1/tenants/"+tenant+"/deliveries/"+id, nil, &got) == 200 && got.State == "dead"
		})
	}
	// 3 tenants × 2 deliveries × 4 attempts, all failed; the count is
	// told after each record, so it may trail the API for a moment.
	const want = "webhookd_endpoint_failures_total 24\n"
	var text string
	if !poll(5*time.Second, func() bool { text = in.scrape(); return strings.Contains(text, want) }) {
		t.Errorf("/metrics lacks %q", want)
	}
	for _, line := range strings.Split(text, "\n") {
		for _, id := range ids {
			if strings.Contains(line, id) {
				t.Errorf("/metrics names %s: %s", id, line)
			}
		}
	}
}
