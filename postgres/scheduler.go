package postgres

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"sync"
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
// lease: due_at becomes the delivery's next attempt time again.
//
// Per-endpoint concurrency and rate hold across the cluster: claims run
// one at a time (a transaction-scoped advisory lock), and a claim takes
// no more deliveries of an endpoint than its concurrency minus the
// deliveries of it under a live lease anywhere, nor more than the
// endpoint's pace in endpoint_pace allows. So at most
// EndpointConcurrency attempts of one endpoint are in flight in the whole
// cluster, as long as no node holds an attempt past its lease (the lease
// is longer than an attempt's timeout; see DefaultLease), and at most
// EndpointRate are claimed per second after a burst of one second's
// worth. A claimed delivery is attempted soon after (a node claims no
// more than its workers can start), so the rate of attempts follows the
// rate of claims.
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

// claimLock is the advisory lock key that makes claims take turns (see
// above): "whclaims" in ASCII.
const claimLock = 0x7768636c61696d73

// SchedulerOptions configure a Scheduler.
type SchedulerOptions struct {
	// EndpointConcurrency bounds the attempts of one endpoint in flight
	// in the whole cluster; zero: no bound.
	EndpointConcurrency int
	// EndpointRate bounds the attempts per second of one endpoint in the
	// whole cluster, with a burst of one second's worth; zero: no bound.
	EndpointRate float64
	// Batch is how many deliveries one claim takes at most; zero: 100.
	Batch int
	// Poll is the longest a claim loop sleeps without a wake-up; zero:
	// one second.
	Poll time.Duration
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
	leased    int
	ending    []ended // leases to end, by the background loop
	endingNow chan struct{}

	stop    context.CancelFunc
	stopped sync.WaitGroup
}

// ended is a lease to end without an outcome of the holder's: due again
// at due (the store's clock) at the earliest.
type ended struct {
	id    string
	token int64
	due   time.Time
}

var _ engine.Scheduler = (*Scheduler)(nil)

