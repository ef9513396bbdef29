package e2e

// The offline commands killed with SIGKILL: the file at the database's
// path, and the file an -o names, is always absent, the old one, or the
// complete new one, with every acknowledged event.

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/storage"
)

// opsKillSettings are TestOps_KillNine's kills per command
// (WEBHOOKD_OPS_KILLS, default 6) and database size in MiB
// (WEBHOOKD_OPS_KILL_MB, default 24).
func opsKillSettings(t *testing.T) (kills, mib int) {
	get := func(name string, def int) int {
		s := os.Getenv(name)
		if s == "" {
			return def
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", name, s)
		}
		return n
	}
	return get("WEBHOOKD_OPS_KILLS", 6), get("WEBHOOKD_OPS_KILL_MB", 24)
}

// opsKill is the state of TestOps_KillNine: the database, its two keys
// and the events acknowledged into it.
type opsKill struct {
	t      *testing.T
	bin    string
	dir    string
	dbPath string
	keys   [2][]byte  // the two master keys the secrets are rotated between
	cfgs   [2]string  // config files whose current key is keys[i]
	acked  []string   // event IDs acknowledged by the service
	logs   *os.File   // the processes' output
	rng    *rand.Rand // kill delays
}

func writeKey(t *testing.T, path string) []byte {
	k := make([]byte, storage.SecretKeySize)
	crand.Read(k)
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

// open opens the stopped database at path with whichever key it is under,
// and returns which.
func (o *opsKill) open(path string) (*storage.DB, int) {
	o.t.Helper()
	var errs []error
	for i, k := range o.keys {
		db, err := storage.Open(path, storage.Options{SecretKey: k, LockTimeout: 5 * time.Second})
		if err == nil {
			return db, i
		}
		errs = append(errs, err)
	}
	o.t.Fatalf("%s opens with neither key: %v", path, errors.Join(errs...))
	return nil, 0
}

// verify checks that the stopped database at path passes Check and holds
// exactly the acknowledged events, and returns which key it is under.
func (o *opsKill) verify(when, path string) int {
	o.t.Helper()
	db, key := o.open(path)
	defer db.Close()
	if err := db.Check(); err != nil {
		o.t.Fatalf("%s: %s fails Check: %v", when, path, err)
	}
	got := map[string]bool{}
	if err := db.ForEachEvent(context.Background(), func(ev engine.Event, _ []engine.Delivery) error {
		got[ev.ID] = true
		return nil
	}); err != nil {
		o.t.Fatalf("%s: %s: %v", when, path, err)
	}
	missing := 0
	for _, id := range o.acked {
		if !got[id] {
			missing++
		}
	}
	if missing > 0 || len(got) != len(o.acked) {
		o.t.Fatalf("%s: %s holds %d events, %d of the %d acknowledged missing", when, path, len(got), missing, len(o.acked))
	}
	return key
}

// verifyOut checks that out is absent, or the complete database. It
// removes it when complete, so that the next run can write it again.
func (o *opsKill) verifyOut(when, out string) (written bool) {
	o.t.Helper()
	if _, err := os.Stat(out); os.IsNotExist(err) {
		return false
	}
	o.verify(when+" (the -o file)", out)
	if err := os.Remove(out); err != nil {
		o.t.Fatal(err)
	}
	return true
}

// command runs the binary with args, sends it SIGKILL after delay (never,
// for a negative delay), and reports whether it finished on its own, how
// long it ran and what it printed.
func (o *opsKill) command(delay time.Duration, args ...string) (finished bool, took time.Duration, output string) {
	o.t.Helper()
	cmd := exec.Command(o.bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		o.t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	if delay < 0 {
		err = <-exited
	} else {
		select {
		case err = <-exited:
		case <-time.After(delay):
			cmd.Process.Kill()
			err = <-exited
		}
	}
	took = time.Since(start)
	fmt.Fprintf(o.logs, "== %s (after %s): %v\n%s", strings.Join(args, " "), took, err, out.Bytes())
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return false, took, out.String()
		}
	}
	if err != nil {
		o.t.Fatalf("webhookd %s: %v\n%s", strings.Join(args, " "), err, out.Bytes())
	}
	return true, took, out.String()
}

// opsCase is one command of TestOps_KillNine.
type opsCase struct {
	name  string
	args  func() []string
	tmp   string                           // the temporary file a killed run may leave
	check func(when string, finished bool) // after every run
}

