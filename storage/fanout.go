package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// Owed fan-outs (schema 12). A commit that acknowledges more than
// Options.OwedFanOutAbove ingests writes each event and, when it has deliveries, their plan
// (engine.PlannedDelivery) under the event's place in the log in
// bucketFanOuts; FanOut stores the deliveries in the commits after it,
// oldest first, and deletes the plan. So the acknowledgement's commit
// puts two keys at the end of two buckets per event instead of some
// forty B+tree writes for ten deliveries spread over four buckets.
//
// Recovery contract: a plan is deleted in the transaction that stores
// its deliveries, so a crash leaves each event's fan-out either owed
// (the plan) or done (the deliveries), never half; Open finishes every
// owed fan-out before it returns, before anything can read the retry
// index or claim work.

// fanOutPlanMin is the fewest bytes a planned delivery takes (four empty
// strings and its flags).
const fanOutPlanMin = 5

// planPaused is the flag of a planned delivery to a disabled endpoint.
const planPaused = 1

// encodePlan is a fan-out's plan: v1 ‖ count ‖ each delivery's ID,
// endpoint ID, line and retry policy (strings) and flags (uvarint).
func encodePlan(ps []engine.PlannedDelivery) []byte {
	n := 2
	for _, p := range ps {
		n += 8 + len(p.ID) + len(p.EndpointID) + len(p.Line) + len(p.RetryPolicy)
	}
	b := make([]byte, 0, n)
	b = append(b, formatV1)
	b = appendCount(b, len(ps), false)
	for _, p := range ps {
		b = appendString(b, p.ID)
		b = appendString(b, p.EndpointID)
		b = appendString(b, p.Line)
		b = appendString(b, string(p.RetryPolicy))
		var flags int64
		if p.Paused {
			flags |= planPaused
		}
		b = appendInt(b, flags)
	}
	return b
}

// decodePlan is the inverse of encodePlan.
func decodePlan(v []byte) ([]engine.PlannedDelivery, error) {
	if len(v) == 0 || v[0] != formatV1 {
		return nil, errors.New("decode fan-out plan: unknown format")
	}
	r := sharedReader(v[1:]) // one allocation for the plan's strings, not two or more a delivery
	n := r.count(fanOutPlanMin)
	if n < 0 && r.err == nil {
		return nil, errors.New("decode fan-out plan: no deliveries")
	}
	ps := make([]engine.PlannedDelivery, max(n, 0))
	for i := range ps {
		ps[i] = engine.PlannedDelivery{ID: r.string(), EndpointID: r.string(), Line: r.string(), RetryPolicy: engine.RetryPolicyName(r.string())}
		flags := r.int()
		if flags&^planPaused != 0 && r.err == nil {
			return nil, fmt.Errorf("decode fan-out plan: unknown flags %#x", flags)
		}
		ps[i].Paused = flags&planPaused != 0
	}
	if err := r.end(); err != nil {
		return nil, fmt.Errorf("decode fan-out plan: %w", err)
	}
	for i, p := range ps {
		if p.ID == "" || p.EndpointID == "" || i > 0 && ps[i-1].ID >= p.ID {
			return nil, errors.New("decode fan-out plan: deliveries without ID or endpoint, or not in ID order")
		}
	}
	return ps, nil
}

// planFanOut returns the plans of ds, the deliveries of ev (as stored)
// in ID order, and whether every one of them is one that
// engine.NewDelivery makes again from its plan: only then may ingest
// leave their fan-out owed. Their IDs are new (engine.NewID); FanOut
// does not make a planned delivery whose ID is stored already.
//
// An event with an ordering key, or with an ordered delivery, is stored
// with its deliveries: its answer then says which deliveries wait in
// their lines and the PreviousSequence of each, as it always has.
func planFanOut(tx *bolt.Tx, ev engine.Event, ds []engine.Delivery) ([]engine.PlannedDelivery, bool) {
	if len(ds) == 0 || ev.OrderingKey != "" {
		return nil, false
	}
	ps := make([]engine.PlannedDelivery, len(ds))
	for i, d := range ds {
		p, ok := engine.PlanOf(ev, d)
		if !ok || d.Line != "" || d.ID == "" || d.EndpointID == "" || strings.ContainsRune(d.ID, sep) ||
			i > 0 && ds[i-1].ID >= d.ID || engine.CheckStorable(d) != nil {
			return nil, false
		}
		ps[i] = p
	}
	return ps, true
}

