package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/webhookd/webhookd/engine"
)

func TestOpen(t *testing.T) {
	t.Run("creates the directory and file private", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		path := filepath.Join(dir, "webhookd.db")
		db := mustOpenDBAt(t, path)
		if db.Path() != path {
			t.Errorf("Path = %q, want %q", db.Path(), path)
		}
		for _, tt := range []struct {
			path string
			want os.FileMode
		}{{dir, 0o700 | os.ModeDir}, {path, 0o600}} {
			fi, err := os.Stat(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode(); got != tt.want {
				t.Errorf("mode of %s = %v, want %v", tt.path, got, tt.want)
			}
		}
	})
	t.Run("not a database", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "junk.db")
		if err := os.WriteFile(path, bytes.Repeat([]byte("junk"), 4096), 0o600); err != nil {
			t.Fatal(err)
		}
		if db, err := Open(path, Options{}); err == nil {
			db.Close()
			t.Fatal("Open of a junk file succeeded")
		} else if !strings.HasPrefix(err.Error(), "storage: open "+path+": ") {
			t.Errorf("error = %q, want it to name the path", err)
		}
	})
}

func TestOpen_locked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "webhookd.db")
	mustOpenDBAt(t, path)

	start := time.Now()
	db, err := Open(path, Options{LockTimeout: 200 * time.Millisecond})
	elapsed := time.Since(start)
	if err == nil {
		db.Close()
		t.Fatal("second Open succeeded")
	}
	want := "storage: open " + path + ": the database is in use by another webhookd process (lock not acquired within 200ms)"
	if err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
	if !errors.Is(err, ErrInUse) {
		t.Error("error does not wrap ErrInUse")
	}
	if elapsed > time.Second {
		t.Errorf("second Open took %v, want about 200ms", elapsed)
	}
}

func TestOpen_newerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "webhookd.db")
	db := mustOpenDBAt(t, path)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchema, u64(schemaVersion+1))
	}); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open(path, Options{})
	if err == nil {
		db.Close()
		t.Fatal("Open of a newer schema succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("schema version %d is newer", schemaVersion+1)) || !strings.Contains(msg, path) {
		t.Errorf("error = %q, want it to name the path and the newer schema version", msg)
	}
}

// TestOpen_reopen writes one of everything, closes the file and finds it
// all again after Open.
func TestOpen_reopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "webhookd.db")
	db := mustOpenDBAt(t, path)
	tenant := mustTenant(t, db, "a")
	ep := mustEndpoint(t, db, "a", "order.created")
	in := newEvent("a", "order.created", `{"keep":"these bytes"}`)
	in.IdempotencyKey = "k"
	in.RequestHash = [32]byte{9}
	in.IdempotencyExpires = t0.Add(time.Hour)
	mustEventType(t, db, "order.created")
	res := mustAppend(t, db, in)
	dead := mustDelivery(t, db, "a")
	deadD, err := recordAttempt(ctx, db, engine.AttemptRecord{DeliveryID: dead.ID, Cycle: 1, State: engine.StateDead, Reason: "gone", At: t0})
	if err != nil {
		t.Fatal(err)
	}
	index := retryEntries(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = mustOpenDBAt(t, path)
	if got, err := db.Tenant(ctx, "a"); err != nil || !reflect.DeepEqual(got, tenant) {
		t.Errorf("Tenant = %+v, %v; want %+v", got, err, tenant)
	}
	if got, err := db.Endpoint(ctx, "a", ep.ID); err != nil || !reflect.DeepEqual(got, ep) {
		t.Errorf("Endpoint = %+v, %v; want %+v", got, err, ep)
	}
	ev, ds, err := db.Event(ctx, "a", in.Event.ID)
	if err != nil || !reflect.DeepEqual(ev, res.Event) || !reflect.DeepEqual(ds, res.Deliveries) {
		t.Errorf("Event = %+v, %+v, %v\nwant %+v, %+v", ev, ds, err, res.Event, res.Deliveries)
	}
	if got := retryEntries(t, db); !reflect.DeepEqual(got, index) {
		t.Errorf("RetryIndex = %+v, want %+v", got, index)
	}
	if dl, _, err := db.DeadLetters(ctx, "a", "", 10); err != nil || len(dl) != 1 || !reflect.DeepEqual(dl[0], deadD) {
		t.Errorf("DeadLetters = %+v, %v; want [%+v]", dl, err, deadD)
	}
	if dup := mustAppend(t, db, in); !dup.Duplicate || dup.Event.ID != in.Event.ID {
		t.Errorf("ingest after reopen = %+v, want a duplicate", dup)
	}
	if next := mustAppend(t, db, newEvent("a", "order.created", `{}`)); next.Event.Seq <= res.Event.Seq {
		t.Errorf("Seq after reopen = %d, want > %d", next.Event.Seq, res.Event.Seq)
	}
}

