package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// AppendEvent is ingest, in one transaction (see engine.Store). The tenant
// must exist (CodeTenantNotFound).
// With an Idempotency-Key that the tenant used before and whose record has not expired at in.Event.Created, nothing is
// appended: the result is the first event and its deliveries (Duplicate)
// when the request hash matches, CodeIdempotencyConflict when it does not,
// whether or not the type is still in the catalogue. Otherwise the type
// must be in the catalogue (CodeUnknownEventType), unless the tenant is
// engine.OperatorTenant. Then in.CheckType, when set, has its say on the type's entry, in each
// of the transactions below. Otherwise the event gets the next place in the log, its tenant's next
// Sequence (engine.NewEvent.Sequenced) and one Pending
// delivery, due at in.Event.Created, per enabled endpoint of the tenant
// that subscribes to the type. Deliveries are returned in ID order, the
// order Event lists them in. A refused or duplicate ingest is answered from
// a read transaction and takes no commit.
func (db *DB) AppendEvent(ctx context.Context, in engine.NewEvent) (engine.IngestResult, error) {
	ev := in.Event
	if ev.ID == "" || strings.ContainsRune(ev.ID, sep) {
		return engine.IngestResult{}, engine.InvalidEventID()
	}
	if ev.Type == "" {
		return engine.IngestResult{}, engine.EventTypeRequired()
	}
	// Check first in a read transaction, so that a refused or duplicate
	// ingest never enters the commit loop, where a failing write costs
	// the rest of its batch a rerun. The write checks again. The type's
	// check (a schema's validation: several µs) runs after the read
	// transaction, on the entry it read (the type cache's, which
	// outlives it), so that no read transaction is held open for it:
	// each one pins the pages it sees and the file's mapping.
	var res engine.IngestResult
	var dup bool
	var et *engine.EventType
	err := db.view(ctx, func(tx *bolt.Tx) error {
		d, _, _, typeRecord, err := checkIngestKey(tx, in)
		switch {
		case err != nil:
			return err
		case d != nil:
			res, dup = *d, true
		case in.CheckType != nil && typeRecord != nil: // nil: an operator event of a type not in the catalogue
			t, err := db.fanOut.types.ingestType(ev.Type, typeRecord)
			if err != nil {
				return fmt.Errorf("event type %s: %w", ev.Type, err)
			}
			et = &t
		}
		return nil
	})
	if err == nil && et != nil {
		err = in.CheckType(*et)
	}
	if err != nil {
		return engine.IngestResult{}, wrap("append event "+ev.ID, err)
	}
	if dup {
		return res, nil
	}
	err = db.updateAck(ctx, func(tx *bolt.Tx) error {
		var err error
		res, err = appendEvent(tx, in, &db.fanOut, db.batchAcks > db.owedAbove)
		return err
	})
	if err != nil {
		return engine.IngestResult{}, wrap("append event "+ev.ID, err)
	}
	return res, nil
}

// checkIngest makes ingest's checks of in: the tenant exists, the type is
// in the catalogue, the Idempotency-Key (a live record with the same
// request hash gives the duplicate result, with another hash a
// conflict) and, for an event that is no duplicate, in.CheckType with
// the type's entry (read through types). It returns the tenant's record
// (bbolt's memory: valid while tx is) and the expired record the ingest
// replaces, if any. It only reads.
func checkIngest(tx *bolt.Tx, in engine.NewEvent, types *typeCache) (dup *engine.IngestResult, expired *idempotencyRecord, tenantRecord []byte, err error) {
	dup, expired, tenantRecord, typeRecord, err := checkIngestKey(tx, in)
	if err != nil || dup != nil || in.CheckType == nil || typeRecord == nil { // nil: an operator event of a type not in the catalogue
		return dup, expired, tenantRecord, err
	}
	et, err := types.ingestType(in.Event.Type, typeRecord)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("event type %s: %w", in.Event.Type, err)
	}
	if err := in.CheckType(et); err != nil {
		return nil, nil, nil, err
	}
	return nil, expired, tenantRecord, nil
}

