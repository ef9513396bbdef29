package boltinbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/verify"
)

// The inbox's buckets, created at open; doc.go has their key and value
// layouts.
var (
	bucketEvents = []byte("verify.events")
	bucketTasks  = []byte("verify.tasks")
	bucketDue    = []byte("verify.due")
)

// DefaultTaskLease is how long a claimed task stays with its worker when
// ClaimTask is given no lease.
const DefaultTaskLease = time.Minute

// maxLastError bounds the stored text of a task's last failure.
const maxLastError = 1024

// Inbox is a verify.Inbox in a bbolt file, with durable tasks.
//
// Receive runs fn inside a bbolt write transaction, so fn holds bbolt's
// single writer lock: it must be short and must not do network I/O, wait
// on channels, or start another transaction on the same DB (that
// deadlocks). Duplicates are answered from a read transaction.
//
// Recovery: there is nothing to do at open. A crash before Receive's
// commit leaves neither the record nor fn's writes, so the redelivery runs
// fn; a crash after it leaves both. A task a crashed worker was processing
// is claimed again by ClaimTask when its lease ends.
type Inbox struct {
	// Now returns the current time for records and task times; nil means
	// time.Now. Set it before the inbox is used.
	Now func() time.Time

	db    *bolt.DB
	owned bool // Close closes db
	locks keyLocks
}

// Open opens (creating if needed) the bbolt file at path as an inbox.
// bbolt locks the file: one process at a time. Close it when done.
func Open(path string) (*Inbox, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("verify: open inbox: %w", err)
	}
	in, err := New(db)
	if err != nil {
		db.Close()
		return nil, err
	}
	in.owned = true
	return in, nil
}

// New makes an inbox in an open bbolt database the receiver owns,
// creating the inbox's buckets. Close does not close db.
func New(db *bolt.DB) (*Inbox, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketEvents, bucketTasks, bucketDue} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify: create inbox buckets: %w", err)
	}
	return &Inbox{db: db}, nil
}

// DB returns the underlying database, for the receiver's own reads.
func (in *Inbox) DB() *bolt.DB { return in.db }

// Close closes the database if Open opened it.
func (in *Inbox) Close() error {
	if !in.owned {
		return nil
	}
	return in.db.Close()
}

func (in *Inbox) now() time.Time {
	if in.Now != nil {
		return in.Now()
	}
	return time.Now()
}

// Receive implements verify.Inbox. fn's tx is a *Tx. fn's error is
// returned as it is; store errors are wrapped with "verify: inbox:".
func (in *Inbox) Receive(ctx context.Context, sender, eventID string, body []byte, fn func(tx verify.Tx) error) (verify.Result, error) {
	if err := checkKey(sender, eventID); err != nil {
		return 0, err
	}
	key := verify.AppendEventKey(nil, sender, eventID)
	// The key lock makes a concurrent duplicate wait for the first
	// outcome without holding bbolt's writer lock. Correctness does not
	// rest on it: the write transaction checks the record again.
	unlock, err := in.locks.lock(ctx, string(key))
	if err != nil {
		return 0, fmt.Errorf("verify: inbox: wait for event %q: %w", eventID, err)
	}
	defer unlock()

	digest := sha256.Sum256(body)
	var res verify.Result
	err = in.db.View(func(tx *bolt.Tx) error {
		var lerr error
		res, lerr = lookupEvent(tx, key, digest)
		return lerr
	})
	if err != nil {
		return 0, fmt.Errorf("verify: inbox: receive event %q: %w", eventID, err)
	}
	if res == verify.AlreadyProcessed {
		return res, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}

	var fnErr error
	err = in.db.Update(func(tx *bolt.Tx) error {
		var lerr error
		if res, lerr = lookupEvent(tx, key, digest); lerr != nil || res == verify.AlreadyProcessed {
			return lerr
		}
		now := in.now()
		btx := &Tx{tx: tx, sender: sender, eventID: eventID, now: now}
		fnErr = fn(btx)
		btx.done = true
		if fnErr != nil {
			return fnErr
		}
		res = verify.Processed
		rec := eventRecord{receivedAt: now, digest: digest}
		return tx.Bucket(bucketEvents).Put(key, rec.encode())
	})
	switch {
	case fnErr != nil:
		return 0, fnErr
	case err != nil:
		return 0, fmt.Errorf("verify: inbox: receive event %q: %w", eventID, err)
	}
	return res, nil
}

// lookupEvent returns AlreadyProcessed if key is recorded with digest, 0
// if it is not recorded, ErrEventConflict if it is with another digest.
func lookupEvent(tx *bolt.Tx, key []byte, digest [sha256.Size]byte) (verify.Result, error) {
	v := tx.Bucket(bucketEvents).Get(key)
	if v == nil {
		return 0, nil
	}
	rec, err := decodeEventRecord(v)
	if err != nil {
		return 0, err
	}
	if rec.digest != digest {
		return 0, verify.ErrEventConflict
	}
	return verify.AlreadyProcessed, nil
}

