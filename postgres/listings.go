package postgres

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/engine"
)

// A page cursor of the dead letters and the delivery log is base64url of
// a position in its listing: a time or an event's place in the log (8
// bytes, big-endian) and a delivery ID, as in the other stores.

func encodeCursor(n int64, id string) string {
	return base64.RawURLEncoding.EncodeToString(append(binary.BigEndian.AppendUint64(nil, uint64(n)), id...))
}

func decodeCursor(cursor string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return 0, "", err
	}
	if len(b) < 9 || !utf8.Valid(b[8:]) || bytes.IndexByte(b[8:], 0) >= 0 {
		return 0, "", errors.New("not a cursor")
	}
	return int64(binary.BigEndian.Uint64(b)), string(b[8:]), nil
}

// DeadLetters lists tenant's dead deliveries, oldest death first (then by
// ID), after cursor, at most limit; the next page's cursor is the
// position of this page's last dead letter, so a replay between pages
// neither repeats nor skips one.
func (s *Store) DeadLetters(ctx context.Context, tenant, cursor string, limit int) ([]engine.Delivery, string, error) {
	if limit < 1 {
		return nil, "", engine.InvalidLimit()
	}
	var after int64 = -1 << 63
	afterID := ""
	if cursor != "" {
		var err error
		if after, afterID, err = decodeCursor(cursor); err != nil {
			return nil, "", engine.InvalidCursor()
		}
	}
	ds, err := collectDocs(ctx, s.pool, decodeDelivery, `SELECT doc FROM deliveries
		WHERE tenant_id = $1 AND state = 'dead' AND (dead_at, id) > ($2, $3)
		ORDER BY dead_at, id LIMIT $4`, tenant, after, afterID, limit+1)
	if err != nil {
		return nil, "", err
	}
	if len(ds) <= limit {
		return ds, "", nil
	}
	last := ds[limit-1]
	return ds[:limit], encodeCursor(last.DeadAt.UnixNano(), last.ID), nil
}

// lastStatusInSQL is engine.StatusClass.Matches of the delivery d, for
// the class whose LastStatus range is [$10, $11]: it has an attempt, and
// its last_status (absent: 0) is in the range. It reads the document as
// json, not jsonb, which would refuse a response excerpt's \u0000; only
// a filter by status class pays for it, so no column holds the status.
const lastStatusInSQL = `(SELECT j->'attempts'->0 IS NOT NULL
		AND coalesce((j->>'last_status')::int, 0) BETWEEN $10 AND $11
		FROM (SELECT convert_from(d.doc, 'UTF8')::json AS j) doc)`

// ListDeliveries lists tenant's deliveries that f matches, newest first
// (by their event's place in the log, then by ID, highest first), at most
// f.Limit, from f.Cursor on; the next page's cursor is the position the
// next page starts at, so deliveries made meanwhile never shift it.
func (s *Store) ListDeliveries(ctx context.Context, tenant string, f engine.DeliveryFilter) ([]engine.Delivery, string, error) {
	if f.Limit < 1 {
		return nil, "", engine.InvalidLimit()
	}
	var from *int64 // nil: from the newest
	fromID := ""
	if f.Cursor != "" {
		seq, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, "", engine.InvalidCursor()
		}
		from, fromID = &seq, id
	}
	state := f.State
	if state == engine.StateDelivering {
		state = engine.StatePending
	}
	var since, until *int64
	if !f.Since.IsZero() {
		since = ns(f.Since)
	}
	if !f.Until.IsZero() {
		until = ns(f.Until)
	}
	var statusLo, statusHi *int // nil: any status
	if lo, hi, ok := f.Status.Range(); ok {
		statusLo, statusHi = &lo, &hi
	}
	rows, err := s.pool.Query(ctx, `SELECT d.event_seq, `+deliveryReadSQL+` FROM deliveries d
		WHERE tenant_id = $1 AND ($2::bigint IS NULL OR (event_seq, id) <= ($2, $3))
		AND ($4 = '' OR state = $4) AND ($5 = '' OR event_type = $5) AND ($6 = '' OR endpoint_id = $6)
		AND ($7::bigint IS NULL OR created >= $7) AND ($8::bigint IS NULL OR created < $8)
		AND (CASE WHEN $10::int IS NULL THEN true ELSE `+lastStatusInSQL+` END)
		AND ($12 = '' OR EXISTS (SELECT 1 FROM events e WHERE e.seq = d.event_seq AND $12 = ANY(e.channels)))
		ORDER BY event_seq DESC, id DESC LIMIT $9`,
		tenant, from, fromID, string(state), f.Type, f.EndpointID, since, until, f.Limit+1, statusLo, statusHi, f.Channel)
	if err != nil {
		return nil, "", storeError(err)
	}
	type entry struct {
		seq int64
		d   engine.Delivery
	}
	entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entry, error) {
		var e entry
		var doc []byte
		var behind *string
		if err := r.Scan(&e.seq, &doc, &behind); err != nil {
			return e, err
		}
		e.d, err = decodeDelivery(doc)
		if behind != nil {
			e.d.WaitingBehind = *behind
		}
		return e, err
	})
	if err != nil {
		return nil, "", storeError(err)
	}
	out := make([]engine.Delivery, 0, min(len(entries), f.Limit))
	for _, e := range entries[:min(len(entries), f.Limit)] {
		out = append(out, e.d)
	}
	if len(entries) <= f.Limit {
		return out, "", nil
	}
	next := entries[f.Limit]
	return out, encodeCursor(next.seq, next.d.ID), nil
}