// checkIngestKey is checkIngest but for CheckType; it returns the
// type's record too (bbolt's memory).
func checkIngestKey(tx *bolt.Tx, in engine.NewEvent) (dup *engine.IngestResult, expired *idempotencyRecord, tenantRecord, typeRecord []byte, err error) {
	ev := in.Event
	tenant := ev.TenantID
	if validTenantID(tenant) {
		tenantRecord = tx.Bucket(bucketTenants).Get([]byte(tenant))
	}
	if tenantRecord == nil {
		return nil, nil, nil, nil, engine.TenantNotFound()
	}
	typeRecord = tx.Bucket(bucketEventTypes).Get([]byte(ev.Type))
	// The type's absence is checked after the key, as its status is
	// (CheckType): a repeat of an event taken before its type left the
	// catalogue is answered that event.
	unknown := typeRecord == nil && tenant != engine.OperatorTenant
	if in.IdempotencyKey == "" {
		if unknown {
			return nil, nil, nil, nil, engine.UnknownEventType(ev.Type)
		}
		return nil, nil, tenantRecord, typeRecord, nil
	}
	v := tx.Bucket(bucketIdempotency).Get(idempotencyKey(tenant, in.IdempotencyKey))
	var rec idempotencyRecord
	if v != nil {
		var err error
		if rec, err = decodeIdempotency(v); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	switch {
	case (v == nil || !ev.Created.Before(rec.Expires)) && unknown:
		return nil, nil, nil, nil, engine.UnknownEventType(ev.Type)
	case v == nil:
		return nil, nil, tenantRecord, typeRecord, nil
	case !ev.Created.Before(rec.Expires):
		return nil, &rec, tenantRecord, typeRecord, nil
	}
	if rec.RequestHash != in.RequestHash {
		return nil, nil, nil, nil, engine.IdempotencyConflict()
	}
	first, ds, owed, err := getEventOwed(tx, rec.EventID)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("idempotency record points at event %s: %w", rec.EventID, err)
	}
	return &engine.IngestResult{Event: first, Deliveries: ds, Duplicate: true, Owed: owed}, nil, tenantRecord, typeRecord, nil
}

// fanOut is what ingest's fan-out keeps from one commit to the next: the
// endpoints it decoded (a cache) and the list of a tenant's endpoints it
// hands to engine.NewEvent.Deliveries, reused. Only the commit loop uses
// it, one transaction at a time.
type fanOut struct {
	cache     endpointCache
	endpoints []engine.Endpoint
	// types is the event types CheckType was given; AppendEvent's read
	// check uses it too, concurrently (it has a lock of its own).
	types typeCache
}

