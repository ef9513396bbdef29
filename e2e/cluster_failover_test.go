package e2e

// Cluster mode across a database failover: a primary with a synchronous
// standby, the primary SIGKILLed under load and the standby promoted.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgServer is a PostgreSQL server a test made and runs, on loopback.
type pgServer struct {
	t    *testing.T
	bin  string // the installation's bin directory
	dir  string // the socket directory (the test's, owned by the server's user)
	data string // the data directory
	port int
}

// pgServerBin returns WEBHOOKD_TEST_PGBIN, or skips t (fails it in CI) when
// it is unset or the server cannot run here.
func pgServerBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(pgBinEnv)
	skip := t.Skipf
	if os.Getenv("CI") != "" {
		skip = t.Fatalf
	}
	if bin == "" {
		skip("%s is not set: this test runs a PostgreSQL primary and standby of its own from that bin directory (e.g. /usr/lib/postgresql/15/bin); .ci/postgres exports it", pgBinEnv)
	}
	for _, name := range []string{"initdb", "pg_ctl", "pg_basebackup"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			skip("%s=%s: %v", pgBinEnv, bin, err)
		}
	}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			skip("running as root, and PostgreSQL will not: no postgres user to run it as (%v)", err)
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			skip("running as root, and no runuser to run PostgreSQL as the postgres user: %v", err)
		}
	}
	return bin
}

// pgDir returns a new directory in t.TempDir() that PostgreSQL may own:
// as root, it is chowned to the postgres user (the server refuses to run
// as root) and the test's directories above it opened for it to traverse.
func pgDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		return dir
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// command is one of the installation's programs, run as the postgres
// user when the test runs as root.
func (s *pgServer) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(s.bin, name)
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

