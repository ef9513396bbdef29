package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/engine"
)

// pruneLock is the advisory lock (with the schema's hashtext) of
// PruneEvents, one per schema, so that the clusters of two schemas of a
// database prune each their own at once: "whprune" in ASCII, folded to
// 32 bits.
const pruneLock = 0x77687072

// defaultPruneMax is how much one maintenance call deletes when its
// caller says 0.
const defaultPruneMax = 500

// PruneIdempotency deletes at most max idempotency records expired at
// now; fewer than max means no more.
func (s *Store) PruneIdempotency(ctx context.Context, now time.Time, max int) (int, error) {
	return s.deleteSome(ctx, `DELETE FROM idempotency WHERE (tenant_id, key) IN
		(SELECT tenant_id, key FROM idempotency WHERE expires <= $1 LIMIT $2)`, now.UnixNano(), orDefault(max))
}

// PruneAccessTokens deletes at most max access tokens that expired
// before before.
func (s *Store) PruneAccessTokens(ctx context.Context, before time.Time, max int) (int, error) {
	return s.deleteSome(ctx, `DELETE FROM access_tokens WHERE hash IN
		(SELECT hash FROM access_tokens WHERE expires < $1 LIMIT $2)`, before.UnixNano(), orDefault(max))
}

func orDefault(max int) int {
	if max <= 0 {
		return defaultPruneMax
	}
	return max
}

// deleteSome runs one DELETE and returns how many rows it deleted.
func (s *Store) deleteSome(ctx context.Context, sql string, args ...any) (int, error) {
	tag, err := s.pool.Exec(ctx, sql, args...)
	if err != nil {
		return 0, storeError(err)
	}
	return int(tag.RowsAffected()), nil
}

