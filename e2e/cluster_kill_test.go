package e2e

// Cluster mode under a node's SIGKILL: three real webhookd processes on one
// PostgreSQL schema, one killed mid-load; its claims come back to the
// others when their leases end, and nothing acknowledged is lost.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres/pgtest"
)

// clusterLoad ingests a bounded number of events (type payment.succeeded,
// data {"n":N}) through several nodes at once, as clients of a cluster
// behind no load balancer would: each event goes first to node N mod the
// number of nodes, and a client that gets no answer (connection refused or
// cut) or a 503 sends it again, with its Idempotency-Key, to the next node.
// Every 503 must carry Retry-After. Any other answer but 202 is recorded
// as a problem (and sent again, so the run still ends).
type clusterLoad struct {
	nodes   []string // base URLs
	events  int      // how many events, at most
	workers int      // clients ingesting at once
	pace    time.Duration
	prefix  string // of the Idempotency-Keys
	client  *http.Client
	// token is the admin token the load sends: testToken, or one only
	// its cluster knows (foreign: a node killed mid-load frees its port,
	// which another test's webhookd may take, and its 401 then means
	// "not this cluster", tried on the next node like a refused
	// connection).
	token   string
	foreign bool

	next atomic.Int64 // the next event number to send

	mu           sync.Mutex
	acked        map[int]string // the event ID of each acknowledged event, by number
	ackAt        []time.Time    // when each 202 came
	unavailable  []time.Time    // when each 503 came
	noRetryAfter int            // 503s without Retry-After
	connErrs     int            // requests without an answer
	others       map[int]int    // answers other than 202 and 503, by status
	problems     []string
}

func newClusterLoad(nodes []string, events, workers int, pace time.Duration) *clusterLoad {
	return &clusterLoad{
		nodes: nodes, events: events, workers: workers, pace: pace,
		prefix: fmt.Sprintf("load-%d", time.Now().UnixNano()),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}},
		token:  testToken,
		acked:  map[int]string{},
		others: map[int]int{},
	}
}

// run ingests until every event is acknowledged or deadline has passed,
// and returns when its clients have stopped.
func (l *clusterLoad) run(deadline time.Time) {
	var wg sync.WaitGroup
	for range l.workers {
		wg.Go(func() {
			for {
				n := int(l.next.Add(1)) - 1
				if n >= l.events || time.Now().After(deadline) {
					return
				}
				l.send(n, deadline)
				time.Sleep(l.pace) // the client's rate (the load under test)
			}
		})
	}
	wg.Wait()
}

