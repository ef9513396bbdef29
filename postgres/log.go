package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhookd/webhookd/engine"
)

// seqSQL is the next place in the log for an event of the current
// transaction: its ID × 65 536 plus the count of events it has appended
// before (a transaction-local setting), so at most 65 536 events per
// transaction. See the schema's comment on events.seq.
const seqSQL = `(pg_current_xact_id()::text::bigint * 65536 +
	set_config('webhookd.events_in_tx', (coalesce(nullif(current_setting('webhookd.events_in_tx', true), ''), '0')::int + 1)::text, true)::int - 1)`

// AppendEvent is ingest, in one transaction (see engine.Store): the
// tenant must exist (CodeTenantNotFound; DeleteTenant waits for the
// ingest or the ingest for it). A live idempotency record with the same request hash gives the first event and its deliveries (Duplicate),
// with another hash CodeIdempotencyConflict, whether or not the type is
// still in the catalogue; a concurrent ingest with
// the same key waits for the first one's commit and then sees its
// record. Otherwise the type must be in the catalogue
// (CodeUnknownEventType), unless the tenant is engine.OperatorTenant,
// and the event is appended with the deliveries
// in.Deliveries returns for the tenant's endpoints, returned in ID order.
//
// Before anything is written, in.CheckType, when set, has its say on the
// type's entry: the one read in the transaction (appendEvent), or the
// one this node read before, at the version the write is conditional
// on (appendCached).
//
// Most ingests take one round trip (appendCached); the first of a
// tenant on this node, the first after its endpoints changed, the first
// of a type on this node and after its entry changed, an event with an
// ordering key or an ordered delivery, one that CheckType refuses, and
// every one that does not simply append take the full path
// (appendEvent).
func (s *Store) AppendEvent(ctx context.Context, in engine.NewEvent) (engine.IngestResult, error) {
	res, err := s.ingest(ctx, in)
	if c := s.counter.Load(); c != nil && err == nil && !res.Duplicate {
		c.noteIngested(res)
	}
	return res, err
}

// ingest is AppendEvent but for its note to the Scheduler.
func (s *Store) ingest(ctx context.Context, in engine.NewEvent) (engine.IngestResult, error) {
	if res, ok, err := s.appendCached(ctx, in); ok || err != nil {
		return res, err
	}
	var res engine.IngestResult
	var seen endpointsSeen
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		res, seen, err = appendEvent(ctx, tx, in, true, &s.types)
		return err
	})
	if err != nil && !errors.Is(err, errDuplicate) {
		return engine.IngestResult{}, err
	}
	if seen.eps != nil {
		if seen.raw != nil {
			seen.full = make(map[string]engine.Endpoint, len(seen.raw))
			for id, r := range seen.raw {
				ep, err := s.endpointFrom(r.doc, r.secrets)
				if err != nil {
					seen.full, seen.raw = nil, nil // no claims at ingest: the attempts read
					break
				}
				seen.full[id] = ep
			}
		}
		s.endpoints.Store(in.Event.TenantID, &seen)
	}
	return res, nil
}

// endpointsSeen is a tenant's endpoints and retry policy as an ingest
// read them, at endpoints_version version (read before them; PutTenant
// moves it when the policy changes).
type endpointsSeen struct {
	version int64
	policy  engine.RetryPolicyName
	eps     []engine.Endpoint
	// raw holds each endpoint's columns as read, by ID, when the
	// secrets were read too (the store's own ingest, not EnqueueTx's):
	// what an attempt of a delivery claimed at ingest needs.
	raw map[string]rawEndpoint
	// full holds each endpoint with its secrets, opened, by ID, when
	// raw does.
	full map[string]engine.Endpoint
}

type rawEndpoint struct{ doc, secrets []byte }

// typeSeen is an event type's catalogue entry as an ingest read it, at
// its version (event_types.version: a number from one sequence, new at
// every write of the row, so that no entry, nor an entry made again
// under the same name, ever has a version another had).
type typeSeen struct {
	version int64
	et      engine.EventType
}

// seenType returns the entry of type name that types holds, or nil
// (types may be nil: none).
func seenType(types *sync.Map, name string) *typeSeen {
	if types == nil {
		return nil
	}
	v, _ := types.Load(name)
	t, _ := v.(*typeSeen)
	return t
}

// readType returns the entry of type name read at version: cached (the
// read gave no document: it is the version cached) or decoded from doc,
// and then kept in types (when not nil).
func readType(types *sync.Map, name string, cached *typeSeen, version int64, doc []byte) (engine.EventType, error) {
	if doc == nil && cached != nil && cached.version == version {
		return cached.et, nil
	}
	et, err := decodeEventType(doc)
	if err != nil {
		return engine.EventType{}, fmt.Errorf("postgres: event type %s: %w", name, err)
	}
	if types != nil {
		types.Store(name, &typeSeen{version: version, et: et})
	}
	return et, nil
}