// feedWait bounds how long ListEvents waits for transactions that began
// before the newest events it sees to end (see the schema's comment on
// events.seq); after it, the page ends below them. It outlasts the
// longest a webhookd transaction can hold the line (a wait for a lock,
// LockTimeout, then an idle stall, IdleInTransactionTimeout), so that
// only a transaction of another program cuts a page short.
const feedWait = LockTimeout + IdleInTransactionTimeout

// ListEvents lists tenant's events in log order after f.After (the
// decimal place in the log a previous page returned), of f.Type, created
// at or after f.Since and on channel f.Channel when set, at most f.Limit; the next page's
// cursor is empty when the log was read to its end. It reads only below
// the oldest transaction still running (anywhere in the PostgreSQL
// server): an event it does not return yet can only come after the last
// one it does, so a reader following the cursors never misses one.
func (s *Store) ListEvents(ctx context.Context, tenant string, f engine.EventFilter) ([]engine.Event, string, error) {
	if f.Limit < 1 {
		return nil, "", engine.InvalidLimit()
	}
	var after int64 = -1
	if f.After != "" {
		a, err := strconv.ParseUint(f.After, 10, 63)
		if err != nil {
			return nil, "", engine.InvalidFeedCursor()
		}
		after = int64(a)
	}
	var since int64 = -1 << 63
	if !f.Since.IsZero() {
		since = f.Since.UnixNano()
	}
	deadline := time.Now().Add(feedWait)
	for {
		var out []engine.Event
		var held bool
		err := s.readTx(ctx, func(tx pgx.Tx) error {
			var horizon int64
			if err := tx.QueryRow(ctx, "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint * 65536").Scan(&horizon); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, `SELECT `+eventColsSQL+`, body FROM events
				WHERE tenant_id = $1 AND seq > $2 AND seq < $3 AND ($4 = '' OR type = $4) AND created >= $5
				AND ($7 = '' OR $7 = ANY(channels))
				ORDER BY seq LIMIT $6`, tenant, after, horizon, f.Type, since, f.Limit+1, f.Channel)
			if err != nil {
				return err
			}
			if out, err = pgx.CollectRows(rows, eventRow); err != nil {
				return err
			}
			if len(out) > f.Limit {
				return nil
			}
			return tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM events WHERE tenant_id = $1 AND seq >= $2)", tenant, max(after+1, horizon)).Scan(&held)
		})
		if err != nil {
			return nil, "", err
		}
		if held && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return nil, "", ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		if out == nil {
			out = []engine.Event{}
		}
		if len(out) <= f.Limit {
			return out, "", nil
		}
		return out[:f.Limit], strconv.FormatUint(out[f.Limit-1].Seq, 10), nil
	}
}

// eventColsSQL are the columns of events scanEvent reads before the
// body.
const eventColsSQL = "seq, id, tenant_id, type, created, api_version, sequence, ordering_key, test, channels, deliver_at, ingest_trace"

// scanEvent reads an event from eventColsSQL and body.
func scanEvent(r pgx.Row) (engine.Event, error) {
	var ev engine.Event
	var seq, created, sequence int64
	var deliverAt *int64
	var trace *string
	if err := r.Scan(&seq, &ev.ID, &ev.TenantID, &ev.Type, &created, &ev.APIVersion, &sequence, &ev.OrderingKey, &ev.Test, &ev.Channels, &deliverAt, &trace, &ev.Body); err != nil {
		return ev, err
	}
	if trace != nil {
		ev.IngestTrace = *trace
	}
	if deliverAt != nil {
		ev.DeliverAt = time.Unix(0, *deliverAt).UTC()
	}
	if len(ev.Channels) == 0 {
		ev.Channels = nil
	}
	ev.Seq, ev.Created, ev.Sequence = uint64(seq), time.Unix(0, created).UTC(), uint64(sequence)
	return ev, nil
}

// eventRow is scanEvent for pgx.CollectRows.
func eventRow(r pgx.CollectableRow) (engine.Event, error) { return scanEvent(r) }

// RecentEvents returns tenant's last n events, newest first, each with
// its deliveries in ID order, without their bodies.
func (s *Store) RecentEvents(ctx context.Context, tenant string, n int) ([]engine.EventDeliveries, error) {
	out := []engine.EventDeliveries{}
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := tx.Query(ctx, `SELECT `+eventColsSQL+`, NULL::bytea FROM events
			WHERE tenant_id = $1 ORDER BY seq DESC LIMIT $2`, tenant, n)
		if err != nil {
			return err
		}
		evs, err := pgx.CollectRows(rows, eventRow)
		if err != nil {
			return err
		}
		seqs := make([]int64, len(evs))
		at := make(map[string]int, len(evs))
		for i, ev := range evs {
			seqs[i], at[ev.ID] = int64(ev.Seq), i
			out = append(out, engine.EventDeliveries{Event: ev, Deliveries: []engine.Delivery{}})
		}
		ds, err := collectDeliveries(ctx, tx, "SELECT "+deliveryReadSQL+" FROM deliveries d WHERE tenant_id = $1 AND event_seq = ANY($2) ORDER BY id", tenant, seqs)
		if err != nil {
			return err
		}
		for _, d := range ds {
			i := at[d.EventID]
			out[i].Deliveries = append(out[i].Deliveries, d)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
