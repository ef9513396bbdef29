package storage

import (
	"bytes"
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// OrphanedPaused returns at most max (0: defaultPruneMax) of the deleted
// endpoints that still have paused deliveries, of tenants that are not
// deleted (see engine.Maintenance), in (tenant, endpoint) order. It
// walks the paused index one endpoint at a time: a seek past each
// endpoint's entries (and past a deleted tenant's), so its cost follows
// the endpoints with paused deliveries, not the deliveries.
func (db *DB) OrphanedPaused(ctx context.Context, max int) ([]engine.EndpointRef, error) {
	if max <= 0 {
		max = defaultPruneMax
	}
	var refs []engine.EndpointRef
	err := db.view(ctx, func(tx *bolt.Tx) error {
		refs = nil
		tenants, endpoints := tx.Bucket(bucketTenants), tx.Bucket(bucketEndpoints)
		c := tx.Bucket(bucketPaused).Cursor()
		for k, _ := c.First(); k != nil && len(refs) < max; {
			tenant, rest, ok := bytes.Cut(k, []byte{sep}) // tenant ‖ 0x00 ‖ endpoint ‖ 0x00 ‖ ID
			endpoint, _, ok2 := bytes.Cut(rest, []byte{sep})
			if !ok || !ok2 || len(tenant) == 0 || len(endpoint) == 0 {
				return fmt.Errorf("malformed paused key %x", k)
			}
			if tenants.Get(tenant) == nil { // deleted: its purge takes them
				k, _ = c.Seek(append(bytes.Clone(tenant), sep+1))
				continue
			}
			prefix := k[:len(tenant)+1+len(endpoint)] // tenant ‖ 0x00 ‖ endpoint
			if endpoints.Get(prefix) == nil {
				refs = append(refs, engine.EndpointRef{TenantID: string(tenant), EndpointID: string(endpoint)})
			}
			k, _ = c.Seek(append(bytes.Clone(prefix), sep+1))
		}
		return nil
	})
	if err != nil {
		return nil, wrap("orphaned paused deliveries", err)
	}
	return refs, nil
}