// plannedDeliveries returns the deliveries of the event at log position
// seq as planned, when its fan-out is owed (ok), made from ev, the event
// as stored.
func plannedDeliveries(tx *bolt.Tx, ev engine.Event, seq uint64) (ds []engine.Delivery, ok bool, err error) {
	v := tx.Bucket(bucketFanOuts).Get(u64(seq))
	if v == nil {
		return nil, false, nil
	}
	ps, err := decodePlan(v)
	if err != nil {
		return nil, false, fmt.Errorf("fan-out of event %d: %w", seq, err)
	}
	ds = make([]engine.Delivery, len(ps))
	for i, p := range ps {
		ds[i] = engine.NewDelivery(ev, p)
	}
	return ds, true, nil
}

// defaultOwedFanOutAbove is Options.OwedFanOutAbove's default: a commit
// with fewer ingests writes the deliveries with the events, as its
// acknowledgements wait for little else, and the dispatcher has them a
// commit sooner (at 20 events/s, `light`'s end to end p50 was 1.1-1.4 ms
// with every fan-out owed, 0.05-0.07 ms without).
const defaultOwedFanOutAbove = 16

// How many owed fan-outs one FanOut transaction stores. While the
// oldest owed is younger than fanOutLag, a commit that also carries
// ingests takes fanOutBeside and one without fanOutAlone, so that a
// burst of ingest is answered first; once the oldest is older, twice as
// many as the commit acknowledges (at least fanOutAlone), so that the
// fan-out keeps pace and the time from acknowledgement to first attempt
// stays near fanOutLag. With 2 and 8, `fanout` ingested 30-33% of the
// durable floor against 25-31% with larger shares (docs/performance.md).
const (
	fanOutBeside = 2
	fanOutAlone  = 8
	fanOutLag    = 10 * time.Millisecond
)

// FanOut stores the deliveries of at most max events whose fan-out is
// owed, oldest first, in one transaction of the commit loop (see
// engine.Log), as many as the commit's share allows (fanOutBeside).
// most <= 0 means fanOutAlone.
func (db *DB) FanOut(ctx context.Context, most int) ([]engine.FannedOut, error) {
	if most <= 0 {
		most = fanOutAlone
	}
	var res []engine.FannedOut
	err := db.enqueue(ctx, db.fanOuts, func(tx *bolt.Tx) error {
		limit := fanOutAlone
		if oldest := oldestOwed(tx); !oldest.IsZero() && time.Since(oldest) > fanOutLag {
			limit = max(fanOutAlone, 2*db.batchAcks)
		} else if db.batchAcks > 0 {
			limit = fanOutBeside
		}
		var err error
		res, err = fanOutOwed(tx, min(limit, most))
		return err
	})
	if err != nil {
		return nil, wrap("fan out", err)
	}
	return res, nil
}

// oldestOwed returns when the oldest event whose fan-out is owed was
// created; the zero time when none is owed (or it cannot be read:
// fanOutOwed reports that).
func oldestOwed(tx *bolt.Tx) time.Time {
	k, _ := tx.Bucket(bucketFanOuts).Cursor().First()
	if k == nil {
		return time.Time{}
	}
	v := tx.Bucket(bucketEvents).Get(k)
	if v == nil {
		return time.Time{}
	}
	ev, _, err := decodeEventHeader(v)
	if err != nil {
		return time.Time{}
	}
	return ev.Created
}