func TestDB_Close(t *testing.T) {
	synctest.Test(t, testDB_Close) // waitQueued needs a bubble
}

func testDB_Close(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")

	// Writes queued when Close is called are committed first.
	release := blockCommits(t, db)
	const n = 5
	errs := make(chan error, n+1)
	for i := range n {
		go func() {
			_, _, err := db.PutTenant(ctx, engine.Tenant{ID: fmt.Sprintf("t%d", i)})
			errs <- err
		}()
	}
	waitQueued(t, db, n)
	go func() { // and one on the acknowledged queue (ingest's)
		errs <- db.updateAck(ctx, func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put([]byte("test-ack"), nil) })
	}()
	waitQueued(t, db, n+1)
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for range n + 1 {
		if err := <-errs; err != nil {
			t.Errorf("queued write: %v", err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	_, _, err := db.PutTenant(ctx, engine.Tenant{ID: "late"})
	wantCode(t, err, engine.CodeUnavailable, "")
	if !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close = %v, want ErrClosed", err)
	}
	if got := db.Stats().Ops; got != 1+1+n+1 {
		t.Errorf("Stats().Ops = %d, want %d", got, 1+1+n+1)
	}
}

// TestDB_groupCommit ingests from many goroutines: every ingest is stored
// and they share commits.
func TestDB_groupCommit(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustEventType(t, db, "order.created")
	mustEndpoint(t, db, "a", "*")
	before := db.Stats()

	const n = 200
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := db.AppendEvent(ctx, newEvent("a", "order.created", fmt.Sprintf(`{"i":%d}`, i)))
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = res.Event.ID
		})
	}
	wg.Wait()
	for i, id := range ids {
		if _, ds, err := db.Event(ctx, "a", id); err != nil || len(ds) != 1 {
			t.Errorf("event %d: %d deliveries, %v", i, len(ds), err)
		}
	}
	st := db.Stats()
	commits, ops := st.Commits-before.Commits, st.Ops-before.Ops
	if ops != n {
		t.Errorf("%d ops committed, want %d", ops, n)
	}
	if commits >= ops {
		t.Errorf("%d commits for %d ops, want fewer (group commit)", commits, ops)
	}
	// Each commit writes its pages and a meta page, in part of its time.
	pages, writing := st.PagesWritten-before.PagesWritten, st.WriteTime-before.WriteTime
	if pages < 2*int64(commits) {
		t.Errorf("%d pages written by %d commits, want 2 or more each", pages, commits)
	}
	if writing <= 0 || writing > st.CommitTime-before.CommitTime {
		t.Errorf("%v writing pages, of %v committing", writing, st.CommitTime-before.CommitTime)
	}
	t.Logf("%d ops in %d commits, %v committing, %v of it writing %d pages", ops, commits, st.CommitTime-before.CommitTime, writing, pages)
}

// TestDB_commitFailingOp puts a failing write and a panicking one in a
// batch between two good ones: each gets its error and nothing of it is
// written; the others commit together.
func TestDB_commitFailingOp(t *testing.T) {
	synctest.Test(t, testDB_commitFailingOp) // waitQueued needs a bubble
}

