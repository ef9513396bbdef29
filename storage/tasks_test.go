package storage

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// sampleTask has every field set, the runner's included.
var sampleTask = func() engine.Task {
	total := 12
	return engine.Task{
		ID: "task_01JH0000000000000000000001", Tenant: "acme", Kind: engine.TaskBackfill, State: engine.TaskFailed,
		Params: engine.TaskParams{Since: t0, Until: t0.Add(time.Hour), Endpoint: "ep_1", Tenant: "gone", Force: true},
		Done:   10, Skipped: 2, Total: &total, Waiting: "pending_per_tenant",
		Errors: []engine.TaskError{{At: t0.Add(time.Second), Message: "storage cannot write now; retry later"}},
		Error:  "no such endpoint", By: "token tok_1", Resumed: 1,
		Started: t0, Updated: t0.Add(time.Minute), Finished: t0.Add(time.Minute),
		Cursor: "42", Owner: "node_1", LeaseUntil: t0.Add(90 * time.Second),
	}
}()

func TestEncodeTask_roundTrip(t *testing.T) {
	plain := engine.Task{ID: "task_2", Kind: engine.TaskPurge, State: engine.TaskRunning, Started: t0, Updated: t0, Errors: []engine.TaskError{}}
	for _, want := range []engine.Task{sampleTask, plain} {
		b, err := encodeTask(want)
		if err != nil {
			t.Fatal(err)
		}
		if b[0] != formatV1 {
			t.Errorf("a task record in format %d, want %d", b[0], formatV1)
		}
		got, err := decodeTask(b)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("decodeTask(encodeTask(%+v)) =\n\t%+v, %v", want, got, err)
		}
	}
	for _, bad := range []string{`{"id":"task_1","kind":"x","state":"paused"}`, `{"kind":"x","state":"running"}`} {
		if _, err := decodeTask(append([]byte{formatV1}, bad...)); err == nil {
			t.Errorf("decodeTask(%s) took it", bad)
		}
	}
}

func FuzzDecodeTask(f *testing.F) {
	fuzzRecord(f, seed(sampleTask, encodeTask), decodeTask, encodeTask)
}

// TestCheck_tasks: Check reports a task missing from the indexes its
// tenant and state put it in.
func TestCheck_tasks(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "acme")
	running := engine.Task{ID: engine.NewID("task"), Tenant: "acme", Kind: engine.TaskReplay, State: engine.TaskRunning, Started: t0, Updated: t0}
	done := running
	done.ID, done.State, done.Finished = engine.NewID("task"), engine.TaskSucceeded, t0
	for _, tk := range []engine.Task{running, done} {
		if err := db.CreateTask(ctx, tk, 0); err != nil {
			t.Fatal(err)
		}
	}
	mustCheck(t, db)
	for _, c := range []struct {
		bucket []byte
		key    []byte
		value  []byte
	}{
		{bucketTenantTasks, append(tenantPrefix("acme"), running.ID...), nil},
		{bucketRunningTasks, []byte(running.ID), []byte("acme")},
		{bucketFinishedTasks, finishedTaskKey(done), []byte("acme")},
	} {
		if err := db.bolt.Update(func(tx *bolt.Tx) error { return tx.Bucket(c.bucket).Delete(c.key) }); err != nil {
			t.Fatal(err)
		}
		if err := db.Check(); err == nil {
			t.Errorf("Check passed a task missing from %s", c.bucket)
		}
		if err := db.bolt.Update(func(tx *bolt.Tx) error { return tx.Bucket(c.bucket).Put(c.key, c.value) }); err != nil {
			t.Fatal(err)
		}
		mustCheck(t, db)
	}
}

// TestOpen_migratesSchema10: a file of schema 10, before tasks, has none
// of their buckets; Open makes them, moves it to the current schema, and
// the store takes and lists tasks, its Check passing.
func TestOpen_migratesSchema10(t *testing.T) {
	path := filepath.Join(t.TempDir(), "webhookd.db")
	db := mustOpenDBAt(t, path)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketTasks, bucketTenantTasks, bucketRunningTasks, bucketFinishedTasks} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keySchema, u64(10))
	})
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.bolt.View(func(tx *bolt.Tx) error {
		if got := binary.BigEndian.Uint64(tx.Bucket(bucketMeta).Get(keySchema)); got != schemaVersion {
			t.Errorf("schema %d after Open, want %d", got, schemaVersion)
		}
		for _, b := range [][]byte{bucketTasks, bucketTenantTasks, bucketRunningTasks, bucketFinishedTasks} {
			if tx.Bucket(b) == nil {
				t.Errorf("no bucket %s after Open", b)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, db)
}
