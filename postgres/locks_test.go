package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres/pgtest"
)

// acmeOrderedAt makes tenant acme, the type order.created and an
// endpoint of acme's with ID epID, ordered by key, through s.
func acmeOrderedAt(t *testing.T, s *Store, now time.Time, epID string) {
	t.Helper()
	acme(t, s, now, 0)
	ep := engine.Endpoint{ID: epID, TenantID: "acme", URL: "https://example.com/hook", EventTypes: []string{"order.created"},
		Created: now, Updated: now, Secrets: []engine.Secret{{Key: engine.NewSecret()}}, Ordering: engine.OrderingKey}
	if err := s.CreateEndpoint(t.Context(), ep, 0); err != nil {
		t.Fatal(err)
	}
}

// holdAcme begins a transaction on a session of its own that enqueues an
// event of acme with ordering key key into schema, as an application's
// transaction would, and leaves it open until t ends: it holds acme's
// tenant, sequence and line locks of that schema.
func holdAcme(t *testing.T, schema, key string) {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	in := engine.IngestInput{Type: "order.created", Data: []byte(`{}`), OrderingKey: key}
	if _, err := EnqueueTx(ctx, tx, "acme", in, EnqueueOptions{Schema: schema}); err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
}

// TestLocks_TheSchemas: two webhookd deployments in one database, each
// on its schema, with a tenant of the same ID and an endpoint of the
// same ID (as two copies of one migrated database would have). While a
// transaction on one holds everything an ingest of its acme locks, the
// other ingests its own acme's events, unordered and on the same line,
// and deletes its acme, without waiting for it.
func TestLocks_TheSchemas(t *testing.T) {
	now := time.Now()
	a, b := openTest(t, Options{}), openTest(t, Options{})
	epID := engine.NewID("ep")
	if oldLockKeys(t, a) {
		t.Fatal("a schema made from nothing takes the old lock keys")
	}
	acmeOrderedAt(t, a, now, epID)
	acmeOrderedAt(t, b, now, epID)
	holdAcme(t, a.Schema(), "order-1")

	ctx := t.Context()
	for _, key := range []string{"", "order-1"} {
		ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: now, APIVersion: "1", Body: []byte(`{}`), OrderingKey: key}
		if _, err := b.AppendEvent(ctx, engine.NewEvent{Event: ev}); err != nil {
			t.Errorf("ingest into the other schema (ordering key %q) while schema %s's acme is locked: %v", key, a.Schema(), err)
		}
	}
	if err := b.DeleteTenant(ctx, "acme", now); err != nil {
		t.Errorf("delete the other schema's acme while schema %s's acme is locked: %v", a.Schema(), err)
	}
}

// oldNode is a node of a version before schema 6 on a schema: it keys
// its locks by the ID alone (hold's statement is its own).
type oldNode struct {
	t    *testing.T
	conn *pgx.Conn
}

// openOldSchema makes a schema at version 5 on which an old node runs:
// migrations 1 to 5, and the node in the nodes table as its heartbeat
// wrote it (no lock_keys). It returns the schema and the node.
func openOldSchema(t *testing.T, now time.Time) (string, *oldNode) {
	t.Helper()
	ctx := t.Context()
	schema := pgtest.Schema(t)
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, sql := range append([]string{
			"CREATE SCHEMA " + pgx.Identifier{schema}.Sanitize(),
			"SET LOCAL search_path = " + pgx.Identifier{schema}.Sanitize(),
			"CREATE TABLE schema_version (version int NOT NULL)",
			"INSERT INTO schema_version VALUES (5)",
		}, migrations[1:6]...) {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, "INSERT INTO nodes (id, seen) VALUES ('old', $1)", now.UnixNano())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return schema, &oldNode{t: t, conn: conn}
}

// hold begins a transaction of the old node's that takes the lock of
// kind on hashtext(id) as the old node did, and returns its rollback.
func (o *oldNode) hold(kind int32, id string) func() {
	o.t.Helper()
	tx, err := o.conn.Begin(o.t.Context())
	if err != nil {
		o.t.Fatal(err)
	}
	if _, err := tx.Exec(o.t.Context(), "SELECT pg_advisory_xact_lock($1, hashtext($2))", kind, id); err != nil {
		o.t.Fatal(err)
	}
	return func() { tx.Rollback(context.Background()) }
}

