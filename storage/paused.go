package storage

import (
	"bytes"
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// pausedReason is the reason of a delivery paused because its endpoint is
// disabled.
const pausedReason = "endpoint disabled: held until it is enabled again"

// pauseDelivery is RecordAttempt for a StatePaused record: no attempt was
// made, the endpoint is disabled. A current-cycle pending delivery moves
// from the retry index to the paused index; otherwise nothing changes.
func pauseDelivery(tx *bolt.Tx, d *engine.Delivery, rec engine.AttemptRecord, out *engine.Delivery) error {
	if rec.Cycle != d.Cycle || d.State != engine.StatePending {
		*out = *d
		return nil
	}
	if err := deleteRetry(tx, *d); err != nil {
		return err
	}
	d.State = engine.StatePaused
	d.NextAttemptAt = time.Time{}
	d.Reason = rec.Reason
	if d.Reason == "" {
		d.Reason = pausedReason
	}
	d.Updated = rec.At
	if err := tx.Bucket(bucketPaused).Put(pausedKey(d.TenantID, d.EndpointID, d.ID), nil); err != nil {
		return err
	}
	var err error
	*out, err = putDelivery(tx, *d)
	return err
}

// putEndpointHealth stores the health fields of h on the endpoint it names,
// if it still exists; its secrets and settings are left as stored.
func putEndpointHealth(tx *bolt.Tx, h engine.Endpoint) error {
	ep, found, err := getEndpoint(tx, h.TenantID, h.ID)
	if err != nil || !found {
		return err
	}
	// Concurrent attempts each report their own view: a run of failures
	// began at the earliest failure any of them saw.
	switch {
	case h.FailingSince.IsZero():
		ep.FailingSince = time.Time{}
	case ep.FailingSince.IsZero() || h.FailingSince.Before(ep.FailingSince):
		ep.FailingSince = h.FailingSince
	}
	if h.LastFailureAt.After(ep.LastFailureAt) {
		ep.LastFailure, ep.LastFailureAt = h.LastFailure, h.LastFailureAt
	}
	if h.Disabled && !ep.Disabled {
		ep.Disabled, ep.DisabledReason, ep.DisabledAt = true, h.DisabledReason, h.DisabledAt
	}
	v, err := encodeEndpoint(ep)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketEndpoints).Put(endpointKey(h.TenantID, h.ID), v)
}

// heldDeadReason is the reason of a paused delivery dead-lettered when its
// endpoint is enabled "from now on".
const heldDeadReason = "held while the endpoint was disabled; not sent (enabled from now on)"

// ResumePaused takes at most max paused deliveries of endpoint endpointID
// of tenant out of the paused index, in one transaction: with deliver each
// starts a new cycle due at r.At (recorded as a replay, as Replay does);
// without, each is dead with heldDeadReason and in the dead letters.
func (db *DB) ResumePaused(ctx context.Context, tenant, endpointID string, deliver bool, r engine.Replay, max int) ([]engine.Delivery, error) {
	var out []engine.Delivery
	err := db.update(ctx, func(tx *bolt.Tx) error {
		out = []engine.Delivery{}
		prefix := pausedKey(tenant, endpointID, "")
		c := tx.Bucket(bucketPaused).Cursor()
		var ids []string
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(ids) < max; k, _ = c.Next() {
			ids = append(ids, string(k[len(prefix):]))
		}
		for _, id := range ids {
			d, err := getDelivery(tx, id)
			if err != nil {
				return err
			}
			if deliver {
				if d, err = replayTx(tx, d, r); err != nil {
					return err
				}
			} else {
				if err := tx.Bucket(bucketPaused).Delete(pausedKey(tenant, endpointID, id)); err != nil {
					return err
				}
				d.State, d.Reason, d.DeadAt, d.Updated = engine.StateDead, heldDeadReason, r.At, r.At
				if err := tx.Bucket(bucketDeadLetters).Put(deadLetterKey(d.TenantID, d.DeadAt, d.ID), nil); err != nil {
					return err
				}
				if d, err = putDelivery(tx, d); err != nil {
					return err
				}
			}
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("resume paused deliveries of endpoint "+endpointID, err)
	}
	return out, nil
}
