package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhookd/webhookd/engine"
)

// Bulk import: how a single node's bbolt file (storage.Export) comes into
// PostgreSQL (webhookd migrate).
//
// An import writes only into an empty schema: it never merges into data
// a webhookd wrote. It writes in batches with COPY, each batch its own
// transaction, so memory is bounded by a batch whatever the size of the
// source; meta's "migration" row says where it is: "running" from the
// first write on, "complete" as the last step, once every table holds as
// many rows as the source has records. So a crash midway leaves a schema
// marked running, and a new import into it empties the schema's tables
// and starts over; a schema marked complete, or with data and no mark,
// is refused. IMPORTANT: no webhookd node may run on the schema before
// the import is complete: what it wrote would be emptied by a rerun.
//
// Events keep their IDs, bodies byte for byte and creation times, and
// their log order; their seqs are new: each batch is one transaction and
// its events get that transaction's ID × 65 536 plus their place in it,
// as AppendEvent gives them (see the schema's comment on events.seq), so
// they are in log order, below every seq a later ingest gets, and the
// reconciliation feed sees them once the batch commits. A feed cursor
// from the bbolt node is a bbolt seq and means nothing here: a reader
// starts again from the beginning of the feed (after="" or since=), and
// so gets the events it had read again (at-least-once).
//
// A pending delivery is due at its next attempt's time (due_at =
// next_attempt_at), with no lease: the first node's Scheduler to claim
// claims it. Ordered deliveries keep their lines as the source has them
// (line, sequence, blocking; a waiting one behind its line's head): the
// import takes no line lock, as no node runs on the schema before it is
// complete, and deliveries_line_head refuses a line with two heads. Secrets come in plain and are sealed with the store's key,
// when it has one, as every endpoint it writes.

// Import is a bulk import into an empty schema; make one with
// Store.Import, hand it the records (it is a storage.ExportSink), then
// Finish it. Its methods are not safe for concurrent use, and after one
// fails the import is over: Close it.
type Import struct {
	s      *Store
	ctx    context.Context
	conn   *pgxpool.Conn // holds the import's advisory lock
	source string

	tenants, sequences, types, endpoints, tokens, tasks, idempotency copyBatch
	events                                                           []pendingEvent
	eventBytes                                                       int
	wrote                                                            Counts
	err                                                              error

	// KeepRefused, when set, is told of each event that ingest would
	// refuse (engine.CheckEvent's error), which is then imported as it
	// is stored instead of failing the import: an event an older
	// webhookd acknowledged is never dropped. Nil: such an event fails
	// the import.
	KeepRefused func(ev engine.Event, err error)
}

// Counts are the rows of each kind in the schema (Tenants: live ones;
// DeletedTenants: deleted and not purged yet).
type Counts struct {
	Tenants, DeletedTenants, EventTypes, Endpoints, AccessTokens int
	Events, Deliveries, IdempotencyKeys                          int
	Tasks                                                        int
}

// importLock is the advisory lock (with the schema's hashtext) an import
// holds for its whole run, so that two imports into one schema do not
// interleave: "whimport" in ASCII, folded to 32 bits.
const importLock = 0x77686970

// Batch bounds: a batch is sent when it has this many rows, or events of
// this many bytes (bodies and deliveries), whichever comes first. An event
// batch is one transaction and must stay below 65 536 events (seq).
const (
	importBatchRows   = 5000
	importBatchEvents = 2000
	importBatchBytes  = 8 << 20
)

// ErrCountMismatch is returned (wrapped) by Import.Finish when the
// schema's counts are not the source's.
var ErrCountMismatch = errors.New("the schema's row counts are not the source's")

// metaMigration is meta's key of an import's state.
const metaMigration = "migration"

// importTables are the tables an import fills (and a rerun empties).
var importTables = []string{"tenants", "tenant_sequences", "event_types", "endpoints", "access_tokens", "events", "deliveries", "idempotency", "key_tails", "tasks"}

