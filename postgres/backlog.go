package postgres

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/engine"
)

// The backlog between counts.
//
// A Scheduler answers Pending, Counts and Held (the pending bounds of
// every ingest, a tenant's deletion) from its last count of the
// cluster's backlog (refreshCounts, every CountEvery), taken with the
// count's snapshot. To what it counted it adds what this node's own
// ingests made pending or held since: each delivery of an acknowledged
// ingest is noted with the ingest's transaction ID (an event's seq is
// that ID × 65 536: seqSQL), and its note is dropped once a count's
// snapshot sees that transaction, so nothing is counted twice, nor
// missed between a count and the next. While noted, a delivery counts
// as this node last wrote it: an outcome recorded here (RecordOutcome,
// UpdateDelivery) that ends it (succeeded, or dead without blocking its
// line) drops its note, and one that leaves it held (dead and blocking,
// paused) moves it there. A move made otherwise (a waiting delivery
// made its line's head, another node's record) shows at the next count;
// a move between pending and held leaves the total as it was. So one
// node that ingests fast is refused at a bound by what it has in flight
// at once (ingests that passed the check and are not noted yet), a
// tenant whose deliveries succeed as fast as it sends is not refused
// for them, and what the other nodes did since the last count shows at
// the next.

// note is what one delivery of an ingest of this node adds to its
// tenant's backlog, as this node last knew it.
type note struct {
	tenant string
	xid    uint64 // the ingest's transaction
	add    engine.Backlog
}

// backlogOf returns what d adds to the backlog: one of its counts 1, or
// none (d is final).
func backlogOf(d engine.Delivery) engine.Backlog {
	if d.State == engine.StatePending {
		return engine.Backlog{Pending: 1}
	}
	return engine.Backlog{Held: engine.HeldOf(d)}
}

// plus returns a and b counted together.
func plus(a, b engine.Backlog) engine.Backlog {
	return engine.Backlog{Pending: a.Pending + b.Pending, Held: a.Held.Plus(b.Held)}
}

// minus returns a without b.
func minus(a, b engine.Backlog) engine.Backlog {
	return engine.Backlog{Pending: a.Pending - b.Pending, Held: a.Held.Minus(b.Held)}
}

// noteIngested notes the deliveries of res, an ingest of this node's,
// acknowledged and not a duplicate, unless the last count saw it.
func (c *Scheduler) noteIngested(res engine.IngestResult) {
	c.noteMade(res.Event.Seq>>16, res.Deliveries)
}

// noteMade notes ds, deliveries that this node's transaction xid made
// and committed (an ingest's, a backfill's), unless the last count saw
// that transaction.
func (c *Scheduler) noteMade(xid uint64, ds []engine.Delivery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counted.sees(xid) { // committed before the last count, which has it
		return
	}
	for _, d := range ds {
		if add := backlogOf(d); add.Total() > 0 {
			c.notes[d.ID] = &note{tenant: d.TenantID, xid: xid, add: add}
			c.notedBy[d.TenantID] = plus(c.notedBy[d.TenantID], add)
			c.notedAll = plus(c.notedAll, add)
		}
	}
}

// noteDelivery counts delivery id, if it is noted, as adding add to the
// backlog from now on (none: its note goes).
func (c *Scheduler) noteDelivery(id string, add engine.Backlog) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.notes[id]
	if n == nil {
		return
	}
	c.notedBy[n.tenant] = plus(minus(c.notedBy[n.tenant], n.add), add)
	c.notedAll = plus(minus(c.notedAll, n.add), add)
	n.add = add
	if add.Total() == 0 {
		delete(c.notes, id)
	}
	if c.notedBy[n.tenant] == (engine.Backlog{}) {
		delete(c.notedBy, n.tenant)
	}
}

// noteWritten tells the counting Scheduler, if any, that this process
// wrote d as it is now.
func (s *Store) noteWritten(d engine.Delivery) {
	if c := s.counter.Load(); c != nil {
		c.noteDelivery(d.ID, backlogOf(d))
	}
}

