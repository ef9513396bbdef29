package verify

import (
	"context"
	"errors"
	"fmt"
)

// Receiving in order. webhookd numbers a sender's events (Envelope.Sequence)
// and, for an event with an ordering key, sends in the
// webhook-previous-sequence header the sequence of the key's previous
// event delivered to the same endpoint. A receiver that has processed
// that previous event may process this one; one that has not answers 425
// Too Early, and webhookd tries again later (its retry schedule), by
// which time the previous one has usually arrived. Receiver.Ordered does
// this with an Inbox whose Tx is an OrderTx (boltinbox's is).
//
// The check starts at the first keyed event an inbox sees from a sender
// (its floor, StartOrder): an event whose previous sequence is below the
// floor was sent before the receiver kept order, and passes. A previous event
// that never arrives (dead at webhookd) holds its successors: each is
// answered 425 until it dies too. Replay the dead one first, then the
// others (a range replay replays in sequence order). On an endpoint with
// ordering "key", use on_dead "block" so that webhookd holds them itself.
//
// The header is not signed (no Standard Webhooks header but the three
// signature ones is): a party able to change it can only delay an event,
// not change what the receiver reads from the signed body.

// HeaderPreviousSequence is the sequence of the previous event with the
// same ordering key delivered to this endpoint; absent when there is
// none, or when the event has no ordering key.
const HeaderPreviousSequence = "webhook-previous-sequence"

// ErrOutOfOrder is returned by a HandleFunc-side check, or by
// Receiver.Ordered's, for an event whose previous event in its ordering
// key has not been processed: Receiver answers it 425 Too Early, so the
// sender retries it later.
var ErrOutOfOrder = errors.New("verify: the previous event of this ordering key is not processed yet")

// OrderInbox is an Inbox that keeps order (boltinbox's is):
// Receiver.Ordered needs one, and its Tx must be an OrderTx.
type OrderInbox interface {
	Inbox
	// StartOrder records sequence as sender's floor unless it has one,
	// in a transaction of its own: the floor stands even when the event
	// that set it fails, so its retry is checked like any other.
	StartOrder(ctx context.Context, sender string, sequence uint64) error
}

// OrderTx is a Tx that keeps, per sender and ordering key, the highest
// sequence processed.
type OrderTx interface {
	Tx
	// InOrder reports whether the event being processed, numbered
	// sequence, may be processed now: previous is the sequence of the
	// event before it in ordering key key (the webhook-previous-sequence
	// header; 0: none), and PredecessorDone decides with what the inbox
	// recorded. When it may, InOrder records sequence as processed for
	// key, in this transaction: it commits or rolls back with the event.
	// key must be 1 to MaxKeyLen bytes (ErrInvalidKey).
	InOrder(key string, sequence, previous uint64) (bool, error)
}

// PredecessorDone is the rule of InOrder: an event whose previous event
// in its key is previous may be processed when there is none (0), when
// previous is below floor (the first sequence the inbox saw from the
// sender, StartOrder: it was sent before the receiver kept order), or when the
// highest sequence processed for the key, done, has reached it.
func PredecessorDone(previous, done, floor uint64) bool {
	return previous == 0 || previous < floor || done >= previous
}

// outOfOrder is ErrOutOfOrder with what is missing.
func outOfOrder(key string, sequence, previous uint64) error {
	return fmt.Errorf("%w: event %d of ordering key %q waits for event %d", ErrOutOfOrder, sequence, key, previous)
}
