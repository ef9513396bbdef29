package engine

import (
	"context"
	"fmt"
)

// The backlog: every delivery that is not final. A delivery is final when
// it succeeded, or died without blocking its line; any other is still to
// be delivered, and counts toward the pending bounds
// (ServiceOptions.MaxPending, MaxPendingPerTenant) and against deleting
// its tenant without force, wherever it waits:
//
//   - Pending: waiting for its time, due, or in flight. The Scheduler has
//     it (Scheduler.Pending, Counts).
//   - Waiting behind its line's head, Paused for a disabled endpoint, or
//     Dead and Blocking its line: no scheduler has these (only a replay,
//     a skip, an endpoint enabled or a head that leaves moves them), so
//     the Store counts them (Log.Held), in the transactions that move
//     deliveries in and out of these states.

// Held counts deliveries that are not final and that no scheduler has,
// by where they wait.
type Held struct {
	Waiting  int // StateWaiting: behind the head of their line
	Paused   int // StatePaused: held for a disabled endpoint
	Blocking int // StateDead and Blocking: a dead head that stops its line until replayed or skipped
}

// HeldOf returns where d counts in a Held: one of its counts 1, or none
// (d is Pending, or final).
func HeldOf(d Delivery) Held {
	switch {
	case d.State == StateWaiting:
		return Held{Waiting: 1}
	case d.State == StatePaused:
		return Held{Paused: 1}
	case d.Blocking():
		return Held{Blocking: 1}
	}
	return Held{}
}

// Plus returns h and o counted together.
func (h Held) Plus(o Held) Held {
	return Held{Waiting: h.Waiting + o.Waiting, Paused: h.Paused + o.Paused, Blocking: h.Blocking + o.Blocking}
}

// Minus returns h without o.
func (h Held) Minus(o Held) Held {
	return Held{Waiting: h.Waiting - o.Waiting, Paused: h.Paused - o.Paused, Blocking: h.Blocking - o.Blocking}
}

// Total returns how many h counts.
func (h Held) Total() int { return h.Waiting + h.Paused + h.Blocking }

// Backlog counts deliveries that are not final, by where they wait.
type Backlog struct {
	Pending int // StatePending: the Scheduler's
	Held
}

// Total returns how many b counts.
func (b Backlog) Total() int { return b.Pending + b.Held.Total() }

// String says what b counts, as the refusals that cite it do.
func (b Backlog) String() string {
	return fmt.Sprintf("%d pending, %d waiting in their lines, %d paused, %d blocking their lines", b.Pending, b.Waiting, b.Paused, b.Blocking)
}

// HeldCounter is the part of a SharedScheduler that counts the held
// deliveries (Held) itself, together with its pending ones: the
// cluster's, as of its last count. The Dispatcher's Backlog reads them
// from it rather than from the Store, so that an ingest costs no more
// round trips to the database.
type HeldCounter interface {
	// Held returns the held deliveries of tenant ("": of none) and of
	// every tenant, in one snapshot. It must be quick: every ingest asks.
	Held(tenant string) (ofTenant, all Held)
}

// Backlog returns the backlog of tenant ("": of none) and of every
// tenant: the pending deliveries the Scheduler has, and the held ones,
// which a SharedScheduler counts, and otherwise the Store.
func (d *Dispatcher) Backlog(ctx context.Context, tenant string) (ofTenant, all Backlog, err error) {
	all.Pending, _ = d.sched.Counts()
	if tenant != "" {
		ofTenant.Pending = d.sched.Pending(tenant)
	}
	if d.held != nil {
		ofTenant.Held, all.Held = d.held.Held(tenant)
		return ofTenant, all, nil
	}
	ofTenant.Held, all.Held, err = d.store.Held(ctx, tenant)
	return ofTenant, all, err
}
