package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/sealing"
)

// openFilesOf returns how many of this process's file descriptors refer
// to the file now at path (Linux: /proc/self/fd), or -1 without /proc.
func openFilesOf(tb testing.TB, path string) int {
	tb.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	want, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if fi, err := os.Stat(filepath.Join("/proc/self/fd", fd.Name())); err == nil && os.SameFile(fi, want) {
			n++
		}
	}
	return n
}

// fillEvents appends n events of about size bytes each to tenant's
// order.created (one endpoint, so each has a delivery).
func fillEvents(tb testing.TB, db *DB, tenant string, n, size int) []string {
	tb.Helper()
	mustEventType(tb, db, "order.created")
	if eps, _ := db.Endpoints(context.Background(), tenant); len(eps) == 0 {
		mustEndpoint(tb, db, tenant, "order.created")
	}
	var ids []string
	for i := range n {
		res := mustAppend(tb, db, newEvent(tenant, "order.created", fmt.Sprintf(`{"n":%d,"pad":%q}`, i, strings.Repeat("p", size))))
		ids = append(ids, res.Event.ID)
	}
	return ids
}

// eventIDs returns the IDs of every event in the stopped file at path.
func eventIDs(tb testing.TB, path string, key []byte) map[string]bool {
	tb.Helper()
	db, err := Open(path, Options{SecretKey: key})
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	mustCheck(tb, db)
	ids := map[string]bool{}
	if err := db.ForEachEvent(context.Background(), func(ev engine.Event, _ []engine.Delivery) error {
		ids[ev.ID] = true
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	return ids
}

// TestOpen_fileReplacedWhileWaiting: a process that opens the database
// while another holds its lock, and gets the lock only after that other
// process renamed a new file over the path (as compact -in-place and
// rotate-key do), must end up on the new file: on the old one, unlinked,
// everything it wrote would be lost.
func TestOpen_fileReplacedWhileWaiting(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("watches /proc/self/fd")
	}
	path := filepath.Join(t.TempDir(), "webhookd.db")
	db := mustOpenDBAt(t, path)
	mustTenant(t, db, "before")
	db.Close()

	holder, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	type opened struct {
		db  *DB
		err error
	}
	waiter := make(chan opened, 1)
	go func() {
		db, err := Open(path, Options{LockTimeout: 10 * time.Second})
		waiter <- opened{db, err}
	}()
	// The waiter has the old file open and waits for its lock.
	for deadline := time.Now().Add(5 * time.Second); openFilesOf(t, path) < 2; time.Sleep(time.Millisecond) { // the kernel's descriptors of the file: nothing signals them
		if time.Now().After(deadline) {
			t.Fatal("Open did not open the file within 5s")
		}
	}
	// A new version of the file, renamed over it while the lock is held.
	tmp := path + ".new"
	f, err := os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.View(func(tx *bolt.Tx) error { _, err := tx.WriteTo(f); return err }); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	holder.Close()

	w := <-waiter
	if w.err != nil {
		t.Fatalf("Open after the file was replaced: %v", w.err)
	}
	mustTenant(t, w.db, "after")
	w.db.Close()

	db = mustOpenDBAt(t, path)
	for _, id := range []string{"before", "after"} {
		if _, err := db.Tenant(context.Background(), id); err != nil {
			t.Errorf("tenant %q in the file at the path: %v", id, err)
		}
	}
}

func TestCompactInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "webhookd.db")
	db := mustOpenDBAt(t, path)
	mustTenant(t, db, "acme")
	fillEvents(t, db, "acme", 200, 4000)
	db.Close()
	want := eventIDs(t, path, nil)

	t.Run("in use", func(t *testing.T) {
		db := mustOpenDBAt(t, path)
		defer db.Close()
		if _, err := CompactInPlace(path, 50*time.Millisecond); !errors.Is(err, ErrInUse) {
			t.Errorf("CompactInPlace of an open file = %v, want ErrInUse", err)
		}
	})

	// A temporary file left by an interrupted run: replaced, said so.
	if err := os.WriteFile(path+".compact", []byte("half a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := CompactInPlace(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stale {
		t.Error("CompactInPlace did not report the stale temporary file")
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != res.After {
		t.Errorf("the file at the path: %v, %v; want %d bytes", fi, err, res.After)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Errorf("%s.compact is left behind: %v", path, err)
	}
	if got := eventIDs(t, path, nil); len(got) != len(want) {
		t.Errorf("%d events after compaction, want %d", len(got), len(want))
	}
	t.Logf("compacted %d to %d bytes", res.Before, res.After)
}

func TestCompact_partialFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "webhookd.db")
	db := mustOpenDBAt(t, path)
	mustTenant(t, db, "acme")
	fillEvents(t, db, "acme", 20, 1000)
	db.Close()
	want := eventIDs(t, path, nil)

	out := filepath.Join(dir, "compact.db")
	if err := os.WriteFile(out+".partial", []byte("left by a killed run"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := CompactTo(out, path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stale {
		t.Error("CompactTo did not report the stale FILE.partial")
	}
	if _, err := os.Stat(out + ".partial"); !os.IsNotExist(err) {
		t.Errorf("%s.partial is left behind: %v", out, err)
	}
	if got := eventIDs(t, out, nil); len(got) != len(want) {
		t.Errorf("%d events in the copy, want %d", len(got), len(want))
	}
	if _, err := CompactTo(out, path, time.Second); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("CompactTo over an existing file = %v, want a refusal", err)
	}
}

// TestReplacement: a Replacement's temporary file is locked while it is
// written, so a second run refuses it; only Commit puts anything at the
// path; Close without Commit leaves no temporary file.
func TestReplacement(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "webhookd.db")
	db := mustOpenDBAt(t, src)
	mustTenant(t, db, "acme")
	path := filepath.Join(dir, "copy.db")

	r, err := NewReplacement(path, ".partial")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewReplacement(path, ".partial"); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Errorf("a second Replacement of the same file = %v, want a refusal naming another process", err)
	}
	if _, err := db.WriteTo(r); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s exists before Commit", path)
	}
	if err := r.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close after Commit: %v", err)
	}
	if _, err := os.Stat(path + ".partial"); !os.IsNotExist(err) {
		t.Errorf("the temporary file is left after Commit: %v", err)
	}
	eventIDs(t, path, nil) // opens, and passes Check

	// Not a database: Commit refuses it and the path keeps what it had.
	r, err = NewReplacement(path, ".partial")
	if err != nil {
		t.Fatal(err)
	}
	r.Write([]byte("not a database"))
	if err := r.Commit(); err == nil {
		t.Error("Commit of a file that is not a database succeeded")
	}
	r.Close()
	if _, err := os.Stat(path + ".partial"); !os.IsNotExist(err) {
		t.Errorf("the temporary file is left after a failed Commit: %v", err)
	}
	eventIDs(t, path, nil)
}

