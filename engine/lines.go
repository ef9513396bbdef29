package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Ordered lines. An endpoint whose Ordering is not none puts each of its
// ordered deliveries in a line, fixed when the delivery is made
// (LineOf): "endpoint" (the whole endpoint is one line) or "key:"+the
// event's OrderingKey. A line is (endpoint ID, Line). Its members are its
// deliveries that are Pending, Paused, Waiting, or Dead and Blocking; the
// head is the one member that is not Waiting, and there is at most one.
// Only the head is ever attempted, so a line delivers one event at a
// time, in the order the deliveries became members (by Sequence among
// the waiting ones).
//
// The rules are pure functions of a delivery's transition and what the
// store read of its line in the same transaction (LineView): the store
// applies SettleLine to every transition of an ordered delivery it saves,
// promotes the lowest waiting member (PromoteDelivery) when SettleLine
// says the head left, and keeps its line indexes from the states alone
// (a delivery is its line's head iff HoldsLine). So the rules run inside
// the transaction: no crash can leave a line with waiting members and no
// head.
//
// A waiting delivery is not held for a disabled endpoint: only the head
// is attempted, so only the head is ever paused. Enabling the endpoint
// "from now on" drops that head (DropHeldDelivery) and the line goes on
// with what waited behind it, including the events ingested while the
// endpoint was disabled. Waiting deliveries are not in the dispatcher:
// the store counts them (Log.Held), and max_pending and the per-tenant
// bound count them with the pending ones (backlog.go), so a line's
// backlog is bounded like any other.

// Ordering is what an endpoint asks of the order of its deliveries. Its
// zero value is OrderingNone; its text (JSON) form is "none", "key" or
// "endpoint".
type Ordering string

const (
	// OrderingNone: deliveries are attempted in parallel, in no promised
	// order (the default; text "none").
	OrderingNone Ordering = ""
	// OrderingKey: the events with the same ordering key are one line;
	// events without a key are not ordered.
	OrderingKey Ordering = "key"
	// OrderingEndpoint: the whole endpoint is one line.
	OrderingEndpoint Ordering = "endpoint"
)

// MarshalText returns "none" for OrderingNone, o itself otherwise.
func (o Ordering) MarshalText() ([]byte, error) {
	if o == OrderingNone {
		return []byte("none"), nil
	}
	return []byte(o), nil
}

// UnmarshalText reads "none" as OrderingNone and anything else as it is
// (ValidateOrdering judges it).
func (o *Ordering) UnmarshalText(b []byte) error {
	if *o = Ordering(b); *o == "none" {
		*o = OrderingNone
	}
	return nil
}

// OnDead is what a line does when its head dies. Its zero value is
// OnDeadSkip; its text (JSON) form is "skip" or "block".
type OnDead string

const (
	// OnDeadSkip: the line goes on without the dead head, which records
	// it (a Skip by SkipByOnDead). The default; text "skip".
	OnDeadSkip OnDead = ""
	// OnDeadBlock: the dead head stays the head and the line stops until
	// it is replayed and succeeds, or is skipped (SkipDelivery).
	OnDeadBlock OnDead = "block"
)

// MarshalText returns "skip" for OnDeadSkip, d itself otherwise.
func (d OnDead) MarshalText() ([]byte, error) {
	if d == OnDeadSkip {
		return []byte("skip"), nil
	}
	return []byte(d), nil
}

// UnmarshalText reads "skip" as OnDeadSkip and anything else as it is
// (ValidateOnDead judges it).
func (d *OnDead) UnmarshalText(b []byte) error {
	if *d = OnDead(b); *d == "skip" {
		*d = OnDeadSkip
	}
	return nil
}

// Orderings and OnDeads are the values an endpoint takes, in their text
// form, as the API names them.
var (
	Orderings = []string{"none", string(OrderingKey), string(OrderingEndpoint)}
	OnDeads   = []string{"skip", string(OnDeadBlock)}
)

