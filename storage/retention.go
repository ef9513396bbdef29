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

// PruneEvents deletes, in one small transaction, the events after log
// position cursor (0: from the start) whose every delivery is finished and
// past r — each with its deliveries, their dead letters and its id entry.
// It looks at no more than max events (0: 500), skipping those it must
// keep (a pending delivery, a delivery still inside retention), and stops
// at the first event created after both cutoffs, since the log is in
// ingest order. Call it again with Next until Next is 0. A deleted dead
// head that blocked its line promotes the line's first waiting delivery
// (deleteDelivery), which it reports in Promoted.
//
// Idempotency records are left to PruneIdempotency: the caller keeps
// retention at least as long as the idempotency window, so a record that
// points at a pruned event has expired and is never followed.
func (db *DB) PruneEvents(ctx context.Context, cursor uint64, r engine.Retention, max int) (engine.PruneResult, error) {
	if max <= 0 {
		max = 500
	}
	newest := r.SucceededBefore
	if r.DeadBefore.After(newest) {
		newest = r.DeadBefore
	}
	var res engine.PruneResult
	err := db.update(ctx, func(tx *bolt.Tx) error {
		res = engine.PruneResult{}
		events := tx.Bucket(bucketEvents)
		c := events.Cursor()
		var k, v []byte
		if cursor == 0 {
			k, v = c.First()
		} else {
			k, v = c.Seek(u64(cursor + 1))
		}
		var doomed [][]byte
		for ; k != nil; k, v = c.Next() {
			if res.Scanned == max {
				res.Next = binary.BigEndian.Uint64(k) - 1
				break
			}
			res.Scanned++
			seq := binary.BigEndian.Uint64(k)
			ev, err := decodeEvent(v)
			if err != nil {
				return fmt.Errorf("event %d: %w", seq, err)
			}
			if !ev.Created.Before(newest) {
				break // every later event is newer still
			}
			_, ds, err := getEvent(tx, ev.ID)
			if err != nil {
				return err
			}
			if !r.Prunable(ev, ds) {
				continue
			}
			for _, d := range ds {
				p, ok, err := deleteDelivery(tx, d, seq, ev.OrderingKey, time.Now().UTC())
				if err != nil {
					return err
				}
				if ok {
					res.Promoted = append(res.Promoted, engine.Work{DeliveryID: p.ID, TenantID: p.TenantID, EndpointID: p.EndpointID})
				}
				res.Deliveries++
			}
			if err := tx.Bucket(bucketEventIDs).Delete([]byte(ev.ID)); err != nil {
				return err
			}
			if err := tx.Bucket(bucketTenantEvents).Delete(tenantEventKey(ev.TenantID, seq)); err != nil {
				return err
			}
			doomed = append(doomed, bytes.Clone(k))
			res.Events++
		}
		// Deleting under a live cursor skips keys in bbolt: delete after.
		for _, k := range doomed {
			if err := events.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return engine.PruneResult{}, wrap("prune events", err)
	}
	return res, nil
}