// fanOutOwed stores the deliveries of at most max owed fan-outs, oldest
// first, as ingest would have stored them (createDelivery: settled in
// their lines, with their indexes and held counts; PreviousSequence from
// key_tails), and deletes their plans. An event whose tenant is gone
// (deleted, being purged) gets none: its plan is deleted.
func fanOutOwed(tx *bolt.Tx, max int) ([]engine.FannedOut, error) {
	owed := tx.Bucket(bucketFanOuts)
	type entry struct {
		seq  uint64
		plan []engine.PlannedDelivery
	}
	var todo []entry
	c := owed.Cursor()
	for k, v := c.First(); k != nil && len(todo) < max; k, v = c.Next() {
		seq, err := decodeSeq(k)
		if err != nil {
			return nil, fmt.Errorf("fan-out key %x: %w", k, err)
		}
		ps, err := decodePlan(v)
		if err != nil {
			return nil, fmt.Errorf("fan-out of event %d: %w", seq, err)
		}
		todo = append(todo, entry{seq, ps})
	}
	res := make([]engine.FannedOut, 0, len(todo))
	events, tenants, tails, deliveries := tx.Bucket(bucketEvents), tx.Bucket(bucketTenants), tx.Bucket(bucketKeyTails), tx.Bucket(bucketDeliveries)
	for _, e := range todo {
		v := events.Get(u64(e.seq))
		if v == nil {
			return nil, fmt.Errorf("fan-out of event %d: not in the log", e.seq)
		}
		ev, _, err := decodeEventHeader(v)
		if err != nil {
			return nil, fmt.Errorf("fan-out of event %d: %w", e.seq, err)
		}
		ev.Seq = e.seq
		done := engine.FannedOut{EventID: ev.ID, TenantID: ev.TenantID, Deliveries: []engine.Delivery{}}
		if tenants.Get([]byte(ev.TenantID)) != nil {
			done.Deliveries = make([]engine.Delivery, 0, len(e.plan))
			for _, p := range e.plan {
				d := engine.NewDelivery(ev, p)
				if ev.OrderingKey != "" {
					k := keyTailKey(d.EndpointID, ev.OrderingKey)
					if v := tails.Get(k); v != nil {
						if d.PreviousSequence, err = decodeSeq(v); err != nil {
							return nil, fmt.Errorf("key tail of endpoint %s: %w", d.EndpointID, err)
						}
					}
					if err := tails.Put(k, u64(ev.Sequence)); err != nil {
						return nil, err
					}
				}
				if deliveries.Get([]byte(d.ID)) != nil {
					// Never so of IDs NewID makes; made once all the same.
					continue
				}
				stored, err := createDelivery(tx, d, e.seq)
				if err != nil {
					return nil, fmt.Errorf("fan-out of event %s: %w", ev.ID, err)
				}
				done.Deliveries = append(done.Deliveries, stored)
			}
		}
		if err := owed.Delete(u64(e.seq)); err != nil {
			return nil, err
		}
		res = append(res, done)
	}
	return res, nil
}

// finishFanOuts stores every owed fan-out of the file, in transactions
// of fanOutAtOpen events each: Open's recovery step.
func finishFanOuts(bdb *bolt.DB) error {
	for {
		var n int
		err := bdb.Update(func(tx *bolt.Tx) error {
			fillPages(tx)
			done, err := fanOutOwed(tx, fanOutAtOpen)
			n = len(done)
			return err
		})
		if err != nil {
			return fmt.Errorf("finish owed fan-outs: %w", err)
		}
		if n < fanOutAtOpen {
			return nil
		}
	}
}

// fanOutAtOpen is how many owed fan-outs one of Open's transactions
// stores.
const fanOutAtOpen = 1000

// checkFanOuts reports owed fan-outs that disagree with the file: each
// plan decodes, under the place of an event in the log, none of whose
// stored deliveries (a backfill's) goes to an endpoint the plan names or
// has one of the plan's IDs.
func checkFanOuts(tx *bolt.Tx, report func(format string, args ...any) bool) {
	events, deliveries := tx.Bucket(bucketEvents), tx.Bucket(bucketDeliveries)
	byEvent := tx.Bucket(bucketTenantDeliveries).Cursor()
	c := tx.Bucket(bucketFanOuts).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		seq, err := decodeSeq(k)
		if err != nil {
			if !report("fan-out key %x: %v", k, err) {
				return
			}
			continue
		}
		ps, err := decodePlan(v)
		if err != nil {
			if !report("fan-out of event %d: %v", seq, err) {
				return
			}
			continue
		}
		ev := events.Get(k)
		if ev == nil {
			if !report("fan-out of event %d: not in the log", seq) {
				return
			}
			continue
		}
		header, _, err := decodeEventHeader(ev)
		if err != nil {
			continue // the event walk reports it
		}
		// A backfill may have stored one to an endpoint the plan leaves
		// out (deliveredTo); one to an endpoint it names is twice.
		var twice []string
		_ = eventDeliveries(byEvent, header.TenantID, seq, func(id string) error {
			if v := deliveries.Get([]byte(id)); v != nil {
				if ep, err := deliveryEndpoint(v); err == nil && !slices.ContainsFunc(ps, func(p engine.PlannedDelivery) bool { return p.EndpointID == ep }) {
					return nil
				}
			}
			twice = append(twice, id) // not stored or undecodable: the delivery walk reports it too
			return nil
		})
		if len(twice) > 0 && !report("event %s has deliveries stored (%s) to endpoints its owed fan-out plans", header.ID, strings.Join(twice, ", ")) {
			return
		}
		for _, p := range ps {
			if deliveries.Get([]byte(p.ID)) != nil && !report("fan-out of event %s plans delivery %s, which is stored", header.ID, p.ID) {
				return
			}
		}
	}
}
