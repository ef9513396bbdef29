package storage

import (
	"context"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// TestDB_UpdateDeliveries_deadLettersOfOneEndpointBeyondTheScanBound: a
// range replay for one endpoint finds its dead letter even when more than
// maxListScan dead letters of other endpoints died before it in the range
// (found by engine/storetest's author; it replayed nothing).
func TestDB_UpdateDeliveries_deadLettersOfOneEndpointBeyondTheScanBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 20 000 dead letters")
	}
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "acme")
	mustEventType(t, db, "a.created")
	mustEventType(t, db, "b.created")
	mustEndpoint(t, db, "acme", "a.created")
	b := mustEndpoint(t, db, "acme", "b.created")
	kill := func(tx *bolt.Tx, typ string, at time.Time) error {
		in := newEvent("acme", typ, `{}`)
		res, err := appendEvent(tx, in, &fanOut{}, false) // its deliveries at once: killed in the same transaction
		if err != nil {
			return err
		}
		d := res.Deliveries[0]
		_, err = saveDelivery(tx, d, engine.RecordAttempt(d, engine.AttemptRecord{Cycle: 1, State: engine.StateDead, Reason: "x", At: at}))
		return err
	}
	if err := db.update(ctx, func(tx *bolt.Tx) error {
		for range maxListScan {
			if err := kill(tx, "a.created", t0); err != nil {
				return err
			}
		}
		return kill(tx, "b.created", t0.Add(time.Second))
	}); err != nil {
		t.Fatal(err)
	}
	ds, err := replayDeadLetters(ctx, db, "acme", t0, t0.Add(time.Hour), b.ID, engine.Replay{At: t0.Add(time.Hour), By: "admin"}, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].EndpointID != b.ID {
		t.Errorf("replayed %d of endpoint b's 1 dead letter in range (after %d of endpoint a's)", len(ds), maxListScan)
	}
	mustCheck(t, db)
}

// TestDB_ListDeliveries_sinceAcrossCommitOrder: two ingests commit in the
// other order than their creation times (concurrent ingests do); a
// listing since the later time still finds the delivery created then.
func TestDB_ListDeliveries_sinceAcrossCommitOrder(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "acme")
	mustEventType(t, db, "order.created")
	mustEndpoint(t, db, "acme", "*")
	late := newEvent("acme", "order.created", `{}`)
	late.Event.Created = t0.Add(2 * time.Millisecond)
	early := newEvent("acme", "order.created", `{}`)
	early.Event.Created = t0.Add(time.Millisecond)
	want := mustAppend(t, db, late).Deliveries[0].ID
	mustAppend(t, db, early)
	ds, next, err := db.ListDeliveries(ctx, "acme", engine.DeliveryFilter{Limit: 10, Since: t0.Add(2 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].ID != want {
		t.Errorf("ListDeliveries(since) = %v, next %q; want the delivery created at since (%s)", ds, next, want)
	}
}
