package boltinbox

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/verify"
)

// The ordering helper's buckets, created by the first Tx.Advance; doc.go
// has their layouts.
var (
	bucketVersions  = []byte("verify.versions")
	bucketConflicts = []byte("verify.conflicts")
	bucketSequences = []byte("verify.sequences")
)

var (
	_ verify.OrderInbox = (*Inbox)(nil)
	_ verify.OrderTx    = (*Tx)(nil)
)

// StartOrder implements verify.OrderInbox: the sender's floor is in
// verify.sequences under the order key of (sender, ""). Once it is set,
// StartOrder only reads.
func (in *Inbox) StartOrder(ctx context.Context, sender string, sequence uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	floorKey := verify.AppendEventKey(nil, sender, "")
	var found bool
	err := in.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketSequences); b != nil {
			found = b.Get(floorKey) != nil
		}
		return nil
	})
	if err != nil || found {
		return err
	}
	err = in.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketSequences)
		if err != nil || b.Get(floorKey) != nil {
			return err
		}
		return b.Put(floorKey, binary.BigEndian.AppendUint64(nil, sequence))
	})
	if err != nil {
		return fmt.Errorf("verify: inbox: order floor: %w", err)
	}
	return nil
}

// InOrder implements verify.OrderTx: the highest sequence processed per
// (sender, ordering key), and the sender's floor (StartOrder; this
// event's sequence when none was set), are in verify.sequences.
func (t *Tx) InOrder(key string, sequence, previous uint64) (bool, error) {
	if t.done {
		return false, errors.New("verify: InOrder after fn returned")
	}
	if key == "" || len(key) > verify.MaxKeyLen {
		return false, verify.ErrInvalidKey
	}
	b, err := t.tx.CreateBucketIfNotExists(bucketSequences)
	if err != nil {
		return false, fmt.Errorf("verify: inbox: sequences: %w", err)
	}
	floorKey := verify.AppendEventKey(nil, t.sender, "")
	floor, found, err := getU64(b, floorKey)
	if err != nil {
		return false, err
	}
	if !found {
		floor = sequence
		if err := b.Put(floorKey, binary.BigEndian.AppendUint64(nil, floor)); err != nil {
			return false, fmt.Errorf("verify: inbox: order floor: %w", err)
		}
	}
	k := verify.AppendEventKey(nil, t.sender, key)
	done, _, err := getU64(b, k)
	if err != nil {
		return false, err
	}
	if !verify.PredecessorDone(previous, done, floor) {
		return false, nil
	}
	if sequence > done {
		if err := b.Put(k, binary.BigEndian.AppendUint64(nil, sequence)); err != nil {
			return false, fmt.Errorf("verify: inbox: sequence of %q: %w", key, err)
		}
	}
	return true, nil
}

// Processed returns the highest sequence InOrder recorded as processed
// for sender's ordering key, and whether it recorded any.
func (in *Inbox) Processed(ctx context.Context, sender, key string) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	var n uint64
	var found bool
	err := in.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSequences)
		if b == nil || key == "" {
			return nil
		}
		var err error
		n, found, err = getU64(b, verify.AppendEventKey(nil, sender, key))
		return err
	})
	return n, found, err
}

// getU64 reads a big-endian uint64 value of b.
func getU64(b *bolt.Bucket, k []byte) (uint64, bool, error) {
	v := b.Get(k)
	if v == nil {
		return 0, false, nil
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("verify: inbox: corrupt sequence record %x", k)
	}
	return binary.BigEndian.Uint64(v), true, nil
}

// Conflict is the record of an event that arrived after a newer event of
// the same object and so was not applied: webhookd does not deliver in
// order, and a retry or a replay can bring an old event after a new one.
type Conflict struct {
	Sender, Object string
	EventID        string    // the late event: recorded as processed, not applied
	Version        int64     // its version
	CurrentEventID string    // the event whose state stands
	CurrentVersion int64     // its version, at least Version
	At             time.Time // when the late event was processed
}

// Advance is the per-object ordering check. It reports whether the event
// being processed, at version, may set the state of object (the
// receiver's id of the thing the event is about: "order:1001"); call it in
// Receive's fn before writing that state. version is what orders the
// object's events: the envelope's Created.UnixNano(), or a version field
// of the receiver's own that grows with every change.
//
// When version is greater than the object's recorded version (or none is
// recorded), Advance records it with the event id and returns true: write
// the state. Otherwise it records a Conflict and returns false: skip the
// write and return nil from fn, so that the late event counts as processed
// (answered 2xx, not retried) without overwriting newer state. Both
// records are in the event's transaction: they commit or roll back with
// it. An equal version from another event is refused too, as the two
// cannot be ordered: if two events of one object can share a Created
// millisecond, use a version field of your own. Calling Advance again for
// the same object in the same event returns true and changes nothing.
//
// object must be 1 to MaxKeyLen bytes (ErrInvalidKey). Advance must not
// be called after fn returns.
func (t *Tx) Advance(object string, version int64) (bool, error) {
	if t.done {
		return false, errors.New("verify: Advance after fn returned")
	}
	if object == "" || len(object) > verify.MaxKeyLen {
		return false, verify.ErrInvalidKey
	}
	versions, err := t.tx.CreateBucketIfNotExists(bucketVersions)
	if err != nil {
		return false, fmt.Errorf("verify: inbox: versions: %w", err)
	}
	key := verify.AppendEventKey(nil, t.sender, object)
	if v := versions.Get(key); v != nil {
		cur, err := decodeVersionRecord(v)
		if err != nil {
			return false, fmt.Errorf("verify: inbox: version of %q: %w", object, err)
		}
		if cur.eventID == t.eventID {
			return true, nil
		}
		if version <= cur.version {
			return false, t.recordConflict(key, conflictRecord{
				at: t.now, version: version, currentVersion: cur.version,
				eventID: t.eventID, currentEventID: cur.eventID,
			})
		}
	}
	rec := versionRecord{version: version, updated: t.now, eventID: t.eventID}
	if err := versions.Put(key, rec.encode()); err != nil {
		return false, fmt.Errorf("verify: inbox: version of %q: %w", object, err)
	}
	return true, nil
}