// killLoop runs c twice in full (the shorter run is the measure), then
// kills times, each killed after a random delay of up to 1.2 times the
// measure, then once more in full, calling c.check after every run. A run
// that finds a temporary file left by a killed one must replace it and say
// so. It returns the line of the report.
func (o *opsKill) killLoop(kills int, c opsCase) string {
	o.t.Helper()
	var full time.Duration
	cut, left := 0, 0
	for k := -2; k <= kills; k++ {
		delay := time.Duration(-1)
		if k >= 0 && k < kills {
			delay = time.Duration(o.rng.Int64N(int64(full) * 6 / 5))
		}
		_, err := os.Lstat(c.tmp)
		stale := err == nil
		args := c.args()
		finished, took, out := o.command(delay, args...)
		if k < 0 && (full == 0 || took < full) {
			full = took
		}
		when := fmt.Sprintf("%s run %d, finished", c.name, k+3)
		if !finished && k == kills {
			o.t.Fatalf("%s: the last run was killed", c.name)
		}
		if !finished {
			cut++
			when = fmt.Sprintf("%s killed after %s (kill %d)", c.name, took.Round(time.Millisecond), k+1)
			if _, err := os.Lstat(c.tmp); err == nil {
				left++
			}
		} else if stale && !strings.Contains(out, "replaced "+c.tmp) {
			o.t.Fatalf("%s: %s was left by a killed run, and the next one did not say it replaced it:\n%s", when, c.tmp, out)
		}
		c.check(when, finished)
	}
	return fmt.Sprintf("%s: %d kills, %d during the run (%d of them left %s, which the next run replaced), a full run %s",
		c.name, kills, cut, left, filepath.Base(c.tmp), full.Round(time.Millisecond))
}

// fill starts the service on the database with cfgs[0], sets up tenant
// acme with two endpoints (one answering 200, one where nothing listens,
// so its deliveries wait in the retry index), ingests events of about
// 150 KB until the file has mib MiB, and stops it.
func (o *opsKill) fill(mib int) {
	t := o.t
	rc := newReceiver(t, status(200))
	p := startProc(t, o.cfgs[0], o.dbPath, o.logs)
	in := &instance{t: t, base: p.waitListening()}
	in.setup()
	ep := in.createEndpoint(rc.srv.URL, "*")
	rc.setSecret(ep.Secret)
	in.createEndpoint(refusingURL, "invoice.paid")
	data := fmt.Sprintf(`{"pad":%q}`, strings.Repeat("z", 150<<10))
	for i := 0; ; i++ {
		if fi, err := os.Stat(o.dbPath); err == nil && fi.Size() >= int64(mib)<<20 {
			break
		}
		if i == 20000 {
			t.Fatal("the database does not grow")
		}
		typ := "invoice.paid"
		if i%2 == 0 {
			typ = "payment.succeeded"
		}
		o.acked = append(o.acked, in.ingest(typ, data).ID)
	}
	p.stop()
}

// sealedUnder is how a secret sealed under key starts in the file: the
// first 8 base64 characters of its key ID.
func sealedUnder(key []byte) []byte {
	id := storage.SecretKeyID(key)
	return []byte("sealed:v1:" + base64.RawURLEncoding.EncodeToString(id[:6]))
}

