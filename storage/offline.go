package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The offline commands (backup, compact, rotate-key) and how one file takes
// the place of another.
//
// A new version of a database file is never written at its final name. It
// is written beside it (a Replacement), fsynced, checked, and only then
// renamed into place, and the directory fsynced: a process killed at any
// moment leaves at the final name nothing, the old file, or the complete
// new one.
//
// IMPORTANT: bbolt's lock (flock) is on the open file, not on its name.
// When a file is renamed over the path, a process that opened the old file
// and waits for its lock would get it on a file no name leads to any more,
// and everything it wrote there would be lost. So every open here
// (openBolt) checks, once it holds the lock, that the file it holds is the
// one at the path, and opens the path again if not. And a rename over a
// live database is done only while holding the old file's lock (so nobody
// writes to it meanwhile), after the new file is complete, and while
// holding the new file's lock too until the renaming process is done.

// maxReopens bounds how often an open starts again because the file was
// replaced while it waited for the lock.
const maxReopens = 10

// openBolt is bolt.Open(path, 0o600, opts) that returns only once the lock
// it holds is on the file now at path; see the comment above.
func openBolt(path string, opts *bolt.Options) (*bolt.DB, error) {
	o := *opts
	var f *os.File
	o.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		var err error
		f, err = os.OpenFile(name, flag, perm)
		return f, err
	}
	for range maxReopens {
		db, err := bolt.Open(path, 0o600, &o)
		if err != nil {
			return nil, err
		}
		held, err := f.Stat()
		if err != nil {
			db.Close()
			return nil, err
		}
		if now, err := os.Stat(path); err == nil && os.SameFile(held, now) {
			return db, nil
		}
		// Replaced while we waited: what we hold is the old file.
		db.Close()
	}
	return nil, fmt.Errorf("the file was replaced %d times while it was being opened", maxReopens)
}

// openReadOnly opens path read-only for the offline commands. It fails
// with ErrInUse when a running webhookd holds the file.
func openReadOnly(path string, lockTimeout time.Duration) (*bolt.DB, error) {
	return openOffline(path, lockTimeout, true)
}

// openExclusive opens path for the offline commands that replace it: no
// other process can open it while it is open. It fails with ErrInUse when
// another process holds the file.
func openExclusive(path string, lockTimeout time.Duration) (*bolt.DB, error) {
	return openOffline(path, lockTimeout, false)
}

