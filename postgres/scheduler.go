package postgres

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/engine"
)

// Leased claims: how several webhookd nodes share one retry index.
//
// A node claims due deliveries in one transaction (claimSQL): the
// pending ones whose due_at has come, FOR UPDATE SKIP LOCKED, get a
// random lease token and lease_until = now + the lease, and their due_at
// moves to lease_until, so no claim anywhere takes them again while the
// lease lasts. The node renews the leases it holds every third of a
// lease; a node that dies stops renewing, and its deliveries come due
// again when their leases end: at most one lease after the crash, they
// are offered to the other nodes (at-least-once).
//
// Recording an attempt (RecordOutcome) checks the token: a node that
// stalled past its lease, whose delivery another node claimed since,
// records nothing (engine.ErrClaimLost). A record by the holder ends the
// lease: due_at becomes the delivery's next attempt time again. A claim
// here that takes the delivery again before its holder settles it (a
// retry due that soon) takes it for the holder, whose Settle hands it
// back, rather than hand it to the dispatcher that holds it already.
//
// Per-endpoint concurrency and rate hold across the cluster by shares:
// every node writes itself into the nodes table every third of a lease
// (heartbeat) and reads which nodes were seen within a lease; of n such
// nodes, each holds its attempts of an endpoint to its share of the
// endpoint's concurrency (EndpointShare: the concurrency split into n
// parts that differ by at most one, the larger parts falling to
// different nodes for different endpoints) and to a rate of the
// endpoint's rate over n, in its own dispatcher, as a single node does
// with the whole bound. So at most EndpointConcurrency attempts of one
// endpoint are in flight in the whole cluster (or one per node, with
// more nodes than that), and at most EndpointRate start per second, while
// the nodes agree on who is there. When a node starts, it counts itself
// at once and the others within a third of a lease: for that long (and
// for the attempts in flight then to end) the cluster may make one
// node's share more. A node that starts claims nothing for JoinWait and
// then reads the nodes again, so that nodes started together count each
// other before the first attempt of any: none starts at the whole bound. A node that stops deletes its row; one that dies
// is no longer counted a lease after its last heartbeat. Nothing in a
// claim counts leases or takes turns, so claims run in parallel, and a
// node may claim more than it may start at once: what it claimed waits
// in its dispatcher, under a lease it renews, for its share to free.
//
// An ingesting node takes the new deliveries it may start soon under a
// lease of its own in the same transaction (preclaim), and hands them to
// its dispatcher without a claim.
//
// Wake-ups: a node's own ingest and replays wake its claim loop at once;
// other nodes hear of replays and resumes by LISTEN/NOTIFY; and each
// node sleeps no longer than until the earliest due time it read at its
// last claim, nor than the poll interval.

// DefaultLease is how long a claim lasts without renewal: a dead node's
// deliveries are offered again this long after its last renewal at most.
// It must exceed the attempt timeout ([delivery] attempt_timeout, 10 s by
// default) with room to record the outcome.
const DefaultLease = 30 * time.Second

// claimTimeout bounds one claim's round trip.
const claimTimeout = 10 * time.Second

// gatherWait is how long a claim loop woken by a settle or an ingest
// waits before it claims, so that one claim takes what several freed.
const gatherWait = 2 * time.Millisecond

// busyWait is how long a claim loop waits when deliveries are due but
// none could be claimed (their endpoints at their bounds), unless woken
// sooner: without it, it ran empty claims back to back.
const busyWait = 100 * time.Millisecond

// SchedulerOptions configure a Scheduler.
type SchedulerOptions struct {
	// EndpointConcurrency is the dispatchers' EndpointConcurrency: a
	// claim takes no more than four node's shares of one endpoint's
	// deliveries, so that one endpoint's backlog does not crowd out the
	// others'. Zero: no such cap.
	EndpointConcurrency int
	// PreClaim bounds the deliveries this process holds and has not
	// started yet, below which an ingest here claims its new deliveries
	// in its own transaction; zero: ingest claims none.
	PreClaim int
	// Batch is how many deliveries one claim takes at most; zero: 100.
	Batch int
	// Poll is the longest a claim loop sleeps without a wake-up; zero:
	// one second.
	Poll time.Duration
	// JoinWait is how long a node that starts claims nothing (and its
	// ingests claim nothing), after it has written itself into the
	// nodes table, before it reads the nodes again and claims: nodes
	// started together count each other before any of them makes an
	// attempt, so none starts at an endpoint's whole bound (see
	// EndpointShare). Zero: none (a node alone, or a test). webhookd
	// waits a tenth of the lease.
	JoinWait time.Duration
	// CountEvery is the least time between two counts of the cluster's
	// backlog (Pending, Counts, Held; refreshCounts); zero: two seconds.
	// A count takes no more than a tenth of the time either way.
	CountEvery time.Duration
}

