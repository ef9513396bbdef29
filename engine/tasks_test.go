package engine_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
	"github.com/webhookd/webhookd/storage"
)

// taskNode returns a started node over store whose attempts answer
// answer, with sopts' fields as given; it is stopped when t ends.
func taskNode(t *testing.T, store engine.Store, answer func(*http.Request) int, sopts engine.ServiceOptions, alerts *engine.AlertOptions) *engine.Node {
	t.Helper()
	sopts.Targets = bubbleTargets
	n := engine.NewNode(store, engine.NodeOptions{
		Dispatcher: engine.DispatcherOptions{Client: bubbleClient(answer), Targets: bubbleTargets},
		Service:    sopts,
		Alerts:     alerts,
	})
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(context.Background()) })
	return n
}

// setupTenant makes tenant acme with types order.created and
// order.shipped and n events of order.created, a second apart from since
// on the service's clock.
func setupTenant(t *testing.T, svc *engine.Service, n int) {
	t.Helper()
	ctx := t.Context()
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"order.created", "order.shipped"} {
		if _, _, err := svc.PutEventType(ctx, typ, engine.EventTypeInput{}); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if _, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // a bubble's clock moves only so
	}
	time.Sleep(time.Second)
}

// waitTask polls task id (a bubble's sleep) until cond holds, for at
// most a virtual hour, and returns it.
func waitTask(t *testing.T, svc *engine.Service, id string, cond func(engine.Task) bool) engine.Task {
	t.Helper()
	for range 3600 {
		tk, err := svc.Task(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if cond(tk) {
			return tk
		}
		time.Sleep(time.Second)
	}
	tk, _ := svc.Task(t.Context(), id)
	t.Fatalf("task %s never got there: %+v", id, tk)
	return tk
}

func ended(tk engine.Task) bool { return tk.Ended() }

// TestBackfillTask_WaitsForRoom: a backfill task at the tenant's pending
// bound says so and waits, then makes the rest once the backlog goes
// down: it leaves nothing for a later call, and makes each delivery
// once. While it runs, the tenant's bound of running tasks refuses
// another.
func TestBackfillTask_WaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var status atomic.Int32
		status.Store(http.StatusServiceUnavailable)
		n := taskNode(t, memstore.New(), func(*http.Request) int { return int(status.Load()) },
			engine.ServiceOptions{MaxPendingPerTenant: 3, Tasks: engine.TaskOptions{MaxPerTenant: 1}}, nil)
		svc := n.Service
		ctx := t.Context()
		since := time.Now().Add(-time.Second)
		setupTenant(t, svc, 5)
		ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"order.created"}})
		if err != nil {
			t.Fatal(err)
		}
		tk, err := svc.StartBackfill(ctx, "acme", ep.ID, since, time.Time{}, "token tok_1")
		if err != nil {
			t.Fatal(err)
		}
		if tk.State != engine.TaskRunning || tk.Kind != engine.TaskBackfill || tk.Total != nil || tk.By != "token tok_1" || tk.Params.Endpoint != ep.ID {
			t.Errorf("the task as started: %+v", tk)
		}
		waiting := waitTask(t, svc, tk.ID, func(tk engine.Task) bool { return tk.Waiting != "" })
		if waiting.Waiting != "pending_per_tenant" || waiting.Done != 3 || waiting.State != engine.TaskRunning {
			t.Errorf("the task at the bound: %+v, want 3 made, waiting for pending_per_tenant", waiting)
		}
		if _, err := svc.StartReplay(ctx, "acme", since, time.Time{}, "", "admin"); engine.ErrorCode(err) != engine.CodeLimitReached ||
			!strings.Contains(err.Error(), "tasks_per_tenant") {
			t.Errorf("a second task while one runs, with a bound of 1: %v, want limit_reached naming the setting", err)
		}

		status.Store(http.StatusOK) // the retries succeed: room again
		done := waitTask(t, svc, tk.ID, ended)
		if done.State != engine.TaskSucceeded || done.Done != 5 || done.Skipped != 0 || done.Total == nil || *done.Total != 5 ||
			done.Waiting != "" || done.Finished.IsZero() {
			t.Errorf("the task at its end: %+v, want succeeded, 5 made of 5", done)
		}
		ds, _, err := svc.ListDeliveries(ctx, "acme", engine.DeliveryFilter{EndpointID: ep.ID, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		events := map[string]int{}
		for _, d := range ds {
			events[d.EventID]++
			if d.Backfill == nil || d.Backfill.By != "token tok_1" {
				t.Errorf("delivery %s does not record the backfill: %+v", d.ID, d.Backfill)
			}
		}
		if len(ds) != 5 || len(events) != 5 {
			t.Errorf("%d deliveries to %d events, want one to each of 5", len(ds), len(events))
		}
		// Now another task may start; the same range again skips every event.
		again, err := svc.StartBackfill(ctx, "acme", ep.ID, since, time.Time{}, "admin")
		if err != nil {
			t.Fatal(err)
		}
		if got := waitTask(t, svc, again.ID, ended); got.State != engine.TaskSucceeded || got.Done != 0 || got.Skipped != 5 || *got.Total != 5 {
			t.Errorf("the same backfill again: %+v, want 5 skipped", got)
		}
		page, next, err := svc.TenantTasks(ctx, "acme", "", 1)
		if err != nil || next == "" || len(page) != 1 || page[0].ID != again.ID {
			t.Errorf("acme's tasks, a page of 1: %+v, next %q, %v; want the newest with a next page", page, next, err)
		}
	})
}

