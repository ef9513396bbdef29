package storetest

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// taskTests: background tasks (engine/tasks.go), kept as the runner
// keeps them.
var taskTests = []test{
	{"a task is stored whole and read back, by its ID only", testTaskStored},
	{"a tenant's running tasks are bounded, concurrent creates included", testTaskLimit},
	{"a task changes only through UpdateTask's function", testUpdateTask},
	{"tasks are listed newest first, of a tenant or all, running only, a page at a time", testListTasks},
	{"a deleted tenant's tasks go with its purge; the operator's purge task stays", testTasksPurged},
	{"finished tasks are pruned after their retention, running ones never", testPruneTasks},
}

// newTask returns a running task of tenant of kind, as the service makes
// one, not yet stored.
func newTask(tenant string, kind engine.TaskKind) engine.Task {
	return engine.Task{
		ID: engine.NewID("task"), Tenant: tenant, Kind: kind, State: engine.TaskRunning,
		Params:  engine.TaskParams{Since: t0.Add(-time.Hour), Until: t0, Endpoint: "ep_1"},
		By:      "admin",
		Started: t0, Updated: t0,
		Owner: "node_1", LeaseUntil: t0.Add(30 * time.Second),
		Errors: []engine.TaskError{},
	}
}

// task stores a new running task of tenant and returns it.
func (f *fixture) task(t *testing.T, tenant string) engine.Task {
	t.Helper()
	tk := newTask(tenant, engine.TaskReplay)
	if err := f.s.CreateTask(t.Context(), tk, 0); err != nil {
		t.Fatalf("CreateTask: %v", err)
	}
	return tk
}

// finish ends task id at at, as its runner does.
func (f *fixture) finish(t *testing.T, id string, state engine.TaskState, at time.Time) engine.Task {
	t.Helper()
	got, err := f.s.UpdateTask(t.Context(), id, func(tk engine.Task) (engine.Task, error) {
		tk.State, tk.Finished, tk.Updated = state, at, at
		return tk, nil
	})
	if err != nil {
		t.Fatalf("UpdateTask(%s): %v", id, err)
	}
	return got
}

// tasks returns every task f selects, page by page, limit a page.
func (f *fixture) tasks(t *testing.T, filter engine.TaskFilter, limit int) [][]engine.Task {
	t.Helper()
	filter.Limit = limit
	return readPages(t, limit, func(cursor string) ([]engine.Task, string, error) {
		filter.Cursor = cursor
		return f.s.ListTasks(t.Context(), filter)
	})
}

func taskIDs(pages [][]engine.Task) [][]string {
	out := make([][]string, len(pages))
	for i, p := range pages {
		out[i] = []string{}
		for _, tk := range p {
			out[i] = append(out[i], tk.ID)
		}
	}
	return out
}

