package storage

import (
	"context"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// scanCheckEvery is how many events ForEachEvent visits between checks of
// its context.
const scanCheckEvery = 256

// ForEachEvent calls fn for every event of the log, of every tenant, in
// log (ingest) order, with the event's deliveries in ID order, all read in
// one read transaction: a consistent snapshot, so an ingest is seen with
// all of its deliveries or not at all. It only reads.
//
// It is for offline checks and tests (the crash test walks the whole file
// with it), not for the request path: it reads every event and delivery.
// fn runs inside the transaction, so it must not call the DB, and a long
// walk keeps the file from reusing freed pages meanwhile. The values fn
// gets are copies (the event body included) and stay valid after the
// walk. An error from fn stops the walk and is returned as is; the end of
// ctx stops it with ctx's error, wrapped.
func (db *DB) ForEachEvent(ctx context.Context, fn func(engine.Event, []engine.Delivery) error) error {
	err := db.view(ctx, func(tx *bolt.Tx) error {
		return eachEvent(tx, ctx.Err, func(ev engine.Event, ds []engine.Delivery) error {
			if err := fn(ev, ds); err != nil {
				return &callerError{err}
			}
			return nil
		})
	})
	if ce := (*callerError)(nil); errors.As(err, &ce) {
		return ce.err
	}
	if err != nil {
		return wrap("scan events", err)
	}
	return nil
}

// eachEvent calls fn for every event of tx in log order, Seq set and body
// copied, with its deliveries in ID order. Every scanCheckEvery events it
// stops with stop's error, when stop is not nil and returns one; fn's
// error is returned as is.
func eachEvent(tx *bolt.Tx, stop func() error, fn func(engine.Event, []engine.Delivery) error) error {
	c := tx.Bucket(bucketEvents).Cursor()
	byEvent := tx.Bucket(bucketTenantDeliveries).Cursor()
	n := 0
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if n++; stop != nil && n%scanCheckEvery == 0 {
			if err := stop(); err != nil {
				return err
			}
		}
		seq, err := decodeSeq(k)
		if err != nil {
			return fmt.Errorf("event key %x: %w", k, err)
		}
		ev, err := decodeEvent(v) // copies the body
		if err != nil {
			return fmt.Errorf("event %d: %w", seq, err)
		}
		ev.Seq = seq
		ds := []engine.Delivery{}
		err = eventDeliveries(byEvent, ev.TenantID, seq, func(did string) error {
			d, err := getDelivery(tx, did)
			if err != nil {
				return fmt.Errorf("delivery of event %s: %w", ev.ID, err)
			}
			ds = append(ds, d)
			return nil
		})
		if err != nil {
			return err
		}
		if err := fn(ev, ds); err != nil {
			return err
		}
	}
	return nil
}