// appendEvent is the transaction of AppendEvent; it reads the tenant's
// endpoints through f (forEachEndpoint). With owe it leaves the fan-out
// owed when it may (planFanOut); without, it stores the deliveries.
func appendEvent(tx *bolt.Tx, in engine.NewEvent, f *fanOut, owe bool) (engine.IngestResult, error) {
	ev := in.Event
	tenant := ev.TenantID
	dup, expired, tenantRecord, err := checkIngest(tx, in, &f.types)
	if err != nil {
		return engine.IngestResult{}, err
	}
	if dup != nil {
		return *dup, nil
	}
	idem := tx.Bucket(bucketIdempotency)
	expiry := tx.Bucket(bucketIdempotencyIndex)
	if expired != nil {
		// The new event's record replaces it below.
		if err := expiry.Delete(expiryKey(expired.Expires, tenant, in.IdempotencyKey)); err != nil {
			return engine.IngestResult{}, err
		}
	}

	sequences := tx.Bucket(bucketTenantSequences)
	var last uint64
	if v := sequences.Get([]byte(tenant)); v != nil {
		if last, err = decodeSeq(v); err != nil {
			return engine.IngestResult{}, fmt.Errorf("sequence of tenant %s: %w", tenant, err)
		}
	}
	ev = in.Sequenced(last + 1)
	if err := sequences.Put([]byte(tenant), u64(ev.Sequence)); err != nil {
		return engine.IngestResult{}, err
	}
	value, err := encodeEvent(ev)
	if err != nil {
		return engine.IngestResult{}, err
	}

	events := tx.Bucket(bucketEvents)
	seq, err := events.NextSequence()
	if err != nil {
		return engine.IngestResult{}, err
	}
	if err := events.Put(u64(seq), value); err != nil {
		return engine.IngestResult{}, err
	}
	ids := tx.Bucket(bucketEventIDs)
	if ids.Get([]byte(ev.ID)) != nil {
		return engine.IngestResult{}, errors.New("event id exists")
	}
	if err := ids.Put([]byte(ev.ID), u64(seq)); err != nil {
		return engine.IngestResult{}, err
	}
	if err := tx.Bucket(bucketTenantEvents).Put(tenantEventKey(tenant, seq), nil); err != nil {
		return engine.IngestResult{}, err
	}
	stored, err := storedEvent(ev, value)
	if err != nil {
		return engine.IngestResult{}, err
	}
	stored.Seq = seq

	endpoints := f.endpoints[:0]
	defer func() { clear(endpoints); f.endpoints = endpoints[:0] }() // keep no endpoint alive
	if err := forEachEndpoint(tx, tenant, &f.cache, func(ep engine.Endpoint) error { endpoints = append(endpoints, ep); return nil }); err != nil {
		return engine.IngestResult{}, err
	}
	policy, err := tenantRetryPolicy(tenantRecord)
	if err != nil {
		return engine.IngestResult{}, fmt.Errorf("tenant %s: %w", tenant, err)
	}
	var ds []engine.Delivery
	if in.Deliveries != nil {
		ds = in.Deliveries(stored, policy, endpoints)
	} else {
		ds = engine.NewDeliveries(stored, policy, endpoints, engine.NewID)
	}
	owed := false
	if plan, ok := planFanOut(tx, stored, ds); ok && owe {
		// The deliveries are stored by FanOut, after this commit.
		if err := tx.Bucket(bucketFanOuts).Put(u64(seq), encodePlan(plan)); err != nil {
			return engine.IngestResult{}, err
		}
		owed = true // ds as planned (PlanOf: no PreviousSequence, not settled in a line)
	}
	tails := tx.Bucket(bucketKeyTails)
	for i, d := range ds {
		if owed {
			break // as planned: FanOut settles each in its line and sets its PreviousSequence
		}
		if d.EventID != stored.ID || d.TenantID != stored.TenantID {
			return engine.IngestResult{}, fmt.Errorf("delivery %s is not of event %s of tenant %s", d.ID, stored.ID, stored.TenantID)
		}
		d.PreviousSequence = 0
		if ev.OrderingKey != "" {
			k := keyTailKey(d.EndpointID, ev.OrderingKey)
			if v := tails.Get(k); v != nil {
				if d.PreviousSequence, err = decodeSeq(v); err != nil {
					return engine.IngestResult{}, fmt.Errorf("key tail of endpoint %s: %w", d.EndpointID, err)
				}
			}
			if err := tails.Put(k, u64(ev.Sequence)); err != nil {
				return engine.IngestResult{}, err
			}
		}
		if ds[i], err = createDelivery(tx, d, seq); err != nil {
			return engine.IngestResult{}, err
		}
	}

	if in.IdempotencyKey != "" {
		rec := idempotencyRecord{EventID: ev.ID, RequestHash: in.RequestHash, Expires: in.IdempotencyExpires}
		if err := idem.Put(idempotencyKey(tenant, in.IdempotencyKey), encodeIdempotency(rec)); err != nil {
			return engine.IngestResult{}, err
		}
		if err := expiry.Put(expiryKey(rec.Expires, tenant, in.IdempotencyKey), nil); err != nil {
			return engine.IngestResult{}, err
		}
	}
	return engine.IngestResult{Event: stored, Deliveries: ds, Owed: owed}, nil
}

// getEvent reads event id and its deliveries (in ID order); it returns
// CodeEventNotFound when there is none.
func getEvent(tx *bolt.Tx, id string) (engine.Event, []engine.Delivery, error) {
	ev, ds, _, err := getEventOwed(tx, id)
	return ev, ds, err
}

// getEventOwed is getEvent, and reports whether the event's fan-out is
// owed: its deliveries are then as planned (plannedDeliveries).
func getEventOwed(tx *bolt.Tx, id string) (engine.Event, []engine.Delivery, bool, error) {
	ev, err := getEventRecord(tx, id)
	if err != nil {
		return engine.Event{}, nil, false, err
	}
	if planned, ok, err := plannedDeliveries(tx, ev, ev.Seq); err != nil || ok {
		return ev, planned, ok, err
	}
	ds := []engine.Delivery{}
	err = eventDeliveries(tx.Bucket(bucketTenantDeliveries).Cursor(), ev.TenantID, ev.Seq, func(did string) error {
		d, err := getDelivery(tx, did)
		if err != nil {
			return fmt.Errorf("delivery of event %s: %w", id, err)
		}
		ds = append(ds, d)
		return nil
	})
	if err != nil {
		return engine.Event{}, nil, false, err
	}
	return ev, ds, false, nil
}

