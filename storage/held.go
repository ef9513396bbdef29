package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// The held counts (engine.Held, schema 9): tenant_held has, per tenant,
// how many of its deliveries wait in their lines, are paused, and are dead
// and blocking their line; meta "held" has the same for every tenant. A
// tenant with none has no record. countHeld moves a delivery's place in
// them in every transaction that saves, creates or deletes it
// (savedelivery.go), so Held reads two keys; Check recounts them from the
// indexes (checkHeld), and Open fills them from the indexes when it
// migrates a file of schema 8.

// keyHeld is the key in meta of every tenant's held counts.
var keyHeld = []byte("held")

func init() {
	// Schema 8 to 9: tenant_held (which Open creates) and meta "held",
	// counted from the indexes.
	migrations[8] = func(tx *bolt.Tx) error {
		byTenant, all, err := countHeldFromIndexes(tx)
		if err != nil {
			return err
		}
		for tenant, h := range byTenant {
			if err := tx.Bucket(bucketTenantHeld).Put([]byte(tenant), encodeHeld(h)); err != nil {
				return err
			}
		}
		if all == (engine.Held{}) {
			return nil
		}
		return tx.Bucket(bucketMeta).Put(keyHeld, encodeHeld(all))
	}
}

// encodeHeld is v1 ‖ waiting(8) ‖ paused(8) ‖ blocking(8).
func encodeHeld(h engine.Held) []byte {
	b := make([]byte, 0, 1+3*8)
	b = append(b, formatV1)
	for _, n := range []int{h.Waiting, h.Paused, h.Blocking} {
		b = binary.BigEndian.AppendUint64(b, uint64(max(n, 0)))
	}
	return b
}

// decodeHeld decodes encodeHeld's record; nil (no record) is none held.
func decodeHeld(v []byte) (engine.Held, error) {
	if v == nil {
		return engine.Held{}, nil
	}
	if len(v) != 1+3*8 {
		return engine.Held{}, fmt.Errorf("malformed held count (%d bytes)", len(v))
	}
	if v[0] != formatV1 {
		return engine.Held{}, fmt.Errorf("held count: unknown record format %d", v[0])
	}
	var n [3]int
	for i := range n {
		u := binary.BigEndian.Uint64(v[1+8*i:])
		if u > 1<<62 {
			return engine.Held{}, fmt.Errorf("malformed held count (%d)", u)
		}
		n[i] = int(u)
	}
	return engine.Held{Waiting: n[0], Paused: n[1], Blocking: n[2]}, nil
}

// countHeld moves the place of a delivery in its tenant's held counts,
// and in every tenant's, from before's state to after's (a zero Delivery
// has none: a new or deleted delivery).
func countHeld(tx *bolt.Tx, before, after engine.Delivery) error {
	d := engine.HeldOf(after).Minus(engine.HeldOf(before))
	if d == (engine.Held{}) {
		return nil
	}
	tenant := after.TenantID
	if tenant == "" {
		tenant = before.TenantID
	}
	if err := addHeld(tx.Bucket(bucketTenantHeld), []byte(tenant), d); err != nil {
		return fmt.Errorf("held count of tenant %s: %w", tenant, err)
	}
	if err := addHeld(tx.Bucket(bucketMeta), keyHeld, d); err != nil {
		return fmt.Errorf("held count: %w", err)
	}
	return nil
}

// addHeld adds d to the count under key in b, deleting the record when
// nothing is left. A count never goes below zero (Check reports one that
// disagrees with the indexes).
func addHeld(b *bolt.Bucket, key []byte, d engine.Held) error {
	h, err := decodeHeld(b.Get(key))
	if err != nil {
		return err
	}
	h = h.Plus(d)
	h = engine.Held{Waiting: max(h.Waiting, 0), Paused: max(h.Paused, 0), Blocking: max(h.Blocking, 0)}
	if h == (engine.Held{}) {
		return b.Delete(key)
	}
	return b.Put(key, encodeHeld(h))
}