func testDB_commitFailingOp(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustEventType(t, db, "order.created")
	mustEndpoint(t, db, "a", "*")

	release := blockCommits(t, db)
	before := db.Stats()
	ghost := func(name string) func(*bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketTenants).Put([]byte(name), []byte("junk")); err != nil {
				return err
			}
			if name == "panic" {
				panic("bug")
			}
			return errors.New("bad write")
		}
	}
	good := []engine.NewEvent{newEvent("a", "order.created", `{}`), newEvent("a", "order.created", `{}`)}
	writes := []func() error{
		func() error { _, err := db.AppendEvent(ctx, good[0]); return err },
		func() error { return db.update(ctx, ghost("ghost")) },
		func() error { _, err := db.AppendEvent(ctx, good[1]); return err },
		func() error { return db.update(ctx, ghost("panic")) },
	}
	errs := make([]chan error, len(writes))
	for i, w := range writes {
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- w() }()
		waitQueued(t, db, i+1) // keep the queue order
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}

	for i, want := range []string{"", "bad write", "", "storage: write panicked: bug"} {
		err := <-errs[i]
		if got := fmt.Sprint(err); want == "" && err != nil || want != "" && got != want {
			t.Errorf("write %d: error %v, want %q", i, err, want)
		}
	}
	for i, in := range good {
		if _, _, err := db.Event(ctx, "a", in.Event.ID); err != nil {
			t.Errorf("event %d: %v", i, err)
		}
	}
	for _, id := range []string{"ghost", "panic"} {
		if _, err := db.Tenant(ctx, id); engine.ErrorCode(err) != engine.CodeTenantNotFound {
			t.Errorf("failed write's tenant %q was stored (%v)", id, err)
		}
	}
	st := db.Stats()
	if commits, ops := st.Commits-before.Commits, st.Ops-before.Ops; commits != 2 || ops != 3 {
		t.Errorf("%d commits of %d ops, want 2 of 3 (the blocking write, then both ingests)", commits, ops)
	}
}

// TestDB_commitFails makes the file unable to grow (as on a full disk):
// every write of the batch gets CodeUnavailable, and writes succeed again
// once it can grow.
func TestDB_commitFails(t *testing.T) {
	synctest.Test(t, testDB_commitFails) // waitQueued needs a bubble
}

func testDB_commitFails(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustEventType(t, db, "order.created")
	mustEndpoint(t, db, "a", "*")

	release := blockCommits(t, db)
	big := newEvent("a", "order.created", `"`+strings.Repeat("x", 1<<20)+`"`)
	small := newEvent("a", "order.created", `{}`)
	errs := make(chan error, 2)
	for _, in := range []engine.NewEvent{big, small} {
		go func() {
			_, err := db.AppendEvent(ctx, in)
			errs <- err
		}()
	}
	waitQueued(t, db, 2)
	// The write to MaxSize happens before release, and release before the
	// commit loop reads it.
	db.bolt.MaxSize = 1
	_ = release()
	for range 2 {
		err := <-errs
		e := wantCode(t, err, engine.CodeUnavailable, "")
		if e.Message != "storage cannot write now; retry later" || !errors.Is(err, berrors.ErrMaxSizeReached) {
			t.Errorf("error = %v (cause %v)", err, e.Err)
		}
	}
	if got := db.Stats().Failures; got == 0 {
		t.Error("Stats().Failures = 0")
	}
	if n := countKeys(t, db, bucketEvents); n != 0 {
		t.Errorf("%d events after a failed commit, want 0", n)
	}

	// Every answer above was sent after the commit loop read MaxSize.
	db.bolt.MaxSize = 0
	for _, in := range []engine.NewEvent{big, small} {
		if _, err := db.AppendEvent(ctx, in); err != nil {
			t.Errorf("ingest after recovery: %v", err)
		}
	}
	mustCheck(t, db)
}

