package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The schema, as numbered migrations. Each runs once, in its own
// transaction, in order; schema_version records the last one applied.
// Open runs those not applied yet under an advisory lock, so nodes that
// start at once migrate once. A migration, once released, never changes:
// a change is a new one at the end.
//
// Layout, in the words of the bbolt store's buckets:
//   - Every time is a bigint of Unix nanoseconds (UTC): the engine's times
//     have nanoseconds and come back equal, which timestamptz (microseconds)
//     would not give. A zero time is NULL.
//   - Every ID and name is text COLLATE "C", so that the order of IDs is
//     their byte order (engine.NewID's time order) whatever the database's
//     locale.
//   - A record the engine keeps whole (a tenant, an endpoint, a delivery
//     with its attempts and replays, an access token) is one JSON document
//     (doc, bytea: a receiver's response excerpt may hold a NUL, which
//     text and jsonb refuse); the columns beside it are what SQL selects
//     and orders by, written from the same value in the same statement.
//     Secrets (signing keys and custom header values, with the headers'
//     names) are a document of their own, sealed when a key is set. The
//     documents are the store's own types (documents.go), never the
//     engine's, whose JSON is the API's.
//   - The retry index is the partial index deliveries_due on
//     (due_at, id) WHERE state = 'pending', the dead letters
//     deliveries_dead, the paused deliveries deliveries_paused: a
//     delivery is in one of them if and only if its state says so, by
//     construction. next_attempt_at is the pending delivery's next
//     attempt's time; due_at when it may be claimed: the same, or later
//     while a node holds it (lease_until).
//   - tenants.endpoints_version changes at every write of the tenant's
//     endpoints (a trigger on endpoints sets it in the writer's
//     transaction), to a number from
//     one sequence, so no tenant, nor a tenant made again under the
//     same ID, ever has a version another had, so a node may keep the endpoints it read and make an
//     ingest's deliveries from them for as long as the version is the
//     same (appendCached). ingest_fallback raises WH001: the one-round-trip
//     ingest found it was not, and rolls back.
//   - nodes lists the nodes of the cluster, each with when it was last
//     seen (Scheduler): they share each endpoint's bounds among them.
//   - An event's deliveries are found by (tenant_id, event_seq), on
//     deliveries_log: an index on event_id as well cost a write at every
//     insert and every update of a delivery.
//   - An event's seq (its place in the log) is its transaction's ID
//     (xid8) × 65 536 plus its number within the transaction (seqSQL): the
//     log's order is the order transactions began writing, and every
//     event a transaction still running may add has a seq above that
//     transaction's ID × 65 536. The reconciliation feed reads only below
//     the oldest transaction still running, so an event committed late
//     never lands behind a cursor a reader has passed.
//   - key_tails holds, per tenant, ordering key and endpoint, the
//     Sequence of the key's last event delivered to the endpoint
//     (migration 3): the PreviousSequence of the key's next delivery
//     there. An ingest reads and writes it under the tenant's sequence
//     lock; the row goes when that event is pruned or its tenant purged.
//   - tenant_sequences holds each tenant's last event Sequence (migration
//     2; kept when the tenant is deleted), and events.sequence each
//     event's (0: stored before migration 2). An ingest takes its
//     tenant's sequence lock (an exclusive advisory lock) before its
//     first write, and bumps the row in the transaction that inserts the
//     event: a tenant's numbers have no gap (a rollback gives its number
//     back) and, since a transaction gets its ID at its first write,
//     after the lock, follow the log's order. The price: a tenant's
//     ingests commit one after another, and EnqueueTx holds the lock
//     until the application's transaction ends. In an application's
//     transaction that wrote before EnqueueTx, the event may be placed in
//     the log before an event of the tenant with a lower number.
//   - Ordered lines (engine/lines.go; migration 4): deliveries.line is the
//     delivery's Line (empty when not ordered), sequence its Sequence (kept
//     for an ordered delivery, 0 for others) and
//     blocking its Blocking(), all written with the document. A line's
//     waiting members are deliveries_waiting, in line order; its head is
//     the one row of the UNIQUE partial index deliveries_line_head, so the
//     database itself refuses a second head. Waiting rows have no due_at:
//     only the head is ever pending, so only one node attempts a line at a
//     time. Every transaction that changes a line's membership holds the
//     line's lock (lines.go).
//   - tasks holds the background tasks (migration 10; tasks.go), each a
//     document with its tenant, state and finish time beside it.
var migrations = []string{
	1: `
CREATE TABLE meta (
	key   text COLLATE "C" PRIMARY KEY,
	value text NOT NULL
);
CREATE SEQUENCE endpoints_versions;
CREATE TABLE tenants (
	id         text COLLATE "C" PRIMARY KEY,
	deleted_at bigint,
	endpoints_version bigint NOT NULL DEFAULT nextval('endpoints_versions'),
	doc        bytea NOT NULL
);
CREATE TABLE event_types (
	name text COLLATE "C" PRIMARY KEY,
	doc  bytea NOT NULL
);
CREATE TABLE endpoints (
	tenant_id text COLLATE "C" NOT NULL,
	id        text COLLATE "C" NOT NULL,
	doc       bytea NOT NULL,
	secrets   bytea NOT NULL,
	PRIMARY KEY (tenant_id, id)
);
CREATE FUNCTION endpoints_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	UPDATE tenants SET endpoints_version = nextval('endpoints_versions')
	WHERE id = CASE WHEN TG_OP = 'DELETE' THEN OLD.tenant_id ELSE NEW.tenant_id END;
	RETURN NULL;
END $$;
CREATE TRIGGER endpoints_changed AFTER INSERT OR UPDATE OR DELETE ON endpoints
	FOR EACH ROW EXECUTE FUNCTION endpoints_changed();
CREATE FUNCTION ingest_fallback(reason text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION USING ERRCODE = 'WH001', MESSAGE = reason;
END $$;
CREATE TABLE access_tokens (
	hash      bytea PRIMARY KEY,
	tenant_id text COLLATE "C" NOT NULL,
	id        text COLLATE "C" NOT NULL,
	expires   bigint NOT NULL,
	doc       bytea NOT NULL,
	UNIQUE (tenant_id, id)
);
CREATE INDEX access_tokens_expires ON access_tokens (expires);
CREATE TABLE events (
	seq         bigint PRIMARY KEY,
	id          text COLLATE "C" NOT NULL UNIQUE,
	tenant_id   text COLLATE "C" NOT NULL,
	type        text COLLATE "C" NOT NULL,
	created     bigint NOT NULL,
	api_version text NOT NULL,
	body        bytea NOT NULL
);
CREATE INDEX events_log ON events (tenant_id, seq);
CREATE TABLE deliveries (
	id          text COLLATE "C" PRIMARY KEY,
	tenant_id   text COLLATE "C" NOT NULL,
	event_id    text COLLATE "C" NOT NULL,
	event_seq   bigint NOT NULL,
	event_type  text COLLATE "C" NOT NULL,
	endpoint_id text COLLATE "C" NOT NULL,
	state       text NOT NULL,
	created     bigint NOT NULL,
	next_attempt_at bigint,
	due_at      bigint,
	dead_at     bigint,
	lease_token bigint,
	lease_until bigint,
	doc         bytea NOT NULL,
	CHECK ((state = 'pending') = (due_at IS NOT NULL)),
	CHECK ((state = 'pending') = (next_attempt_at IS NOT NULL)),
	CHECK ((state = 'dead') = (dead_at IS NOT NULL))
);
CREATE INDEX deliveries_due ON deliveries (due_at, id) WHERE state = 'pending';
CREATE INDEX deliveries_dead ON deliveries (tenant_id, dead_at, id) WHERE state = 'dead';
CREATE INDEX deliveries_paused ON deliveries (tenant_id, endpoint_id, id) WHERE state = 'paused';
CREATE INDEX deliveries_log ON deliveries (tenant_id, event_seq DESC, id DESC);
CREATE TABLE nodes (
	id   text COLLATE "C" PRIMARY KEY,
	seen bigint NOT NULL
);
CREATE TABLE idempotency (
	tenant_id    text COLLATE "C" NOT NULL,
	key          text COLLATE "C" NOT NULL,
	request_hash bytea NOT NULL,
	event_id     text COLLATE "C" NOT NULL,
	expires      bigint NOT NULL,
	PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_expires ON idempotency (expires);
`,
	2: `
CREATE TABLE tenant_sequences (
	tenant_id text COLLATE "C" PRIMARY KEY,
	last      bigint NOT NULL
);
ALTER TABLE events
	ADD COLUMN sequence bigint NOT NULL DEFAULT 0,
	ADD COLUMN ordering_key text NOT NULL DEFAULT '';
`,
	3: `
CREATE TABLE key_tails (
	tenant_id    text COLLATE "C" NOT NULL,
	ordering_key text COLLATE "C" NOT NULL,
	endpoint_id  text COLLATE "C" NOT NULL,
	sequence     bigint NOT NULL,
	PRIMARY KEY (tenant_id, ordering_key, endpoint_id)
);
`,
	4: `
ALTER TABLE deliveries
	ADD COLUMN line text COLLATE "C" NOT NULL DEFAULT '',
	ADD COLUMN sequence bigint NOT NULL DEFAULT 0,
	ADD COLUMN blocking boolean NOT NULL DEFAULT false;
CREATE INDEX deliveries_waiting ON deliveries (endpoint_id, line, sequence, id) WHERE state = 'waiting';
CREATE UNIQUE INDEX deliveries_line_head ON deliveries (endpoint_id, line)
	WHERE line <> '' AND (state IN ('pending', 'paused') OR blocking);
`,
	// 5: test events (engine.Service.SendTestEvent). A delivery's mark is
	// in its document.
	5: `
ALTER TABLE events ADD COLUMN test boolean NOT NULL DEFAULT false;
`,
	// 6: locks keyed by schema (locks.go). old_lock_keys: nodes of a
	// version before this one may run, whose lock keys the others take
	// too (migrate clears it at once on a schema it made from nothing);
	// nodes.lock_keys: 2 for a node that keys its locks by schema, 1 (the
	// default, which older nodes do not write) for one that does not.
	6: `
ALTER TABLE schema_version ADD COLUMN old_lock_keys boolean NOT NULL DEFAULT true;
ALTER TABLE nodes ADD COLUMN lock_keys smallint NOT NULL DEFAULT 1;
`,
	// 7: channels (engine.Event.Channels); NULL: none. A delivery's
	// copy is in its document.
	7: `
ALTER TABLE events ADD COLUMN channels text[];
`,
	// 8: deliver_at (engine.Event.DeliverAt) in Unix nanoseconds; NULL:
	// not scheduled. A delivery's copy is in its document; an event
	// scheduled under migration 7, before the column, reads its time from
	// its deliveries (deliverAtOf), so no row is rewritten here.
	8: `
ALTER TABLE events ADD COLUMN deliver_at bigint;
`,
	// 9: event types' versions (engine/schema.go): event_types.version
	// is a number from one sequence, new at every insert and update of
	// the row (whoever writes it: a trigger), so a node may keep the
	// entry it read, with its schema compiled, and make an ingest's
	// write conditional on the version being the same (appendCached).
	9: `
CREATE SEQUENCE event_types_versions;
ALTER TABLE event_types ADD COLUMN version bigint NOT NULL DEFAULT nextval('event_types_versions');
CREATE FUNCTION event_type_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	NEW.version := nextval('event_types_versions');
	RETURN NEW;
END $$;
CREATE TRIGGER event_type_changed BEFORE UPDATE ON event_types
	FOR EACH ROW EXECUTE FUNCTION event_type_changed();
`,
	// 10: background tasks (engine.Task; tasks.go). tenant_id '': the
	// operator's; finished NULL while the task runs. A task of a tenant
	// goes when the tenant is purged.
	10: `
CREATE TABLE tasks (
	id        text COLLATE "C" PRIMARY KEY,
	tenant_id text COLLATE "C" NOT NULL,
	state     text NOT NULL,
	finished  bigint,
	doc       bytea NOT NULL,
	CHECK ((state = 'running') = (finished IS NULL))
);
CREATE INDEX tasks_tenant ON tasks (tenant_id, id);
CREATE INDEX tasks_running ON tasks (id) WHERE state = 'running';
CREATE INDEX tasks_finished ON tasks (finished) WHERE state <> 'running';
`,
	// 11: the span context of an event's ingest (engine.Event.IngestTrace),
	// a W3C traceparent its attempts' spans link to; NULL: not traced.
	11: `
ALTER TABLE events ADD COLUMN ingest_trace text;
`,
}

