package engine

import (
	"errors"
	"time"
)

// Recording an attempt's outcome is declarative, as River's drivers set
// a job's state "if running": the engine reads the delivery
// (Log.AttemptInput), decides from what it read the delivery's next
// state (RecordAttempt) and the endpoint's health (healthAfter), and
// hands the store the result as an OutcomeUpdate. The store applies it only if
// the delivery it stores is still at the version the engine read
// (DeliveryVersion); otherwise it writes nothing and answers
// ErrDeliveryChanged, and the engine reads the delivery again and
// decides again (Dispatcher.record). A store runs no engine decision of
// its own inside the transaction but the line rules (SettleLine) and the
// health merge (MergeHealth), which are about what else it stores.

// ErrDeliveryChanged is Log.RecordOutcome's answer when the stored
// delivery is no longer at the version the outcome was decided from (a
// replay, a pause or a skip came between the read and the record).
// Nothing was written: read the delivery again and decide again.
var ErrDeliveryChanged = errors.New("the delivery changed since it was read for its attempt")

// DeliveryVersion identifies what a stored delivery is as far as any
// transition changes it: its State, Cycle and CycleAttempts, how many
// attempts, replays and skips it has logged, its NextAttemptAt and its
// Updated. Two reads of one delivery with the same version saw the same
// delivery, but for what the store fills in as it reads (WaitingBehind).
// It is comparable with ==, and holds the times as instants (their
// location and monotonic reading do not count).
//
// IMPORTANT: every transition of a stored delivery must change its
// version (each one in transitions.go and lines.go moves its State or
// Cycle, appends to Attempts, Replays or Skips, or sets NextAttemptAt or
// Updated to the time it is made; TestVersionOf holds them to it). A
// transition that changed none of these could be overwritten, unseen,
// by an outcome decided before it.
type DeliveryVersion struct {
	state                    State
	cycle, cycleAttempts     int
	attempts, replays, skips int
	nextAttemptAt, updated   int64 // Unix nanoseconds; 0 for the zero time
}

// VersionOf returns d's version.
func VersionOf(d Delivery) DeliveryVersion {
	return DeliveryVersion{
		state: d.State, cycle: d.Cycle, cycleAttempts: d.CycleAttempts,
		attempts: len(d.Attempts), replays: len(d.Replays), skips: len(d.Skips),
		nextAttemptAt: unixNanos(d.NextAttemptAt), updated: unixNanos(d.Updated),
	}
}

// unixNanos is t in Unix nanoseconds, 0 for the zero time.
func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// OutcomeUpdate is the record of one attempt as the engine decided it, for
// Log.RecordOutcome to apply. NewOutcomeUpdate makes it.
type OutcomeUpdate struct {
	// Read is the version of the delivery the outcome was decided from:
	// the store applies the outcome only while it stores that version.
	Read DeliveryVersion
	// Delivery is what to store: the delivery as read, after the
	// attempt (RecordAttempt). The store settles it in its line
	// (SettleLine) as it does every delivery it saves.
	Delivery Delivery
	// Endpoint, when not nil, is the health the attempt showed of the
	// delivery's endpoint (AttemptRecord.Endpoint): the store merges it
	// into the endpoint as stored (MergeHealth) in the same transaction,
	// unless the endpoint is deleted. Nil: the endpoint is not touched.
	Endpoint *Endpoint
	// OnHealth, when not nil, is told of the merge of Endpoint once the
	// transaction that made it has committed: the endpoint as it was
	// stored before (stored) and as it is stored now (merged). Once, and
	// never when nothing was merged (Endpoint nil, the endpoint deleted)
	// or the record failed. The dispatcher raises its health alerts from
	// it (HealthAlerts), not from what its attempt saw: attempts made at
	// once, on one node or on several, each see an endpoint start
	// failing, but only one record finds it stored as not failing yet.
	OnHealth func(stored, merged Endpoint)
}

// Merge returns stored, the delivery's endpoint as stored, with u.Endpoint
// merged in (MergeHealth); stored as it is when u.Endpoint is nil. A
// store merges with it inside the transaction and, after the commit,
// tells u.OnHealth of the two (Merged).
func (u OutcomeUpdate) Merge(stored Endpoint) Endpoint {
	if u.Endpoint == nil {
		return stored
	}
	return MergeHealth(stored, *u.Endpoint)
}

// Merged tells u.OnHealth, when set, of a committed merge of stored
// into merged (Merge).
func (u OutcomeUpdate) Merged(stored, merged Endpoint) {
	if u.OnHealth != nil && u.Endpoint != nil {
		u.OnHealth(stored, merged)
	}
}

// NewOutcomeUpdate returns the outcome rec of an attempt of read, the delivery
// as it was read for the attempt (or read again after
// ErrDeliveryChanged).
func NewOutcomeUpdate(read Delivery, rec AttemptRecord) OutcomeUpdate {
	return OutcomeUpdate{Read: VersionOf(read), Delivery: RecordAttempt(read, rec), Endpoint: rec.Endpoint}
}
