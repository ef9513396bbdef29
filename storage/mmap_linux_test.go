//go:build linux

package storage

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// rssFile returns the process's file-backed resident memory in bytes.
func rssFile(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestDropMapped reads 64 MiB of the file through bbolt's map, and checks
// that dropMapped lets go of those pages and that they read the same after.
func TestDropMapped(t *testing.T) {
	db := MustOpenDB(t)
	const n, size = 16 * 1024, 4096
	val := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, size) }
	bucket := []byte("test_drop_mapped")
	if err := db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucket)
		if err != nil {
			return err
		}
		for i := range n {
			if err := b.Put(u64(uint64(i)), val(i)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sum := func(tx *bolt.Tx) (ok bool) {
		ok = true
		c := tx.Bucket(bucket).Cursor()
		i := 0
		for k, v := c.First(); k != nil; k, v = c.Next() {
			ok = ok && bytes.Equal(v, val(i))
			i++
		}
		return ok && i == n
	}
	var read, dropped int64
	err := db.bolt.View(func(tx *bolt.Tx) error {
		before := rssFile(t)
		if !sum(tx) {
			t.Error("values differ before the drop")
		}
		read = rssFile(t) - before
		dropMapped(db.bolt, tx.Size())
		dropped = read + before - rssFile(t)
		if !sum(tx) {
			t.Error("values differ after the drop")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reading mapped %d MiB, the drop let go of %d MiB", read>>20, dropped>>20)
	if read < 32<<20 {
		t.Skipf("reading mapped only %d MiB: the kernel did not map the pages as expected", read>>20)
	}
	if dropped < read/2 {
		t.Errorf("dropMapped let go of %d of the %d bytes the read mapped", dropped, read)
	}
}
