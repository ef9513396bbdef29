package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/engine"
)

// Ordered lines (engine/lines.go) in PostgreSQL.
//
// A line is the rows of deliveries with one (endpoint_id, line), line not
// empty. Its head is the row deliveries_line_head indexes (isHeadSQL: the
// predicate of engine.HoldsLine, from the state and blocking columns), at
// most one, which the unique index enforces; its waiting members are in
// deliveries_waiting by (sequence, id), CompareLineOrder's order.
//
// Every transaction that changes a line's membership (writes an ordered
// delivery, or deletes one; but an import, which runs alone) first takes
// the line's lock: a
// transaction-scoped advisory lock of kind lineLock on the line
// (locks.go).
// So what it reads of the line (its head, its lowest waiting member)
// stays so until it commits, and SettleLine and PromoteDelivery run on
// the line as stored. Locks are taken in this order, which rules out
// deadlocks between them: a tenant's sequence lock (ingest), then line
// locks in the order of their keys (lockLinesSQL), then row locks. A
// delivery's endpoint_id and line never change, so a transaction may
// read them without a lock to know which line lock to take first. Two
// lines whose keys collide share a lock: they then take turns, no more.
//
// A holder's record of an ordered delivery takes the row-locked path
// (update), never recordAsRead's compare and set: the head's record
// promotes the next member in its transaction, and notifies the nodes
// (notifyDue) that it is due.

// lineLock is the kind of a line's lock ("whln"; see locks.go).
const lineLock = 0x77686c6e

// lineIDSQL is the SQL text that names the line of the row alias in its
// schema: its endpoint ID ‖ U+0001 ‖ line.
func lineIDSQL(alias string) string {
	return fmt.Sprintf("%[1]s.endpoint_id || chr(1) || %[1]s.line", alias)
}

// isHeadSQL is the predicate of deliveries_line_head on the row alias:
// the row holds its line (engine.HoldsLine).
func isHeadSQL(alias string) string {
	return fmt.Sprintf("%[1]s.line <> '' AND (%[1]s.state IN ('pending', 'paused') OR %[1]s.blocking)", alias)
}

// lockLinesSQL is a query that takes the locks of the lines of what rows
// (a query with the columns endpoint_id and line) returns, in the order
// of their keys (old, then new: locks.go), and returns each line's
// endpoint_id and line.
func lockLinesSQL(rows string) string {
	return fmt.Sprintf(`SELECT endpoint_id, line, %s FROM (
		SELECT DISTINCT r.endpoint_id, r.line, hashtext(%s) AS old, %s AS key FROM (%s) r
		WHERE r.line <> '' ORDER BY old, key) lines`,
		lockKeysSQL("pg_advisory_xact_lock", lineLock, "old", "key"), lineIDSQL("r"), lockKeySQL(lineLock, lineIDSQL("r")), rows)
}

// lockLineOfSQL takes the lock of the line of delivery $1, if it is
// ordered.
var lockLineOfSQL = "SELECT " + lockSQL("pg_advisory_xact_lock", lineLock, lineIDSQL("d")) + " FROM deliveries d WHERE d.id = $1 AND d.line <> ''"

// waitingBehindSQL is the ID of the head of the line of the row d while
// d is waiting (Delivery.WaitingBehind, which is not stored: the head
// changes without its waiting members being rewritten), else NULL.
var waitingBehindSQL = `CASE WHEN d.state = 'waiting' THEN (SELECT h.id FROM deliveries h
	WHERE h.endpoint_id = d.endpoint_id AND h.line = d.line AND ` + isHeadSQL("h") + `) END`

// deliveryReadSQL is the columns a delivery is read from (scanDelivery),
// of the row d.
var deliveryReadSQL = "d.doc, " + waitingBehindSQL

// scanDelivery reads a delivery from a row of deliveryReadSQL.
func scanDelivery(r pgx.Row) (engine.Delivery, error) {
	var doc []byte
	var behind *string
	if err := r.Scan(&doc, &behind); err != nil {
		return engine.Delivery{}, err
	}
	d, err := decodeDelivery(doc)
	if behind != nil {
		d.WaitingBehind = *behind
	}
	return d, err
}

