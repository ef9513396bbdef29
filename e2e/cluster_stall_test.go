package e2e

// Cluster mode when a client or a node stalls: a client that gives up
// mid-ingest, and a node frozen (SIGSTOP) inside a transaction.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres/pgtest"
)

// metricLine returns the line of the metrics text that starts with
// prefix and contains every one of parts, or "".
func metricLine(text, prefix string, parts ...string) string {
	for l := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(l, prefix) {
			continue
		}
		found := true
		for _, p := range parts {
			found = found && strings.Contains(l, p)
		}
		if found {
			return l
		}
	}
	return ""
}

// TestCluster_ClientGivesUpMidIngest: a client that cancels its ingest
// while the node waits for the database (here a lock the test holds on
// the events table) is not an internal error: no ERROR line in the log,
// no 500 in the metrics (the request is counted as 499, the client's
// own close), and the node goes on acknowledging once the lock is gone.
func TestCluster_ClientGivesUpMidIngest(t *testing.T) {
	clusterTest(t)
	t.Parallel()
	schema := pgtest.Schema(t)
	in := startInstance(t, t.TempDir(), clusterConfig(t, schema, 30*time.Second, ""))
	in.setup()
	db := clusterDB(t, pgtest.URL(t), schema)

	tx, err := db.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), "LOCK TABLE events IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", in.base+"/v1/tenants/acme/events", strings.NewReader(`{"type":"payment.succeeded","data":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the ingest was answered %d while the events table was locked", resp.StatusCode)
	}

	// The node's handler ends when its database call does: then the
	// request is counted, with the status it was given.
	var line string
	if !poll(10*time.Second, func() bool {
		resp, err := http.Get(in.base + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		line = metricLine(string(b), "webhookd_http_requests_total{", `method="POST"`, `route="/v1/tenants/:tenant/events"`)
		return line != ""
	}) {
		t.Fatal("the cancelled ingest was not counted within 10 s")
	}
	if !strings.Contains(line, `code="499"`) {
		t.Errorf("the cancelled ingest was counted as %s, want code 499", line)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	in.ingest("payment.succeeded", `{}`)
	for l := range strings.SplitSeq(in.logs.String(), "\n") {
		if strings.Contains(l, "level=ERROR") {
			t.Errorf("logged at error level: %s", l)
		}
	}
}

// stallLoad ingests into one node for one tenant until told to stop,
// each event with its own Idempotency-Key (sent again after a 503, as a
// client would), and notes when each 202 came.
type stallLoad struct {
	client *http.Client
	next   int64

	mu    sync.Mutex
	acks  map[string][]time.Time // by tenant and node: "tenant node"
	ids   []string               // every acknowledged event
	other map[string]int         // answers other than 202 and 503
}

// run sends one client's events to base for tenant until stop closes
// or deadline passes; key, when set, is the events' ordering key (an
// event with one takes the ingest's own transaction).
func (l *stallLoad) run(base, tenant, key string, stop <-chan struct{}, deadline time.Time) {
	ordering := ""
	if key != "" {
		ordering = fmt.Sprintf(`,"ordering_key":%q`, key)
	}
	for {
		l.mu.Lock()
		l.next++
		n := l.next
		l.mu.Unlock()
		body := fmt.Sprintf(`{"type":"payment.succeeded","data":{"n":%d}%s}`, n, ordering)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if time.Now().After(deadline) {
				return
			}
			req, _ := http.NewRequest("POST", base+"/v1/tenants/"+tenant+"/events", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+testToken)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", fmt.Sprintf("stall-%d", n))
			resp, err := l.client.Do(req)
			if err != nil {
				time.Sleep(50 * time.Millisecond) // a client's pause before it retries a node (the load under test)
				continue
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusAccepted {
				var ack struct{ ID string }
				json.Unmarshal(raw, &ack)
				l.mu.Lock()
				l.acks[tenant+" "+base] = append(l.acks[tenant+" "+base], time.Now())
				l.ids = append(l.ids, ack.ID)
				l.mu.Unlock()
				break
			}
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
				l.mu.Lock()
				l.other[fmt.Sprintf("%d %s", resp.StatusCode, raw)]++
				l.mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond) // a client's pause after a 503 (the load under test)
		}
	}
}

// count is how many of tenant's events base acknowledged.
func (l *stallLoad) count(tenant, base string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks[tenant+" "+base])
}

// longestGap is the longest time without a 202 for tenant from any of
// bases between from and to.
func (l *stallLoad) longestGap(tenant string, bases []string, from, to time.Time) time.Duration {
	l.mu.Lock()
	var at []time.Time
	for _, b := range bases {
		for _, t := range l.acks[tenant+" "+b] {
			if t.After(from) && t.Before(to) {
				at = append(at, t)
			}
		}
	}
	l.mu.Unlock()
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	gap, last := time.Duration(0), from
	for _, t := range append(at, to) {
		gap = max(gap, t.Sub(last))
		last = t
	}
	return gap
}

// stalledSession returns the backend PID of a session idle in a
// transaction while holding an advisory lock, that stays so, unchanged,
// for 300 ms: a frozen client's (a live node's transactions last
// milliseconds), or 0.
func stalledSession(t *testing.T, db *pgx.Conn) int {
	t.Helper()
	const q = `SELECT a.pid, a.state_change FROM pg_stat_activity a
		WHERE a.state = 'idle in transaction' AND a.pid <> pg_backend_pid()
		AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted)`
	read := func() map[int]time.Time {
		rows, err := db.Query(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int]time.Time{}
		var pid int
		var at time.Time
		if _, err := pgx.ForEachRow(rows, []any{&pid, &at}, func() error { out[pid] = at; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := read()
	if len(before) == 0 {
		return 0
	}
	// A real PostgreSQL session that stays idle in its transaction is what
	// is looked for: give the server's clock time to show it did not move.
	time.Sleep(300 * time.Millisecond)
	for pid, at := range read() {
		if b, ok := before[pid]; ok && b.Equal(at) {
			return pid
		}
	}
	return 0
}

// metricValue sums the values of the metric lines that start with name
// in base's /metrics.
func metricValue(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for l := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && (f[0] == name || strings.HasPrefix(f[0], name+"{")) {
			v, _ := strconv.ParseFloat(f[1], 64)
			sum += v
		}
	}
	return sum
}

// TestCluster_NodeStoppedInATransaction runs three webhookd processes on
// one schema, ingests into all three at once (tenant acme with an
// ordering key, so that each event takes a transaction of its own under
// the tenant's sequence lock; tenant beta without), and SIGSTOPs one
// node while one of its sessions sits idle in a transaction holding an
// advisory lock, for 10 s. Then:
//
//   - the two other nodes go on acknowledging acme's events: the longest
//     time without a 202 from them is within the stall bound (the
//     database ends a session idle in a transaction after 2 s; a lock is
//     waited for 1 s) and a margin of 2 s for a loaded machine, where it
//     was the whole pause before; beta's too;
//   - their waits cut short are counted (webhookd_database_lock_timeouts_total),
//     and every answer but 202 was a 503 with Retry-After;
//   - after SIGCONT the stopped node acknowledges again, and every event
//     acknowledged by any node is stored.
func TestCluster_NodeStoppedInATransaction(t *testing.T) {
	clusterTest(t)
	t.Parallel()
	const pause, bound, margin = 10 * time.Second, 3 * time.Second, 2 * time.Second
	schema := pgtest.Schema(t)
	webhookdBinary(t)
	cfg := configWith(t, clusterConfig(t, schema, 15*time.Second, ""), map[string]any{"log.level": "warn"})
	procs, bases := clusterProcs(t, t.TempDir(), cfg, 3)
	db := clusterDB(t, pgtest.URL(t), schema)
	// Advisory locks are the database's, not the schema's: tenants of
	// this test's own, so that its frozen lock holds up no other test.
	acme, beta := strings.ToLower(engine.NewID("acme")), strings.ToLower(engine.NewID("beta"))
	first := &instance{t: t, base: bases[0]}
	first.mustCall(201, "PUT", "/v1/event-types/payment.succeeded", map[string]string{"description": "a payment went through"}, nil)
	for _, id := range []string{acme, beta} {
		first.mustCall(201, "PUT", "/v1/tenants/"+id, map[string]string{"name": id}, nil)
	}

	victim, healthy := procs[2], bases[:2]
	load := &stallLoad{client: &http.Client{Timeout: 30 * time.Second}, acks: map[string][]time.Time{}, other: map[string]int{}}
	stop := make(chan struct{})
	deadline := time.Now().Add(90 * time.Second)
	var wg sync.WaitGroup
	for i := range 12 {
		base := bases[i%3]
		wg.Go(func() { load.run(base, acme, fmt.Sprintf("key-%d", i%4), stop, deadline) })
	}
	for i := range 3 { // acme's unordered events share a commit with others
		wg.Go(func() { load.run(bases[i], acme, "", stop, deadline) })
	}
	for i := range 2 {
		wg.Go(func() { load.run(healthy[i], beta, "", stop, deadline) })
	}
	defer func() {
		victim.cmd.Process.Signal(syscall.SIGCONT)
		close(stop)
		wg.Wait()
	}()
	if !poll(20*time.Second, func() bool { return load.count(acme, bases[2]) >= 20 }) {
		t.Fatal("the third node acknowledged fewer than 20 events in 20 s")
	}

	// Freeze the node until one of its sessions is caught idle in a
	// transaction, holding the tenant's lock.
	var stoppedAt time.Time
	pid := 0
	for try := 0; try < 50 && pid == 0; try++ {
		victim.cmd.Process.Signal(syscall.SIGSTOP)
		stoppedAt = time.Now()
		time.Sleep(20 * time.Millisecond) // the stopped process (real) is caught where it is: the moment is the behaviour under test
		if pid = stalledSession(t, db); pid == 0 {
			victim.cmd.Process.Signal(syscall.SIGCONT)
			time.Sleep(time.Duration(50+try*7) * time.Millisecond) // let the real process run a while before the next try
		}
	}
	if pid == 0 {
		t.Fatal("in 50 tries the stopped node never held a transaction open")
	}
	notReady := map[string]int{}
	for time.Since(stoppedAt) < pause {
		for _, b := range healthy {
			if resp, err := http.Get(b + "/readyz"); err == nil {
				if resp.StatusCode != http.StatusOK {
					raw, _ := io.ReadAll(resp.Body)
					notReady[string(raw)]++
				}
				resp.Body.Close()
			}
		}
		time.Sleep(100 * time.Millisecond) // the probes' pace while the real process stays stopped
	}
	victim.cmd.Process.Signal(syscall.SIGCONT)
	resumedAt := time.Now()

	gapAcme := load.longestGap(acme, healthy, stoppedAt, resumedAt)
	gapBeta := load.longestGap(beta, healthy, stoppedAt, resumedAt)
	t.Logf("stopped for %s holding session %d: longest time without a 202 from the other nodes: acme %s, beta %s",
		resumedAt.Sub(stoppedAt).Round(time.Millisecond), pid, gapAcme.Round(time.Millisecond), gapBeta.Round(time.Millisecond))
	t.Logf("/readyz of the other nodes, polled every 100 ms meanwhile: not ready %v", notReady)
	if gapAcme > bound+margin {
		t.Errorf("the other nodes acknowledged none of acme's events for %s while a node was stopped in a transaction, want under %s", gapAcme.Round(time.Millisecond), bound+margin)
	}
	if gapBeta > bound+margin {
		t.Errorf("the other nodes acknowledged none of beta's events for %s, want under %s", gapBeta.Round(time.Millisecond), bound+margin)
	}
	waited := 0.0
	for _, b := range healthy {
		waited += metricValue(t, b, "webhookd_database_lock_timeouts_total")
	}
	if waited == 0 {
		t.Error("the other nodes counted no lock wait cut short (webhookd_database_lock_timeouts_total)")
	}

	// The stopped node takes ingests again, and counts the transaction
	// the database ended.
	n := load.count(acme, bases[2])
	if !poll(20*time.Second, func() bool { return load.count(acme, bases[2]) > n }) {
		t.Error("the node acknowledged nothing in the 20 s after SIGCONT")
	}
	if ended := metricValue(t, bases[2], "webhookd_database_idle_transactions_ended_total"); ended == 0 {
		t.Error("the stopped node counted no transaction ended as idle (webhookd_database_idle_transactions_ended_total)")
	}
	close(stop)
	wg.Wait()
	stop = make(chan struct{}) // for the deferred close
	load.mu.Lock()
	ids := slices.Clone(load.ids)
	for what, c := range load.other {
		t.Errorf("answered %d times: %s", c, what)
	}
	load.mu.Unlock()
	var stored int
	if err := db.QueryRow(t.Context(), "SELECT count(*) FROM events WHERE id = ANY($1)", ids).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != len(ids) {
		t.Errorf("%d of %d acknowledged events are stored", stored, len(ids))
	}
	for _, p := range procs {
		p.stop()
	}
}
