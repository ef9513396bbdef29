package postgres

import (
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres/pgtest"
)

// TestPruneEvents_OneNodeAtATime: while one node's janitor prunes (holds
// the prune lock), another's pass finds nothing to do instead of
// waiting on the same rows; once it is done, the pass prunes, whatever
// a cluster on another schema of the database does meanwhile.
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
	// pruning takes the prune lock of schema as a node of it does, and
	// returns what lets it go.
	pruning := func(schema string) func() {
		t.Helper()
		tx, err := other.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", int32(pruneLock), schema); err != nil {
			t.Fatal(err)
		}
		return func() { tx.Rollback(ctx) }
	}
	done := pruning(s.schema)
	res, err := s.PruneEvents(ctx, 0, r, 0)
	if err != nil || !reflect.DeepEqual(res, engine.PruneResult{}) {
		t.Errorf("while another node prunes: %+v, %v; want nothing done", res, err)
	}
	done()
	// A cluster on another schema of the same database prunes its own.
	defer pruning(s.schema + "_other")()
	if res, err = s.PruneEvents(ctx, 0, r, 0); err != nil || res.Events != 3 {
		t.Errorf("after: %+v, %v; want 3 events pruned", res, err)
	}
}

// BenchmarkPruneEvents is retention's cost per event: b.N events past
// retention, each with one succeeded delivery, pruned in the janitor's
// batches (500 events per transaction). It is what decides whether the
// events and deliveries tables need partitions by time (docs/cluster.md,
// Retention).
func BenchmarkPruneEvents(b *testing.B) {
	clock := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := nodes(b, 1, clock)[0]
	ctx := b.Context()
	old := time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.pool.Exec(ctx, `INSERT INTO events (seq, id, tenant_id, type, created, api_version, body)
		SELECT i, 'evt_' || i, 'acme', 'order.created', $2, '1', convert_to(repeat('x', 1024), 'UTF8') FROM generate_series(1, $1) AS i`,
		b.N, old.UnixNano()); err != nil {
		b.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO deliveries (id, tenant_id, event_id, event_seq, event_type, endpoint_id, state, created, doc)
		SELECT 'dlv_' || i, 'acme', 'evt_' || i, i, 'order.created', 'ep_1', 'succeeded', $2,
			convert_to('{"id":"dlv_' || i || '","tenant":"acme","event_id":"evt_' || i || '","event_type":"order.created","endpoint_id":"ep_1","state":"succeeded","cycle":1,"created":"2029-01-01T00:00:00Z","updated":"2029-01-01T00:00:00Z","attempts":[],"replays":[]}', 'UTF8')
		FROM generate_series(1, $1) AS i`, b.N, old.UnixNano()); err != nil {
		b.Fatal(err)
	}
	r := engine.Retention{SucceededBefore: clock.now(), DeadBefore: clock.now()}
	b.ResetTimer()
	pruned, cursor := 0, uint64(0)
	for {
		res, err := s.PruneEvents(ctx, cursor, r, 500)
		if err != nil {
			b.Fatal(err)
		}
		pruned += res.Events
		if cursor = res.Next; cursor == 0 {
			break
		}
	}
	if pruned != b.N {
		b.Fatalf("pruned %d of %d events", pruned, b.N)
	}
}

// TestPurgeDeletedTenants_WaitsForALockedRow: a PutTenant of a deleted
// tenant's id (refused, tenant_deleting) holds its row for a moment; a
// purge at that moment waits for it instead of reporting nothing left.
func TestPurgeDeletedTenants_WaitsForALockedRow(t *testing.T) {
	clock := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := nodes(t, 1, clock)[0]
	ctx := t.Context()
	if _, _, err := s.PutTenant(ctx, engine.Tenant{ID: "gone", Created: clock.now(), Updated: clock.now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTenant(ctx, "gone", clock.now()); err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT set_config('search_path', $1, true)", s.Schema()); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM tenants WHERE id = 'gone' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan engine.PurgeResult, 1)
	go func() {
		res, err := s.PurgeDeletedTenants(ctx, "", 0)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	select {
	case res := <-done:
		t.Fatalf("the purge answered %+v while the row was locked, want it to wait", res)
	case <-time.After(200 * time.Millisecond):
	}
	tx.Rollback(ctx)
	if res := <-done; res.Tenant != "gone" || !res.Done {
		t.Errorf("the purge after the lock: %+v, want gone purged", res)
	}
}
