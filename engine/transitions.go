package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The transitions of a delivery. Each is a pure function: from the
// delivery as stored (and what happened to it) to the delivery as it must
// be stored next. They are the only place a delivery's state changes; a
// Store saves what they return and derives its indexes from the new state
// alone (a delivery is in the retry index iff Pending, in the dead letters
// iff Dead, in the paused index iff Paused), so no store decides anything.
//
// Every transition that concerns a cycle takes the cycle it was decided
// for and does nothing when the delivery has moved on meanwhile (a replay
// started a new cycle, or another outcome was recorded first): the
// decision was made on a delivery that no longer exists.

// Reasons a delivery carries that no attempt gave.
const (
	// ReasonPaused is the reason of a delivery held because its endpoint
	// is disabled.
	ReasonPaused = "endpoint disabled: held until it is enabled again"
	// ReasonHeldNotSent is the reason of a paused delivery dead-lettered
	// when its endpoint is enabled "from now on".
	ReasonHeldNotSent = "held while the endpoint was disabled; not sent (enabled from now on)"
	// ReasonEndpointDeleted is the reason of a delivery whose endpoint was
	// deleted before its attempt.
	ReasonEndpointDeleted = "endpoint deleted"
)

// NewDeliveries returns the deliveries that event ev (as stored, with its
// Sequence) creates among eps, its tenant's endpoints: one per endpoint
// that subscribes to ev's type and listens to one of its channels
// (Endpoint.ListensTo: any endpoint without a channel filter), in ID
// order, each in cycle 1 from ev.Created, with ev's Sequence, its line at
// the endpoint (LineOf; the store settles it in the line, SettleLine) and
// the retry policy of the endpoint of a tenant whose policy is
// tenantPolicy (CyclePolicy). A delivery to an enabled endpoint is
// Pending, due at ev.Created; to a disabled one it is Paused (held, not
// dropped: delivered if the endpoint is enabled with "deliver held").
// newID makes their IDs (NewID("dlv")).
func NewDeliveries(ev Event, tenantPolicy RetryPolicyName, eps []Endpoint, newID func(prefix string) string) []Delivery {
	ds := make([]Delivery, 0, len(eps))
	start := ev.Created
	if ev.DeliverAt.After(start) {
		start = ev.DeliverAt // the cycle, and its deadline, start at the scheduled time
	}
	for _, ep := range eps {
		if !ep.Subscribes(ev.Type) || !ep.ListensTo(ev.Channels) { // Receives, inlined: the fan-out's cost
			continue
		}
		ds = append(ds, newDelivery(ev, start, PlannedDelivery{
			ID: newID("dlv"), EndpointID: ep.ID, Line: LineOf(ev, ep),
			RetryPolicy: CyclePolicy(tenantPolicy, ep), Paused: ep.Disabled,
		}))
	}
	slices.SortFunc(ds, func(a, b Delivery) int { return strings.Compare(a.ID, b.ID) })
	return ds
}

// PlannedDelivery is what NewDeliveries takes from an endpoint to make a
// delivery: all a store keeps of a delivery whose fan-out it owes
// (IngestResult.Owed) until it stores it; the rest is the event's.
type PlannedDelivery struct {
	ID          string
	EndpointID  string
	Line        string          // LineOf the event and the endpoint
	RetryPolicy RetryPolicyName // CyclePolicy of the tenant and the endpoint
	Paused      bool            // the endpoint was disabled: StatePaused, ReasonPaused
}

// NewDelivery returns the delivery NewDeliveries makes of ev (as stored)
// for p.
func NewDelivery(ev Event, p PlannedDelivery) Delivery {
	start := ev.Created
	if ev.DeliverAt.After(start) {
		start = ev.DeliverAt
	}
	return newDelivery(ev, start, p)
}

