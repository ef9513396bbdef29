package engine

import (
	"context"
	"time"
)

// Backfill is Svix's "replay missing": an endpoint made after some events
// were stored (or whose types or channels changed since) gets the
// retained events of a time range that it would have received and that it
// has no delivery for (Service.StartBackfill, a task: backfillStep). The engine decides which events (BackfillStep.Wants,
// the rule ingest fans out by) and what each delivery is
// (BackfillStep.Delivery); a store reads the tenant's log in steps and, in
// the transaction of each step, makes a delivery for every wanted event
// that has none to the endpoint (Log.Backfill). The check and the write
// are one transaction, so a backfill made twice, even at once, makes each
// delivery once.

// Steps of a backfill.
const (
	// backfillScan is how many of a tenant's events one step reads, and
	// so the most deliveries it makes: one transaction of a store.
	backfillScan = 1000
	// backfillSlack is how far an event's Created may run against log
	// order (an ingest stamps its event, then commits): a step stops at
	// the first event created this long after the range's end.
	backfillSlack = time.Minute
)

// BackfillStep is one transaction of a backfill (Log.Backfill): which
// events of the tenant's log it reads and what it makes of them.
type BackfillStep struct {
	Tenant     string
	EndpointID string
	// Since and Until bound the events it delivers: created in
	// [Since, Until).
	Since, Until time.Time
	// After is the place in the log (Event.Seq) it reads after: 0 for
	// the first step, the previous step's Next for the others.
	After uint64
	// Scan bounds how many of the tenant's events it reads (at least 1).
	Scan int
	// Max bounds how many deliveries it makes; 0: none, it only counts.
	Max int
	// At and By are the backfill's: every delivery it makes records them
	// (Delivery.Backfill) and starts its cycle at At.
	At time.Time
	By string
	// TenantPolicy is the tenant's retry policy as the backfill read it:
	// a delivery follows its endpoint's, else this one (CyclePolicy).
	TenantPolicy RetryPolicyName
	// NewID makes the deliveries' IDs (NewID("dlv")); nil: NewID.
	NewID func(prefix string) string
}

// BackfillResult is what one step did.
type BackfillResult struct {
	// Created are the deliveries it made, as stored (settled in their
	// lines), in log order.
	Created []Delivery
	// Existing counts the events it wanted (Wants) that have a delivery
	// to the endpoint already; Missing those that have none, over Max,
	// for which it made none.
	Existing, Missing int
	// Next is the place in the log the next step reads after; 0 when
	// the range is read to its end.
	Next uint64
}

// Wants reports whether the step delivers ev to ep, ep as the step's
// transaction reads it: ev was created in [Since, Until), is not a test
// event (SendTestEvent's are for one endpoint), and ep receives it by
// the rule of ingest (Endpoint.Receives). Whether ev has a delivery to
// ep already is the store's to say.
func (b BackfillStep) Wants(ev Event, ep Endpoint) bool {
	return !ev.Test && !ev.Created.Before(b.Since) && ev.Created.Before(b.Until) && ep.Receives(ev)
}

// Past reports whether ev, and every event after it in the log, is past
// the range: created a minute or more after Until. A step may stop
// reading there (Next 0).
func (b BackfillStep) Past(ev Event) bool {
	return !ev.Created.Before(b.Until.Add(backfillSlack))
}

// Delivery returns the delivery the step makes of ev to ep, and false
// when it does not want ev (Wants): what ingest would have made
// (NewDeliveries: Paused when ep is disabled), in a cycle that starts at
// At (due then when Pending), recording the backfill. PreviousSequence
// stays 0: its event came before the deliveries that name their key's
// last one, and the key tails are left as they are, so a receiver that
// checks order (verify.PredecessorDone) takes it. The store settles it
// in its line.
func (b BackfillStep) Delivery(ev Event, ep Endpoint) (Delivery, bool) {
	if !b.Wants(ev, ep) {
		return Delivery{}, false
	}
	newID := b.NewID
	if newID == nil {
		newID = NewID
	}
	d := NewDeliveries(ev, b.TenantPolicy, []Endpoint{ep}, newID)[0]
	start := b.At
	if d.DeliverAt.After(start) {
		start = d.DeliverAt // a scheduled event not yet due keeps its time
	}
	d.CycleStart, d.Updated = start, b.At
	if d.State == StatePending {
		d.NextAttemptAt = start
	}
	d.Backfill = &Backfill{At: b.At, By: b.By}
	return d, true
}

// pendingRoom returns how many deliveries the pending bounds leave room
// for in tenant's backlog (backlog.go), and the bound that leaves the
// least; -1 when no bound applies. A task that adds to the backlog (a
// backfill, a range replay) makes no more than this in a step.
func (s *Service) pendingRoom(ctx context.Context, tenant string) (int, string, error) {
	perTenant := s.opts.MaxPendingPerTenant
	if tenant == OperatorTenant {
		return -1, "", nil
	}
	if s.disp == nil || s.opts.MaxPending <= 0 && perTenant <= 0 {
		return -1, "", nil
	}
	mine, all, err := s.backlog(ctx, tenant)
	if err != nil {
		return 0, "", err
	}
	room, bound := -1, ""
	if perTenant > 0 {
		room, bound = max(perTenant-mine.Total(), 0), "pending_per_tenant"
	}
	if n := s.opts.MaxPending; n > 0 && (room < 0 || n-all.Total() < room) {
		room, bound = max(n-all.Total(), 0), "max_pending"
	}
	return room, bound, nil
}