// Tx is the verify.Tx an Inbox hands to Receive's fn.
type Tx struct {
	tx              *bolt.Tx
	sender, eventID string
	now             time.Time
	done            bool
}

// Bolt returns the writable bbolt transaction the event is recorded in:
// the receiver's writes through it commit or roll back with the record.
// It must not be kept after fn returns, committed, rolled back, or used to
// write the inbox's own buckets.
func (t *Tx) Bolt() *bolt.Tx { return t.tx }

// EnqueueTask implements verify.Tx.
func (t *Tx) EnqueueTask(name string, payload []byte) (verify.Task, error) {
	if t.done {
		return verify.Task{}, errors.New("verify: EnqueueTask after fn returned")
	}
	if name == "" || len(name) > verify.MaxKeyLen {
		return verify.Task{}, verify.ErrInvalidKey
	}
	tk := appendTaskKey(nil, t.sender, t.eventID, name)
	tasks := t.tx.Bucket(bucketTasks)
	if tasks.Get(tk) != nil {
		return verify.Task{}, fmt.Errorf("%w: %q", verify.ErrTaskExists, name)
	}
	rec := taskRecord{
		state:   verify.TaskPending,
		created: t.now, updated: t.now, due: t.now,
		payload: bytes.Clone(payload),
	}
	if err := putTask(t.tx, tk, rec); err != nil {
		return verify.Task{}, fmt.Errorf("verify: inbox: enqueue task %q: %w", name, err)
	}
	return rec.task(t.sender, t.eventID, name), nil
}

// ClaimTask moves the task due first (a pending task whose Due has come,
// or a processing task whose lease has ended) to TaskProcessing for lease
// (zero: DefaultTaskLease), counts an attempt and returns it; ErrNoTask
// when none is due. The worker then does the work outside any
// transaction, with the task's IdempotencyKey, and reports with
// CompleteTask or FailTask before the lease ends.
func (in *Inbox) ClaimTask(ctx context.Context, lease time.Duration) (verify.Task, error) {
	if err := ctx.Err(); err != nil {
		return verify.Task{}, err
	}
	if lease <= 0 {
		lease = DefaultTaskLease
	}
	var t verify.Task
	err := in.db.Update(func(tx *bolt.Tx) error {
		now := in.now()
		k, _ := tx.Bucket(bucketDue).Cursor().First()
		if k == nil {
			return verify.ErrNoTask
		}
		if len(k) < 8+4 {
			return errors.New("corrupt due key")
		}
		if int64(binary.BigEndian.Uint64(k)) > unixNano(now) {
			return verify.ErrNoTask
		}
		tk := bytes.Clone(k[8:])
		rec, err := getTask(tx, tk)
		if err != nil {
			return err
		}
		if rec.state != verify.TaskPending && rec.state != verify.TaskProcessing {
			return fmt.Errorf("due index holds a %s task", rec.state)
		}
		if err := deleteDue(tx, tk, rec); err != nil {
			return err
		}
		rec.state = verify.TaskProcessing
		rec.attempts++
		rec.updated = now
		rec.due = now.Add(lease)
		if err := putTask(tx, tk, rec); err != nil {
			return err
		}
		sender, eventID, name, _ := parseTaskKey(tk)
		t = rec.task(sender, eventID, name)
		return nil
	})
	switch {
	case errors.Is(err, verify.ErrNoTask):
		return verify.Task{}, verify.ErrNoTask
	case err != nil:
		return verify.Task{}, fmt.Errorf("verify: inbox: claim task: %w", err)
	}
	return t, nil
}

// CompleteTask records that t's work is done: TaskCompleted, final. It
// succeeds whatever the task's state (the work was done under the stable
// idempotency key, so it is done whoever reports it) and is idempotent.
func (in *Inbox) CompleteTask(ctx context.Context, t verify.Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tk := appendTaskKey(nil, t.Sender, t.EventID, t.Name)
	err := in.db.Update(func(tx *bolt.Tx) error {
		rec, err := getTask(tx, tk)
		if err != nil || rec.state == verify.TaskCompleted {
			return err
		}
		if err := deleteDue(tx, tk, rec); err != nil {
			return err
		}
		rec.state = verify.TaskCompleted
		rec.updated = in.now()
		rec.due = time.Time{}
		return putTask(tx, tk, rec)
	})
	if err != nil {
		return fmt.Errorf("verify: inbox: complete task %q: %w", t.Name, err)
	}
	return nil
}

