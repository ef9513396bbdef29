package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/webhookd/webhookd/postgres/pgtest"
)

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

// driverEnv selects the driver the tests run webhookd on: unset or
// "bbolt", the bbolt file (the default); "postgres", PostgreSQL, on the
// server pgtest names. CI runs the package once with each.
const driverEnv = "WEBHOOKD_TEST_DRIVER"

// onPostgres reports whether the tests run webhookd on the postgres
// driver (driverEnv).
var onPostgres = os.Getenv(driverEnv) == postgreSQL

// testDriver is the driver the tests run webhookd on: bbolt or
// postgreSQL (driverEnv).
func testDriver() string {
	if onPostgres {
		return postgreSQL
	}
	return bbolt
}

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

// duration is a TOML duration string, as webhookd's config holds one.
type duration struct{ time.Duration }

func (d *duration) UnmarshalText(b []byte) (err error) {
	d.Duration, err = time.ParseDuration(string(b))
	return err
}

// defaults is webhookd's built-in configuration as config.example.toml
// lists it (a test of package main holds the two equal), read once.
var defaults = sync.OnceValues(func() (defaultsConfig, error) {
	var c defaultsConfig
	_, err := toml.DecodeFile(filepath.Join("..", "config.example.toml"), &c)
	return c, err
})

// defaultsConfig is what the tests read of the defaults.
type defaultsConfig struct {
	Delivery struct {
		AttemptTimeout duration `toml:"attempt_timeout"`
	}
}

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
			AttemptTimeout duration `toml:"attempt_timeout"`
		}
	}
	d, err := defaults()
	if err != nil {
		t.Fatal(err)
	}
	c.Delivery.AttemptTimeout = d.Delivery.AttemptTimeout
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

// configWith returns the TOML config base with the keys of set
// ("section.key") set to their values, so that a test changes only what it
// is about and keeps everything else of testConfig.
func configWith(tb testing.TB, base string, set map[string]any) string {
	tb.Helper()
	var m map[string]any
	if _, err := toml.Decode(base, &m); err != nil {
		tb.Fatal(err)
	}
	for k, v := range set {
		section, key, ok := strings.Cut(k, ".")
		if !ok {
			tb.Fatalf("configWith: key %q is not section.key", k)
		}
		sub, _ := m[section].(map[string]any)
		if sub == nil {
			sub = make(map[string]any)
		}
		sub[key] = v
		m[section] = sub
	}
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(m); err != nil {
		tb.Fatal(err)
	}
	return b.String()
}

// driverConfigFile rewrites the config file at path for the driver the
// tests run on (onDriver), for a node on db. Several nodes may share one
// file (clusterProcs), and a node started earlier may be reading it right
// now: so a file that needs no change is left alone, and a changed one
// replaces the old by a rename, never by truncating it in place (a node
// that read it half-written started on the defaults: bbolt, no tokens).
func driverConfigFile(t *testing.T, path, db string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	config := onDriver(t, string(b), db)
	if config == string(b) {
		return
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// startProc starts webhookd on the config file and database db, its log
// going to logs, and returns at once (waitListening waits until it
// listens, 10s at most; stop waits 15s for its exit). On the postgres
// driver it first rewrites the config file for it (driverConfigFile).
func startProc(t *testing.T, config, db string, logs io.Writer) *node {
	t.Helper()
	driverConfigFile(t, config, db)
	return launch(t, logs, procWithin, "-config", config, "-listen", "127.0.0.1:0", "-db", db)
}

// procWithin bounds how long startProc's and startInstance's nodes are
// waited for: to listen, and to exit after SIGTERM.
const procWithin = 15 * time.Second

// procFiles writes config to cfgPath and creates webhookd.log beside it
// for the processes of a test (nodeLog).
func procFiles(t *testing.T, cfgPath, config string) *os.File {
	t.Helper()
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return nodeLog(t, filepath.Dir(cfgPath))
}

// instance is one webhookd serving on a loopback port: a process of the
// built binary (startInstance), or a service a test wired itself, known
// by its base URL alone.
type instance struct {
	t    *testing.T
	base string
	node *node       // nil for a service the test wired itself
	logs *syncBuffer // what the process logged (its stderr)
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
// waits until it listens. The process is stopped as SIGTERM stops it
// when t ends.
func startInstance(t *testing.T, dir, config string) *instance {
	t.Helper()
	cfgPath, db := filepath.Join(dir, "webhookd.toml"), filepath.Join(dir, "webhookd.db")
	if err := os.WriteFile(cfgPath, []byte(onDriver(t, config, db)), 0o600); err != nil {
		t.Fatal(err)
	}
	in := &instance{t: t, logs: &syncBuffer{}}
	in.node = launch(t, in.logs, procWithin, "-config", cfgPath, "-listen", "127.0.0.1:0", "-db", db)
	in.base = in.node.waitListening()
	t.Cleanup(in.stop)
	return in
}

// stop shuts the process down with SIGTERM and waits for its clean exit.
// Safe to call twice; a service the test wired itself is the test's to
// stop.
func (in *instance) stop() {
	if in.node == nil {
		return
	}
	n := in.node
	in.node = nil
	n.stop()
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

// waitCountedAtMost waits, on the postgres driver, until the node counts
// at most n pending deliveries: deliveries that ended since its last
// count of the database are still in its count until the next (a few
// seconds), so a test that needs the room a bound leaves, exactly, waits
// here first. A single node's count is exact at once.
func (in *instance) waitCountedAtMost(n int) {
	in.t.Helper()
	if !onPostgres {
		return
	}
	waitFor(in.t, fmt.Sprintf("the node to count at most %d pending deliveries", n), func() bool {
		m, err := scrapeMetrics(in.base)
		return err == nil && m["webhookd_pending_deliveries"] <= float64(n)
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
	time.Sleep(time.Until(time.Unix(sec+1, 0))) // the real process's clock must pass the second
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

// scrapeMetrics reads the unlabelled samples of webhookd's /metrics.
func scrapeMetrics(base string) (map[string]float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}
