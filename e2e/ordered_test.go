package e2e

// Ordered delivery end to end: endpoints whose ordering is key or
// endpoint, loopback receivers that record the order requests arrive in
// and fail some of them, and the same across kill -9.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/postgres/pgtest"
	"github.com/webhookd/webhookd/storage"
)

// orderedArrival is one request an orderedReceiver got.
type orderedArrival struct {
	sequence uint64
	key      string
	ok       bool // answered 2xx
}

// orderedReceiver is one loopback server for every endpoint of a test
// (by URL path). It records, per path, the requests in the order they
// arrived, with their envelope's sequence and ordering key; while faults
// is set it answers 502 to about one request in ten and holds about one
// in a hundred past the attempt timeout.
type orderedReceiver struct {
	srv    *httptest.Server
	faults atomic.Bool
	hang   time.Duration

	mu       sync.Mutex
	arrivals map[string][]orderedArrival
	problems []string
}

func newOrderedReceiver(t *testing.T, hang time.Duration) *orderedReceiver {
	rc := &orderedReceiver{hang: hang, arrivals: map[string][]orderedArrival{}}
	rc.faults.Store(true)
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *orderedReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var env struct {
		Sequence    uint64 `json:"sequence"`
		OrderingKey string `json:"ordering_key"`
	}
	err = json.Unmarshal(body, &env)
	status := http.StatusNoContent
	hang := false
	if rc.faults.Load() {
		switch n := rand.IntN(100); {
		case n < 10:
			status = http.StatusBadGateway
		case n < 11:
			hang = true
		}
	}
	rc.mu.Lock()
	if err != nil || env.Sequence == 0 {
		rc.problems = append(rc.problems, fmt.Sprintf("%s: envelope without a sequence: %s", r.URL.Path, body))
	}
	rc.arrivals[r.URL.Path] = append(rc.arrivals[r.URL.Path], orderedArrival{env.Sequence, env.OrderingKey, status < 300 && !hang})
	rc.mu.Unlock()
	if hang {
		select { // past the attempt timeout: webhookd gives up and retries
		case <-time.After(rc.hang):
		case <-r.Context().Done():
		}
		return
	}
	w.WriteHeader(status)
}

// outOfOrder returns, for path, the arrivals that came after one of a
// later sequence in the same line (the same key when byKey, else any):
// an event sent before the one ahead of it in its line had succeeded or
// died, or a success out of sequence order. A repeat of the same
// sequence (a retry, or a resend after a restart) is in order.
func (rc *orderedReceiver) outOfOrder(path string, byKey bool) []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	last := map[string]uint64{}
	var bad []string
	for i, a := range rc.arrivals[path] {
		line := ""
		if byKey {
			line = a.key
		}
		if a.sequence < last[line] {
			bad = append(bad, fmt.Sprintf("request %d: sequence %d of key %q after %d", i, a.sequence, a.key, last[line]))
		}
		last[line] = max(last[line], a.sequence)
	}
	return bad
}

// successes returns how many distinct sequences path answered 2xx, and
// how many requests it got.
func (rc *orderedReceiver) successes(path string) (distinct, requests int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	seen := map[uint64]bool{}
	for _, a := range rc.arrivals[path] {
		if a.ok {
			seen[a.sequence] = true
		}
	}
	return len(seen), len(rc.arrivals[path])
}

// createOrderedEndpoint makes an endpoint of acme at url for every type
// with ordering (on_dead skip).
func (in *instance) createOrderedEndpoint(url, ordering string) endpointCreated {
	in.t.Helper()
	var ep endpointCreated
	in.mustCall(201, "POST", "/v1/tenants/acme/endpoints", map[string]any{"url": url, "event_types": []string{"*"}, "ordering": ordering}, &ep)
	return ep
}

// unsettled returns how many of acme's deliveries are pending (in flight
// included) or waiting: none once every one succeeded or died.
func (in *instance) unsettled() int {
	in.t.Helper()
	n := 0
	for _, state := range []string{"pending", "waiting"} {
		var page struct {
			Data []json.RawMessage `json:"data"`
		}
		in.mustCall(200, "GET", "/v1/tenants/acme/deliveries?limit=1000&state="+state, nil, &page)
		n += len(page.Data)
	}
	return n
}