// newDelivery is NewDelivery with the cycle's start.
func newDelivery(ev Event, start time.Time, p PlannedDelivery) Delivery {
	d := Delivery{
		ID: p.ID, TenantID: ev.TenantID, EventID: ev.ID, EventType: ev.Type,
		EndpointID: p.EndpointID, State: StatePending, Sequence: ev.Sequence, Line: p.Line, Test: ev.Test, Channels: ev.Channels,
		RetryPolicy: p.RetryPolicy,
		Cycle:       1, CycleStart: start, NextAttemptAt: start, DeliverAt: ev.DeliverAt,
		Created: ev.Created, Updated: ev.Created,
		Attempts: []Attempt{}, Replays: []Replay{},
	}
	if p.Paused {
		d.State, d.NextAttemptAt, d.Reason = StatePaused, time.Time{}, ReasonPaused
	}
	return d
}

// PlanOf returns the plan of d, a delivery of ev (as stored), and
// whether NewDelivery makes d again from it, field for field; when it
// does not (a delivery NewDeliveries did not make), a store that leaves
// fan-outs owed stores d at once instead.
func PlanOf(ev Event, d Delivery) (PlannedDelivery, bool) {
	p := PlannedDelivery{ID: d.ID, EndpointID: d.EndpointID, Line: d.Line, RetryPolicy: d.RetryPolicy, Paused: d.State == StatePaused}
	// What newDelivery sets, compared field by field without making it:
	// ingest asks this of every delivery it plans.
	start := ev.Created
	if ev.DeliverAt.After(start) {
		start = ev.DeliverAt
	}
	state, next, reason := StatePending, start, ""
	if p.Paused {
		state, next, reason = StatePaused, time.Time{}, ReasonPaused
	}
	same := d.TenantID == ev.TenantID && d.EventID == ev.ID && d.EventType == ev.Type &&
		d.State == state && d.Sequence == ev.Sequence && d.PreviousSequence == 0 && d.Test == ev.Test &&
		slices.Equal(d.Channels, ev.Channels) && (d.Channels == nil) == (ev.Channels == nil) &&
		d.DeliverAt.Equal(ev.DeliverAt) && d.WaitingBehind == "" &&
		d.Cycle == 1 && d.CycleStart.Equal(start) && d.CycleAttempts == 0 &&
		d.NextAttemptAt.Equal(next) && d.LastStatus == 0 && d.Reason == reason && d.DeadAt.IsZero() &&
		d.Created.Equal(ev.Created) && d.Updated.Equal(ev.Created) &&
		d.Attempts != nil && len(d.Attempts) == 0 && d.Replays != nil && len(d.Replays) == 0 && d.Skips == nil && d.Backfill == nil
	return p, same
}

// CyclePolicy returns the retry policy a cycle of a delivery to ep
// follows, when ep's tenant's policy is tenantPolicy: ep's own, else
// tenantPolicy, with StandardRetryPolicy as "" (what a delivery stores).
func CyclePolicy(tenantPolicy RetryPolicyName, ep Endpoint) RetryPolicyName {
	p := ep.RetryPolicy
	if p == "" {
		p = tenantPolicy
	}
	if p.Standard() {
		return ""
	}
	return p
}

// RecordAttempt returns d after the attempt rec.Attempt: the attempt is
// appended to its log and Updated set to rec.At. When rec.Cycle is d's
// current cycle and d is Pending, d also moves to rec.State:
//
//   - Pending: due again at rec.NextAttemptAt, with rec.Reason;
//   - Succeeded: no next attempt, no reason;
//   - Dead: no next attempt, DeadAt rec.At, with rec.Reason;
//
// with CycleAttempts one more and LastStatus rec.LastStatus. An attempt of
// an older cycle (the delivery was replayed meanwhile) is only logged.
func RecordAttempt(d Delivery, rec AttemptRecord) Delivery {
	d.Attempts = append(slices.Clip(d.Attempts), rec.Attempt)
	d.Updated = rec.At
	if rec.Cycle != d.Cycle || d.State != StatePending {
		return d
	}
	d.State = rec.State
	d.CycleAttempts++
	d.LastStatus = rec.LastStatus
	d.Reason = rec.Reason
	switch rec.State {
	case StatePending:
		d.NextAttemptAt = rec.NextAttemptAt
	case StateSucceeded:
		d.NextAttemptAt, d.Reason = time.Time{}, ""
	case StateDead:
		d.NextAttemptAt, d.DeadAt = time.Time{}, rec.At
	}
	return d
}