// TestReplayTask: a range replay task replays every dead letter of its
// range once, counts them, and says total when it ends; a range that
// reaches past now ends now.
func TestReplayTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := taskNode(t, memstore.New(), func(*http.Request) int { return http.StatusBadRequest }, engine.ServiceOptions{}, nil)
		svc, ctx := n.Service, t.Context()
		setupTenant(t, svc, 0)
		ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"order.created"}})
		if err != nil {
			t.Fatal(err)
		}
		since := time.Now()
		var ids []string
		for range 3 {
			res, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.Deliveries[0].ID)
		}
		synctest.Wait() // 400: each dies at its first attempt
		time.Sleep(time.Second)
		for _, id := range ids {
			if d, _ := svc.Delivery(ctx, "acme", id); d.State != engine.StateDead {
				t.Fatalf("delivery %s is %s, want dead", id, d.State)
			}
		}
		if _, err := svc.StartReplay(ctx, "acme", time.Time{}, time.Time{}, "", "admin"); engine.ErrorCode(err) != engine.CodeInvalidField {
			t.Errorf("a replay without since: %v, want invalid_field", err)
		}
		if _, err := svc.StartReplay(ctx, "acme", since, time.Time{}, "ep_nope", "admin"); engine.ErrorCode(err) != engine.CodeEndpointNotFound {
			t.Errorf("a replay of an unknown endpoint: %v, want endpoint_not_found", err)
		}
		tk, err := svc.StartReplay(ctx, "acme", since, time.Now().Add(time.Hour), ep.ID, "admin")
		if err != nil {
			t.Fatal(err)
		}
		if !tk.Params.Until.Equal(time.Now().UTC()) {
			t.Errorf("a range to an hour ahead is kept until %v, want now", tk.Params.Until)
		}
		done := waitTask(t, svc, tk.ID, ended)
		if done.State != engine.TaskSucceeded || done.Done != 3 || *done.Total != 3 {
			t.Errorf("the replay task: %+v, want 3 replayed of 3", done)
		}
		for _, id := range ids {
			d, _ := svc.Delivery(ctx, "acme", id)
			if len(d.Replays) != 1 {
				t.Errorf("delivery %s replayed %d times, want once (it died again after until)", id, len(d.Replays))
			}
		}
		if _, err := svc.TenantTask(ctx, "globex", tk.ID); engine.ErrorCode(err) != engine.CodeTenantNotFound {
			t.Errorf("another tenant's read: %v", err)
		}
		if _, _, err := svc.PutTenant(ctx, "globex", engine.TenantInput{}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.TenantTask(ctx, "globex", tk.ID); engine.ErrorCode(err) != engine.CodeTaskNotFound {
			t.Errorf("acme's task read as globex's: %v, want task_not_found", err)
		}
		if _, _, err := svc.TenantTasks(ctx, "acme", "not a cursor", 10); engine.ErrorCode(err) != engine.CodeInvalidField {
			t.Errorf("a cursor no page returned: %v, want invalid_field", err)
		}
	})
}