// appendCached is the ingest of an event of a tenant whose endpoints
// this node read before, in one round trip: the deliveries are made
// from those endpoints, and one implicit transaction takes the tenant's
// lock and writes the idempotency key, the event and the deliveries,
// the event only if the tenant's endpoints_version is still the one
// they were read at, the tenant live, the type known and the key
// claimed. When any of that is not so, ingest_fallback rolls it all
// back and ok is false: the caller takes the full path, which tells
// each case apart (an error, a duplicate) and reads the endpoints
// again.
func (s *Store) appendCached(ctx context.Context, in engine.NewEvent) (engine.IngestResult, bool, error) {
	v, _ := s.endpoints.Load(in.Event.TenantID)
	seen, _ := v.(*endpointsSeen)
	typ := seenType(&s.types, in.Event.Type)
	if seen == nil || typ == nil || in.Event.OrderingKey != "" || in.Event.Test || in.Event.TenantID == engine.OperatorTenant {
		// A keyed event's deliveries name the key's previous sequence
		// (key_tails), which the full path reads; a test event is rare
		// and its mark is written by the full path only; an operational
		// event's type is in no catalogue, which this path requires.
		return engine.IngestResult{}, false, nil
	}
	if in.CheckType != nil && in.CheckType(typ.et) != nil {
		// Refused by the entry as this node read it: the full path
		// reads it as it is now, and refuses or takes the event by that.
		return engine.IngestResult{}, false, nil
	}
	stored, err := newStoredEvent(in.Event)
	if err != nil {
		return engine.IngestResult{}, false, err
	}
	// The deliveries are made before the write assigns the event its
	// sequence: the write puts it into their documents
	// (insertDeliveriesSQL) and sequencedDoc into what is returned. That
	// is all of an unordered delivery that depends on it; an event with
	// an ordered delivery takes the full path, which settles it in its
	// line under the line's lock (settleNew).
	ds, err := makeDeliveries(stored, in, seen.policy, slices.Clone(seen.eps))
	if err != nil {
		return engine.IngestResult{}, false, nil // the full path says so, if it is so of the tenant's endpoints as they are
	}
	for _, d := range ds {
		if d.Line != "" {
			return engine.IngestResult{}, false, nil
		}
	}
	cols, err := deliveryColumns(ds)
	if err != nil {
		return engine.IngestResult{}, false, err
	}
	// The deliveries due now, this node takes under a lease of their own
	// when it may start them soon and knows what their attempts need.
	var token, until int64
	var taken []engine.Work
	var inputs []prefetched
	c := s.preclaimer.Load()
	if c != nil && seen.raw != nil && c.mayPreclaim() {
		now := s.now()
		token = newToken()
		until = now.Add(s.lease).UnixNano()
		for i, d := range ds {
			ep, ok := seen.raw[d.EndpointID]
			if d.State != engine.StatePending || d.NextAttemptAt.After(now) || !ok {
				continue
			}
			cols.tokens[i], cols.until[i] = &token, &until
			taken = append(taken, engine.Work{DeliveryID: d.ID, TenantID: d.TenantID, EndpointID: d.EndpointID})
			p := prefetched{doc: cols.docs[i], epDoc: ep.doc, epSecrets: ep.secrets, delivery: &ds[i]}
			if full, ok := seen.full[d.EndpointID]; ok {
				p.endpoint = &full
			}
			inputs = append(inputs, p)
		}
	}
	ev := stored
	args := []any{ev.ID, ev.TenantID, ev.Type, ev.Created.UnixNano(), ev.APIVersion, ev.Body, seen.version,
		cols.ids, cols.endpoints, cols.states, cols.created, cols.due, cols.dead, cols.docs, cols.tokens, cols.until}
	sql := appendCachedSQL
	if in.IdempotencyKey != "" {
		sql = appendCachedKeySQL
		args = append(args, in.IdempotencyKey, in.RequestHash[:], in.IdempotencyExpires.UnixNano())
	}
	args = append(args, in.SequenceOffset(), ev.OrderingKey, channelsArg(ev.Channels), deliverAtArg(ev.DeliverAt), typ.version, traceArg(ev.IngestTrace))
	w := &cachedWrite{tenant: ev.TenantID, sql: sql, args: args}
	seq, sequence, err := s.writeCached(ctx, w)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == fallbackCode || retryable(err) {
		return engine.IngestResult{}, false, nil
	}
	if err != nil {
		return engine.IngestResult{}, false, storeError(err)
	}
	stored = sequenced(in, stored, seq, sequence)
	s.cachedIngests.Add(1)
	for i := range ds {
		ds[i].Sequence = stored.Sequence
	}
	if len(taken) > 0 {
		read := time.Now()
		for i := range inputs {
			// The body and the delivery's document as stored, with the
			// sequence the write gave them (inputs[i].delivery is in ds).
			inputs[i].at, inputs[i].body, inputs[i].doc = read, stored.Body, sequencedDoc(inputs[i].doc, stored.Sequence)
			inputs[i].trace = stored.IngestTrace
		}
		c.preclaimed(taken, token, time.Unix(0, until), inputs)
	}
	return engine.IngestResult{Event: stored, Deliveries: ds}, true, nil
}

// fallbackCode is the SQLSTATE of ingest_fallback (see the schema).
const fallbackCode = "WH001"

// appendCachedSQL is appendCached's write without an idempotency key:
// $1…$6 the event (its body without its sequence), $7 the
// endpoints_version the deliveries were made at, $8…$16 the deliveries'
// columns (deliveryColumns), $17 the offset of the sequence in the body,
// $18 the ordering key, $19 the channels and $20 the deliver_at
// (insertEventSQL), $21 the version of the type's entry CheckType saw,
// $22 the ingest's trace.
// The event's seq and sequence, or ingest_fallback.
var appendCachedSQL = `WITH sq AS (` + nextSequenceSQL + `), ev AS (
	` + insertEventSQL(17, 18, 0, 19, 20, 22) + `
	WHERE EXISTS (SELECT 1 FROM tenants WHERE id = $2 AND deleted_at IS NULL AND endpoints_version = $7)
	AND EXISTS (SELECT 1 FROM event_types WHERE name = $3 AND version = $21)
	ON CONFLICT (id) DO NOTHING RETURNING seq
), dl AS (` + insertDeliveriesSQL + `)
SELECT coalesce((SELECT seq FROM ev), ingest_fallback('ingest: take the full path')), (SELECT last FROM sq)`

// appendCachedKeySQL is appendCachedSQL that also claims the
// idempotency key $17 (request hash $18, expiring at $19) and appends
// the event only if it did; $20 to $25 are appendCachedSQL's $17 to
// $22.
var appendCachedKeySQL = `WITH key AS (
	INSERT INTO idempotency (tenant_id, key, request_hash, event_id, expires) VALUES ($2, $17, $18, $1, $19)
	ON CONFLICT (tenant_id, key) DO UPDATE SET request_hash = excluded.request_hash, event_id = excluded.event_id, expires = excluded.expires
	WHERE idempotency.expires <= $4
	RETURNING 1
), sq AS (` + nextSequenceSQL + `), ev AS (
	` + insertEventSQL(20, 21, 0, 22, 23, 25) + `
	WHERE EXISTS (SELECT 1 FROM key)
	AND EXISTS (SELECT 1 FROM tenants WHERE id = $2 AND deleted_at IS NULL AND endpoints_version = $7)
	AND EXISTS (SELECT 1 FROM event_types WHERE name = $3 AND version = $24)
	ON CONFLICT (id) DO NOTHING RETURNING seq
), dl AS (` + insertDeliveriesSQL + `)
SELECT coalesce((SELECT seq FROM ev), ingest_fallback('ingest: take the full path')), (SELECT last FROM sq)`

// insertEventSQL inserts event $1 (tenant $2, type $3, created $4,
// api_version $5, body $6 without its sequence) at the next place of
// the log with the sequence of the CTE sq, written into the body at
// byte offset $offset (engine.NewEvent.SequenceOffset; -1: the body is
// kept as it is), the ordering key $key, the channels $channels (NULL:
// none; channelsArg), the deliver_at $deliverAt (NULL: none;
// deliverAtArg), the ingest's trace $trace (NULL: none; traceArg) and,
// when test is not 0, the test mark $test (else false: appendCached
// never writes a test event). The caller adds its WHERE and what
// follows.
func insertEventSQL(offset, key, test, channels, deliverAt, trace int) string {
	testSQL := "false"
	if test != 0 {
		testSQL = fmt.Sprintf("$%d::boolean", test)
	}
	return fmt.Sprintf(`INSERT INTO events (seq, id, tenant_id, type, created, api_version, body, sequence, ordering_key, test, channels, deliver_at, ingest_trace)
	SELECT `+seqSQL+`, $1, $2, $3, $4, $5,
		CASE WHEN $%[1]d::int < 0 THEN $6::bytea
		ELSE substring($6::bytea FROM 1 FOR $%[1]d::int) || convert_to(',"sequence":' || sq.last, 'UTF8') || substring($6::bytea FROM $%[1]d::int + 1) END,
		sq.last, $%[2]d::text, %[3]s, $%[4]d::text[], $%[5]d::bigint, $%[6]d::text
	FROM sq`, offset, key, testSQL, channels, deliverAt, trace)
}

