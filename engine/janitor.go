package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Retention says which finished events may be deleted.
type Retention struct {
	// SucceededBefore: a succeeded delivery last updated before this time
	// is past retention (an event without deliveries: created before it).
	SucceededBefore time.Time
	// DeadBefore: a dead delivery that died before this time is past
	// retention (its dead letter goes with it).
	DeadBefore time.Time
}

// Prunable reports whether ev, with its deliveries ds, is past r: every
// delivery finished (succeeded or dead) and past its retention; an event
// that had no subscriber counts as succeeded when it was created.
func (r Retention) Prunable(ev Event, ds []Delivery) bool {
	if len(ds) == 0 {
		return ev.Created.Before(r.SucceededBefore)
	}
	for _, d := range ds {
		switch d.State {
		case StateSucceeded:
			if !d.Updated.Before(r.SucceededBefore) {
				return false
			}
		case StateDead:
			if !d.DeadAt.Before(r.DeadBefore) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// PruneResult counts what one Maintenance.PruneEvents call did.
type PruneResult struct {
	Scanned    int    // events looked at
	Events     int    // events deleted
	Deliveries int    // deliveries deleted (and their dead letters)
	Next       uint64 // the cursor for the next call; 0: the log was read to its end

	// Promoted are the deliveries the store made their line's head, in
	// the same transaction, because a dead head blocking the line (on_dead
	// block) was deleted: each is Pending, due at once. The store told no
	// scheduler; the caller must (JanitorOptions.Promoted), or the line
	// waits for the next process's recovery.
	Promoted []Work
}

// PurgeResult counts what one Maintenance.PurgeDeletedTenants call did.
type PurgeResult struct {
	Tenant     string // the deleted tenant it worked on; "": none is left to purge
	Events     int    // events deleted, with their deliveries and every index entry
	Deliveries int
	Keys       int  // idempotency keys deleted
	Done       bool // the tenant's purge is finished and its id free again
}

// Maintenance is the part of the Store the Janitor asks: to delete, in
// small transactions so that ingest never waits long behind them, what
// retention no longer keeps and what deleted tenants left. Every store
// implements it (it is in Store). Each method deletes at most max things
// (0: its own default) and is called again until it says there is no
// more; a store that has nothing of the kind (memstore purges a deleted
// tenant at once) answers that there is none.
type Maintenance interface {
	// PruneIdempotency deletes idempotency records expired at now;
	// fewer than max deleted means no more.
	PruneIdempotency(ctx context.Context, now time.Time, max int) (int, error)
	// PruneAccessTokens deletes tenant access tokens that expired before
	// before; fewer than max deleted means no more.
	PruneAccessTokens(ctx context.Context, before time.Time, max int) (int, error)
	// PruneEvents deletes, after log position cursor (0: from the start),
	// the events whose every delivery is finished and past r, each with
	// its deliveries; a zero Next means the log was read to its end. A
	// deleted delivery leaves its line as Store says: the line of a dead
	// head that blocked it goes on with its lowest waiting member, which
	// it reports in Promoted.
	PruneEvents(ctx context.Context, cursor uint64, r Retention, max int) (PruneResult, error)
	// PurgeDeletedTenants deletes what a deleted tenant left (see
	// Records.DeleteTenant): of tenant, or of the first deleted tenant
	// when tenant is ""; a zero Tenant means none is left (tenant is not
	// a deleted tenant being purged: its purge is done, or it was never
	// deleted). A line it cuts between two calls goes on with its lowest
	// waiting member, as Store says, which it does not report: every
	// delivery of a deleted tenant is on its way out and no request is
	// ever made for one (its endpoint went with the tenant: an attempt
	// that claims it first finds it deleted). The tenant's tasks go in
	// the call that reports Done, but for its purge task, which is the
	// operator's (Tenant "").
	PurgeDeletedTenants(ctx context.Context, tenant string, max int) (PurgeResult, error)
	// PruneTasks deletes tasks that finished (succeeded or failed)
	// before before; fewer than max deleted means no more. A running
	// task is never pruned.
	PruneTasks(ctx context.Context, before time.Time, max int) (int, error)
	// OrphanedPaused returns at most max (0: its own default) of the
	// endpoints that are deleted but still have paused deliveries, of
	// tenants that are not deleted (a deleted tenant's go in its purge),
	// in (tenant, endpoint) order; fewer than max means no more. Deleting
	// an endpoint drops its paused deliveries after the endpoint's own
	// deletion, in batches (Service.DeleteEndpoint), so a crash between
	// the two leaves them: they would be held forever, never attempted,
	// and count toward the tenant's bounds. It only reads.
	OrphanedPaused(ctx context.Context, max int) ([]EndpointRef, error)
}

// EndpointRef names an endpoint of a tenant.
type EndpointRef struct {
	TenantID, EndpointID string
}

// JanitorOptions configure a Janitor. A zero field means the default
// named on it.
type JanitorOptions struct {
	Succeeded time.Duration // keep an event this long after its last delivery succeeded; zero: 720h
	Dead      time.Duration // keep a dead letter this long after it died; zero: 720h
	TokenKeep time.Duration // list an expired access token this long before deleting it; zero: 168h
	Tasks     time.Duration // keep a finished task this long after it finished; zero: 720h
	Every     time.Duration // between passes; zero: a minute
	Now       func() time.Time
	Logger    *slog.Logger // nil: discard
	// Promoted is told of each delivery a pass made its line's head
	// (PruneResult.Promoted), after the transaction that did it; it
	// must not block. Nil: no one is told (a Node hands them to its
	// Dispatcher).
	Promoted func(Work)
	// DropOrphaned drops the paused deliveries of a deleted endpoint
	// (Maintenance.OrphanedPaused), as deleting it does, and returns
	// how many. The janitor asks for each such endpoint at start and on
	// every pass. Nil: none is dropped (a Node sets its Service's).
	DropOrphaned func(ctx context.Context, e EndpointRef) (int, error)
}

// Janitor deletes, every JanitorOptions.Every and in small transactions,
// what retention no longer keeps: expired idempotency records, access
// tokens expired for TokenKeep, tasks finished for Tasks, finished events
// past retention; and what
// deleted tenants left, at once when Wake says one was deleted. Like the
// dispatcher, it runs from Start to Stop.
type Janitor struct {
	store Maintenance
	opts  JanitorOptions
	log   *slog.Logger

	wake     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	started  bool
}

// NewJanitor returns a Janitor over store; Start runs it.
func NewJanitor(store Maintenance, opts JanitorOptions) *Janitor {
	if opts.Succeeded == 0 {
		opts.Succeeded = 720 * time.Hour
	}
	if opts.Dead == 0 {
		opts.Dead = 720 * time.Hour
	}
	if opts.TokenKeep == 0 {
		opts.TokenKeep = 7 * 24 * time.Hour
	}
	if opts.Tasks == 0 {
		opts.Tasks = 720 * time.Hour
	}
	if opts.Every == 0 {
		opts.Every = time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Janitor{store: store, opts: opts, log: opts.Logger,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// Start runs the janitor until Stop: first the purge of what deleted
// tenants left (one that a stop cut short is finished), then a pass every
// Every.
func (j *Janitor) Start() {
	j.started = true
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-j.stop
		cancel()
	}()
	go func() {
		defer close(j.done)
		t := time.NewTicker(j.opts.Every)
		defer t.Stop()
		j.report(j.PurgeDeletedTenants(ctx))
		j.report(j.DropOrphanedPaused(ctx))
		for {
			select {
			case <-j.stop:
				return
			case <-j.wake:
				j.report(j.PurgeDeletedTenants(ctx))
			case <-t.C:
				j.report(j.RunOnce(ctx, j.opts.Now()))
			}
		}
	}()
}

func (j *Janitor) report(err error) {
	select {
	case <-j.stop:
		return // cut short by Stop: not a failure
	default:
	}
	if err != nil {
		j.log.Warn("janitor", "err", err)
	}
}

// Stop stops the janitor and waits for the transaction under way. Safe to
// call twice, and before Start.
func (j *Janitor) Stop() {
	j.stopWithin(context.Background())
}

// stopWithin is Stop that waits for the transaction under way only until
// ctx ends, and then returns ctx's error; the janitor's goroutine ends
// when that transaction returns (its context is cancelled already).
func (j *Janitor) stopWithin(ctx context.Context) error {
	j.stopOnce.Do(func() { close(j.stop) })
	if !j.started {
		return nil
	}
	select {
	case <-j.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("engine: janitor stop gave up waiting (%w): a transaction of its is still running", ctx.Err())
	}
}

// Wake asks for the purge of deleted tenants now rather than at the next
// pass. It never blocks.
func (j *Janitor) Wake() {
	select {
	case j.wake <- struct{}{}:
	default: // a purge is already asked for
	}
}

// janitorBatch is how much one of the janitor's transactions deletes.
const janitorBatch = 500

// RunOnce makes one full pass at now: expired idempotency records, access
// tokens expired more than TokenKeep ago, tasks finished more than Tasks
// ago, what deleted tenants left, then
// finished events past retention, telling Promoted of the deliveries
// that their deletion made a line's head.
func (j *Janitor) RunOnce(ctx context.Context, now time.Time) error {
	for {
		n, err := j.store.PruneIdempotency(ctx, now, janitorBatch)
		if err != nil {
			return err
		}
		if n < janitorBatch {
			break
		}
	}
	for {
		n, err := j.store.PruneAccessTokens(ctx, now.Add(-j.opts.TokenKeep), janitorBatch)
		if err != nil {
			return err
		}
		if n < janitorBatch {
			break
		}
	}
	for {
		n, err := j.store.PruneTasks(ctx, now.Add(-j.opts.Tasks), janitorBatch)
		if err != nil {
			return err
		}
		if n < janitorBatch {
			break
		}
	}
	if err := j.PurgeDeletedTenants(ctx); err != nil {
		return err
	}
	if err := j.DropOrphanedPaused(ctx); err != nil {
		return err
	}
	r := Retention{SucceededBefore: now.Add(-j.opts.Succeeded), DeadBefore: now.Add(-j.opts.Dead)}
	for cursor := uint64(0); ; {
		res, err := j.store.PruneEvents(ctx, cursor, r, janitorBatch)
		if err != nil {
			return err
		}
		if j.opts.Promoted != nil {
			for _, w := range res.Promoted {
				j.opts.Promoted(w)
			}
		}
		if res.Next == 0 {
			return nil
		}
		cursor = res.Next
	}
}

// DropOrphanedPaused drops the paused deliveries that deleted endpoints
// left (Maintenance.OrphanedPaused): a process that died while deleting
// an endpoint, or a deletion whose drop failed. Without
// JanitorOptions.DropOrphaned it does nothing.
func (j *Janitor) DropOrphanedPaused(ctx context.Context) error {
	if j.opts.DropOrphaned == nil {
		return nil
	}
	for {
		orphans, err := j.store.OrphanedPaused(ctx, janitorBatch)
		if err != nil {
			return err
		}
		for _, e := range orphans {
			n, err := j.opts.DropOrphaned(ctx, e)
			if err != nil {
				return err
			}
			j.log.Info("paused deliveries of a deleted endpoint dropped", "tenant", e.TenantID, "endpoint", e.EndpointID, "deliveries", n)
		}
		if len(orphans) < janitorBatch {
			return nil
		}
	}
}

// PurgeDeletedTenants deletes everything deleted tenants left, a batch to
// a transaction: what a tenant's purge task left (it failed, or its
// process stopped), and what tenants deleted before purge tasks left.
func (j *Janitor) PurgeDeletedTenants(ctx context.Context) error {
	for {
		res, err := j.store.PurgeDeletedTenants(ctx, "", janitorBatch)
		if err != nil || res.Tenant == "" {
			return err
		}
		if res.Done {
			j.log.Info("deleted tenant purged", "tenant", res.Tenant)
		}
	}
}
