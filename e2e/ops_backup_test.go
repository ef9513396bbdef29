package e2e

import (
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/storage"
)

// TestBackup_HashOnlyConfig runs `webhookd backup -config FILE` against a
// service whose config lists its admin token only by hash: the hash is
// never sent as a token; without a token to send, the command fails before
// any request and says what to pass; -token-file, WEBHOOKD_TOKEN and the
// token file beside the database each work.
func TestBackup_HashOnlyConfig(t *testing.T) {
	skipOnPostgres(t, "the backup command copies the bbolt file (postgres: pg_dump)")
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "webhookd.db")
	sum := httpapi.TokenHash(testToken)
	hashed := httpapi.TokenHashPrefix + hex.EncodeToString(sum[:])
	cfg := configWith(t, testConfig, map[string]any{
		"api.tokens":    []string{hashed},
		"storage.path":  dbPath,
		"server.listen": closedPort(t), // the instance listens elsewhere (-listen)
	})
	in := startInstance(t, dir, cfg)
	in.setup()
	in.ingest("invoice.paid", `{"n":1}`)
	cfgPath := filepath.Join(dir, "webhookd.toml")

	backup := func(env []string, args ...string) (string, error) {
		args = append([]string{"backup", "-config", cfgPath}, args...)
		if in.node != nil { // running
			args = append(args, "-url", in.base)
		}
		return commandEnv(t, 5*time.Minute, env, args...)
	}
	backupRequests := func() string {
		resp, err := http.Get(in.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "webhookd_http_requests_total{") && strings.Contains(l, `route="/v1/admin/backup"`) {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	}

	out := filepath.Join(t.TempDir(), "b.db")
	msg, err := backup(nil, "-o", out)
	if err == nil {
		t.Fatalf("backup with only a token hash configured succeeded: %s", msg)
	}
	for _, want := range []string{"-token-file", "WEBHOOKD_TOKEN", "sha256:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("backup without a token: %q, want it to name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), hashed[len("sha256:"):]) {
		t.Errorf("the error shows the configured hash: %q", err)
	}
	if got := backupRequests(); got != "" {
		t.Errorf("backup without a token made a request:\n%s", got)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s exists after a failed backup", out)
	}

	tokenFile := filepath.Join(t.TempDir(), "backup-token")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if msg, err := backup(nil, "-o", out, "-token-file", tokenFile); err != nil {
		t.Errorf("backup -token-file: %v %s", err, msg)
	}
	if msg, err := backup([]string{"WEBHOOKD_TOKEN=" + testToken}, "-o", out); err != nil {
		t.Errorf("backup with WEBHOOKD_TOKEN: %v %s", err, msg)
	}
	if msg, err := backup(nil, "-o", out, "-token", hashed); err == nil || !strings.Contains(err.Error(), "hash") {
		t.Errorf("backup -token sha256:…: %v %s, want a refusal saying it is a hash", err, msg)
	}
	// The token file beside the database, as the service keeps a generated
	// one: read when it holds a token, not a hash.
	if err := os.WriteFile(filepath.Join(dir, "admin-token"), []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if msg, err := backup(nil, "-o", out); err != nil {
		t.Errorf("backup with the token in %s: %v %s", filepath.Join(dir, "admin-token"), err, msg)
	}
	if got := backupRequests(); strings.Contains(got, `code="401"`) {
		t.Errorf("a backup was refused:\n%s", got)
	}

	// Stopped, with no token anywhere: nothing listens at [server] listen,
	// so the file is copied, which needs no token.
	os.Remove(filepath.Join(dir, "admin-token"))
	in.stop()
	if msg, err := backup(nil, "-o", out); err != nil || !strings.Contains(msg, "backup of "+dbPath) {
		t.Errorf("backup of the stopped service without a token: %v %s, want a copy of the file", err, msg)
	}
}

// refusingURL is an endpoint URL where nothing listens, ever: port 1 is
// outside the ephemeral range every test's listener (127.0.0.1:0) is
// given a port from, so a connection is refused at once and no other
// test's receiver can take the port while this test's node still retries
// it (a closed ephemeral port can be: another test's receiver then got
// this one's deliveries and failed their signatures).
const refusingURL = "http://127.0.0.1:1/gone"

// closedPort returns a loopback address where nothing listens now. It
// may be given to another listener later: never send deliveries to it
// (refusingURL).
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// fillDB ingests events of about 150 KB into in (tenant acme, set up)
// until its database file at dbPath has at least size bytes.
func fillDB(t *testing.T, in *instance, dbPath string, size int64) {
	t.Helper()
	data := fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 150<<10))
	for i := 0; ; i++ {
		if fi, err := os.Stat(dbPath); err == nil && fi.Size() >= size {
			return
		}
		if i == 2000 {
			t.Fatalf("%s is still under %d bytes after 2000 ingests", dbPath, size)
		}
		in.ingest("invoice.paid", data)
	}
}

