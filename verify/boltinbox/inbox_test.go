package boltinbox

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/verify"
)

// MustOpenInbox opens an Inbox on a new file in tb.TempDir() and, at
// cleanup, checks the file's consistency and closes it.
func MustOpenInbox(tb testing.TB) *Inbox {
	tb.Helper()
	return mustOpenInboxAt(tb, filepath.Join(tb.TempDir(), "inbox.db"))
}

func mustOpenInboxAt(tb testing.TB, path string) *Inbox {
	tb.Helper()
	in, err := Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { checkAndClose(tb, in) })
	return in
}

func checkAndClose(tb testing.TB, in *Inbox) {
	tb.Helper()
	if in.db.Path() == "" { // closed already
		return
	}
	err := in.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
	if err != nil {
		tb.Errorf("bbolt check: %v", err)
	}
	if err := in.Close(); err != nil {
		tb.Errorf("close: %v", err)
	}
}

// fakeClock is a settable clock for tasks.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// putOrder is a receiver's business write, in its own bucket.
func putOrder(tx verify.Tx, id string) error {
	b, err := tx.(*Tx).Bolt().CreateBucketIfNotExists([]byte("orders"))
	if err != nil {
		return err
	}
	return b.Put([]byte(id), []byte("paid"))
}

func getOrder(tb testing.TB, in *Inbox, id string) string {
	tb.Helper()
	var v string
	in.DB().View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("orders")); b != nil {
			v = string(b.Get([]byte(id)))
		}
		return nil
	})
	return v
}

