package storage

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// This file is the only place that writes a delivery record and the index
// entries its state puts it in. The engine decides every state (see
// engine/transitions.go); the indexes follow from the state alone:
//
//	state      index          key                                   value
//	Pending    retry_index    due(8) ‖ delivery ID                   endpoint ID
//	Dead       dead_letters   tenant ‖ 0x00 ‖ deadAt(8) ‖ delivery ID  empty
//	Paused     paused         tenant ‖ 0x00 ‖ endpoint ‖ 0x00 ‖ ID     empty
//
// so the invariants Check verifies hold by construction, whatever moved
// the delivery.

// stateEntry is the index entry a delivery's state puts it in.
type stateEntry struct {
	bucket, key, value []byte
}

// stateIndex returns the index entry of d's state, if its state has one.
func stateIndex(d engine.Delivery) (stateEntry, bool) {
	switch d.State {
	case engine.StatePending:
		return stateEntry{bucketRetryIndex, retryKey(d.NextAttemptAt, d.ID), []byte(d.EndpointID)}, true
	case engine.StateDead:
		return stateEntry{bucketDeadLetters, deadLetterKey(d.TenantID, d.DeadAt, d.ID), nil}, true
	case engine.StatePaused:
		return stateEntry{bucketPaused, pausedKey(d.TenantID, d.EndpointID, d.ID), nil}, true
	}
	return stateEntry{}, false
}

// saveDelivery stores after, the next state of before (the delivery as
// stored, read in tx), and moves its state index entry to match. It
// returns after as a later read returns it.
func saveDelivery(tx *bolt.Tx, before, after engine.Delivery) (engine.Delivery, error) {
	if after.ID != before.ID || after.TenantID != before.TenantID || after.EndpointID != before.EndpointID || after.EventID != before.EventID {
		return engine.Delivery{}, fmt.Errorf("delivery %s: a transition changed who it belongs to", before.ID)
	}
	if err := engine.CheckStorable(after); err != nil {
		return engine.Delivery{}, err
	}
	old, hadOld := stateIndex(before)
	now, hasNow := stateIndex(after)
	if hadOld && !(hasNow && bytes.Equal(old.bucket, now.bucket) && bytes.Equal(old.key, now.key)) {
		if err := tx.Bucket(old.bucket).Delete(old.key); err != nil {
			return engine.Delivery{}, err
		}
	}
	if hasNow {
		if err := tx.Bucket(now.bucket).Put(now.key, now.value); err != nil {
			return engine.Delivery{}, err
		}
	}
	return putDelivery(tx, after)
}

// createDelivery stores new delivery d of the event at log position seq,
// with its entries in event_deliveries, tenant_deliveries and its state's
// index.
func createDelivery(tx *bolt.Tx, d engine.Delivery, seq uint64) (engine.Delivery, error) {
	if err := engine.CheckStorable(d); err != nil {
		return engine.Delivery{}, err
	}
	if tx.Bucket(bucketDeliveries).Get([]byte(d.ID)) != nil {
		return engine.Delivery{}, fmt.Errorf("delivery id %s exists", d.ID)
	}
	if err := tx.Bucket(bucketEventDeliveries).Put(eventDeliveryKey(d.EventID, d.ID), nil); err != nil {
		return engine.Delivery{}, err
	}
	if err := tx.Bucket(bucketTenantDeliveries).Put(tenantDeliveryKey(d.TenantID, seq, d.ID), nil); err != nil {
		return engine.Delivery{}, err
	}
	if e, ok := stateIndex(d); ok {
		if err := tx.Bucket(e.bucket).Put(e.key, e.value); err != nil {
			return engine.Delivery{}, err
		}
	}
	return putDelivery(tx, d)
}

// deleteDelivery removes d, a delivery of the event at log position seq,
// with every entry of its.
func deleteDelivery(tx *bolt.Tx, d engine.Delivery, seq uint64) error {
	entries := []stateEntry{
		{bucket: bucketDeliveries, key: []byte(d.ID)},
		{bucket: bucketEventDeliveries, key: eventDeliveryKey(d.EventID, d.ID)},
		{bucket: bucketTenantDeliveries, key: tenantDeliveryKey(d.TenantID, seq, d.ID)},
	}
	if e, ok := stateIndex(d); ok {
		entries = append(entries, e)
	}
	for _, e := range entries {
		if err := tx.Bucket(e.bucket).Delete(e.key); err != nil {
			return err
		}
	}
	return nil
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