// slowBackupClient is a raw HTTP/1.1 client of GET /v1/admin/backup with
// a small receive buffer (so the server cannot park the whole answer in
// socket buffers) that reads chunk bytes every pause; a chunk of 0 reads
// the answer's first bytes, then nothing.
type slowBackupClient struct {
	conn net.Conn
	stop chan struct{} // closed at cleanup
	read atomic.Int64  // bytes of the answer read so far
	done chan struct{} // closed when the server ended or cut the answer
	err  error         // why reading stopped, once done
}

func startSlowBackupClient(t *testing.T, base string, chunk int, pause time.Duration) *slowBackupClient {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	conn.(*net.TCPConn).SetReadBuffer(16 << 10)
	c := &slowBackupClient{conn: conn, stop: make(chan struct{}), done: make(chan struct{})}
	// Registered after the instance's cleanup, so it runs before it: a
	// stalled answer must not hold up the instance's shutdown.
	t.Cleanup(func() { close(c.stop); conn.Close(); <-c.done })
	fmt.Fprintf(conn, "GET /v1/admin/backup HTTP/1.1\r\nHost: webhookd\r\nAuthorization: Bearer %s\r\n\r\n", testToken)
	go func() {
		defer close(c.done)
		buf := make([]byte, max(chunk, 512))
		for {
			n, err := conn.Read(buf)
			c.read.Add(int64(n))
			if err != nil {
				c.err = err
				return
			}
			if chunk == 0 {
				<-c.stop // never read again
				return
			}
			select {
			case <-c.stop:
				return
			case <-time.After(pause):
			}
		}
	}()
	waitFor(t, "the backup's first bytes", func() bool { return c.read.Load() > 0 })
	return c
}

func (c *slowBackupClient) finished() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// TestBackup_SlowReaderDoesNotStallIngest reads the hot backup at about
// 40 KB/s while events of 150 KB are ingested, enough to grow the file
// past bbolt's memory map: a remap waits for every read transaction, so a
// backup that streamed from its read transaction stalled every ingest
// until the client finished or went away. Each ingest must answer, and
// well within a few seconds.
//
// Not parallel: it measures ingest latency.
func TestBackup_SlowReaderDoesNotStallIngest(t *testing.T) {
	skipOnPostgres(t, "the hot backup streams the bbolt file (postgres: pg_dump)")
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "webhookd.db")
	in := startInstance(t, dir, testConfig)
	in.setup()
	fillDB(t, in, dbPath, 12<<20) // more than socket buffers hold; map of 16 MiB
	start, _ := os.Stat(dbPath)

	c := startSlowBackupClient(t, in.base, 4<<10, 100*time.Millisecond)
	client := &http.Client{Timeout: 15 * time.Second}
	data := fmt.Sprintf(`{"type":"invoice.paid","data":{"pad":%q}}`, strings.Repeat("y", 150<<10))
	var took []time.Duration
	for i := range 80 {
		req, _ := http.NewRequest("POST", in.base+"/v1/tenants/acme/events", strings.NewReader(data))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("ingest %d of 150 KB while a slow client reads the backup: %v (after %s)", i+1, err, time.Since(t0).Round(time.Millisecond))
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took = append(took, time.Since(t0))
		if resp.StatusCode != 202 {
			t.Fatalf("ingest %d: %d", i+1, resp.StatusCode)
		}
	}
	if c.finished() {
		t.Fatalf("test is broken: the backup client stopped (%v) before the ingests ended", c.err)
	}
	end, _ := os.Stat(dbPath)
	slices.Sort(took)
	worst := took[len(took)-1]
	if worst > 5*time.Second {
		t.Errorf("the slowest ingest took %s while the backup was read slowly", worst)
	}
	reliabilityReport(t, "slow backup reader: %d KiB of the backup read at ~40 KB/s while 80 ingests of 150 KB grew the file from %d to %d MiB: ingest p50 %s, max %s",
		c.read.Load()>>10, start.Size()>>20, end.Size()>>20, took[len(took)/2].Round(time.Millisecond), worst.Round(time.Millisecond))
}

// backupTempFiles returns how many files in's webhookd process holds
// open whose name marks a backup's temporary copy (Linux: /proc/PID/fd).
func backupTempFiles(t *testing.T, in *instance) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", in.node.cmd.Process.Pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		t.Skipf("no %s: %v", dir, err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.Contains(target, ".webhookd-backup-") {
			n++
		}
	}
	return n
}