// TestReplayTask_WaitsForRoom: a range replay makes no more pending
// than the tenant's bound leaves room for: at the bound it waits, saying
// so, and goes on once the backlog goes down, replaying each dead letter
// once.
func TestReplayTask_WaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var status atomic.Int32
		status.Store(http.StatusBadRequest)
		n := taskNode(t, memstore.New(), func(*http.Request) int { return int(status.Load()) },
			engine.ServiceOptions{MaxPendingPerTenant: 3}, nil)
		svc, ctx := n.Service, t.Context()
		setupTenant(t, svc, 0)
		if _, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"order.created"}}); err != nil {
			t.Fatal(err)
		}
		since := time.Now()
		var ids []string
		for range 5 {
			res, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.Deliveries[0].ID)
			synctest.Wait() // 400: it dies at its first attempt, out of the backlog
		}
		time.Sleep(time.Second)
		status.Store(http.StatusServiceUnavailable) // the replayed ones stay pending
		tk, err := svc.StartReplay(ctx, "acme", since, time.Time{}, "", "admin")
		if err != nil {
			t.Fatal(err)
		}
		waiting := waitTask(t, svc, tk.ID, func(tk engine.Task) bool { return tk.Waiting != "" || tk.Ended() })
		if waiting.Waiting != "pending_per_tenant" || waiting.Done != 3 || waiting.State != engine.TaskRunning {
			t.Errorf("the replay at the bound: %+v, want 3 replayed, waiting for pending_per_tenant", waiting)
		}
		status.Store(http.StatusOK) // the retries succeed: room again
		done := waitTask(t, svc, tk.ID, ended)
		if done.State != engine.TaskSucceeded || done.Done != 5 || done.Total == nil || *done.Total != 5 || done.Waiting != "" {
			t.Errorf("the replay at its end: %+v, want succeeded, 5 replayed", done)
		}
		for _, id := range ids {
			if d, _ := svc.Delivery(ctx, "acme", id); len(d.Replays) != 1 {
				t.Errorf("delivery %s replayed %d times, want once", id, len(d.Replays))
			}
		}
	})
}

// TestTask_FinishedIsAnOperationalEvent: a task that ends sends
// task.finished to the operational endpoints, once it is recorded: its
// data names the tenant, the task, its kind, how it ended and its
// counts, its time with three fraction digits; a failed one its reason.
func TestTask_FinishedIsAnOperationalEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &opReceiver{}
		rc.status.Store(http.StatusOK)
		store := memstore.New()
		n := taskNode(t, store, rc.answer, engine.ServiceOptions{}, nil)
		svc, ctx := n.Service, t.Context()
		if _, err := svc.CreateOperationalEndpoint(ctx, engine.OperationalEndpointInput{URL: opsURL, EventTypes: []string{engine.OpTaskFinished}}); err != nil {
			t.Fatal(err)
		}
		setupTenant(t, svc, 2)
		ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"order.created"}})
		if err != nil {
			t.Fatal(err)
		}
		tk, err := svc.StartBackfill(ctx, "acme", ep.ID, time.Now().Add(-time.Hour), time.Time{}, "admin")
		if err != nil {
			t.Fatal(err)
		}
		done := waitTask(t, svc, tk.ID, ended)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		evs := wantEvents(t, rc.take(), "", engine.OpTaskFinished)
		d := evs[0].Data
		if d["task_id"] != tk.ID || d["kind"] != "endpoint.backfill" || d["state"] != "succeeded" ||
			d["done"] != 2.0 || d["skipped"] != 0.0 || d["total"] != 2.0 || d["reason"] != nil || d["at"] != done.Finished.Format(engine.TimeFormat) {
			t.Errorf("task.finished data %v, want the task %+v", d, done)
		}

		// A failed one says why.
		if err := svc.DeleteEndpoint(ctx, "acme", ep.ID); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		gone := engine.Task{ID: engine.NewID("task"), Tenant: "acme", Kind: engine.TaskBackfill, State: engine.TaskRunning,
			Params: engine.TaskParams{Since: now.Add(-time.Hour), Until: now, Endpoint: ep.ID}, Started: now, Updated: now, Errors: []engine.TaskError{}}
		if err := store.CreateTask(ctx, gone, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.ResumeTasks(ctx); err != nil {
			t.Fatal(err)
		}
		waitTask(t, svc, gone.ID, ended)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		evs = wantEvents(t, rc.take(), "", engine.OpTaskFinished)
		if d := evs[0].Data; d["task_id"] != gone.ID || d["state"] != "failed" || d["reason"] != "no such endpoint" || d["total"] != nil {
			t.Errorf("task.finished of a failed task: %v", d)
		}
	})
}