// TestRotateSecretKey_interrupted is rotate-key killed after its re-seal
// committed and before the rewrite was renamed into place: the file is
// under the new key, old-key copies of the secrets are in its free pages,
// and a half-written .rotate is beside it. Running the same rotation again
// finishes the job: it removes the .rotate, rewrites the file, and says so.
func TestRotateSecretKey_interrupted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "webhookd.db")
	oldKey, newKey1 := newKey(t), newKey(t)
	db := openKeyed(t, path, oldKey)
	mustTenant(t, db, "acme")
	var stored []string
	for range 3 {
		ep := mustEndpoint(t, db, "acme", "*")
		if err := db.view(context.Background(), func(tx *bolt.Tx) error {
			raw, err := decodeEndpoint(tx.Bucket(bucketEndpoints).Get(endpointKey("acme", ep.ID)))
			stored = append(stored, raw.Secrets[0].Key)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// The first half of a rotation: the re-seal, committed.
	to, _ := sealing.New(newKey1)
	if err := db.update(context.Background(), func(tx *bolt.Tx) error {
		if _, err := resealAll(tx, db.secrets, to); err != nil {
			return err
		}
		id := to.ID()
		return tx.Bucket(bucketMeta).Put(keySecretKeyID, id[:])
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := os.WriteFile(path+".rotate", []byte("half a rewrite"), 0o600); err != nil {
		t.Fatal(err)
	}
	if len(fileLeaks(t, path, stored...)) == 0 {
		t.Fatal("test is broken: the old-key sealed secrets are not in the file")
	}

	res, err := RotateSecretKey(path, oldKey, newKey1, Options{})
	if err != nil {
		t.Fatalf("RotateSecretKey again after an interrupted run: %v", err)
	}
	if !res.AlreadyRotated || !res.Stale {
		t.Errorf("RotateSecretKey = %+v, want AlreadyRotated and Stale", res)
	}
	if leaked := fileLeaks(t, path, stored...); len(leaked) > 0 {
		t.Errorf("after the rerun, %d old-key sealed secrets are still in the file", len(leaked))
	}
	if _, err := os.Stat(path + ".rotate"); !os.IsNotExist(err) {
		t.Errorf("%s.rotate is left behind: %v", path, err)
	}
	db = openKeyed(t, path, newKey1)
	mustCheck(t, db)
}
