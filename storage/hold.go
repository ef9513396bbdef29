package storage

import (
	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// holdDelivery is RecordAttempt for a record with Held set: a delivery
// held back without an attempt, because its endpoint is not verified.
// When rec.Cycle is the delivery's current cycle and it is Pending, its
// retry index entry moves to rec.NextAttemptAt and its Reason and Updated
// are set; its attempts, attempt count and last status stay as they are.
// Otherwise nothing changes. *out is the delivery as it is after.
func holdDelivery(tx *bolt.Tx, d *engine.Delivery, rec engine.AttemptRecord, out *engine.Delivery) error {
	if rec.Cycle != d.Cycle || d.State != engine.StatePending {
		*out = *d
		return nil
	}
	if err := deleteRetry(tx, *d); err != nil {
		return err
	}
	d.NextAttemptAt = rec.NextAttemptAt
	d.Reason = rec.Reason
	d.Updated = rec.At
	if err := putRetry(tx, *d); err != nil {
		return err
	}
	var err error
	*out, err = putDelivery(tx, *d)
	return err
}