func (s *pgServer) run(name string, args ...string) {
	s.t.Helper()
	if out, err := s.command(name, args...).CombinedOutput(); err != nil {
		s.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// appendConf appends lines to the server's postgresql.conf: a later
// setting wins.
func (s *pgServer) appendConf(lines ...string) {
	s.t.Helper()
	f, err := os.OpenFile(filepath.Join(s.data, "postgresql.conf"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("\n" + strings.Join(lines, "\n") + "\n"); err != nil {
		s.t.Fatal(err)
	}
}

// start starts the server on its port and stops it when the test ends,
// whatever happened meanwhile.
func (s *pgServer) start() {
	s.t.Helper()
	s.t.Cleanup(s.stop)
	s.run("pg_ctl", "-D", s.data, "-l", s.data+".log", "-w", "-t", "60",
		"-o", fmt.Sprintf("-p %d -k '%s' -c listen_addresses=127.0.0.1", s.port, s.dir), "start")
}

// pid is the postmaster's PID, from postmaster.pid; 0 when there is none.
func (s *pgServer) pid() int {
	b, err := os.ReadFile(filepath.Join(s.data, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// processes returns the PIDs of the server's processes still running:
// those whose working directory is its data directory (the postmaster
// and, for a while after it is killed, its orphaned backends).
func (s *pgServer) processes() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil && cwd == s.data {
			pids = append(pids, pid)
		}
	}
	return pids
}

// kill sends SIGKILL to the postmaster alone, as a crash of the machine's
// database process would end it; its backends notice and exit.
func (s *pgServer) kill() {
	s.t.Helper()
	pid := s.pid()
	if pid == 0 || !slices.Contains(s.processes(), pid) {
		s.t.Fatalf("the server on port %d has no running postmaster", s.port)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
}

// stop stops the server (immediate shutdown) and then ends, by PID, any
// of its processes left, so nothing outlives the test.
func (s *pgServer) stop() {
	if s.pid() != 0 {
		s.command("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "-t", "20", "stop").Run()
	}
	if !poll(10*time.Second, func() bool { return len(s.processes()) == 0 }) {
		for _, pid := range s.processes() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		poll(5*time.Second, func() bool { return len(s.processes()) == 0 })
	}
	if left := s.processes(); len(left) > 0 {
		s.t.Errorf("PostgreSQL processes of %s still running: %v", s.data, left)
	}
}

// url is the server's URL as the postgres user.
func (s *pgServer) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// freePort returns a loopback TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startReplicated starts a primary and a synchronous standby of it on
// loopback: a commit on the primary returns once the standby has it on
// disk. The standby has no synchronous standby of its own, so once
// promoted it commits alone.
func startReplicated(t *testing.T, bin string) (primary, standby *pgServer) {
	t.Helper()
	dir := pgDir(t)
	primary = &pgServer{t: t, bin: bin, dir: dir, data: filepath.Join(dir, "primary"), port: freePort(t)}
	standby = &pgServer{t: t, bin: bin, dir: dir, data: filepath.Join(dir, "standby"), port: freePort(t)}
	// --no-sync: the setup need not survive the machine's crash; the
	// servers themselves run with fsync and synchronous_commit on.
	primary.run("initdb", "-D", primary.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	primary.appendConf(
		"wal_level = replica",
		"max_wal_senders = 4",
		"synchronous_standby_names = '*'",
		"synchronous_commit = on",
		"shared_buffers = 32MB",
		"max_connections = 100",
	)
	primary.start()
	primary.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres",
		"-D", standby.data, "-R", "-X", "stream", "-c", "fast", "--no-sync")
	standby.appendConf("synchronous_standby_names = ''")
	standby.start()

	conn := clusterDB(t, primary.url(), "public")
	if !poll(30*time.Second, func() bool {
		var state string
		err := conn.QueryRow(context.Background(), "SELECT sync_state FROM pg_stat_replication").Scan(&state)
		return err == nil && state == "sync"
	}) {
		t.Fatal("the standby did not become the primary's synchronous standby within 30 s")
	}
	return primary, standby
}

// readyProbe polls /readyz of a node every 50 ms and records the answers.
type readyProbe struct {
	mu      sync.Mutex
	answers []readyAnswer
}

type readyAnswer struct {
	at    time.Time
	ready bool
}

func (p *readyProbe) run(base string, stop <-chan struct{}) {
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		resp, err := client.Get(base + "/readyz")
		a := readyAnswer{at: time.Now()}
		if err == nil {
			a.ready = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
		p.mu.Lock()
		p.answers = append(p.answers, a)
		p.mu.Unlock()
		select {
		case <-stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// last returns the latest answer.
func (p *readyProbe) last() readyAnswer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.answers) == 0 {
		return readyAnswer{}
	}
	return p.answers[len(p.answers)-1]
}

// notReady returns the first and last "not ready" answers after t0 and
// the first "ready" after those.
func (p *readyProbe) notReady(t0 time.Time) (first, last, readyAgain time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.answers {
		switch {
		case a.at.Before(t0):
		case !a.ready:
			if first.IsZero() {
				first = a.at
			}
			last = a.at
		case !first.IsZero() && readyAgain.IsZero():
			readyAgain = a.at
		}
	}
	return first, last, readyAgain
}

// TestCluster_Failover runs two webhookd nodes on a primary with a
// synchronous standby (the URL names both, target_session_attrs=
// read-write), SIGKILLs the primary's postmaster under ingest load and
// then promotes the standby, as an operator or a failover manager would.
// It checks that:
//
//   - no acknowledged event is lost: each is in the new primary's log and
//     delivered (verified with the official libraries) at least once;
//   - while no primary is writable, ingest answers 503 with Retry-After
//     (and nothing else but 202), and /readyz is not ready;
//   - the nodes reconnect by themselves: /readyz is ready again, and each
//     takes ingest, without a restart.
//
// The gap in acknowledgements, the 503s and the duplicates are reported.
func TestCluster_Failover(t *testing.T) {
	clusterTest(t)
	t.Parallel() // servers and processes of its own
	pgBin := pgServerBin(t)
	webhookdBinary(t)
	events := 400
	if testing.Short() {
		events = 200
	}
	started := time.Now()
	primary, standby := startReplicated(t, pgBin)

	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write", primary.port, standby.port)
	const lease = 3 * time.Second
	cfg := configWith(t, testConfig, map[string]any{
		"storage.driver":                "postgres",
		"storage.url":                   url,
		"storage.schema":                "webhookd",
		"storage.lease":                 lease.String(),
		"delivery.attempt_timeout":      "1s", // under the lease
		"delivery.schedule":             []string{"50ms", "100ms", "200ms", "500ms", "1s"},
		"delivery.deadline":             "5m",
		"delivery.workers":              16,
		"delivery.endpoint_concurrency": 16,
		"log.level":                     "warn",
	})
	procs, bases := clusterProcs(t, t.TempDir(), cfg, 2)
	nodes := []*instance{{t: t, base: bases[0]}, {t: t, base: bases[1]}}
	nodes[0].setup()
	rc := newClusterReceiver(t, 0)
	ep := nodes[1].createEndpoint(rc.srv.URL, "*")
	rc.setSecret(ep.Secret)

	stopProbes := make(chan struct{})
	var probesDone sync.WaitGroup
	probes := make([]*readyProbe, len(bases))
	for i, base := range bases {
		probes[i] = &readyProbe{}
		probesDone.Go(func() { probes[i].run(base, stopProbes) })
	}
	defer func() { close(stopProbes); probesDone.Wait() }()
	allReady := func(want bool) func() bool {
		return func() bool {
			for _, p := range probes {
				if a := p.last(); a.at.IsZero() || a.ready != want {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, "both nodes ready", allReady(true))

	load := newClusterLoad(bases, events, 6, 25*time.Millisecond)
	loaded := make(chan struct{})
	go func() { defer close(loaded); load.run(time.Now().Add(60 * time.Second)) }()

	if !poll(30*time.Second, func() bool { return load.ackedCount() >= events/4 }) {
		t.Fatalf("only %d of %d events acknowledged in 30 s", load.ackedCount(), events)
	}
	primary.kill()
	killed := time.Now()
	ackedAtKill := load.ackedCount()
	// No primary: both nodes say so, and ingest is pushed back for a while
	// before the promotion (a failover manager's detection time).
	if !poll(15*time.Second, allReady(false)) {
		t.Fatalf("/readyz still ready on some node 15 s after the primary's kill")
	}
	poll(5*time.Second, func() bool {
		load.mu.Lock()
		defer load.mu.Unlock()
		return len(load.unavailable) >= 10
	})
	time.Sleep(500 * time.Millisecond) // the real primary stays down a while before the promotion (a failover manager's detection time)
	standby.run("pg_ctl", "-D", standby.data, "-w", "-t", "60", "promote")
	promoted := time.Now()
	if !poll(30*time.Second, allReady(true)) {
		t.Fatalf("/readyz not ready on every node 30 s after the standby's promotion")
	}
	readyAt := time.Now()
	// Each node takes ingest again, by itself.
	for _, n := range nodes {
		n.ingest("invoice.paid", `{"after":"failover"}`)
	}
	<-loaded
	load.check(t)
	for i, p := range procs {
		select {
		case <-p.exited:
			t.Fatalf("node %d exited during the failover: %v", i, p.err)
		default:
		}
	}

	db := clusterDB(t, standby.url(), "webhookd")
	if !poll(30*time.Second, func() bool { return pendingCount(db) == 0 }) {
		t.Fatalf("%d deliveries still pending 30 s after the load", pendingCount(db))
	}

	load.mu.Lock()
	ids := make([]string, 0, len(load.acked))
	for _, id := range load.acked {
		ids = append(ids, id)
	}
	ackAt := slices.Clone(load.ackAt)
	unavailable := slices.Clone(load.unavailable)
	noRetryAfter, connErrs, others := load.noRetryAfter, load.connErrs, fmt.Sprint(load.others)
	load.mu.Unlock()

	// No acknowledged event lost: in the new primary's log, and delivered.
	rows, err := db.Query(context.Background(), "SELECT id FROM events")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, id := range ids {
		if !slices.Contains(stored, id) {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d acknowledged events are not in the promoted standby's log", lost)
	}
	rc.checkSignatures()
	missing, duplicates, duplicated := rc.tally(ids)
	if missing > 0 {
		t.Errorf("%d acknowledged events were never delivered", missing)
	}
	if states := deliveryStates(t, db); len(states) != 1 || states["succeeded"] != len(stored) {
		t.Errorf("deliveries by state: %v, want all %d succeeded", states, len(stored))
	}

	// While no primary was writable: 503s with Retry-After, not ready.
	if len(unavailable) == 0 {
		t.Error("ingest never answered 503 while no primary was writable")
	}
	if noRetryAfter > 0 {
		t.Errorf("%d of %d 503s had no Retry-After", noRetryAfter, len(unavailable))
	}
	var notReady []string
	for i, p := range probes {
		first, last, again := p.notReady(killed)
		if first.IsZero() || again.IsZero() {
			t.Errorf("node %d: /readyz not seen going not ready and back after the kill", i)
			continue
		}
		notReady = append(notReady, fmt.Sprintf("node %d %s after the kill until %s after (ready again %s after the promotion)",
			i, first.Sub(killed).Round(time.Millisecond), last.Sub(killed).Round(time.Millisecond), again.Sub(promoted).Round(time.Millisecond)))
	}
	// The gap: the longest time without an acknowledgement.
	slices.SortFunc(ackAt, func(a, b time.Time) int { return a.Compare(b) })
	var gap time.Duration
	var gapEnd time.Time
	for i := 1; i < len(ackAt); i++ {
		if d := ackAt[i].Sub(ackAt[i-1]); d > gap {
			gap, gapEnd = d, ackAt[i]
		}
	}
	var window time.Duration
	if len(unavailable) > 0 {
		slices.SortFunc(unavailable, func(a, b time.Time) int { return a.Compare(b) })
		window = unavailable[len(unavailable)-1].Sub(unavailable[0])
	}
	reliabilityReport(t, "cluster failover: 2 nodes, primary SIGKILLed after %d acknowledged (%d of %d events acknowledged in all), standby promoted %s later; longest gap without an acknowledgement %s (ending %s after the promotion); %d 503s (all with Retry-After: %t) over %s; %d requests without an answer, other statuses %s; /readyz not ready: %s; both nodes ready %s after the promotion; 0 acknowledged lost allowed (lost %d, undelivered %d); %d duplicate deliveries over %d events; took %s",
		ackedAtKill, len(ids), events, promoted.Sub(killed).Round(time.Millisecond), gap.Round(time.Millisecond), gapEnd.Sub(promoted).Round(time.Millisecond),
		len(unavailable), noRetryAfter == 0, window.Round(time.Millisecond), connErrs, others, strings.Join(notReady, "; "),
		readyAt.Sub(promoted).Round(time.Millisecond), lost, missing, duplicates, duplicated, time.Since(started).Round(100*time.Millisecond))
	for _, p := range procs {
		p.stop()
	}
}