// oldLockKeys reports s's schema_version.old_lock_keys.
func oldLockKeys(t *testing.T, s *Store) bool {
	t.Helper()
	var old bool
	if err := s.pool.QueryRow(t.Context(), "SELECT old_lock_keys FROM schema_version").Scan(&old); err != nil {
		t.Fatal(err)
	}
	return old
}

// TestLocks_OldNodesDuringAnUpgrade: while a node of a version that keys
// its locks by the ID alone may run on the schema (a rolling upgrade),
// a new node takes those keys too, so an old node's tenant, sequence or
// line lock holds the new node's ingest of that tenant or line; the
// first node's heartbeats clear that once no old node has been in the
// nodes table for a third of a lease, and from then on nothing keyed by
// the ID alone holds an ingest.
func TestLocks_OldNodesDuringAnUpgrade(t *testing.T) {
	clock := &manualClock{t: time.Now()}
	schema, old := openOldSchema(t, clock.now())
	ctx := t.Context()
	s, err := Open(ctx, pgtest.URL(t), Options{Schema: schema, MaxConns: 4, Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if !oldLockKeys(t, s) {
		t.Fatal("migration 6 of a schema older nodes ran on left old_lock_keys unset")
	}
	// The old keys are the database's: a tenant ID of this test's own
	// leaves other tests' tenants alone.
	tenant := engine.NewID("upgrade")
	now := clock.now()
	if _, _, err := s.PutTenant(ctx, engine.Tenant{ID: tenant, Created: now, Updated: now}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutEventType(ctx, engine.EventType{Name: "order.created", Created: now, Updated: now}); err != nil {
		t.Fatal(err)
	}
	ep := engine.Endpoint{ID: engine.NewID("ep"), TenantID: tenant, URL: "https://example.com/hook", EventTypes: []string{"order.created"},
		Created: now, Updated: now, Secrets: []engine.Secret{{Key: engine.NewSecret()}}, Ordering: engine.OrderingKey}
	if err := s.CreateEndpoint(ctx, ep, 0); err != nil {
		t.Fatal(err)
	}
	ingest := func() error {
		ev := engine.Event{ID: engine.NewID("evt"), TenantID: tenant, Type: "order.created", Created: now, APIVersion: "1", Body: []byte(`{}`), OrderingKey: "k"}
		_, err := s.AppendEvent(ctx, engine.NewEvent{Event: ev})
		return err
	}

	for _, held := range []struct {
		name string
		kind int32
		id   string
	}{
		{"its deletion of the tenant", tenantLock, tenant},
		{"an ingest of the tenant", sequenceLock, tenant},
		{"a write of the line", lineLock, ep.ID + "\x01" + engine.LineOf(engine.Event{OrderingKey: "k"}, ep)},
	} {
		release := old.hold(held.kind, held.id)
		if err := ingest(); engine.ErrorCode(err) != engine.CodeUnavailable {
			t.Errorf("an ingest while an old node holds the lock of %s: %v, want %s (the lock waited for)", held.name, err, engine.CodeUnavailable)
		}
		release()
	}

	c := s.Scheduler(SchedulerOptions{})
	heartbeat := func() {
		t.Helper()
		if err := c.heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	heartbeat()
	clock.add(s.lease)
	heartbeat()
	if !oldLockKeys(t, s) {
		t.Fatal("old_lock_keys cleared while an old node is in the nodes table")
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM nodes WHERE id = 'old'"); err != nil { // it stopped
		t.Fatal(err)
	}
	heartbeat()
	if !oldLockKeys(t, s) {
		t.Fatal("old_lock_keys cleared at the first heartbeat that found no old node")
	}
	clock.add(s.lease / 3)
	heartbeat()
	if oldLockKeys(t, s) {
		t.Fatal("old_lock_keys still set a third of a lease after the last old node left")
	}
	release := old.hold(sequenceLock, tenant)
	defer release()
	if err := ingest(); err != nil {
		t.Errorf("an ingest after the switch, while a lock keyed by the tenant's ID alone is held: %v", err)
	}
}