// TestTasks_ResumeAtStart: a task left running by a process that died
// (on a store of one process's: at start, whatever its lease) is taken
// over at the next start and goes on from its saved cursor; one whose
// kind this code does not know ends failed, saying so. On a shared store
// a task under another process's lease is left to it until the lease
// ends, then taken over.
func TestTasks_ResumeAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		ctx := t.Context()
		first := engine.NewService(store, nil, engine.ServiceOptions{Targets: bubbleTargets})
		setupTenant(t, first, 4)
		ep, _, err := first.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"order.created"}})
		if err != nil {
			t.Fatal(err)
		}
		evs, _, err := first.ListEvents(ctx, "acme", engine.EventFilter{})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		// A backfill that had read the first two events, under a lease an
		// hour from its end.
		left := engine.Task{ID: engine.NewID("task"), Tenant: "acme", Kind: engine.TaskBackfill, State: engine.TaskRunning,
			Params: engine.TaskParams{Since: now.Add(-time.Hour), Until: now, Endpoint: ep.ID}, Done: 2, By: "admin",
			Cursor: evsCursor(evs[1]), Owner: "node_dead", LeaseUntil: now.Add(time.Hour), Started: now, Updated: now, Errors: []engine.TaskError{}}
		alien := left
		alien.ID, alien.Kind, alien.Cursor, alien.Done = engine.NewID("task"), "tenant.export", "", 0
		for _, tk := range []engine.Task{left, alien} {
			if err := store.CreateTask(ctx, tk, 0); err != nil {
				t.Fatal(err)
			}
		}

		// Shared: under another's lease, left alone until it ends.
		shared := engine.NewService(store, nil, engine.ServiceOptions{Tasks: engine.TaskOptions{Shared: true, Lease: time.Minute}})
		if n, err := shared.ResumeTasks(ctx); err != nil || n != 0 {
			t.Fatalf("ResumeTasks on a shared store under live leases = %d, %v; want none", n, err)
		}
		time.Sleep(59 * time.Minute)
		synctest.Wait()
		if tk, _ := shared.Task(ctx, left.ID); tk.Owner != "node_dead" || tk.Resumed != 0 {
			t.Fatalf("a task under a live lease was taken over: %+v", tk)
		}
		shared.StopTasks(ctx)

		// One process's store: taken over at once.
		svc := engine.NewService(store, nil, engine.ServiceOptions{})
		if n, err := svc.ResumeTasks(ctx); err != nil || n != 2 {
			t.Fatalf("ResumeTasks = %d, %v; want both", n, err)
		}
		defer svc.StopTasks(ctx)
		done := waitTask(t, svc, left.ID, ended)
		if done.State != engine.TaskSucceeded || done.Done != 4 || done.Resumed != 1 || done.Owner == "node_dead" {
			t.Errorf("the resumed backfill: %+v, want succeeded with 2 more made, resumed once", done)
		}
		ds, _, _ := svc.ListDeliveries(ctx, "acme", engine.DeliveryFilter{EndpointID: ep.ID})
		if len(ds) != 2 {
			t.Errorf("%d deliveries made after the resume, want the 2 after its cursor", len(ds))
		}
		failed := waitTask(t, svc, alien.ID, ended)
		if failed.State != engine.TaskFailed || !strings.Contains(failed.Error, "tenant.export") {
			t.Errorf("a task of an unknown kind: %+v, want failed naming it", failed)
		}
	})
}

