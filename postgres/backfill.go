package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/engine"
)

// backfillLock is the kind of an endpoint's backfill lock ("whbf"; see
// locks.go), keyed by its ID: the steps of backfills of one endpoint
// take turns, so that whether an event has a delivery to it, read in a
// step, stays so until the step commits what it made.
const backfillLock = 0x77686266

// lockBackfillSQL takes, for a backfill of endpoint $2 of tenant $1: the
// tenant's lock, shared (as an ingest: the tenant's deletion waits for
// it, or it for the deletion, which takes the endpoint with it); the
// endpoint's backfill lock; and the prune lock, shared, so that
// PruneEvents (which only tries it) never deletes an event the step is
// making a delivery of: it leaves its pass to the next while one runs.
var lockBackfillSQL = "SELECT " + lockSQL("pg_advisory_xact_lock_shared", tenantLock, "$1") + ", " +
	lockSQL("pg_advisory_xact_lock", backfillLock, "$2") + ", pg_advisory_xact_lock_shared($3, hashtext($4))::text"

// Backfill is one step of a backfill (see engine.Log), in one
// transaction: under lockBackfillSQL's locks, it reads the endpoint (its
// tenant not deleted) and, from events_log, the tenant's events after
// step.After, each with whether it has a delivery to the endpoint
// (deliveries_log); then it settles what it makes in their lines under
// the lines' locks (in log order, each behind the one before when the
// line has no head), inserts them and wakes the nodes when one is due.
// Ingest never makes a delivery for an event already stored, and
// backfills of the endpoint take turns, so the check and the insert
// agree. An event whose ingest began before the endpoint was made and
// commits after a step read past its place in the log (its seq is its
// transaction's) is left to a later backfill.
func (s *Store) Backfill(ctx context.Context, step engine.BackfillStep) (engine.BackfillResult, error) {
	var res engine.BackfillResult
	var xid uint64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		res, xid, err = s.backfill(ctx, tx, step)
		return err
	})
	if err != nil {
		return engine.BackfillResult{}, err
	}
	if c := s.counter.Load(); c != nil && len(res.Created) > 0 {
		c.noteMade(xid, res.Created)
	}
	return res, nil
}

// backfill is Backfill's transaction; it returns the transaction's ID
// when it wrote.
func (s *Store) backfill(ctx context.Context, tx pgx.Tx, step engine.BackfillStep) (engine.BackfillResult, uint64, error) {
	res := engine.BackfillResult{Created: []engine.Delivery{}}
	b := &pgx.Batch{}
	b.Queue(lockBackfillSQL, step.Tenant, step.EndpointID, int32(pruneLock), s.schema)
	b.Queue(`SELECT ep.doc FROM endpoints ep JOIN tenants t ON t.id = ep.tenant_id AND t.deleted_at IS NULL
		WHERE ep.tenant_id = $1 AND ep.id = $2`, step.Tenant, step.EndpointID)
	b.Queue(`SELECT `+eventColsSQL+`, NULL::bytea,
		EXISTS (SELECT 1 FROM deliveries d WHERE d.tenant_id = e.tenant_id AND d.event_seq = e.seq AND d.endpoint_id = $2)
		FROM events e WHERE e.tenant_id = $1 AND e.seq > $3 ORDER BY e.seq LIMIT $4`,
		step.Tenant, step.EndpointID, int64(step.After), max(step.Scan, 1)+1)
	var epDoc []byte
	type read struct {
		ev  engine.Event
		has bool
	}
	var evs []read
	err := func() error {
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&epDoc); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return engine.EndpointNotFound()
			}
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		evs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (read, error) {
			var e read
			var err error
			e.ev, err = scanEvent(rowPlus{r, &e.has})
			return e, err
		})
		return err
	}()
	if err != nil {
		return res, 0, err
	}
	ep, err := decodeEndpoint(epDoc)
	if err != nil {
		return res, 0, err
	}
	if len(evs) > max(step.Scan, 1) {
		evs = evs[:max(step.Scan, 1)]
		res.Next = evs[len(evs)-1].ev.Seq
	}
	var made []engine.Delivery
	var seqs []uint64
	for _, e := range evs {
		if step.Past(e.ev) {
			res.Next = 0
			break
		}
		switch {
		case !step.Wants(e.ev, ep):
		case e.has:
			res.Existing++
		case len(made) >= step.Max:
			res.Missing++
		default:
			d, _ := step.Delivery(e.ev, ep)
			if d.ID == "" || d.EventID != e.ev.ID || d.TenantID != e.ev.TenantID {
				return res, 0, fmt.Errorf("postgres: backfill %s: delivery %q is not of event %s of tenant %s", ep.ID, d.ID, e.ev.ID, e.ev.TenantID)
			}
			if err := engine.CheckStorable(d); err != nil {
				return res, 0, fmt.Errorf("postgres: backfill %s: %w", ep.ID, err)
			}
			made, seqs = append(made, normalizeDelivery(d)), append(seqs, e.ev.Seq)
		}
	}
	if len(made) == 0 {
		return res, 0, nil
	}
	if err := settleBackfilled(ctx, tx, made); err != nil {
		return res, 0, err
	}
	b = &pgx.Batch{}
	for i, d := range made {
		doc, err := encodeDelivery(d)
		if err != nil {
			return res, 0, err
		}
		b.Queue(`INSERT INTO deliveries (id, tenant_id, event_id, event_seq, event_type, endpoint_id, state, created, next_attempt_at, due_at, dead_at, doc, line, sequence, blocking)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11, $12, $13, $14)`,
			d.ID, d.TenantID, d.EventID, int64(seqs[i]), d.EventType, d.EndpointID, string(d.State), d.Created.UnixNano(),
			dueAt(d), deadAt(d), doc, d.Line, lineSequence(d), d.Blocking())
	}
	var xid uint64
	b.Queue("SELECT pg_current_xact_id()::text::bigint").QueryRow(func(r pgx.Row) error {
		var id int64
		err := r.Scan(&id)
		xid = uint64(id)
		return err
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return res, 0, err
	}
	res.Created = made
	return res, xid, s.notifyDue(ctx, tx, made)
}

// rowPlus is a row whose last column is scanned into last, after the
// columns its reader scans.
type rowPlus struct {
	pgx.Row
	last any
}

func (r rowPlus) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.last)...) }

// settleBackfilled settles ds, new deliveries of one endpoint in log
// order, in their lines, in tx: it takes the locks of their lines and
// reads their heads (lineHeads), then applies SettleLine to each in
// turn, so that of several of one line without a head the first becomes
// its head and the others wait behind it.
func settleBackfilled(ctx context.Context, tx pgx.Tx, ds []engine.Delivery) error {
	heads, err := lineHeads(ctx, tx, ds)
	if err != nil || heads == nil {
		return err
	}
	for i, d := range ds {
		if d.Line == "" {
			continue
		}
		k := lineID{d.EndpointID, d.Line}
		ds[i], _ = engine.SettleLine(engine.Delivery{}, d, engine.LineView{Head: heads[k]})
		if err := engine.CheckStorable(ds[i]); err != nil {
			return fmt.Errorf("postgres: backfill %s: %w", d.EndpointID, err)
		}
		if engine.HoldsLine(ds[i]) {
			heads[k] = ds[i].ID
		}
	}
	return nil
}
