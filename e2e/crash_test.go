package e2e

// The kill -9 test: the promise that an acknowledged event is never lost,
// checked against a real process killed at random moments.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres"
	"github.com/webhookd/webhookd/postgres/pgtest"
	"github.com/webhookd/webhookd/storage"
	"github.com/webhookd/webhookd/verify"
)

// reliabilityReport logs a result line of the reliability tests and, when
// WEBHOOKD_RELIABILITY_REPORT names a file, appends it there too (the
// numbers of docs/reliability.md come from such a file).
func reliabilityReport(t testing.TB, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log("RELIABILITY " + line)
	path := os.Getenv("WEBHOOKD_RELIABILITY_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Errorf("reliability report: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s: %s\n", time.Now().UTC().Format(time.RFC3339), t.Name(), line)
}

// crashPair is one (event, endpoint) as the receiver sees it: the
// endpoint by its URL path.
type crashPair struct{ event, path string }

type crashPairLog struct {
	body     []byte // the first body received
	requests int
	ok       int  // requests answered 2xx
	refused  bool // answered 422 (the delivery is meant to die)
}

// crashReceiver is one loopback server for every endpoint of the crash
// test (/ep/0, /ep/1, ...). It verifies every request's signature with
// verify.Verifier and records what each (event, endpoint) received. While
// chaos is set it answers 500 to one request in ten; /ep/2 always answers
// 422 to one event in ten (chosen by its id): a permanent failure, dead at
// once. (Not 410, which also disables the endpoint.)
type crashReceiver struct {
	srv   *httptest.Server
	chaos atomic.Bool

	mu         sync.Mutex
	secrets    map[string]string // by path
	pairs      map[crashPair]*crashPairLog
	requests   int
	badSig     int
	mismatched int
	problems   []string
}

func newCrashReceiver(t *testing.T) *crashReceiver {
	rc := &crashReceiver{secrets: make(map[string]string), pairs: make(map[crashPair]*crashPairLog)}
	rc.chaos.Store(true)
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

// permanentlyRefused reports whether /ep/2 answers 422 to event id.
func permanentlyRefused(id string) bool {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32()%10 == 0
}

func (rc *crashReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // webhookd went away mid-request
	}
	id := r.Header.Get("webhook-id")
	path := r.URL.Path
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.requests++
	problem := func(format string, args ...any) {
		if len(rc.problems) < 20 {
			rc.problems = append(rc.problems, fmt.Sprintf(format, args...))
		}
	}
	secret, ok := rc.secrets[path]
	if !ok {
		problem("request for unknown endpoint path %s", path)
	}
	v := verify.Verifier{Secrets: []string{secret}}
	if msg, err := v.Verify(r.Header, body); err != nil || msg.ID != id {
		rc.badSig++
		problem("event %s at %s: signature: %v (verified id %q)", id, path, err, msg.ID)
	}
	pl := rc.pairs[crashPair{id, path}]
	if pl == nil {
		pl = &crashPairLog{body: body}
		rc.pairs[crashPair{id, path}] = pl
	} else if !bytes.Equal(pl.body, body) {
		rc.mismatched++
		problem("event %s at %s: body %q, earlier %q", id, path, body, pl.body)
	}
	pl.requests++
	switch {
	case path == "/ep/2" && permanentlyRefused(id):
		pl.refused = true
		w.WriteHeader(http.StatusUnprocessableEntity)
	case rc.chaos.Load() && rand.IntN(10) == 0:
		w.WriteHeader(http.StatusInternalServerError)
	default:
		pl.ok++
		w.WriteHeader(http.StatusNoContent)
	}
}

// crashIngest is one ingest a client made, as the client saw it.
type crashIngest struct {
	client, n int
	key       string // Idempotency-Key; "" for a client that never retries
	typ       string
	data      string // the data member, compact: the envelope must carry these bytes
	ackID     string // the event id of the 202; "" if no 202 was read
	sent      bool   // at least one request was sent
}

// crashClients drive ingest: half retry each ingest with its
// Idempotency-Key until it is acknowledged (across restarts), half send it
// once and move on whatever happens.
type crashClients struct {
	client *http.Client
	stop   chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	base    string        // "" while webhookd is down
	up      chan struct{} // closed while base is set
	ingests []*crashIngest
	errs    []string
}

func newCrashClients() *crashClients {
	return &crashClients{
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}},
		stop:   make(chan struct{}),
		up:     make(chan struct{}),
	}
}

