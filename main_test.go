package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/webhookd/webhookd/postgres/pgtest"
)

// TestMain runs the tests, then removes the binary buildWebhookd built.
//
// Unless -test.parallel is given (or -test.fuzz, for which it counts the
// fuzzing processes), the parallel tests run 4 per CPU rather than go
// test's 1: most of their time goes to waiting for retry schedules,
// receivers and child processes, not to computing, and with one per CPU
// the longest of them (the kill tests) often start last.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) {
		given = given || f.Name == "test.parallel" || f.Name == "test.fuzz" || f.Name == "test.fuzzworker"
	})
	if !given {
		flag.Set("test.parallel", strconv.Itoa(4*runtime.GOMAXPROCS(0)))
	}
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// millis is a duration the API gives as a whole number of milliseconds
// (an attempt's duration_ms).
type millis time.Duration

func (m *millis) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*m = millis(time.Duration(n) * time.Millisecond)
	return nil
}

// testConfig is a millisecond schedule so the suite stays fast: 4 attempts,
// 20/40/80 ms apart, no jitter.
const testConfig = `
[server]
shutdown_timeout = "2s"
[api]
tokens = ["test-admin-token-0123456789"]
[delivery]
allow_http = true               # the receivers are httptest servers:
allow_private_targets = true    # plain http on 127.0.0.1
schedule = ["20ms", "40ms", "80ms"]
jitter = 0
deadline = "30s"
attempt_timeout = "300ms"
retry_after_max = "2s"
workers = 16
endpoint_concurrency = 4
[log]
level = "debug"
`

const testToken = "test-admin-token-0123456789"

// onPostgres reports whether the tests run webhookd on the postgres
// driver: WEBHOOKD_TEST_DRIVER=postgres, on the server pgtest names.
// Unset or "bbolt": the bbolt file, the default.
var onPostgres = os.Getenv("WEBHOOKD_TEST_DRIVER") == "postgres"

// skipOnPostgres skips t on the postgres driver, for the reason why: it
// tests the bbolt file itself, or (said so) a known bug.
func skipOnPostgres(t testing.TB, why string) {
	t.Helper()
	if onPostgres {
		t.Skip("not on the postgres driver: " + why)
	}
}

// pgSchemas maps a database path to its schema on the postgres driver,
// so that a node restarted on the same path finds the same state.
var pgSchemas = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// onDriver returns config (TOML) for the driver the tests run on: as it
// is on bbolt; on postgres with [storage] driver, url, schema and lease
// set, the schema being db's (made for the first test that runs a node
// on db, and dropped when that test ends) and the lease outlasting
// [delivery] attempt_timeout by two seconds. A config that names its
// driver already (clusterConfig) stays as it is.
func onDriver(t *testing.T, config, db string) string {
	t.Helper()
	if !onPostgres {
		return config
	}
	var c struct {
		Storage  struct{ Driver string }
		Delivery struct {
			AttemptTimeout Duration `toml:"attempt_timeout"`
		}
	}
	c.Delivery.AttemptTimeout = defaultConfig().Delivery.AttemptTimeout
	if _, err := toml.Decode(config, &c); err != nil {
		t.Fatal(err)
	}
	if c.Storage.Driver != "" {
		return config
	}
	// pgtest.Schema skips t without a server: the lock is released by a
	// defer, or every other test would wait on it for good.
	schema := func() string {
		pgSchemas.Lock()
		defer pgSchemas.Unlock()
		schema, ok := pgSchemas.m[db]
		if !ok {
			schema = pgtest.Schema(t)
			pgSchemas.m[db] = schema
			t.Cleanup(func() {
				pgSchemas.Lock()
				defer pgSchemas.Unlock()
				delete(pgSchemas.m, db)
			})
		}
		return schema
	}()
	return configWith(t, config, map[string]any{
		"storage.driver": "postgres",
		"storage.url":    pgtest.URL(t),
		"storage.schema": schema,
		"storage.lease":  (c.Delivery.AttemptTimeout.Duration + 2*time.Second).String(),
	})
}

// instance is one webhookd started with run() on a loopback port.
type instance struct {
	t      *testing.T
	base   string
	cancel context.CancelFunc
	done   chan error
	logs   *syncBuffer
}