func openOffline(path string, lockTimeout time.Duration, readOnly bool) (*bolt.DB, error) {
	if lockTimeout <= 0 {
		lockTimeout = defaultLockTimeout
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	db, err := openBolt(path, &bolt.Options{ReadOnly: readOnly, Timeout: lockTimeout, FreelistType: bolt.FreelistArrayType})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("storage: open %s: %w (lock not acquired within %s)", path, ErrInUse, lockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	return db, nil
}

// CopyFile writes a consistent copy of the database file at path to w
// without a running webhookd: it takes the file's shared lock, so it fails
// with ErrInUse while webhookd runs (back up through the API then).
func CopyFile(path string, w io.Writer, lockTimeout time.Duration) (int64, error) {
	db, err := openReadOnly(path, lockTimeout)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.View(func(tx *bolt.Tx) error {
		n, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("storage: copy %s: %w", path, err)
	}
	return n, nil
}

// A Replacement is a new version of the file at a path, written to a
// temporary file beside it (the path plus a suffix) that takes the path
// only through Commit, once it is complete, fsynced and checked.
//
// The temporary file is locked (flock) for as long as the Replacement is
// open, so two runs never write the same one: NewReplacement fails while
// another process has it. One left by an interrupted run (unlocked: its
// process is gone) is emptied and reused; Stale reports that.
//
// Write to it (for a copy that arrives as bytes), then Commit; always
// Close it, which removes the temporary file unless it was committed.
type Replacement struct {
	path, tmp string
	created   os.FileInfo // the temporary file, to remove it only if it is still ours
	f         *os.File    // the temporary file, locked; nil once bbolt owns it
	bolt      *bolt.DB    // bbolt's handle on f, once opened
	stale     bool
	noReplace bool // Commit fails if path exists
	committed bool
	closed    bool
}

// NewReplacement starts a new version of the file at path, written to
// path + suffix.
func NewReplacement(path, suffix string) (*Replacement, error) {
	tmp := path + suffix
	_, statErr := os.Lstat(tmp)
	existed := statErr == nil
	for range maxReopens {
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("storage: %w", err)
		}
		if err := lockFile(f); err != nil {
			f.Close()
			if errors.Is(err, errLocked) {
				return nil, fmt.Errorf("storage: %s is being written by another process (a backup, compaction or key rotation of the same file): wait for it to end", tmp)
			}
			return nil, fmt.Errorf("storage: lock %s: %w", tmp, err)
		}
		held, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("storage: %w", err)
		}
		if now, err := os.Stat(tmp); err != nil || !os.SameFile(held, now) {
			f.Close() // renamed or removed by the run that held it: again
			continue
		}
		if err := f.Truncate(0); err != nil {
			os.Remove(tmp)
			f.Close()
			return nil, fmt.Errorf("storage: %w", err)
		}
		return &Replacement{path: path, tmp: tmp, created: held, f: f, stale: existed}, nil
	}
	return nil, fmt.Errorf("storage: %s keeps being replaced by another process", tmp)
}

// TempPath returns the path of the temporary file.
func (r *Replacement) TempPath() string { return r.tmp }

// Stale reports whether a temporary file left by an interrupted run was
// found at TempPath (and emptied).
func (r *Replacement) Stale() bool { return r.stale }

// Write appends p to the temporary file. It must not be called after
// Commit.
func (r *Replacement) Write(p []byte) (int, error) {
	if r.f == nil {
		return 0, errors.New("storage: write to a replacement already opened as a database")
	}
	return r.f.Write(p)
}

// db returns bbolt's handle on the temporary file, opening it through the
// locked file (an empty file becomes a new database). Its commits are not
// fsynced: Commit fsyncs the whole file once.
func (r *Replacement) db() (*bolt.DB, error) {
	if r.bolt != nil {
		return r.bolt, nil
	}
	f := r.f
	db, err := bolt.Open(r.tmp, 0o600, &bolt.Options{
		Timeout:      time.Second, // the lock is ours already
		NoSync:       true,
		NoGrowSync:   true,
		FreelistType: bolt.FreelistArrayType,
		OpenFile:     func(string, int, os.FileMode) (*os.File, error) { return f, nil },
	})
	r.f = nil // bbolt owns it now, or closed it
	if err != nil {
		return nil, err
	}
	r.bolt = db
	return db, nil
}

// Commit puts the temporary file at the path: it fsyncs it, checks it
// (checkCopy), fsyncs it again, renames it over the path and fsyncs the
// directory. It holds the new file's lock until Close.
func (r *Replacement) Commit() error { return r.commit(nil) }

// commit is Commit that, with src, also requires the copy to have as many
// keys in every bucket as src (see checkCopy).
func (r *Replacement) commit(src *bolt.DB) error {
	db, err := r.db()
	if err != nil {
		return fmt.Errorf("storage: %s is not a sound database: %w", r.tmp, err)
	}
	if err := db.Sync(); err != nil {
		return fmt.Errorf("storage: fsync %s: %w", r.tmp, err)
	}
	if err := db.View(func(tx *bolt.Tx) error { return checkCopy(tx, src) }); err != nil {
		return fmt.Errorf("storage: %s is not a sound copy: %w", r.tmp, err)
	}
	// Again: opening a copy that arrived as bytes may have written to it
	// (bbolt writes a missing freelist at open).
	if err := db.Sync(); err != nil {
		return fmt.Errorf("storage: fsync %s: %w", r.tmp, err)
	}
	if r.noReplace {
		if _, err := os.Lstat(r.path); err == nil {
			return fmt.Errorf("storage: %s exists; name a new file", r.path)
		}
	}
	if err := os.Rename(r.tmp, r.path); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	r.committed = true
	if err := syncDir(filepath.Dir(r.path)); err != nil {
		return fmt.Errorf("storage: fsync the directory of %s: %w", r.path, err)
	}
	return nil
}

// Close releases the temporary file and its lock. Unless Commit put it in
// place, the temporary file is removed (before the lock is let go, so that
// it is never another run's file that goes). Close is safe to call more
// than once.
func (r *Replacement) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if !r.committed {
		if now, err := os.Lstat(r.tmp); err == nil && os.SameFile(now, r.created) {
			os.Remove(r.tmp)
		}
	}
	switch {
	case r.bolt != nil:
		return r.bolt.Close()
	case r.f != nil:
		return r.f.Close()
	}
	return nil // bbolt failed to open it, and closed it
}