func TestInbox_Receive(t *testing.T) {
	ctx := t.Context()
	body := []byte(`{"id":"evt_1"}`)

	t.Run("duplicate not run again", func(t *testing.T) {
		in := MustOpenInbox(t)
		runs := 0
		fn := func(tx verify.Tx) error { runs++; return putOrder(tx, "evt_1") }
		for i, want := range []verify.Result{verify.Processed, verify.AlreadyProcessed, verify.AlreadyProcessed} {
			got, err := in.Receive(ctx, "acme", "evt_1", body, fn)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("delivery %d: %v, want %v", i+1, got, want)
			}
		}
		if runs != 1 {
			t.Errorf("fn ran %d times, want 1", runs)
		}
		if got := getOrder(t, in, "evt_1"); got != "paid" {
			t.Errorf("order = %q, want paid", got)
		}
	})

	t.Run("failing fn rolls back, redelivery processes once", func(t *testing.T) {
		in := MustOpenInbox(t)
		boom := errors.New("boom")
		runs := 0
		fail := func(tx verify.Tx) error {
			runs++
			if err := putOrder(tx, "evt_1"); err != nil {
				return err
			}
			if _, err := tx.EnqueueTask("email", nil); err != nil {
				return err
			}
			return boom
		}
		if _, err := in.Receive(ctx, "acme", "evt_1", body, fail); !errors.Is(err, boom) {
			t.Fatalf("Receive: %v, want boom", err)
		}
		if got := getOrder(t, in, "evt_1"); got != "" {
			t.Errorf("order after rollback = %q, want none", got)
		}
		if _, err := in.Task(ctx, "acme", "evt_1", "email"); !errors.Is(err, verify.ErrTaskNotFound) {
			t.Errorf("task after rollback: %v, want verify.ErrTaskNotFound", err)
		}
		ok := func(tx verify.Tx) error { runs++; return putOrder(tx, "evt_1") }
		for i, want := range []verify.Result{verify.Processed, verify.AlreadyProcessed} {
			got, err := in.Receive(ctx, "acme", "evt_1", body, ok)
			if err != nil || got != want {
				t.Errorf("redelivery %d: %v, %v; want %v", i+1, got, err, want)
			}
		}
		if runs != 2 {
			t.Errorf("fn ran %d times, want 2 (one failed, one processed)", runs)
		}
		if got := getOrder(t, in, "evt_1"); got != "paid" {
			t.Errorf("order = %q, want paid", got)
		}
	})

	t.Run("panicking fn rolls back and releases the key", func(t *testing.T) {
		in := MustOpenInbox(t)
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			in.Receive(ctx, "acme", "evt_1", body, func(tx verify.Tx) error {
				putOrder(tx, "evt_1")
				panic("boom")
			})
		}()
		if n := in.locks.len(); n != 0 {
			t.Errorf("%d key locks left", n)
		}
		if got := getOrder(t, in, "evt_1"); got != "" {
			t.Errorf("order after panic = %q", got)
		}
		if got, err := in.Receive(ctx, "acme", "evt_1", body, func(verify.Tx) error { return nil }); got != verify.Processed || err != nil {
			t.Errorf("redelivery: %v, %v", got, err)
		}
	})

	t.Run("same id, other body", func(t *testing.T) {
		in := MustOpenInbox(t)
		in.Receive(ctx, "acme", "evt_1", body, func(verify.Tx) error { return nil })
		ran := false
		_, err := in.Receive(ctx, "acme", "evt_1", []byte(`{"id":"evt_1","x":1}`), func(verify.Tx) error { ran = true; return nil })
		if !errors.Is(err, verify.ErrEventConflict) || ran {
			t.Errorf("Receive: %v (fn ran: %v), want verify.ErrEventConflict", err, ran)
		}
	})

	t.Run("senders are separate", func(t *testing.T) {
		in := MustOpenInbox(t)
		for _, sender := range []string{"acme", "globex", ""} {
			if got, err := in.Receive(ctx, sender, "evt_1", body, func(verify.Tx) error { return nil }); got != verify.Processed || err != nil {
				t.Errorf("sender %q: %v, %v", sender, got, err)
			}
		}
		// Length prefixes keep ("a", "bc") apart from ("ab", "c").
		for _, k := range [][2]string{{"a", "bc"}, {"ab", "c"}} {
			if got, err := in.Receive(ctx, k[0], k[1], body, func(verify.Tx) error { return nil }); got != verify.Processed || err != nil {
				t.Errorf("key %q: %v, %v", k, got, err)
			}
		}
	})

	t.Run("invalid keys", func(t *testing.T) {
		in := MustOpenInbox(t)
		long := strings.Repeat("x", verify.MaxKeyLen+1)
		for _, k := range [][2]string{{"acme", ""}, {"acme", long}, {long, "evt_1"}} {
			if _, err := in.Receive(ctx, k[0], k[1], body, func(verify.Tx) error { return nil }); !errors.Is(err, verify.ErrInvalidKey) {
				t.Errorf("Receive(%.10q, %.10q): %v, want verify.ErrInvalidKey", k[0], k[1], err)
			}
		}
		in.Receive(ctx, "acme", "evt_1", body, func(tx verify.Tx) error {
			for _, name := range []string{"", long} {
				if _, err := tx.EnqueueTask(name, nil); !errors.Is(err, verify.ErrInvalidKey) {
					t.Errorf("EnqueueTask(%.10q): %v, want verify.ErrInvalidKey", name, err)
				}
			}
			return nil
		})
	})

	t.Run("tx is dead after fn", func(t *testing.T) {
		in := MustOpenInbox(t)
		var kept verify.Tx
		in.Receive(ctx, "acme", "evt_1", body, func(tx verify.Tx) error { kept = tx; return nil })
		if _, err := kept.EnqueueTask("late", nil); err == nil {
			t.Error("EnqueueTask after fn returned: no error")
		}
	})

	t.Run("task names unique per event", func(t *testing.T) {
		in := MustOpenInbox(t)
		_, err := in.Receive(ctx, "acme", "evt_1", body, func(tx verify.Tx) error {
			if _, err := tx.EnqueueTask("email", nil); err != nil {
				return err
			}
			_, err := tx.EnqueueTask("email", nil)
			return err
		})
		if !errors.Is(err, verify.ErrTaskExists) {
			t.Errorf("Receive: %v, want verify.ErrTaskExists", err)
		}
	})

	t.Run("canceled before start", func(t *testing.T) {
		in := MustOpenInbox(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		ran := false
		if _, err := in.Receive(cctx, "acme", "evt_1", body, func(verify.Tx) error { ran = true; return nil }); !errors.Is(err, context.Canceled) || ran {
			t.Errorf("Receive: %v (ran %v), want context.Canceled", err, ran)
		}
	})

	t.Run("survives reopening", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "inbox.db")
		in := mustOpenInboxAt(t, path)
		in.Receive(ctx, "acme", "evt_1", body, func(verify.Tx) error { return nil })
		checkAndClose(t, in)
		in = mustOpenInboxAt(t, path)
		if got, err := in.Receive(ctx, "acme", "evt_1", body, func(verify.Tx) error { t.Error("fn ran"); return nil }); got != verify.AlreadyProcessed || err != nil {
			t.Errorf("after reopen: %v, %v", got, err)
		}
	})
}

// waiters returns how many Receive calls hold or wait for the key.
func waiters(in *Inbox, sender, eventID string) int {
	in.locks.mu.Lock()
	defer in.locks.mu.Unlock()
	if k := in.locks.m[string(verify.AppendEventKey(nil, sender, eventID))]; k != nil {
		return k.refs
	}
	return 0
}