// syncBuffer is an output a test reads while it is written. The zero
// value is empty and ready.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // closed by the next Write; nil until next asks
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written != nil {
		close(s.written)
		s.written = nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// next returns what was written so far and a channel that the next Write
// closes: a reader that finds no answer in the text waits on the channel
// instead of polling.
func (s *syncBuffer) next() (string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written == nil {
		s.written = make(chan struct{})
	}
	return s.b.String(), s.written
}

// startInstance runs webhookd on dir's database with config (TOML) and
// waits until it listens.
func startInstance(t *testing.T, dir, config string) *instance {
	t.Helper()
	cfgPath, db := filepath.Join(dir, "webhookd.toml"), filepath.Join(dir, "webhookd.db")
	if err := os.WriteFile(cfgPath, []byte(onDriver(t, config, db)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stdout, logs := &syncBuffer{}, &syncBuffer{}
	in := &instance{t: t, cancel: cancel, done: make(chan error, 1), logs: logs}
	args := []string{"-config", cfgPath, "-listen", "127.0.0.1:0", "-db", db}
	go func() { in.done <- run(ctx, args, func(string) string { return "" }, stdout, logs) }()
	timeout := time.After(10 * time.Second)
	for {
		s, written := stdout.next()
		if strings.Contains(s, "listening on ") {
			in.base = strings.TrimSpace(s[strings.Index(s, "http://"):])
			t.Cleanup(func() { in.stop() })
			return in
		}
		select {
		case err := <-in.done:
			t.Fatalf("webhookd exited at start: %v\n%s", err, logs.String())
		case <-written:
		case <-timeout:
			cancel()
			t.Fatalf("webhookd did not start\n%s", logs.String())
		}
	}
}

// stop shuts the instance down as SIGTERM would, and waits for run to end.
func (in *instance) stop() {
	if in.cancel == nil {
		return
	}
	in.cancel()
	in.cancel = nil
	select {
	case err := <-in.done:
		if err != nil {
			in.t.Errorf("run: %v", err)
		}
	case <-time.After(15 * time.Second):
		in.t.Error("webhookd did not stop within 15s")
	}
	if in.t.Failed() {
		in.t.Logf("webhookd logs:\n%s", in.logs.String())
	}
}

// call makes an API request with the admin token and decodes a JSON answer
// into out (when not nil). It returns the status.
func (in *instance) call(method, path string, body any, out any, header ...string) int {
	in.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, in.base+path, r)
	if err != nil {
		in.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			in.t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode
}

func (in *instance) mustCall(want int, method, path string, body any, out any, header ...string) {
	in.t.Helper()
	var raw json.RawMessage
	if got := in.call(method, path, body, &raw, header...); got != want {
		in.t.Fatalf("%s %s: status %d, want %d: %s", method, path, got, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			in.t.Fatal(err)
		}
	}
}

type endpointCreated struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

type ingestResponse struct {
	ID         string `json:"id"`
	Deliveries []struct {
		ID         string `json:"id"`
		EndpointID string `json:"endpoint_id"`
		State      string `json:"state"`
	} `json:"deliveries"`
}

type deliveryView struct {
	ID            string    `json:"id"`
	EventID       string    `json:"event_id"`
	EndpointID    string    `json:"endpoint_id"`
	State         string    `json:"state"`
	Reason        string    `json:"reason"`
	LastStatus    int       `json:"last_status"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
	Attempts      []struct {
		Number     int    `json:"number"`
		Cycle      int    `json:"cycle"`
		Status     int    `json:"status"`
		Error      string `json:"error"`
		Response   string `json:"response"`
		Outcome    string `json:"outcome"`
		RetryAfter int64  `json:"retry_after_ms"`
	} `json:"attempts"`
	Replays []struct {
		By string `json:"by"`
	} `json:"replays"`
}

// setup creates tenant acme, the catalogue types payment.succeeded and
// invoice.paid, and returns nothing; endpoints are per test.
func (in *instance) setup() {
	in.t.Helper()
	in.mustCall(201, "PUT", "/v1/tenants/acme", map[string]string{"name": "Acme"}, nil)
	in.mustCall(201, "PUT", "/v1/event-types/payment.succeeded", map[string]string{"description": "a payment went through"}, nil)
	in.mustCall(201, "PUT", "/v1/event-types/invoice.paid", map[string]string{"description": "an invoice was paid"}, nil)
}

func (in *instance) createEndpoint(url string, types ...string) endpointCreated {
	in.t.Helper()
	var ep endpointCreated
	in.mustCall(201, "POST", "/v1/tenants/acme/endpoints", map[string]any{"url": url, "event_types": types}, &ep)
	if ep.ID == "" || !strings.HasPrefix(ep.Secret, "whsec_") {
		in.t.Fatalf("endpoint create answered %+v", ep)
	}
	return ep
}

func (in *instance) ingest(typ, data string, header ...string) ingestResponse {
	in.t.Helper()
	var res ingestResponse
	in.mustCall(202, "POST", "/v1/tenants/acme/events", fmt.Sprintf(`{"type":%q,"data":%s}`, typ, data), &res, header...)
	return res
}

func (in *instance) delivery(id string) deliveryView {
	in.t.Helper()
	var d deliveryView
	in.mustCall(200, "GET", "/v1/tenants/acme/deliveries/"+id, nil, &d)
	return d
}

// waitState polls a delivery until it is in state, or fails after 15s.
func (in *instance) waitState(id, state string) deliveryView {
	in.t.Helper()
	var d deliveryView
	if !poll(15*time.Second, func() bool { d = in.delivery(id); return d.State == state }) {
		in.t.Fatalf("delivery %s is %s (reason %q, %d attempts), want %s", id, d.State, d.Reason, len(d.Attempts), state)
	}
	return d
}

// receiver is a loopback endpoint that checks every request's signatures
// with the official Standard Webhooks and Stripe libraries and answers
// what answer says for the n-th request (1-based).
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	secret string
	answer func(n int, w http.ResponseWriter, r *http.Request)

	mu       sync.Mutex
	requests []received
}

type received struct {
	at        time.Time
	id        string
	timestamp string
	body      []byte
	sigErr    error
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{t: t, answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		secret := rc.secret
		rq := received{at: time.Now(), id: r.Header.Get("webhook-id"), timestamp: r.Header.Get("webhook-timestamp"), body: body}
		if wh, err := standardwebhooks.NewWebhook(secret); err != nil {
			rq.sigErr = err
		} else if err := wh.Verify(body, r.Header); err != nil {
			rq.sigErr = fmt.Errorf("standard webhooks: %w", err)
		} else if err := stripewebhook.ValidatePayloadWithTolerance(body, r.Header.Get("X-Webhook-Signature"), secret, 5*time.Minute); err != nil {
			rq.sigErr = fmt.Errorf("stripe scheme: %w", err)
		}
		rc.requests = append(rc.requests, rq)
		n := len(rc.requests)
		rc.mu.Unlock()
		rc.answer(n, w, r)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) setSecret(s string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secret = s
}

func (rc *receiver) got() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.requests...)
}

// checkSignatures fails the test for any request whose signature did not
// verify with the official libraries.
func (rc *receiver) checkSignatures() {
	rc.t.Helper()
	for i, r := range rc.got() {
		if r.sigErr != nil {
			rc.t.Errorf("request %d: signature rejected: %v", i+1, r.sigErr)
		}
	}
}

func status(code int) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

// waitCounted waits, on the postgres driver, until the node counts at
// least n pending deliveries (webhookd_pending_deliveries): a node of a
// cluster counts the database's every few seconds (postgres
// Scheduler.Pending), where a single node's count is exact at once. A
// test that checks a bound on the pending count waits here first.
func (in *instance) waitCounted(n int) {
	in.t.Helper()
	if !onPostgres {
		return
	}
	waitFor(in.t, fmt.Sprintf("the node to count %d pending deliveries", n), func() bool {
		m, err := scrapeMetrics(in.base)
		return err == nil && m["webhookd_pending_deliveries"] >= float64(n)
	})
}

// waitFor polls cond until it holds, failing the test after 15s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !poll(15*time.Second, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// afterSecond waits until the Unix second after webhook-timestamp ts (as
// a receiver got it) has begun, so that an attempt signed from now on
// carries a later timestamp: the clock passing is what the caller tests.
// It returns ts as a number.
func afterSecond(t *testing.T, ts string) int64 {
	t.Helper()
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		t.Fatalf("webhook-timestamp %q: %v", ts, err)
	}
	time.Sleep(time.Until(time.Unix(sec+1, 0)))
	return sec
}

// poll is the tests' one bounded poller, for a condition that nothing
// signals (a delivery's state in the API, a gauge): it calls cond at once
// and then every 10ms until it holds or limit has passed, and reports
// whether it held.
func poll(limit time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(limit); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func TestExtraProc(t *testing.T) {
	tests := []struct {
		name  string
		env   string
		procs int
		want  int
	}{
		{"default: one more than the CPUs", "", 2, 3},
		{"one CPU", "", 1, 2},
		{"the operator's GOMAXPROCS stands", "2", 2, 0},
		{"even when it is odd", "7", 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "GOMAXPROCS" {
					return tt.env
				}
				return ""
			}
			if got := extraProc(getenv, tt.procs); got != tt.want {
				t.Errorf("extraProc(GOMAXPROCS=%q, %d) = %d, want %d", tt.env, tt.procs, got, tt.want)
			}
		})
	}
}