// traceArg is the ingest_trace column of an event: NULL when its ingest
// was not traced.
func traceArg(trace string) any {
	if trace == "" {
		return nil
	}
	return trace
}

// deliverAtArg is the deliver_at column of an event scheduled at at:
// NULL when it is not scheduled.
func deliverAtArg(at time.Time) any {
	if at.IsZero() {
		return nil
	}
	return at.UnixNano()
}

// channelsArg is the channels column of an event on channels: NULL when
// there are none.
func channelsArg(channels []string) any {
	if len(channels) == 0 {
		return nil
	}
	return channels
}

// insertDeliveriesSQL inserts the deliveries of event ev ($2 its tenant,
// $1 its ID, $3 its type), one per element of the arrays $8…$16, with
// the event's sequence (sq) written into their documents as sequencedDoc
// writes it; one with a lease token is due when its lease ends.
const insertDeliveriesSQL = `
	INSERT INTO deliveries (id, tenant_id, event_id, event_seq, event_type, endpoint_id, state, created, next_attempt_at, due_at, dead_at, doc, lease_token, lease_until)
	SELECT d.id, $2, $1, ev.seq, $3, d.endpoint_id, d.state, d.created, d.due, coalesce(d.until, d.due), d.dead,
		convert_to('{"sequence":' || sq.last || ',', 'UTF8') || substring(d.doc FROM 2), d.token, d.until
	FROM ev, sq, unnest($8::text[], $9::text[], $10::text[], $11::bigint[], $12::bigint[], $13::bigint[], $14::bytea[], $15::bigint[], $16::bigint[])
		AS d(id, endpoint_id, state, created, due, dead, doc, token, until)`

// newDeliveryCols are deliveries as the columns of insertDeliveriesSQL.
type newDeliveryCols struct {
	ids, endpoints, states []string
	created                []int64
	due, dead              []*int64
	docs                   [][]byte
	tokens, until          []*int64 // nil elements: no lease
}

func deliveryColumns(ds []engine.Delivery) (newDeliveryCols, error) {
	c := newDeliveryCols{
		ids: make([]string, len(ds)), endpoints: make([]string, len(ds)), states: make([]string, len(ds)),
		created: make([]int64, len(ds)), due: make([]*int64, len(ds)), dead: make([]*int64, len(ds)), docs: make([][]byte, len(ds)),
		tokens: make([]*int64, len(ds)), until: make([]*int64, len(ds)),
	}
	for i, d := range ds {
		doc, err := encodeDelivery(d)
		if err != nil {
			return c, err
		}
		c.ids[i], c.endpoints[i], c.states[i], c.created[i] = d.ID, d.EndpointID, string(d.State), d.Created.UnixNano()
		c.due[i], c.dead[i], c.docs[i] = dueAt(d), deadAt(d), doc
	}
	return c, nil
}

// sequencedDoc returns doc, a delivery's JSON document made without a
// sequence, with "sequence" n as its first member: the bytes
// insertDeliveriesSQL writes.
func sequencedDoc(doc []byte, n uint64) []byte {
	b := make([]byte, 0, len(doc)+len(`"sequence":,`)+20)
	b = append(b, `{"sequence":`...)
	b = strconv.AppendUint(b, n, 10)
	b = append(b, ',')
	return append(b, doc[1:]...)
}

// sequenced returns stored, the event of in, at place seq of the log
// with sequence: as the insert wrote it (insertEventSQL).
func sequenced(in engine.NewEvent, stored engine.Event, seq, sequence int64) engine.Event {
	ev := in.Sequenced(uint64(sequence))
	stored.Seq, stored.Sequence, stored.Body = uint64(seq), ev.Sequence, ev.Body
	return stored
}

// newStoredEvent checks ev and returns it as it is stored.
func newStoredEvent(ev engine.Event) (engine.Event, error) {
	if ev.ID == "" || strings.ContainsRune(ev.ID, 0) {
		return engine.Event{}, engine.InvalidEventID()
	}
	if ev.Type == "" {
		return engine.Event{}, engine.EventTypeRequired()
	}
	stored := ev
	stored.Created = utc(ev.Created)
	stored.Body = slices.Clone(ev.Body)
	return stored, nil
}

// makeDeliveries makes the deliveries of event ev for the tenant's
// endpoints eps and retry policy policy, checked and in ID order.
func makeDeliveries(ev engine.Event, in engine.NewEvent, policy engine.RetryPolicyName, eps []engine.Endpoint) ([]engine.Delivery, error) {
	var made []engine.Delivery
	if in.Deliveries != nil {
		made = in.Deliveries(ev, policy, eps)
	} else {
		made = engine.NewDeliveries(ev, policy, eps, engine.NewID)
	}
	ds := make([]engine.Delivery, len(made))
	for i, d := range made {
		if d.ID == "" || d.TenantID != ev.TenantID || d.EventID != ev.ID {
			return nil, fmt.Errorf("postgres: append event %s: delivery %q is not one of event %s of tenant %s", ev.ID, d.ID, ev.ID, ev.TenantID)
		}
		if err := engine.CheckStorable(d); err != nil {
			return nil, fmt.Errorf("postgres: append event %s: %w", ev.ID, err)
		}
		ds[i] = normalizeDelivery(d)
	}
	slices.SortFunc(ds, func(a, b engine.Delivery) int { return strings.Compare(a.ID, b.ID) })
	return ds, nil
}