// Scheduler is the engine.Scheduler of a Store shared by several nodes:
// the retry index is the database's, and a claim is a lease in it. One
// Scheduler per Store: they share the leases this process holds.
type Scheduler struct {
	s    *Store
	opts SchedulerOptions

	wake chan struct{} // a claim loop's wake-up: due work may be there

	mu        sync.Mutex
	nextDue   time.Time      // the earliest due time read at the last claim (the store's clock)
	pending   map[string]int // per tenant, from the last count
	total     int
	held      map[string]engine.Held // per tenant, from the last count (engine.HeldCounter)
	heldAll   engine.Held
	leased    int
	ending    []ended // leases to end, by the background loop
	endingNow chan struct{}
	counted   snapshot // the last count's
	// notes are the deliveries of this node's ingests that the last
	// count did not see, by ID (backlog.go); notedBy sums them per
	// tenant and notedAll in all.
	notes    map[string]*note
	notedBy  map[string]engine.Backlog
	notedAll engine.Backlog

	node    string       // this process's row in nodes
	members atomic.Int64 // the live nodes' count << 32 | this node's place among them (heartbeat)
	// noOldNodeSince is when (Unix ns, the store's clock) a heartbeat
	// first found no row of a node older than schema 6 in nodes since
	// one last did; 0: the last one found one.
	noOldNodeSince atomic.Int64
	// claimFrom is when claims may start (JoinWait after Recover);
	// joined is set once the claim loop has read the nodes after it.
	claimFrom time.Time
	joined    atomic.Bool

	stop      context.CancelFunc
	stopped   sync.WaitGroup
	closeOnce sync.Once
}

// ended is a lease to end without an outcome of the holder's: due again
// at due (the store's clock) at the earliest.
type ended struct {
	id    string
	token int64
	due   time.Time
}

var _ engine.SharedScheduler = (*Scheduler)(nil)