// evsCursor is the backfill cursor after ev: its place in the log.
func evsCursor(ev engine.Event) string { return strconv.FormatUint(ev.Seq, 10) }

// TestTasks_SharedTakeOver: on a shared store, a process takes over a
// running task whose lease has ended, within a lease.
func TestTasks_SharedTakeOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		ctx := t.Context()
		svc := engine.NewService(store, nil, engine.ServiceOptions{Tasks: engine.TaskOptions{Shared: true, Lease: time.Minute}})
		if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		tk := engine.Task{ID: engine.NewID("task"), Tenant: "acme", Kind: engine.TaskReplay, State: engine.TaskRunning,
			Params: engine.TaskParams{Since: now.Add(-time.Hour), Until: now}, Owner: "node_dead", LeaseUntil: now.Add(10 * time.Second),
			Started: now, Updated: now, Errors: []engine.TaskError{}}
		if err := store.CreateTask(ctx, tk, 0); err != nil {
			t.Fatal(err)
		}
		if n, err := svc.ResumeTasks(ctx); err != nil || n != 0 {
			t.Fatalf("ResumeTasks = %d, %v; want none yet", n, err)
		}
		defer svc.StopTasks(ctx)
		got := waitTask(t, svc, tk.ID, ended)
		if got.State != engine.TaskSucceeded || got.Resumed != 1 {
			t.Errorf("the task of a dead process: %+v, want taken over and done", got)
		}
		if took := got.Finished.Sub(now); took > time.Minute+10*time.Second {
			t.Errorf("taken over %s after, want within a lease of its end", took)
		}
	})
}