// appendEvent is AppendEvent in tx, which the caller commits, in two
// round trips; it also returns the tenant's endpoints it read, for
// appendCached, and keeps the type's entry it read in types (when not
// nil). It needs no Store, only tx's search_path on the store's schema:
// EnqueueTx runs it in an application's transaction.
func appendEvent(ctx context.Context, tx pgx.Tx, in engine.NewEvent, withSecrets bool, types *sync.Map) (engine.IngestResult, endpointsSeen, error) {
	var seen endpointsSeen
	stored, err := newStoredEvent(in.Event)
	if err != nil {
		return engine.IngestResult{}, seen, err
	}
	ev := stored

	// One round trip for the checks, the key, the endpoints and the event;
	// one for the deliveries. A check that fails rolls all of it back.
	b := &pgx.Batch{}
	// The tenant's lock, shared: DeleteTenant takes it alone, so an ingest
	// and the deletion of its tenant never interleave. An advisory lock,
	// not FOR SHARE on the tenant's row: many ingests sharing one row lock
	// made PostgreSQL build a multixact for the row at every ingest.
	// Then, before the first write, its sequence lock (see the schema on
	// tenant_sequences).
	b.Queue(lockIngestSQL, ev.TenantID)
	// The version before the endpoints: endpoints read at a later
	// version than the one kept are merely refused by the next
	// appendCached, never taken for a newer version.
	b.Queue("SELECT endpoints_version, doc FROM tenants WHERE id = $1 AND deleted_at IS NULL", ev.TenantID)
	// The type's entry: its document only when it is not the version
	// this node holds.
	cachedType, have := seenType(types, ev.Type), int64(-1)
	if cachedType != nil {
		have = cachedType.version
	}
	b.Queue("SELECT version, CASE WHEN version = $2 THEN NULL ELSE doc END FROM event_types WHERE name = $1", ev.Type, have)
	if in.IdempotencyKey != "" {
		b.Queue(claimKeySQL, ev.TenantID, in.IdempotencyKey, in.RequestHash[:], ev.ID, in.IdempotencyExpires.UnixNano(), ev.Created.UnixNano())
	}
	// Making deliveries needs no secret (and an application's role
	// enqueueing events needs no grant on them): the store's own ingest
	// reads them for appendCached's claims.
	if withSecrets {
		b.Queue("SELECT doc, secrets FROM endpoints WHERE tenant_id = $1 ORDER BY id", ev.TenantID)
	} else {
		b.Queue("SELECT doc, NULL::bytea FROM endpoints WHERE tenant_id = $1 ORDER BY id", ev.TenantID)
	}
	b.Queue(`WITH sq AS (`+nextSequenceSQL+`) `+insertEventSQL(7, 8, 9, 10, 11, 12)+` ON CONFLICT (id) DO NOTHING RETURNING seq, sequence`,
		ev.ID, ev.TenantID, ev.Type, stored.Created.UnixNano(), ev.APIVersion, stored.Body, in.SequenceOffset(), ev.OrderingKey, ev.Test, channelsArg(ev.Channels), deliverAtArg(ev.DeliverAt), traceArg(ev.IngestTrace))
	if ev.OrderingKey != "" { // under the sequence lock, taken above
		b.Queue("SELECT endpoint_id, sequence FROM key_tails WHERE tenant_id = $1 AND ordering_key = $2", ev.TenantID, ev.OrderingKey)
	}
	var tenantFound, known, keyClaimed, inserted bool
	var typeVersion int64
	var typeDoc []byte
	var eps []engine.Endpoint
	var previous map[string]uint64 // endpoint ID → the key's last sequence there
	err = func() error {
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil { // the locks
			return err
		}
		var tenantDoc []byte
		err := br.QueryRow().Scan(&seen.version, &tenantDoc)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if tenantFound = err == nil; tenantFound {
			t, err := decodeTenant(tenantDoc)
			if err != nil {
				return err
			}
			seen.policy = t.RetryPolicy
		}
		err = br.QueryRow().Scan(&typeVersion, &typeDoc)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		known = err == nil
		if in.IdempotencyKey != "" {
			tag, err := br.Exec()
			if err != nil {
				return err
			}
			keyClaimed = tag.RowsAffected() == 1
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if withSecrets {
			seen.raw = map[string]rawEndpoint{}
		}
		eps, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (engine.Endpoint, error) {
			var doc, secrets []byte
			if err := r.Scan(&doc, &secrets); err != nil {
				return engine.Endpoint{}, err
			}
			ep, err := decodeEndpoint(doc)
			if seen.raw != nil {
				seen.raw[ep.ID] = rawEndpoint{doc, secrets}
			}
			return ep, err
		})
		if err != nil {
			return err
		}
		var seq, sequence int64
		err = br.QueryRow().Scan(&seq, &sequence)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // an event of that ID exists: a duplicate, or refused below
		}
		if inserted = err == nil; inserted {
			stored = sequenced(in, stored, seq, sequence)
		}
		if err != nil || ev.OrderingKey == "" {
			return err
		}
		previous = map[string]uint64{}
		rows, err = br.Query()
		if err != nil {
			return err
		}
		var id string
		var last int64
		_, err = pgx.ForEachRow(rows, []any{&id, &last}, func() error { previous[id] = uint64(last); return nil })
		return err
	}()
	if eps == nil {
		eps = []engine.Endpoint{}
	}
	if err == nil && tenantFound {
		seen.eps = slices.Clone(eps)
	}
	switch {
	case err != nil:
		return engine.IngestResult{}, seen, err
	case !tenantFound:
		return engine.IngestResult{}, seen, engine.TenantNotFound()
	case in.IdempotencyKey != "" && !keyClaimed:
		// Before the type's absence, as before its status: a repeat of
		// an event taken before its type left the catalogue is
		// answered that event.
		dup, err := duplicateOf(ctx, tx, in)
		if err != nil {
			return engine.IngestResult{}, seen, err
		}
		return *dup, seen, errDuplicate // rolled back: nothing written
	case !known && ev.TenantID != engine.OperatorTenant:
		return engine.IngestResult{}, seen, engine.UnknownEventType(ev.Type)
	case !inserted:
		return engine.IngestResult{}, seen, fmt.Errorf("postgres: append event %s: event id exists", ev.ID)
	}
	if known { // !known: an operator event of a type not in the catalogue, nothing to check
		// Read (and cached for appendCached) whether or not there is a
		// check to make.
		et, err := readType(types, ev.Type, cachedType, typeVersion, typeDoc)
		if err != nil {
			return engine.IngestResult{}, seen, err
		}
		if in.CheckType != nil {
			if err := in.CheckType(et); err != nil {
				return engine.IngestResult{}, seen, err // rolled back: nothing written
			}
		}
	}
	ds, err := makeDeliveries(stored, in, seen.policy, eps)
	if err != nil {
		return engine.IngestResult{}, seen, err
	}
	if err := settleNew(ctx, tx, ds); err != nil {
		return engine.IngestResult{}, seen, err
	}
	if len(ds) > 0 {
		b := &pgx.Batch{}
		if ev.OrderingKey != "" {
			ids := make([]string, len(ds))
			for i := range ds {
				ds[i].PreviousSequence, ids[i] = previous[ds[i].EndpointID], ds[i].EndpointID
			}
			b.Queue(`INSERT INTO key_tails (tenant_id, ordering_key, endpoint_id, sequence) SELECT $1, $2, unnest($3::text[]), $4
				ON CONFLICT (tenant_id, ordering_key, endpoint_id) DO UPDATE SET sequence = excluded.sequence`,
				ev.TenantID, ev.OrderingKey, ids, int64(stored.Sequence))
		}
		for _, d := range ds {
			doc, err := encodeDelivery(d)
			if err != nil {
				return engine.IngestResult{}, seen, err
			}
			b.Queue(`INSERT INTO deliveries (id, tenant_id, event_id, event_seq, event_type, endpoint_id, state, created, next_attempt_at, due_at, dead_at, doc, line, sequence, blocking)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11, $12, $13, $14)`,
				d.ID, d.TenantID, d.EventID, int64(stored.Seq), d.EventType, d.EndpointID, string(d.State), d.Created.UnixNano(),
				dueAt(d), deadAt(d), doc, d.Line, lineSequence(d), d.Blocking())
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return engine.IngestResult{}, seen, err
		}
	}
	return engine.IngestResult{Event: stored, Deliveries: ds}, seen, nil
}

