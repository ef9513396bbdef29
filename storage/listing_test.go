package storage

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

func TestDB_ListDeliveries(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "acme")
	mustTenant(t, db, "other")
	var ids []string // oldest first
	for range 7 {
		ids = append(ids, mustDelivery(t, db, "acme").ID)
	}
	mustDelivery(t, db, "other")
	dead := ids[2]
	if _, err := recordAttempt(ctx, db, engine.AttemptRecord{DeliveryID: dead, Cycle: 1, State: engine.StateDead, Reason: "HTTP 410", At: t0,
		Attempt: engine.Attempt{Cycle: 1, Number: 1, Outcome: engine.OutcomePermanent}}); err != nil {
		t.Fatal(err)
	}

	// Pages of 3, newest first, by cursor: every delivery once, in order.
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		ds, next, err := db.ListDeliveries(ctx, "acme", engine.DeliveryFilter{Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			got = append(got, d.ID)
		}
		if next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		cursor = next
	}
	if len(got) != len(ids) {
		t.Fatalf("listed %d deliveries, want %d", len(got), len(ids))
	}
	for i := range got {
		if got[i] != ids[len(ids)-1-i] {
			t.Fatalf("listing %v, want newest first %v", got, ids)
		}
	}

	ds, _, err := db.ListDeliveries(ctx, "acme", engine.DeliveryFilter{Limit: 10, State: engine.StateDead})
	if err != nil || len(ds) != 1 || ds[0].ID != dead {
		t.Errorf("state=dead: %v %v, want only %s", ds, err, dead)
	}
	if _, _, err := db.ListDeliveries(ctx, "acme", engine.DeliveryFilter{Limit: 1, Cursor: "!!"}); engine.ErrorCode(err) != engine.CodeInvalidField {
		t.Errorf("bad cursor: %v", err)
	}
}

func TestDB_ListEventsAndReplayDeadLetters(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "acme")
	var ds []engine.Delivery
	for i := range 5 {
		d := mustDelivery(t, db, "acme")
		ds = append(ds, d)
		if i%2 == 0 { // 0, 2, 4 die, a minute apart
			_, err := recordAttempt(ctx, db, engine.AttemptRecord{DeliveryID: d.ID, Cycle: 1, State: engine.StateDead, Reason: "HTTP 410",
				At: t0.Add(time.Duration(i) * time.Minute), Attempt: engine.Attempt{Cycle: 1, Number: 1, Outcome: engine.OutcomePermanent}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	evs, next, err := db.ListEvents(ctx, "acme", engine.EventFilter{Limit: 3})
	if err != nil || len(evs) != 3 || next == "" || evs[0].ID != ds[0].EventID {
		t.Fatalf("first page: %d events, next %q, %v", len(evs), next, err)
	}
	evs, next, err = db.ListEvents(ctx, "acme", engine.EventFilter{Limit: 3, After: next})
	if err != nil || len(evs) != 2 || next != "" || evs[1].ID != ds[4].EventID || string(evs[1].Body) == "" {
		t.Fatalf("second page: %d events, next %q, %v", len(evs), next, err)
	}

	r := engine.Replay{At: t0.Add(time.Hour), By: "admin"}
	got, err := replayDeadLetters(ctx, db, "acme", t0, t0.Add(3*time.Minute), "", r, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("replayed %d, %v; want the two that died in the range", len(got), err)
	}
	again, err := replayDeadLetters(ctx, db, "acme", t0, t0.Add(3*time.Minute), "", r, 10)
	if err != nil || len(again) != 0 {
		t.Errorf("a second replay of the range queued %d: it must not send twice", len(again))
	}
	left, _, _ := db.DeadLetters(ctx, "acme", "", 10)
	if len(left) != 1 || left[0].ID != ds[4].ID {
		t.Errorf("dead letters left %v, want only %s", left, ds[4].ID)
	}
	rec, err := db.RecentEvents(ctx, "acme", 2)
	if err != nil || len(rec) != 2 || rec[0].Event.ID != ds[4].EventID || len(rec[0].Deliveries) != 1 {
		t.Errorf("RecentEvents: %v %v", rec, err)
	}
	mustCheck(t, db)
}

// TestOpen_migratesSchema1 makes a schema 1 file (no tenant indexes; each
// event's deliveries in event_deliveries) and checks that Open backfills
// them, and then drops event_deliveries (schema 8).
func TestOpen_migratesSchema1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "webhookd.db")
	db := mustOpenDBAt(t, path)
	mustTenant(t, db, "acme")
	d := mustDelivery(t, db, "acme")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw.Update(func(tx *bolt.Tx) error {
		tx.DeleteBucket(bucketTenantEvents)
		tx.DeleteBucket(bucketTenantDeliveries)
		byEvent, err := tx.CreateBucket(bucketEventDeliveries)
		if err != nil {
			return err
		}
		if err := byEvent.Put(eventDeliveryKey(d.EventID, d.ID), nil); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchema, u64(1))
	})
	raw.Close()

	db = mustOpenDBAt(t, path)
	ds, _, err := db.ListDeliveries(context.Background(), "acme", engine.DeliveryFilter{Limit: 10})
	if err != nil || len(ds) != 1 || ds[0].ID != d.ID {
		t.Errorf("after migration: %v %v", ds, err)
	}
	evs, _, err := db.ListEvents(context.Background(), "acme", engine.EventFilter{Limit: 10})
	if err != nil || len(evs) != 1 {
		t.Errorf("after migration: %d events, %v", len(evs), err)
	}
	if _, got, err := db.Event(context.Background(), "acme", d.EventID); err != nil || len(got) != 1 || got[0].ID != d.ID {
		t.Errorf("after migration, the event's deliveries: %v %v", got, err)
	}
	db.bolt.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketEventDeliveries) != nil {
			t.Error("event_deliveries is still there at schema 8")
		}
		return nil
	})
}

// TestOpen_schema7DropsEventDeliveries: a schema 7 file, whose events list
// their deliveries in event_deliveries too, opens at schema 8 without it;
// every event still has its deliveries and the file passes Check.
func TestOpen_schema7DropsEventDeliveries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "webhookd.db")
	db := mustOpenDBAt(t, path)
	mustTenant(t, db, "acme")
	mustEventType(t, db, "order.created")
	mustEndpoint(t, db, "acme", "order.created")
	mustEndpoint(t, db, "acme", "order.created")
	var evs []engine.IngestResult
	for range 3 {
		evs = append(evs, mustAppend(t, db, newEvent("acme", "order.created", `{}`)))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		byEvent, err := tx.CreateBucket(bucketEventDeliveries)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			for _, d := range ev.Deliveries {
				if err := byEvent.Put(eventDeliveryKey(d.EventID, d.ID), nil); err != nil {
					return err
				}
			}
		}
		return tx.Bucket(bucketMeta).Put(keySchema, u64(7))
	})

	db = mustOpenDBAt(t, path)
	for _, ev := range evs {
		_, got, err := db.Event(context.Background(), "acme", ev.Event.ID)
		if err != nil || len(got) != 2 || got[0].ID != ev.Deliveries[0].ID || got[1].ID != ev.Deliveries[1].ID {
			t.Errorf("event %s's deliveries after the migration: %v %v", ev.Event.ID, got, err)
		}
	}
	db.bolt.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketEventDeliveries) != nil {
			t.Error("event_deliveries is still there at schema 8")
		}
		if v := binary.BigEndian.Uint64(tx.Bucket(bucketMeta).Get(keySchema)); v != schemaVersion {
			t.Errorf("schema %d, want %d", v, schemaVersion)
		}
		return nil
	})
	mustCheck(t, db)
}
