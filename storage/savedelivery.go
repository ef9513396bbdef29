package storage

import (
	"bytes"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// This file is the only place that writes a delivery record and the index
// entries its state puts it in. The engine decides every state (see
// engine/transitions.go and engine/lines.go); the indexes follow from the
// state alone:
//
//	state      index          key                                   value
//	Pending    retry_index    due(8) ‖ delivery ID                   endpoint ID
//	Dead       dead_letters   tenant ‖ 0x00 ‖ deadAt(8) ‖ delivery ID  empty
//	Paused     paused         tenant ‖ 0x00 ‖ endpoint ‖ 0x00 ‖ ID     empty
//	Waiting    line_waiting   endpoint ‖ 0x00 ‖ line ‖ 0x00 ‖ sequence(8) ‖ ID   empty
//
// and an ordered delivery that holds its line (engine.HoldsLine: Pending,
// Paused, or Dead and blocking) is also in line_heads under endpoint ‖
// 0x00 ‖ line, with its ID as the value. A Waiting, Paused, or Dead and
// blocking delivery counts in its tenant's held counts (held.go). So the invariants Check verifies
// hold by construction, whatever moved the delivery; that a line has one
// head, and a head whenever it has waiting deliveries, holds because every
// save of an ordered delivery is settled in its line first
// (engine.SettleLine, with the line as this transaction reads it) and a
// line whose head left promotes its first waiting delivery in the same
// transaction (advanceLine).

// stateEntry is an index entry a delivery's state puts it in.
type stateEntry struct {
	bucket, key, value []byte
}

// stateIndex returns the index entries of d's state (n of them, at most
// two).
func stateIndex(d engine.Delivery) (es [2]stateEntry, n int) {
	switch d.State {
	case engine.StatePending:
		es[n], n = stateEntry{bucketRetryIndex, retryKey(d.NextAttemptAt, d.ID), []byte(d.EndpointID)}, n+1
	case engine.StateDead:
		es[n], n = stateEntry{bucketDeadLetters, deadLetterKey(d.TenantID, d.DeadAt, d.ID), nil}, n+1
	case engine.StatePaused:
		es[n], n = stateEntry{bucketPaused, pausedKey(d.TenantID, d.EndpointID, d.ID), nil}, n+1
	case engine.StateWaiting:
		es[n], n = stateEntry{bucketLineWaiting, lineWaitingKey(d.EndpointID, d.Line, d.Sequence, d.ID), nil}, n+1
	}
	if engine.HoldsLine(d) {
		es[n], n = stateEntry{bucketLineHeads, lineKey(d.EndpointID, d.Line), []byte(d.ID)}, n+1
	}
	return es, n
}

// saveDelivery stores after, the next state of before (the delivery as
// stored, read in tx), settled in its line, and moves its index entries
// to match; when the line's head left, it promotes the next (see
// advanceLine). It returns after as a later read returns it.
func saveDelivery(tx *bolt.Tx, before, after engine.Delivery) (engine.Delivery, error) {
	if after.ID != before.ID || after.TenantID != before.TenantID || after.EndpointID != before.EndpointID || after.EventID != before.EventID || after.Line != before.Line {
		return engine.Delivery{}, fmt.Errorf("delivery %s: a transition changed who it belongs to or its line", before.ID)
	}
	after, advance, err := settleLine(tx, before, after)
	if err != nil {
		return engine.Delivery{}, err
	}
	if err := engine.CheckStorable(after); err != nil {
		return engine.Delivery{}, err
	}
	old, nOld := stateIndex(before)
	now, nNow := stateIndex(after)
	for _, o := range old[:nOld] {
		kept := false
		for _, e := range now[:nNow] {
			kept = kept || bytes.Equal(o.bucket, e.bucket) && bytes.Equal(o.key, e.key)
		}
		if !kept {
			if err := tx.Bucket(o.bucket).Delete(o.key); err != nil {
				return engine.Delivery{}, err
			}
		}
	}
	for _, e := range now[:nNow] {
		if err := tx.Bucket(e.bucket).Put(e.key, e.value); err != nil {
			return engine.Delivery{}, err
		}
	}
	if err := countHeld(tx, before, after); err != nil {
		return engine.Delivery{}, err
	}
	out, err := putDelivery(tx, after)
	if err != nil {
		return engine.Delivery{}, err
	}
	if advance {
		if _, _, err := advanceLine(tx, after.EndpointID, after.Line, after.Updated); err != nil {
			return engine.Delivery{}, err
		}
	}
	return out, nil
}

// settleLine returns after settled in its line as tx reads it
// (engine.SettleLine), and whether the line's head left. An unordered
// delivery is returned as it is.
func settleLine(tx *bolt.Tx, before, after engine.Delivery) (engine.Delivery, bool, error) {
	if after.Line == "" {
		return after, false, nil
	}
	view := engine.LineView{Head: string(tx.Bucket(bucketLineHeads).Get(lineKey(after.EndpointID, after.Line))), OnDead: engine.OnDeadSkip}
	if after.State == engine.StateDead && before.State != engine.StateDead {
		// Only a death reads the endpoint's on_dead; a deleted endpoint
		// skips.
		if v := tx.Bucket(bucketEndpoints).Get(endpointKey(after.TenantID, after.EndpointID)); v != nil {
			ep, err := decodeEndpoint(v)
			if err != nil {
				return engine.Delivery{}, false, err
			}
			if ep.OnDead == engine.OnDeadBlock {
				view.OnDead = engine.OnDeadBlock
			}
		}
	}
	after, advance := engine.SettleLine(before, after, view)
	return after, advance, nil
}

// advanceLine promotes the first waiting delivery of the line (endpointID,
// line), whose head just left, to be its head at at
// (engine.PromoteDelivery), and returns it as stored and true. A line
// with none waiting is left with no head.
func advanceLine(tx *bolt.Tx, endpointID, line string, at time.Time) (engine.Delivery, bool, error) {
	prefix := lineWaitingPrefix(endpointID, line)
	k, _ := tx.Bucket(bucketLineWaiting).Cursor().Seek(prefix)
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return engine.Delivery{}, false, nil
	}
	if len(k) <= len(prefix)+8 {
		return engine.Delivery{}, false, fmt.Errorf("malformed line_waiting key %x", k)
	}
	id := string(k[len(prefix)+8:])
	w, err := getDelivery(tx, id)
	if err != nil {
		return engine.Delivery{}, false, fmt.Errorf("waiting delivery %s: %w", id, err)
	}
	promoted, err := saveDelivery(tx, w, engine.PromoteDelivery(w, at))
	return promoted, err == nil, err
}

