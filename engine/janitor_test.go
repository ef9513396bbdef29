package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
	"github.com/webhookd/webhookd/storage"
)

// TestJanitor prunes a finished event past retention in one pass and
// keeps a newer one, and purges a deleted tenant as soon as it is woken,
// not at its next pass. It runs in a synctest bubble (the bbolt file's
// I/O included: a goroutine in a syscall is only waited for), so "as soon
// as" is checked exactly: once every goroutine waits, before the fake
// clock reaches the next pass.
func TestJanitor(t *testing.T) {
	synctest.Test(t, testJanitor)
}

func testJanitor(t *testing.T) {
	ctx := context.Background()
	db, err := storage.Open(filepath.Join(t.TempDir(), "webhookd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	long := 48 * time.Hour
	then := time.Now().Add(-2 * long)
	clock := func() time.Time { return then }
	old := engine.NewService(db, nil, engine.ServiceOptions{Now: clock})
	svc := engine.NewService(db, nil, engine.ServiceOptions{})
	for _, tenant := range []string{"acme", "gone"} {
		if _, _, err := svc.PutTenant(ctx, tenant, engine.TenantInput{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := svc.PutEventType(ctx, "invoice.paid", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	in := engine.IngestInput{Type: "invoice.paid", Data: json.RawMessage(`{}`)}
	stale, err := old.Ingest(ctx, "acme", in) // no endpoint: finished when made
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := svc.Ingest(ctx, "acme", in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Ingest(ctx, "gone", in); err != nil {
		t.Fatal(err)
	}

	j := engine.NewJanitor(db, engine.JanitorOptions{Succeeded: long, Dead: long, Every: time.Hour})
	if err := j.RunOnce(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Event(ctx, "acme", stale.Event.ID); engine.ErrorCode(err) != engine.CodeEventNotFound {
		t.Errorf("the event past retention: %v, want it pruned", err)
	}
	if _, _, err := svc.Event(ctx, "acme", fresh.Event.ID); err != nil {
		t.Errorf("the event inside retention: %v", err)
	}

	// free checks, once the janitor waits (for its next pass, an hour
	// out on the bubble's clock), that tenant's id can be made again: its
	// purge is done.
	free := func(tenant, why string) {
		t.Helper()
		synctest.Wait()
		if _, _, err := svc.PutTenant(ctx, tenant, engine.TenantInput{}); err != nil {
			t.Fatalf("PutTenant of deleted %s: %v (%s)", tenant, err, why)
		}
	}
	// Deleted before Start (by the store: a Service's DeleteTenant purges
	// in a task of its own): Start's own purge frees it.
	if err := db.DeleteTenant(ctx, "gone", time.Now()); err != nil {
		t.Fatal(err)
	}
	j.Start()
	defer j.Stop()
	free("gone", "the purge at Start did not run")
	// Deleted after that purge, an hour before the next pass: only Wake
	// frees it in time.
	if err := db.DeleteTenant(ctx, "gone", time.Now()); err != nil {
		t.Fatal(err)
	}
	j.Wake()
	free("gone", "the janitor did not purge it when woken")
	j.Stop() // twice is safe
	if err := db.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// TestJanitor_PrunesTasks: a pass deletes the tasks that finished before
// [retention] tasks, and keeps the newer ones and every running one,
// however old.
func TestJanitor_PrunesTasks(t *testing.T) {
	ctx := context.Background()
	db := memstore.New()
	svc := engine.NewService(db, nil, engine.ServiceOptions{})
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	keep := 24 * time.Hour
	task := func(state engine.TaskState, finished time.Time) engine.Task {
		tk := engine.Task{ID: engine.NewID("task"), Tenant: "acme", Kind: engine.TaskReplay, State: state,
			Started: now.Add(-100 * keep), Updated: finished, Finished: finished, Errors: []engine.TaskError{}}
		if err := db.CreateTask(ctx, tk, 0); err != nil {
			t.Fatal(err)
		}
		return tk
	}
	old := task(engine.TaskSucceeded, now.Add(-keep-time.Minute))
	failed := task(engine.TaskFailed, now.Add(-keep-time.Minute))
	young := task(engine.TaskSucceeded, now.Add(-keep+time.Minute))
	running := task(engine.TaskRunning, time.Time{})
	j := engine.NewJanitor(db, engine.JanitorOptions{Tasks: keep})
	if err := j.RunOnce(ctx, now); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []engine.Task{old, failed} {
		if _, err := db.Task(ctx, tk.ID); engine.ErrorCode(err) != engine.CodeTaskNotFound {
			t.Errorf("a task that finished before retention: %v, want it pruned", err)
		}
	}
	for _, tk := range []engine.Task{young, running} {
		if _, err := db.Task(ctx, tk.ID); err != nil {
			t.Errorf("a %s task within retention, or running: %v", tk.State, err)
		}
	}
}

// TestJanitor_DropsWhatADeletedEndpointLeft: a process that dies between
// an endpoint's deletion and the drop of its paused deliveries leaves
// them paused, held forever and counted against the tenant; the next
// start's janitor drops them as the deletion would have (dead, "endpoint
// deleted"), and the tenant can then be deleted without force. It failed
// before the janitor looked for them: three deliveries stayed paused.
func TestJanitor_DropsWhatADeletedEndpointLeft(t *testing.T) {
	ctx := context.Background()
	db, err := storage.Open(filepath.Join(t.TempDir(), "webhookd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	targets := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	start := func() *engine.Node {
		n := engine.NewNode(db, engine.NodeOptions{
			Dispatcher: engine.DispatcherOptions{Targets: targets},
			Service:    engine.ServiceOptions{Targets: targets},
			Janitor:    &engine.JanitorOptions{Every: time.Hour},
		})
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := start()
	svc := n.Service
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutEventType(ctx, "invoice.paid", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/x", EventTypes: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.SetEndpointEnabled(ctx, "acme", ep.ID, false, false, "admin"); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 3 {
		res, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "invoice.paid", Data: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Deliveries[0].ID)
	}
	// The endpoint's deletion, and then the process dies: its paused
	// deliveries are never dropped.
	if err := db.DeleteEndpoint(ctx, "acme", ep.ID); err != nil {
		t.Fatal(err)
	}
	n.Stop(ctx)
	if held, _, err := db.Held(ctx, "acme"); err != nil || held.Paused != 3 {
		t.Fatalf("held after the crash: %+v, %v; want 3 paused (the test proves nothing)", held, err)
	}

	n = start()
	defer n.Stop(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range ids {
		for {
			d, err := db.Delivery(ctx, "acme", id)
			if err != nil {
				t.Fatal(err)
			}
			if d.State == engine.StateDead {
				if d.Reason != engine.ReasonEndpointDeleted {
					t.Errorf("delivery %s died of %q, want %q", id, d.Reason, engine.ReasonEndpointDeleted)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("delivery %s is still %s 10 s after the start", id, d.State)
			}
			time.Sleep(10 * time.Millisecond) // the janitor runs at start, on its own goroutine
		}
	}
	if held, _, err := db.Held(ctx, "acme"); err != nil || held.Paused != 0 {
		t.Errorf("held after the start: %+v, %v; want none paused", held, err)
	}
	if _, err := n.Service.DeleteTenant(ctx, "acme", false, "admin"); err != nil {
		t.Errorf("DeleteTenant without force once the paused are dropped: %v", err)
	}
}