// migrationMark is the value of meta's "migration" row.
type migrationMark struct {
	State   string    `json:"state"` // "running", "complete"
	Source  string    `json:"source"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
}

// Import starts a bulk import of source (a description, such as
// "bbolt:/var/lib/webhookd/webhookd.db", kept in meta) into the store's
// schema, which must be empty or hold an import that did not complete
// (then it is emptied: see the comment above). It fails while another
// import into the schema runs. ctx bounds the whole import, every method
// of Import included. Restarted reports that an incomplete import was
// found and emptied.
func (s *Store) Import(ctx context.Context, source string) (im *Import, restarted bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, storeError(err)
	}
	var locked bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, hashtext($2))", int32(importLock), s.schema).Scan(&locked); err != nil {
		conn.Release()
		return nil, false, storeError(err)
	}
	if !locked {
		conn.Release()
		return nil, false, fmt.Errorf("postgres: import into schema %s: another import into it is running", s.schema)
	}
	im = &Import{s: s, ctx: ctx, conn: conn, source: source}
	if restarted, err = im.begin(); err != nil {
		im.Close()
		return nil, false, err
	}
	im.tenants = copyBatch{table: "tenants", cols: []string{"id", "deleted_at", "doc"}}
	im.sequences = copyBatch{table: "tenant_sequences", cols: []string{"tenant_id", "last"}}
	im.types = copyBatch{table: "event_types", cols: []string{"name", "doc"}}
	im.endpoints = copyBatch{table: "endpoints", cols: []string{"tenant_id", "id", "doc", "secrets"}}
	im.tokens = copyBatch{table: "access_tokens", cols: []string{"hash", "tenant_id", "id", "expires", "doc"}}
	im.tasks = copyBatch{table: "tasks", cols: []string{"id", "tenant_id", "state", "finished", "doc"}}
	im.idempotency = copyBatch{table: "idempotency", cols: []string{"tenant_id", "key", "request_hash", "event_id", "expires"}}
	return im, restarted, nil
}

// begin checks the schema is one an import may write to, empties what an
// interrupted import left, and marks the import running.
func (im *Import) begin() (restarted bool, err error) {
	ctx := im.ctx
	err = pgx.BeginFunc(ctx, im.conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "LOCK TABLE meta IN EXCLUSIVE MODE"); err != nil {
			return err
		}
		var raw string
		err := tx.QueryRow(ctx, "SELECT value FROM meta WHERE key = $1", metaMigration).Scan(&raw)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var mark migrationMark
		if raw != "" {
			if err := json.Unmarshal([]byte(raw), &mark); err != nil {
				return fmt.Errorf("meta %s: %w", metaMigration, err)
			}
		}
		switch mark.State {
		case "complete":
			return fmt.Errorf("schema %s holds a complete migration (from %s, at %s): an import never merges; name an empty schema", im.s.schema, mark.Source, mark.Ended.Format(time.RFC3339))
		case "running":
			restarted = true
			if _, err := tx.Exec(ctx, "TRUNCATE "+strings.Join(importTables, ", ")); err != nil {
				return err
			}
		case "":
			var found []string
			for _, t := range importTables {
				var has bool
				if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+t+")").Scan(&has); err != nil {
					return err
				}
				if has {
					found = append(found, t)
				}
			}
			if len(found) > 0 {
				return fmt.Errorf("schema %s is not empty (%s have rows): an import never merges; name an empty schema", im.s.schema, strings.Join(found, ", "))
			}
		default:
			return fmt.Errorf("meta %s: unknown state %q", metaMigration, mark.State)
		}
		doc, err := json.Marshal(migrationMark{State: "running", Source: im.source, Started: time.Now().UTC()})
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO meta (key, value) VALUES ($1, $2)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, metaMigration, string(doc))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("postgres: import into schema %s: %w", im.s.schema, storeError(err))
	}
	return restarted, nil
}

// Close ends the import: it releases its lock and connection. An import
// not finished stays marked running (the next one starts over). Close is
// safe to call more than once.
func (im *Import) Close() {
	if im.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(im.ctx), 5*time.Second)
	defer cancel()
	if _, err := im.conn.Exec(ctx, "SELECT pg_advisory_unlock($1, hashtext($2))", int32(importLock), im.s.schema); err != nil {
		im.conn.Conn().Close(ctx) // the lock goes with the session
	}
	im.conn.Release()
	im.conn = nil
}

// copyBatch is rows waiting for one COPY into table.
type copyBatch struct {
	table string
	cols  []string
	rows  [][]any
	bytes int
}

// add queues a row of n bytes, sending the batch when it is full.
func (im *Import) add(b *copyBatch, n int, row ...any) error {
	if im.err != nil {
		return im.err
	}
	b.rows = append(b.rows, row)
	b.bytes += n
	if len(b.rows) >= importBatchRows || b.bytes >= importBatchBytes {
		return im.flush(b)
	}
	return nil
}

// flush sends b's rows in one COPY (one transaction).
func (im *Import) flush(b *copyBatch) error {
	if im.err != nil || len(b.rows) == 0 {
		return im.err
	}
	if _, err := im.conn.CopyFrom(im.ctx, pgx.Identifier{b.table}, b.cols, pgx.CopyFromRows(b.rows)); err != nil {
		im.err = fmt.Errorf("postgres: import %s: %w", b.table, storeError(err))
		return im.err
	}
	b.rows, b.bytes = b.rows[:0], 0
	clear(b.rows[:cap(b.rows)])
	return nil
}

// Tenant imports a live tenant.
func (im *Import) Tenant(t engine.Tenant) error {
	if !validTenantID(t.ID) {
		return im.fail(fmt.Errorf("postgres: import tenant %q: tenant id must not be empty or contain a NUL byte", t.ID))
	}
	if t.Environment == "" {
		t.Environment = engine.EnvironmentLive
	}
	t.Created, t.Updated = utc(t.Created), utc(t.Updated)
	doc, err := encodeTenant(t)
	if err != nil {
		return im.fail(err)
	}
	im.wrote.Tenants++
	return im.add(&im.tenants, len(doc), t.ID, nil, doc)
}

// DeletedTenant imports a tenant deleted at at whose data is still being
// purged: PurgeDeletedTenants goes on with it.
func (im *Import) DeletedTenant(id string, at time.Time) error {
	if !validTenantID(id) {
		return im.fail(fmt.Errorf("postgres: import deleted tenant %q: tenant id must not be empty or contain a NUL byte", id))
	}
	doc, err := encodeTenant(engine.Tenant{ID: id, Environment: engine.EnvironmentLive})
	if err != nil {
		return im.fail(err)
	}
	im.wrote.DeletedTenants++
	return im.add(&im.tenants, len(doc), id, at.UnixNano(), doc)
}

// Sequence imports the last event Sequence tenant gave.
func (im *Import) Sequence(tenant string, last uint64) error {
	if !validTenantID(tenant) {
		return im.fail(fmt.Errorf("postgres: import the sequence of tenant %q: tenant id must not be empty or contain a NUL byte", tenant))
	}
	return im.add(&im.sequences, 16, tenant, int64(last))
}

// EventType imports an event type of the catalogue, with its status and
// schema; one the API would refuse (engine.CheckStoredEventType) is
// refused, naming it.
func (im *Import) EventType(et engine.EventType) error {
	if err := engine.CheckStoredEventType(et); err != nil {
		return im.fail(err)
	}
	et.Created, et.Updated = utc(et.Created), utc(et.Updated)
	doc, err := encodeEventType(et)
	if err != nil {
		return im.fail(err)
	}
	im.wrote.EventTypes++
	return im.add(&im.types, len(doc), et.Name, doc)
}

// Endpoint imports an endpoint with its secrets (signing keys and custom
// header values) in plain; they are stored sealed when the store has a
// key. Custom headers the API would refuse are refused
// (engine.CheckStoredHeaders), naming the endpoint, never a value; so is
// a rate limit the API would refuse (engine.CheckStoredRateLimit), and a
// source the engine never writes (engine.CheckStoredSource).
func (im *Import) Endpoint(ep engine.Endpoint) error {
	if err := engine.CheckStoredHeaders(ep.Headers); err != nil {
		return im.fail(fmt.Errorf("endpoint %s of %s: custom headers: %w", ep.ID, ep.TenantID, err))
	}
	if err := engine.CheckStoredRateLimit(ep.RateLimit); err != nil {
		return im.fail(fmt.Errorf("endpoint %s of %s: %w", ep.ID, ep.TenantID, err))
	}
	if err := engine.CheckStoredSource(ep); err != nil {
		return im.fail(fmt.Errorf("endpoint %s of %s: %w", ep.ID, ep.TenantID, err))
	}
	doc, secrets, err := im.s.endpointDocs(ep)
	if err != nil {
		return im.fail(err)
	}
	im.wrote.Endpoints++
	return im.add(&im.endpoints, len(doc)+len(secrets), ep.TenantID, ep.ID, doc, secrets)
}

// AccessToken imports the access token t, whose SHA-256 is hash.
func (im *Import) AccessToken(hash [sha256.Size]byte, t engine.AccessToken) error {
	t = normalizeToken(t)
	doc, err := encodeAccessToken(t)
	if err != nil {
		return im.fail(err)
	}
	im.wrote.AccessTokens++
	return im.add(&im.tokens, len(doc), hash[:], t.TenantID, t.ID, t.Expires.UnixNano(), doc)
}

// Task imports a background task as it is stored: a running one keeps
// its progress and its lease (long ended: the source is stopped), so the
// first node to look claims it and goes on from its cursor.
func (im *Import) Task(t engine.Task) error {
	t = normalizeTask(t)
	doc, err := encodeTask(t)
	if err != nil {
		return im.fail(err)
	}
	im.wrote.Tasks++
	return im.add(&im.tasks, len(doc), t.ID, t.Tenant, string(t.State), finishedNS(t), doc)
}

// pendingEvent is an event waiting for its batch, with its deliveries'
// rows but their event_seq (set when the batch's transaction is known).
type pendingEvent struct {
	ev   engine.Event
	rows [][]any // deliveries: event_seq at deliverySeqCol
}

// deliveryCols are the columns of an imported delivery; event_seq is
// deliverySeqCol.
var deliveryCols = []string{"id", "tenant_id", "event_id", "event_seq", "event_type", "endpoint_id", "state", "created", "next_attempt_at", "due_at", "dead_at", "doc",
	"line", "sequence", "blocking"}

const deliverySeqCol = 3

// Event imports an event, after every event imported before it in the
// log, with its deliveries. Its Seq is not kept (see the comment at the
// top). An event ingest would refuse (engine.CheckEvent: a body that is
// not I-JSON, such as a name twice in an object, or a type or ordering
// key out of rule) fails the import with ingest's error code, naming
// the event, unless KeepRefused is set: by default the import writes
// nothing that no way in accepts.
func (im *Import) Event(ev engine.Event, ds []engine.Delivery) error {
	if im.err != nil {
		return im.err
	}
	if ev.ID == "" || strings.ContainsRune(ev.ID, 0) {
		return im.fail(fmt.Errorf("postgres: import event %q: event id must not be empty or contain a NUL byte", ev.ID))
	}
	if err := engine.CheckEvent(ev); err != nil {
		if im.KeepRefused == nil {
			return im.fail(fmt.Errorf("postgres: import event %s of tenant %s: %w", ev.ID, ev.TenantID, err))
		}
		im.KeepRefused(ev, err)
	}
	ev.Created = utc(ev.Created)
	if ev.Body == nil {
		ev.Body = []byte{}
	}
	pe := pendingEvent{ev: ev, rows: make([][]any, len(ds))}
	n := len(ev.Body)
	for i, d := range ds {
		if d.TenantID != ev.TenantID || d.EventID != ev.ID {
			return im.fail(fmt.Errorf("postgres: import event %s: delivery %s is not one of its own", ev.ID, d.ID))
		}
		if err := engine.CheckStorable(d); err != nil {
			return im.fail(fmt.Errorf("postgres: import event %s: %w", ev.ID, err))
		}
		d = normalizeDelivery(d)
		doc, err := encodeDelivery(d)
		if err != nil {
			return im.fail(err)
		}
		n += len(doc)
		due := dueAt(d)
		pe.rows[i] = []any{d.ID, d.TenantID, d.EventID, nil, d.EventType, d.EndpointID, string(d.State), d.Created.UnixNano(), due, due, deadAt(d), doc,
			d.Line, lineSequence(d), d.Blocking()}
	}
	im.events = append(im.events, pe)
	im.eventBytes += n
	im.wrote.Events++
	im.wrote.Deliveries += len(ds)
	if len(im.events) >= importBatchEvents || im.eventBytes >= importBatchBytes {
		return im.flushEvents()
	}
	return nil
}

// flushEvents writes the queued events and their deliveries in one
// transaction, the events' seqs its ID × 65 536 plus their place in it.
func (im *Import) flushEvents() error {
	if im.err != nil || len(im.events) == 0 {
		return im.err
	}
	ctx := im.ctx
	err := pgx.BeginFunc(ctx, im.conn, func(tx pgx.Tx) error {
		var xid int64
		if err := tx.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&xid); err != nil {
			return err
		}
		events := make([][]any, len(im.events))
		var deliveries [][]any
		for i, pe := range im.events {
			seq := xid*65536 + int64(i)
			ev := pe.ev
			events[i] = []any{seq, ev.ID, ev.TenantID, ev.Type, ev.Created.UnixNano(), ev.APIVersion, ev.Body, int64(ev.Sequence), ev.OrderingKey, ev.Test, channelsArg(ev.Channels), deliverAtArg(ev.DeliverAt), traceArg(ev.IngestTrace)}
			for _, row := range pe.rows {
				row[deliverySeqCol] = seq
				deliveries = append(deliveries, row)
			}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"events"}, []string{"seq", "id", "tenant_id", "type", "created", "api_version", "body", "sequence", "ordering_key", "test", "channels", "deliver_at", "ingest_trace"}, pgx.CopyFromRows(events)); err != nil {
			return fmt.Errorf("events: %w", err)
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"deliveries"}, deliveryCols, pgx.CopyFromRows(deliveries)); err != nil {
			return fmt.Errorf("deliveries: %w", err)
		}
		return nil
	})
	if err != nil {
		return im.fail(fmt.Errorf("postgres: import events: %w", storeError(err)))
	}
	clear(im.events)
	im.events, im.eventBytes = im.events[:0], 0
	return nil
}

// Idempotency imports an Idempotency-Key record.
func (im *Import) Idempotency(tenant, key string, requestHash [sha256.Size]byte, eventID string, expires time.Time) error {
	im.wrote.IdempotencyKeys++
	return im.add(&im.idempotency, len(key)+len(eventID)+64, tenant, key, requestHash[:], eventID, expires.UnixNano())
}

// fail ends the import with err.
func (im *Import) fail(err error) error {
	if im.err == nil {
		im.err = err
	}
	return im.err
}

// Finish sends what is queued, counts the rows of every table and, when
// they are want (the source's counts) and the rows the import was given,
// marks the import complete. When they are not, it returns the counts
// with an error wrapping ErrCountMismatch and leaves the import marked
// running. Close the import after.
func (im *Import) Finish(want Counts) (Counts, error) {
	for _, b := range []*copyBatch{&im.tenants, &im.sequences, &im.types, &im.endpoints, &im.tokens, &im.tasks, &im.idempotency} {
		if err := im.flush(b); err != nil {
			return Counts{}, err
		}
	}
	if err := im.flushEvents(); err != nil {
		return Counts{}, err
	}
	ctx := im.ctx
	var got Counts
	err := pgx.BeginFunc(ctx, im.conn, func(tx pgx.Tx) error {
		// Each ordering key's last delivery per endpoint, as the source
		// kept it: the newest stored.
		_, err := tx.Exec(ctx, `INSERT INTO key_tails (tenant_id, ordering_key, endpoint_id, sequence)
			SELECT e.tenant_id, e.ordering_key, d.endpoint_id, max(e.sequence) FROM deliveries d JOIN events e ON e.seq = d.event_seq
			WHERE e.ordering_key <> '' AND e.sequence > 0 GROUP BY 1, 2, 3`)
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM tenants WHERE deleted_at IS NULL),
			(SELECT count(*) FROM tenants WHERE deleted_at IS NOT NULL),
			(SELECT count(*) FROM event_types),
			(SELECT count(*) FROM endpoints),
			(SELECT count(*) FROM access_tokens),
			(SELECT count(*) FROM events),
			(SELECT count(*) FROM deliveries),
			(SELECT count(*) FROM idempotency),
			(SELECT count(*) FROM tasks)`).Scan(&got.Tenants, &got.DeletedTenants, &got.EventTypes, &got.Endpoints,
			&got.AccessTokens, &got.Events, &got.Deliveries, &got.IdempotencyKeys, &got.Tasks)
		if err != nil {
			return err
		}
		switch {
		case got != want:
			return fmt.Errorf("%w: %+v, the source %+v", ErrCountMismatch, got, want)
		case got != im.wrote:
			return fmt.Errorf("%w: %+v, the rows imported %+v", ErrCountMismatch, got, im.wrote)
		}
		var raw string
		if err := tx.QueryRow(ctx, "SELECT value FROM meta WHERE key = $1 FOR UPDATE", metaMigration).Scan(&raw); err != nil {
			return err
		}
		var mark migrationMark
		if err := json.Unmarshal([]byte(raw), &mark); err != nil {
			return err
		}
		mark.State, mark.Ended = "complete", time.Now().UTC()
		doc, err := json.Marshal(mark)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE meta SET value = $2 WHERE key = $1", metaMigration, string(doc))
		return err
	})
	if err != nil {
		return got, im.fail(fmt.Errorf("postgres: import into schema %s: %w", im.s.schema, storeError(err)))
	}
	return got, nil
}