// send ingests event n until it is acknowledged or deadline has passed.
func (l *clusterLoad) send(n int, deadline time.Time) {
	body := fmt.Sprintf(`{"type":"payment.succeeded","data":{"n":%d}}`, n)
	key := fmt.Sprintf("%s-%d", l.prefix, n)
	for node := n; time.Now().Before(deadline); node++ {
		base := l.nodes[node%len(l.nodes)]
		req, err := http.NewRequest("POST", base+"/v1/tenants/acme/events", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		req.Header.Set("Authorization", "Bearer "+l.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := l.client.Do(req)
		if err == nil && l.foreign && resp.StatusCode == http.StatusUnauthorized {
			resp.Body.Close()
			err = errors.New("401: another webhookd on a killed node's port")
		}
		if err != nil {
			l.mu.Lock()
			l.connErrs++
			l.mu.Unlock()
			time.Sleep(10 * time.Millisecond) // a client's pause before it tries the next node
			continue
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		now := time.Now()
		l.mu.Lock()
		switch {
		case err != nil:
			l.connErrs++
		case resp.StatusCode == http.StatusAccepted:
			var ack struct{ ID string }
			if err := json.Unmarshal(raw, &ack); err != nil || ack.ID == "" {
				l.problem("event %d: 202 with body %q", n, raw)
				break
			}
			l.acked[n] = ack.ID
			l.ackAt = append(l.ackAt, now)
			l.mu.Unlock()
			return
		case resp.StatusCode == http.StatusServiceUnavailable:
			l.unavailable = append(l.unavailable, now)
			if resp.Header.Get("Retry-After") == "" {
				l.noRetryAfter++
				l.problem("event %d: 503 without Retry-After: %s", n, raw)
			}
		default:
			l.others[resp.StatusCode]++
			l.problem("event %d: %d %s", n, resp.StatusCode, raw)
		}
		l.mu.Unlock()
		// Shorter than Retry-After (1 s), so that the test sees the end of
		// an outage to within a tenth of a second.
		time.Sleep(100 * time.Millisecond)
	}
}

// problem notes an unexpected answer; l.mu is held.
func (l *clusterLoad) problem(format string, args ...any) {
	if len(l.problems) < 20 {
		l.problems = append(l.problems, fmt.Sprintf(format, args...))
	}
}

// ackedCount is how many events are acknowledged so far.
func (l *clusterLoad) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// check fails t for every unexpected answer.
func (l *clusterLoad) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.problems {
		t.Errorf("ingest: %s", p)
	}
	if len(l.acked) == 0 {
		t.Fatal("no ingest was acknowledged: the test checked nothing")
	}
}

// clusterReceiver is a loopback endpoint (receiver_test.go's receiver: every
// signature checked with the official libraries) that records, per event,
// when it answered 2xx, and answers one request in five only after
// slow (an attempt in flight for that long). A request whose sender goes
// away meanwhile (a killed node) is counted as cut, not answered.
type clusterReceiver struct {
	*receiver
	slow time.Duration

	mu      sync.Mutex
	oks     map[string][]time.Time // the 2xx answers, by event ID
	cut     int                    // requests whose sender went away before the answer
	slowNow atomic.Int64           // slow requests in flight now
}

func newClusterReceiver(t *testing.T, slow time.Duration) *clusterReceiver {
	cr := &clusterReceiver{slow: slow, oks: map[string][]time.Time{}}
	cr.receiver = newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n%5 == 0 && slow > 0 {
			cr.slowNow.Add(1)
			defer cr.slowNow.Add(-1)
			select {
			case <-time.After(slow):
			case <-r.Context().Done(): // the sender is gone: nothing to answer
				cr.mu.Lock()
				cr.cut++
				cr.mu.Unlock()
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
		cr.mu.Lock()
		id := r.Header.Get("webhook-id")
		cr.oks[id] = append(cr.oks[id], time.Now())
		cr.mu.Unlock()
	})
	return cr
}

// firstOKAfter returns the first 2xx answer to event id after t0.
func (cr *clusterReceiver) firstOKAfter(id string, t0 time.Time) (time.Time, bool) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	for _, at := range cr.oks[id] {
		if at.After(t0) {
			return at, true
		}
	}
	return time.Time{}, false
}

// tally checks that every event of ids was answered 2xx and returns the
// number missing, the duplicate 2xx answers (beyond the first per event)
// and the events answered more than once.
func (cr *clusterReceiver) tally(ids []string) (missing, duplicates, duplicated int) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	for _, id := range ids {
		if len(cr.oks[id]) == 0 {
			missing++
		}
	}
	for _, oks := range cr.oks {
		if len(oks) > 1 {
			duplicates += len(oks) - 1
			duplicated++
		}
	}
	return missing, duplicates, duplicated
}

// clusterDB connects the test itself to the database at url, in schema.
func clusterDB(t *testing.T, url, schema string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = schema
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// pendingCount counts the pending deliveries of the database, -1 if the
// query fails.
func pendingCount(conn *pgx.Conn) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM deliveries WHERE state = 'pending'").Scan(&n); err != nil {
		return -1
	}
	return n
}

