package storage

import (
	"time"

	"context"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// TestDB_AppendEvent_owesFanOut: the commit that acknowledges an ingest
// writes the event and the plan of its deliveries, no delivery; FanOut
// writes the deliveries the answer named and deletes the plan. An event
// with an ordering key is stored with its deliveries, as before.
func TestDB_AppendEvent_owesFanOut(t *testing.T) {
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustEventType(t, db, "order.created")
	for range 10 {
		mustEndpoint(t, db, "a", "*")
	}
	res, err := db.AppendEvent(context.Background(), newEvent("a", "order.created", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Owed || len(res.Deliveries) != 10 {
		t.Fatalf("ingest answered owed %v with %d deliveries, want owed, 10", res.Owed, len(res.Deliveries))
	}
	if d, p := countKeys(t, db, bucketDeliveries), countKeys(t, db, bucketFanOuts); d != 0 || p != 1 {
		t.Fatalf("after the acknowledgement: %d deliveries and %d plans stored, want 0 and 1", d, p)
	}
	mustCheck(t, db)
	done := mustFanOut(t, db)
	if len(done) != 1 || done[0].EventID != res.Event.ID || len(done[0].Deliveries) != 10 {
		t.Fatalf("FanOut stored %+v, want the event's 10 deliveries", done)
	}
	for i, d := range done[0].Deliveries {
		if d.ID != res.Deliveries[i].ID || d.EndpointID != res.Deliveries[i].EndpointID || d.State != engine.StatePending {
			t.Errorf("stored %s to %s %s, answered %s to %s", d.ID, d.EndpointID, d.State, res.Deliveries[i].ID, res.Deliveries[i].EndpointID)
		}
	}
	if d, p := countKeys(t, db, bucketDeliveries), countKeys(t, db, bucketFanOuts); d != 10 || p != 0 {
		t.Errorf("after the fan-out: %d deliveries and %d plans stored, want 10 and 0", d, p)
	}

	keyed := newEvent("a", "order.created", `{}`)
	keyed.Event.OrderingKey = "k"
	if res := mustAppend(t, db, keyed); res.Owed {
		t.Error("an event with an ordering key was acknowledged with its fan-out owed")
	}
}

// TestCheck_fanOuts: Check reports a plan whose delivery is stored, and
// one under no event of the log.
func TestCheck_fanOuts(t *testing.T) {
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustEventType(t, db, "order.created")
	mustEndpoint(t, db, "a", "*")
	res, err := db.AppendEvent(context.Background(), newEvent("a", "order.created", `{}`))
	if err != nil || !res.Owed {
		t.Fatalf("AppendEvent: owed %v, %v", res.Owed, err)
	}
	plan := encodePlan([]engine.PlannedDelivery{{ID: res.Deliveries[0].ID, EndpointID: res.Deliveries[0].EndpointID}})
	mustFanOut(t, db)
	for _, tc := range []struct {
		seq  uint64
		want string
	}{
		{res.Event.Seq, "plans delivery " + res.Deliveries[0].ID + ", which is stored"},
		{999, "fan-out of event 999: not in the log"},
	} {
		put := func(v []byte) {
			t.Helper()
			err := db.update(context.Background(), func(tx *bolt.Tx) error {
				if v == nil {
					return tx.Bucket(bucketFanOuts).Delete(u64(tc.seq))
				}
				return tx.Bucket(bucketFanOuts).Put(u64(tc.seq), v)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		put(plan)
		if err := db.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check = %v, want it to find %q", err, tc.want)
		}
		put(nil)
	}
	mustCheck(t, db)
}

func FuzzDecodePlan(f *testing.F) {
	enc := func(ps []engine.PlannedDelivery) ([]byte, error) { return encodePlan(ps), nil }
	seeds := seed([]engine.PlannedDelivery{
		{ID: "dlv_1", EndpointID: "ep_1"},
		{ID: "dlv_2", EndpointID: "ep_2", Line: "endpoint", RetryPolicy: "extended", Paused: true},
	}, enc)
	fuzzRecord(f, seeds, decodePlan, enc)
}

// TestDB_AppendEvent_fanOutWithTheEvent: with the default
// OwedFanOutAbove, a commit that acknowledges one ingest writes its
// deliveries with it: nothing owed, the dispatcher has them at once.
func TestDB_AppendEvent_fanOutWithTheEvent(t *testing.T) {
	db, err := Open(t.TempDir()+"/webhookd.db", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustTenant(t, db, "a")
	mustEventType(t, db, "order.created")
	mustEndpoint(t, db, "a", "*")
	res, err := db.AppendEvent(context.Background(), newEvent("a", "order.created", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Owed {
		t.Error("a commit of one ingest left its fan-out owed")
	}
	if d, p := countKeys(t, db, bucketDeliveries), countKeys(t, db, bucketFanOuts); d != 1 || p != 0 {
		t.Errorf("%d deliveries and %d plans stored, want 1 and 0", d, p)
	}
	mustCheck(t, db)
}

// TestCheck_fanOutBesideABackfill: a backfill of an endpoint created
// after an event's acknowledgement, made while that event's fan-out is
// still owed, stores a delivery the plan leaves out (deliveredTo); the
// file is sound, and Check says so, before and after the fan-out. Before,
// Check reported any stored delivery of an owed event, so a backup or
// compact taken in between (or after a kill) failed.
func TestCheck_fanOutBesideABackfill(t *testing.T) {
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustEventType(t, db, "order.created")
	mustEndpoint(t, db, "a", "*")
	if res, err := db.AppendEvent(context.Background(), newEvent("a", "order.created", `{}`)); err != nil || !res.Owed {
		t.Fatalf("append: owed %v, %v", res.Owed, err)
	}
	late := mustEndpoint(t, db, "a", "*")
	bf, err := db.Backfill(context.Background(), engine.BackfillStep{Tenant: "a", EndpointID: late.ID, Since: t0.Add(-time.Hour), Until: t0.Add(time.Hour),
		Scan: 100, Max: 100, At: t0.Add(time.Minute), By: "admin"})
	if err != nil || len(bf.Created) != 1 {
		t.Fatalf("backfill: %d created, %v; want 1", len(bf.Created), err)
	}
	mustCheck(t, db)
	if done := mustFanOut(t, db); len(done) != 1 || len(done[0].Deliveries) != 1 {
		t.Fatalf("FanOut stored %+v, want the planned delivery", done)
	}
	mustCheck(t, db)
}
