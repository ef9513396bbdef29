package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

func init() {
	migrations[1] = backfillTenantIndexes
}

// backfillTenantIndexes is the migration from schema 1 to 2: it fills
// tenant_events and tenant_deliveries from the event log and
// event_deliveries.
func backfillTenantIndexes(tx *bolt.Tx) error {
	te := tx.Bucket(bucketTenantEvents)
	td := tx.Bucket(bucketTenantDeliveries)
	byEvent := tx.Bucket(bucketEventDeliveries).Cursor()
	c := tx.Bucket(bucketEvents).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		seq := binary.BigEndian.Uint64(k)
		ev, err := decodeEvent(v)
		if err != nil {
			return fmt.Errorf("event %d: %w", seq, err)
		}
		if err := te.Put(tenantEventKey(ev.TenantID, seq), nil); err != nil {
			return err
		}
		prefix := eventDeliveryKey(ev.ID, "")
		for dk, _ := byEvent.Seek(prefix); dk != nil && bytes.HasPrefix(dk, prefix); dk, _ = byEvent.Next() {
			if err := td.Put(tenantDeliveryKey(ev.TenantID, seq, string(dk[len(prefix):])), nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxListScan bounds the index entries one listing reads: a filter that
// matches little returns a short page with a cursor to go on from, rather
// than reading a tenant's whole history in one request.
const maxListScan = 20000

// sinceSlack is how far creation times may run against log order: an
// ingest stamps its event's creation time, then commits, so concurrent
// ingests can be logged in the other order by the time that takes. A
// listing since T reads on past T until a delivery created before T minus
// this, and filters on T itself.
const sinceSlack = time.Minute

// ListDeliveries lists tenant's deliveries newest first (by their event's
// place in the log), filtered by f, at most f.Limit, from f.Cursor on. It
// returns the cursor of the next page: where the next delivery f matches
// is, or, when a page has read maxListScan entries, where it stopped
// reading (a short page, maybe empty, that does not know whether more
// match); empty when none follows. A page is read by key, never by
// offset, so deliveries made meanwhile never shift it. CodeInvalidField
// ("cursor") for a cursor this listing did not return.
func (db *DB) ListDeliveries(ctx context.Context, tenant string, f engine.DeliveryFilter) ([]engine.Delivery, string, error) {
	if f.Limit < 1 {
		return nil, "", engine.InvalidLimit()
	}
	prefix := tenantPrefix(tenant)
	start := append(bytes.Clone(prefix[:len(prefix)-1]), sep+1) // just past the tenant's keys
	if f.Cursor != "" {
		from, err := decodeCursor(f.Cursor)
		if err != nil || len(from) < 8 {
			return nil, "", engine.InvalidCursor()
		}
		start = append(bytes.Clone(prefix), from...)
	}
	out := []engine.Delivery{}
	next := ""
	err := db.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketTenantDeliveries).Cursor()
		scanned := 0
		for k := seekAtOrBefore(c, start); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
			if scanned == maxListScan {
				next = encodeCursor(k[len(prefix):]) // the next page reads on from here
				return nil
			}
			scanned++
			d, err := getDelivery(tx, string(k[len(prefix)+8:]))
			if err != nil {
				return err
			}
			if !f.Since.IsZero() && d.Created.Before(f.Since.Add(-sinceSlack)) {
				return nil // the rest are older still
			}
			if !f.Matches(d) {
				continue
			}
			if len(out) == f.Limit { // one more matches: the next page starts at it
				next = encodeCursor(k[len(prefix):])
				return nil
			}
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, "", wrap("list deliveries", err)
	}
	return out, next, nil
}

// seekAtOrBefore moves c to key, or to the last key before it when key is
// not there, and returns that key (nil when there is none).
func seekAtOrBefore(c *bolt.Cursor, key []byte) []byte {
	k, _ := c.Seek(key)
	switch {
	case k == nil:
		k, _ = c.Last()
	case !bytes.Equal(k, key):
		k, _ = c.Prev()
	}
	return k
}

// ListEvents lists tenant's events in log order after f.After (a cursor
// from a previous page; "" from the start) that f matches
// (engine.EventFilter.Matches), at most f.Limit. It returns the cursor to
// pass as After for the next page, empty when no event after the page
// matches (or, as ListDeliveries, where a page of maxListScan entries
// stopped reading). The cursor is a place in the log, as a decimal
// number.
func (db *DB) ListEvents(ctx context.Context, tenant string, f engine.EventFilter) ([]engine.Event, string, error) {
	if f.Limit < 1 {
		return nil, "", engine.InvalidLimit()
	}
	var after uint64
	if f.After != "" {
		var err error
		if after, err = strconv.ParseUint(f.After, 10, 64); err != nil {
			return nil, "", engine.InvalidFeedCursor()
		}
	}
	out := []engine.Event{}
	next := ""
	err := db.view(ctx, func(tx *bolt.Tx) error {
		prefix := tenantPrefix(tenant)
		events := tx.Bucket(bucketEvents)
		c := tx.Bucket(bucketTenantEvents).Cursor()
		scanned := 0
		for k, _ := c.Seek(tenantEventKey(tenant, after+1)); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			seq := binary.BigEndian.Uint64(k[len(prefix):])
			// A next page starts at seq when the scan bound is reached, or
			// when the page is full and one more matches: unfiltered,
			// every event does.
			if scanned == maxListScan || len(out) == f.Limit && f.Type == "" && f.Since.IsZero() && f.Channel == "" {
				next = strconv.FormatUint(seq-1, 10)
				return nil
			}
			scanned++
			v := events.Get(k[len(prefix):])
			if v == nil {
				return fmt.Errorf("tenant_events names event %d, not in the log", seq)
			}
			ev, err := decodeEvent(v)
			if err != nil {
				return fmt.Errorf("event %d: %w", seq, err)
			}
			ev.Seq = seq
			if !f.Matches(ev) {
				continue
			}
			if len(out) == f.Limit {
				next = strconv.FormatUint(seq-1, 10)
				return nil
			}
			out = append(out, ev)
		}
		return nil
	})
	if err != nil {
		return nil, "", wrap("list events", err)
	}
	return out, next, nil
}

// RecentEvents returns tenant's last n events, newest first, each with its
// deliveries: the window the delivery report is computed over.
func (db *DB) RecentEvents(ctx context.Context, tenant string, n int) ([]engine.EventDeliveries, error) {
	out := []engine.EventDeliveries{}
	err := db.view(ctx, func(tx *bolt.Tx) error {
		prefix := tenantPrefix(tenant)
		events := tx.Bucket(bucketEvents)
		c := tx.Bucket(bucketTenantEvents).Cursor()
		end := append(bytes.Clone(prefix[:len(prefix)-1]), sep+1)
		for k := seekAtOrBefore(c, end); k != nil && bytes.HasPrefix(k, prefix) && len(out) < n; k, _ = c.Prev() {
			seq := binary.BigEndian.Uint64(k[len(prefix):])
			ev, err := decodeEvent(events.Get(k[len(prefix):]))
			if err != nil {
				return fmt.Errorf("event %d: %w", seq, err)
			}
			_, ds, err := getEvent(tx, ev.ID)
			if err != nil {
				return err
			}
			ev.Seq = seq
			ev.Body = nil // the report needs no bodies
			out = append(out, engine.EventDeliveries{Event: ev, Deliveries: ds})
		}
		return nil
	})
	if err != nil {
		return nil, wrap("recent events", err)
	}
	return out, nil
}