// Who a Skip is by when no one asked for it.
const (
	// SkipByOnDead: the head died on a line whose endpoint's on_dead is
	// skip (or whose endpoint is deleted).
	SkipByOnDead = "on_dead skip"
	// SkipByDropped: the head was held while its endpoint was disabled
	// and dropped when it was enabled "from now on".
	SkipByDropped = "held, not sent"
)

// LineEndpoint is the Line of every ordered delivery of an endpoint
// whose Ordering is OrderingEndpoint; LineKeyPrefix starts the Line of
// one ordering key's deliveries.
const (
	LineEndpoint  = "endpoint"
	LineKeyPrefix = "key:"
)

// LineOf returns the line a delivery of ev to ep is in: "" (not
// ordered) for ordering none, or for ordering key when ev has no
// ordering key.
func LineOf(ev Event, ep Endpoint) string {
	switch ep.Ordering {
	case OrderingEndpoint:
		return LineEndpoint
	case OrderingKey:
		if ev.OrderingKey != "" {
			return LineKeyPrefix + ev.OrderingKey
		}
	}
	return ""
}

// Blocking reports whether d, dead, holds its line: it is ordered and
// was not skipped in its current cycle.
func (d Delivery) Blocking() bool {
	if d.State != StateDead || d.Line == "" {
		return false
	}
	for _, s := range d.Skips {
		if s.Cycle == d.Cycle {
			return false
		}
	}
	return true
}

// HoldsLine reports whether d is the head of its line: an ordered
// delivery that is Pending, Paused, or Dead and Blocking.
func HoldsLine(d Delivery) bool {
	if d.Line == "" {
		return false
	}
	switch d.State {
	case StatePending, StatePaused:
		return true
	case StateDead:
		return d.Blocking()
	}
	return false
}

// LineView is what a store reads of a delivery's line in the
// transaction that saves it.
type LineView struct {
	// Head is the ID of the line's head; "" when the line has none.
	Head string
	// OnDead is the endpoint's on_dead as stored in the transaction;
	// OnDeadSkip when the endpoint is deleted (a head whose endpoint is
	// gone is dropped).
	OnDead OnDead
}

// SettleLine returns after, the next state of before (zero when after is
// new), as the line rules make it, and whether the line advances: before
// was its head and after is not, so the store must promote the line's
// lowest waiting member (PromoteDelivery), in the same transaction.
// An unordered delivery is returned as it is.
//
//   - Enter: an after that would hold the line (Pending, Paused) when
//     the line has a head other than it becomes Waiting behind that head,
//     with no next attempt; its attempts and cycle are untouched.
//   - Advance: the head leaves when it succeeds, or dies while
//     line.OnDead is skip (recorded as a Skip by SkipByOnDead), or was
//     skipped (SkipDelivery, DropHeldDelivery).
//   - Block: a head that dies while line.OnDead is block stays the head.
//
// A transition from Dead to Dead (an attempt of an older cycle logged, a
// skip) changes nothing of the line but what the skip says.
func SettleLine(before, after Delivery, line LineView) (Delivery, bool) {
	if after.Line == "" {
		return after, false
	}
	wasHead := before.ID != "" && line.Head == before.ID
	if after.State != StateWaiting {
		after.WaitingBehind = ""
	}
	switch after.State {
	case StatePending, StatePaused:
		if line.Head == "" || wasHead {
			return after, false
		}
		if after.State == StatePaused {
			after.Reason = ""
		}
		after.State, after.NextAttemptAt, after.WaitingBehind = StateWaiting, time.Time{}, line.Head
		return after, false
	case StateDead:
		if before.State != StateDead && after.Blocking() && (!wasHead || line.OnDead != OnDeadBlock) {
			after.Skips = append(slices.Clip(after.Skips), Skip{At: after.Updated, By: SkipByOnDead, Cycle: after.Cycle})
		}
		return after, wasHead && !after.Blocking()
	case StateWaiting:
		if line.Head == "" || wasHead { // a line never has waiting members and no head
			after.State, after.NextAttemptAt, after.WaitingBehind = StatePending, after.Updated, ""
			return after, false
		}
		after.WaitingBehind = line.Head
		return after, false
	}
	return after, wasHead // Succeeded
}

