package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// openReadOnly opens path read-only for the offline commands. It fails
// with ErrInUse when a running webhookd holds the file.
func openReadOnly(path string, lockTimeout time.Duration) (*bolt.DB, error) {
	if lockTimeout <= 0 {
		lockTimeout = defaultLockTimeout
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: lockTimeout})
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

// Compact writes a compacted copy of the stopped database at src to dst,
// which must not exist. bbolt never gives freed pages back to the file
// system; the copy holds only live data. It returns the two file sizes.
// The copy is checked (bbolt's page check) before Compact returns.
func Compact(dst, src string, lockTimeout time.Duration) (before, after int64, err error) {
	in, err := openReadOnly(src, lockTimeout)
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	if _, err := os.Stat(dst); err == nil {
		return 0, 0, fmt.Errorf("storage: compact: %s exists; name a new file", dst)
	}
	out, err := bolt.Open(dst, 0o600, &bolt.Options{Timeout: lockTimeout})
	if err != nil {
		return 0, 0, fmt.Errorf("storage: compact: create %s: %w", dst, err)
	}
	if err := bolt.Compact(out, in, 64<<20); err != nil {
		out.Close()
		os.Remove(dst)
		return 0, 0, fmt.Errorf("storage: compact %s: %w", src, err)
	}
	var checkErr error
	out.View(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			checkErr = errors.Join(checkErr, e)
		}
		return nil
	})
	if err := out.Close(); err != nil {
		return 0, 0, fmt.Errorf("storage: compact: close %s: %w", dst, err)
	}
	if checkErr != nil {
		return 0, 0, fmt.Errorf("storage: compact: the copy fails its check: %w", checkErr)
	}
	si, err1 := os.Stat(src)
	di, err2 := os.Stat(dst)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("storage: compact: %w", err)
	}
	return si.Size(), di.Size(), nil
}

// CheckFile opens the stopped database file at path read-only and runs
// bbolt's page check on it: a quick test that a backup or a copy is sound.
func CheckFile(path string) error {
	db, err := openReadOnly(path, 0)
	if err != nil {
		return err
	}
	defer db.Close()
	var errs error
	db.View(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			errs = errors.Join(errs, e)
		}
		return nil
	})
	if errs != nil {
		return fmt.Errorf("storage: check %s: %w", path, errs)
	}
	return nil
}
