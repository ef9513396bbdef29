package e2e

// Fault injection: receivers that misbehave in every way a network can,
// storage that cannot write, a disk that fills, receivers that hang while
// ingest goes on, and the backlog bound. Each test runs the real service
// (the binary, or the same wiring in the test) against loopback receivers.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/storage"
)

// attemptView is a delivery's attempt log as the API shows it, with the
// durations the shared deliveryView leaves out.
type attemptView struct {
	State    string `json:"state"`
	Reason   string `json:"reason"`
	Attempts []struct {
		Number   int    `json:"number"`
		Status   int    `json:"status"`
		Error    string `json:"error"`
		Response string `json:"response"`
		Outcome  string `json:"outcome"`
		Duration millis `json:"duration_ms"`
	} `json:"attempts"`
}

func (in *instance) attempts(id string) attemptView {
	in.t.Helper()
	var v attemptView
	in.mustCall(200, "GET", "/v1/tenants/acme/deliveries/"+id, nil, &v)
	return v
}

// resetConn closes the request's connection with a TCP reset (SO_LINGER 0)
// instead of an answer.
func resetConn(t *testing.T, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// trickle answers status at once, then the body a byte every 20ms for
// a second: longer than the attempt timeout.
func trickle(w http.ResponseWriter, r *http.Request, status int) {
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	for range 50 {
		if _, err := w.Write([]byte("x")); err != nil {
			return
		}
		rc.Flush()
		select {
		case <-time.After(20 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
}

// TestFaults_Receivers sends events to receivers that reset the
// connection, answer nothing within the timeout, send their body slower
// than the timeout, answer 200 after the timeout, stream a 50 MB body, or
// flip between 500 and 200, and checks each delivery's final state and
// attempt count (testConfig: 4 attempts, a 300ms attempt timeout).
func TestFaults_Receivers(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	const timeout = 300 * time.Millisecond

	var hugeWritten atomic.Int64
	hugeDone := make(chan struct{}) // closed when the 50 MB answer ends
	hugeEnded := sync.OnceFunc(func() { close(hugeDone) })
	scenarios := []struct {
		typ    string
		answer func(n int, w http.ResponseWriter, r *http.Request)
	}{
		{"fault.reset_twice", func(n int, w http.ResponseWriter, r *http.Request) {
			if n <= 2 {
				resetConn(t, w)
				return
			}
			w.WriteHeader(http.StatusOK)
		}},
		{"fault.reset_always", func(n int, w http.ResponseWriter, r *http.Request) { resetConn(t, w) }},
		{"fault.slow", func(n int, w http.ResponseWriter, r *http.Request) {
			select { // nothing at all until well after the timeout
			case <-time.After(3 * timeout):
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusOK)
		}},
		{"fault.slow_body_500", func(n int, w http.ResponseWriter, r *http.Request) {
			trickle(w, r, http.StatusInternalServerError)
		}},
		{"fault.late_ok", func(n int, w http.ResponseWriter, r *http.Request) {
			if n <= 2 {
				select { // 200, but after the attempt timed out
				case <-time.After(2 * timeout):
				case <-r.Context().Done():
				}
			}
			w.WriteHeader(http.StatusOK)
		}},
		{"fault.huge_body", func(n int, w http.ResponseWriter, r *http.Request) {
			defer hugeEnded() // the whole body written, or a write failed
			w.WriteHeader(http.StatusOK)
			chunk := bytes.Repeat([]byte("0123456789abcdef"), 2048) // 32 KiB
			for written := 0; written < 50<<20; written += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				hugeWritten.Add(int64(len(chunk)))
			}
		}},
		{"fault.flip", nil}, // per event: 500, then 200
	}
	var flipMu sync.Mutex
	flips := map[string]int{}
	flipAnswer := func(_ int, w http.ResponseWriter, r *http.Request) {
		flipMu.Lock()
		flips[r.Header.Get("webhook-id")]++
		n := flips[r.Header.Get("webhook-id")]
		flipMu.Unlock()
		if n%2 == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}

	receivers := map[string]*receiver{}
	deliveries := map[string][]string{}
	for _, sc := range scenarios {
		in.mustCall(201, "PUT", "/v1/event-types/"+sc.typ, map[string]string{"description": "fault test"}, nil)
		answer := sc.answer
		if answer == nil {
			answer = flipAnswer
		}
		rc := newReceiver(t, answer)
		ep := in.createEndpoint(rc.srv.URL, sc.typ)
		rc.setSecret(ep.Secret)
		receivers[sc.typ] = rc
	}
	for _, sc := range scenarios {
		events := 1
		if sc.typ == "fault.flip" {
			events = 5
		}
		for i := range events {
			ev := in.ingest(sc.typ, fmt.Sprintf(`{"n":%d}`, i))
			deliveries[sc.typ] = append(deliveries[sc.typ], ev.Deliveries[0].ID)
		}
	}

	// want checks one delivery: its state, its attempts' statuses (0: no
	// response) and that each error says what happened.
	want := func(t *testing.T, typ, state string, statuses []int, errPrefix string) attemptView {
		t.Helper()
		id := deliveries[typ][0]
		in.waitState(id, state)
		v := in.attempts(id)
		var got []int
		for _, a := range v.Attempts {
			got = append(got, a.Status)
		}
		if !slices.Equal(got, statuses) {
			t.Errorf("attempt statuses %v, want %v (%+v)", got, statuses, v.Attempts)
		}
		for _, a := range v.Attempts {
			if a.Status == 0 && !strings.HasPrefix(a.Error, errPrefix) {
				t.Errorf("attempt %d: error %q, want it to start %q", a.Number, a.Error, errPrefix)
			}
		}
		if n := len(receivers[typ].got()); n != len(statuses) {
			t.Errorf("the receiver got %d requests, want %d (one per attempt: nothing retried behind the dispatcher's back)", n, len(statuses))
		}
		receivers[typ].checkSignatures()
		return v
	}

	t.Run("reset twice, then 200: succeeded on attempt 3", func(t *testing.T) {
		want(t, "fault.reset_twice", "succeeded", []int{0, 0, 200}, "connection error: ")
	})
	t.Run("reset always: dead after 4 attempts", func(t *testing.T) {
		v := want(t, "fault.reset_always", "dead", []int{0, 0, 0, 0}, "connection error: ")
		if !strings.Contains(v.Reason, "all 4 attempts failed") || !strings.Contains(v.Reason, "connection error") {
			t.Errorf("reason %q", v.Reason)
		}
	})
	aboutTimeout := func(t *testing.T, v attemptView) {
		t.Helper()
		for _, a := range v.Attempts {
			if d := time.Duration(a.Duration); d < timeout*9/10 || d > timeout+time.Second {
				t.Errorf("attempt %d took %s, want about the %s timeout", a.Number, time.Duration(a.Duration), timeout)
			}
		}
	}
	t.Run("no answer within the timeout: timeouts until dead", func(t *testing.T) {
		aboutTimeout(t, want(t, "fault.slow", "dead", []int{0, 0, 0, 0}, "timeout: "))
	})
	t.Run("500 in time, body slower than the timeout: timeouts until dead", func(t *testing.T) {
		aboutTimeout(t, want(t, "fault.slow_body_500", "dead", []int{0, 0, 0, 0}, "timeout: "))
	})
	t.Run("200 after the timeout: a timeout, retried", func(t *testing.T) {
		want(t, "fault.late_ok", "succeeded", []int{0, 0, 200}, "timeout: ")
	})
	t.Run("50 MB body with 200: succeeded, excerpt kept, body not read", func(t *testing.T) {
		v := want(t, "fault.huge_body", "succeeded", []int{200}, "")
		a := v.Attempts[0]
		if len(a.Response) > engine.MaxResponseExcerpt || !strings.HasPrefix(a.Response, "0123456789abcdef") {
			t.Errorf("stored excerpt is %d bytes (%.20q…), want the first at most %d", len(a.Response), a.Response, engine.MaxResponseExcerpt)
		}
		if time.Duration(a.Duration) > timeout/2 {
			t.Errorf("the attempt took %s: it read far more of the body than it keeps", time.Duration(a.Duration))
		}
		// Wait for the receiver's writes to end, then see how far it got.
		select {
		case <-hugeDone:
		case <-time.After(5 * time.Second):
		}
		if n := hugeWritten.Load(); n >= 50<<20 {
			t.Errorf("the receiver wrote all %d bytes: the body was read to its end", n)
		} else {
			t.Logf("the receiver wrote %d KiB of 50 MiB before the connection was closed (socket buffers included)", n>>10)
		}
	})
	t.Run("500 then 200, per event: each succeeded on attempt 2", func(t *testing.T) {
		for _, id := range deliveries["fault.flip"] {
			in.waitState(id, "succeeded")
			v := in.attempts(id)
			var got []int
			for _, a := range v.Attempts {
				got = append(got, a.Status)
			}
			if !slices.Equal(got, []int{500, 200}) {
				t.Errorf("delivery %s: attempt statuses %v, want [500 200]", id, got)
			}
		}
		if n := len(receivers["fault.flip"].got()); n != 10 {
			t.Errorf("the receiver got %d requests, want 10", n)
		}
		receivers["fault.flip"].checkSignatures()
	})
}

// failingStore is the real store with writes that fail while failWrites is
// set, as they do when the disk is full or the file cannot be written: the
// error is the one storage returns when a commit fails.
type failingStore struct {
	*storage.DB
	failWrites     atomic.Bool
	failedAppends  atomic.Int64
	failedAttempts atomic.Int64
}

func errStorageFull() error {
	return &engine.Error{Code: engine.CodeUnavailable, Message: "storage cannot write now; retry later",
		Err: fmt.Errorf("storage: commit: %w", syscall.ENOSPC)}
}

func (s *failingStore) AppendEvent(ctx context.Context, in engine.NewEvent) (engine.IngestResult, error) {
	if s.failWrites.Load() {
		s.failedAppends.Add(1)
		return engine.IngestResult{}, errStorageFull()
	}
	return s.DB.AppendEvent(ctx, in)
}

// RecordOutcome is how the dispatcher records an attempt's outcome.
func (s *failingStore) RecordOutcome(ctx context.Context, u engine.OutcomeUpdate) (engine.Delivery, error) {
	if s.failWrites.Load() {
		s.failedAttempts.Add(1)
		return engine.Delivery{}, errStorageFull()
	}
	return s.DB.RecordOutcome(ctx, u)
}

// testClient is the attempts' client for services wired by hand: plain
// http to loopback receivers, no redirects.
func testClient() *http.Client {
	return &http.Client{
		Transport:     &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// postEvent posts an ingest to acme and returns the whole answer, headers
// included.
func (in *instance) postEvent(body string, header ...string) (*http.Response, []byte) {
	in.t.Helper()
	return in.postEventTo("acme", body, header...)
}

// postEventTo is postEvent for tenant's ingest.
func (in *instance) postEventTo(tenant, body string, header ...string) (*http.Response, []byte) {
	in.t.Helper()
	req, err := http.NewRequest("POST", in.base+"/v1/tenants/"+tenant+"/events", strings.NewReader(body))
	if err != nil {
		in.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return doRequest(in.t, req)
}

// doRequest sends req and returns the answer and its body.
func doRequest(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, raw
}

// get makes an unauthenticated GET and returns the answer and its body.
func (in *instance) get(path string) (*http.Response, []byte) {
	in.t.Helper()
	req, err := http.NewRequest("GET", in.base+path, nil)
	if err != nil {
		in.t.Fatal(err)
	}
	return doRequest(in.t, req)
}

// wantProblem fails the test unless resp is a problem+json with status,
// code and a Retry-After of retryAfter seconds, and returns its detail.
func wantProblem(t *testing.T, resp *http.Response, raw []byte, status int, code, retryAfter string) string {
	t.Helper()
	var p struct {
		Type, Title, Code, Detail string
		Status                    int
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("answer %d %q: %v", resp.StatusCode, raw, err)
	}
	if resp.StatusCode != status || p.Status != status || p.Code != code || p.Type != "urn:webhookd:problem:"+code || p.Detail == "" {
		t.Errorf("answer %d %s, want %d with code %s and a detail", resp.StatusCode, raw, status, code)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	if got := resp.Header.Get("Retry-After"); got != retryAfter {
		t.Errorf("Retry-After %q, want %q", got, retryAfter)
	}
	return p.Detail
}

// TestFaults_StorageWriteFails injects write failures through the Store
// interface while attempts are in flight and ingests come in: ingest
// answers 503 unavailable with Retry-After, outcomes that cannot be
// recorded leave their deliveries pending (and attempted again), and once
// writes work again everything acknowledged is delivered and nothing
// refused was stored.
func TestFaults_StorageWriteFails(t *testing.T) {
	t.Parallel()
	db, err := storage.Open(filepath.Join(t.TempDir(), "webhookd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store := &failingStore{DB: db}
	disp := engine.NewDispatcher(store, engine.DispatcherOptions{
		Policy: engine.RetryPolicy{
			Schedule: []time.Duration{20 * time.Millisecond, 40 * time.Millisecond}, Deadline: time.Minute,
			AttemptTimeout: 5 * time.Second, RetryAfterMax: time.Second,
		},
		Client: testClient(),
	})
	svc := engine.NewService(store, disp, engine.ServiceOptions{Targets: engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}})
	api := httptest.NewServer(httpapi.New(svc, httpapi.Options{Tokens: []string{testToken}}))
	t.Cleanup(api.Close)
	if err := disp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { disp.Stop(context.Background()) })
	in := &instance{t: t, base: api.URL}
	in.setup()

	hold := make(chan struct{})
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n <= 3 {
			<-hold // the first attempts end while writes fail
		}
		w.WriteHeader(http.StatusOK)
	})
	ep := in.createEndpoint(rc.srv.URL, "*")
	rc.setSecret(ep.Secret)

	var acked []ingestResponse
	for i := range 3 {
		acked = append(acked, in.ingest("invoice.paid", fmt.Sprintf(`{"acked":%d}`, i)))
	}
	deadline := time.Now().Add(10 * time.Second)
	poll(time.Until(deadline), func() bool { return len(rc.got()) >= 3 })

	store.failWrites.Store(true)
	for i := range 3 {
		resp, raw := in.postEvent(fmt.Sprintf(`{"type":"invoice.paid","data":{"refused":%d}}`, i))
		wantProblem(t, resp, raw, 503, "unavailable", "1")
	}
	close(hold) // the receiver answers 200; the outcome cannot be recorded
	// First the attempts' records fail, then their retries a second later.
	poll(time.Until(deadline), func() bool { return store.failedAttempts.Load() >= 6 })
	if n := store.failedAttempts.Load(); n < 6 {
		t.Fatalf("%d recordings failed, want every attempt's and its retry's (6)", n)
	}
	for _, ev := range acked {
		if d := in.delivery(ev.Deliveries[0].ID); d.State != "pending" && d.State != "delivering" {
			t.Errorf("delivery %s is %s while its outcome could not be recorded, want pending", d.ID, d.State)
		}
	}

	store.failWrites.Store(false)
	acked = append(acked, in.ingest("invoice.paid", `{"acked":3}`))
	for _, ev := range acked {
		in.waitState(ev.Deliveries[0].ID, "succeeded")
	}
	rc.checkSignatures()
	delivered := map[string]int{}
	for _, r := range rc.got() {
		delivered[r.id]++
		if bytes.Contains(r.body, []byte(`"refused"`)) {
			t.Errorf("a refused ingest was delivered: %s", r.body)
		}
	}
	duplicates := 0
	for _, ev := range acked {
		if delivered[ev.ID] == 0 {
			t.Errorf("acknowledged event %s never reached the receiver", ev.ID)
		}
		duplicates += max(0, delivered[ev.ID]-1)
	}
	if err := disp.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	stored := 0
	err = db.ForEachEvent(context.Background(), func(ev engine.Event, ds []engine.Delivery) error {
		stored++
		if bytes.Contains(ev.Body, []byte(`"refused"`)) {
			t.Errorf("a refused ingest is in the log: %s", ev.Body)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if stored != len(acked) {
		t.Errorf("%d events in the log, want the %d acknowledged", stored, len(acked))
	}
	if err := db.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	reliabilityReport(t, "storage write failure: %d ingests refused with 503, %d outcome records failed, %d acknowledged events all delivered, %d duplicate deliveries",
		store.failedAppends.Load(), store.failedAttempts.Load(), len(acked), duplicates)
}

// TestFaults_DiskFull puts the database on a 1 MiB tmpfs, ingests until
// the disk is full, and checks that ingest answers 503 unavailable rather
// than losing or half-writing anything, that the service goes on once the
// file system has room again, and that every acknowledged event is kept
// and delivered. It needs to mount a tmpfs (root, or CAP_SYS_ADMIN) and
// skips otherwise. Not parallel: it mounts.
func TestFaults_DiskFull(t *testing.T) {
	skipOnPostgres(t, "a full file system under the bbolt file")
	mnt := mountTmpfs(t, "1m")
	in := startInstance(t, mnt, testConfig)
	in.setup()
	rc := newReceiver(t, status(http.StatusOK))
	ep := in.createEndpoint(rc.srv.URL, "*")
	rc.setSecret(ep.Secret)

	pad := strings.Repeat("x", 16<<10)
	var acked []ingestResponse
	full := false
	for i := 0; i < 200 && !full; i++ {
		resp, raw := in.postEvent(fmt.Sprintf(`{"type":"invoice.paid","data":{"n":%d,"pad":%q}}`, i, pad))
		switch resp.StatusCode {
		case http.StatusAccepted:
			var ev ingestResponse
			if err := json.Unmarshal(raw, &ev); err != nil {
				t.Fatal(err)
			}
			acked = append(acked, ev)
		case http.StatusServiceUnavailable:
			full = true
			detail := wantProblem(t, resp, raw, 503, "unavailable", "1")
			t.Logf("disk full after %d events: 503 %q", len(acked), detail)
		default:
			t.Fatalf("ingest %d: answer %d %s, want 202 or 503", i, resp.StatusCode, raw)
		}
	}
	if !full {
		t.Fatalf("%d events of 16 KiB on a 1 MiB file system and never a 503", len(acked))
	}
	if len(acked) == 0 {
		t.Fatal("the first ingest already failed: the test learns nothing")
	}
	// Reads still work while the disk is full.
	in.mustCall(200, "GET", "/v1/tenants/acme/events/"+acked[0].ID, nil, nil)
	// A load balancer must stop sending ingest here: /readyz says what
	// ingest says.
	resp, raw := in.get("/readyz")
	if detail := wantProblem(t, resp, raw, 503, "unavailable", "1"); !strings.Contains(detail, "storage") {
		t.Errorf("/readyz with the disk full: %q, want the reason to name the storage", detail)
	}

	if out, err := exec.Command("mount", "-o", "remount,size=64m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount with room: %v: %s", err, out)
	}
	// Ready again without any ingest: a balancer that took this node out
	// sends none until it is.
	waitFor(t, "/readyz 200 after the file system grew", func() bool {
		resp, _ := in.get("/readyz")
		return resp.StatusCode == 200
	})
	acked = append(acked, in.ingest("invoice.paid", `{"after":"recovery"}`))
	for _, ev := range acked {
		in.waitState(ev.Deliveries[0].ID, "succeeded")
	}
	rc.checkSignatures()
	in.stop()

	db, err := storage.Open(filepath.Join(mnt, "webhookd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Check(); err != nil {
		t.Errorf("Check after the disk filled: %v", err)
	}
	stored := map[string]bool{}
	err = db.ForEachEvent(context.Background(), func(ev engine.Event, ds []engine.Delivery) error {
		stored[ev.ID] = true
		if len(ds) != 1 || ds[0].State != engine.StateSucceeded {
			t.Errorf("event %s: %d deliveries, want 1 succeeded", ev.ID, len(ds))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range acked {
		if !stored[ev.ID] {
			t.Errorf("acknowledged event %s is not in the log", ev.ID)
		}
	}
	reliabilityReport(t, "disk full (1 MiB tmpfs): %d events acknowledged before 503, all kept and delivered after the file system grew; %d events in the log",
		len(acked)-1, len(stored))
}

// mountTmpfs mounts a tmpfs of size (as mount's size option: "1m") in a
// temporary directory and returns its path; the test skips unless it may
// mount one (root, or CAP_SYS_ADMIN). Call it before starting an instance
// on it: the unmount is registered first, so it runs after the instance
// stops.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	mnt := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	return mnt
}

// percentile returns the p-th percentile (0 < p <= 1) of ds, sorted in
// place.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(float64(len(ds))*p+0.5) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

// TestFaults_HangingReceiverDoesNotSlowIngest keeps every worker busy with
// endpoints that hang for the whole attempt timeout and measures ingest
// latency meanwhile. An attempt never holds a write transaction (nor
// anything ingest waits for), so ingest stays as fast as without them.
//
// Not parallel: it measures ingest latency.
func TestFaults_HangingReceiverDoesNotSlowIngest(t *testing.T) {
	const timeout = 2 * time.Second
	cfg := configWith(t, testConfig, map[string]any{
		"delivery.attempt_timeout":    timeout.String(),
		"delivery.tenant_concurrency": 16, // every worker, all on one tenant
		"log.level":                   "info",
	})
	in := startInstance(t, t.TempDir(), cfg)
	in.setup()
	var hang atomic.Bool
	release := make(chan struct{})
	var hanging atomic.Int64
	answer := func(_ int, w http.ResponseWriter, r *http.Request) {
		if hang.Load() {
			hanging.Add(1)
			defer hanging.Add(-1)
			select { // hang until the attempt times out
			case <-r.Context().Done():
				return
			case <-release:
			}
		}
		w.WriteHeader(http.StatusOK)
	}
	// testConfig: 16 workers, 4 per endpoint: four endpoints take them all.
	for range 4 {
		rc := newReceiver(t, answer)
		ep := in.createEndpoint(rc.srv.URL, "payment.succeeded")
		rc.setSecret(ep.Secret)
	}
	t.Cleanup(func() { close(release) })

	measure := func(n int) []time.Duration {
		lat := make([]time.Duration, 0, n)
		for i := range n {
			start := time.Now()
			in.ingest("payment.succeeded", `{"n":`+strconv.Itoa(i)+`}`)
			lat = append(lat, time.Since(start))
		}
		return lat
	}
	n := 200
	if testing.Short() {
		n = 50
	}
	base := measure(n)

	hang.Store(true)
	poll(10*time.Second, func() bool {
		if hanging.Load() >= 16 {
			return true
		}
		in.ingest("payment.succeeded", `{"warm":true}`)
		return false
	})
	if got := hanging.Load(); got < 16 {
		t.Fatalf("%d attempts hanging, want all 16 workers", got)
	}
	hung := measure(n)
	stillHanging := hanging.Load()
	if onPostgres {
		// When the first hung attempts time out, a node of a cluster
		// claims the next ones from the database: allow that one claim.
		poll(time.Second, func() bool { stillHanging = hanging.Load(); return stillHanging >= 16 })
	}

	b50, b99 := percentile(base, 0.5), percentile(base, 0.99)
	h50, h99, hMax := percentile(hung, 0.5), percentile(hung, 0.99), percentile(hung, 1)
	reliabilityReport(t, "ingest latency, %d events each: receivers answering at once p50 %s p99 %s; all 16 workers hanging on %s attempts p50 %s p99 %s max %s",
		n, b50.Round(time.Microsecond), b99.Round(time.Microsecond), timeout, h50.Round(time.Microsecond), h99.Round(time.Microsecond), hMax.Round(time.Microsecond))
	if stillHanging < 16 {
		t.Errorf("only %d attempts were hanging at the end of the measurement, want 16", stillHanging)
	}
	if h99 > timeout/4 || hMax > timeout/2 {
		t.Errorf("with every worker hanging, ingest p99 %s and max %s; want them far below the %s attempt timeout", h99, hMax, timeout)
	}
}

// TestIngest_Backpressure sets [ingest] max_pending to 6 and holds every
// attempt: the seventh ingest is refused with 503 overloaded and
// Retry-After, and ingest works again once the backlog drains.
func TestIngest_Backpressure(t *testing.T) {
	t.Parallel()
	cfg := configWith(t, testConfig, map[string]any{
		"ingest.max_pending":       6,
		"delivery.attempt_timeout": "10s",
	})
	in := startInstance(t, t.TempDir(), cfg)
	in.setup()
	release := make(chan struct{})
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	})
	ep := in.createEndpoint(rc.srv.URL, "*")
	rc.setSecret(ep.Secret)
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })

	var acked []ingestResponse
	for i := range 6 {
		acked = append(acked, in.ingest("invoice.paid", fmt.Sprintf(`{"n":%d}`, i)))
	}
	in.waitCounted(6)
	resp, raw := in.postEvent(`{"type":"invoice.paid","data":{"refused":true}}`, "Idempotency-Key", "over-the-bound")
	detail := wantProblem(t, resp, raw, 503, "overloaded", "5")
	if !strings.Contains(detail, "max_pending") {
		t.Errorf("detail %q does not name the setting", detail)
	}
	if code := in.call("GET", "/readyz", nil, nil); code != 503 {
		t.Errorf("/readyz answered %d while ingest is pushed back, want 503", code)
	}

	once.Do(func() { close(release) })
	for _, ev := range acked {
		in.waitState(ev.Deliveries[0].ID, "succeeded")
	}
	waitFor(t, "/readyz 200 after the backlog drained", func() bool { return in.call("GET", "/readyz", nil, nil) == 200 })
	// The same request again, now that the backlog drained: stored as new.
	var res ingestResponse
	in.mustCall(202, "POST", "/v1/tenants/acme/events", `{"type":"invoice.paid","data":{"refused":true}}`, &res, "Idempotency-Key", "over-the-bound")
	in.waitState(res.Deliveries[0].ID, "succeeded")
	ids := map[string]bool{}
	for _, r := range rc.got() {
		ids[r.id] = true
	}
	if len(ids) != 7 {
		t.Errorf("the receiver got %d distinct events, want 7 (6, then the one sent again after the refusal)", len(ids))
	}
	rc.checkSignatures()
}
