package storage

import (
	"bytes"
	"context"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// putEndpointHealth stores the health h reports (see engine.MergeHealth)
// on the endpoint it names, if it still exists.
func putEndpointHealth(tx *bolt.Tx, h engine.Endpoint) error {
	ep, found, err := getEndpoint(tx, h.TenantID, h.ID)
	if err != nil || !found {
		return err
	}
	v, err := encodeEndpoint(engine.MergeHealth(ep, h))
	if err != nil {
		return err
	}
	return tx.Bucket(bucketEndpoints).Put(endpointKey(h.TenantID, h.ID), v)
}

// ResumePaused takes at most max paused deliveries of endpoint endpointID
// of tenant out of the paused index, in one transaction: with deliver each
// is stored as engine.ReplayDelivery makes it (a new cycle due at r.At),
// without as engine.DropHeldDelivery makes it (dead, not sent).
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
		// The transitions move index keys: not under the live cursor.
		for _, id := range ids {
			d, err := updateDelivery(tx, id, func(d engine.Delivery) engine.Delivery {
				if deliver {
					return engine.ReplayDelivery(d, r)
				}
				return engine.DropHeldDelivery(d, r.At)
			})
			if err != nil {
				return err
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