// PruneEvents deletes, in one transaction, among at most max events after
// log position cursor (0: from the start), those whose every delivery is
// finished and past r, each with its deliveries. Next is where the next
// call starts, 0 when the log was read to its end (or the rest is newer
// than either retention). Idempotency records are PruneIdempotency's.
// A deleted dead head that blocked its line promotes the line's lowest
// waiting member (deleteDeliveries), reported in Promoted; the nodes
// hear of it at commit (NOTIFY) as of any delivery made due.
func (s *Store) PruneEvents(ctx context.Context, cursor uint64, r engine.Retention, max int) (engine.PruneResult, error) {
	max = orDefault(max)
	newest := r.SucceededBefore
	if r.DeadBefore.After(newest) {
		newest = r.DeadBefore
	}
	var res engine.PruneResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		res = engine.PruneResult{}
		// Every node runs a janitor; one prunes at a time, and the
		// others find the log read to its end for this pass.
		var mine bool
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1, hashtext($2))", int32(pruneLock), s.schema).Scan(&mine); err != nil || !mine {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT `+eventColsSQL+`, NULL::bytea FROM events
			WHERE seq > $1 ORDER BY seq LIMIT $2`, int64(cursor), max+1)
		if err != nil {
			return err
		}
		evs, err := pgx.CollectRows(rows, eventRow)
		if err != nil {
			return err
		}
		if len(evs) > max {
			res.Next = evs[max-1].Seq
			evs = evs[:max]
		}
		tenants, seqs := make([]string, 0, len(evs)), make([]int64, 0, len(evs))
		for i, ev := range evs {
			if !ev.Created.Before(newest) {
				evs, res.Next = evs[:i], 0 // every later event is newer still
				break
			}
			tenants, seqs = append(tenants, ev.TenantID), append(seqs, int64(ev.Seq))
		}
		res.Scanned = len(evs)
		if len(seqs) == 0 {
			return nil
		}
		// The events' lines' locks, then their deliveries' rows (the
		// deliveries of an event are fixed, and so are their lines).
		const ofEvents = "(tenant_id, event_seq) IN (SELECT * FROM unnest($1::text[], $2::bigint[]))"
		if _, err := tx.Exec(ctx, lockLinesSQL("SELECT endpoint_id, line FROM deliveries WHERE "+ofEvents), tenants, seqs); err != nil {
			return err
		}
		ds, err := collectDocs(ctx, tx, decodeDelivery, "SELECT doc FROM deliveries WHERE "+ofEvents+" FOR UPDATE", tenants, seqs)
		if err != nil {
			return err
		}
		of := make(map[string][]engine.Delivery, len(seqs))
		for _, d := range ds {
			of[d.EventID] = append(of[d.EventID], d)
		}
		var doomedTenants, tailTenants, tailKeys []string
		var doomed, tailSequences []int64
		for _, ev := range evs {
			if r.Prunable(ev, of[ev.ID]) {
				doomedTenants = append(doomedTenants, ev.TenantID)
				doomed = append(doomed, int64(ev.Seq))
				if ev.OrderingKey != "" {
					tailTenants, tailKeys, tailSequences = append(tailTenants, ev.TenantID), append(tailKeys, ev.OrderingKey), append(tailSequences, int64(ev.Sequence))
				}
			}
		}
		if len(doomed) == 0 {
			return nil
		}
		if len(tailKeys) > 0 { // a key whose last delivery goes has no previous one
			if _, err := tx.Exec(ctx, `DELETE FROM key_tails WHERE (tenant_id, ordering_key, sequence) IN
				(SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]))`, tailTenants, tailKeys, tailSequences); err != nil {
				return err
			}
		}
		if res.Deliveries, res.Promoted, err = s.deleteDeliveries(ctx, tx, ofEvents, doomedTenants, doomed); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, "DELETE FROM events WHERE seq = ANY($1)", doomed)
		res.Events = int(tag.RowsAffected())
		return err
	})
	if err != nil {
		return engine.PruneResult{}, err
	}
	return res, nil
}

// PurgeDeletedTenants deletes, in one transaction, at most max (0: 500)
// events of deleted tenant tenant ("": the first deleted tenant), each
// with its deliveries (whatever their state); once none is left, at most
// max of its idempotency keys; once none is left either, its tasks and
// the tenant's row, which frees its id. Call it until it returns a zero
// Tenant.
func (s *Store) PurgeDeletedTenants(ctx context.Context, tenant string, max int) (engine.PurgeResult, error) {
	max = orDefault(max)
	var res engine.PurgeResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		res = engine.PurgeResult{}
		// Not SKIP LOCKED: a PutTenant of the id (refused while this
		// purge lasts) locks the row for a moment, and a purge that
		// skipped it then found nothing and slept till the next pass.
		err := tx.QueryRow(ctx, "SELECT id FROM tenants WHERE deleted_at IS NOT NULL AND ($1 = '' OR id = $1) ORDER BY id LIMIT 1 FOR UPDATE", tenant).Scan(&res.Tenant)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		var events []int64
		rows, err := tx.Query(ctx, "SELECT seq FROM events WHERE tenant_id = $1 ORDER BY seq LIMIT $2", res.Tenant, max)
		if err != nil {
			return err
		}
		if events, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return err
		}
		if len(events) > 0 {
			// A line cut here goes on with the tenant's next delivery,
			// purged in its turn (see engine.Maintenance).
			if res.Deliveries, _, err = s.deleteDeliveries(ctx, tx, "tenant_id = $1 AND event_seq = ANY($2)", res.Tenant, events); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, "DELETE FROM events WHERE seq = ANY($1)", events)
			res.Events = int(tag.RowsAffected())
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM idempotency WHERE (tenant_id, key) IN
			(SELECT tenant_id, key FROM idempotency WHERE tenant_id = $1 LIMIT $2)`, res.Tenant, max)
		if err != nil {
			return err
		}
		if res.Keys = int(tag.RowsAffected()); res.Keys > 0 {
			return nil
		}
		// Deliveries whose event is gone cannot be, but the id is about to
		// be free: make sure.
		if _, _, err := s.deleteDeliveries(ctx, tx, "tenant_id = $1", res.Tenant); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM key_tails WHERE tenant_id = $1", res.Tenant); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM tasks WHERE tenant_id = $1", res.Tenant); err != nil {
			return err
		}
		res.Done = true
		_, err = tx.Exec(ctx, "DELETE FROM tenants WHERE id = $1", res.Tenant)
		return err
	})
	if err != nil {
		return engine.PurgeResult{}, err
	}
	return res, nil
}

// OrphanedPaused returns at most max (0: defaultPruneMax) of the deleted
// endpoints that still have paused deliveries, of tenants that are not
// deleted (see engine.Maintenance), in (tenant, endpoint) order. It reads
// the paused deliveries through their partial index (deliveries_paused),
// the paused alone.
func (s *Store) OrphanedPaused(ctx context.Context, max int) ([]engine.EndpointRef, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT d.tenant_id, d.endpoint_id FROM deliveries d
		JOIN tenants t ON t.id = d.tenant_id AND t.deleted_at IS NULL
		WHERE d.state = 'paused'
		AND NOT EXISTS (SELECT 1 FROM endpoints e WHERE e.tenant_id = d.tenant_id AND e.id = d.endpoint_id)
		ORDER BY 1, 2 LIMIT $1`, orDefault(max))
	if err != nil {
		return nil, storeError(err)
	}
	refs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (engine.EndpointRef, error) {
		var e engine.EndpointRef
		err := r.Scan(&e.TenantID, &e.EndpointID)
		return e, err
	})
	if err != nil {
		return nil, storeError(err)
	}
	return refs, nil
}