// current returns webhookd's base URL, "" while it is down, and a channel
// closed once it is up.
func (cc *crashClients) current() (string, <-chan struct{}) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.base, cc.up
}

// setBase sets the base URL the clients send to: "" while webhookd is down.
func (cc *crashClients) setBase(b string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	switch {
	case b != "" && cc.base == "":
		close(cc.up)
	case b == "" && cc.base != "":
		cc.up = make(chan struct{})
	}
	cc.base = b
}

func (cc *crashClients) stopped() bool {
	select {
	case <-cc.stop:
		return true
	default:
		return false
	}
}

// run is one client: it ingests about rate events a second until stop.
func (cc *crashClients) run(c int, retry bool, rate int, seed uint64) {
	defer cc.wg.Done()
	rng := rand.New(rand.NewPCG(seed, uint64(c)))
	var pace time.Duration // 0: as fast as it goes
	if rate > 0 {
		pace = time.Second / time.Duration(rate)
	}
	for n := 0; !cc.stopped(); n++ {
		in := &crashIngest{client: c, n: n, typ: "payment.succeeded"}
		if n%2 == 1 {
			in.typ = "invoice.paid"
		}
		if retry {
			in.key = fmt.Sprintf("c%d-n%d", c, n)
		}
		pad := make([]byte, rng.IntN(300))
		for i := range pad {
			pad[i] = 'a' + byte(rng.IntN(26))
		}
		in.data = fmt.Sprintf(`{"c":%d,"n":%d,"pad":"%s"}`, c, n, pad)
		body := fmt.Sprintf(`{"type":%q,"data":%s}`, in.typ, in.data)
		for tries := 0; ; tries++ {
			base, up := cc.current()
			if base == "" {
				if cc.stopped() { // only when the test ends early
					break
				}
				select { // until webhookd is restarted
				case <-up:
				case <-cc.stop:
				}
				continue
			}
			in.sent = true
			if cc.post(in, base, body) || !retry || tries > 2000 {
				break
			}
			time.Sleep(5 * time.Millisecond) // the client's pause before it retries (the behaviour of a client)
		}
		cc.mu.Lock()
		cc.ingests = append(cc.ingests, in)
		cc.mu.Unlock()
		time.Sleep(pace) // the client's rate (the load under test)
	}
}

// post sends one ingest request and reports whether it was acknowledged.
func (cc *crashClients) post(in *crashIngest, base, body string) bool {
	req, err := http.NewRequest("POST", base+"/v1/tenants/acme/events", strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	if in.key != "" {
		req.Header.Set("Idempotency-Key", in.key)
	}
	resp, err := cc.client.Do(req)
	if err != nil {
		return false // killed before or while answering: not acknowledged
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return false
	}
	if resp.StatusCode != http.StatusAccepted {
		if resp.StatusCode < 500 {
			cc.mu.Lock()
			cc.errs = append(cc.errs, fmt.Sprintf("ingest %s: %d %s", in.data[:20], resp.StatusCode, raw))
			cc.mu.Unlock()
		}
		return false
	}
	var ack struct{ ID string }
	if err := json.Unmarshal(raw, &ack); err != nil || ack.ID == "" {
		return false
	}
	in.ackID = ack.ID
	return true
}

// crashKills is how many times TestCrash_KillNine kills webhookd:
// WEBHOOKD_CRASH_KILLS, or 25.
func crashKills(t *testing.T) int {
	if s := os.Getenv("WEBHOOKD_CRASH_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("WEBHOOKD_CRASH_KILLS=%q: want a positive number", s)
		}
		return n
	}
	return 25
}