// dropCountedLocked drops the notes of the ingests c.counted sees.
func (c *Scheduler) dropCountedLocked() {
	c.notedBy, c.notedAll = map[string]engine.Backlog{}, engine.Backlog{}
	for id, n := range c.notes {
		if c.counted.sees(n.xid) {
			delete(c.notes, id)
			continue
		}
		c.notedBy[n.tenant] = plus(c.notedBy[n.tenant], n.add)
		c.notedAll = plus(c.notedAll, n.add)
	}
}

// snapshot is a pg_snapshot: the transactions whose writes a read saw,
// those below xmin and those below xmax not in running.
type snapshot struct {
	xmin, xmax uint64
	running    []uint64
}

// sees reports whether a read under snap saw the writes of xid, a
// committed transaction. The zero snapshot sees none.
func (snap snapshot) sees(xid uint64) bool {
	return xid < snap.xmin || xid < snap.xmax && !slices.Contains(snap.running, xid)
}

// parseSnapshot parses pg_snapshot's text form, xmin:xmax:xip,….
func parseSnapshot(s string) (snapshot, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return snapshot{}, fmt.Errorf("postgres: snapshot %q is not xmin:xmax:xip", s)
	}
	var snap snapshot
	var err error
	if snap.xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return snapshot{}, fmt.Errorf("postgres: snapshot %q: %w", s, err)
	}
	if snap.xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return snapshot{}, fmt.Errorf("postgres: snapshot %q: %w", s, err)
	}
	if parts[2] != "" {
		for _, x := range strings.Split(parts[2], ",") {
			xid, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return snapshot{}, fmt.Errorf("postgres: snapshot %q: %w", s, err)
			}
			snap.running = append(snap.running, xid)
		}
	}
	return snap, nil
}

// countedSQL reads the cluster's backlog per tenant: its pending
// deliveries, how many of them are leased at $1, and its held ones
// (engine.Held), in one statement over the partial indexes of those
// states.
const countedSQL = `SELECT tenant_id, count(*) FILTER (WHERE state = 'pending'),
	count(*) FILTER (WHERE state = 'pending' AND lease_until > $1), ` + heldCountsSQL + `
	FROM deliveries WHERE state = 'pending' OR ` + heldSQL + ` GROUP BY tenant_id`

// refreshCounts counts the cluster's backlog (countedSQL) and the
// snapshot it was counted in, in one read-only transaction and round
// trip, and drops the notes of the ingests it counted.
func (c *Scheduler) refreshCounts(ctx context.Context) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
	b.Queue("SELECT pg_current_snapshot()::text")
	b.Queue(countedSQL, c.s.now().UnixNano())
	b.Queue("COMMIT")
	pending, held := map[string]int{}, map[string]engine.Held{}
	total, leased, heldAll := 0, 0, engine.Held{}
	var snap snapshot
	err := func() error {
		br := c.s.pool.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		var text string
		if err := br.QueryRow().Scan(&text); err != nil {
			return err
		}
		var err error
		if snap, err = parseSnapshot(text); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		var tenant string
		var n, l int
		var h engine.Held
		_, err = pgx.ForEachRow(rows, []any{&tenant, &n, &l, &h.Waiting, &h.Paused, &h.Blocking}, func() error {
			if n > 0 {
				pending[tenant] = n
			}
			if h != (engine.Held{}) {
				held[tenant] = h
			}
			total += n
			leased += l
			heldAll = heldAll.Plus(h)
			return nil
		})
		if err != nil {
			return err
		}
		if _, err := br.Exec(); err != nil {
			return err
		}
		return br.Close()
	}()
	if err != nil {
		return storeError(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending, c.total, c.leased = pending, total, leased
	c.held, c.heldAll = held, heldAll
	c.counted = snap
	c.dropCountedLocked()
	return nil
}