// postKeyed ingests one event of acme with ordering key key (and the
// Idempotency-Key idem, when set) at base; it reports whether the event
// was acknowledged (202).
func postKeyed(client *http.Client, base, key, idem string) (bool, error) {
	body := fmt.Sprintf(`{"type":"payment.succeeded","ordering_key":%q,"data":{"key":%q}}`, key, key)
	req, err := http.NewRequest("POST", base+"/v1/tenants/acme/events", strings.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return false, fmt.Errorf("ingest: %d %s", resp.StatusCode, raw)
	}
	return true, nil
}

// TestOrdered_Faults ingests events over many ordering keys for three
// endpoints of one receiver, ordering none, key and endpoint, while the
// receiver answers 502 to one request in ten and times out one in a
// hundred: at the key endpoint each key's requests arrive in sequence
// order (a retry repeats its sequence; no later event of the key comes
// before the one ahead of it has succeeded or died), at the endpoint
// endpoint all of them do; every delivery of every endpoint ends
// succeeded or dead, and every event that did not die succeeded.
func TestOrdered_Faults(t *testing.T) {
	events, keys := 1000, 50
	if testing.Short() {
		events, keys = 200, 10
	}
	rc := newOrderedReceiver(t, 400*time.Millisecond) // testConfig's attempt_timeout is 300ms
	in := startInstance(t, t.TempDir(), configWith(t, testConfig, map[string]any{"log.level": "warn"}))
	in.setup()
	for _, ordering := range []string{"none", "key", "endpoint"} {
		in.createOrderedEndpoint(rc.srv.URL+"/"+ordering, ordering)
	}

	client := &http.Client{Timeout: 10 * time.Second}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < events; i = int(next.Add(1)) - 1 {
				if _, err := postKeyed(client, in.base, fmt.Sprintf("k%02d", i%keys), ""); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	start := time.Now()
	if !poll(90*time.Second, func() bool { return in.unsettled() == 0 }) {
		t.Fatalf("%d deliveries still pending or waiting after 90s", in.unsettled())
	}
	t.Logf("settled %d events × 3 endpoints %v after the last ingest", events, time.Since(start).Round(time.Millisecond))

	for path, byKey := range map[string]bool{"/key": true, "/endpoint": false} {
		if bad := rc.outOfOrder(path, byKey); len(bad) > 0 {
			t.Errorf("%s: %d requests out of order, the first: %s", path, len(bad), strings.Join(bad[:min(len(bad), 5)], "; "))
		}
	}
	var dead struct {
		Data []struct {
			EndpointID string `json:"endpoint_id"`
		} `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/tenants/acme/dead-letters?limit=1000", nil, &dead)
	for _, path := range []string{"/none", "/key", "/endpoint"} {
		ok, requests := rc.successes(path)
		t.Logf("%s: %d events succeeded in %d requests", path, ok, requests)
		if ok+len(dead.Data) < events {
			t.Errorf("%s: %d events succeeded and %d deliveries are dead in all, of %d events", path, ok, len(dead.Data), events)
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.problems) > 0 {
		t.Errorf("receiver problems: %v", rc.problems)
	}
}

// TestOrdered_KillNine runs webhookd with an endpoint ordered by key and
// one ordered as a whole, a client ingesting keyed events (each retried
// with its Idempotency-Key until acknowledged) and a receiver that
// fails one request in ten, and kills it with SIGKILL at random moments,
// restarting it on the same file: no line ever delivers an event before
// the one ahead of it has succeeded or died (a restart may send the same
// one again), every delivery ends succeeded or dead, and the file passes
// Check after every kill. WEBHOOKD_ORDERED_KILLS sets the number of
// kills (default 8).
func TestOrdered_KillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("the kill -9 test runs without -short (CI's plain go test ./...)")
	}
	t.Parallel()
	kills := 8
	if s := os.Getenv("WEBHOOKD_ORDERED_KILLS"); s != "" {
		if _, err := fmt.Sscan(s, &kills); err != nil || kills < 1 {
			t.Fatalf("WEBHOOKD_ORDERED_KILLS=%q: want a positive number", s)
		}
	}
	webhookdBinary(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "webhookd.db")
	cfgPath := filepath.Join(dir, "webhookd.toml")
	cfg := configWith(t, testConfig, map[string]any{
		"delivery.schedule":        []string{"20ms", "50ms", "100ms", "200ms", "500ms"},
		"delivery.jitter":          0.2,
		"delivery.deadline":        "10m",
		"delivery.attempt_timeout": "2s",
		"log.level":                "warn",
	})
	logs := procFiles(t, cfgPath, cfg)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	rc := newOrderedReceiver(t, 3*time.Second)

	// One client: event n has key k(n%10) and Idempotency-Key n; it is
	// sent again until acknowledged, across restarts.
	var base atomic.Pointer[string]
	none := ""
	base.Store(&none)
	stop := make(chan struct{})
	var acked atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		client := &http.Client{Timeout: 5 * time.Second}
		for n := 0; ; {
			select {
			case <-stop:
				return
			default:
			}
			b := *base.Load()
			if b == "" {
				time.Sleep(5 * time.Millisecond) // no process is up: a client's pause before it looks again
				continue
			}
			if ok, _ := postKeyed(client, b, fmt.Sprintf("k%d", n%10), fmt.Sprintf("n%d", n)); ok {
				acked.Add(1)
				n++
				time.Sleep(2 * time.Millisecond) // the client's rate (the load under test)
			} else {
				time.Sleep(5 * time.Millisecond) // a client's pause before it retries
			}
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()

	checkFile := func(when string) {
		if onPostgres {
			pgSchemas.Lock()
			schema := pgSchemas.m[dbPath]
			pgSchemas.Unlock()
			checkLinesOnPostgres(t, when, schema)
			return
		}
		db, err := storage.Open(dbPath, storage.Options{LockTimeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("%s: open: %v", when, err)
		}
		defer db.Close()
		if err := db.Check(); err != nil {
			t.Fatalf("%s: Check: %v", when, err)
		}
	}
	var current *node
	defer func() {
		if current != nil {
			current.kill()
		}
	}()
	for k := range kills {
		p := startProc(t, cfgPath, dbPath, logs)
		current = p
		b := p.waitListening()
		if k == 0 {
			in := &instance{t: t, base: b}
			in.setup()
			in.createOrderedEndpoint(rc.srv.URL+"/key", "key")
			in.createOrderedEndpoint(rc.srv.URL+"/endpoint", "endpoint")
		}
		base.Store(&b)
		// Ingest and deliver for a random while, then the kill: the moment
		// is the behaviour under test.
		time.Sleep(time.Duration(150+rng.IntN(400)) * time.Millisecond)
		base.Store(&none)
		p.kill()
		current = nil
		checkFile(fmt.Sprintf("after kill %d", k+1))
	}
	close(stop)
	<-done

	// The last run: no faults, every delivery settles.
	rc.faults.Store(false)
	p := startProc(t, cfgPath, dbPath, logs)
	current = p
	in := &instance{t: t, base: p.waitListening()}
	if !poll(60*time.Second, func() bool { return in.unsettled() == 0 }) {
		t.Fatalf("%d deliveries still pending or waiting 60s after the last restart", in.unsettled())
	}
	var dead struct {
		Data []json.RawMessage `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/tenants/acme/dead-letters?limit=1000", nil, &dead)
	p.stop()
	current = nil
	checkFile("at the end")

	for path, byKey := range map[string]bool{"/key": true, "/endpoint": false} {
		if bad := rc.outOfOrder(path, byKey); len(bad) > 0 {
			t.Errorf("%s: %d requests out of order across %d kills, the first: %s", path, len(bad), kills, strings.Join(bad[:min(len(bad), 5)], "; "))
		}
		ok, requests := rc.successes(path)
		t.Logf("%s: %d of %d acknowledged events succeeded, in %d requests, across %d kills", path, ok, acked.Load(), requests, kills)
		if ok+len(dead.Data) < int(acked.Load()) {
			t.Errorf("%s: %d events succeeded and %d deliveries are dead in all, of %d acknowledged", path, ok, len(dead.Data), acked.Load())
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.problems) > 0 {
		t.Errorf("receiver problems: %v", rc.problems)
	}
}

// checkLinesOnPostgres fails t unless every waiting delivery in schema
// waits behind a head (the unique index deliveries_line_head holds the
// other half: at most one head a line).
func checkLinesOnPostgres(t *testing.T, when, schema string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	defer conn.Close(context.Background())
	var headless int
	err = conn.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(*) FROM %[1]s.deliveries w WHERE w.state = 'waiting' AND NOT EXISTS (
		SELECT 1 FROM %[1]s.deliveries h WHERE h.endpoint_id = w.endpoint_id AND h.line = w.line AND h.line <> ''
		AND (h.state IN ('pending', 'paused') OR h.blocking))`, pgx.Identifier{schema}.Sanitize())).Scan(&headless)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	if headless > 0 {
		t.Fatalf("%s: %d waiting deliveries of lines without a head", when, headless)
	}
}