// claimKeySQL records an Idempotency-Key for its event unless a live
// record has it (then it changes no row); an expired record is replaced.
const claimKeySQL = `INSERT INTO idempotency (tenant_id, key, request_hash, event_id, expires) VALUES ($1, $2, $3, $4, $5)
	ON CONFLICT (tenant_id, key) DO UPDATE SET request_hash = excluded.request_hash, event_id = excluded.event_id, expires = excluded.expires
	WHERE idempotency.expires <= $6`

// duplicateOf is the result of an ingest whose Idempotency-Key a live
// record holds: the first event and its deliveries as they are now, or
// CodeIdempotencyConflict when the request differs.
func duplicateOf(ctx context.Context, tx pgx.Tx, in engine.NewEvent) (*engine.IngestResult, error) {
	ev := in.Event
	var hash []byte
	var first string
	if err := tx.QueryRow(ctx, "SELECT request_hash, event_id FROM idempotency WHERE tenant_id = $1 AND key = $2",
		ev.TenantID, in.IdempotencyKey).Scan(&hash, &first); err != nil {
		return nil, err
	}
	if string(hash) != string(in.RequestHash[:]) {
		return nil, engine.IdempotencyConflict()
	}
	e, ds, err := eventByID(ctx, tx, first)
	if err != nil {
		return nil, fmt.Errorf("postgres: append event %s: idempotency record points at event %s: %w", ev.ID, first, err)
	}
	return &engine.IngestResult{Event: e, Deliveries: ds, Duplicate: true}, nil
}

// errDuplicate rolls back the transaction of an ingest that found its
// idempotency key live with the same request: nothing of it is written.
var errDuplicate = errors.New("postgres: duplicate ingest")

// dueAt is the next_attempt_at column of d, and its due_at as written
// by a writer that holds no lease: its next attempt's time while pending.
func dueAt(d engine.Delivery) *int64 {
	if d.State != engine.StatePending {
		return nil
	}
	return ns(d.NextAttemptAt)
}

func deadAt(d engine.Delivery) *int64 {
	if d.State != engine.StateDead {
		return nil
	}
	n := d.DeadAt.UnixNano()
	return &n
}

// normalizeDelivery gives d's times in UTC without a monotonic reading,
// as they are read back.
func normalizeDelivery(d engine.Delivery) engine.Delivery {
	d.CycleStart, d.NextAttemptAt, d.DeadAt = utc(d.CycleStart), utc(d.NextAttemptAt), utc(d.DeadAt)
	d.Created, d.Updated, d.DeliverAt = utc(d.Created), utc(d.Updated), utc(d.DeliverAt)
	if d.Attempts != nil {
		as := make([]engine.Attempt, len(d.Attempts))
		for i, a := range d.Attempts {
			a.Start = utc(a.Start)
			as[i] = a
		}
		d.Attempts = as
	}
	if d.Replays != nil {
		rs := make([]engine.Replay, len(d.Replays))
		for i, r := range d.Replays {
			r.At = utc(r.At)
			rs[i] = r
		}
		d.Replays = rs
	}
	if d.Backfill != nil {
		d.Backfill = &engine.Backfill{At: utc(d.Backfill.At), By: d.Backfill.By}
	}
	return d
}

// eventByID reads event id (of any tenant) and its deliveries in ID order.
func eventByID(ctx context.Context, q querier, id string) (engine.Event, []engine.Delivery, error) {
	ev, err := scanEvent(q.QueryRow(ctx, "SELECT "+eventColsSQL+", body FROM events WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.Event{}, nil, engine.EventNotFound()
	}
	if err != nil {
		return engine.Event{}, nil, err
	}
	ds, err := collectDeliveries(ctx, q, "SELECT "+deliveryReadSQL+" FROM deliveries d WHERE tenant_id = $1 AND event_seq = $2 ORDER BY id", ev.TenantID, int64(ev.Seq))
	if ev.DeliverAt.IsZero() {
		ev.DeliverAt = deliverAtOf(ds)
	}
	return ev, ds, err
}

// deliverAtOf returns the deliver_at of the event of ds, its deliveries,
// for an event written before events had the column (migration 8):
// every delivery of a scheduled event carries it in its document. Zero
// when none does (not scheduled, or no delivery).
func deliverAtOf(ds []engine.Delivery) time.Time {
	for _, d := range ds {
		if !d.DeliverAt.IsZero() {
			return d.DeliverAt
		}
	}
	return time.Time{}
}

// Event returns event id of tenant and its deliveries in ID order, or
// CodeEventNotFound (also when it is another tenant's).
func (s *Store) Event(ctx context.Context, tenant, id string) (engine.Event, []engine.Delivery, error) {
	var ev engine.Event
	var ds []engine.Delivery
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		var err error
		ev, ds, err = eventByID(ctx, tx, id)
		if err == nil && ev.TenantID != tenant {
			err = engine.EventNotFound()
		}
		return err
	})
	if err != nil {
		return engine.Event{}, nil, err
	}
	return ev, ds, nil
}

// readTx runs fn in a read-only, repeatable-read transaction: one
// snapshot for all it reads.
func (s *Store) readTx(ctx context.Context, fn func(pgx.Tx) error) error {
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
	if err != nil {
		return storeError(err)
	}
	return nil
}

// Delivery returns delivery id of tenant, or CodeDeliveryNotFound (also
// when it is another tenant's).
func (s *Store) Delivery(ctx context.Context, tenant, id string) (engine.Delivery, error) {
	d, err := scanDelivery(s.pool.QueryRow(ctx, "SELECT "+deliveryReadSQL+" FROM deliveries d WHERE id = $1 AND tenant_id = $2", id, tenant))
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.Delivery{}, engine.DeliveryNotFound()
	}
	if err != nil {
		return engine.Delivery{}, storeError(err)
	}
	return d, nil
}