// Scheduler returns the store's Scheduler. Its background work (lease
// renewal, LISTEN, counts) starts at Recover and ends at Close.
func (s *Store) Scheduler(opts SchedulerOptions) *Scheduler {
	if opts.Batch <= 0 {
		opts.Batch = 100
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	return &Scheduler{s: s, opts: opts, wake: make(chan struct{}, 1), endingNow: make(chan struct{}, 1), pending: map[string]int{}}
}

// claims are the leases this process holds, by delivery ID.
type claims struct {
	mu   sync.Mutex
	held map[string]*claim
}

type claim struct {
	w     engine.Work
	token int64
	read  []byte      // the delivery's document as AttemptInput read it under this claim
	input *prefetched // what the claim read for the attempt, until AttemptInput takes it
	live  bool        // the lease in the database is still this claim's
	kept  bool        // the holder's record kept the lease: due again at once
	rerun bool        // scheduled again while held
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

// prefetched is what a claim read for a delivery's attempt, in the
// claim's own statement: AttemptInput's columns, so the attempt costs no
// round trip of its own.
type prefetched struct {
	doc, body, epDoc, epSecrets []byte
}

// takeInput returns, once, what the claim on id read for its attempt.
func (c *claims) takeInput(id string) *prefetched {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.held[id]
	if cl == nil || cl.input == nil {
		return nil
	}
	p := cl.input
	cl.input = nil
	return p
}

// read keeps the document AttemptInput read of a delivery this process
// holds, for its record (recordAsRead).
func (c *claims) read(id string, doc []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.held[id]; cl != nil {
		cl.read = doc
	}
}

// asRead returns the token of this process's claim on id and the
// document read under it, and forgets the document: it is good for one
// record.
func (c *claims) asRead(id string) (token int64, doc []byte, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.held[id]
	if cl == nil || cl.read == nil || !cl.live {
		return 0, nil, false
	}
	doc, cl.read = cl.read, nil
	return cl.token, doc, true
}

// recorded notes what a write by this process did to its lease on id.
func (c *claims) recorded(id string, change leaseChange) {
	if change == leaseKeep {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.held[id]; cl != nil {
		cl.live = change == leaseRenewed
		cl.kept = cl.live
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
	if _, err := rand.Read(b[:]); err != nil {
		panic("postgres: crypto/rand failed: " + err.Error())
	}
	return int64(binary.LittleEndian.Uint64(b[:]) >> 1)
}

// Recover counts the pending deliveries and starts the background work.
// Nothing is loaded: the database is the retry index.
func (c *Scheduler) Recover(ctx context.Context, _ func(time.Time) time.Time) (int, error) {
	if err := c.refreshCounts(ctx); err != nil {
		return 0, err
	}
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	c.stop = stop
	c.stopped.Add(3)
	go c.renewLoop(bg)
	go c.listenLoop(bg)
	go c.countLoop(bg)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, nil
}

// Close ends the background work, ends the leases released or settled
// and not yet written back, and waits for both. The leases still held
// end with their time. Close does not close the Store.
func (c *Scheduler) Close() {
	if c.stop != nil {
		c.stop()
		c.stopped.Wait()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.endLeases(ctx)
}

// Schedule notes that w is due at at. A delivery this process holds is
// handed back by its Settle; otherwise, due now, the claim loop wakes to
// claim it from the database. It never claims at once: a claim is a
// transaction.
func (c *Scheduler) Schedule(w engine.Work, at time.Time) bool {
	cs := c.s.claims
	cs.mu.Lock()
	if cl := cs.held[w.DeliveryID]; cl != nil {
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

var _ engine.TenantSkipper = (*Scheduler)(nil)

// ClaimSkipping is Claim, leaving out the deliveries of the tenants skip
// lists (asked at every claim; nil: none).
func (c *Scheduler) ClaimSkipping(ctx context.Context, limit int, skip func() []string) ([]engine.Work, error) {
	if limit <= 0 || limit > c.opts.Batch {
		limit = c.opts.Batch
	}
	for {
		skipped := []string{}
		if skip != nil {
			skipped = append(skipped, skip()...)
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
			// it. A settle here wakes the loop at once; another node's,
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
func (c *Scheduler) claim(ctx context.Context, limit int, skip []string) ([]engine.Work, time.Time, error) {
	now := c.s.now()
	token := newToken()
	until := now.Add(c.s.lease).UnixNano()
	var interval, burst int64
	if c.opts.EndpointRate > 0 {
		interval = int64(float64(time.Second) / c.opts.EndpointRate)
		burst = interval * int64(max(1, int(c.opts.EndpointRate))) // as the dispatcher's own limiter
	}
	// One round trip: a batch outside a transaction runs as one implicit
	// transaction, so the claim lock is held for the claim's statements
	// only, not across round trips. A claim need not wait for the WAL's
	// flush (see asyncExec).
	b := &pgx.Batch{}
	b.Queue("SELECT set_config('synchronous_commit', 'off', true), pg_advisory_xact_lock($1)", int64(claimLock))
	b.Queue(claimSQL, now.UnixNano(), limit, c.opts.EndpointConcurrency, token, until, interval, burst, skip)
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
			if err := rows.Scan(&w.DeliveryID, &w.TenantID, &w.EndpointID, &p.doc, &p.body, &p.epDoc, &p.epSecrets); err != nil {
				rows.Close()
				return err
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
	for i, w := range ws {
		cs.held[w.DeliveryID] = &claim{w: w, token: token, live: true, input: &inputs[i]}
	}
	cs.mu.Unlock()
	return ws, fromNS(next), nil
}

// claimSQL claims the due deliveries, earliest first, at most $2, and of
// each endpoint no more than $3 (when not 0) minus those under a live
// lease, and no more than its pace allows: with $6 nanoseconds between
// attempts (when not 0) and a burst of $7 nanoseconds' worth, a
// generic cell rate algorithm whose theoretical arrival time per
// endpoint is endpoint_pace.tat. $1 is now, $4 the lease token, $5 the
// lease's end, $8 the tenants to leave out. It reads a window of the
// earliest due deliveries four times the batch (an endpoint at its bound
// with many due does not hide the others behind it within that window)
// without locking it: claims
// take turns, so only the rows it chooses are locked, by the UPDATE,
// which looks again at each (a record or a replay may have changed it
// meanwhile). Locking the whole window cost a write to every row of it
// at every claim.
const claimSQL = `
WITH due AS (
	SELECT id, endpoint_id, due_at FROM deliveries
	WHERE state = 'pending' AND due_at <= $1 AND tenant_id <> ALL ($8::text[])
	ORDER BY due_at, id LIMIT $2 * 4
), busy AS (
	SELECT endpoint_id, count(*) AS n FROM deliveries
	WHERE state = 'pending' AND lease_token IS NOT NULL AND lease_until > $1
	AND endpoint_id IN (SELECT endpoint_id FROM due)
	GROUP BY endpoint_id
), ranked AS (
	SELECT due.id, due.due_at, due.endpoint_id, coalesce(busy.n, 0) AS busy,
		row_number() OVER (PARTITION BY due.endpoint_id ORDER BY due.due_at, due.id) AS place
	FROM due LEFT JOIN busy USING (endpoint_id)
), chosen AS (
	SELECT r.id FROM ranked r LEFT JOIN endpoint_pace p USING (endpoint_id)
	WHERE ($3 = 0 OR r.place + r.busy <= $3)
	AND ($6 = 0 OR r.place <= floor(($1 + $7 - greatest(coalesce(p.tat, 0), $1))::float8 / $6))
	ORDER BY r.due_at, r.id LIMIT $2
), claimed AS (
	UPDATE deliveries d SET lease_token = $4, lease_until = $5, due_at = $5
	FROM chosen WHERE d.id = chosen.id AND d.state = 'pending' AND d.due_at <= $1
	RETURNING d.id, d.tenant_id, d.endpoint_id, d.event_id, d.doc
), paced AS (
	INSERT INTO endpoint_pace (endpoint_id, tat)
	SELECT endpoint_id, $1 + count(*) * $6 FROM claimed WHERE $6 > 0 GROUP BY endpoint_id
	ON CONFLICT (endpoint_id) DO UPDATE SET tat = greatest(endpoint_pace.tat, $1) + (excluded.tat - $1)
)
SELECT c.id, c.tenant_id, c.endpoint_id, c.doc, e.body, ep.doc, ep.secrets FROM claimed c
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
// attempted), or w was scheduled again while held and the lease is still
// this process's, it stays claimed and Settle reports true. Otherwise a
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
	delete(cs.held, w.DeliveryID)
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
	cl := cs.held[w.DeliveryID]
	delete(cs.held, w.DeliveryID)
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
// time given, whichever is later.
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
	for _, cl := range cs.held {
		if cl.live && !seen[cl.token] {
			seen[cl.token] = true
			tokens = append(tokens, cl.token)
		}
	}
	cs.mu.Unlock()
	if len(tokens) == 0 {
		return
	}
	until := c.s.now().Add(c.s.lease).UnixNano()
	if err := c.s.asyncExec(ctx, `UPDATE deliveries SET lease_until = $2, due_at = $2
		WHERE lease_token = ANY($1) AND state = 'pending'`, tokens, until); err != nil {
		c.s.log.Warn("renew leases", "err", err)
	}
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

// countLoop refreshes the pending counts (Pending, Counts) every few
// seconds: in a cluster they are the database's, at most that old.
func (c *Scheduler) countLoop(ctx context.Context) {
	defer c.stopped.Done()
	for {
		start := time.Now()
		if err := c.refreshCounts(ctx); err != nil && ctx.Err() == nil {
			c.s.log.Warn("count pending deliveries", "err", err)
		}
		// Never more than a tenth of the time in counting.
		wait := max(2*time.Second, 10*time.Since(start))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// refreshCounts reads how many deliveries are pending, per tenant, and
// how many of them are leased.
func (c *Scheduler) refreshCounts(ctx context.Context) error {
	rows, err := c.s.pool.Query(ctx, `SELECT tenant_id, count(*), count(*) FILTER (WHERE lease_until > $1)
		FROM deliveries WHERE state = 'pending' GROUP BY tenant_id`, c.s.now().UnixNano())
	if err != nil {
		return storeError(err)
	}
	pending := map[string]int{}
	total, leased := 0, 0
	for rows.Next() {
		var tenant string
		var n, l int
		if err := rows.Scan(&tenant, &n, &l); err != nil {
			rows.Close()
			return err
		}
		pending[tenant] = n
		total += n
		leased += l
	}
	if err := rows.Err(); err != nil {
		return storeError(err)
	}
	c.mu.Lock()
	c.pending, c.total, c.leased = pending, total, leased
	c.mu.Unlock()
	return nil
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
// the last count (at most a few seconds old).
func (c *Scheduler) Pending(tenant string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending[tenant]
}

// Counts returns the pending deliveries of the whole cluster and how
// many of them no node holds, as of the last count.
func (c *Scheduler) Counts() (total, waiting int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, c.total - c.leased
}
