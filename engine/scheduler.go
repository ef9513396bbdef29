package engine

import (
	"context"
	"errors"
	"time"
)

// ErrClaimLost is a Store's answer to the record of an attempt whose
// claim is no longer its recorder's: the lease ended and another process
// claimed the delivery (a shared Scheduler's stores only). Nothing is
// recorded; the new holder's attempt counts instead.
var ErrClaimLost = errors.New("the claim on this delivery ended and another node holds it now")

// Work is a pending delivery as a Scheduler knows it: enough to queue it
// fairly (its tenant and endpoint) without reading the Store.
type Work struct {
	DeliveryID string
	TenantID   string // "" when its endpoint was deleted before a restart
	EndpointID string
}

// Scheduler owns due work: which pending deliveries are due, and which
// worker has each. The Dispatcher claims due work from it, attempts each
// delivery, records the outcome in the Store (RecordOutcome) and settles
// the claim. Its contract, for every implementation:
//
//   - Offered when due: a delivery that is Pending in the Store is
//     returned by Claim at or after its NextAttemptAt (or the time
//     Schedule or Settle gave for it), once the scheduler knows of it:
//     from Recover, Schedule or Settle in this process, or from the Store
//     itself for a scheduler shared by several processes.
//   - Claimed by one: from the moment Claim (or Schedule, or Settle,
//     reporting claimed) hands a delivery to a caller until that caller
//     settles it or its lease ends, no Claim anywhere returns it again. A
//     delivery is never attempted twice at the same time.
//   - A lease that ends re-offers: a claim that is never settled (its
//     process died, or held it past its lease) is offered again; this is
//     where at-least-once comes from. LocalScheduler's lease lasts until
//     the process ends: a claim dies with its process, and the next
//     process's Recover offers the delivery again from the Store.
//   - Settled is done: after Settle(w, next) the delivery is offered
//     again at next and not before; with next zero (no longer pending:
//     succeeded, dead, paused or gone) it is not offered again unless
//     Schedule names it anew. A Schedule of a claimed delivery (a replay
//     while it is attempted) makes Settle hand it back at once.
//
// Times are readings of this process's clock with their monotonic part
// (time.Now plus a wait), so a jump of the wall clock moves nothing.
type Scheduler interface {
	// Recover learns every pending delivery from the Store, due at
	// dueAt(its NextAttemptAt). The Dispatcher calls it once, from Start,
	// before any other method, and reports the count.
	Recover(ctx context.Context, dueAt func(time.Time) time.Time) (int, error)
	// Schedule says w is pending and due at at (at or before now: due
	// now). It reports whether it claimed w for the caller at once (w
	// was due and unclaimed): the caller then has it as if Claim had
	// returned it. A claimed w is handed back by its Settle instead.
	Schedule(w Work, at time.Time) (claimed bool)
	// Claim waits until work is due and returns all of it that is due,
	// at most max when max > 0, each claimed by the caller; it returns
	// ctx's error when ctx ends first.
	Claim(ctx context.Context, max int) ([]Work, error)
	// Settle ends the caller's claim on w: its outcome is in the Store,
	// and next is when it is due again (zero: not pending any more). It
	// reports whether it claimed w for the caller again at once (due
	// already, or scheduled again while claimed).
	Settle(w Work, next time.Time) (claimed bool)
	// Release ends the caller's claim on w without an outcome: the
	// delivery is left to the scheduler's re-offer (for LocalScheduler,
	// the next process's Recover). The Dispatcher releases what it
	// holds when it stops.
	Release(w Work)
	// ForgetTenant drops every unclaimed delivery of tenant (the tenant
	// was deleted, with its deliveries); claimed ones are dropped when
	// settled.
	ForgetTenant(tenant string)

	// Holds reports whether the scheduler has delivery id, waiting for
	// its time or claimed.
	Holds(id string) bool
	// Pending counts the deliveries of tenant it has, waiting or
	// claimed.
	Pending(tenant string) int
	// Counts returns how many deliveries it has in all (waiting or
	// claimed) and how many of them wait (not claimed), in one snapshot.
	Counts() (total, waiting int)
}

// SharedScheduler is the Scheduler of a store shared by several
// processes (postgres.Scheduler): its claims are leases in the database
// that may end while their holder still has them, each endpoint's bounds
// are split among the processes, a claim takes work that any process
// could take, and it counts the held deliveries itself. It is the one
// optional capability of a Scheduler: the Dispatcher asks for it once,
// in NewDispatcher. A Scheduler that is not one is a single process's
// (LocalScheduler, or a test's): its claims last until the process ends
// (no lease is watched), each endpoint's bounds are this process's whole
// (no share), a claim skips nothing, and the held counts come from the
// Store (Log.Held).
type SharedScheduler interface {
	Scheduler
	Leaser
	BoundSharer
	ClaimSkipper
	HeldCounter
}

// Leaser is the part of a SharedScheduler that says how long a claim has
// left. A process stalled past its renewals loses its claims to the
// others, which may attempt and record the deliveries meanwhile. Before
// an attempt's request the Dispatcher asks how long its lease has to
// run: with less than the attempt timeout left, it makes no request and
// releases the claim (Release), so that no attempt outlives its lease and
// a resumed process does not send again what another has sent since.
//
// IMPORTANT: its leases must be longer than the attempt timeout
// (webhookd's config requires [storage] lease > [delivery]
// attempt_timeout): with a shorter one no attempt would ever start.
type Leaser interface {
	// LeaseLeft returns how long the caller's claim on w has to run, as
	// far as this process knows: from the end its claim or last renewal
	// wrote, never later than the database has it. ok is false when the
	// caller holds no claim on w.
	LeaseLeft(w Work) (left time.Duration, ok bool)
}

// BoundSharer is the part of a SharedScheduler that splits each
// endpoint's bounds among the processes: the Dispatcher of each process
// holds its attempts of an endpoint to this process's share of
// EndpointConcurrency and EndpointRate, asked anew as it goes (the shares
// change as processes come and go), so that together the processes keep
// the bounds for the whole cluster.
type BoundSharer interface {
	// EndpointShare returns this process's share of an endpoint's bounds:
	// of concurrency attempts in flight (at least 1) and of rate attempts
	// per second (0 when rate is 0: unlimited). It is called under the
	// Dispatcher's lock: it must be quick and must not call back.
	EndpointShare(endpointID string, concurrency int, rate float64) (int, float64)
}

// ClaimSkipper is the part of a SharedScheduler that can leave tenants
// and endpoints out of a claim, whose claims take work from all the
// processes. The Dispatcher, with ClaimAhead, claims through it and skips
// the tenants at their TenantConcurrency in this process and the
// endpoints waiting for their rate limit here, so that one tenant's or
// one endpoint's backlog, claimed and unable to start, never fills what
// the process may claim ahead (and holds back the others'), nor is
// claimed further while it cannot start. Without ClaimAhead it claims
// with Claim.
type ClaimSkipper interface {
	// ClaimSkipping is Claim, leaving out the deliveries of the tenants
	// and endpoints skip lists; it asks skip again whenever it looks
	// anew.
	ClaimSkipping(ctx context.Context, max int, skip func() ClaimSkip) ([]Work, error)
}

// ClaimSkip is what a claim leaves out (ClaimSkipper): the deliveries of
// these tenants, and of these endpoints, by ID.
type ClaimSkip struct {
	Tenants, Endpoints []string
}