func TestDB_update_context(t *testing.T) {
	t.Run("ended before queueing", func(t *testing.T) {
		db := MustOpenDB(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, err := db.PutTenant(ctx, engine.Tenant{ID: "a"})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("PutTenant = %v, want context.Canceled", err)
		}
	})
	t.Run("ended while queued", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { // waitQueued needs a bubble
			db := MustOpenDB(t)
			ctx, cancel := context.WithCancel(context.Background())
			release := blockCommits(t, db)
			errc := make(chan error, 1)
			go func() {
				_, _, err := db.PutTenant(ctx, engine.Tenant{ID: "b"})
				errc <- err
			}()
			waitQueued(t, db, 1)
			cancel()
			if err := release(); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("PutTenant = %v, want context.Canceled", err)
			}
			if _, err := db.Tenant(context.Background(), "b"); engine.ErrorCode(err) != engine.CodeTenantNotFound {
				t.Errorf("a write whose context ended before its transaction was stored (%v)", err)
			}
		})
	})
}

func TestDB_WriteTo(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	d := mustDelivery(t, db, "a")

	path := filepath.Join(t.TempDir(), "backup.db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := db.WriteTo(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Size() != n {
		t.Errorf("WriteTo = %d bytes, file has %d", n, fi.Size())
	}

	backup := mustOpenDBAt(t, path)
	mustCheck(t, backup)
	got, err := backup.Delivery(ctx, "a", d.ID)
	if err != nil || !reflect.DeepEqual(got, d) {
		t.Errorf("delivery in the backup = %+v, %v; want %+v", got, err, d)
	}
}

