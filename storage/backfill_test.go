package storage

import (
	"context"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// TestDeliveryEndpoint: the backfill's peek at a delivery record names
// the endpoint that decodeDelivery reads, in every format.
func TestDeliveryEndpoint(t *testing.T) {
	v1, err := encodeJSON(deliveryRecord{ID: "dlv_1", TenantID: "acme", EndpointID: "ep_json", State: "pending"})
	if err != nil {
		t.Fatal(err)
	}
	records := [][]byte{v1}
	for _, d := range append(allSampleDeliveries(), sampleDelivery) {
		v, err := encodeDelivery(d)
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, v)
	}
	for _, v := range records {
		d, err := decodeDelivery(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := deliveryEndpoint(v)
		if err != nil || got != d.EndpointID {
			t.Errorf("deliveryEndpoint of a record in format %d = %q, %v; want %q", v[0], got, err, d.EndpointID)
		}
	}
	for _, bad := range [][]byte{nil, {formatV5}, {formatV2, 3, 'a'}} {
		if id, err := deliveryEndpoint(bad); err == nil {
			t.Errorf("deliveryEndpoint(%q) = %q, want an error", bad, id)
		}
	}
}

// FuzzDeliveryEndpoint: whatever decodeDelivery decodes, the peek names
// its endpoint.
func FuzzDeliveryEndpoint(f *testing.F) {
	for _, d := range allSampleDeliveries() {
		v, err := encodeDelivery(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		d, err := decodeDelivery(v)
		if err != nil {
			return
		}
		if got, err := deliveryEndpoint(v); err != nil || got != d.EndpointID {
			t.Fatalf("deliveryEndpoint(%q) = %q, %v; decodeDelivery reads %q", v, got, err, d.EndpointID)
		}
	})
}

func allSampleDeliveries() []engine.Delivery {
	return []engine.Delivery{sampleDeliveryHeaders, sampleDeliveryChannels, sampleDeliveryBoth, sampleDeliveryBackfill, sampleDeliveryBackfillAll, sampleDeliveryBackfillPolicy}
}

// TestCheck_backfill: Check finds an event with two deliveries to one
// endpoint, which a backfill must never make, and a backfilled delivery
// of a test event.
func TestCheck_backfill(t *testing.T) {
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	d := mustDelivery(t, db, "a")
	seq := mustSeq(t, db, d.EventID)
	write := func(fn func(tx *bolt.Tx) error) {
		t.Helper()
		if err := db.update(context.Background(), fn); err != nil {
			t.Fatal(err)
		}
	}
	twin := d
	twin.ID = engine.NewID("dlv")
	write(func(tx *bolt.Tx) error { _, err := createDelivery(tx, twin, seq); return err })
	if err := db.Check(); err == nil || !strings.Contains(err.Error(), "more than one delivery to endpoint "+d.EndpointID) {
		t.Errorf("Check = %v, want it to find two deliveries of event %s to %s", err, d.EventID, d.EndpointID)
	}
	write(func(tx *bolt.Tx) error { _, _, err := deleteDelivery(tx, twin, seq, "", t0); return err })
	mustCheck(t, db)

	marked := d
	marked.Test, marked.Backfill = true, &engine.Backfill{At: t0.Add(time.Hour), By: "admin"}
	write(func(tx *bolt.Tx) error { _, err := saveDelivery(tx, d, marked); return err })
	if err := db.Check(); err == nil || !strings.Contains(err.Error(), d.ID+" of test event") {
		t.Errorf("Check = %v, want it to find the backfilled delivery of a test event", err)
	}
	write(func(tx *bolt.Tx) error { _, err := saveDelivery(tx, marked, d); return err })
	mustCheck(t, db)
}

// TestCheck_deliverAt: Check finds a delivery whose deliver_at is not its
// event's: a delivery scheduled on its own would be sent at a time the
// event does not say, or an event's schedule lost on one delivery.
func TestCheck_deliverAt(t *testing.T) {
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	d := mustDelivery(t, db, "a")
	write := func(fn func(tx *bolt.Tx) error) {
		t.Helper()
		if err := db.update(context.Background(), fn); err != nil {
			t.Fatal(err)
		}
	}
	scheduled := d
	scheduled.DeliverAt = t0.Add(time.Hour)
	write(func(tx *bolt.Tx) error { _, err := saveDelivery(tx, d, scheduled); return err })
	if err := db.Check(); err == nil || !strings.Contains(err.Error(), "delivery "+d.ID+" has deliver_at") {
		t.Errorf("Check = %v, want it to find delivery %s scheduled apart from its event", err, d.ID)
	}
	write(func(tx *bolt.Tx) error { _, err := saveDelivery(tx, scheduled, d); return err })
	mustCheck(t, db)
}