// TestPurgeTask: deleting a tenant answers a purge task, the operator's,
// that deletes what the tenant left and frees its id; a purge task whose
// process stopped before it deleted the tenant fails when resumed,
// saying the tenant was not deleted.
func TestPurgeTask(t *testing.T) {
	ctx := context.Background()
	db, err := storage.Open(filepath.Join(t.TempDir(), "webhookd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	svc := engine.NewService(db, nil, engine.ServiceOptions{})
	defer svc.StopTasks(ctx)
	setupTenant(t, svc, 7)
	tk, err := svc.DeleteTenant(ctx, "acme", false, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if tk.Tenant != "" || tk.Kind != engine.TaskPurge || tk.Params.Tenant != "acme" || tk.State != engine.TaskRunning {
		t.Errorf("the purge task as started: %+v", tk)
	}
	if _, err := svc.Tenant(ctx, "acme"); engine.ErrorCode(err) != engine.CodeTenantNotFound {
		t.Errorf("the tenant after its deletion: %v, want gone at once", err)
	}
	done := pollTask(t, svc, tk.ID)
	if done.State != engine.TaskSucceeded || done.Done != 7 {
		t.Errorf("the purge: %+v, want its 7 events deleted", done)
	}
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
		t.Errorf("the id after the purge: %v, want free", err)
	}
	if err := db.Check(); err != nil {
		t.Error(err)
	}

	// Stopped between the task and the deletion: acme is live, made before
	// the task.
	left := engine.Task{ID: engine.NewID("task"), Kind: engine.TaskPurge, State: engine.TaskRunning, Params: engine.TaskParams{Tenant: "acme"},
		Started: time.Now().UTC().Add(time.Second), Updated: time.Now().UTC(), Owner: "node_dead", Errors: []engine.TaskError{}}
	if err := db.CreateTask(ctx, left, 0); err != nil {
		t.Fatal(err)
	}
	again := engine.NewService(db, nil, engine.ServiceOptions{})
	defer again.StopTasks(ctx)
	if _, err := again.ResumeTasks(ctx); err != nil {
		t.Fatal(err)
	}
	failed := pollTask(t, again, left.ID)
	if failed.State != engine.TaskFailed || !strings.Contains(failed.Error, "was not deleted") {
		t.Errorf("the purge of a tenant never deleted: %+v, want failed saying so", failed)
	}
	if _, err := svc.Tenant(ctx, "acme"); err != nil {
		t.Errorf("the live tenant: %v", err)
	}
}

// pollTask waits, in real time (a bbolt file outside a bubble), at most
// ten seconds for task id to end.
func pollTask(t *testing.T, svc *engine.Service, id string) engine.Task {
	t.Helper()
	return pollTaskUntil(t, svc, id, ended)
}

// pollTaskUntil waits, in real time, at most ten seconds for task id to
// be as cond says, and returns it as it is then.
func pollTaskUntil(t *testing.T, svc *engine.Service, id string, cond func(engine.Task) bool) engine.Task {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tk, err := svc.Task(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if cond(tk) || time.Now().After(deadline) {
			return tk
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// flaky is memstore whose UpdateDeliveries fails, unavailable, its first
// fails calls.
type flaky struct {
	*memstore.Store
	fails atomic.Int32
}

func (f *flaky) UpdateDeliveries(ctx context.Context, sel engine.Selection, max int, fn func(engine.Delivery) engine.Delivery) ([]engine.Delivery, error) {
	if f.fails.Add(-1) >= 0 {
		return nil, engine.CommitFailed(nil)
	}
	return f.Store.UpdateDeliveries(ctx, sel, max, fn)
}

// TestTask_RetriesWhatMayPass: a step that fails on an unavailable store
// is tried again after a wait, each error kept on the task; a task whose
// endpoint is deleted fails at its next step, saying why.
func TestTask_RetriesWhatMayPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &flaky{Store: memstore.New()}
		store.fails.Store(2)
		svc := engine.NewService(store, nil, engine.ServiceOptions{Targets: bubbleTargets})
		defer svc.StopTasks(context.Background())
		ctx := t.Context()
		setupTenant(t, svc, 0)
		// An endpoint, whose dead letters the steps read (and fail to).
		if _, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"order.shipped"}}); err != nil {
			t.Fatal(err)
		}
		tk, err := svc.StartReplay(ctx, "acme", time.Now().Add(-time.Hour), time.Time{}, "", "admin")
		if err != nil {
			t.Fatal(err)
		}
		done := waitTask(t, svc, tk.ID, ended)
		if done.State != engine.TaskSucceeded || len(done.Errors) != 2 || done.Errors[0].Message != "storage cannot write now; retry later" {
			t.Errorf("a replay through two failed steps: %+v, want succeeded with both errors kept", done)
		}

		ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"order.created"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.DeleteEndpoint(ctx, "acme", ep.ID); err != nil {
			t.Fatal(err)
		}
		// The endpoint is checked when the task starts: start it on one
		// stored by hand, as a task made just before the deletion.
		now := time.Now().UTC()
		gone := engine.Task{ID: engine.NewID("task"), Tenant: "acme", Kind: engine.TaskBackfill, State: engine.TaskRunning,
			Params: engine.TaskParams{Since: now.Add(-time.Hour), Until: now, Endpoint: ep.ID}, Started: now, Updated: now, Errors: []engine.TaskError{}}
		if err := store.CreateTask(ctx, gone, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.ResumeTasks(ctx); err != nil {
			t.Fatal(err)
		}
		failed := waitTask(t, svc, gone.ID, ended)
		if failed.State != engine.TaskFailed || failed.Error != "no such endpoint" || failed.Total != nil {
			t.Errorf("a backfill of a deleted endpoint: %+v, want failed: no such endpoint", failed)
		}
	})
}
