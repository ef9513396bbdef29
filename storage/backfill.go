package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// Backfill is one step of a backfill (see engine.Log), in one
// transaction of the commit loop (a read transaction when step.Max is 0:
// it only counts). It reads the endpoint, then the tenant's events in
// tenant_events after step.After; an event has a delivery to the
// endpoint when one of its tenant_deliveries entries names a delivery
// whose endpoint is it. The deliveries it makes are stored as ingest
// stores one (createDelivery: settled in its line, in log order, with
// its indexes and held counts) under their events' places. Since the
// commit loop runs one transaction at a time, and each reads what the
// ones before wrote, two steps never make a delivery of one event to
// one endpoint.
func (db *DB) Backfill(ctx context.Context, step engine.BackfillStep) (engine.BackfillResult, error) {
	var res engine.BackfillResult
	run := func(tx *bolt.Tx) error {
		var err error
		res, err = backfill(tx, step, step.Max > 0)
		return err
	}
	var err error
	if step.Max > 0 {
		err = db.update(ctx, run)
	} else {
		err = db.view(ctx, run)
	}
	if err != nil {
		return engine.BackfillResult{}, wrap("backfill endpoint "+step.EndpointID, err)
	}
	return res, nil
}

// backfill is the transaction of Backfill; it writes only when write.
func backfill(tx *bolt.Tx, step engine.BackfillStep, write bool) (engine.BackfillResult, error) {
	res := engine.BackfillResult{Created: []engine.Delivery{}}
	ep, found, err := getEndpoint(tx, step.Tenant, step.EndpointID)
	if err != nil {
		return res, err
	}
	if !found {
		return res, engine.EndpointNotFound()
	}
	type made struct {
		d   engine.Delivery
		seq uint64
	}
	var todo []made
	prefix := tenantPrefix(step.Tenant)
	events := tx.Bucket(bucketEvents)
	byEvent := tx.Bucket(bucketTenantDeliveries).Cursor()
	c := tx.Bucket(bucketTenantEvents).Cursor()
	read, last := 0, uint64(0)
	for k, _ := c.Seek(tenantEventKey(step.Tenant, step.After+1)); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if read == max(step.Scan, 1) {
			res.Next = last
			break
		}
		read++
		seq := binary.BigEndian.Uint64(k[len(prefix):])
		last = seq
		v := events.Get(k[len(prefix):])
		if v == nil {
			return res, fmt.Errorf("tenant_events names event %d, not in the log", seq)
		}
		ev, _, err := decodeEventHeader(v)
		if err != nil {
			return res, fmt.Errorf("event %d: %w", seq, err)
		}
		ev.Seq = seq
		if step.Past(ev) {
			break
		}
		if !step.Wants(ev, ep) {
			continue
		}
		has, err := deliveredTo(tx, byEvent, step.Tenant, seq, ep.ID)
		if err != nil {
			return res, fmt.Errorf("event %s: %w", ev.ID, err)
		}
		switch {
		case has:
			res.Existing++
		case len(todo) >= step.Max:
			res.Missing++
		default:
			d, _ := step.Delivery(ev, ep)
			if d.EventID != ev.ID || d.TenantID != ev.TenantID {
				return res, fmt.Errorf("delivery %s is not of event %s of tenant %s", d.ID, ev.ID, ev.TenantID)
			}
			todo = append(todo, made{d, seq})
		}
	}
	if !write {
		return res, nil
	}
	for _, m := range todo {
		d, err := createDelivery(tx, m.d, m.seq)
		if err != nil {
			return res, err
		}
		res.Created = append(res.Created, d)
	}
	return res, nil
}

// deliveredTo reports whether the event at log position seq of tenant has
// a delivery to endpoint id, reading its tenant_deliveries entries with c
// and, of each delivery, only as much of its record as names its
// endpoint.
//
// An event whose fan-out is owed has the deliveries its plan names (the
// endpoints at its acknowledgement): FanOut stores them, and a backfill
// makes one only to an endpoint the plan leaves out.
func deliveredTo(tx *bolt.Tx, c *bolt.Cursor, tenant string, seq uint64, id string) (bool, error) {
	if v := tx.Bucket(bucketFanOuts).Get(u64(seq)); v != nil {
		ps, err := decodePlan(v)
		if err != nil {
			return false, fmt.Errorf("fan-out of event %d: %w", seq, err)
		}
		return slices.ContainsFunc(ps, func(p engine.PlannedDelivery) bool { return p.EndpointID == id }), nil
	}
	deliveries := tx.Bucket(bucketDeliveries)
	found := false
	err := eventDeliveries(c, tenant, seq, func(did string) error {
		if found {
			return nil
		}
		v := deliveries.Get([]byte(did))
		if v == nil {
			return fmt.Errorf("tenant_deliveries names delivery %s, not stored", did)
		}
		ep, err := deliveryEndpoint(v)
		found = ep == id
		return err
	})
	return found, err
}

// deliveryEndpoint returns the endpoint ID of the delivery record v
// without decoding the rest of it (a binary record names it fifth).
func deliveryEndpoint(v []byte) (string, error) {
	if len(v) == 0 || v[0] < formatV2 || v[0] > formatV6 {
		d, err := decodeDelivery(v)
		return d.EndpointID, err
	}
	r := reader{b: v[1:]}
	for range 4 { // id, tenant, event id, event type
		r.skipString()
	}
	id := r.string()
	if r.err != nil {
		return "", fmt.Errorf("decode delivery: %w", r.err)
	}
	return id, nil
}
