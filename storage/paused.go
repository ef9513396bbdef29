package storage

import (
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