// syncDir fsyncs the directory dir, so that a rename in it is on disk.
// (Windows has no fsync of a directory; its renames are journaled.)
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// checkCopy reports whether the file of tx is sound: bbolt's page check,
// webhookd's invariants (for a file of the current schema; see DB.Check)
// and, with src, the same number of keys in every bucket as src has now.
// The last is what tells a complete copy from one cut short: a compaction
// cut short is a sound database too, only with less in it.
func checkCopy(tx *bolt.Tx, src *bolt.DB) error {
	var errs []error
	for err := range tx.Check() {
		if len(errs) == maxCheckErrors {
			break
		}
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if meta := tx.Bucket(bucketMeta); meta != nil {
		if v := meta.Get(keySchema); len(v) == 8 && binary.BigEndian.Uint64(v) == schemaVersion {
			if errs := checkInvariants(tx); len(errs) > 0 {
				return errors.Join(errs...)
			}
		}
	}
	if src == nil {
		return nil
	}
	want := map[string]int{}
	if err := src.View(func(stx *bolt.Tx) error {
		return stx.ForEach(func(name []byte, b *bolt.Bucket) error {
			want[string(name)] = b.Stats().KeyN
			return nil
		})
	}); err != nil {
		return err
	}
	got := 0
	err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		got++
		if n, ok := want[string(name)]; !ok {
			return fmt.Errorf("bucket %q is not in the original", name)
		} else if b.Stats().KeyN != n {
			return fmt.Errorf("bucket %q has %d keys, the original %d", name, b.Stats().KeyN, n)
		}
		return nil
	})
	if err == nil && got != len(want) {
		err = fmt.Errorf("%d buckets, the original %d", got, len(want))
	}
	return err
}

// CompactResult is what a compaction did.
type CompactResult struct {
	Before, After int64 // the sizes of the file and of its compacted copy
	Stale         bool  // a temporary file left by an interrupted run was replaced
}

// Compact is CompactTo, returning the two file sizes.
func Compact(dst, src string, lockTimeout time.Duration) (before, after int64, err error) {
	res, err := CompactTo(dst, src, lockTimeout)
	return res.Before, res.After, err
}

// CompactTo writes a compacted copy of the stopped database at src to
// dst, which must not exist. bbolt never gives freed pages back to the
// file system; the copy holds only live data. The copy is written to
// dst + ".partial" and renamed to dst only once complete, fsynced and
// checked (see Replacement), so dst never exists incomplete.
func CompactTo(dst, src string, lockTimeout time.Duration) (CompactResult, error) {
	in, err := openReadOnly(src, lockTimeout)
	if err != nil {
		return CompactResult{}, err
	}
	defer in.Close()
	if _, err := os.Lstat(dst); err == nil {
		return CompactResult{}, fmt.Errorf("storage: compact: %s exists; name a new file", dst)
	}
	r, err := NewReplacement(dst, ".partial")
	if err != nil {
		return CompactResult{}, fmt.Errorf("storage: compact: %w", err)
	}
	defer r.Close()
	r.noReplace = true
	return compactInto(r, in)
}

// CompactInPlace compacts the stopped database at path: it writes the
// compacted copy to path + ".compact", and renames it over path once it is
// complete, fsynced and checked. The original's lock is held throughout,
// so no webhookd can start on it meanwhile (one that tries waits for the
// lock, and then opens the compacted file). The original stays at path,
// untouched, until the rename; it is not kept after.
func CompactInPlace(path string, lockTimeout time.Duration) (CompactResult, error) {
	in, err := openExclusive(path, lockTimeout)
	if err != nil {
		return CompactResult{}, err
	}
	defer in.Close() // after r's Close: see the comment at the top
	r, err := NewReplacement(path, ".compact")
	if err != nil {
		return CompactResult{}, fmt.Errorf("storage: compact: %w", err)
	}
	defer r.Close()
	return compactInto(r, in)
}

// compactInto copies src's live records into r and commits it.
func compactInto(r *Replacement, src *bolt.DB) (CompactResult, error) {
	res := CompactResult{Stale: r.Stale()}
	fi, err := os.Stat(src.Path())
	if err != nil {
		return res, fmt.Errorf("storage: compact: %w", err)
	}
	res.Before = fi.Size()
	dst, err := r.db()
	if err != nil {
		return res, fmt.Errorf("storage: compact: create %s: %w", r.TempPath(), err)
	}
	if err := bolt.Compact(dst, src, 64<<20); err != nil {
		return res, fmt.Errorf("storage: compact %s: %w", src.Path(), err)
	}
	if fi, err = os.Stat(r.TempPath()); err != nil {
		return res, fmt.Errorf("storage: compact: %w", err)
	}
	res.After = fi.Size()
	if err := r.commit(src); err != nil {
		return res, fmt.Errorf("storage: compact: %w", err)
	}
	return res, nil
}