func testTaskStored(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	// Every field set, the runner's included.
	total := 7
	tk := newTask("acme", engine.TaskBackfill)
	tk.Done, tk.Skipped, tk.Total, tk.Waiting = 5, 2, &total, "pending_per_tenant"
	tk.Errors = []engine.TaskError{{At: t0.Add(time.Second), Message: "storage cannot write now; retry later"}}
	tk.Resumed, tk.Cursor = 2, "12345678901234567890"
	tk.Params.Force, tk.Params.Tenant = true, "gone"
	if err := f.s.CreateTask(t.Context(), tk, 0); err != nil {
		t.Fatal(err)
	}
	got, err := f.s.Task(t.Context(), tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "Task", got, tk)

	// A finished one, failed with its error.
	done := tk
	done.ID, done.State, done.Error, done.Finished = engine.NewID("task"), engine.TaskFailed, "no such endpoint", t0.Add(time.Minute)
	done.Total = nil
	if err := f.s.CreateTask(t.Context(), done, 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.s.Task(t.Context(), done.ID); !deepEqual(got, done) {
		t.Errorf("Task(failed) = %+v, want %+v", got, done)
	}

	// The operator's task has no tenant.
	op := newTask("", engine.TaskPurge)
	op.Params = engine.TaskParams{Tenant: "gone"}
	if err := f.s.CreateTask(t.Context(), op, 0); err != nil {
		t.Fatalf("CreateTask(the operator's): %v", err)
	}
	if got, err := f.s.Task(t.Context(), op.ID); err != nil || !deepEqual(got, op) {
		t.Errorf("Task(the operator's) = %+v, %v; want %+v", got, err, op)
	}

	_, err = f.s.Task(t.Context(), "task_nope")
	wantError(t, err, engine.TaskNotFound())
	x := newTask("nobody", engine.TaskReplay)
	wantError(t, f.s.CreateTask(t.Context(), x, 0), engine.TenantNotFound())
	if _, err := f.s.Task(t.Context(), x.ID); engine.ErrorCode(err) != engine.CodeTaskNotFound {
		t.Errorf("a refused task was stored: %v", err)
	}
}

// deepEqual reports whether got and want are deeply equal.
func deepEqual[T any](got, want T) bool { return reflect.DeepEqual(got, want) }

func testTaskLimit(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	const limit = 2
	var running []engine.Task
	for range limit {
		tk := newTask("acme", engine.TaskReplay)
		if err := f.s.CreateTask(t.Context(), tk, limit); err != nil {
			t.Fatalf("CreateTask %d of %d: %v", len(running)+1, limit, err)
		}
		running = append(running, tk)
	}
	over := newTask("acme", engine.TaskReplay)
	wantError(t, f.s.CreateTask(t.Context(), over, limit), engine.TaskLimitReached(limit))
	if _, err := f.s.Task(t.Context(), over.ID); engine.ErrorCode(err) != engine.CodeTaskNotFound {
		t.Errorf("a task over the limit was stored: %v", err)
	}
	// Another tenant, the operator and no limit are not held to it.
	if err := f.s.CreateTask(t.Context(), newTask("globex", engine.TaskReplay), limit); err != nil {
		t.Errorf("globex's first task: %v", err)
	}
	if err := f.s.CreateTask(t.Context(), newTask("", engine.TaskPurge), limit); err != nil {
		t.Errorf("the operator's task: %v", err)
	}
	if err := f.s.CreateTask(t.Context(), newTask("acme", engine.TaskReplay), 0); err != nil {
		t.Errorf("a task without a limit: %v", err)
	}
	// A finished task frees its place; the limit counts running ones.
	f.finish(t, running[0].ID, engine.TaskSucceeded, t0.Add(time.Minute))
	f.finish(t, running[1].ID, engine.TaskFailed, t0.Add(time.Minute))
	if err := f.s.CreateTask(t.Context(), newTask("acme", engine.TaskReplay), limit); err != nil {
		t.Errorf("a task once two ended (one is running without a limit): %v", err)
	}
	wantError(t, f.s.CreateTask(t.Context(), newTask("acme", engine.TaskReplay), limit), engine.TaskLimitReached(limit))

	// Of concurrent creates on a tenant with none running, limit pass.
	f.tenant(t, "initech")
	var made atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			err := f.s.CreateTask(t.Context(), newTask("initech", engine.TaskBackfill), 3)
			switch engine.ErrorCode(err) {
			case "":
				made.Add(1)
			case engine.CodeLimitReached:
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := made.Load(); n != 3 {
		t.Errorf("8 concurrent creates with a limit of 3: %d made", n)
	}
	pages := f.tasks(t, engine.TaskFilter{Tenant: "initech", Running: true}, 10)
	if n := len(slices.Concat(pages...)); n != 3 {
		t.Errorf("initech has %d running tasks, want 3", n)
	}
}

func testUpdateTask(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	tk := f.task(t, "acme")
	at := t0.Add(time.Minute)
	total := 40
	got, err := f.s.UpdateTask(t.Context(), tk.ID, func(stored engine.Task) (engine.Task, error) {
		if !deepEqual(stored, tk) {
			t.Errorf("fn got %+v, want the stored task %+v", stored, tk)
		}
		stored.Done, stored.Cursor, stored.Updated, stored.LeaseUntil = 40, "99", at, at.Add(30*time.Second)
		stored.State, stored.Finished, stored.Total = engine.TaskSucceeded, at, &total
		stored.Errors = append(stored.Errors, engine.TaskError{At: at, Message: "retry later"})
		return stored, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := tk
	want.Done, want.Cursor, want.Updated, want.LeaseUntil = 40, "99", at, at.Add(30*time.Second)
	want.State, want.Finished, want.Total = engine.TaskSucceeded, at, &total
	want.Errors = []engine.TaskError{{At: at, Message: "retry later"}}
	wantEqual(t, "UpdateTask", got, want)
	stored, _ := f.s.Task(t.Context(), tk.ID)
	wantEqual(t, "the updated task", stored, want)

	// An error from fn changes nothing and comes back as it is.
	stop := errors.New("lease lost")
	if _, err := f.s.UpdateTask(t.Context(), tk.ID, func(stored engine.Task) (engine.Task, error) {
		stored.Done = 1000
		return stored, stop
	}); !errors.Is(err, stop) {
		t.Errorf("UpdateTask with fn's error = %v, want it", err)
	}
	stored, _ = f.s.Task(t.Context(), tk.ID)
	wantEqual(t, "the task after an aborted update", stored, want)

	_, err = f.s.UpdateTask(t.Context(), "task_nope", func(tk engine.Task) (engine.Task, error) { return tk, nil })
	wantError(t, err, engine.TaskNotFound())
}

func testListTasks(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	var acme, all []engine.Task // in creation order
	for i := range 5 {
		tk := f.task(t, "acme")
		if i%2 == 0 {
			tk = f.finish(t, tk.ID, engine.TaskSucceeded, t0.Add(time.Minute))
		}
		acme = append(acme, tk)
		all = append(all, tk)
		g := f.task(t, "globex")
		all = append(all, g)
	}
	op := newTask("", engine.TaskPurge)
	if err := f.s.CreateTask(t.Context(), op, 0); err != nil {
		t.Fatal(err)
	}
	all = append(all, op)
	newest := func(ts []engine.Task) []engine.Task {
		out := slices.Clone(ts)
		slices.Reverse(out)
		return out
	}

	pages := f.tasks(t, engine.TaskFilter{Tenant: "acme"}, 2)
	wantEqual(t, "acme's tasks", slices.Concat(pages...), newest(acme))
	if len(pages) != 3 {
		t.Errorf("acme's 5 tasks 2 a page came in %d pages, want 3", len(pages))
	}
	// Running only: acme's 1 and 3 (0, 2 and 4 are finished), so the
	// page of the newest running one, 3, has a next page, and the page
	// of 1 has none though finished tasks follow it.
	pages = f.tasks(t, engine.TaskFilter{Tenant: "acme", Running: true}, 1)
	wantEqual(t, "acme's running tasks, one a page", taskIDs(pages), [][]string{{acme[3].ID}, {acme[1].ID}})
	pages = f.tasks(t, engine.TaskFilter{}, 4)
	wantEqual(t, "every task", slices.Concat(pages...), newest(all))
	var running []engine.Task
	for _, tk := range all {
		if tk.State == engine.TaskRunning {
			running = append(running, tk)
		}
	}
	pages = f.tasks(t, engine.TaskFilter{Running: true}, 3)
	wantEqual(t, "every running task", slices.Concat(pages...), newest(running))

	pages = f.tasks(t, engine.TaskFilter{Tenant: "nobody"}, 10)
	if len(pages) != 1 {
		t.Fatalf("a tenant without tasks: %d pages", len(pages))
	}
	wantEmpty(t, "ListTasks(nobody)", pages[0])
	// A cursor below every task: nothing after it.
	got, next, err := f.s.ListTasks(t.Context(), engine.TaskFilter{Tenant: "acme", Cursor: "task_00000000000000000000000000", Limit: 10})
	if err != nil || next != "" {
		t.Fatalf("ListTasks after the lowest ID: next %q, %v", next, err)
	}
	wantEmpty(t, "ListTasks after the lowest ID", got)
}

func testTasksPurged(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	mine := []engine.Task{f.task(t, "acme"), f.finish(t, f.task(t, "acme").ID, engine.TaskSucceeded, t0)}
	theirs := f.task(t, "globex")
	purge := newTask("", engine.TaskPurge)
	purge.Params = engine.TaskParams{Tenant: "acme"}
	if err := f.s.CreateTask(t.Context(), purge, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.s.DeleteTenant(t.Context(), "acme", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	f.purge(t, 0)
	for _, tk := range mine {
		if _, err := f.s.Task(t.Context(), tk.ID); engine.ErrorCode(err) != engine.CodeTaskNotFound {
			t.Errorf("acme's task %s after its purge: %v, want task_not_found", tk.ID, err)
		}
	}
	pages := f.tasks(t, engine.TaskFilter{Tenant: "acme"}, 10)
	wantEmpty(t, "acme's tasks after its purge", pages[0])
	for _, tk := range []engine.Task{theirs, purge} {
		if got, err := f.s.Task(t.Context(), tk.ID); err != nil || !deepEqual(got, tk) {
			t.Errorf("task %s after acme's purge = %+v, %v; want it as it was", tk.ID, got, err)
		}
	}
	// A tenant made again under the id has none of them.
	f.tenant(t, "acme")
	pages = f.tasks(t, engine.TaskFilter{Tenant: "acme"}, 10)
	wantEmpty(t, "the new acme's tasks", pages[0])
}

func testPruneTasks(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	old := []engine.Task{
		f.finish(t, f.task(t, "acme").ID, engine.TaskSucceeded, t0),
		f.finish(t, f.task(t, "acme").ID, engine.TaskFailed, t0.Add(time.Second)),
		f.finish(t, f.task(t, "acme").ID, engine.TaskSucceeded, t0.Add(2*time.Second)),
	}
	young := f.finish(t, f.task(t, "acme").ID, engine.TaskSucceeded, t0.Add(time.Hour))
	running := f.task(t, "acme") // started at t0, long ago
	before := t0.Add(time.Minute)
	n, err := f.s.PruneTasks(t.Context(), before, 2)
	if err != nil || n != 2 {
		t.Fatalf("PruneTasks(max 2) = %d, %v; want 2", n, err)
	}
	f.check(t)
	n, err = f.s.PruneTasks(t.Context(), before, 2)
	if err != nil || n != 1 {
		t.Fatalf("PruneTasks(max 2) again = %d, %v; want the last 1", n, err)
	}
	for _, tk := range old {
		if _, err := f.s.Task(t.Context(), tk.ID); engine.ErrorCode(err) != engine.CodeTaskNotFound {
			t.Errorf("task %s finished before the cutoff: %v, want pruned", tk.ID, err)
		}
	}
	left := slices.Concat(f.tasks(t, engine.TaskFilter{}, 10)...)
	wantEqual(t, "the tasks left", left, []engine.Task{running, young})
	if n, err := f.s.PruneTasks(t.Context(), t0.Add(24*time.Hour), 0); err != nil || n != 1 {
		t.Errorf("PruneTasks a day later = %d, %v; want the finished one, not the running one", n, err)
	}
}