// getEventRecord reads event id (CodeEventNotFound), Seq set.
func getEventRecord(tx *bolt.Tx, id string) (engine.Event, error) {
	seq, v, err := getEventValue(tx, id)
	if err != nil {
		return engine.Event{}, err
	}
	ev, err := decodeEvent(v)
	if err != nil {
		return engine.Event{}, fmt.Errorf("event %s: %w", id, err)
	}
	ev.Seq = seq
	return ev, nil
}

// getEventBody returns the body of event id (CodeEventNotFound), bbolt's
// memory, valid only while tx is open, and its IngestTrace.
func getEventBody(tx *bolt.Tx, id string) ([]byte, string, error) {
	_, v, err := getEventValue(tx, id)
	if err != nil {
		return nil, "", err
	}
	body, trace, err := eventAttempt(v)
	if err != nil {
		return nil, "", fmt.Errorf("event %s: %w", id, err)
	}
	return body, trace, nil
}

// getEventValue returns the sequence number and the record of event id
// (CodeEventNotFound).
func getEventValue(tx *bolt.Tx, id string) (uint64, []byte, error) {
	sv := tx.Bucket(bucketEventIDs).Get([]byte(id))
	if sv == nil {
		return 0, nil, engine.EventNotFound()
	}
	seq, err := decodeSeq(sv)
	if err != nil {
		return 0, nil, fmt.Errorf("event %s: %w", id, err)
	}
	v := tx.Bucket(bucketEvents).Get(u64(seq))
	if v == nil {
		return 0, nil, fmt.Errorf("event %s: sequence %d not in the log", id, seq)
	}
	return seq, v, nil
}

// Event returns event id of tenant and its deliveries, or CodeEventNotFound
// (also when the event belongs to another tenant).
func (db *DB) Event(ctx context.Context, tenant, id string) (engine.Event, []engine.Delivery, error) {
	var ev engine.Event
	var ds []engine.Delivery
	err := db.view(ctx, func(tx *bolt.Tx) error {
		var err error
		ev, ds, err = getEvent(tx, id)
		if err != nil {
			return err
		}
		if ev.TenantID != tenant {
			return engine.EventNotFound()
		}
		return nil
	})
	if err != nil {
		return engine.Event{}, nil, wrap("event "+id, err)
	}
	return ev, ds, nil
}

// defaultPruneMax is how many idempotency records PruneIdempotency deletes
// when asked for max <= 0.
const defaultPruneMax = 1000

// PruneIdempotency deletes up to max idempotency records that have expired
// at now (expiry <= now), oldest first, in one small write transaction, and
// returns how many it deleted. max <= 0 means 1000. Call it in a loop
// until it returns fewer than max. It reads only the expired part of the
// idempotency_expiry index, not every record.
func (db *DB) PruneIdempotency(ctx context.Context, now time.Time, max int) (int, error) {
	if max <= 0 {
		max = defaultPruneMax
	}
	limit := unixNano(now)
	var n int
	err := db.update(ctx, func(tx *bolt.Tx) error {
		n = 0
		idem := tx.Bucket(bucketIdempotency)
		expiry := tx.Bucket(bucketIdempotencyIndex)
		var keys [][]byte
		c := expiry.Cursor()
		for k, _ := c.First(); k != nil && len(keys) < max; k, _ = c.Next() {
			exp, _, err := decodeExpiryKey(k)
			if err != nil {
				return fmt.Errorf("idempotency expiry key %x: %w", k, err)
			}
			if exp > limit {
				break
			}
			keys = append(keys, bytes.Clone(k))
		}
		for _, k := range keys {
			exp, ik, _ := decodeExpiryKey(k)
			// The record may have been replaced by a newer one with a
			// later expiry (and its own index entry): keep that.
			if v := idem.Get(ik); v != nil {
				rec, err := decodeIdempotency(v)
				if err != nil {
					return fmt.Errorf("idempotency record %q: %w", ik, err)
				}
				if unixNano(rec.Expires) == exp {
					if err := idem.Delete(ik); err != nil {
						return err
					}
				}
			}
			if err := expiry.Delete(k); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, wrap("prune idempotency records", err)
	}
	return n, nil
}