// AttemptInput reads delivery id (of any tenant; CodeDeliveryNotFound),
// its event's body and ingest trace, and its endpoint (EndpointFound
// false when deleted), in one statement.
//
// The first AttemptInput of a delivery this process has just claimed
// takes what the claim read in its own statement (claimSQL), as of the
// claim: a change since (a replay) is met by the record, which finds the
// delivery at another version (engine.ErrDeliveryChanged), and the
// dispatcher reads it again.
func (s *Store) AttemptInput(ctx context.Context, deliveryID string) (engine.AttemptInput, error) {
	var doc, body, epDoc, epSecrets []byte
	var trace *string
	p := s.claims.takeInput(deliveryID)
	if p != nil && p.delivery != nil {
		// Claimed by its ingest here: made from what the ingest wrote.
		in := engine.AttemptInput{Body: p.body, Delivery: *p.delivery, IngestTrace: p.trace}
		s.claims.read(deliveryID, p.doc, p.delivery)
		if p.endpoint != nil {
			in.Endpoint, in.EndpointFound = *p.endpoint, true
		}
		return in, nil
	}
	if p != nil {
		doc, body, epDoc, epSecrets, trace = p.doc, p.body, p.epDoc, p.epSecrets, &p.trace
	} else {
		err := s.pool.QueryRow(ctx, `SELECT d.doc, e.body, e.ingest_trace, ep.doc, ep.secrets FROM deliveries d
			JOIN events e ON e.id = d.event_id
			LEFT JOIN endpoints ep ON ep.tenant_id = d.tenant_id AND ep.id = d.endpoint_id
			WHERE d.id = $1`, deliveryID).Scan(&doc, &body, &trace, &epDoc, &epSecrets)
		if errors.Is(err, pgx.ErrNoRows) {
			return engine.AttemptInput{}, engine.DeliveryNotFound()
		}
		if err != nil {
			return engine.AttemptInput{}, storeError(err)
		}
	}
	in := engine.AttemptInput{Body: body}
	if trace != nil {
		in.IngestTrace = *trace
	}
	var err error
	if in.Delivery, err = decodeDelivery(doc); err != nil {
		return engine.AttemptInput{}, err
	}
	s.claims.read(deliveryID, doc, &in.Delivery)
	if epDoc != nil {
		if in.Endpoint, err = s.endpointFrom(epDoc, epSecrets); err != nil {
			return engine.AttemptInput{}, err
		}
		in.EndpointFound = true
	}
	return in, nil
}

// UpdateDelivery calls fn with delivery id (of any tenant;
// CodeDeliveryNotFound), read under a row lock, and stores what it
// returns; an error from fn is returned as is and stores nothing. A
// delivery another node holds a lease on stays claimed: made pending
// again (a replay while it is attempted) it is due when the lease ends
// at the earliest, and its holder's record hands it back at once.
func (s *Store) UpdateDelivery(ctx context.Context, id string, fn func(engine.Delivery) (engine.Delivery, error)) (engine.Delivery, error) {
	out, err := s.update(ctx, id, fn, nil, false)
	if err == nil {
		s.noteWritten(out)
	}
	return out, err
}

// RecordOutcome applies u if the delivery is still stored at version
// u.Read (engine.ErrDeliveryChanged otherwise) and merges u.Endpoint
// into its endpoint, in one transaction, when the endpoint still
// exists. It is how the holder of a claim records an attempt: when this
// process holds the delivery's lease (Scheduler), the record applies
// only while the lease is still its own (engine.ErrClaimLost otherwise:
// another node claimed it after the lease ended), and it ends the lease.
//
// Without health, an unordered delivery's record is one statement
// (recordAsRead); otherwise, or when that statement finds the row
// changed, the record takes the row lock (and an ordered one its line's
// first) and compares the version there.
func (s *Store) RecordOutcome(ctx context.Context, u engine.OutcomeUpdate) (engine.Delivery, error) {
	out, err := s.recordOutcome(ctx, u)
	if err == nil {
		s.noteWritten(out)
	}
	return out, err
}

// recordOutcome is RecordOutcome before the note of what it wrote.
func (s *Store) recordOutcome(ctx context.Context, u engine.OutcomeUpdate) (engine.Delivery, error) {
	if u.Endpoint == nil {
		if out, ok, err := s.recordAsRead(ctx, u); ok || err != nil {
			return out, err
		}
	}
	return s.update(ctx, u.Delivery.ID, func(cur engine.Delivery) (engine.Delivery, error) {
		if engine.VersionOf(cur) != u.Read {
			return engine.Delivery{}, engine.ErrDeliveryChanged
		}
		return u.Delivery, nil
	}, &u, true)
}