// lockKeysMigration is the migration from which locks are keyed by
// schema (locks.go).
const lockKeysMigration = 6

// migrationLock is the advisory lock key Open holds while it migrates:
// "webhookd" in ASCII, so it does not collide with an application's.
const migrationLock = 0x7765626b686f6f64

// migrate brings the schema of conn's search path up to the last
// migration, holding the advisory lock, and returns the version it found.
func migrate(ctx context.Context, conn *pgx.Conn, schema string) (int, error) {
	// Another node may be migrating, and a migration's DDL waits for
	// every transaction on its table: no lock_timeout here.
	if _, err := conn.Exec(ctx, "SET lock_timeout = 0"); err != nil {
		return 0, fmt.Errorf("postgres: lock_timeout: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "RESET lock_timeout")
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(migrationLock)); err != nil {
		return 0, fmt.Errorf("postgres: take the migration lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(migrationLock))
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return 0, fmt.Errorf("postgres: create schema %s: %w", schema, err)
	}
	if _, err := conn.Exec(ctx, "SELECT set_config('search_path', $1, false)", pgx.Identifier{schema}.Sanitize()); err != nil {
		return 0, fmt.Errorf("postgres: search_path: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS schema_version (version int NOT NULL)"); err != nil {
		return 0, fmt.Errorf("postgres: schema_version: %w", err)
	}
	var found int
	err := conn.QueryRow(ctx, "SELECT version FROM schema_version").Scan(&found)
	switch {
	case err == pgx.ErrNoRows:
		if _, err := conn.Exec(ctx, "INSERT INTO schema_version VALUES (0)"); err != nil {
			return 0, fmt.Errorf("postgres: schema_version: %w", err)
		}
	case err != nil:
		return 0, fmt.Errorf("postgres: read schema_version: %w", err)
	}
	last := len(migrations) - 1
	if found > last {
		return found, fmt.Errorf("postgres: the database's schema is version %d, newer than this webhookd knows (%d): run a newer webhookd", found, last)
	}
	for v := found + 1; v <= last; v++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "UPDATE schema_version SET version = $1", v)
			return err
		})
		if err != nil {
			return found, fmt.Errorf("postgres: migration %d: %w", v, err)
		}
		if v == lockKeysMigration && found == 0 {
			// No node of an older version ever opened this schema: one
			// that did would have left it at its own version.
			if _, err := conn.Exec(ctx, "UPDATE schema_version SET old_lock_keys = false"); err != nil {
				return found, fmt.Errorf("postgres: migration %d: %w", v, err)
			}
		}
	}
	return found, nil
}
