package storage

import (
	"context"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"
)

// OldestDue returns the due time of the first entry of the retry index,
// in UTC: the pending delivery whose attempt is due earliest. ok is false
// when nothing is pending. Used for the "oldest pending" metric; one
// short read.
func (db *DB) OldestDue(ctx context.Context) (due time.Time, ok bool, err error) {
	err = db.view(ctx, func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketRetryIndex).Cursor().First()
		if len(k) >= 8 {
			due, ok = time.Unix(0, int64(binary.BigEndian.Uint64(k[:8]))).UTC(), true
		}
		return nil
	})
	if err != nil {
		return time.Time{}, false, wrap("oldest due", err)
	}
	return due, ok, nil
}

// FileSize returns the size of the database file in bytes.
func (db *DB) FileSize() int64 {
	var n int64
	db.bolt.View(func(tx *bolt.Tx) error {
		n = tx.Size()
		return nil
	})
	return n
}