// FailTask records that the attempt t (as ClaimTask returned it) failed
// with cause. With a non-zero retryAt the task goes back to TaskPending,
// due at retryAt; with a zero retryAt it becomes TaskFailed, final. It
// fails with ErrTaskNotClaimed when the task is not processing under t's
// attempt any more.
func (in *Inbox) FailTask(ctx context.Context, t verify.Task, cause error, retryAt time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tk := appendTaskKey(nil, t.Sender, t.EventID, t.Name)
	err := in.db.Update(func(tx *bolt.Tx) error {
		rec, err := getTask(tx, tk)
		if err != nil {
			return err
		}
		if rec.state != verify.TaskProcessing || int(rec.attempts) != t.Attempts {
			return verify.ErrTaskNotClaimed
		}
		if err := deleteDue(tx, tk, rec); err != nil {
			return err
		}
		rec.updated = in.now()
		rec.lastError = ""
		if cause != nil {
			rec.lastError = truncate(cause.Error(), maxLastError)
		}
		if retryAt.IsZero() {
			rec.state, rec.due = verify.TaskFailed, time.Time{}
		} else {
			rec.state, rec.due = verify.TaskPending, retryAt
		}
		return putTask(tx, tk, rec)
	})
	if err != nil {
		return fmt.Errorf("verify: inbox: fail task %q: %w", t.Name, err)
	}
	return nil
}

// Task returns the task named name of an event, or ErrTaskNotFound.
func (in *Inbox) Task(ctx context.Context, sender, eventID, name string) (verify.Task, error) {
	if err := ctx.Err(); err != nil {
		return verify.Task{}, err
	}
	var t verify.Task
	err := in.db.View(func(tx *bolt.Tx) error {
		rec, err := getTask(tx, appendTaskKey(nil, sender, eventID, name))
		t = rec.task(sender, eventID, name)
		return err
	})
	if err != nil {
		return verify.Task{}, fmt.Errorf("verify: inbox: task %q: %w", name, err)
	}
	return t, nil
}

// Tasks returns the tasks of an event, ordered by name.
func (in *Inbox) Tasks(ctx context.Context, sender, eventID string) ([]verify.Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var ts []verify.Task
	prefix := verify.AppendEventKey(nil, sender, eventID)
	err := in.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketTasks).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			rec, err := decodeTaskRecord(v)
			if err != nil {
				return err
			}
			ts = append(ts, rec.task(sender, eventID, string(k[len(prefix):])))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify: inbox: tasks of event %q: %w", eventID, err)
	}
	return ts, nil
}

func getTask(tx *bolt.Tx, tk []byte) (taskRecord, error) {
	v := tx.Bucket(bucketTasks).Get(tk)
	if v == nil {
		return taskRecord{}, verify.ErrTaskNotFound
	}
	return decodeTaskRecord(v)
}

// putTask writes rec and, for a pending or processing task, its due entry.
func putTask(tx *bolt.Tx, tk []byte, rec taskRecord) error {
	if err := tx.Bucket(bucketTasks).Put(tk, rec.encode()); err != nil {
		return err
	}
	if rec.state == verify.TaskPending || rec.state == verify.TaskProcessing {
		return tx.Bucket(bucketDue).Put(dueKey(rec.due, tk), nil)
	}
	return nil
}

// deleteDue removes rec's due entry, if it has one.
func deleteDue(tx *bolt.Tx, tk []byte, rec taskRecord) error {
	if rec.state == verify.TaskPending || rec.state == verify.TaskProcessing {
		return tx.Bucket(bucketDue).Delete(dueKey(rec.due, tk))
	}
	return nil
}

func dueKey(due time.Time, tk []byte) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(tk)), uint64(unixNano(due)))
	return append(b, tk...)
}