// createDelivery stores new delivery d of the event at log position seq,
// settled in its line, with its entries in tenant_deliveries and its
// state's indexes. It returns d as stored.
func createDelivery(tx *bolt.Tx, d engine.Delivery, seq uint64) (engine.Delivery, error) {
	if tx.Bucket(bucketDeliveries).Get([]byte(d.ID)) != nil {
		return engine.Delivery{}, fmt.Errorf("delivery id %s exists", d.ID)
	}
	d, _, err := settleLine(tx, engine.Delivery{}, d) // reads only its line and state
	if err != nil {
		return engine.Delivery{}, err
	}
	if err := engine.CheckStorable(d); err != nil {
		return engine.Delivery{}, err
	}
	if err := tx.Bucket(bucketTenantDeliveries).Put(tenantDeliveryKey(d.TenantID, seq, d.ID), nil); err != nil {
		return engine.Delivery{}, err
	}
	es, n := stateIndex(d)
	for _, e := range es[:n] {
		if err := tx.Bucket(e.bucket).Put(e.key, e.value); err != nil {
			return engine.Delivery{}, err
		}
	}
	if err := countHeld(tx, engine.Delivery{}, d); err != nil {
		return engine.Delivery{}, err
	}
	return putDelivery(tx, d)
}

// deleteDelivery removes d, a delivery of the event at log position seq
// whose ordering key is orderingKey, with every entry of its; when d is
// its key's last delivery to its endpoint, the key tail goes too (the
// key's next delivery there has no PreviousSequence).
//
// A deleted head leaves its line, whose first waiting delivery is
// promoted at at (advanceLine) and returned with true: d must be as
// stored now, so a caller that deletes several reads each just before.
func deleteDelivery(tx *bolt.Tx, d engine.Delivery, seq uint64, orderingKey string, at time.Time) (promoted engine.Delivery, ok bool, err error) {
	if orderingKey != "" {
		tails, k := tx.Bucket(bucketKeyTails), keyTailKey(d.EndpointID, orderingKey)
		if v := tails.Get(k); v != nil && d.Sequence != 0 && bytes.Equal(v, u64(d.Sequence)) {
			if err := tails.Delete(k); err != nil {
				return engine.Delivery{}, false, err
			}
		}
	}
	entries := []stateEntry{
		{bucket: bucketDeliveries, key: []byte(d.ID)},
		{bucket: bucketTenantDeliveries, key: tenantDeliveryKey(d.TenantID, seq, d.ID)},
	}
	es, n := stateIndex(d)
	entries = append(entries, es[:n]...)
	for _, e := range entries {
		if err := tx.Bucket(e.bucket).Delete(e.key); err != nil {
			return engine.Delivery{}, false, err
		}
	}
	if err := countHeld(tx, d, engine.Delivery{}); err != nil {
		return engine.Delivery{}, false, err
	}
	if engine.HoldsLine(d) {
		return advanceLine(tx, d.EndpointID, d.Line, at)
	}
	return engine.Delivery{}, false, nil
}

// updateDelivery reads delivery id, applies the transition fn to it and
// saves the result (see saveDelivery).
func updateDelivery(tx *bolt.Tx, id string, fn func(engine.Delivery) engine.Delivery) (engine.Delivery, error) {
	d, err := getDelivery(tx, id)
	if err != nil {
		return engine.Delivery{}, err
	}
	return saveDelivery(tx, d, fn(d))
}

// eventDeliveries calls fn with the ID of each delivery of the event at
// log position seq of tenant, in ID order: the tenant_deliveries entries
// under tenant ‖ 0x00 ‖ seq, read with c, a cursor on tenant_deliveries.
// fn must not write to tenant_deliveries (collect the IDs first).
func eventDeliveries(c *bolt.Cursor, tenant string, seq uint64, fn func(deliveryID string) error) error {
	prefix := tenantEventKey(tenant, seq)
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if err := fn(string(k[len(prefix):])); err != nil {
			return err
		}
	}
	return nil
}