// PromoteDelivery returns waiting delivery d as its line's new head:
// Pending, due at at, in the same cycle started afresh at at (its
// deadline runs from the promotion), no reason. A delivery that is not
// Waiting is returned as it is.
func PromoteDelivery(d Delivery, at time.Time) Delivery {
	if d.State != StateWaiting {
		return d
	}
	due := at
	if d.Cycle == 1 && d.CycleAttempts == 0 && d.DeliverAt.After(at) {
		due = d.DeliverAt // a scheduled one promoted early holds the line until its time
	}
	d.State, d.NextAttemptAt, d.CycleStart, d.Reason, d.WaitingBehind, d.Updated = StatePending, due, due, "", "", at
	return d
}

// SkipDelivery returns d, the dead head blocking its line, with s
// recorded in its skips (in its current cycle), so the line goes on
// without it; CodeNotBlocking when d is not blocking a line.
func SkipDelivery(d Delivery, s Skip) (Delivery, error) {
	if !d.Blocking() {
		return Delivery{}, Errorf(CodeNotBlocking, "id",
			"delivery %s is not blocking a line: only a dead delivery at the head of a line whose endpoint has on_dead block can be skipped (it is %s)", d.ID, d.State)
	}
	s.Cycle = d.Cycle
	d.Skips = append(slices.Clip(d.Skips), s)
	d.Updated = s.At
	return d, nil
}

// CompareLineOrder orders the members of a line: by Sequence, then by ID.
// A range replay replays in this order, and the lowest waiting member
// is promoted first.
func CompareLineOrder(a, b Delivery) int {
	if c := cmp.Compare(a.Sequence, b.Sequence); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// ValidateOrdering returns CodeInvalidField ("ordering") unless o is an
// Ordering, with the nearest one when o looks like a typo of it.
func ValidateOrdering(o Ordering) error {
	return validChoice("ordering", string(o), o == OrderingNone || o == OrderingKey || o == OrderingEndpoint, Orderings)
}

// ValidateOnDead returns CodeInvalidField ("on_dead") unless d is an
// OnDead, with the nearest one when d looks like a typo of it.
func ValidateOnDead(d OnDead) error {
	return validChoice("on_dead", string(d), d == OnDeadSkip || d == OnDeadBlock, OnDeads)
}

// validChoice is the CodeInvalidField error of field when its value v is
// not ok, one of choices.
func validChoice(field, v string, ok bool, choices []string) error {
	if ok {
		return nil
	}
	if near := closest(v, choices); near != "" {
		return Errorf(CodeInvalidField, field, "%s %q is not one of %s; did you mean %q?", field, v, strings.Join(choices, ", "), near)
	}
	return Errorf(CodeInvalidField, field, "%s %q is not one of %s", field, v, strings.Join(choices, ", "))
}

// LineNote says, from the head of d's line as it is now, what keeps
// waiting delivery d waiting: "waiting behind dlv_… (attempt N, next at
// T)" while the head is pending, or what holds the head otherwise; for a
// dead delivery blocking its line, that it does. "" for any other
// delivery, and when the store cannot say.
func (s *Service) LineNote(ctx context.Context, d Delivery) string {
	if d.Blocking() {
		return "blocking its line: the deliveries behind it wait until it is replayed and succeeds, or is skipped"
	}
	if d.State != StateWaiting {
		return ""
	}
	head, ok, err := s.store.LineHead(ctx, d.EndpointID, d.Line)
	if err != nil || !ok {
		return ""
	}
	switch {
	case head.State == StatePending:
		return fmt.Sprintf("waiting behind %s (attempt %d, next at %s)", head.ID, head.CycleAttempts+1, head.NextAttemptAt.UTC().Format(TimeFormat))
	case head.State == StatePaused:
		return fmt.Sprintf("waiting behind %s (held: its endpoint is disabled)", head.ID)
	case head.Blocking():
		return fmt.Sprintf("waiting behind %s (dead: the line is blocked until it is replayed and succeeds, or is skipped)", head.ID)
	}
	return "waiting behind " + head.ID
}