// deliveryStates counts the deliveries of the database by state.
func deliveryStates(t *testing.T, conn *pgx.Conn) map[string]int {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT state, count(*) FROM deliveries GROUP BY state")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	var state string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error { out[state] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// leaseRow is a pending delivery under a lease, as the database has it.
type leaseRow struct {
	eventID, endpointID string
	token, until        int64
}

// leasedDeliveries reads the pending deliveries under a lease, by ID.
func leasedDeliveries(t *testing.T, conn *pgx.Conn) map[string]leaseRow {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT id, event_id, endpoint_id, lease_token, lease_until
		FROM deliveries WHERE state = 'pending' AND lease_token IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]leaseRow{}
	var id string
	var lr leaseRow
	if _, err := pgx.ForEachRow(rows, []any{&id, &lr.eventID, &lr.endpointID, &lr.token, &lr.until}, func() error {
		out[id] = lr
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// clusterProcs starts n webhookd processes on config, each logging to
// its own file in dir, and kills those still running when the test ends;
// on failure it logs the end of each log.
func clusterProcs(t *testing.T, dir, config string, n int) ([]*node, []string) {
	t.Helper()
	cfgPath := filepath.Join(dir, "webhookd.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	procs := make([]*node, n)
	bases := make([]string, n)
	for i := range n {
		logPath := filepath.Join(dir, fmt.Sprintf("node%d.log", i))
		logs, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			logs.Close()
			if t.Failed() {
				b, _ := os.ReadFile(logPath)
				if len(b) > 6<<10 {
					b = b[len(b)-6<<10:]
				}
				t.Logf("node %d's log (the end):\n%s", i, b)
			}
		})
		// -db is the bbolt path, unused on the postgres driver.
		procs[i] = startProc(t, cfgPath, filepath.Join(dir, fmt.Sprintf("node%d.db", i)), logs)
	}
	for i, p := range procs {
		bases[i] = p.waitListening()
	}
	return procs, bases
}

// TestCluster_KillNode runs three webhookd processes on one PostgreSQL
// schema with a 3 s lease, ingests through all three at once to two
// receivers (one request in five answered after 300 ms, so attempts are
// in flight), and SIGKILLs one node mid-load while the clients go on
// through the others. Then:
//
//   - every acknowledged event reached both endpoints, signed (verified
//     with the official libraries), at least once; duplicates (at-least-
//     once) are counted and reported;
//   - the deliveries the killed node held (its leases, which nobody
//     renews) were re-offered when they ended and delivered within the
//     lease and a margin (10 s, for a loaded machine) of the kill;
//   - nothing stays pending, nothing is dead.
func TestCluster_KillNode(t *testing.T) {
	clusterTest(t)
	t.Parallel() // processes of its own, on a schema of its own
	const lease = 3 * time.Second
	events := 600
	if testing.Short() {
		events = 300
	}
	schema := pgtest.Schema(t)
	webhookdBinary(t)
	started := time.Now()
	url := pgtest.URL(t)
	loadToken := "cluster-kill-" + engine.NewID("tok") // this cluster's alone (clusterLoad.token)
	cfg := configWith(t, clusterConfig(t, schema, lease, ""), map[string]any{
		"api.tokens":                    []string{testToken, loadToken},
		"delivery.attempt_timeout":      "1s", // under the lease: a claim outlasts its attempt
		"delivery.schedule":             []string{"50ms", "100ms", "200ms", "500ms"},
		"delivery.deadline":             "5m",
		"delivery.workers":              16,
		"delivery.endpoint_concurrency": 16,
		"log.level":                     "warn",
	})
	procs, bases := clusterProcs(t, t.TempDir(), cfg, 3)
	db := clusterDB(t, url, schema)

	(&instance{t: t, base: bases[0]}).setup()
	rcs := map[string]*clusterReceiver{} // by endpoint ID
	for i := range 2 {
		rc := newClusterReceiver(t, 300*time.Millisecond)
		ep := (&instance{t: t, base: bases[i+1]}).createEndpoint(rc.srv.URL, "*")
		rc.setSecret(ep.Secret)
		rcs[ep.ID] = rc
	}

	load := newClusterLoad(bases, events, 6, 25*time.Millisecond)
	load.token, load.foreign = loadToken, true
	loaded := make(chan struct{})
	go func() { defer close(loaded); load.run(time.Now().Add(20 * time.Second)) }()

	// The kill: a third of the way in, while slow attempts are in flight.
	if !poll(15*time.Second, func() bool { return load.ackedCount() >= events/3 }) {
		t.Fatalf("only %d of %d events acknowledged in 15 s", load.ackedCount(), events)
	}
	poll(2*time.Second, func() bool {
		n := int64(0)
		for _, rc := range rcs {
			n += rc.slowNow.Load()
		}
		return n >= 3
	})
	// The victim's leases: pending, leased once it is dead, and not
	// renewed over more than a third of a lease after (the survivors renew
	// theirs every third, and settle their 300 ms attempts sooner). The
	// first snapshot is read after the kill, not before it: a snapshot
	// taken before could miss every lease the victim claimed in between
	// (CI saw that twice in one run). A node may hold none at the instant
	// it dies (the others held every slot); then the next one dies too,
	// so that some lease is left to re-offer.
	var killed time.Time
	var ackedAtKill int
	held := map[string]leaseRow{}
	dead := map[*node]bool{}
	for _, victim := range []*node{procs[2], procs[1]} {
		victim.kill()
		dead[victim] = true
		killed = time.Now()
		ackedAtKill = load.ackedCount()
		before := leasedDeliveries(t, db)
		time.Sleep(lease/3 + lease/6)
		for id, lr := range leasedDeliveries(t, db) {
			if b, ok := before[id]; ok && b == lr {
				held[id] = lr
			}
		}
		if len(held) > 0 {
			break
		}
		t.Logf("the killed node held no lease %s after the kill (%d leased then); killing another", time.Since(killed).Round(time.Millisecond), len(before))
	}
	if len(held) == 0 {
		t.Fatal("neither killed node held a lease: nothing to re-offer")
	}

	// Its deliveries come back when their leases end, and succeed.
	// The margin covers a claim loop's poll (1 s) and, on a loaded
	// machine, the deliveries due before these.
	limit := lease + 10*time.Second
	var reoffer time.Duration
	redelivered := poll(limit+10*time.Second, func() bool {
		reoffer = 0
		for _, lr := range held {
			at, ok := rcs[lr.endpointID].firstOKAfter(lr.eventID, killed)
			if !ok {
				return false
			}
			reoffer = max(reoffer, at.Sub(killed))
		}
		return true
	})
	switch {
	case !redelivered:
		t.Fatalf("the %d deliveries the killed node held were not all delivered %s after the kill", len(held), time.Since(killed).Round(time.Millisecond))
	case reoffer > limit:
		t.Errorf("the killed node's last held delivery succeeded %s after the kill, want under %s (the lease and a margin)", reoffer, limit)
	}

	<-loaded
	load.check(t)
	if !poll(30*time.Second, func() bool { return pendingCount(db) == 0 }) {
		t.Fatalf("%d deliveries still pending 30 s after the load", pendingCount(db))
	}
	states := deliveryStates(t, db)
	if len(states) != 1 || states["succeeded"] == 0 {
		t.Errorf("deliveries by state: %v, want all succeeded", states)
	}

	load.mu.Lock()
	ids := make([]string, 0, len(load.acked))
	for _, id := range load.acked {
		ids = append(ids, id)
	}
	connErrs := load.connErrs
	load.mu.Unlock()
	slices.Sort(ids)
	duplicates, duplicated, requests, cut := 0, 0, 0, 0
	for _, rc := range rcs {
		rc.checkSignatures()
		missing, dups, dupd := rc.tally(ids)
		if missing > 0 {
			t.Errorf("%d acknowledged events never reached %s", missing, rc.srv.URL)
		}
		duplicates += dups
		duplicated += dupd
		requests += len(rc.got())
		rc.mu.Lock()
		cut += rc.cut
		rc.mu.Unlock()
	}
	if want := 2 * len(ids); states["succeeded"] != want {
		t.Errorf("%d deliveries succeeded, want %d (2 endpoints × %d acknowledged events)", states["succeeded"], want, len(ids))
	}
	for _, p := range procs {
		if !dead[p] {
			p.stop()
		}
	}
	reliabilityReport(t, "cluster kill: 3 nodes, lease %s, node killed after %d acknowledged (%d of %d events acknowledged in all); %d leases held by it re-offered, the last delivered %s after the kill; %d requests (%d cut by the kill mid-attempt), %d duplicate deliveries over %d (event, endpoint) pairs; %d ingest retries to another node; took %s",
		lease, ackedAtKill, len(ids), events, len(held), reoffer.Round(time.Millisecond), requests, cut, duplicates, duplicated, connErrs, time.Since(started).Round(100*time.Millisecond))
}
