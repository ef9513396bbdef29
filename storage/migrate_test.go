package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// setSchema rewrites the schema version of the closed file at path.
func setSchema(t *testing.T, path string, v uint64) {
	t.Helper()
	rawUpdate(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, u64(v)) })
}

// rawUpdate runs fn in a write transaction of bbolt's own on the closed
// file at path, behind the DB's back: how a test makes an older layout.
func rawUpdate(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := raw.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// TestOpen_migratesOlderSchema registers a migration from a (pretend)
// older schema and checks that Open runs it once, in its transaction, and
// leaves the file at the current version; and that a failing migration
// leaves the file untouched.
func TestOpen_migratesOlderSchema(t *testing.T) {
	from := uint64(schemaVersion - 1)
	path := filepath.Join(t.TempDir(), "webhookd.db")
	db := mustOpenDBAt(t, path)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	setSchema(t, path, from)

	saved := migrations[from]
	t.Cleanup(func() { migrations[from] = saved })
	migrations[from] = func(tx *bolt.Tx) error { return errors.New("disk on fire") }
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Open with a failing migration: %v", err)
	}

	runs := 0
	migrations[from] = func(tx *bolt.Tx) error {
		runs++
		return tx.Bucket(bucketMeta).Put([]byte("migrated"), []byte("yes"))
	}
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(path, Options{}) // already current: no second run
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if runs != 1 {
		t.Errorf("migration ran %d times, want 1", runs)
	}
	db.bolt.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if got := binary.BigEndian.Uint64(meta.Get(keySchema)); got != schemaVersion {
			t.Errorf("schema version %d after migration, want %d", got, schemaVersion)
		}
		if string(meta.Get([]byte("migrated"))) != "yes" {
			t.Error("the migration's write is missing")
		}
		return nil
	})
}

// TestOpen_schema3NumbersNewEvents: a file of schema 3 (event records in
// formatV2, no tenant_sequences) opens at schema 4: its events keep
// their bytes and have no sequence, and the tenant's next event is its 1.
func TestOpen_schema3NumbersNewEvents(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "webhookd.db")
	db := mustOpenDBAt(t, path)
	mustTenant(t, db, "acme")
	mustEventType(t, db, "order.created")
	var old []engine.Event
	for range 2 {
		res, err := db.AppendEvent(ctx, newEvent("acme", "order.created", `{"old":true}`))
		if err != nil {
			t.Fatal(err)
		}
		old = append(old, res.Event)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Make it the file a webhookd of schema 3 wrote.
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = raw.Update(func(tx *bolt.Tx) error {
		events := tx.Bucket(bucketEvents)
		c := events.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			ev, err := decodeEvent(v)
			if err != nil {
				return err
			}
			if err := events.Put(k, encodeEventV2(ev)); err != nil {
				return err
			}
		}
		if err := tx.DeleteBucket(bucketTenantSequences); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchema, u64(3))
	})
	raw.Close()
	if err != nil {
		t.Fatal(err)
	}

	db = mustOpenDBAt(t, path)
	for _, want := range old {
		ev, _, err := db.Event(ctx, "acme", want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Sequence != 0 || string(ev.Body) != string(want.Body) {
			t.Errorf("event %s of schema 3: sequence %d, body %s; want none and %s", want.ID, ev.Sequence, ev.Body, want.Body)
		}
	}
	res, err := db.AppendEvent(ctx, newEvent("acme", "order.created", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Event.Sequence != 1 {
		t.Errorf("the first event after the upgrade has sequence %d, want 1", res.Event.Sequence)
	}
	if err := db.Check(); err != nil {
		t.Error(err)
	}
}