func (t *Tx) recordConflict(key []byte, rec conflictRecord) error {
	b, err := t.tx.CreateBucketIfNotExists(bucketConflicts)
	if err != nil {
		return fmt.Errorf("verify: inbox: conflicts: %w", err)
	}
	seq, err := b.NextSequence()
	if err != nil {
		return fmt.Errorf("verify: inbox: conflicts: %w", err)
	}
	k := binary.BigEndian.AppendUint64(bytes.Clone(key), seq)
	if err := b.Put(k, rec.encode()); err != nil {
		return fmt.Errorf("verify: inbox: record conflict: %w", err)
	}
	return nil
}

// Conflicts returns the conflicts Advance recorded for sender's object, in
// the order they happened; with object "" those of all sender's objects,
// by object.
func (in *Inbox) Conflicts(ctx context.Context, sender, object string) ([]Conflict, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prefix := binary.BigEndian.AppendUint16(nil, uint16(len(sender)))
	prefix = append(prefix, sender...)
	if object != "" {
		prefix = verify.AppendEventKey(nil, sender, object)
	}
	var out []Conflict
	err := in.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketConflicts)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			s, obj, ok := parseConflictKey(k)
			if !ok {
				return fmt.Errorf("corrupt conflict key %x", k)
			}
			rec, err := decodeConflictRecord(v)
			if err != nil {
				return err
			}
			out = append(out, Conflict{
				Sender: s, Object: obj,
				EventID: rec.eventID, Version: rec.version,
				CurrentEventID: rec.currentEventID, CurrentVersion: rec.currentVersion,
				At: rec.at,
			})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify: inbox: conflicts: %w", err)
	}
	return out, nil
}

// parseConflictKey splits objectKey ‖ seq into sender and object.
func parseConflictKey(k []byte) (sender, object string, ok bool) {
	if len(k) < 8 {
		return "", "", false
	}
	sender, rest, ok := cutLenPrefixed(k[:len(k)-8])
	if !ok {
		return "", "", false
	}
	object, rest, ok = cutLenPrefixed(rest)
	if !ok || len(rest) != 0 {
		return "", "", false
	}
	return sender, object, true
}

// versionRecord is an object's current version.
type versionRecord struct {
	version int64
	updated time.Time
	eventID string
}

const (
	versionRecordV1   = 1
	versionHeaderLen  = 1 + 8 + 8
	conflictRecordV1  = 1
	conflictHeaderLen = 1 + 8 + 8 + 8 + 2
)

var (
	errCorruptVersion  = errors.New("corrupt version record")
	errCorruptConflict = errors.New("corrupt conflict record")
)

// encode returns 0x01 ‖ version ‖ updated ‖ event id.
func (r versionRecord) encode() []byte {
	b := make([]byte, 0, versionHeaderLen+len(r.eventID))
	b = append(b, versionRecordV1)
	b = binary.BigEndian.AppendUint64(b, uint64(r.version))
	b = binary.BigEndian.AppendUint64(b, uint64(unixNano(r.updated)))
	return append(b, r.eventID...)
}

func decodeVersionRecord(b []byte) (versionRecord, error) {
	if len(b) < versionHeaderLen || b[0] != versionRecordV1 {
		return versionRecord{}, errCorruptVersion
	}
	updated, ok := readTime(b[9:])
	if !ok {
		return versionRecord{}, errCorruptVersion
	}
	return versionRecord{
		version: int64(binary.BigEndian.Uint64(b[1:])),
		updated: updated,
		eventID: string(b[versionHeaderLen:]),
	}, nil
}

// conflictRecord is the value of a Conflict; sender and object are in
// its key.
type conflictRecord struct {
	at                      time.Time
	version, currentVersion int64
	eventID, currentEventID string
}

// encode returns 0x01 ‖ at ‖ version ‖ current version ‖ len(event id)
// u16 ‖ event id ‖ current event id.
func (r conflictRecord) encode() []byte {
	b := make([]byte, 0, conflictHeaderLen+len(r.eventID)+len(r.currentEventID))
	b = append(b, conflictRecordV1)
	b = binary.BigEndian.AppendUint64(b, uint64(unixNano(r.at)))
	b = binary.BigEndian.AppendUint64(b, uint64(r.version))
	b = binary.BigEndian.AppendUint64(b, uint64(r.currentVersion))
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.eventID)))
	b = append(b, r.eventID...)
	return append(b, r.currentEventID...)
}

func decodeConflictRecord(b []byte) (conflictRecord, error) {
	if len(b) < conflictHeaderLen || b[0] != conflictRecordV1 {
		return conflictRecord{}, errCorruptConflict
	}
	at, ok := readTime(b[1:])
	if !ok {
		return conflictRecord{}, errCorruptConflict
	}
	n := int(binary.BigEndian.Uint16(b[25:]))
	rest := b[conflictHeaderLen:]
	if len(rest) < n {
		return conflictRecord{}, errCorruptConflict
	}
	return conflictRecord{
		at:             at,
		version:        int64(binary.BigEndian.Uint64(b[9:])),
		currentVersion: int64(binary.BigEndian.Uint64(b[17:])),
		eventID:        string(rest[:n]),
		currentEventID: string(rest[n:]),
	}, nil
}
