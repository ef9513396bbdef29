package memstore

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// A page cursor is base64url of a position in its listing: a time or an
// event's place in the log (8 bytes, big-endian) and a delivery ID.

func encodeCursor(n uint64, id string) string {
	return base64.RawURLEncoding.EncodeToString(append(binary.BigEndian.AppendUint64(nil, n), id...))
}

func decodeCursor(cursor string) (uint64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return 0, "", err
	}
	if len(b) < 8 {
		return 0, "", errors.New("short cursor")
	}
	return binary.BigEndian.Uint64(b), string(b[8:]), nil
}

// DeadLetters lists tenant's dead deliveries, oldest death first (then by
// ID), after cursor (empty: from the start), at most limit (at least 1,
// else CodeInvalidField "limit"). It returns the cursor of the next page,
// empty at the end: the position of the page's last dead letter, so a
// replay between pages neither repeats nor skips one. A cursor this
// listing did not return is CodeInvalidField "cursor".
func (s *Store) DeadLetters(ctx context.Context, tenant, cursor string, limit int) ([]engine.Delivery, string, error) {
	if limit < 1 {
		return nil, "", engine.InvalidLimit()
	}
	var after *engine.Delivery // the position of the cursor
	if cursor != "" {
		ns, id, err := decodeCursor(cursor)
		if err != nil || id == "" {
			return nil, "", engine.InvalidCursor()
		}
		after = &engine.Delivery{ID: id, DeadAt: time.Unix(0, int64(ns))}
	}
	if err := s.lock(ctx); err != nil {
		return nil, "", err
	}
	defer s.mu.Unlock()
	dead := s.tenantDeliveries(tenant, func(d *engine.Delivery) bool {
		return d.State == engine.StateDead && (after == nil || byDeath(d, after) > 0)
	}, byDeath)
	out := []engine.Delivery{}
	for _, d := range dead[:min(len(dead), limit)] {
		out = append(out, copyDelivery(*d))
	}
	next := ""
	if len(dead) > limit {
		last := out[len(out)-1]
		next = encodeCursor(uint64(last.DeadAt.UnixNano()), last.ID)
	}
	return out, next, nil
}

// logEntry is a delivery at its place in the delivery log.
type logEntry struct {
	seq uint64
	d   *engine.Delivery
}

// newestFirst orders the delivery log: by event, newest first, then by
// delivery ID, highest first.
func newestFirst(a, b logEntry) int {
	if c := cmp.Compare(b.seq, a.seq); c != 0 {
		return c
	}
	return strings.Compare(b.d.ID, a.d.ID)
}

// ListDeliveries lists tenant's deliveries newest first (by their event's
// place in the log, then by ID, highest first) that f matches, at most
// f.Limit (at least 1, else CodeInvalidField "limit"), from f.Cursor on.
// It returns the cursor of the next page, empty when no delivery after
// the page matches: the position the next page starts at, so deliveries
// made meanwhile never shift it. A cursor this listing did not return is
// CodeInvalidField "cursor".
func (s *Store) ListDeliveries(ctx context.Context, tenant string, f engine.DeliveryFilter) ([]engine.Delivery, string, error) {
	if f.Limit < 1 {
		return nil, "", engine.InvalidLimit()
	}
	from := logEntry{seq: ^uint64(0), d: &engine.Delivery{ID: "\xff"}}
	if f.Cursor != "" {
		seq, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, "", engine.InvalidCursor()
		}
		from = logEntry{seq: seq, d: &engine.Delivery{ID: id}}
	}
	if err := s.lock(ctx); err != nil {
		return nil, "", err
	}
	defer s.mu.Unlock()
	var entries []logEntry
	for _, e := range s.log[tenant] {
		for _, id := range e.deliveries {
			if entry := (logEntry{e.ev.Seq, s.deliveries[id]}); newestFirst(entry, from) >= 0 {
				entries = append(entries, entry)
			}
		}
	}
	slices.SortFunc(entries, newestFirst)
	out := []engine.Delivery{}
	for _, entry := range entries {
		if !f.Matches(*entry.d) {
			continue
		}
		if len(out) == f.Limit { // one more matches: the next page starts at it
			return out, encodeCursor(entry.seq, entry.d.ID), nil
		}
		out = append(out, copyDelivery(*entry.d))
	}
	return out, "", nil
}

// ListEvents lists tenant's events in log order after f.After (the
// decimal place in the log a previous page returned; "" from the start;
// CodeInvalidField "after" for anything else) that f matches
// (EventFilter.Matches), at most f.Limit (at least 1, else
// CodeInvalidField "limit"). It returns the cursor of the next page,
// empty when no event after the page matches.
func (s *Store) ListEvents(ctx context.Context, tenant string, f engine.EventFilter) ([]engine.Event, string, error) {
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
	if err := s.lock(ctx); err != nil {
		return nil, "", err
	}
	defer s.mu.Unlock()
	log := s.log[tenant]
	i, _ := slices.BinarySearchFunc(log, after+1, func(e *event, seq uint64) int { return cmp.Compare(e.ev.Seq, seq) })
	out := []engine.Event{}
	for ; i < len(log); i++ {
		ev := log[i].ev
		if !f.Matches(ev) {
			continue
		}
		if len(out) == f.Limit { // one more matches: the next page starts at it
			return out, strconv.FormatUint(ev.Seq-1, 10), nil
		}
		out = append(out, copyEvent(ev))
	}
	return out, "", nil
}

// RecentEvents returns tenant's last n events, newest first, each with
// its deliveries in ID order, without their bodies.
func (s *Store) RecentEvents(ctx context.Context, tenant string, n int) ([]engine.EventDeliveries, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := []engine.EventDeliveries{}
	for _, e := range slices.Backward(s.log[tenant]) {
		if len(out) >= n {
			break
		}
		ev := e.ev
		ev.Body = nil
		out = append(out, engine.EventDeliveries{Event: ev, Deliveries: s.deliveriesOf(e)})
	}
	return out, nil
}
