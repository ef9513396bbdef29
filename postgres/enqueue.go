package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/jsonschema"
)

// EnqueueOptions configure EnqueueTx. The zero value of each field means
// the default named on it; they should be the webhookd nodes' settings.
type EnqueueOptions struct {
	// Schema is the schema of webhookd's tables: the nodes' [storage]
	// schema (Options.Schema); "": DefaultSchema.
	Schema string
	// IngestOptions are the nodes' [ingest] api_version and
	// idempotency_window (which [retention] must outlast) and the clock
	// of the event's created time. Schemas nil: the schemas are
	// compiled as the nodes compile them (package jsonschema), once per
	// process.
	engine.IngestOptions
}

// enqueueSchemas is EnqueueTx's compiled schemas when its options give
// none: one per process, as a node's.
var enqueueSchemas = engine.NewSchemas(jsonschema.Compiler{})

// EnqueueTx ingests an event of tenant inside tx, a transaction of the
// caller's on the database of the webhookd nodes: the event and its
// deliveries to the tenant's endpoints subscribed to its type are written
// into webhookd's schema, as POST /v1/tenants/{tenant}/events writes them,
// and exist when tx commits and never if it rolls back. Committed means
// acknowledged: the nodes deliver it (at least once), as any ingested
// event. At commit the nodes are woken (NOTIFY), so its first attempts
// do not wait for their poll.
//
// The input is validated and hashed as the HTTP route does
// (engine.PrepareEvent: in.Data must be I-JSON, each name once at any
// depth, no lone surrogate escape, valid UTF-8, no noncharacter, no
// number beyond a double, all of which the engine checks itself, as no
// request decoder stands in front), and the tenant and type are checked
// as there, and so is what the type's status and schema say of the
// event: the errors are the route's *engine.Error with the same codes
// (CodeTenantNotFound, CodeUnknownEventType, CodeInvalidField,
// CodeInvalidJSON, CodeIdempotencyConflict, CodeSchemaMismatch,
// CodeEventTypeArchived). An event of a deprecated type is taken; the
// nodes' count of them (webhookd_deprecated_events_total) counts their
// own ingests only. A live Idempotency-Key
// (in.IdempotencyKey) with the same request, whichever path used it
// first, gives the first event's result with Duplicate true and writes
// nothing. Per-node limits of the HTTP route ([ingest] max_pending,
// [limits] pending_per_tenant and ingest_rate_per_tenant) do not apply:
// they are counts of one node's process, and the caller's transaction
// rate is the caller's to bound.
//
// EnqueueTx works in a savepoint of tx: on any error it rolls back its
// own writes only, and tx stays usable (the caller may commit its own
// writes, or roll back). It leaves tx's session as it found it: the
// search_path is the webhookd schema for the duration of the call only.
// Until tx ends it holds, in the schema (locks.go), the tenant's lock,
// shared (a deletion of the tenant waits, and so does the enabling of
// one of its endpoints, which must see the paused deliveries tx makes),
// the tenant's sequence (every other ingest of the
// tenant waits: see the schema's comment on tenant_sequences), the locks
// of the lines of its ordered deliveries (lines.go: a record that ends
// the head of one of them waits) and, with an Idempotency-Key, the key
// (another ingest with the same key waits for tx's end); and a
// transaction open
// long holds back the reconciliation feed (ListEvents) for events after
// it: commit promptly.
//
// The schema must exist, migrated by a webhookd node of the same
// version (Open); otherwise EnqueueTx returns an error that says so.
func EnqueueTx(ctx context.Context, tx pgx.Tx, tenant string, in engine.IngestInput, opts EnqueueOptions) (engine.IngestResult, error) {
	if err := engine.ValidateTenantID(tenant); err != nil {
		return engine.IngestResult{}, engine.TenantNotFound()
	}
	if opts.Schemas == nil {
		opts.Schemas = enqueueSchemas
	}
	ne, err := engine.PrepareEvent(tenant, in, opts.IngestOptions)
	if err != nil {
		return engine.IngestResult{}, err
	}
	if opts.Schema == "" {
		opts.Schema = DefaultSchema
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return engine.IngestResult{}, storeError(err)
	}
	res, err := enqueue(ctx, sp, ne, opts.Schema)
	if err != nil {
		// The rollback also gives back the search_path: set_config's
		// local value is undone with the savepoint.
		sp.Rollback(context.WithoutCancel(ctx))
		if errors.Is(err, errDuplicate) {
			return res, nil
		}
		return engine.IngestResult{}, storeError(err)
	}
	if err := sp.Commit(ctx); err != nil {
		return engine.IngestResult{}, storeError(err)
	}
	return res, nil
}

// enqueue is EnqueueTx in the savepoint sp: it puts the search_path on
// schema, appends ne and, on success, wakes the nodes at commit and
// gives the search_path back. An error leaves the search_path to sp's
// rollback.
func enqueue(ctx context.Context, sp pgx.Tx, ne engine.NewEvent, schema string) (engine.IngestResult, error) {
	// The materialized CTE is read before the select list is evaluated:
	// old is the search_path before set_config.
	var old string
	if err := sp.QueryRow(ctx, `WITH o AS MATERIALIZED (SELECT current_setting('search_path') AS old)
		SELECT old, set_config('search_path', $1, true) FROM o`, pgx.Identifier{schema}.Sanitize()).Scan(&old, nil); err != nil {
		return engine.IngestResult{}, err
	}
	if err := checkSchema(ctx, sp, schema); err != nil {
		return engine.IngestResult{}, err
	}
	res, _, err := appendEvent(ctx, sp, ne, false, nil)
	if err != nil {
		return res, err
	}
	wake := ""
	for _, d := range res.Deliveries {
		if d.State == engine.StatePending {
			wake = dueChannel(schema)
			break
		}
	}
	if _, err := sp.Exec(ctx, `SELECT CASE WHEN $1 <> '' THEN pg_notify($1, '') END, set_config('search_path', $2, true)`, wake, old); err != nil {
		return engine.IngestResult{}, err
	}
	return res, nil
}

// checkSchema returns nil when the search_path's schema holds webhookd's
// tables at the version this package writes.
func checkSchema(ctx context.Context, q querier, schema string) error {
	var version int
	err := q.QueryRow(ctx, "SELECT version FROM schema_version").Scan(&version)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "42P01": // undefined_table
		return fmt.Errorf("enqueue: schema %q has no webhookd tables: start a webhookd node on this database first (it creates them), or set EnqueueOptions.Schema to the nodes' [storage] schema", schema)
	case errors.Is(err, pgx.ErrNoRows):
		version = 0
	case err != nil:
		return err
	}
	if last := len(migrations) - 1; version != last {
		return fmt.Errorf("enqueue: the webhookd tables in schema %q are at version %d, this package writes version %d: run the same webhookd version on the nodes and in the application", schema, version, last)
	}
	return nil
}

// dueChannel is the NOTIFY channel of schema's schedulers (Store.channel).
func dueChannel(schema string) string { return "webhookd_due:" + schema }
