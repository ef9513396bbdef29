package postgres

import (
	"context"

	"github.com/webhookd/webhookd/engine"
)

// heldSQL is the predicate of the rows of held deliveries (engine.Held):
// waiting, paused, or dead and blocking. Each arm is the predicate of a
// partial index (deliveries_waiting, deliveries_paused,
// deliveries_line_head), so a count of them reads those indexes, not the
// table's every row.
const heldSQL = "(state = 'waiting' OR state = 'paused' OR (line <> '' AND blocking))"

// heldCountsSQL is the counts of a group of held rows, in Held's order.
const heldCountsSQL = "count(*) FILTER (WHERE state = 'waiting'), count(*) FILTER (WHERE state = 'paused'), count(*) FILTER (WHERE line <> '' AND blocking)"

// Held counts the held deliveries of tenant and of every tenant, in one
// statement over the partial indexes of their states: exact, as of the
// statement. An ingest does not ask it: the Scheduler, a HeldCounter,
// answers from its last count (see backlog.go).
func (s *Store) Held(ctx context.Context, tenant string) (ofTenant, all engine.Held, err error) {
	rows, err := s.pool.Query(ctx, "SELECT tenant_id = $1, "+heldCountsSQL+" FROM deliveries WHERE "+heldSQL+" GROUP BY 1", tenant)
	if err != nil {
		return engine.Held{}, engine.Held{}, storeError(err)
	}
	defer rows.Close()
	for rows.Next() {
		var mine bool
		var h engine.Held
		if err := rows.Scan(&mine, &h.Waiting, &h.Paused, &h.Blocking); err != nil {
			return engine.Held{}, engine.Held{}, storeError(err)
		}
		if mine {
			ofTenant = h
		}
		all = all.Plus(h)
	}
	if err := rows.Err(); err != nil {
		return engine.Held{}, engine.Held{}, storeError(err)
	}
	return ofTenant, all, nil
}

// Held returns the held deliveries of tenant and of the whole cluster, as
// of the last count (at most a few seconds old), with those this node's
// ingests made since, like Pending.
func (c *Scheduler) Held(tenant string) (ofTenant, all engine.Held) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[tenant].Plus(c.notedBy[tenant].Held), c.heldAll.Plus(c.notedAll.Held)
}