// Scheduler returns the store's Scheduler. Its background work (lease
// renewal, LISTEN, counts) starts at Recover and ends at Close.
func (s *Store) Scheduler(opts SchedulerOptions) *Scheduler {
	if opts.Batch <= 0 {
		opts.Batch = 100
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.CountEvery <= 0 {
		opts.CountEvery = 2 * time.Second
	}
	c := &Scheduler{s: s, opts: opts, wake: make(chan struct{}, 1), endingNow: make(chan struct{}, 1), pending: map[string]int{},
		notes: map[string]*note{}, notedBy: map[string]engine.Backlog{},
		node: fmt.Sprintf("%016x", uint64(newToken()))}
	c.members.Store(1 << 32)
	return c
}

// heartbeat writes this node's row in nodes and reads which nodes were
// seen within a lease: the shares of the endpoints' bounds follow. It
// also deletes the rows of nodes not seen for ten leases (gone without
// a word), and clears schema_version's old_lock_keys once no row of a
// node older than schema 6 has been there for a third of a lease
// (locks.go). It need not wait for the WAL's flush: a heartbeat lost in
// a crash of the database is written again a third of a lease later.
func (c *Scheduler) heartbeat(ctx context.Context) error {
	now := c.s.now().UnixNano()
	lease := c.s.lease.Nanoseconds()
	noOldSince := c.noOldNodeSince.Load()
	b := &pgx.Batch{}
	b.Queue("SELECT set_config('synchronous_commit', 'off', true)")
	b.Queue("INSERT INTO nodes (id, seen, lock_keys) VALUES ($1, $2, 2) ON CONFLICT (id) DO UPDATE SET seen = excluded.seen", c.node, now)
	b.Queue("DELETE FROM nodes WHERE seen < $1", now-10*lease)
	b.Queue(`UPDATE schema_version SET old_lock_keys = false
		WHERE old_lock_keys AND $1 AND NOT EXISTS (SELECT 1 FROM nodes WHERE lock_keys < 2)`, noOldSince != 0 && now-noOldSince >= lease/3)
	b.Queue("SELECT EXISTS (SELECT 1 FROM nodes WHERE lock_keys < 2)")
	b.Queue("SELECT id FROM nodes WHERE seen > $1 ORDER BY id", now-lease)
	var ids []string
	var oldNodes bool
	err := func() error {
		br := c.s.pool.SendBatch(ctx, b)
		defer br.Close()
		for range 4 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if err := br.QueryRow().Scan(&oldNodes); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		return br.Close()
	}()
	if err != nil {
		return storeError(err)
	}
	switch {
	case oldNodes:
		c.noOldNodeSince.Store(0)
	case noOldSince == 0:
		c.noOldNodeSince.CompareAndSwap(0, now)
	}
	place := slices.Index(ids, c.node)
	if place < 0 { // not seen within a lease by the database's rows: count it anyway
		ids = append(ids, c.node)
		slices.Sort(ids)
		place = slices.Index(ids, c.node)
	}
	c.members.Store(int64(len(ids))<<32 | int64(place))
	return nil
}

// leave deletes this node's row: the others' shares grow at their next
// heartbeat.
func (c *Scheduler) leave(ctx context.Context) {
	if _, err := c.s.pool.Exec(ctx, "DELETE FROM nodes WHERE id = $1", c.node); err != nil {
		c.s.log.Warn("leave the cluster's nodes; the others count this node until its last heartbeat is a lease old", "err", err)
	}
}

// membership returns this node's place among the live nodes and their
// count, as of the last heartbeat.
func (c *Scheduler) membership() (place, n int) {
	m := c.members.Load()
	return int(m & (1<<32 - 1)), int(m >> 32)
}

// EndpointShare is this node's share of an endpoint's bounds among the
// n live nodes: concurrency split into n parts that differ by at most
// one, the larger ones falling to the nodes from a place that depends on
// the endpoint (so the nodes get the larger part of different
// endpoints), at least 1; and rate / n.
func (c *Scheduler) EndpointShare(endpointID string, concurrency int, rate float64) (int, float64) {
	place, n := c.membership()
	if n <= 1 {
		return concurrency, rate
	}
	h := fnv.New32a()
	h.Write([]byte(endpointID))
	share := concurrency / n
	if (place+int(h.Sum32()%uint32(n)))%n < concurrency%n {
		share++
	}
	return max(1, share), rate / float64(n)
}

// claims are the leases this process holds, by delivery ID.
type claims struct {
	mu   sync.Mutex
	held map[string]*claim
	// unstarted counts the held claims whose input no attempt has taken
	// yet: claimed, not yet attempted.
	unstarted int
}

// addLocked holds cl on id.
func (c *claims) addLocked(id string, cl *claim) {
	c.removeLocked(id)
	c.held[id] = cl
	if cl.input != nil {
		c.unstarted++
	}
}

// removeLocked forgets the claim on id and returns it (nil: none).
func (c *claims) removeLocked(id string) *claim {
	cl := c.held[id]
	if cl != nil {
		delete(c.held, id)
		if cl.input != nil {
			c.unstarted--
		}
	}
	return cl
}

// retakeLocked gives cl, the claim of a holder here whose record ended
// its lease (or is being written: it may have committed) and which has
// not settled it yet, the lease a claim of its delivery just took in the
// database, with what that claim read. Handed out instead, the delivery
// would reach the dispatcher that holds it a second time, and the
// holder's Settle would end the new lease. It came due, so Settle hands
// it back to the holder (rerun).
func (c *claims) retakeLocked(cl *claim, token int64, until time.Time, in *prefetched) {
	if cl.input == nil {
		c.unstarted++
	}
	cl.token, cl.until, cl.input, cl.live, cl.rerun, cl.recording = token, until, in, true, true, false
}

type claim struct {
	w     engine.Work
	token int64
	// until is when the lease ends (the store's clock), as this process
	// wrote it at its claim or last renewal; no later than the
	// database's (LeaseLeft).
	until time.Time
	read  []byte           // the delivery's document as AttemptInput read it under this claim
	readD *engine.Delivery // read, decoded
	input *prefetched      // what the claim read for the attempt, until AttemptInput takes it
	live  bool             // the lease in the database is still this claim's
	kept  bool             // the holder's record kept the lease: due again at once
	rerun bool             // scheduled again while held
	// recording: the holder's record is being written; the lease may
	// have ended at its commit before recorded says so.
	recording bool
	// waiting: claimed by an ingest here (preclaim) and not yet handed
	// to the dispatcher (Schedule), since the renewal round it counts.
	waiting      bool
	waitedRounds int
}

func newClaims() *claims { return &claims{held: map[string]*claim{}} }

// token returns the lease token of the claim this process holds on id.
func (c *claims) token(id string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.held[id]; cl != nil {
		return cl.token, true
	}
	return 0, false
}

// holderToken is token for the holder's record, which it notes as being
// written (see recording) until recorded.
func (c *claims) holderToken(id string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.held[id]; cl != nil {
		cl.recording = true
		return cl.token, true
	}
	return 0, false
}

// prefetched is what a claim read for a delivery's attempt, in the
// claim's own statement (or what an ingest wrote and read): AttemptInput's
// columns, so the attempt costs no round trip of its own.
type prefetched struct {
	doc, body, epDoc, epSecrets []byte
	trace                       string    // the event's ingest_trace
	at                          time.Time // when it was read
	// delivery and endpoint, when set, are doc and the endpoint as
	// structs already (an ingest here made them): nothing to decode.
	delivery *engine.Delivery
	endpoint *engine.Endpoint
}

// maxPrefetchAge is how old what a claim read may be for its attempt:
// older, the attempt reads the delivery and its endpoint again. So a
// change of the endpoint (a revoked key, a new URL) made on any node
// applies to every attempt that starts a second after it at the latest.
const maxPrefetchAge = time.Second

// takeInput returns, once, what the claim on id read for its attempt,
// unless that is older than maxPrefetchAge.
func (c *claims) takeInput(id string) *prefetched {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.held[id]
	if cl == nil || cl.input == nil {
		return nil
	}
	p := cl.input
	cl.input = nil
	c.unstarted--
	if time.Since(p.at) > maxPrefetchAge {
		return nil
	}
	return p
}

// read keeps the document AttemptInput read of a delivery this process
// holds, and the delivery it decoded from it, for its record
// (recordAsRead).
func (c *claims) read(id string, doc []byte, d *engine.Delivery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.held[id]; cl != nil {
		cl.read, cl.readD = doc, d
	}
}

// asRead returns the token of this process's claim on id and the
// document read under it, decoded too, and forgets the document: it is
// good for one record, noted as being written (see recording).
func (c *claims) asRead(id string) (token int64, doc []byte, d engine.Delivery, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.held[id]
	if cl == nil || cl.read == nil || cl.readD == nil || !cl.live {
		return 0, nil, engine.Delivery{}, false
	}
	doc, d = cl.read, *cl.readD
	cl.read, cl.readD, cl.recording = nil, nil, true
	return cl.token, doc, d, true
}

// recorded notes what a write by this process under lease token did
// to its lease on id; nothing when the claim on id holds another token
// now (retakeLocked: a claim took the delivery again after the write
// committed).
func (c *claims) recorded(id string, token int64, change leaseChange) {
	if change == leaseKeep {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.held[id]; cl != nil && cl.token == token {
		cl.live = change == leaseRenewed
		cl.kept, cl.recording = cl.live, false
	}
}

// now is the store's clock.
func (s *Store) now() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}

// channel is the NOTIFY channel of the store's schema.
func (s *Store) channel() string { return dueChannel(s.schema) }

// newToken returns a random lease token.
func newToken() int64 {
	var b [8]byte
	rand.Read(b[:]) // never returns an error: it crashes the program instead (Go 1.24)
	return int64(binary.LittleEndian.Uint64(b[:]) >> 1)
}

// Recover counts the pending deliveries and starts the background work.
// Nothing is loaded: the database is the retry index.
func (c *Scheduler) Recover(ctx context.Context, _ func(time.Time) time.Time) (int, error) {
	if err := c.heartbeat(ctx); err != nil {
		return 0, err
	}
	// This node's ingests are noted from before the first count: what
	// it sees of them is dropped (backlog.go).
	c.s.counter.Store(c)
	if err := c.refreshCounts(ctx); err != nil {
		c.s.counter.CompareAndSwap(c, nil)
		return 0, err
	}
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	c.stop = stop
	c.stopped.Add(3)
	go c.renewLoop(bg)
	go c.listenLoop(bg)
	go c.countLoop(bg)
	c.claimFrom = time.Now().Add(c.opts.JoinWait)
	if c.opts.JoinWait <= 0 {
		c.join()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, nil
}

// join starts this node's claims: its ingests may claim from now on.
func (c *Scheduler) join() {
	if c.opts.PreClaim > 0 {
		c.s.preclaimer.Store(c)
	}
	c.joined.Store(true)
}

// awaitJoin waits, the first time, until JoinWait has passed since
// Recover, then reads the nodes again (heartbeat) and joins: the shares
// of the first claims count every node that started meanwhile.
func (c *Scheduler) awaitJoin(ctx context.Context) error {
	if c.joined.Load() {
		return nil
	}
	t := time.NewTimer(time.Until(c.claimFrom))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	if err := c.heartbeat(ctx); err != nil && ctx.Err() == nil {
		c.s.log.Warn("heartbeat before the first claim; the endpoints' shares count the nodes seen at start", "err", err)
	}
	c.join()
	return nil
}

// mayPreclaim reports whether an ingest here may claim its new
// deliveries: fewer than PreClaim of the claims this process holds wait
// for their attempt.
func (c *Scheduler) mayPreclaim() bool {
	cs := c.s.claims
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.unstarted < c.opts.PreClaim
}

// preclaimed takes over the claims of an ingest here, under token, each
// with what the attempt needs, until Schedule hands them to the caller.
func (c *Scheduler) preclaimed(ws []engine.Work, token int64, until time.Time, inputs []prefetched) {
	cs := c.s.claims
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for i, w := range ws {
		cs.addLocked(w.DeliveryID, &claim{w: w, token: token, until: until, live: true, input: &inputs[i], waiting: true})
	}
}

// Close ends the background work, ends the leases released or settled
// and not yet written back and those of deliveries an ingest here claimed
// that no dispatcher took over, and waits for both. The leases still
// held end with their time. Close does not close the Store; a second
// Close does nothing.
func (c *Scheduler) Close() { c.closeOnce.Do(c.close) }

func (c *Scheduler) close() {
	c.s.preclaimer.CompareAndSwap(c, nil)
	c.s.counter.CompareAndSwap(c, nil)
	if c.stop != nil {
		c.stop()
		c.stopped.Wait()
	}
	// What an ingest here claimed and no dispatcher took over goes back
	// now: nothing here will attempt it.
	cs := c.s.claims
	cs.mu.Lock()
	var unwanted []*claim
	for id, cl := range cs.held {
		if cl.waiting {
			cs.removeLocked(id)
			if cl.live {
				unwanted = append(unwanted, cl)
			}
		}
	}
	cs.mu.Unlock()
	for _, cl := range unwanted {
		c.queueEnd(ended{id: cl.w.DeliveryID, token: cl.token})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.endLeases(ctx)
	c.leave(ctx)
}

// Schedule notes that w is due at at. A delivery an ingest here claimed
// (preclaim) is the caller's at once; another this process holds is
// handed back by its Settle; otherwise, due now, the claim loop wakes to
// claim it from the database.
func (c *Scheduler) Schedule(w engine.Work, at time.Time) bool {
	cs := c.s.claims
	cs.mu.Lock()
	if cl := cs.held[w.DeliveryID]; cl != nil {
		if cl.waiting { // claimed by its ingest here: the caller's now
			cl.waiting = false
			cs.mu.Unlock()
			return true
		}
		cl.rerun = true
		cs.mu.Unlock()
		return false
	}
	cs.mu.Unlock()
	c.wakeAt(c.s.now().Add(time.Until(at)))
	return false
}

// wakeAt wakes the claim loop at due (the store's clock): now, or at its
// next sleep.
func (c *Scheduler) wakeAt(due time.Time) {
	c.mu.Lock()
	if c.nextDue.IsZero() || due.Before(c.nextDue) {
		c.nextDue = due
	}
	c.mu.Unlock()
	c.signal()
}

func (c *Scheduler) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Claim claims due deliveries from the database, at most max (or the
// batch size), waiting until some are due. A database that fails is
// tried again every poll interval until ctx ends.
func (c *Scheduler) Claim(ctx context.Context, limit int) ([]engine.Work, error) {
	return c.ClaimSkipping(ctx, limit, nil)
}

// ClaimSkipping is Claim, leaving out the deliveries of the tenants and
// endpoints skip lists (asked at every claim; nil: none).
func (c *Scheduler) ClaimSkipping(ctx context.Context, limit int, skip func() engine.ClaimSkip) ([]engine.Work, error) {
	if limit <= 0 || limit > c.opts.Batch {
		limit = c.opts.Batch
	}
	if err := c.awaitJoin(ctx); err != nil {
		return nil, err
	}
	for {
		var skipped engine.ClaimSkip
		if skip != nil {
			skipped = skip()
		}
		ws, next, err := c.claim(ctx, limit, skipped)
		if ctx.Err() != nil {
			c.giveBack(ws)
			return nil, ctx.Err()
		}
		if err != nil {
			c.s.log.Warn("claim due deliveries", "err", err)
			next = time.Time{}
		}
		if len(ws) > 0 {
			return ws, nil
		}
		wait := c.opts.Poll
		now := c.s.now()
		c.mu.Lock()
		if !next.IsZero() && !next.After(now) {
			// Due, and none of it claimable: every slot of its endpoints
			// is taken, or their pace says wait, or another claim holds
			// it, or it is skipped. A settle here wakes the loop at once; another node's,
			// the next look.
			wait = min(wait, busyWait)
		} else if !next.IsZero() && (c.nextDue.IsZero() || next.Before(c.nextDue)) {
			c.nextDue = next
		}
		if !c.nextDue.IsZero() {
			wait = min(wait, max(c.nextDue.Sub(now), 0))
		}
		c.nextDue = time.Time{}
		c.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-c.wake:
			// Settles come one by one; a moment gathers the slots
			// they free into one claim.
			time.Sleep(gatherWait)
		case <-t.C:
		}
		t.Stop()
	}
}

// giveBack releases work claimed for a caller that is gone.
func (c *Scheduler) giveBack(ws []engine.Work) {
	for _, w := range ws {
		c.Release(w)
	}
}

// claim runs one claim transaction: it returns what it claimed and the
// earliest due time of what is left (zero: nothing pending).
func (c *Scheduler) claim(ctx context.Context, limit int, skip engine.ClaimSkip) ([]engine.Work, time.Time, error) {
	now := c.s.now()
	token := newToken()
	until := now.Add(c.s.lease).UnixNano()
	perEndpoint := 0
	if c.opts.EndpointConcurrency > 0 {
		_, n := c.membership()
		perEndpoint = 4 * ((c.opts.EndpointConcurrency + n - 1) / n)
	}
	// One round trip: a batch outside a transaction runs as one implicit
	// transaction. A claim need not wait for the WAL's flush (see
	// asyncExec).
	b := &pgx.Batch{}
	b.Queue("SELECT set_config('synchronous_commit', 'off', true)")
	tenants, endpoints := skip.Tenants, skip.Endpoints
	if tenants == nil {
		tenants = []string{} // a text[], not NULL: <> ALL (NULL) is never true
	}
	if endpoints == nil {
		endpoints = []string{}
	}
	b.Queue(claimSQL, now.UnixNano(), limit, perEndpoint, token, until, tenants, endpoints)
	b.Queue("SELECT min(due_at) FROM deliveries WHERE state = 'pending'")
	var ws []engine.Work
	var inputs []prefetched
	var next *int64
	err := func() error {
		// Not cut by ctx: a claim whose answer is lost (the caller gave
		// up mid-flight) would leave its leases held by no one until
		// they end. Claim hands back what comes after its caller left.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
		defer cancel()
		br := c.s.pool.SendBatch(qctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			var w engine.Work
			var p prefetched
			var trace *string
			if err := rows.Scan(&w.DeliveryID, &w.TenantID, &w.EndpointID, &p.doc, &p.body, &trace, &p.epDoc, &p.epSecrets); err != nil {
				rows.Close()
				return err
			}
			if trace != nil {
				p.trace = *trace
			}
			ws = append(ws, w)
			inputs = append(inputs, p)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&next); err != nil {
			return err
		}
		return br.Close()
	}()
	if err != nil {
		return nil, time.Time{}, storeError(err)
	}
	cs := c.s.claims
	cs.mu.Lock()
	read := time.Now()
	out := ws[:0]
	for i, w := range ws {
		inputs[i].at = read
		if cl := cs.held[w.DeliveryID]; cl != nil && (!cl.live || cl.recording) {
			// Its holder here recorded its attempt (or is recording
			// it), which ended the lease, and has not settled it yet:
			// the retry came due that soon. It is still the holder's,
			// under this lease.
			cs.retakeLocked(cl, token, time.Unix(0, until), &inputs[i])
			continue
		}
		cs.addLocked(w.DeliveryID, &claim{w: w, token: token, until: time.Unix(0, until), live: true, input: &inputs[i]})
		out = append(out, w)
	}
	cs.mu.Unlock()
	return out, fromNS(next), nil
}

// claimSQL claims the due deliveries, earliest first, at most $2, and
// of each endpoint no more than $3 (when not 0): $1 is now, $4 the lease
// token, $5 the lease's end, $6 the tenants and $7 the endpoints to leave
// out. It locks a
// window of the earliest due deliveries twice the batch (an endpoint
// with many due does not hide the others behind it within that window),
// skipping those another claim has locked: nodes claiming at once take
// different deliveries instead of waiting for each other's row locks.
// The UPDATE looks again at each it chose: one a record or a replay
// changed meanwhile is left out.
const claimSQL = `
WITH due AS (
	SELECT id, endpoint_id, due_at FROM deliveries
	WHERE state = 'pending' AND due_at <= $1 AND tenant_id <> ALL ($6::text[]) AND endpoint_id <> ALL ($7::text[])
	ORDER BY due_at, id LIMIT $2 * 2
	FOR UPDATE SKIP LOCKED
), chosen AS (
	SELECT id FROM (
		SELECT id, due_at, row_number() OVER (PARTITION BY endpoint_id ORDER BY due_at, id) AS place FROM due
	) ranked
	WHERE $3 = 0 OR place <= $3
	ORDER BY due_at, id LIMIT $2
), claimed AS (
	UPDATE deliveries d SET lease_token = $4, lease_until = $5, due_at = $5
	FROM chosen WHERE d.id = chosen.id AND d.state = 'pending' AND d.due_at <= $1
	RETURNING d.id, d.tenant_id, d.endpoint_id, d.event_id, d.doc
)
SELECT c.id, c.tenant_id, c.endpoint_id, c.doc, e.body, e.ingest_trace, ep.doc, ep.secrets FROM claimed c
	JOIN events e ON e.id = c.event_id
	LEFT JOIN endpoints ep ON ep.tenant_id = c.tenant_id AND ep.id = c.endpoint_id`

// asyncExec runs one statement in a transaction that commits without
// waiting for the WAL's flush (synchronous_commit off), as claims do. A
// lease is not an acknowledgement: if the database crashes and forgets a
// claim, a renewal or a lease's end, another node may claim the delivery
// while its holder still attempts it (the holder's record is then
// refused: at-least-once, as always), or a delivery handed back is due
// when its old lease ends. Events, deliveries and every outcome are
// still committed with the server's synchronous_commit.
func (s *Store) asyncExec(ctx context.Context, sql string, args ...any) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
}

// Settle ends this process's claim on w. When the holder's record kept
// the lease (the delivery is due again at once: replayed while it was
// attempted), or w was scheduled again while held, or claimed here again
// after the holder's record (retakeLocked), and the lease is still this
// process's, it stays claimed and Settle reports true. Otherwise a
// lease still live in the database (no record by the holder ended it)
// is ended, due at next at the earliest.
func (c *Scheduler) Settle(w engine.Work, next time.Time) bool {
	cs := c.s.claims
	cs.mu.Lock()
	cl := cs.held[w.DeliveryID]
	if cl == nil {
		cs.mu.Unlock()
		return false
	}
	if cl.live && (cl.rerun || cl.kept) {
		cl.rerun, cl.kept = false, false
		cs.mu.Unlock()
		return true
	}
	cs.removeLocked(w.DeliveryID)
	cs.mu.Unlock()
	c.signal() // its endpoint's slot is free
	due := time.Time{}
	if !next.IsZero() {
		due = c.s.now().Add(time.Until(next))
		c.wakeAt(due)
	}
	if cl.live {
		c.queueEnd(ended{id: w.DeliveryID, token: cl.token, due: due})
	}
	return false
}

// Release ends this process's claim on w without an outcome: the
// delivery is due again at once, for any node.
func (c *Scheduler) Release(w engine.Work) {
	cs := c.s.claims
	cs.mu.Lock()
	cl := cs.removeLocked(w.DeliveryID)
	cs.mu.Unlock()
	if cl != nil && cl.live {
		c.queueEnd(ended{id: w.DeliveryID, token: cl.token})
	}
}

// queueEnd hands a lease to the background loop to end: Settle and
// Release are called under the dispatcher's lock and must not wait for
// the database.
func (c *Scheduler) queueEnd(e ended) {
	c.mu.Lock()
	c.ending = append(c.ending, e)
	c.mu.Unlock()
	select {
	case c.endingNow <- struct{}{}:
	default:
	}
}

// endLeases ends the leases queued by Settle and Release: each delivery
// still pending under that lease is due at its next attempt time or the
// time given, whichever is later. A round that ctx cut leaves them
// queued.
func (c *Scheduler) endLeases(ctx context.Context) {
	c.mu.Lock()
	batch := c.ending
	c.ending = nil
	c.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	ids := make([]string, len(batch))
	tokens := make([]int64, len(batch))
	dues := make([]int64, len(batch))
	for i, e := range batch {
		ids[i], tokens[i] = e.id, e.token
		if !e.due.IsZero() {
			dues[i] = e.due.UnixNano()
		}
	}
	err := c.s.asyncExec(ctx, `UPDATE deliveries d SET lease_token = NULL, lease_until = NULL, due_at = greatest(d.next_attempt_at, e.due)
		FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS e(id, token, due)
		WHERE d.id = e.id AND d.lease_token = e.token AND d.state = 'pending'`, ids, tokens, dues)
	if err != nil && ctx.Err() != nil {
		// Cut by Close while the round was under way (the dispatcher's
		// stop released them just before): back in the queue, for
		// Close's own round, or they would wait out their lease.
		c.mu.Lock()
		c.ending = append(batch, c.ending...)
		c.mu.Unlock()
		return
	}
	if err != nil {
		c.s.log.Warn("end leases; they end with their time instead", "count", len(batch), "err", err)
		return
	}
	c.signal()
}

// renewLoop renews the leases this process holds every third of a lease
// and ends those released or settled.
func (c *Scheduler) renewLoop(ctx context.Context) {
	defer c.stopped.Done()
	t := time.NewTicker(c.s.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.endingNow:
			c.endLeases(ctx)
		case <-t.C:
			if err := c.heartbeat(ctx); err != nil && ctx.Err() == nil {
				c.s.log.Warn("heartbeat; the endpoints' shares stay as they were", "err", err)
			}
			c.endLeases(ctx)
			c.renew(ctx)
		}
	}
}

// renew moves the end of every live lease this process holds to a lease
// from now.
func (c *Scheduler) renew(ctx context.Context) {
	cs := c.s.claims
	cs.mu.Lock()
	seen := map[int64]bool{}
	var tokens []int64
	var unwanted []*claim
	for id, cl := range cs.held {
		if cl.waiting {
			// An ingest here claimed it and nobody took it over since a
			// round before (the dispatcher was not running): it goes back.
			if cl.waitedRounds++; cl.waitedRounds > 1 {
				cs.removeLocked(id)
				if cl.live {
					unwanted = append(unwanted, cl)
				}
				continue
			}
		}
		if cl.live && !seen[cl.token] {
			seen[cl.token] = true
			tokens = append(tokens, cl.token)
		}
	}
	cs.mu.Unlock()
	for _, cl := range unwanted {
		c.queueEnd(ended{id: cl.w.DeliveryID, token: cl.token})
	}
	if len(tokens) == 0 {
		return
	}
	until := c.s.now().Add(c.s.lease)
	var renewed []int64
	err := c.s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil { // as asyncExec
			return err
		}
		rows, err := tx.Query(ctx, `UPDATE deliveries SET lease_until = $2, due_at = $2
			WHERE lease_token = ANY($1) AND state = 'pending' RETURNING lease_token`, tokens, until.UnixNano())
		if err != nil {
			return err
		}
		renewed, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	if err != nil {
		c.s.log.Warn("renew leases", "err", err)
		return
	}
	// Only the leases the database renewed last longer: one another
	// node took over keeps the end this process knew (LeaseLeft).
	ok := make(map[int64]bool, len(renewed))
	for _, t := range renewed {
		ok[t] = true
	}
	cs.mu.Lock()
	for _, cl := range cs.held {
		if cl.live && ok[cl.token] && until.After(cl.until) {
			cl.until = until
		}
	}
	cs.mu.Unlock()
}

// LeaseLeft returns how long this process's claim on w has to run: the
// end its claim or its last renewal wrote, less the store's clock now.
// A claim whose lease a record here ended (the delivery is being
// recorded or settled) has none left.
func (c *Scheduler) LeaseLeft(w engine.Work) (time.Duration, bool) {
	cs := c.s.claims
	cs.mu.Lock()
	cl := cs.held[w.DeliveryID]
	var until time.Time
	live := false
	if cl != nil {
		until, live = cl.until, cl.live
	}
	cs.mu.Unlock()
	if cl == nil {
		return 0, false
	}
	if !live {
		return 0, true
	}
	return until.Sub(c.s.now()), true
}

// listenLoop wakes the claim loop on every notification of the store's
// channel, reconnecting while the database is away.
func (c *Scheduler) listenLoop(ctx context.Context) {
	defer c.stopped.Done()
	for ctx.Err() == nil {
		err := c.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		c.s.log.Debug("listen for due deliveries; reconnecting", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(c.opts.Poll):
		}
	}
}

// listen holds a connection of its own, outside the pool, for as long as
// it listens: the pool's connections are the work's.
func (c *Scheduler) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, c.s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{c.s.channel()}.Sanitize()); err != nil {
		return err
	}
	c.signal() // what was notified before this LISTEN is found by a claim
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		c.signal()
	}
}