// TestBackup_StalledClientIsCut takes a backup with [server] write_timeout
// = 1s: a client that reads steadily gets the whole file though that takes
// longer than the timeout; one that stops reading is cut once a piece of
// the answer has waited for it longer than the timeout, and the backup's
// temporary copy goes with it.
//
// Not parallel: the steady reader must be scheduled in time, every piece
// read well within the write timeout.
func TestBackup_StalledClientIsCut(t *testing.T) {
	skipOnPostgres(t, "the hot backup streams the bbolt file (postgres: pg_dump)")
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "webhookd.db")
	// Filled under the default write timeout: with 1s, an ingest of
	// 150 KiB that a loaded machine takes over a second to
	// answer is cut too, which is not what this test is about.
	filler := startInstance(t, dir, testConfig)
	filler.setup()
	fillDB(t, filler, dbPath, 8<<20)
	filler.stop()
	in := startInstance(t, dir, configWith(t, testConfig, map[string]any{"server.write_timeout": "1s"}))
	size, _ := os.Stat(dbPath)

	// Steady: 64 KiB every 50 ms, about 1.3 MB/s, so the answer takes
	// seconds, each 256 KiB piece about 0.2 s.
	req, _ := http.NewRequest("GET", in.base+"/v1/admin/backup", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	f, err := os.Create(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	var got int64
	// The pause between reads is the steady pace under test.
	for buf := make([]byte, 64<<10); ; time.Sleep(50 * time.Millisecond) {
		n, err := io.ReadFull(resp.Body, buf)
		f.Write(buf[:n])
		got += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			t.Fatalf("a steady reader of the backup was cut after %d bytes, %s: %v", got, time.Since(began).Round(time.Millisecond), err)
		}
	}
	resp.Body.Close()
	f.Close()
	took := time.Since(began)
	if took < 1500*time.Millisecond {
		t.Errorf("test is broken: the steady read took %s, not longer than the write timeout", took)
	}
	t.Logf("a steady reader got the whole backup, %d bytes, in %s", got, took.Round(time.Millisecond))
	db, err := storage.Open(copyPath, storage.Options{})
	if err != nil {
		t.Fatalf("the steadily read backup (%d bytes in %s) does not open: %v", got, took, err)
	}
	if err := db.Check(); err != nil {
		t.Errorf("the steadily read backup fails its check: %v", err)
	}
	db.Close()

	c := startSlowBackupClient(t, in.base, 0, 0)
	waitFor(t, "the backup's temporary copy to be open", func() bool { return backupTempFiles(t, in) > 0 })
	started := time.Now()
	waitFor(t, "the stalled backup to be cut and its temporary copy closed", func() bool { return backupTempFiles(t, in) == 0 })
	cut := time.Since(started)
	// What the server had sent before the cut is still to read: read it
	// out, then the connection must be closed.
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, c.conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the connection of the stalled backup is still open after %s", cut)
	}
	if got := c.read.Load() + n; got >= size.Size() {
		t.Errorf("the stalled client got %d bytes, the whole file (%d): not cut", got, size.Size())
	}
	t.Logf("stalled backup cut %s after its copy was taken (write_timeout 1s)", cut.Round(time.Millisecond))
	in.mustCall(200, "GET", "/readyz", nil, nil)
}

// TestBackup_NoSpaceForCopy puts the database on a 32 MiB tmpfs: a hot
// backup needs room for its temporary copy plus 64 MiB left for ingest, so
// it is refused with 503 before anything is written (a copy that filled
// the disk would make every ingest fail meanwhile); with room, it works.
// It needs to mount a tmpfs (root) and skips otherwise. Not parallel: it
// mounts.
func TestBackup_NoSpaceForCopy(t *testing.T) {
	skipOnPostgres(t, "the backup command copies the bbolt file (postgres: pg_dump)")
	mnt := mountTmpfs(t, "32m")
	in := startInstance(t, mnt, testConfig)
	in.setup()
	in.ingest("invoice.paid", `{"n":1}`)

	code, body := in.callAs(testToken, "GET", "/v1/admin/backup")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "free space") {
		t.Errorf("backup with 32 MiB free: %d %.200q, want 503 naming the free space", code, body)
	}
	if n := backupTempFiles(t, in); n != 0 {
		t.Errorf("%d temporary copies open after the refusal", n)
	}
	in.ingest("invoice.paid", `{"n":2}`)

	if out, err := exec.Command("mount", "-o", "remount,size=128m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v: %s", err, out)
	}
	out := filepath.Join(t.TempDir(), "b.db")
	if msg, err := command(t, "backup", "-url", in.base, "-token", testToken, "-o", out); err != nil {
		t.Errorf("backup with 128 MiB free: %v %s", err, msg)
	}
}
