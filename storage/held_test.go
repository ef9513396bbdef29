package storage

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// heldFixture stores, for tenant acme, an ordered line of three events
// (one pending head, two waiting) and one delivery held for a disabled
// endpoint; for globex, one ordered line of two.
func heldFixture(t testing.TB, db *DB) {
	t.Helper()
	ctx := context.Background()
	mustTenant(t, db, "acme")
	mustTenant(t, db, "globex")
	mustEventType(t, db, "order.created")
	mustEventType(t, db, "invoice.paid")
	for _, tenant := range []string{"acme", "globex"} {
		ep := newEndpoint(tenant, "order.created")
		ep.Ordering = engine.OrderingEndpoint
		if err := db.CreateEndpoint(ctx, ep, 0); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		mustAppend(t, db, newEvent("acme", "order.created", `{}`))
	}
	for range 2 {
		mustAppend(t, db, newEvent("globex", "order.created", `{}`))
	}
	ep := newEndpoint("acme", "invoice.paid")
	ep.Disabled = true
	if err := db.CreateEndpoint(ctx, ep, 0); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, db, newEvent("acme", "invoice.paid", `{}`))
}

// wantHeld fails t unless db's Held(tenant) is want, and all.
func wantHeld(t *testing.T, db *DB, tenant string, want, all engine.Held) {
	t.Helper()
	got, gotAll, err := db.Held(context.Background(), tenant)
	if err != nil || got != want || gotAll != all {
		t.Errorf("Held(%q) = %+v, all %+v, %v; want %+v, all %+v", tenant, got, gotAll, err, want, all)
	}
}

// TestOpen_schema8CountsHeld: a file of schema 8 (no held counts) opens
// at schema 9 with each tenant's held deliveries counted from the
// indexes, and passes Check.
func TestOpen_schema8CountsHeld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "webhookd.db")
	db := mustOpenDBAt(t, path)
	heldFixture(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, path, func(tx *bolt.Tx) error { // the file a webhookd of schema 8 wrote
		if err := tx.DeleteBucket(bucketTenantHeld); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMeta).Delete(keyHeld); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchema, u64(8))
	})
	db = mustOpenDBAt(t, path)
	all := engine.Held{Waiting: 3, Paused: 1}
	wantHeld(t, db, "acme", engine.Held{Waiting: 2, Paused: 1}, all)
	wantHeld(t, db, "globex", engine.Held{Waiting: 1}, all)
	mustCheck(t, db)
}

// TestCheck_heldCounts: Check reports held counts that disagree with the
// indexes: a tenant's, a record of a tenant with none held, and every
// tenant's.
func TestCheck_heldCounts(t *testing.T) {
	for _, c := range []struct {
		name  string
		spoil func(tx *bolt.Tx) error
		want  string
	}{
		{"a tenant's count", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketTenantHeld).Put([]byte("acme"), encodeHeld(engine.Held{Waiting: 1, Paused: 1}))
		}, "tenant acme: held counts"},
		{"a tenant with none held", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketTenantHeld).Put([]byte("initech"), encodeHeld(engine.Held{Blocking: 1}))
		}, "tenant initech: held counts"},
		{"every tenant's", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Delete(keyHeld)
		}, "held counts of every tenant"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "webhookd.db")
			db, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			heldFixture(t, db)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			rawUpdate(t, path, c.spoil)
			db, err = Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Check: %v, want it to report %q", err, c.want)
			}
		})
	}
}

func FuzzDecodeHeld(f *testing.F) {
	enc := func(h engine.Held) ([]byte, error) { return encodeHeld(h), nil }
	fuzzRecord(f, seed(engine.Held{Waiting: 3, Paused: 2, Blocking: 1}, enc), decodeHeld, enc)
}

// BenchmarkDB_Held is what the pending bounds add to an ingest on bbolt:
// one read transaction of two keys.
func BenchmarkDB_Held(b *testing.B) {
	db := MustOpenDB(b)
	heldFixture(b, db)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := db.Held(ctx, "acme"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