// HoldDelivery returns d held back without an attempt (its endpoint is not
// verified yet): when cycle is d's current cycle and d is Pending, it is
// due again at next with reason; its attempts, attempt count and last
// status stay as they are. Otherwise d is returned as it is.
func HoldDelivery(d Delivery, cycle int, next time.Time, reason string, at time.Time) Delivery {
	if cycle != d.Cycle || d.State != StatePending {
		return d
	}
	d.NextAttemptAt, d.Reason, d.Updated = next, reason, at
	return d
}

// PauseDelivery returns d paused without an attempt, because its endpoint
// is disabled: when cycle is d's current cycle and d is Pending, it is
// Paused with ReasonPaused and no next attempt. Otherwise d is returned as
// it is.
func PauseDelivery(d Delivery, cycle int, at time.Time) Delivery {
	if cycle != d.Cycle || d.State != StatePending {
		return d
	}
	d.State, d.NextAttemptAt, d.Reason, d.Updated = StatePaused, time.Time{}, ReasonPaused, at
	return d
}

// UnpauseDelivery undoes the pause of d by PauseDelivery, paused (as
// stored) being what that pause stored: when d is still as the pause
// left it (Paused in paused's cycle, with ReasonPaused, updated then),
// it is Pending again, due at at, with the reason it had before the
// pause (before's), its cycle and deadline as they were. Otherwise d is
// returned as it is. It is for a pause that crossed the enabling of the
// endpoint (the dispatcher read it disabled, and the enabling looked
// for paused deliveries before the pause was stored): the delivery was
// pending when the endpoint was enabled, so it is attempted, whether
// the enabling resumed the held deliveries or dropped them.
func UnpauseDelivery(d, before, paused Delivery, at time.Time) Delivery {
	if d.State != StatePaused || d.Cycle != paused.Cycle || d.Reason != ReasonPaused || !d.Updated.Equal(paused.Updated) {
		return d
	}
	d.State, d.NextAttemptAt, d.Reason, d.Updated = StatePending, at, before.Reason, at
	return d
}

// ResumeHeldDelivery returns paused delivery d sent on as its endpoint is
// enabled with its held deliveries: ReplayDelivery, except that one whose
// event is scheduled ahead of r.At and which was never attempted stays
// due at its DeliverAt, its cycle counting from then. Enabling an
// endpoint does not send a scheduled event early.
func ResumeHeldDelivery(d Delivery, r Replay, policy RetryPolicyName) Delivery {
	scheduled := d.DeliverAt.After(r.At) && len(d.Attempts) == 0
	d = ReplayDelivery(d, r, policy)
	if scheduled {
		d.NextAttemptAt, d.CycleStart = d.DeliverAt, d.DeliverAt
	}
	return d
}

// ReplayDelivery returns d in a new cycle, whatever its state: Cycle+1,
// Pending, due at r.At from which its deadline runs, no attempt counted
// in it, DeadAt zero, following the retry policy policy (CyclePolicy of
// its endpoint now), and r appended to its replays with the new cycle.
func ReplayDelivery(d Delivery, r Replay, policy RetryPolicyName) Delivery {
	d.Cycle++
	d.RetryPolicy = policy
	d.State = StatePending
	d.CycleStart = r.At
	d.CycleAttempts = 0
	d.NextAttemptAt = r.At
	d.DeadAt = time.Time{}
	d.Updated = r.At
	r.Cycle = d.Cycle
	d.Replays = append(slices.Clip(d.Replays), r)
	return d
}