func TestInbox_Receive_concurrentDuplicates(t *testing.T) {
	const n = 16
	body := []byte(`{"id":"evt_1"}`)
	for _, firstFails := range []bool{false, true} {
		name := "first succeeds"
		if firstFails {
			name = "first fails"
		}
		// In a synctest bubble (the bbolt file included: a syscall
		// returns, and synctest.Wait waits for it), synctest.Wait says
		// when every delivery waits.
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				in := MustOpenInbox(t)
				var (
					runs, fails atomic.Int32
					finished    atomic.Bool // set by the successful fn's last step
					release     = make(chan struct{})
				)
				fn := func(tx verify.Tx) error {
					r := runs.Add(1)
					if r == 1 {
						<-release // hold the first delivery until all have arrived
						if firstFails {
							fails.Add(1)
							return errors.New("first fails")
						}
					}
					if err := putOrder(tx, "evt_1"); err != nil {
						return err
					}
					finished.Store(true)
					return nil
				}
				results := make(chan verify.Result, n)
				var wg sync.WaitGroup
				for range n {
					wg.Go(func() {
						res, err := in.Receive(ctx, "acme", "evt_1", body, fn)
						if err != nil {
							if fails.Load() == 1 && err.Error() == "first fails" {
								return
							}
							t.Errorf("Receive: %v", err)
							return
						}
						if !finished.Load() {
							t.Errorf("Receive answered %v before the first outcome", res)
						}
						results <- res
					})
				}
				synctest.Wait()
				if got := waiters(in, "acme", "evt_1"); got != n {
					t.Fatalf("%d deliveries hold or wait for the key once every goroutine waits, want all %d", got, n)
				}
				close(release)
				wg.Wait()
				close(results)

				count := map[verify.Result]int{}
				for r := range results {
					count[r]++
				}
				wantRuns, wantDup := int32(1), n-1
				if firstFails {
					wantRuns, wantDup = 2, n-2
				}
				if got := runs.Load(); got != wantRuns {
					t.Errorf("fn ran %d times, want %d", got, wantRuns)
				}
				if count[verify.Processed] != 1 || count[verify.AlreadyProcessed] != wantDup {
					t.Errorf("results %v, want 1 processed and %d already processed", count, wantDup)
				}
				if n := in.locks.len(); n != 0 {
					t.Errorf("%d key locks left", n)
				}
			})
		})
	}
}

// TestInbox_Receive_waitHonoursContext runs in a synctest bubble (the
// bbolt file included): synctest.Wait says when the first delivery holds
// its key, and the 20 ms are the bubble's.
func TestInbox_Receive_waitHonoursContext(t *testing.T) {
	synctest.Test(t, testReceiveWaitHonoursContext)
}