// TestCrash_KillNine builds webhookd, runs it on a temporary database with
// clients ingesting concurrently and a receiver that verifies and records
// every delivery, and kills it with SIGKILL at random moments (some
// during start-up and recovery), restarting it on the same file each time.
// After every kill the file must pass Check (bbolt's tx.Check and the
// index invariants). At the end, against the clients' own records:
//
//   - every acknowledged event is in the log with the bytes it was sent
//     with, and exactly once (a retry with its Idempotency-Key after a
//     crash never makes a second event);
//   - every event in the log, acknowledged or not, has all its deliveries
//     (an ingest is whole or absent, never half-present), and each is
//     succeeded (the receiver answered 2xx at least once) or dead with a
//     reason;
//   - the receiver never got a body other than the stored one, nor a
//     signature that does not verify, nor an event that is not in the log;
//   - duplicate deliveries (at-least-once) are counted and reported.
//
// It skips under -short, as the whole package does: CI runs it in the
// plain `go test ./...`. WEBHOOKD_CRASH_KILLS=200 runs it longer (about
// 2 minutes; Check reads the whole, growing file after every kill).
func TestCrash_KillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("the kill -9 test runs without -short (CI's plain go test ./...)")
	}
	t.Parallel() // a process of its own, on its own files and ports
	crashKillNine(t, crashRun{
		kills:     crashKills(t),
		endpoints: [][]string{{"*"}, {"payment.succeeded"}, {"*"}},
		clients:   6, rate: 150, checkEachKill: true,
	})
}

// TestCrash_KillNineFanOut is TestCrash_KillNine with every event fanned
// out to ten endpoints and clients that ingest as fast as they can: the
// kills fall between acknowledgements and the fan-outs they leave owed
// (storage stores an ingest's deliveries in the commits after the one
// that acknowledges it). The file is not opened between kills, so each
// restart's own recovery stores what the kill left owed; at the end
// every acknowledged event has all ten of its deliveries, each
// succeeded or dead with a reason.
func TestCrash_KillNineFanOut(t *testing.T) {
	if testing.Short() {
		t.Skip("the kill -9 test runs without -short (CI's plain go test ./...)")
	}
	t.Parallel()
	eps := make([][]string, 10)
	for i := range eps {
		eps[i] = []string{"*"}
	}
	crashKillNine(t, crashRun{
		kills: max(crashKills(t)/2, 5), endpoints: eps, clients: 16, rate: 0,
		config: map[string]any{"storage.owed_fanout_above": 0}, // every fan-out owed, busy commit or not
	})
}

// crashRun is what a kill -9 test varies.
type crashRun struct {
	kills         int
	endpoints     [][]string // each endpoint's event types, at /ep/0, /ep/1, ...
	clients       int
	rate          int  // each client's events a second; 0: as fast as it goes
	checkEachKill bool // open and Check the file after every kill (which stores what a kill left owed)
	config        map[string]any
}