// update is UpdateDelivery and RecordOutcome under the row lock: fn
// decides the delivery's next state from the row as locked, and the
// health of outcome, when set, is merged into its endpoint
// (OutcomeUpdate.Merge) when that still exists, and told to its OnHealth
// after the commit. holder: the write is a holder's record (see
// RecordOutcome).
func (s *Store) update(ctx context.Context, id string, fn func(engine.Delivery) (engine.Delivery, error), outcome *engine.OutcomeUpdate, holder bool) (engine.Delivery, error) {
	var out engine.Delivery
	var kept leaseChange
	var token int64
	var health *[2]engine.Endpoint // the endpoint before and after the merge
	err := s.tx(ctx, func(tx pgx.Tx) error {
		health = nil
		row, err := lockDelivery(ctx, tx, id)
		if err != nil {
			return err
		}
		change := leaseKeep
		if holder {
			var ok bool
			if token, ok = s.claims.holderToken(id); ok {
				if row.leaseToken == nil || *row.leaseToken != token {
					return engine.ErrClaimLost
				}
				change = leaseEnd
			}
		}
		after, err := fn(row.d)
		if err != nil {
			return &callerError{err}
		}
		if err := engine.CheckTransition(row.d, after); err != nil {
			return fmt.Errorf("postgres: update delivery %s: %w", id, err)
		}
		if out, kept, err = s.saveDelivery(ctx, tx, row, after, change); err != nil {
			return err
		}
		if outcome != nil && outcome.Endpoint != nil {
			_, err := s.updateEndpoint(ctx, tx, out.TenantID, out.EndpointID, func(ep *engine.Endpoint) error {
				before, after := *ep, outcome.Merge(*ep)
				*ep, health = after, &[2]engine.Endpoint{before, after}
				return nil
			})
			if engine.ErrorCode(err) == engine.CodeEndpointNotFound {
				health, err = nil, nil
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return engine.Delivery{}, err
	}
	s.claims.recorded(id, token, kept)
	if health != nil {
		outcome.Merged(health[0], health[1])
	}
	return out, nil
}

// recordAsRead is the holder's record of u in one statement: written
// only if the row is still exactly the document this process's
// AttemptInput read (a document equal to it is at its version) and
// still under this process's lease (compare and set on the document and
// the token). It reports false when it wrote nothing: nothing was read
// under a claim, or not the version u was decided from (u was decided
// on a read since), the delivery is ordered (its record is settled in
// its line under the line's lock), or the row changed since (a replay,
// a pause, the lease taken over); the caller then takes the row lock
// and compares the version there.
func (s *Store) recordAsRead(ctx context.Context, u engine.OutcomeUpdate) (engine.Delivery, bool, error) {
	id := u.Delivery.ID
	token, read, cur, ok := s.claims.asRead(id)
	if !ok || cur.Line != "" || engine.VersionOf(cur) != u.Read {
		return engine.Delivery{}, false, nil
	}
	after := u.Delivery
	if err := engine.CheckTransition(cur, after); err != nil {
		return engine.Delivery{}, false, fmt.Errorf("postgres: update delivery %s: %w", id, err)
	}
	after = normalizeDelivery(after)
	doc, err := encodeDelivery(after)
	if err != nil {
		return engine.Delivery{}, false, err
	}
	next, change := dueAt(after), leaseEnd
	due, newToken, until := next, (*int64)(nil), (*int64)(nil)
	if now := s.now().UnixNano(); after.State == engine.StatePending && *next <= now {
		renewed := now + s.lease.Nanoseconds()
		due, newToken, until, change = &renewed, &token, &renewed, leaseRenewed
	}
	applied, err := s.record(&heldRecord{id: id, state: string(after.State), next: next, due: due, dead: deadAt(after),
		newToken: newToken, until: until, doc: doc, token: token, read: read})
	if err != nil {
		return engine.Delivery{}, false, storeError(err)
	}
	if !applied {
		s.recordFallbacks.Add(1)
		return engine.Delivery{}, false, nil
	}
	s.claims.recorded(id, token, change)
	return after, true, nil
}

// storedDelivery is a delivery as read under its row lock, with the
// columns of its lease, and, when it is ordered and the read took its
// line's lock, its line as SettleLine needs it (view; nil: not read).
type storedDelivery struct {
	d          engine.Delivery
	leaseToken *int64
	leaseUntil *int64
	view       *engine.LineView
}

// lockDelivery reads delivery id under a row lock, after the lock of its
// line if it is ordered (and then its line's view too), in one round
// trip; CodeDeliveryNotFound.
func lockDelivery(ctx context.Context, tx pgx.Tx, id string) (storedDelivery, error) {
	b := &pgx.Batch{}
	b.Queue(lockLineOfSQL, id)
	b.Queue(`SELECT d.doc, d.lease_token, d.lease_until, d.line <> '',
		CASE WHEN d.line <> '' THEN (SELECT h.id FROM deliveries h WHERE h.endpoint_id = d.endpoint_id AND h.line = d.line AND `+isHeadSQL("h")+`) END,
		CASE WHEN d.line <> '' THEN (SELECT ep.doc FROM endpoints ep WHERE ep.tenant_id = d.tenant_id AND ep.id = d.endpoint_id) END
		FROM deliveries d WHERE d.id = $1 FOR UPDATE OF d`, id)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	var row storedDelivery
	if _, err := br.Exec(); err != nil {
		return row, err
	}
	var doc, epDoc []byte
	var ordered bool
	var head *string
	err := br.QueryRow().Scan(&doc, &row.leaseToken, &row.leaseUntil, &ordered, &head, &epDoc)
	if errors.Is(err, pgx.ErrNoRows) {
		return row, engine.DeliveryNotFound()
	}
	if err != nil {
		return row, err
	}
	if row.d, err = decodeDelivery(doc); err != nil {
		return row, err
	}
	if ordered {
		v, err := viewOf(head, epDoc)
		if err != nil {
			return row, err
		}
		row.view = &v
	}
	return row, nil
}

// lockRow reads a delivery from a row of (doc, lease_token,
// lease_until).
func lockRow(r pgx.Row) (storedDelivery, error) {
	var row storedDelivery
	var doc []byte
	if err := r.Scan(&doc, &row.leaseToken, &row.leaseUntil); err != nil {
		return row, err
	}
	var err error
	row.d, err = decodeDelivery(doc)
	return row, err
}

// leaseChange says what a write of a delivery does to its lease.
type leaseChange int

const (
	// leaseKeep: the writer holds no lease (an API call, another node):
	// a live lease stays, and a pending delivery is not due before it
	// ends.
	leaseKeep leaseChange = iota
	// leaseEnd: the holder recorded its attempt; the lease ends, unless
	// the delivery is due again at once (replayed while it was
	// attempted), when the holder keeps it under a renewed lease.
	leaseEnd
	// leaseRenewed is what leaseEnd came to when the holder keeps it.
	leaseRenewed
)

// saveDelivery writes after, the next state of row, as change says,
// settled in its line (engine.SettleLine, with row.view or the line as
// read now), and returns it as stored with what became of the lease;
// when the line's head left, it promotes the next (advanceLine). tx holds
// the lock of an ordered delivery's line.
func (s *Store) saveDelivery(ctx context.Context, tx pgx.Tx, row storedDelivery, after engine.Delivery, change leaseChange) (engine.Delivery, leaseChange, error) {
	before := row.d
	if after.ID != before.ID || after.TenantID != before.TenantID || after.EndpointID != before.EndpointID || after.Line != before.Line {
		return engine.Delivery{}, change, fmt.Errorf("postgres: delivery %s: a transition changed who it belongs to or its line", before.ID)
	}
	advance := false
	if after.Line != "" {
		var view engine.LineView
		if row.view != nil {
			view = *row.view
		} else {
			var err error
			if view, err = lineView(ctx, tx, after); err != nil {
				return engine.Delivery{}, change, err
			}
		}
		after, advance = engine.SettleLine(before, after, view)
		if err := engine.CheckStorable(after); err != nil {
			return engine.Delivery{}, change, fmt.Errorf("postgres: update delivery %s: %w", after.ID, err)
		}
	}
	after, change, err := s.writeDelivery(ctx, tx, row, after, change)
	if err != nil || !advance {
		return after, change, err
	}
	_, err = s.advanceLine(ctx, tx, lineID{after.EndpointID, after.Line}, after.Updated)
	return after, change, err
}

// writeDelivery writes after over row, as change says, and returns it
// as stored with what became of the lease.
func (s *Store) writeDelivery(ctx context.Context, tx pgx.Tx, row storedDelivery, after engine.Delivery, change leaseChange) (engine.Delivery, leaseChange, error) {
	after = normalizeDelivery(after)
	doc, err := encodeDelivery(after)
	if err != nil {
		return engine.Delivery{}, change, err
	}
	next := dueAt(after)
	due, token, until := next, row.leaseToken, row.leaseUntil
	now := s.now().UnixNano()
	switch {
	case after.State != engine.StatePending:
		token, until = nil, nil
	case change == leaseEnd && *due <= now:
		renewed := now + s.lease.Nanoseconds()
		due, until, change = &renewed, &renewed, leaseRenewed
	case change == leaseEnd:
		token, until = nil, nil
	case until != nil && *until > now && *until > *due:
		due = until // claimed elsewhere: not due before its lease ends
	}
	_, err = tx.Exec(ctx, `UPDATE deliveries SET state = $2, next_attempt_at = $3, due_at = $4, dead_at = $5, lease_token = $6, lease_until = $7, doc = $8, blocking = $9 WHERE id = $1`,
		after.ID, string(after.State), next, due, deadAt(after), token, until, doc, after.Blocking())
	return after, change, err
}

// UpdateDeliveries applies fn to at most max of the deliveries sel
// selects, in one transaction, and returns them as stored: the paused
// deliveries of sel.EndpointID in ID order, or the dead letters that died
// in [sel.Since, sel.Until) (no upper bound when Until is zero), of
// sel.EndpointID when set, in death order. They are saved in line order
// (a range replay makes the lowest Sequence of a line its head), under
// the locks of their lines.
//
// Selecting the paused deliveries (an enabling of their endpoint) it
// first takes the tenant's lock alone, as DeleteTenant does: it waits for
// the tenant's ingests in flight, whose paused deliveries it then sees.
//
// The dead letters it brings back into the backlog (a range replay's:
// final before, not after) are noted with the counting Scheduler, as a
// backfill's deliveries are (backlog.go), so that the pending bounds a
// range replay is paced by see them before the next count.
func (s *Store) UpdateDeliveries(ctx context.Context, sel engine.Selection, max int, fn func(engine.Delivery) engine.Delivery) ([]engine.Delivery, error) {
	var where, order string
	var args []any
	switch sel.State {
	case engine.StatePaused:
		where, order = `tenant_id = $1 AND state = 'paused' AND endpoint_id = $2`, "id"
		args = []any{sel.Tenant, sel.EndpointID, max}
	case engine.StateDead:
		where, order = `tenant_id = $1 AND state = 'dead'
			AND dead_at >= $2 AND ($3::bigint IS NULL OR dead_at < $3) AND ($4 = '' OR endpoint_id = $4)`, "dead_at, id"
		var since int64 = -1 << 63
		if !sel.Since.IsZero() {
			since = sel.Since.UnixNano()
		}
		args = []any{sel.Tenant, since, ns(sel.Until), sel.EndpointID, max}
	default:
		return nil, fmt.Errorf("postgres: update deliveries: cannot select by state %q", sel.State)
	}
	if max <= 0 {
		return []engine.Delivery{}, nil
	}
	limit := fmt.Sprintf(" ORDER BY %s LIMIT $%d", order, len(args))
	var out, back []engine.Delivery
	var xid uint64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out, back = []engine.Delivery{}, nil
		if sel.State == engine.StatePaused {
			// The tenant's lock, alone: the ingests in flight (an
			// EnqueueTx open in an application's transaction among
			// them) may have read the endpoint disabled before it was
			// enabled, and make paused deliveries that this selection
			// must see, or nothing resumes them. Their commits come
			// first; an ingest after the enabling reads it enabled.
			if _, err := tx.Exec(ctx, lockTenantSQL, sel.Tenant); err != nil {
				return err
			}
		}
		// The selection's lines' locks, then its rows'. A row that came
		// into the selection between the two statements may be of a
		// line not locked yet: its lock is taken after, out of order
		// (PostgreSQL breaks a deadlock that makes, and tx runs again).
		b := &pgx.Batch{}
		b.Queue(lockLinesSQL("SELECT endpoint_id, line FROM deliveries WHERE "+where+limit), args...)
		b.Queue("SELECT d.doc, d.lease_token, d.lease_until FROM deliveries d WHERE "+where+limit+" FOR UPDATE", args...)
		locked := map[lineID]bool{}
		var selected []storedDelivery
		var lateEndpoints, lateLines []string
		err := func() error {
			br := tx.SendBatch(ctx, b)
			defer br.Close()
			rows, err := br.Query()
			if err != nil {
				return err
			}
			var l lineID
			if _, err := pgx.ForEachRow(rows, []any{&l.endpoint, &l.line, nil, nil}, func() error { locked[l] = true; return nil }); err != nil {
				return err
			}
			rows, err = br.Query()
			if err != nil {
				return err
			}
			selected, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (storedDelivery, error) {
				var row storedDelivery
				var doc []byte
				if err := r.Scan(&doc, &row.leaseToken, &row.leaseUntil); err != nil {
					return row, err
				}
				row.d, err = decodeDelivery(doc)
				if l := (lineID{row.d.EndpointID, row.d.Line}); row.d.Line != "" && !locked[l] {
					locked[l] = true
					lateEndpoints, lateLines = append(lateEndpoints, l.endpoint), append(lateLines, l.line)
				}
				return row, err
			})
			return err
		}()
		if err != nil {
			return err
		}
		if len(lateLines) > 0 {
			if _, err := tx.Exec(ctx, lockLinesSQL("SELECT * FROM unnest($1::text[], $2::text[]) AS u(endpoint_id, line)"), lateEndpoints, lateLines); err != nil {
				return err
			}
		}
		out = make([]engine.Delivery, len(selected))
		for _, i := range sortInLineOrder(selected) {
			row := selected[i]
			after := fn(row.d)
			if err := engine.CheckTransition(row.d, after); err != nil {
				return fmt.Errorf("postgres: update %s deliveries of %s: %w", sel.State, sel.Tenant, err)
			}
			stored, _, err := s.saveDelivery(ctx, tx, row, after, leaseKeep)
			if err != nil {
				return err
			}
			out[i] = stored
			if backlogOf(row.d).Total() == 0 && backlogOf(stored).Total() > 0 {
				back = append(back, stored)
			}
		}
		if len(back) > 0 && s.counter.Load() != nil {
			var id int64
			if err := tx.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&id); err != nil {
				return err
			}
			xid = uint64(id)
		}
		return s.notifyDue(ctx, tx, out)
	})
	if err != nil {
		return nil, err
	}
	if c := s.counter.Load(); c != nil && len(back) > 0 && xid != 0 {
		c.noteMade(xid, back)
	}
	return out, nil
}