// Held returns the held counts of tenant ("": none) and of every tenant,
// read in one transaction: two keys.
func (db *DB) Held(ctx context.Context, tenant string) (ofTenant, all engine.Held, err error) {
	err = db.view(ctx, func(tx *bolt.Tx) error {
		if tenant != "" {
			if ofTenant, err = decodeHeld(tx.Bucket(bucketTenantHeld).Get([]byte(tenant))); err != nil {
				return fmt.Errorf("tenant %s: %w", tenant, err)
			}
		}
		all, err = decodeHeld(tx.Bucket(bucketMeta).Get(keyHeld))
		return err
	})
	if err != nil {
		return engine.Held{}, engine.Held{}, wrap("held counts", err)
	}
	return ofTenant, all, nil
}

// countHeldFromIndexes counts the held deliveries from the indexes their
// states put them in (line_waiting, paused, line_heads), reading each
// once: per tenant, and in all.
func countHeldFromIndexes(tx *bolt.Tx) (map[string]engine.Held, engine.Held, error) {
	byTenant := map[string]engine.Held{}
	var all engine.Held
	seen := map[string]bool{}
	count := func(id []byte) error {
		if seen[string(id)] {
			return nil // a paused head is in paused and line_heads
		}
		seen[string(id)] = true
		d, err := getDelivery(tx, string(id))
		if err != nil {
			return fmt.Errorf("delivery %s of an index: %w", id, err)
		}
		h := engine.HeldOf(d)
		byTenant[d.TenantID] = byTenant[d.TenantID].Plus(h)
		all = all.Plus(h)
		return nil
	}
	err := tx.Bucket(bucketLineWaiting).ForEach(func(k, _ []byte) error {
		_, rest, ok := bytes.Cut(k, []byte{sep}) // endpoint ‖ 0x00 ‖ line ‖ 0x00 ‖ sequence(8) ‖ ID
		_, rest, ok2 := bytes.Cut(rest, []byte{sep})
		if !ok || !ok2 || len(rest) <= 8 {
			return fmt.Errorf("malformed line_waiting key %x", k)
		}
		return count(rest[8:])
	})
	if err == nil {
		err = tx.Bucket(bucketPaused).ForEach(func(k, _ []byte) error {
			i := bytes.LastIndexByte(k, sep) // tenant ‖ 0x00 ‖ endpoint ‖ 0x00 ‖ ID
			if i < 0 || i == len(k)-1 {
				return fmt.Errorf("malformed paused key %x", k)
			}
			return count(k[i+1:])
		})
	}
	if err == nil {
		err = tx.Bucket(bucketLineHeads).ForEach(func(_, id []byte) error { return count(id) })
	}
	for tenant, h := range byTenant {
		if h == (engine.Held{}) {
			delete(byTenant, tenant)
		}
	}
	return byTenant, all, err
}

// checkHeld reports where the held counts disagree with the indexes.
func checkHeld(tx *bolt.Tx, report func(format string, args ...any) bool) {
	want, wantAll, err := countHeldFromIndexes(tx)
	if err != nil {
		report("held counts: %v", err)
		return
	}
	got := map[string]engine.Held{}
	err = tx.Bucket(bucketTenantHeld).ForEach(func(k, v []byte) error {
		h, err := decodeHeld(v)
		if err != nil {
			return fmt.Errorf("tenant %s: %w", k, err)
		}
		got[string(k)] = h
		return nil
	})
	if err != nil {
		report("held counts: %v", err)
		return
	}
	for tenant, h := range want {
		if got[tenant] != h && !report("tenant %s: held counts %+v, but its deliveries in the indexes are %+v", tenant, got[tenant], h) {
			return
		}
	}
	for tenant, h := range got {
		if _, ok := want[tenant]; !ok && !report("tenant %s: held counts %+v, but none of its deliveries is held", tenant, h) {
			return
		}
	}
	all, err := decodeHeld(tx.Bucket(bucketMeta).Get(keyHeld))
	if err != nil {
		report("held counts of every tenant: %v", err)
	} else if all != wantAll {
		report("held counts of every tenant %+v, but the indexes hold %+v", all, wantAll)
	}
}
