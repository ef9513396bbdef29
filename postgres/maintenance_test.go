package postgres

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres/pgtest"
)

// TestPruneEvents_OneNodeAtATime: while one node's janitor prunes (holds
// the prune lock), another's pass finds nothing to do instead of
// waiting on the same rows; once it is done, the pass prunes.
func TestPruneEvents_OneNodeAtATime(t *testing.T) {
	clock := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ss := nodes(t, 1, clock)
	s := ss[0]
	ctx := t.Context()
	now := clock.now()
	if _, _, err := s.PutTenant(ctx, engine.Tenant{ID: "acme", Created: now, Updated: now}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutEventType(ctx, engine.EventType{Name: "order.created", Created: now, Updated: now}); err != nil {
		t.Fatal(err)
	}
	for range 3 { // no endpoints: prunable once older than the succeeded retention
		ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: now, APIVersion: "1", Body: []byte(`{}`)}
		if _, err := s.AppendEvent(ctx, engine.NewEvent{Event: ev}); err != nil {
			t.Fatal(err)
		}
	}
	r := engine.Retention{SucceededBefore: now.Add(time.Hour), DeadBefore: now.Add(time.Hour)}

	other, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(pruneLock)); err != nil {
		t.Fatal(err)
	}
	res, err := s.PruneEvents(ctx, 0, r, 0)
	if err != nil || res != (engine.PruneResult{}) {
		t.Errorf("while another node prunes: %+v, %v; want nothing done", res, err)
	}
	tx.Rollback(ctx)
	if res, err = s.PruneEvents(ctx, 0, r, 0); err != nil || res.Events != 3 {
		t.Errorf("after: %+v, %v; want 3 events pruned", res, err)
	}
}
