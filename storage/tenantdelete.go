package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// DeleteTenant deletes tenant id, in one transaction: its record leaves
// tenants for deleted_tenants (value: deletion time, unix nanoseconds), so
// from the commit on every read and write that names the tenant finds none
// and PutTenant refuses the id (CodeTenantDeleting) until the purge is
// done; its endpoints and access tokens are deleted with it. Its events,
// deliveries, dead letters and idempotency keys are left to
// PurgeDeletedTenants, which deletes them in small transactions (a crash
// between two leaves the rest for the next call). CodeTenantNotFound when
// there is no such tenant.
func (db *DB) DeleteTenant(ctx context.Context, id string, at time.Time) error {
	err := db.update(ctx, func(tx *bolt.Tx) error {
		tenants := tx.Bucket(bucketTenants)
		if !validTenantID(id) || tenants.Get([]byte(id)) == nil {
			return engine.TenantNotFound()
		}
		if err := tenants.Delete([]byte(id)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketDeletedTenants).Put([]byte(id), u64(unixNano(at))); err != nil {
			return err
		}
		if err := deletePrefix(tx.Bucket(bucketEndpoints), tenantPrefix(id)); err != nil {
			return err
		}
		// Each token of the tenant, then the tenant's index of them.
		idx := tx.Bucket(bucketTenantAccessTokens)
		prefix := tenantPrefix(id)
		c := idx.Cursor()
		for k, hash := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, hash = c.Next() {
			if err := tx.Bucket(bucketAccessTokens).Delete(hash); err != nil {
				return err
			}
		}
		return deletePrefix(idx, prefix)
	})
	if err != nil {
		return wrap("delete tenant "+id, err)
	}
	return nil
}

// PurgeDeletedTenants deletes, in one transaction, at most max (0: 500)
// events of deleted tenant tenant ("": the first deleted tenant), each
// with its deliveries (whatever their state) and every index entry of
// theirs; once none is left, at most max of its idempotency keys; once
// none is left either, its tasks and the tenant's entry in
// deleted_tenants, which frees its id. Call it until it returns a zero
// Tenant.
func (db *DB) PurgeDeletedTenants(ctx context.Context, tenant string, max int) (engine.PurgeResult, error) {
	if max <= 0 {
		max = defaultPruneMax
	}
	var res engine.PurgeResult
	err := db.update(ctx, func(tx *bolt.Tx) error {
		res = engine.PurgeResult{}
		k, _ := tx.Bucket(bucketDeletedTenants).Cursor().First()
		if tenant != "" {
			if k = []byte(tenant); tx.Bucket(bucketDeletedTenants).Get(k) == nil {
				return nil
			}
		}
		if k == nil {
			return nil
		}
		res.Tenant = string(k)
		prefix := tenantPrefix(res.Tenant)
		var err error
		if res.Events, res.Deliveries, err = purgeEvents(tx, res.Tenant, max); err != nil || res.Events > 0 {
			return err
		}
		if res.Keys, err = purgeIdempotency(tx, prefix, max); err != nil || res.Keys > 0 {
			return err
		}
		// Nothing should be left under the tenant in the other indexes
		// (every entry belongs to a delivery deleted with its event), but
		// the id is about to be free: make sure.
		for _, b := range [][]byte{bucketTenantEvents, bucketTenantDeliveries, bucketDeadLetters, bucketPaused} {
			if err := deletePrefix(tx.Bucket(b), prefix); err != nil {
				return err
			}
		}
		if err := purgeTasks(tx, res.Tenant); err != nil {
			return err
		}
		res.Done = true
		return tx.Bucket(bucketDeletedTenants).Delete(k)
	})
	if err != nil {
		return engine.PurgeResult{}, wrap("purge deleted tenant", err)
	}
	return res, nil
}

// purgeEvents deletes at most max of tenant's events, oldest first, with
// their deliveries and every entry of theirs.
func purgeEvents(tx *bolt.Tx, tenant string, max int) (events, deliveries int, err error) {
	prefix := tenantPrefix(tenant)
	var seqs []uint64
	c := tx.Bucket(bucketTenantEvents).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(seqs) < max; k, _ = c.Next() {
		seqs = append(seqs, binary.BigEndian.Uint64(k[len(prefix):]))
	}
	for _, seq := range seqs {
		v := tx.Bucket(bucketEvents).Get(u64(seq))
		if v == nil {
			return 0, 0, fmt.Errorf("event %d of tenant %s: in tenant_events, not in the log", seq, tenant)
		}
		ev, err := decodeEvent(v)
		if err != nil {
			return 0, 0, fmt.Errorf("event %d: %w", seq, err)
		}
		for _, id := range deliveryIDsOf(tx, tenant, seq) {
			d, err := getDelivery(tx, id)
			if err != nil {
				return 0, 0, err
			}
			// A line cut here goes on with the tenant's next delivery,
			// purged in its turn; no scheduler hears of it (see
			// engine.Maintenance).
			if _, _, err := deleteDelivery(tx, d, seq, ev.OrderingKey, time.Now().UTC()); err != nil {
				return 0, 0, err
			}
			deliveries++
		}
		for _, del := range []struct {
			b []byte
			k []byte
		}{
			{bucketEventIDs, []byte(ev.ID)},
			{bucketTenantEvents, tenantEventKey(tenant, seq)},
			{bucketEvents, u64(seq)},
			{bucketFanOuts, u64(seq)}, // owed: none of its deliveries was stored
		} {
			if err := tx.Bucket(del.b).Delete(del.k); err != nil {
				return 0, 0, err
			}
		}
		events++
	}
	return events, deliveries, nil
}

// purgeIdempotency deletes at most max idempotency records under prefix
// (a tenant's), each with its expiry entry.
func purgeIdempotency(tx *bolt.Tx, prefix []byte, max int) (int, error) {
	idem := tx.Bucket(bucketIdempotency)
	type doomed struct{ key, expiry []byte }
	var ds []doomed
	c := idem.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(ds) < max; k, v = c.Next() {
		rec, err := decodeIdempotency(v)
		if err != nil {
			return 0, fmt.Errorf("idempotency record %q: %w", k, err)
		}
		tenant, key, _ := bytes.Cut(k, []byte{sep})
		ds = append(ds, doomed{bytes.Clone(k), expiryKey(rec.Expires, string(tenant), string(key))})
	}
	for _, d := range ds {
		if err := idem.Delete(d.key); err != nil {
			return 0, err
		}
		if err := tx.Bucket(bucketIdempotencyIndex).Delete(d.expiry); err != nil {
			return 0, err
		}
	}
	return len(ds), nil
}

// deletePrefix deletes every key of b that starts with prefix. Keys are
// collected first: deleting under a live cursor skips keys in bbolt.
func deletePrefix(b *bolt.Bucket, prefix []byte) error {
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
