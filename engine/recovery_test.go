package engine_test

// Recovery and clock tests of the Dispatcher against the real store: an
// external test package, so that it may import storage (which imports
// engine) while engine itself imports no infrastructure.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/storage"
)

// trackingReceiver is a loopback endpoint that answers 200 and tracks, per
// delivery (webhook-id and path: one event goes to several endpoints),
// how many requests are in flight at once and how many were made.
type trackingReceiver struct {
	srv *httptest.Server

	mu          sync.Mutex
	inflight    map[string]int
	requests    map[string]int
	maxParallel int // most requests in flight at once for one delivery
	succeeded   atomic.Int64
}

func newTrackingReceiver(tb testing.TB) *trackingReceiver {
	rc := &trackingReceiver{inflight: make(map[string]int), requests: make(map[string]int)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("webhook-id") + r.URL.Path
		rc.mu.Lock()
		rc.inflight[key]++
		rc.requests[key]++
		rc.maxParallel = max(rc.maxParallel, rc.inflight[key])
		first := rc.requests[key] == 1
		rc.mu.Unlock()
		// Stay in flight a moment, so that a second attempt of the same
		// delivery would overlap this one.
		time.Sleep(200 * time.Microsecond) // a real receiver's work, on loopback: not in a bubble
		rc.mu.Lock()
		rc.inflight[key]--
		rc.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		if first {
			rc.succeeded.Add(1)
		}
	}))
	tb.Cleanup(rc.srv.Close)
	return rc
}

// recoverSize is how many pending deliveries TestDispatcher_Recover
// writes: WEBHOOKD_RECOVER_N, or 20 000 (2 000 with -short).
func recoverSize(tb testing.TB, def int) int {
	if s := os.Getenv("WEBHOOKD_RECOVER_N"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			tb.Fatalf("WEBHOOKD_RECOVER_N=%q: want a positive number", s)
		}
		return n
	}
	return def
}

