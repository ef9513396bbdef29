package verify

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"time"
)

// Inbox records which events a receiver has processed, so that a
// redelivery (the sender retries until it sees a 2xx, so every event may
// arrive more than once) runs the receiver's code once.
type Inbox interface {
	// Receive runs fn once per (sender, eventID) across redeliveries.
	//
	// If the key is not recorded yet, Receive runs fn in one transaction
	// with the record of the key: when fn returns nil both commit and
	// Receive returns Processed; when fn fails (or panics) both roll back,
	// Receive returns fn's error, and a redelivery runs fn again. If the
	// key is recorded, Receive returns AlreadyProcessed without running
	// fn. While a Receive for a key is running, another Receive for the
	// same key waits for its outcome (or for its own ctx) and then decides
	// as above: it never answers before the first one has committed or
	// rolled back.
	//
	// fn must confine itself to tx: writes made through tx commit or roll
	// back with the record. External side effects (an email, a payment
	// call) belong in a task (Tx.EnqueueTask), done after the commit with
	// the task's idempotency key. A duplicate whose body differs from the
	// recorded one is ErrEventConflict.
	Receive(ctx context.Context, sender, eventID string, body []byte, fn func(tx Tx) error) (Result, error)
}

// Tx is the transaction Inbox.Receive runs fn in. It is valid only until
// fn returns. An implementation offers its own way to write the
// receiver's data in the same transaction (boltinbox.Tx.Bolt).
type Tx interface {
	// EnqueueTask records a TaskPending task, named name (unique within
	// the event), carrying payload, in this transaction: it exists if and
	// only if the event is recorded as processed. The returned Task holds
	// the stable IdempotencyKey to hand the external service.
	EnqueueTask(name string, payload []byte) (Task, error)
}

// Result is what Receive did with an event.
type Result uint8

const (
	// Processed: fn ran and its writes committed with the record. Tasks
	// it enqueued are pending, not done.
	Processed Result = iota + 1
	// AlreadyProcessed: the event was recorded before; fn did not run.
	AlreadyProcessed
)

func (r Result) String() string {
	switch r {
	case Processed:
		return "processed"
	case AlreadyProcessed:
		return "already processed"
	}
	return "result(" + strconv.Itoa(int(r)) + ")"
}

// Inbox errors.
var (
	// ErrEventConflict: the event id was processed before with a different
	// body. A sender never does that for one event; fn does not run.
	ErrEventConflict = errors.New("verify: event id already processed with a different body")
	// ErrInvalidKey: an empty event id or task name, or a sender, event id
	// or task name longer than MaxKeyLen bytes.
	ErrInvalidKey = errors.New("verify: empty or too long sender, event id or task name")
	// ErrNoTask: ClaimTask found no task due.
	ErrNoTask = errors.New("verify: no task due")
	// ErrTaskNotFound: no task with that sender, event id and name.
	ErrTaskNotFound = errors.New("verify: task not found")
	// ErrTaskExists: EnqueueTask was called twice with one name for one
	// event.
	ErrTaskExists = errors.New("verify: task already enqueued for this event")
	// ErrTaskNotClaimed: FailTask was given a task that is no longer
	// processing under that attempt (its lease expired and it was claimed
	// again, or it was completed).
	ErrTaskNotClaimed = errors.New("verify: task not claimed by this attempt")
)

// MaxKeyLen bounds the sender, the event id and the task name, in bytes.
const MaxKeyLen = 1024

// TaskState is where a task is in pending → processing → completed (or
// failed). Each state says who moves a task out of it.
type TaskState uint8

const (
	// TaskPending: enqueued by Receive's fn, or handed back by FailTask
	// with a retry time. ClaimTask moves it to TaskProcessing once its Due
	// time has come.
	TaskPending TaskState = iota + 1
	// TaskProcessing: claimed by a worker until Due (the lease).
	// CompleteTask moves it to TaskCompleted, FailTask to TaskPending or
	// TaskFailed. If the worker crashes, ClaimTask claims it again once
	// the lease has expired, counting a new attempt: the external call
	// may then run twice, which its idempotency key makes harmless.
	TaskProcessing
	// TaskCompleted: final. The worker reported the work done.
	TaskCompleted
	// TaskFailed: final. FailTask gave up (no retry time); an operator
	// decides what to do.
	TaskFailed
)

func (s TaskState) String() string {
	switch s {
	case TaskPending:
		return "pending"
	case TaskProcessing:
		return "processing"
	case TaskCompleted:
		return "completed"
	case TaskFailed:
		return "failed"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Task is a durable unit of external work enqueued with an event.
type Task struct {
	Sender, EventID, Name string
	Payload               []byte
	// IdempotencyKey is IdempotencyKey(Sender, EventID, Name): the same on
	// every attempt, so the external service can drop repeats.
	IdempotencyKey string
	State          TaskState
	// Attempts counts claims, the current one included.
	Attempts int
	// Due is when a pending task may be claimed, or when a processing
	// task's lease ends; zero for completed and failed tasks.
	Due       time.Time
	LastError string // FailTask's cause, "" before any failure
	CreatedAt time.Time
	UpdatedAt time.Time
}

// IdempotencyKey returns the stable key of a task: 64 hex digits of a
// SHA-256 over AppendEventKey(sender, eventID) followed by the task name.
// It depends on nothing else, so every attempt, every process and a
// rebuilt store agree on it.
func IdempotencyKey(sender, eventID, name string) string {
	sum := sha256.Sum256(append(AppendEventKey(nil, sender, eventID), name...))
	return hex.EncodeToString(sum[:])
}

// AppendEventKey appends the encoding of (sender, eventID) to b and
// returns the extended slice: len(sender) ‖ sender ‖ len(eventID) ‖
// eventID, lengths as big-endian uint16. No two pairs share an encoding
// and the keys of one sender are adjacent in byte order, so an Inbox may
// key its records with it. Both strings must be at most MaxKeyLen bytes.
// The encoding is stable: IdempotencyKey hashes it.
func AppendEventKey(b []byte, sender, eventID string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(sender)))
	b = append(b, sender...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(eventID)))
	return append(b, eventID...)
}
