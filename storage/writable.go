package storage

import (
	"context"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// probeInterval is the least time between two write probes of Writable.
const probeInterval = time.Second

// keyWriteProbe is the meta key of Writable's probe value. It is deleted
// right after it is written; one left by a crash in between is harmless
// and overwritten by the next probe.
var keyWriteProbe = []byte("write_probe")

// writeProbe serializes and rate-limits Writable's probes.
type writeProbe struct {
	mu   sync.Mutex
	last time.Time
}

// Writable reports whether the database takes writes of size bytes: nil,
// or an error that says so for the operator, whose chain holds the
// failure. Once a commit has failed (a full disk, an I/O error) it
// reports that failure until a probe succeeds: a commit of its own that
// writes size bytes (pass the largest ingest), then one that deletes
// them, made at most once per probeInterval. Other commits
// succeeding do not clear it, because small ones can succeed in the
// file's free pages while an ingest that must grow the file still fails;
// and the probe does not wait for a client's write, which a load balancer
// that took the node out of service never sends.
func (db *DB) Writable(ctx context.Context, size int) error {
	if err := db.writable(ctx, size); err != nil {
		return notWritable{err}
	}
	return nil
}

// notWritable is Writable's answer while commits fail, in the words
// /readyz shows; Err is the failure (the last failed commit's
// CodeUnavailable *engine.Error, or the probe's).
type notWritable struct{ Err error }

func (e notWritable) Error() string {
	return "storage cannot write now (the last commit failed: disk full or I/O error; see the log)"
}

func (e notWritable) Unwrap() error { return e.Err }

// writable is Writable, answering the failure itself.
func (db *DB) writable(ctx context.Context, size int) error {
	failed := db.writeFailure.Load()
	if failed == nil {
		return nil
	}
	db.probe.mu.Lock()
	defer db.probe.mu.Unlock()
	if db.writeFailure.Load() == nil {
		return nil // another caller's probe succeeded meanwhile
	}
	if time.Since(db.probe.last) < probeInterval {
		return *failed
	}
	db.probe.last = time.Now()
	put := func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyWriteProbe, make([]byte, max(size, 1))) }
	if err := db.update(ctx, put); err != nil {
		return err
	}
	db.writeFailure.CompareAndSwap(failed, nil)
	// Best effort: a probe value left behind is overwritten by the next.
	_ = db.update(ctx, func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyWriteProbe) })
	return nil
}