func testReceiveWaitHonoursContext(t *testing.T) {
	in := MustOpenInbox(t)
	body := []byte(`{}`)
	release := make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := in.Receive(t.Context(), "acme", "evt_1", body, func(verify.Tx) error { <-release; return nil })
		done <- err
	}()
	synctest.Wait()
	if got := waiters(in, "acme", "evt_1"); got != 1 {
		t.Fatalf("%d deliveries hold the key once every goroutine waits, want the first", got)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := in.Receive(ctx, "acme", "evt_1", body, func(verify.Tx) error { t.Error("fn ran"); return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting Receive: %v, want DeadlineExceeded", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestInbox_tasks(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "inbox.db")
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	open := func() *Inbox {
		in := mustOpenInboxAt(t, path)
		in.Now = clock.Now
		return in
	}
	in := open()
	wantKey := verify.IdempotencyKey("acme", "evt_1", "charge")

	var enq verify.Task
	_, err := in.Receive(ctx, "acme", "evt_1", []byte(`{}`), func(tx verify.Tx) error {
		var err error
		enq, err = tx.EnqueueTask("charge", []byte("4200"))
		if err != nil {
			return err
		}
		_, err = tx.EnqueueTask("email", []byte("hello"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if enq.State != verify.TaskPending || enq.IdempotencyKey != wantKey || enq.Attempts != 0 {
		t.Errorf("enqueued %+v", enq)
	}
	// Queued is not done.
	got, err := in.Task(ctx, "acme", "evt_1", "charge")
	if err != nil || got.State != verify.TaskPending {
		t.Fatalf("verify.Task = %v, %v; want pending", got.State, err)
	}

	claim := func(want string, attempts int) verify.Task {
		t.Helper()
		tk, err := in.ClaimTask(ctx, time.Minute)
		if err != nil {
			t.Fatalf("ClaimTask: %v", err)
		}
		if tk.Name != want || tk.State != verify.TaskProcessing || tk.Attempts != attempts ||
			tk.IdempotencyKey != verify.IdempotencyKey("acme", "evt_1", want) || tk.Sender != "acme" || tk.EventID != "evt_1" {
			t.Fatalf("ClaimTask = %+v, want %s attempt %d", tk, want, attempts)
		}
		return tk
	}
	noTask := func() {
		t.Helper()
		if tk, err := in.ClaimTask(ctx, time.Minute); !errors.Is(err, verify.ErrNoTask) {
			t.Fatalf("ClaimTask = %+v, %v; want verify.ErrNoTask", tk, err)
		}
	}

	c1 := claim("charge", 1)
	if string(c1.Payload) != "4200" {
		t.Errorf("payload %q", c1.Payload)
	}
	clock.Add(time.Second)
	e1 := claim("email", 1)
	noTask() // both leased

	// The charge worker "crashes"; after the lease the task is offered
	// again, with the same idempotency key.
	clock.Add(time.Minute)
	c2 := claim("charge", 2)
	if c2.IdempotencyKey != c1.IdempotencyKey {
		t.Error("idempotency key changed between attempts")
	}
	if err := in.FailTask(ctx, c1, errors.New("late"), clock.Now()); !errors.Is(err, verify.ErrTaskNotClaimed) {
		t.Errorf("FailTask by the stale attempt: %v, want verify.ErrTaskNotClaimed", err)
	}
	if err := in.FailTask(ctx, c2, errors.New("card network down"), clock.Now().Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := in.CompleteTask(ctx, e1); err != nil {
		t.Fatal(err)
	}
	noTask()

	// Reopen: the state machine is durable.
	checkAndClose(t, in)
	in = open()
	got, err = in.Task(ctx, "acme", "evt_1", "charge")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != verify.TaskPending || got.Attempts != 2 || got.LastError != "card network down" || !got.Due.Equal(clock.Now().Add(10*time.Minute)) {
		t.Errorf("after reopen: %+v", got)
	}
	if got, _ := in.Task(ctx, "acme", "evt_1", "email"); got.State != verify.TaskCompleted || !got.Due.IsZero() {
		t.Errorf("email after reopen: %+v", got)
	}
	noTask()
	clock.Add(10 * time.Minute)
	c3 := claim("charge", 3)
	if err := in.CompleteTask(ctx, c3); err != nil {
		t.Fatal(err)
	}
	if err := in.CompleteTask(ctx, c3); err != nil {
		t.Errorf("CompleteTask twice: %v", err)
	}
	if err := in.FailTask(ctx, c3, errors.New("x"), time.Time{}); !errors.Is(err, verify.ErrTaskNotClaimed) {
		t.Errorf("FailTask after complete: %v", err)
	}
	checkAndClose(t, in)
	in = open()
	noTask()
	ts, err := in.Tasks(ctx, "acme", "evt_1")
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Name != "charge" || ts[1].Name != "email" {
		t.Fatalf("Tasks = %+v", ts)
	}
	for _, tk := range ts {
		if tk.State != verify.TaskCompleted {
			t.Errorf("%s: %v, want completed", tk.Name, tk.State)
		}
	}
	if _, err := in.Task(ctx, "acme", "evt_1", "nope"); !errors.Is(err, verify.ErrTaskNotFound) {
		t.Errorf("Task(nope): %v", err)
	}
}

func TestInbox_FailTask_giveUp(t *testing.T) {
	ctx := t.Context()
	in := MustOpenInbox(t)
	in.Receive(ctx, "acme", "evt_1", nil, func(tx verify.Tx) error { _, err := tx.EnqueueTask("charge", nil); return err })
	tk, err := in.ClaimTask(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := tk.Due.Sub(tk.UpdatedAt); d != DefaultTaskLease {
		t.Errorf("lease %s, want %s", d, DefaultTaskLease)
	}
	if err := in.FailTask(ctx, tk, errors.New(strings.Repeat("é", maxLastError)), time.Time{}); err != nil {
		t.Fatal(err)
	}
	got, _ := in.Task(ctx, "acme", "evt_1", "charge")
	if got.State != verify.TaskFailed || len(got.LastError) > maxLastError || !strings.HasPrefix(got.LastError, "éé") {
		t.Errorf("after giving up: %v, %d-byte error", got.State, len(got.LastError))
	}
	if _, err := in.ClaimTask(ctx, 0); !errors.Is(err, verify.ErrNoTask) {
		t.Errorf("ClaimTask after giving up: %v", err)
	}
}

func TestNew_sharedDB(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "app.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	in, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := in.Receive(t.Context(), "", "evt_1", nil, func(verify.Tx) error { return nil }); got != verify.Processed || err != nil {
		t.Fatalf("Receive: %v, %v", got, err)
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(*bolt.Tx) error { return nil }); err != nil {
		t.Errorf("db closed by the inbox: %v", err)
	}
}

func TestInbox_Close_twice(t *testing.T) {
	in, err := Open(filepath.Join(t.TempDir(), "inbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if err := in.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