// unixNano is t in Unix nanoseconds, clamped to [0, MaxInt64] (so
// big-endian keys sort by time); 0 also stands for the zero time.
func unixNano(t time.Time) int64 {
	switch {
	case t.IsZero() || t.Before(time.Unix(0, 0)):
		return 0
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// readTime reads a big-endian time written by unixNano; ok is false for a
// negative value, which unixNano never writes.
func readTime(b []byte) (t time.Time, ok bool) {
	n := int64(binary.BigEndian.Uint64(b))
	return fromUnixNano(n), n >= 0
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// appendTaskKey appends the event key (verify.AppendEventKey) followed by
// the task name, so an event's tasks are adjacent. Its SHA-256 is the
// task's IdempotencyKey.
func appendTaskKey(b []byte, sender, eventID, name string) []byte {
	return append(verify.AppendEventKey(b, sender, eventID), name...)
}

func checkKey(sender, eventID string) error {
	if eventID == "" || len(eventID) > verify.MaxKeyLen || len(sender) > verify.MaxKeyLen {
		return verify.ErrInvalidKey
	}
	return nil
}

// parseTaskKey splits a task key into sender, event id and name.
func parseTaskKey(k []byte) (sender, eventID, name string, ok bool) {
	sender, k, ok = cutLenPrefixed(k)
	if !ok {
		return "", "", "", false
	}
	eventID, k, ok = cutLenPrefixed(k)
	if !ok {
		return "", "", "", false
	}
	return sender, eventID, string(k), true
}

func cutLenPrefixed(b []byte) (s string, rest []byte, ok bool) {
	if len(b) < 2 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b)-2 < n {
		return "", nil, false
	}
	return string(b[2 : 2+n]), b[2+n:], true
}

// eventRecord is the value of a processed event.
type eventRecord struct {
	receivedAt time.Time
	digest     [sha256.Size]byte // of the body, to tell a conflicting duplicate
}

const (
	eventRecordV1  = 1
	eventRecordLen = 1 + 8 + sha256.Size
	taskRecordV1   = 1
	taskHeaderLen  = 1 + 1 + 4 + 8 + 8 + 8 + 4
)

// encode returns 0x01 ‖ receivedAt ‖ digest.
func (r eventRecord) encode() []byte {
	b := make([]byte, 0, eventRecordLen)
	b = append(b, eventRecordV1)
	b = binary.BigEndian.AppendUint64(b, uint64(unixNano(r.receivedAt)))
	return append(b, r.digest[:]...)
}

func decodeEventRecord(b []byte) (eventRecord, error) {
	if len(b) != eventRecordLen || b[0] != eventRecordV1 {
		return eventRecord{}, errors.New("corrupt event record")
	}
	var r eventRecord
	var ok bool
	if r.receivedAt, ok = readTime(b[1:]); !ok {
		return eventRecord{}, errors.New("corrupt event record")
	}
	copy(r.digest[:], b[9:])
	return r, nil
}

// taskRecord is the value of a task; its sender, event id and name are in
// its key.
type taskRecord struct {
	state                 verify.TaskState
	attempts              uint32
	created, updated, due time.Time
	payload               []byte
	lastError             string
}

// encode returns 0x01 ‖ state ‖ attempts u32 ‖ created ‖ updated ‖ due ‖
// len(payload) u32 ‖ payload ‖ len(lastError) u16 ‖ lastError.
func (r taskRecord) encode() []byte {
	b := make([]byte, 0, taskHeaderLen+len(r.payload)+2+len(r.lastError))
	b = append(b, taskRecordV1, byte(r.state))
	b = binary.BigEndian.AppendUint32(b, r.attempts)
	b = binary.BigEndian.AppendUint64(b, uint64(unixNano(r.created)))
	b = binary.BigEndian.AppendUint64(b, uint64(unixNano(r.updated)))
	b = binary.BigEndian.AppendUint64(b, uint64(unixNano(r.due)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.payload)))
	b = append(b, r.payload...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.lastError)))
	return append(b, r.lastError...)
}

// decodeTaskRecord decodes encode's output, copying out of b (which bbolt
// owns only for the transaction).
func decodeTaskRecord(b []byte) (taskRecord, error) {
	bad := errors.New("corrupt task record")
	if len(b) < taskHeaderLen || b[0] != taskRecordV1 {
		return taskRecord{}, bad
	}
	r := taskRecord{state: verify.TaskState(b[1]), attempts: binary.BigEndian.Uint32(b[2:])}
	var ok1, ok2, ok3 bool
	r.created, ok1 = readTime(b[6:])
	r.updated, ok2 = readTime(b[14:])
	r.due, ok3 = readTime(b[22:])
	if !ok1 || !ok2 || !ok3 || r.state < verify.TaskPending || r.state > verify.TaskFailed {
		return taskRecord{}, bad
	}
	n := binary.BigEndian.Uint32(b[30:])
	rest := b[taskHeaderLen:]
	if uint64(len(rest)) < uint64(n)+2 {
		return taskRecord{}, bad
	}
	r.payload = bytes.Clone(rest[:n])
	rest = rest[n:]
	m := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if len(rest) != m {
		return taskRecord{}, bad
	}
	r.lastError = string(rest)
	return r, nil
}

func (r taskRecord) task(sender, eventID, name string) verify.Task {
	return verify.Task{
		Sender: sender, EventID: eventID, Name: name,
		Payload:        r.payload,
		IdempotencyKey: verify.IdempotencyKey(sender, eventID, name),
		State:          r.state,
		Attempts:       int(r.attempts),
		Due:            r.due,
		LastError:      r.lastError,
		CreatedAt:      r.created,
		UpdatedAt:      r.updated,
	}
}