// loopbackClient is the attempts' client for tests: the receivers here
// are plain-http loopback servers, which the production client's target
// policy refuses, and one loopback host stands in for many endpoints, so
// it keeps an idle connection per worker (or the test runs out of ports).
func loopbackClient(workers int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			MaxIdleConns:        workers * 2,
			MaxIdleConnsPerHost: workers,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// poll is the engine tests' bounded poller, for a condition that only
// real I/O moves (a receiver on loopback, which a synctest bubble cannot
// wait for) and nothing signals: it calls cond at once and then every
// millisecond until it holds or limit has passed, and reports whether it
// held.
func poll(limit time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(limit); ; time.Sleep(time.Millisecond) { // real I/O: nothing signals it
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// recoverEndpoints is how many endpoints the pending deliveries are spread
// over: each event goes to all of them.
const recoverEndpoints = 50

// seedPending writes about n pending deliveries to a new database at path
// (n/recoverEndpoints events, each to every endpoint, on rc), due from
// now on over spread, and closes it as a stopped process would. It
// returns how many deliveries it wrote.
func seedPending(tb testing.TB, path, url string, n int, spread time.Duration) int {
	tb.Helper()
	ctx := context.Background()
	db, err := storage.Open(path, storage.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UTC()
	if _, _, err := db.PutTenant(ctx, engine.Tenant{ID: "acme", Name: "Acme", Created: now, Updated: now}); err != nil {
		tb.Fatal(err)
	}
	if _, _, err := db.PutEventType(ctx, engine.EventType{Name: "order.created", Created: now, Updated: now}); err != nil {
		tb.Fatal(err)
	}
	for i := range recoverEndpoints {
		ep := engine.Endpoint{
			ID: engine.NewID("ep"), TenantID: "acme", URL: fmt.Sprintf("%s/ep/%d", url, i),
			EventTypes: []string{"*"}, Created: now, Updated: now,
			Secrets: []engine.Secret{{Key: engine.NewSecret()}},
		}
		if err := db.CreateEndpoint(ctx, ep, 0); err != nil {
			tb.Fatal(err)
		}
	}
	events := max(1, n/recoverEndpoints)
	var wrote atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	next := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range next {
				due := now
				if spread > 0 {
					due = now.Add(time.Duration(i) * spread / time.Duration(events))
				}
				id := engine.NewID("evt")
				res, err := db.AppendEvent(ctx, engine.NewEvent{
					Event: engine.Event{
						ID: id, TenantID: "acme", Type: "order.created", Created: due, APIVersion: "v1",
						Body: fmt.Appendf(nil, `{"id":%q,"type":"order.created","data":{"n":%d}}`, id, i),
					},
				})
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				wrote.Add(int64(len(res.Deliveries)))
			}
		})
	}
	for i := range events {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		tb.Fatal(err)
	default:
	}
	return int(wrote.Load())
}

// recoverPolicy retries quickly; the receivers here answer 200 anyway.
func recoverPolicy() engine.RetryPolicy {
	return engine.RetryPolicy{
		Schedule:       []time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
		Deadline:       time.Hour,
		AttemptTimeout: 5 * time.Second,
		RetryAfterMax:  time.Second,
	}
}

// TestDispatcher_Recover stops a "process" with tens of thousands of
// deliveries pending in the retry index, starts a new Dispatcher on the
// file, and measures how long recovery (Start) takes and how long until
// every delivery succeeded. No delivery may be attempted twice at once,
// nor (without a crash in between) twice at all.
//
// WEBHOOKD_RECOVER_N=100000 go test -run TestDispatcher_Recover -v ./engine
// runs it at the size the README quotes; BenchmarkDispatcher_Recover
// measures the same.
func TestDispatcher_Recover(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	n = recoverSize(t, n)
	rc := newTrackingReceiver(t)
	path := filepath.Join(t.TempDir(), "webhookd.db")
	seedStart := time.Now()
	n = seedPending(t, path, rc.srv.URL, n, time.Second)
	seeded := time.Since(seedStart)

	db, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const workers = 64
	disp := engine.NewDispatcher(db, engine.DispatcherOptions{
		Policy:  recoverPolicy(),
		Workers: workers,
		Client:  loopbackClient(workers),
	})
	start := time.Now()
	if err := disp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	recovery := time.Since(start)
	// Workers start with Start, so some deliveries may already be done:
	// held plus done covers every pending one, and nothing extra is held.
	st := disp.Stats()
	if got, done := st.Scheduled+st.Ready+st.InFlight, int(rc.succeeded.Load()); got > n || got+done < n {
		t.Errorf("after Start the dispatcher holds %d deliveries (%d already done), want the %d pending", got, done, n)
	}
	if held, done := disp.TenantPending("acme"), int(rc.succeeded.Load()); held > n || held+done < n {
		t.Errorf("after Start TenantPending(acme) = %d (%d already done), want the %d pending: the retry index did not name the tenant", held, done, n)
	}
	deadline := time.Now().Add(2 * time.Minute)
	poll(time.Until(deadline), func() bool { return rc.succeeded.Load() >= int64(n) })
	completed := time.Since(start)
	// Let the last outcomes be recorded before looking at the file.
	poll(time.Until(deadline), func() bool {
		st := disp.Stats()
		return st.Scheduled+st.Ready+st.InFlight == 0
	})
	if held := disp.TenantPending("acme"); held != 0 {
		t.Errorf("TenantPending(acme) = %d once every delivery succeeded, want 0", held)
	}
	if err := disp.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rc.succeeded.Load(); got != int64(n) {
		t.Fatalf("%d of %d deliveries reached the receiver within 2 minutes", got, n)
	}

	rc.mu.Lock()
	maxParallel, duplicates := rc.maxParallel, 0
	for _, c := range rc.requests {
		duplicates += c - 1
	}
	rc.mu.Unlock()
	if maxParallel != 1 {
		t.Errorf("a delivery had %d attempts in flight at once, want 1", maxParallel)
	}
	if duplicates != 0 {
		t.Errorf("%d duplicate requests in a run without a crash, want 0", duplicates)
	}
	left := 0
	if err := db.RetryIndex(context.Background(), func(engine.RetryEntry) error { left++; return nil }); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d deliveries still pending after all succeeded", left)
	}
	if err := db.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	t.Logf("RELIABILITY recovery: %d pending deliveries (%d endpoints): seeded in %s, Start (recovery) took %s, all delivered %s after Start (%.0f/s), max %d in flight per delivery, %d duplicates",
		n, recoverEndpoints, seeded.Round(time.Millisecond), recovery.Round(time.Microsecond), completed.Round(time.Millisecond),
		float64(n)/completed.Seconds(), maxParallel, duplicates)
	if limit := 5*time.Second + time.Duration(n)*20*time.Microsecond; recovery > limit {
		t.Errorf("recovery of %d pending deliveries took %s, want under %s", n, recovery, limit)
	}
}

// BenchmarkDispatcher_Recover measures Start on a file with
// WEBHOOKD_RECOVER_N (default 100 000) pending deliveries, all due in an
// hour so that nothing but recovery runs: recovery-ms is the time Start
// takes, heap-B/pending the memory each pending delivery costs the
// dispatcher (what [ingest] max_pending bounds).
func BenchmarkDispatcher_Recover(b *testing.B) {
	n := recoverSize(b, 100000)
	rc := newTrackingReceiver(b)
	path := filepath.Join(b.TempDir(), "webhookd.db")
	n = seedPending(b, path, rc.srv.URL, n, 0)
	// The dispatcher's clock runs an hour behind (below): it sees every
	// delivery as due in an hour.
	db, err := storage.Open(path, storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var totalRecovery time.Duration
	var perPending float64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		disp := engine.NewDispatcher(db, engine.DispatcherOptions{
			Policy: recoverPolicy(),
			Client: loopbackClient(64),
			Now:    func() time.Time { return time.Now().Add(-time.Hour) },
		})
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		start := time.Now()
		if err := disp.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		totalRecovery += time.Since(start)
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if st := disp.Stats(); st.Scheduled != n {
			b.Fatalf("%d scheduled after Start, want %d", st.Scheduled, n)
		}
		perPending = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
		if err := disp.Stop(context.Background()); err != nil {
			b.Fatal(err)
		}
		runtime.KeepAlive(disp)
		b.StartTimer()
	}
	b.ReportMetric(float64(totalRecovery.Milliseconds())/float64(b.N), "recovery-ms")
	b.ReportMetric(perPending, "heap-B/pending")
	b.ReportMetric(float64(n), "pending")
}
