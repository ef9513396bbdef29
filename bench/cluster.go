package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	apiclient "github.com/webhookd/webhookd/client"
)

// DatabaseURLEnv names the environment variable that gives the cluster
// scenario its PostgreSQL server when -database-url does not.
const DatabaseURLEnv = "WEBHOOKD_DATABASE_URL"

// claimPoll is the longest a PostgreSQL node's claim loop sleeps without
// a wake-up (postgres.SchedulerOptions.Poll's default).
const claimPoll = time.Second

// killAttempt is how long the kill phase's receivers take to answer, so
// that every node has attempts in flight when one is killed.
const killAttempt = 50 * time.Millisecond

// killLease is the lease of the kill phase's nodes: the longest a dead
// node's claims may wait before the others are offered them.
const killLease = 5 * time.Second

// ClusterStats is the cluster scenario: the same load on one bbolt node,
// one node on PostgreSQL and three on one PostgreSQL schema, then one of
// three nodes killed under load.
type ClusterStats struct {
	Phases []*ClusterPhase `json:"phases"`
	Kill   *KillStats      `json:"kill,omitempty"`
}

// ClusterPhase is one configuration's run of the load.
type ClusterPhase struct {
	Name     string         `json:"name"`
	Nodes    int            `json:"nodes"`
	Ingest   *IngestStats   `json:"ingest"`
	Delivery *DeliveryStats `json:"delivery"`
	// Ratio is Delivery.Rate over the first phase's (one bbolt node).
	Ratio float64 `json:"ratio_to_bbolt"`
	// Ordering is the endpoints' (Options.Ordering; "": none), and
	// Violations the arrivals out of line order (see
	// OrderedPhase.Violations) when they are ordered.
	Ordering   string `json:"ordering,omitempty"`
	Violations int64  `json:"order_violations,omitempty"`
}

// KillStats is the kill phase: three nodes as child processes of the
// webhookd binary on one schema, one of them killed with SIGKILL under
// load while the clients fail over to the others.
type KillStats struct {
	Lease     string  `json:"lease"`
	Rate      float64 `json:"rate"`              // events/s offered
	KilledAt  float64 `json:"killed_at_seconds"` // since the load started
	Acked     int     `json:"acknowledged"`      // events, through all three nodes
	Failovers int64   `json:"failovers"`         // sends the killed node did not answer, sent to another
	// FailoverWaitMs is the longest a failed-over send waited for its 202,
	// from its first try; AckGapMs the longest time after the kill with
	// no 202 to any client.
	FailoverWaitMs float64        `json:"failover_wait_ms"`
	AckGapMs       float64        `json:"ack_gap_ms"`
	Claims         int            `json:"killed_claims"`
	LeaseEndSec    float64        `json:"lease_end_seconds"`        // the last of their leases ended, after the kill
	Reoffered      int            `json:"reoffered"`                // of Claims, claimed again by a survivor
	ReofferSec     float64        `json:"reoffered_within_seconds"` // the last re-offer, after the kill
	SettledSec     float64        `json:"succeeded_within_seconds"` // the last of them succeeded, after the kill
	Lost           int            `json:"acknowledged_events_lost"` // acknowledged events some receiver never got
	Duplicates     int64          `json:"duplicates"`               // at-least-once: the killed node's attempts that reached a receiver unrecorded
	Delivery       *DeliveryStats `json:"delivery"`
}