// TestOps_KillNine builds webhookd, fills a database through the real
// service, then runs each offline command that writes a database file —
// backup (of the stopped file and of the running service), compact -o,
// compact -in-place, rotate-key — and kills it with SIGKILL after random
// delays spread over its whole run. After every kill:
//
//   - the file at the database's path opens (under one of the two keys),
//     passes Check, and holds exactly the acknowledged events;
//   - the file -o names is absent or complete (same checks);
//   - the next run succeeds, whatever temporary file the killed one left.
//
// rotate-key is rerun with the same arguments until a run completes: a
// rerun after a kill must finish the rotation and its scrub, and after
// each completed rotation no secret sealed under the old key is left in
// the file. Last, webhookd is started while compact -in-place runs (it
// waits for the lock): it must come up on the compacted file, and what it
// acknowledges then must be in the file at the path.
//
// It skips under -short. WEBHOOKD_OPS_KILLS and WEBHOOKD_OPS_KILL_MB run it
// longer and on a bigger file.
func TestOps_KillNine(t *testing.T) {
	skipOnPostgres(t, "kill -9 of the offline commands on the bbolt file")
	if testing.Short() {
		t.Skip("the kill test of the offline commands runs without -short")
	}
	t.Parallel() // processes of its own, on its own files and ports
	started := time.Now()
	kills, mib := opsKillSettings(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	dir := t.TempDir()
	o := &opsKill{t: t, bin: webhookdBinary(t), dir: dir, dbPath: filepath.Join(dir, "webhookd.db"), rng: rand.New(rand.NewPCG(seed, 2))}
	var err error
	if o.logs, err = os.Create(filepath.Join(dir, "commands.log")); err != nil {
		t.Fatal(err)
	}
	defer func() {
		o.logs.Close()
		if t.Failed() {
			b, _ := os.ReadFile(o.logs.Name())
			if len(b) > 8<<10 {
				b = b[len(b)-8<<10:]
			}
			t.Logf("the commands' output (the end):\n%s", b)
		}
	}()
	for i := range o.keys {
		keyFile := filepath.Join(dir, fmt.Sprintf("key%d", i))
		o.keys[i] = writeKey(t, keyFile)
		o.cfgs[i] = filepath.Join(dir, fmt.Sprintf("webhookd%d.toml", i))
		cfg := configWith(t, testConfig, map[string]any{
			"storage.path":            o.dbPath,
			"storage.secret_key_file": keyFile,
			"delivery.schedule":       []string{"1h"},
			"delivery.deadline":       "2h",
			"log.level":               "warn",
		})
		if err := os.WriteFile(o.cfgs[i], []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o.fill(mib)
	size, _ := os.Stat(o.dbPath)
	o.verify("after filling", o.dbPath)

	var report []string
	stopped := func(when string, _ bool) { o.verify(when, o.dbPath) }
	out := filepath.Join(dir, "out.db")
	outChecked := func(when string, finished bool) {
		if o.verifyOut(when, out) != finished && finished {
			o.t.Fatalf("%s: no %s", when, out)
		}
	}

	report = append(report, o.killLoop(kills, opsCase{
		name: "backup -db", tmp: out + ".partial", check: outChecked,
		args: func() []string { return []string{"backup", "-config", o.cfgs[0], "-db", o.dbPath, "-o", out} },
	}))
	p := startProc(t, o.cfgs[0], o.dbPath, o.logs)
	base := p.waitListening()
	report = append(report, o.killLoop(kills, opsCase{
		name: "backup (hot)", tmp: out + ".partial", check: outChecked,
		args: func() []string {
			return []string{"backup", "-config", o.cfgs[0], "-url", base, "-token", testToken, "-o", out}
		},
	}))
	p.stop()
	report = append(report, o.killLoop(kills, opsCase{
		name: "compact -o", tmp: out + ".partial",
		check: func(when string, finished bool) {
			outChecked(when, finished)
			stopped(when, finished)
		},
		args: func() []string { return []string{"compact", "-config", o.cfgs[0], "-db", o.dbPath, "-o", out} },
	}))
	report = append(report, o.killLoop(kills, opsCase{
		name: "compact -in-place", tmp: o.dbPath + ".compact", check: stopped,
		args: func() []string { return []string{"compact", "-config", o.cfgs[0], "-db", o.dbPath, "-in-place"} },
	}))

	// rotate-key: the same command until a run completes, then back.
	from, rotations := 0, 0
	report = append(report, o.killLoop(kills, opsCase{
		name: "rotate-key", tmp: o.dbPath + ".rotate",
		args: func() []string {
			return []string{"rotate-key", "-config", o.cfgs[from], "-new-key-file", filepath.Join(dir, fmt.Sprintf("key%d", 1-from))}
		},
		check: func(when string, finished bool) {
			key := o.verify(when, o.dbPath)
			if !finished {
				return
			}
			if key != 1-from {
				t.Fatalf("%s: the file is under key %d", when, key)
			}
			raw, err := os.ReadFile(o.dbPath)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(raw, sealedUnder(o.keys[from])) {
				t.Fatalf("%s: a secret sealed under the old key is still in the file", when)
			}
			if _, err := os.Stat(o.dbPath + ".rotate"); !os.IsNotExist(err) {
				t.Fatalf("%s: %s.rotate is left: %v", when, o.dbPath, err)
			}
			from, rotations = 1-from, rotations+1
		},
	}))
	report[len(report)-1] += fmt.Sprintf(" (%d rotations completed, each with no secret under the old key left in the file)", rotations)

	// webhookd started while compact -in-place runs: it waits for the
	// lock, then must serve the compacted file, not the replaced one.
	key := o.verify("before the start during compaction", o.dbPath)
	waitCfg := filepath.Join(dir, "wait.toml")
	b, _ := os.ReadFile(o.cfgs[key])
	if err := os.WriteFile(waitCfg, []byte(configWith(t, string(b), map[string]any{"storage.lock_timeout": "60s"})), 0o600); err != nil {
		t.Fatal(err)
	}
	_, compactTook, _ := o.command(-1, "compact", "-config", o.cfgs[key], "-in-place")
	for round := range 3 {
		cmd := exec.Command(o.bin, "compact", "-config", o.cfgs[key], "-in-place")
		cmd.Stdout, cmd.Stderr = o.logs, o.logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Start webhookd 1/5, 2/5, 3/5 into the compaction: the moment is
		// the behaviour under test.
		time.Sleep(compactTook * time.Duration(1+round) / 5)
		p := startProc(t, waitCfg, o.dbPath, o.logs)
		if err := cmd.Wait(); err != nil {
			p.kill()
			t.Fatalf("compact -in-place with a webhookd waiting: %v", err)
		}
		in := &instance{t: t, base: p.waitListening()}
		o.acked = append(o.acked, in.ingest("payment.succeeded", fmt.Sprintf(`{"round":%d}`, round)).ID)
		p.stop()
		o.verify(fmt.Sprintf("webhookd started %d/5 into compact -in-place", 1+round), o.dbPath)
	}
	report = append(report, fmt.Sprintf("webhookd started during compact -in-place (a full run %s): 3 of 3 came up on the compacted file with nothing lost", compactTook.Round(time.Millisecond)))

	reliabilityReport(t, "offline commands killed with SIGKILL on a %d MiB database of %d events: %s; after every kill the file at the path opened, passed Check and held every acknowledged event, and no -o file was ever incomplete; took %s",
		size.Size()>>20, len(o.acked)-3, strings.Join(report, "; "), time.Since(started).Round(time.Second))
}