// crashKillNine is TestCrash_KillNine's run of r.
func crashKillNine(t *testing.T, r crashRun) {
	started := time.Now()
	kills := r.kills
	webhookdBinary(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "webhookd.db")
	cfgPath := filepath.Join(dir, "webhookd.toml")
	settings := map[string]any{
		"server.shutdown_timeout":       "2s",
		"delivery.schedule":             []string{"20ms", "50ms", "100ms", "200ms", "500ms"},
		"delivery.jitter":               0.2,
		"delivery.deadline":             "10m",
		"delivery.attempt_timeout":      "2s",
		"delivery.retry_after_max":      "1s",
		"delivery.workers":              32,
		"delivery.endpoint_concurrency": 8,
		"log.level":                     "warn",
	}
	maps.Copy(settings, r.config)
	cfg := configWith(t, testConfig, settings)
	logs := procFiles(t, cfgPath, cfg)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	rc := newCrashReceiver(t)
	cc := newCrashClients()
	stopClients := sync.OnceFunc(func() { close(cc.stop); cc.wg.Wait() })
	defer stopClients()

	// endpoints: path → ID, and the endpoint IDs each type goes to.
	paths := map[string]string{}
	subscribers := map[string][]string{}
	setup := func(base string) {
		in := &instance{t: t, base: base}
		in.setup()
		for i, types := range r.endpoints {
			path := fmt.Sprintf("/ep/%d", i)
			ep := in.createEndpoint(rc.srv.URL+path, types...)
			rc.mu.Lock()
			rc.secrets[path] = ep.Secret
			rc.mu.Unlock()
			paths[ep.ID] = path
			for _, typ := range []string{"payment.succeeded", "invoice.paid"} {
				if types[0] == "*" || types[0] == typ {
					subscribers[typ] = append(subscribers[typ], ep.ID)
				}
			}
		}
	}

	var maxCheck time.Duration
	owedAtKills := 0 // fan-outs a kill left owed, added up
	quietStarts := 0 // starts without ingest after a kill that left fan-outs owed
	checkFile := func(when string) {
		if onPostgres || !r.checkEachKill && !strings.Contains(when, "clean stop") {
			return // no file: PostgreSQL recovers its own; or the next start's recovery is under test
		}
		start := time.Now()
		db, err := storage.Open(dbPath, storage.Options{LockTimeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("%s: open: %v", when, err)
		}
		defer db.Close()
		if err := db.Check(); err != nil {
			t.Fatalf("%s: Check: %v", when, err)
		}
		maxCheck = max(maxCheck, time.Since(start))
	}

	var current *node // killed if the test ends early
	defer func() {
		if current != nil {
			current.kill()
		}
	}()
	earlyKills := 0
	for k := range kills {
		p := startProc(t, cfgPath, dbPath, logs)
		current = p
		if k > 0 && rng.IntN(5) == 0 {
			// Kill during start-up or recovery, or just after: the random
			// moment of the kill is the behaviour under test.
			earlyKills++
			time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
		} else {
			base := p.waitListening()
			if k == 0 {
				setup(base)
				cc.wg.Add(r.clients)
				for c := range r.clients {
					go cc.run(c, c%2 == 0, r.rate, seed)
				}
			}
			cc.setBase(base)
			// Ingest and deliver for a random while, then the kill: the
			// moment is the behaviour under test.
			time.Sleep(time.Duration(100+rng.IntN(500)) * time.Millisecond)
		}
		cc.setBase("")
		p.kill()
		owed := owedFanOuts(t, dbPath)
		owedAtKills += owed
		if owed > 0 && !r.checkEachKill && quietStarts < 3 {
			// A start with no ingest: only its recovery can store what
			// the kill left owed (an ingest starts the fan-out too).
			quietStarts++
			p := startProc(t, cfgPath, dbPath, logs)
			current = p
			waitDrained(p.waitListening(), 30*time.Second)
			p.stop()
			if n := owedFanOuts(t, dbPath); n > 0 {
				t.Fatalf("after kill %d left %d fan-outs owed, a start and a clean stop left %d: the start did not store them", k+1, owed, n)
			}
		}
		checkFile(fmt.Sprintf("after kill %d", k+1))
	}
	if !r.checkEachKill && !onPostgres && quietStarts == 0 {
		t.Errorf("no kill left a fan-out owed (%d kills): the test did not reach what it is for", kills)
	}

	// The last run: no more chaos, no more kills. Clients stop (those that
	// retry get their last ingest acknowledged), then webhookd runs until
	// nothing is pending and stops cleanly. The log is read after the stop
	// and another run made while anything is pending there.
	rc.chaos.Store(false)
	rounds := 0
	var events map[string]crashEvent
	for ; rounds < 5; rounds++ {
		p := startProc(t, cfgPath, dbPath, logs)
		current = p
		base := p.waitListening()
		cc.setBase(base)
		if rounds == 0 {
			stopClients()
		}
		waitDrained(base, 30*time.Second)
		cc.setBase("")
		p.stop()
		checkFile("after the clean stop")
		var pending int
		events, pending = readCrashLog(t, dbPath)
		if pending == 0 {
			break
		}
		t.Logf("%d deliveries still pending after a quiet stop: once more", pending)
	}

	cc.mu.Lock()
	ingests := cc.ingests
	for _, e := range cc.errs {
		t.Errorf("client: %s", e)
	}
	cc.mu.Unlock()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, p := range rc.problems {
		t.Errorf("receiver: %s", p)
	}
	if rc.badSig > 0 || rc.mismatched > 0 {
		t.Errorf("the receiver got %d requests whose signature failed and %d bodies that differ from an earlier one", rc.badSig, rc.mismatched)
	}

	problems := 0
	fail := func(format string, args ...any) {
		if problems++; problems <= 30 {
			t.Errorf(format, args...)
		}
	}
	// Every event in the log: whole, settled, its body the one delivered.
	byMarker := map[[2]int][]string{}
	deliveries, dead := 0, 0
	for id, ev := range events {
		var env struct {
			ID   string
			Type string
			Data json.RawMessage
		}
		if err := json.Unmarshal(ev.body, &env); err != nil || env.ID != id || env.Type != ev.typ {
			fail("event %s: stored envelope %q does not decode to its id and type (%v)", id, ev.body, err)
			continue
		}
		var m struct{ C, N int }
		if err := json.Unmarshal(env.Data, &m); err != nil {
			fail("event %s: data %s: %v", id, env.Data, err)
		}
		byMarker[[2]int{m.C, m.N}] = append(byMarker[[2]int{m.C, m.N}], id)
		want := subscribers[ev.typ]
		if len(ev.deliveries) != len(want) {
			fail("event %s (%s): %d deliveries, want %d: half-present", id, ev.typ, len(ev.deliveries), len(want))
		}
		for _, epID := range want {
			d, ok := ev.deliveries[epID]
			if !ok {
				fail("event %s: no delivery to endpoint %s", id, epID)
				continue
			}
			deliveries++
			pl := rc.pairs[crashPair{id, paths[epID]}]
			switch {
			case d.State == engine.StateSucceeded:
				if pl == nil || pl.ok == 0 {
					fail("delivery %s is succeeded but the receiver never answered it 2xx", d.ID)
				}
			case d.State == engine.StateDead && d.Reason != "":
				// 422 from /ep/2, or (rarely) every attempt hit a 500.
				dead++
			default:
				fail("delivery %s is %s (reason %q), want succeeded or dead with a reason", d.ID, d.State, d.Reason)
			}
			if pl != nil && !bytes.Equal(pl.body, ev.body) {
				fail("event %s: the receiver got %q, the log has %q", id, pl.body, ev.body)
			}
		}
	}
	// Every request the receiver got is of an event in the log.
	duplicates, duplicated := 0, 0
	for pair, pl := range rc.pairs {
		if _, ok := events[pair.event]; !ok {
			fail("the receiver got event %s, which is not in the log", pair.event)
		}
		if pl.ok > 1 {
			duplicates += pl.ok - 1
			duplicated++
		}
	}
	// Every ingest, against the log.
	acked, unackedPresent, unackedAbsent := 0, 0, 0
	for _, in := range ingests {
		ids := byMarker[[2]int{in.client, in.n}]
		if len(ids) > 1 {
			fail("ingest c%d n%d (key %q) is in the log %d times: %v", in.client, in.n, in.key, len(ids), ids)
		}
		if in.ackID == "" {
			if !in.sent {
				continue
			}
			if len(ids) == 0 {
				unackedAbsent++
			} else {
				unackedPresent++
			}
			continue
		}
		acked++
		ev, ok := events[in.ackID]
		if !ok {
			fail("acknowledged event %s (c%d n%d) is not in the log", in.ackID, in.client, in.n)
			continue
		}
		if len(ids) != 1 || ids[0] != in.ackID {
			fail("acknowledged event %s: the log has its data under %v", in.ackID, ids)
		}
		var env struct{ Data json.RawMessage }
		json.Unmarshal(ev.body, &env)
		if string(env.Data) != in.data || ev.typ != in.typ {
			fail("acknowledged event %s: stored %s %s, sent %s %s", in.ackID, ev.typ, env.Data, in.typ, in.data)
		}
	}
	if acked == 0 {
		t.Fatal("no ingest was acknowledged: the test checked nothing")
	}
	if problems > 30 {
		t.Errorf("... and %d more problems", problems-30)
	}
	var size int64 // no file on postgres
	if st, err := os.Stat(dbPath); err == nil {
		size = st.Size()
	}
	reliabilityReport(t, "kill -9: %d kills survived (%d during start-up/recovery; %d fan-outs owed at the kills), then %d clean run(s); %d ingests acknowledged, %d sent but unacknowledged (%d present whole, %d absent); %d events and %d deliveries checked (%d dead with a reason); receiver: %d requests, %d duplicate deliveries over %d (event, endpoint) pairs, 0 bad signatures allowed (got %d); Check after every restart: max %s, file %d KiB; took %s",
		kills, earlyKills, owedAtKills, rounds+1, acked, unackedPresent+unackedAbsent, unackedPresent, unackedAbsent,
		len(events), deliveries, dead, rc.requests, duplicates, duplicated, rc.badSig,
		maxCheck.Round(time.Millisecond), size>>10, time.Since(started).Round(time.Second))
}

// owedFanOuts counts the fan-outs the bbolt file at path owes (the
// fanouts bucket, storage/fanout.go), read without storage.Open, which
// would store them; 0 on postgres, which owes none.
func owedFanOuts(t *testing.T, path string) int {
	t.Helper()
	if onPostgres {
		return 0
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("open %s read-only: %v", path, err)
	}
	defer db.Close()
	n := 0
	err = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("fanouts")); b != nil {
			n = b.Stats().KeyN
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// crashEvent is an event of the log with its deliveries by endpoint ID.
type crashEvent struct {
	typ        string
	body       []byte
	deliveries map[string]engine.Delivery
}

// readCrashLog reads every event of the stopped database at path (on
// postgres: its schema, tenant acme's) and counts the pending deliveries.
func readCrashLog(t *testing.T, path string) (map[string]crashEvent, int) {
	t.Helper()
	var forEachEvent func(context.Context, func(engine.Event, []engine.Delivery) error) error
	if !onPostgres {
		db, err := storage.Open(path, storage.Options{LockTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		forEachEvent = db.ForEachEvent
	} else {
		pgSchemas.Lock()
		schema := pgSchemas.m[path]
		pgSchemas.Unlock()
		st, err := postgres.Open(t.Context(), pgtest.URL(t), postgres.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		forEachEvent = func(ctx context.Context, fn func(engine.Event, []engine.Delivery) error) error {
			f := engine.EventFilter{Limit: 500}
			for {
				evs, next, err := st.ListEvents(ctx, "acme", f)
				for _, ev := range evs {
					ev, ds, err := st.Event(ctx, "acme", ev.ID)
					if err == nil {
						err = fn(ev, ds)
					}
					if err != nil {
						return err
					}
				}
				if err != nil || next == "" {
					return err
				}
				f.After = next
			}
		}
	}
	events := map[string]crashEvent{}
	pending := 0
	err := forEachEvent(context.Background(), func(ev engine.Event, ds []engine.Delivery) error {
		ce := crashEvent{typ: ev.Type, body: ev.Body, deliveries: map[string]engine.Delivery{}}
		for _, d := range ds {
			if _, dup := ce.deliveries[d.EndpointID]; dup {
				t.Errorf("event %s has two deliveries to endpoint %s", ev.ID, d.EndpointID)
			}
			ce.deliveries[d.EndpointID] = d
			if d.State == engine.StatePending {
				pending++
			}
		}
		events[ev.ID] = ce
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return events, pending
}

// waitDrained waits until the webhookd at base holds no pending delivery
// (webhookd_pending_deliveries: waiting, due or in flight), or limit has
// passed.
func waitDrained(base string, limit time.Duration) {
	poll(limit, func() bool {
		m, err := scrapeMetrics(base)
		return err == nil && m["webhookd_pending_deliveries"] == 0 && m["webhookd_owed_deliveries"] == 0
	})
}

// TestDriverConfigFile_SharedFile: a config file shared by nodes is never
// rewritten under a node reading it. One that names its driver (as
// clusterConfig's does) is left alone; on the postgres driver, one that
// does not is replaced whole, so a node that opened it before still reads
// it as it was. (TestCluster_KillNode once saw a node start on the
// defaults, bbolt and no tokens, while the next node's start rewrote the
// file it was reading.)
func TestDriverConfigFile_SharedFile(t *testing.T) {
	dir := t.TempDir()
	named := filepath.Join(dir, "named.toml")
	config := configWith(t, testConfig, map[string]any{"storage.driver": "bbolt"})
	if err := os.WriteFile(named, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(named)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // past the file system's clock tick, so a write would show
	driverConfigFile(t, named, filepath.Join(dir, "a.db"))
	after, err := os.Stat(named)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("a config that names its driver was written again (modified %s, then %s)", before.ModTime(), after.ModTime())
	}

	plain := filepath.Join(dir, "plain.toml")
	if err := os.WriteFile(plain, []byte(testConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	reader, err := os.Open(plain) // a node that opened it first
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	driverConfigFile(t, plain, filepath.Join(dir, "b.db"))
	read, err := io.ReadAll(reader)
	if err != nil {
		t.Fatal(err)
	}
	if string(read) != testConfig {
		t.Errorf("a node that opened the config before it was rewritten read %d bytes, not the %d it opened", len(read), len(testConfig))
	}
	now, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	if onPostgres && !strings.Contains(string(now), `driver = "postgres"`) {
		t.Errorf("on the postgres driver the config was not rewritten for it:\n%s", now)
	}
}