// DropHeldDelivery returns paused delivery d dead, not sent, because its
// endpoint was enabled "from now on": Dead at at with ReasonHeldNotSent;
// an ordered one is skipped too (SkipByDropped), so its line goes on
// whatever the endpoint's on_dead. A delivery that is not paused is
// returned as it is.
func DropHeldDelivery(d Delivery, at time.Time) Delivery {
	if d.State != StatePaused {
		return d
	}
	d.State, d.Reason, d.DeadAt, d.Updated = StateDead, ReasonHeldNotSent, at, at
	if d.Line != "" {
		d.Skips = append(slices.Clip(d.Skips), Skip{At: at, By: SkipByDropped, Cycle: d.Cycle})
	}
	return d
}

// DropDeletedEndpointDelivery returns paused delivery d dead, not sent,
// because its endpoint was deleted while disabled: Dead at at with
// ReasonEndpointDeleted, as the dispatcher kills a pending one when it
// finds the endpoint gone (a paused one is never attempted, so nothing
// else would end it). The store settles an ordered one in its line as a
// death on a deleted endpoint: skipped, the line goes on. A delivery that
// is not paused is returned as it is.
func DropDeletedEndpointDelivery(d Delivery, at time.Time) Delivery {
	if d.State != StatePaused {
		return d
	}
	d.State, d.Reason, d.DeadAt, d.Updated = StateDead, ReasonEndpointDeleted, at, at
	return d
}

// MergeHealth returns stored, the endpoint as stored, with the health seen
// by one attempt (seen's FailingSince, LastFailure, LastFailureAt,
// Disabled, DisabledReason and DisabledAt; see healthAfter) merged in; its
// secrets and settings stay as stored. Concurrent attempts each report
// their own view, so a run of failures began at the earliest failure any
// of them saw, the last failure is the latest, and an endpoint once
// disabled stays disabled (only a person enables it).
func MergeHealth(stored, seen Endpoint) Endpoint {
	switch {
	case seen.FailingSince.IsZero():
		stored.FailingSince = time.Time{}
	case stored.FailingSince.IsZero() || seen.FailingSince.Before(stored.FailingSince):
		stored.FailingSince = seen.FailingSince
	}
	if seen.LastFailureAt.After(stored.LastFailureAt) {
		stored.LastFailure, stored.LastFailureAt = seen.LastFailure, seen.LastFailureAt
	}
	if seen.Disabled && !stored.Disabled {
		stored.Disabled, stored.DisabledReason, stored.DisabledAt = true, seen.DisabledReason, seen.DisabledAt
	}
	return stored
}

// CheckStorable refuses a delivery a store cannot keep as it is: a state
// that is never stored (Delivering), or a Pending one with no time to be
// due at. Every store checks what it is given to save with it.
func CheckStorable(d Delivery) error {
	switch d.State {
	case StatePending:
		if d.NextAttemptAt.IsZero() {
			return fmt.Errorf("delivery %s: pending without a time to be due at", d.ID)
		}
	case StateSucceeded, StateDead, StatePaused:
	case StateWaiting:
		if d.Line == "" || !d.NextAttemptAt.IsZero() {
			return fmt.Errorf("delivery %s: waiting outside a line, or with a time to be due at", d.ID)
		}
	default:
		return fmt.Errorf("delivery %s: state %q is never stored", d.ID, d.State)
	}
	return nil
}

// CheckTransition refuses after as the next stored state of before when
// it changes whose delivery it is (ID, tenant, endpoint, event), its line,
// or
// cannot be stored (CheckStorable).
func CheckTransition(before, after Delivery) error {
	if after.ID != before.ID || after.TenantID != before.TenantID || after.EndpointID != before.EndpointID || after.EventID != before.EventID || after.Line != before.Line {
		return fmt.Errorf("delivery %s: a transition changed who it belongs to or its line", before.ID)
	}
	return CheckStorable(after)
}