// countLoop refreshes the counts (Pending, Counts, Held) every few
// seconds: in a cluster they are the database's, at most that old.
func (c *Scheduler) countLoop(ctx context.Context) {
	defer c.stopped.Done()
	// Recover counted just before the loop starts: the next count is
	// CountEvery after it.
	wait := c.opts.CountEvery
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		start := time.Now()
		if err := c.refreshCounts(ctx); err != nil && ctx.Err() == nil {
			c.s.log.Warn("count pending deliveries", "err", err)
		}
		// Never more than a tenth of the time in counting.
		wait = max(c.opts.CountEvery, 10*time.Since(start))
	}
}

// ForgetTenant does nothing: this process holds only claimed work, and
// a deleted tenant's claims end when settled.
func (c *Scheduler) ForgetTenant(string) {}

// Holds reports whether this process holds a claim on id.
func (c *Scheduler) Holds(id string) bool {
	_, ok := c.s.claims.token(id)
	return ok
}

// Pending counts tenant's pending deliveries in the whole cluster, as of
// the last count (at most a few seconds old), with those this node's
// ingests made since (backlog.go).
func (c *Scheduler) Pending(tenant string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending[tenant] + c.notedBy[tenant].Pending
}

// Counts returns the pending deliveries of the whole cluster and how
// many of them no node holds, as of the last count, with those this
// node's ingests made since, counted among those no node holds.
func (c *Scheduler) Counts() (total, waiting int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total + c.notedAll.Pending, c.total - c.leased + c.notedAll.Pending
}