// cluster runs the load on one bbolt node, one PostgreSQL node and three
// PostgreSQL nodes in turn, then the kill phase.
func (r *runner) cluster() error {
	url := r.o.DatabaseURL
	if url == "" {
		return errNoDatabase
	}
	prefix := "bench_" + strings.ToLower(rand.Text()[:10])
	var schemas []string
	schema := func(name string) string {
		s := prefix + "_" + name
		schemas = append(schemas, s)
		return s
	}
	defer func() {
		if err := dropSchemas(context.WithoutCancel(r.ctx), url, schemas); err != nil {
			r.res.note("could not drop the schemas: %v", err)
		}
	}()
	cs := &ClusterStats{}
	r.res.Cluster = cs
	file := filepath.Join(r.dir, "webhookd.db")
	pg1, pg3 := &pgOptions{url: url, schema: schema("one")}, &pgOptions{url: url, schema: schema("three")}
	phases := []struct {
		name  string
		nodes []instanceOptions
	}{
		{"1 node, bbolt", []instanceOptions{{path: file}}},
		{"1 node, PostgreSQL", []instanceOptions{{pg: pg1}}},
		{"3 nodes, PostgreSQL, one schema", []instanceOptions{{pg: pg3}, {pg: pg3}, {pg: pg3}}},
	}
	var violations int64
	for i, p := range phases {
		if i == len(phases)-1 {
			r.startProfile() // the phase of interest: three nodes
		}
		ph, err := r.clusterPhase(p.name, p.nodes)
		if i == len(phases)-1 {
			r.stopProfile()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if base := cs.Phases; len(base) > 0 && base[0].Delivery.Rate > 0 {
			ph.Ratio = ph.Delivery.Rate / base[0].Delivery.Rate
		} else {
			ph.Ratio = 1
		}
		cs.Phases = append(cs.Phases, ph)
		violations += ph.Violations
	}
	if ph := cs.Phases[0]; ph.Ordering != "" {
		r.res.target("order violations in the ordered phases", "0", fmt.Sprint(violations), violations == 0)
	}
	three := cs.Phases[len(cs.Phases)-1]
	r.res.Ingest, r.res.Delivery = three.Ingest, three.Delivery // the summary line
	r.res.target("3 nodes on PostgreSQL, deliveries end to end", "≥ 40% of 1 bbolt node",
		fmt.Sprintf("%.1f%% (%s of %s /s)", 100*three.Ratio, num(three.Delivery.Rate), num(cs.Phases[0].Delivery.Rate)), three.Ratio >= 0.40)

	// The kill phase's load is paced at half of what three nodes carried
	// end to end, and at half of what its slow receivers let through
	// (each endpoint's concurrency holds for the whole cluster, and each
	// attempt takes killAttempt): under load, but with no backlog, so
	// that a re-offered claim is not queued behind earlier due work
	// (claims go by due time).
	rate := r.o.Rate
	if rate == 0 {
		perEndpoint := r.o.EndpointConcurrency
		if perEndpoint == 0 {
			perEndpoint = 8 // webhookd's default
		}
		slots := float64(perEndpoint) / killAttempt.Seconds() // events/s each endpoint can take
		rate = max(1, min(three.Delivery.EventRate, slots)/2)
	}
	k, err := r.clusterKill(url, schema("kill"), rate)
	cs.Kill = k
	if err != nil {
		return fmt.Errorf("kill phase: %w", err)
	}
	// A claim renewed just before the kill lasts a lease from then; a
	// survivor's claim loop then takes it within its poll interval.
	r.res.target("killed node's claims re-offered", fmt.Sprintf("leases end ≤ %s after the kill, claimed again ≤ %s after", killLease, claimPoll),
		fmt.Sprintf("%d of %d claims: leases ended at %.2f s, claimed again at %.2f s, succeeded at %.2f s", k.Reoffered, k.Claims, k.LeaseEndSec, k.ReofferSec, k.SettledSec),
		k.Reoffered == k.Claims && k.LeaseEndSec <= killLease.Seconds() && k.ReofferSec-k.LeaseEndSec <= claimPoll.Seconds())
	r.res.target("acknowledged events lost when a node is killed", "0",
		fmt.Sprintf("%d of %d", k.Lost, k.Acked), k.Lost == 0)
	return nil
}

// errNoDatabase is the cluster scenario's answer without a database.
var errNoDatabase = fmt.Errorf("the cluster scenario runs webhookd on PostgreSQL: give it a server with -database-url or %s "+
	"(e.g. postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable); each run makes its own schemas there and drops them at the end", DatabaseURLEnv)

// clusterPhase runs the scenario's load on in-process nodes, one per
// element of nodes (the clients send to each in turn), each wired as
// serve wires it, and waits until every acknowledged event reached every
// receiver.
func (r *runner) clusterPhase(name string, nodes []instanceOptions) (*ClusterPhase, error) {
	ordering := apiclient.Ordering(r.o.Ordering)
	if ordering == "" {
		ordering = apiclient.OrderingNone
	}
	rs, err := startReceivers(r.o.Endpoints, 0, r.faults, func(rc *receiver) { rc.logOrder = ordering != apiclient.OrderingNone })
	if err != nil {
		return nil, err
	}
	defer rs.close()
	var ins []*instance
	defer func() {
		for _, in := range ins {
			in.close(5 * time.Second)
		}
	}()
	conns := r.o.Clients + 8
	var apis []*apiClient
	for _, o := range nodes {
		o.dispatch, o.workers, o.perHost, o.perTenant = true, r.o.Workers, r.o.EndpointConcurrency, r.o.TenantConcurrency
		in, err := openInstance(r.ctx, o, conns)
		if err != nil {
			return nil, err
		}
		ins = append(ins, in)
		apis = append(apis, in.api)
	}
	eps, err := r.endpoints(ins[0], rs)
	if err != nil {
		return nil, err
	}
	if err := r.setOrdering(ins[0], eps, ordering); err != nil {
		return nil, err
	}
	stop := r.watch(name, nil, rs)
	cpu := startCPU()
	spec := r.spec(r.o.Clients, r.o.Events)
	spec.nodes = apis
	if ordering == apiclient.OrderingKey {
		spec.keyed = keyedBodies(r.o.EventSize, orderedProfiled)
	}
	lr := runLoad(r.ctx, nil, spec, &r.sent)
	expected := int64(len(lr.acks)) * int64(r.o.Endpoints)
	if !r.drain(r.o.Drain, func() bool { return rs.delivered.Load() >= expected && rs.missing(lr.acks) == 0 }) {
		r.res.note("%s: deliveries still missing after the %s drain", name, r.o.Drain)
	}
	cores := cpu()
	stop()
	if len(lr.acks) == 0 {
		return nil, fmt.Errorf("no event acknowledged: %v", lr.firstErr)
	}
	d, _ := r.deliveryStats(rs, lr.acks, lr.start, all, true)
	d.CPU, d.PendingAtEnd = cores, max(0, int(expected-d.Delivered))
	ph := &ClusterPhase{Name: name, Nodes: len(nodes), Ingest: r.ingestStats(lr, r.o.Clients), Delivery: d}
	if ordering != apiclient.OrderingNone {
		ph.Ordering, ph.Violations = string(ordering), lineViolations(rs, lr)
	}
	return ph, nil
}

// clusterKill runs three nodes as child processes of the webhookd binary
// on one schema with a short lease, sends the load at rate through all
// three and
// kills one with SIGKILL a third of the way in. The receivers take
// killAttempt to answer, so the killed node dies mid-attempt. A child process, not an
// in-process node, because only that is a crash: the kernel closes its
// sockets, PostgreSQL rolls back its open transactions, and nothing of it
// runs on (no attempt in flight, no renewal, no deferred release) — an
// in-process node torn down by cancelling its contexts would still run its
// goroutines until they noticed.
func (r *runner) clusterKill(url, schema string, rate float64) (*KillStats, error) {
	k := &KillStats{Lease: killLease.String(), Rate: rate}
	bin := r.o.Binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return k, fmt.Errorf("the webhookd binary to run: %w", err)
		}
	}
	rs, err := startReceivers(r.o.Endpoints, 0, r.faults)
	if err != nil {
		return k, err
	}
	defer rs.close()
	for _, rc := range rs.rs {
		rc.delay = killAttempt
	}
	cfg := filepath.Join(r.dir, "cluster.toml")
	if err := os.WriteFile(cfg, []byte(r.childConfig(schema)), 0o600); err != nil {
		return k, err
	}
	conns := r.o.Clients + 8
	var nodes []*childNode
	defer func() {
		for _, n := range nodes {
			n.stop(10 * time.Second)
		}
	}()
	for i := range 3 {
		n, err := startChild(bin, cfg, url, filepath.Join(r.dir, fmt.Sprintf("node-%d.log", i)), conns)
		if err != nil {
			return k, fmt.Errorf("node %d: %w", i, err)
		}
		nodes = append(nodes, n)
	}
	apis := []*apiClient{nodes[0].api, nodes[1].api, nodes[2].api}
	if err := r.setup(&instance{api: apis[0]}, rs); err != nil {
		return k, err
	}
	db, err := pgx.Connect(r.ctx, url)
	if err != nil {
		return k, err
	}
	defer db.Close(context.WithoutCancel(r.ctx))
	table := pgx.Identifier{schema, "deliveries"}.Sanitize()

	stop := sync.OnceFunc(r.watch("kill", nil, rs))
	defer stop()
	spec := r.spec(r.o.Clients, r.o.Events)
	spec.nodes, spec.keys, spec.rate = apis, true, rate
	done := make(chan loadResult, 1)
	start := time.Now()
	go func() { done <- runLoad(r.ctx, nil, spec, &r.sent) }()

	// Kill node 2 a third of the way in, and read which deliveries were
	// under a lease at that moment; those still under the same lease a
	// second later (the survivors' attempts to 204 receivers take
	// milliseconds) are the killed node's claims.
	victim := nodes[2]
	select {
	case <-time.After(r.o.Duration / 3):
	case <-r.ctx.Done():
		return k, r.ctx.Err()
	}
	if err := victim.cmd.Process.Kill(); err != nil {
		return k, fmt.Errorf("kill node 2: %w", err)
	}
	killed := time.Now()
	k.KilledAt = killed.Sub(start).Seconds()
	leased, err := leasedDeliveries(r.ctx, db, table, nil)
	if err != nil {
		return k, err
	}
	time.Sleep(time.Second)
	still, err := leasedDeliveries(r.ctx, db, table, slices.Collect(mapKeys(leased)))
	if err != nil {
		return k, err
	}
	claims := map[string]int64{}
	for id, tok := range still {
		if leased[id] == tok {
			claims[id] = tok
		}
	}
	k.Claims = len(claims)
	if len(claims) > 0 {
		var nanos int64
		if err := db.QueryRow(r.ctx, "SELECT max(lease_until) FROM "+table+" WHERE id = ANY($1)", slices.Collect(mapKeys(claims))).Scan(&nanos); err != nil {
			return k, err
		}
		k.LeaseEndSec = time.Unix(0, nanos).Sub(killed).Seconds()
	}
	// Poll them until each is claimed again and succeeded.
	var reoffered, settled time.Time
	seen := map[string]bool{}
	for deadline := killed.Add(3 * killLease); len(seen) < len(claims) && time.Now().Before(deadline) && r.ctx.Err() == nil; time.Sleep(20 * time.Millisecond) {
		rows, err := db.Query(r.ctx, "SELECT id, state, lease_token FROM "+table+" WHERE id = ANY($1)", slices.Collect(mapKeys(claims)))
		if err != nil {
			return k, err
		}
		now := time.Now()
		for rows.Next() {
			var id, state string
			var tok *int64
			if err := rows.Scan(&id, &state, &tok); err != nil {
				rows.Close()
				return k, err
			}
			if tok != nil && *tok == claims[id] && state == "pending" {
				continue // still the killed node's
			}
			if claims[id] != 0 {
				claims[id] = 0 // claimed again (or settled) by a survivor
				k.Reoffered++
				reoffered = now
			}
			if state == "succeeded" && !seen[id] {
				seen[id] = true
				settled = now
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return k, err
		}
	}
	if !reoffered.IsZero() {
		k.ReofferSec = reoffered.Sub(killed).Seconds()
	}
	if !settled.IsZero() {
		k.SettledSec = settled.Sub(killed).Seconds()
	}
	if len(seen) < len(claims) {
		k.SettledSec = 3 * killLease.Seconds()
		r.res.note("kill: %d of the killed node's %d claims not succeeded %s after the kill", len(claims)-len(seen), len(claims), 3*killLease)
	}

	lr := <-done
	stop()
	k.Acked = len(lr.acks)
	if k.Acked == 0 {
		return k, fmt.Errorf("no event acknowledged: %v", lr.firstErr)
	}
	expected := int64(k.Acked) * int64(r.o.Endpoints)
	if !r.drain(r.o.Drain, func() bool { return rs.delivered.Load() >= expected && rs.missing(lr.acks) == 0 }) {
		r.res.note("kill: acknowledged events still missing after the %s drain", r.o.Drain)
	}
	k.Lost = rs.missing(lr.acks)
	k.Delivery, _ = r.deliveryStats(rs, lr.acks, lr.start, all, true)
	k.Delivery.PendingAtEnd = max(0, int(expected-k.Delivery.Delivered))
	k.Duplicates = k.Delivery.Duplicates
	k.Failovers = lr.failovers
	fo, gap := ackGaps(lr.acks, killed)
	k.FailoverWaitMs, k.AckGapMs = ms64(fo), ms64(gap)
	if lr.firstErr != nil {
		r.res.note("kill: %d errors, the first: %v", lr.errors, lr.firstErr)
	}
	return k, nil
}