// collectDeliveries reads the deliveries a query of deliveryReadSQL
// returns; none is an empty slice.
func collectDeliveries(ctx context.Context, q querier, sql string, args ...any) ([]engine.Delivery, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, storeError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (engine.Delivery, error) { return scanDelivery(r) })
	if err != nil {
		return nil, storeError(err)
	}
	if out == nil {
		out = []engine.Delivery{}
	}
	return out, nil
}

// lineSequence is the sequence column of d: its Sequence when it is
// ordered (the waiting members' order), 0 otherwise.
func lineSequence(d engine.Delivery) int64 {
	if d.Line == "" {
		return 0
	}
	return int64(d.Sequence)
}

// lineID names a line.
type lineID struct{ endpoint, line string }

// settleNew settles the new deliveries ds in their lines, in tx: it takes
// the locks of the lines of the ordered ones and reads their heads (one
// round trip, lineHeads), then applies SettleLine to each (a new delivery
// of a line with a head waits behind it).
func settleNew(ctx context.Context, tx pgx.Tx, ds []engine.Delivery) error {
	heads, err := lineHeads(ctx, tx, ds)
	if err != nil || heads == nil {
		return err
	}
	for i, d := range ds {
		if d.Line == "" {
			continue
		}
		ds[i], _ = engine.SettleLine(engine.Delivery{}, d, engine.LineView{Head: heads[lineID{d.EndpointID, d.Line}]})
		if err := engine.CheckStorable(ds[i]); err != nil {
			return fmt.Errorf("postgres: append event %s: %w", d.EventID, err)
		}
	}
	return nil
}

// lineHeads takes, in tx, the locks of the lines of ds's ordered
// deliveries and reads their heads, in one round trip: the head's ID by
// line, absent for a line without one. Nil when no delivery of ds is
// ordered.
func lineHeads(ctx context.Context, tx pgx.Tx, ds []engine.Delivery) (map[lineID]string, error) {
	var eps, lines []string
	for _, d := range ds {
		if d.Line != "" {
			eps, lines = append(eps, d.EndpointID), append(lines, d.Line)
		}
	}
	if len(lines) == 0 {
		return nil, nil
	}
	const these = "SELECT * FROM unnest($1::text[], $2::text[]) AS u(endpoint_id, line)"
	heads := map[lineID]string{}
	var l lineID
	var id string
	err := withLineLocks(ctx, tx, these, `SELECT h.endpoint_id, h.line, h.id FROM deliveries h
		WHERE (h.endpoint_id, h.line) IN (`+these+`) AND `+isHeadSQL("h"), []any{eps, lines}, []any{&l.endpoint, &l.line, &id}, func() error {
		heads[l] = id
		return nil
	})
	if err != nil {
		return nil, err
	}
	return heads, nil
}

// withLineLocks takes, in one round trip, the locks of the lines of the
// rows of lines (a query of endpoint_id and line) and then runs query,
// both with args, calling fn with each row of query scanned into dest.
func withLineLocks(ctx context.Context, tx pgx.Tx, lines, query string, args, dest []any, fn func() error) error {
	b := &pgx.Batch{}
	b.Queue(lockLinesSQL(lines), args...)
	b.Queue(query, args...)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return err
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	_, err = pgx.ForEachRow(rows, dest, fn)
	return err
}

// lineView reads the line of d, an ordered delivery whose line tx holds
// the lock of, as SettleLine needs it: its head, and the on_dead of its
// endpoint (skip when the endpoint is deleted).
func lineView(ctx context.Context, tx pgx.Tx, d engine.Delivery) (engine.LineView, error) {
	var head *string
	var epDoc []byte
	err := tx.QueryRow(ctx, `SELECT (SELECT h.id FROM deliveries h WHERE h.endpoint_id = $1 AND h.line = $2 AND `+isHeadSQL("h")+`),
		(SELECT doc FROM endpoints WHERE tenant_id = $3 AND id = $1)`, d.EndpointID, d.Line, d.TenantID).Scan(&head, &epDoc)
	if err != nil {
		return engine.LineView{}, err
	}
	return viewOf(head, epDoc)
}