// notifyDue wakes the schedulers of every node (LISTEN) when one of ds
// is pending: made due by a replay or a resume. The notification is sent
// at commit, not before.
func (s *Store) notifyDue(ctx context.Context, tx pgx.Tx, ds []engine.Delivery) error {
	for _, d := range ds {
		if d.State == engine.StatePending {
			_, err := tx.Exec(ctx, "SELECT pg_notify($1, '')", s.channel())
			return err
		}
	}
	return nil
}

// RetryIndex calls fn for every pending delivery, in due order, then
// delivery ID order, from one snapshot. A delivery a node holds is due
// when its lease ends. fn must not call the Store.
func (s *Store) RetryIndex(ctx context.Context, fn func(engine.RetryEntry) error) error {
	return s.readTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT d.due_at, d.id, d.endpoint_id, ep.tenant_id FROM deliveries d
			LEFT JOIN endpoints ep ON ep.tenant_id = d.tenant_id AND ep.id = d.endpoint_id
			WHERE d.state = 'pending' ORDER BY d.due_at, d.id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var due int64
			var e engine.RetryEntry
			var tenant *string
			if err := rows.Scan(&due, &e.DeliveryID, &e.EndpointID, &tenant); err != nil {
				return err
			}
			e.Due = time.Unix(0, due).UTC()
			if tenant != nil {
				e.TenantID = *tenant
			}
			if err := fn(e); err != nil {
				return &callerError{err}
			}
		}
		return rows.Err()
	})
}

// FanOut returns none: AppendEvent writes an event's deliveries in the
// statement that writes the event (one round trip for most ingests, see
// docs/performance.md, "Owed fan-out"), so no fan-out is ever owed.
func (s *Store) FanOut(ctx context.Context, max int) ([]engine.FannedOut, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return []engine.FannedOut{}, nil
}