// ackGaps returns the longest a failed-over send waited for its 202 (from
// its first try), and the longest time between two consecutive 202s to
// any client from killed on.
func ackGaps(acks []ack, killed time.Time) (failedOver, gap time.Duration) {
	var at []time.Time
	for _, a := range acks {
		if a.failedOver {
			failedOver = max(failedOver, a.acked.Sub(a.began))
		}
		at = append(at, a.acked)
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	i, _ := slices.BinarySearchFunc(at, killed, func(a, t time.Time) int { return a.Compare(t) })
	for i = max(i, 1); i < len(at); i++ {
		gap = max(gap, at[i].Sub(at[i-1]))
	}
	return failedOver, gap
}

func ms64(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// leasedDeliveries returns the pending deliveries under a lease and their
// lease tokens, of ids (nil: all).
func leasedDeliveries(ctx context.Context, db *pgx.Conn, table string, ids []string) (map[string]int64, error) {
	q, args := "SELECT id, lease_token FROM "+table+" WHERE state = 'pending' AND lease_token IS NOT NULL", []any{}
	if ids != nil {
		q, args = q+" AND id = ANY($1)", []any{ids}
	}
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var tok int64
		if err := rows.Scan(&id, &tok); err != nil {
			rows.Close()
			return nil, err
		}
		out[id] = tok
	}
	return out, rows.Err()
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// dropSchemas drops the run's schemas with all they hold.
func dropSchemas(ctx context.Context, url string, schemas []string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	var errs []error
	for _, s := range schemas {
		if _, err := db.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// childConfig is the kill phase's webhookd.toml: every node on schema,
// with the run's dispatcher settings, no per-tenant limits (the harness's
// one tenant is the whole load), and an attempt timeout under the lease.
func (r *runner) childConfig(schema string) string {
	return fmt.Sprintf(`[server]
listen = "127.0.0.1:0"
shutdown_timeout = "5s"
[storage]
driver = "postgres"
schema = %q
lease = %q
[api]
tokens = [%q]
[delivery]
allow_http = true
allow_private_targets = true
attempt_timeout = "2s"
workers = %d
endpoint_concurrency = %d
tenant_concurrency = %d
[limits]
pending_per_tenant = 0
ingest_rate_per_tenant = 0
[log]
level = "warn"
`, schema, killLease.String(), benchToken, r.o.Workers, r.o.EndpointConcurrency, r.o.TenantConcurrency)
}

// childNode is webhookd running as a child process.
type childNode struct {
	cmd    *exec.Cmd
	api    *apiClient
	log    *os.File
	exited chan struct{}
}

// startChild starts bin on config, the database URL in its environment
// (never on its command line), and waits until it listens.
func startChild(bin, config, url, logPath string, conns int) (*childNode, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-config", config)
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, DatabaseURLEnv+"=") })
	cmd.Env = append(env, DatabaseURLEnv+"="+url)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	n := &childNode{cmd: cmd, log: logf, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, a, ok := strings.Cut(sc.Text(), "listening on "); ok {
				select {
				case addr <- strings.TrimSpace(a):
				default:
				}
			}
		}
		io.Copy(io.Discard, stdout)
		cmd.Wait() // after the last read of stdout, as StdoutPipe asks
		close(n.exited)
	}()
	select {
	case a := <-addr:
		n.api = newAPIClient(a, benchToken, conns)
		return n, nil
	case <-n.exited:
	case <-time.After(30 * time.Second):
	}
	n.stop(time.Second)
	tail, _ := os.ReadFile(logPath)
	if len(tail) > 2000 {
		tail = tail[len(tail)-2000:]
	}
	return nil, fmt.Errorf("webhookd did not start listening: %s", strings.TrimSpace(string(tail)))
}

// stop ends the node with SIGTERM (serve's graceful stop), or SIGKILL
// after grace; a node already killed has exited.
func (n *childNode) stop(grace time.Duration) {
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(grace):
		n.cmd.Process.Kill()
		<-n.exited
	}
	if n.api != nil {
		n.api.hc.CloseIdleConnections()
	}
	n.log.Close()
}

// missing returns how many of acks some receiver has not answered 2xx.
func (s *receiverSet) missing(acks []ack) int {
	n := 0
	for _, a := range acks {
		for _, rc := range s.rs {
			rc.mu.Lock()
			p := rc.pairs[a.id]
			ok := p != nil && p.oks > 0
			rc.mu.Unlock()
			if !ok {
				n++
				break
			}
		}
	}
	return n
}