// viewOf is the LineView of a line whose head has ID head (nil: none)
// and whose endpoint's document is epDoc (nil: deleted).
func viewOf(head *string, epDoc []byte) (engine.LineView, error) {
	var v engine.LineView
	if head != nil {
		v.Head = *head
	}
	if epDoc != nil {
		ep, err := decodeEndpoint(epDoc)
		if err != nil {
			return v, err
		}
		v.OnDead = ep.OnDead
	}
	return v, nil
}

// advanceLine makes the lowest waiting member of line l, whose head
// just left, its head at at (engine.PromoteDelivery), notifies the nodes
// that it is due, and returns it (nil when the line had none waiting
// and is left with no head). tx holds the line's lock.
func (s *Store) advanceLine(ctx context.Context, tx pgx.Tx, l lineID, at time.Time) (*engine.Delivery, error) {
	row, err := lockRow(tx.QueryRow(ctx, `SELECT doc, lease_token, lease_until FROM deliveries
		WHERE endpoint_id = $1 AND line = $2 AND state = 'waiting' ORDER BY sequence, id LIMIT 1 FOR UPDATE`, l.endpoint, l.line))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// The line has no head now: SettleLine would leave the promoted
	// delivery as it is.
	promoted := engine.PromoteDelivery(row.d, at)
	if err := engine.CheckTransition(row.d, promoted); err != nil {
		return nil, fmt.Errorf("postgres: promote delivery %s: %w", row.d.ID, err)
	}
	if _, _, err := s.writeDelivery(ctx, tx, row, promoted, leaseKeep); err != nil {
		return nil, err
	}
	return &promoted, s.notifyDue(ctx, tx, []engine.Delivery{promoted})
}

// deleteDeliveries deletes the deliveries that where (a condition on
// the columns of deliveries, with args) selects, holding the locks of
// their lines; a line whose head it deleted goes on with its lowest
// waiting member (advanceLine, at the store's now). It returns how
// many it deleted, and the deliveries it promoted.
func (s *Store) deleteDeliveries(ctx context.Context, tx pgx.Tx, where string, args ...any) (int, []engine.Work, error) {
	var ended []lineID
	var l lineID
	var head bool
	n := 0
	err := withLineLocks(ctx, tx, "SELECT endpoint_id, line FROM deliveries WHERE "+where,
		"DELETE FROM deliveries d WHERE "+where+" RETURNING d.endpoint_id, d.line, "+isHeadSQL("d"), args, []any{&l.endpoint, &l.line, &head}, func() error {
			n++
			if head {
				ended = append(ended, l)
			}
			return nil
		})
	if err != nil {
		return 0, nil, err
	}
	at := s.now()
	var promoted []engine.Work
	for _, l := range ended {
		p, err := s.advanceLine(ctx, tx, l, at)
		if err != nil {
			return 0, nil, err
		}
		if p != nil {
			promoted = append(promoted, engine.Work{DeliveryID: p.ID, TenantID: p.TenantID, EndpointID: p.EndpointID})
		}
	}
	return n, promoted, nil
}

// LineHead returns the head of the line (endpointID, line) and whether
// it has one, through deliveries_line_head.
func (s *Store) LineHead(ctx context.Context, endpointID, line string) (engine.Delivery, bool, error) {
	if line == "" {
		return engine.Delivery{}, false, ctx.Err()
	}
	var doc []byte
	err := s.pool.QueryRow(ctx, "SELECT d.doc FROM deliveries d WHERE d.endpoint_id = $1 AND d.line = $2 AND "+isHeadSQL("d"), endpointID, line).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.Delivery{}, false, nil
	}
	if err != nil {
		return engine.Delivery{}, false, storeError(err)
	}
	d, err := decodeDelivery(doc)
	return d, err == nil, err
}

// sortInLineOrder returns the order in which to save rows (their
// indexes): in line order (a range replay makes the lowest Sequence of a
// line its head), stably.
func sortInLineOrder(rows []storedDelivery) []int {
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return engine.CompareLineOrder(rows[a].d, rows[b].d) })
	return order
}