// TestDB_Check breaks the retry index behind the DB's back: Check reports
// it.
func TestDB_Check(t *testing.T) {
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	d := mustDelivery(t, db, "a")
	mustCheck(t, db)

	set := func(put bool) {
		t.Helper()
		err := db.update(context.Background(), func(tx *bolt.Tx) error {
			if put {
				return tx.Bucket(bucketRetryIndex).Put(retryKey(d.NextAttemptAt, d.ID), []byte(d.EndpointID))
			}
			return tx.Bucket(bucketRetryIndex).Delete(retryKey(d.NextAttemptAt, d.ID))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	set(false)
	if err := db.Check(); err == nil || !strings.Contains(err.Error(), d.ID) {
		t.Errorf("Check = %v, want it to name delivery %s", err, d.ID)
	}
	set(true)
	mustCheck(t, db)

	// The delivery log's entry, which also lists the event's deliveries
	// (eventDeliveries): gone, then naming a delivery that is not there.
	seq := mustSeq(t, db, d.EventID)
	listed := func(put bool, id string) {
		t.Helper()
		err := db.update(context.Background(), func(tx *bolt.Tx) error {
			if put {
				return tx.Bucket(bucketTenantDeliveries).Put(tenantDeliveryKey("a", seq, id), nil)
			}
			return tx.Bucket(bucketTenantDeliveries).Delete(tenantDeliveryKey("a", seq, id))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	listed(false, d.ID)
	if err := db.Check(); err == nil || !strings.Contains(err.Error(), d.ID+": not listed in tenant_deliveries") {
		t.Errorf("Check = %v, want it to say delivery %s is not listed", err, d.ID)
	}
	listed(true, d.ID)
	listed(true, "dlv_ghost")
	if err := db.Check(); err == nil || !strings.Contains(err.Error(), "dlv_ghost") {
		t.Errorf("Check = %v, want it to name dlv_ghost", err)
	}
	listed(false, "dlv_ghost")
	mustCheck(t, db)
}

// mustSeq returns the log position of event id.
func mustSeq(tb testing.TB, db *DB, id string) uint64 {
	tb.Helper()
	var seq uint64
	if err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		seq, _, err = getEventValue(tx, id)
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	return seq
}

func BenchmarkDB_AppendEvent(b *testing.B) {
	db := MustOpenDB(b)
	mustTenant(b, db, "a")
	mustEventType(b, db, "order.created")
	mustEndpoint(b, db, "a", "*")
	mustEndpoint(b, db, "a", "*")
	body := `{"amount":1000,"currency":"eur","customer":"cus_123"}`
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := db.AppendEvent(context.Background(), newEvent("a", "order.created", body)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	st := db.Stats()
	b.ReportMetric(float64(st.Ops)/float64(st.Commits), "ops/commit")
}

// TestDB_AcksCommitFirst: writes an acknowledgement waits for (ingest)
// are committed before the other writes queued with them, every one of
// them in the next commit, with at most besideAcks others beside them;
// the others follow in the commit after.
func TestDB_AcksCommitFirst(t *testing.T) {
	synctest.Test(t, testDB_AcksCommitFirst) // waitQueued needs a bubble
}

func testDB_AcksCommitFirst(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var sizes []int
	db, err := Open(filepath.Join(t.TempDir(), "webhookd.db"), Options{OnCommit: func(n int, _ time.Duration) {
		mu.Lock()
		sizes = append(sizes, n)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	release := blockCommits(t, db)
	const others, acks = 3 * besideAcks, 5
	var wg sync.WaitGroup
	var ackCommits [acks]uint64 // the commits before the one each ack's write ran in
	write := func(key string) func(*bolt.Tx) error {
		return func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put([]byte(key), nil) }
	}
	for i := range others {
		wg.Go(func() {
			if err := db.update(ctx, write(fmt.Sprintf("test-other-%d", i))); err != nil {
				t.Error(err)
			}
		})
	}
	waitQueued(t, db, others) // queued first, so only precedence puts the acks ahead
	for i := range acks {
		wg.Go(func() {
			err := db.updateAck(ctx, func(tx *bolt.Tx) error {
				ackCommits[i] = db.commits.Load()
				return write(fmt.Sprintf("test-ack-%d", i))(tx)
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	waitQueued(t, db, others+acks)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	want := []int{1, acks + besideAcks, others - besideAcks}
	if !slices.Equal(sizes, want) {
		t.Errorf("commits of %v writes, want %v (the blocker; the acks and %d others; the rest)", sizes, want, besideAcks)
	}
	for i, c := range ackCommits {
		if c != 1 {
			t.Errorf("ack %d ran after %d commits, want 1 (in the first commit after the blocker)", i, c)
		}
	}
}

// TestDB_ObserveCommit: ObserveCommit is told of each transaction of the
// commit loop once, after it ends: the writes it committed, the ones
// that failed on their own and were left out (one more run each), and
// the time it took, its pages' writing and fsync among it.
func TestDB_ObserveCommit(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var seen []Commit
	db, err := Open(filepath.Join(t.TempDir(), "webhookd.db"), Options{ObserveCommit: func(c Commit) {
		mu.Lock()
		seen = append(seen, c)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	release := blockCommits(t, db)
	const good = 5
	var wg sync.WaitGroup
	for i := range good {
		wg.Go(func() {
			if err := db.update(ctx, func(tx *bolt.Tx) error {
				return tx.Bucket(bucketMeta).Put(fmt.Appendf(nil, "test-observe-%d", i), bytes.Repeat([]byte{'x'}, 1000))
			}); err != nil {
				t.Error(err)
			}
		})
	}
	refused := errors.New("refused on its own")
	wg.Go(func() {
		if err := db.update(ctx, func(*bolt.Tx) error { return refused }); !errors.Is(err, refused) {
			t.Errorf("the failing write got %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for len(db.ops) < good+1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("told of %d commits, want 2 (the blocker, then the batch): %+v", len(seen), seen)
	}
	if c := seen[0]; c.Writes != 1 || c.Runs != 1 || c.Refused != 0 || c.Err != nil {
		t.Errorf("the blocker's commit: %+v", c)
	}
	c := seen[1]
	if c.Writes != good || c.Refused != 1 || c.Runs != 2 || c.Err != nil {
		t.Errorf("the batch's commit: %+v, want %d writes, 1 refused, 2 runs", c, good)
	}
	if c.Pages == 0 || c.WriteSync <= 0 || c.Duration < c.WriteSync || c.Start.IsZero() {
		t.Errorf("the batch's commit: %d pages, write and sync %v of %v from %v", c.Pages, c.WriteSync, c.Duration, c.Start)
	}
}
