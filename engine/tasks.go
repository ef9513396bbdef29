package engine

import (
	"context"
	"strings"
	"time"
)

// Background tasks: an operation that can outlive its request (a range
// replay, a backfill, a tenant's purge) is a Task, stored when it is asked
// for and answered at once, then run by a process (taskrunner.go) in
// steps, each one transaction of the Store, its progress saved after each
// step. A task never silently vanishes: a process that stops or dies
// leaves it running in the store with its progress, and the next process
// to claim it (at start, or on a shared store when its lease has ended)
// resumes it from there or ends it failed with a reason. Its kind's step
// is idempotent, so a step made again after a crash does nothing twice.

// TaskKind names what a task does.
type TaskKind string

// The kinds of task.
const (
	// TaskReplay replays the dead letters of a time range
	// (POST /v1/tenants/{tenant}/dead-letters/replay).
	TaskReplay TaskKind = "dead_letters.replay"
	// TaskBackfill backfills an endpoint over a time range
	// (POST /v1/tenants/{tenant}/endpoints/{id}/backfill).
	TaskBackfill TaskKind = "endpoint.backfill"
	// TaskPurge purges what a deleted tenant left
	// (DELETE /v1/tenants/{tenant}). It is the operator's task: its
	// Tenant is "", the deleted tenant is in Params.Tenant.
	TaskPurge TaskKind = "tenant.purge"
)

// TaskState is where a task is in its life.
type TaskState string

// The states of a task.
const (
	// TaskRunning: stored and not finished. The process whose Owner it
	// names runs it while its lease lasts; a process that stops or dies
	// leaves it running, and another claims it: at start when the store
	// is the process's alone, or once its lease has ended when the store
	// is shared (TaskRunner). Only its runner moves it out, to one of
	// the two below.
	TaskRunning TaskState = "running"
	// TaskSucceeded: it did what it was asked. Final.
	TaskSucceeded TaskState = "succeeded"
	// TaskFailed: it stopped before the end; Error says why. What its
	// steps did before stays done. Final.
	TaskFailed TaskState = "failed"
)

// Task is a background task as stored and answered. The JSON tags are the
// API's shape; the fields without one are the runner's, never shown.
type Task struct {
	ID string `json:"id"` // NewID("task")
	// Tenant is the tenant whose task it is, listed under its routes;
	// "" for the operator's (a tenant's purge).
	Tenant string     `json:"tenant,omitempty"`
	Kind   TaskKind   `json:"kind"`
	State  TaskState  `json:"state"`
	Params TaskParams `json:"params"`
	// Done counts what the task did so far: dead letters replayed,
	// deliveries a backfill made, events a purge deleted. Skipped counts
	// what it found done already: the events a backfill found with a
	// delivery to the endpoint.
	Done    int `json:"done"`
	Skipped int `json:"skipped"`
	// Total is how many things the task will have done, null while it
	// does not know: every kind counts them as it goes, so Total is set
	// when it succeeds (Done + Skipped).
	Total *int `json:"total"`
	// Waiting says what a running task waits for, "" when it is not
	// waiting: "pending_per_tenant" or "max_pending", a backfill at that
	// bound, going on as the backlog goes down.
	Waiting string `json:"waiting,omitempty"`
	// Errors are the errors its steps met and that it went on after (a
	// store unavailable for a while), the last MaxTaskErrors, oldest
	// first; Error is the one that failed it.
	Errors []TaskError `json:"errors"`
	Error  string      `json:"error,omitempty"`
	By     string      `json:"by"` // who asked: "admin", "token tok_…", a console user
	// Resumed counts the times a process took the task over from one
	// that stopped or died while it ran.
	Resumed  int       `json:"resumed,omitempty"`
	Started  time.Time `json:"started"`
	Updated  time.Time `json:"updated"`
	Finished time.Time `json:"finished,omitzero"`

	// Cursor is where the task goes on from (its kind's: a backfill's
	// place in the log); "": from the start.
	Cursor string `json:"-"`
	// Owner names the process that runs it (TaskRunner); LeaseUntil is
	// when another process may take it over if it has not saved its
	// progress since.
	Owner      string    `json:"-"`
	LeaseUntil time.Time `json:"-"`
}

// TaskParams are what a task was asked to do; each kind sets its own.
type TaskParams struct {
	// Since and Until bound a range replay's deaths or a backfill's
	// events: [Since, Until).
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// Endpoint is the endpoint a backfill delivers to, or the one a
	// range replay is limited to ("": every endpoint).
	Endpoint string `json:"endpoint,omitempty"`
	// Tenant is the tenant a purge purges.
	Tenant string `json:"tenant,omitempty"`
	// Force: a purge's tenant was deleted with its deliveries not final
	// (DeleteTenant's force).
	Force bool `json:"force,omitempty"`
}

// TaskError is an error a task's step met.
type TaskError struct {
	At      time.Time `json:"at"`
	Message string    `json:"message"`
}

// MaxTaskErrors is how many errors a task keeps (Task.Errors): the last
// ones.
const MaxTaskErrors = 10

// TaskFilter selects tasks to list.
type TaskFilter struct {
	// Tenant lists that tenant's tasks; "": every task, the operator's
	// included.
	Tenant string
	// Running lists only the running tasks.
	Running bool
	// Cursor is the cursor a page returned ("": the first page; the
	// Service refuses any other); Limit the most tasks a page holds (at
	// least 1).
	Cursor string
	Limit  int
}

// TaskStore is the part of the Store that keeps the tasks (a part of
// Records). A task's ID and Tenant never change once it is stored; it is
// running (TaskRunning) or finished, and a store that keeps an index of
// the running ones derives it from State in the write that changes it.
type TaskStore interface {
	// CreateTask stores t, a new task. When t.Tenant is set it must
	// exist (CodeTenantNotFound), and when limit is not 0 and the
	// tenant has that many running tasks already it is refused with
	// TaskLimitReached(limit), checked in the same transaction, so that
	// concurrent creates cannot pass it. The operator's tasks (Tenant
	// "") have no bound.
	CreateTask(ctx context.Context, t Task, limit int) error
	// Task returns task id, of any tenant; TaskNotFound when there is
	// none.
	Task(ctx context.Context, id string) (Task, error)
	// ListTasks pages through the tasks f selects, newest first (by ID,
	// highest first), as the other listings page (Listings): the cursor
	// of the next page only when a task f selects follows.
	ListTasks(ctx context.Context, f TaskFilter) ([]Task, string, error)
	// UpdateTask reads task id, calls fn with it and stores what fn
	// returns, in one transaction (TaskNotFound). An error from fn aborts
	// the update and is returned as is. fn may run more than once: it
	// must only change the task (never its ID or Tenant), never block or
	// call the Store.
	UpdateTask(ctx context.Context, id string, fn func(Task) (Task, error)) (Task, error)
}

// TaskNotFound is the error for a task that does not exist, or that the
// tenant asking does not have.
func TaskNotFound() *Error { return Errorf(CodeTaskNotFound, "id", "no such task") }

// TaskLimitReached is the error of a store for a new task of a tenant that
// has limit running tasks already. The Service answers its own, which
// names the setting.
func TaskLimitReached(limit int) *Error {
	return Errorf(CodeLimitReached, "", "the tenant has %d running tasks, the most it may have", limit)
}

// Ended reports whether t has ended: succeeded or failed.
func (t Task) Ended() bool { return t.State == TaskSucceeded || t.State == TaskFailed }

// StartReplay stores a task that replays tenant's dead letters that died
// in [since, until) (until zero, or after now: now), of endpointID when
// set, and runs it in the background (replayStep), recording each replay
// with by; it returns the task as stored, running. The range and the
// endpoint are checked first (CodeInvalidField naming since or until,
// CodeEndpointNotFound naming endpoint), and a tenant at its bound of
// running tasks is refused
// (CodeLimitReached). A dead letter that dies again while the task runs
// died after until, so the task does not replay it twice. At a pending
// bound it waits for the backlog to go down (Task.Waiting) and goes on,
// as a backfill does.
func (s *Service) StartReplay(ctx context.Context, tenant string, since, until time.Time, endpointID, by string) (Task, error) {
	if _, err := s.Tenant(ctx, tenant); err != nil {
		return Task{}, err
	}
	since, until, err := s.timeRange(since, until)
	if err != nil {
		return Task{}, err
	}
	if now := s.now(); until.After(now) {
		until = now
	}
	if endpointID != "" {
		if _, err := s.Endpoint(ctx, tenant, endpointID); err != nil {
			return Task{}, Errorf(CodeEndpointNotFound, "endpoint", "no such endpoint")
		}
	}
	return s.tasks.create(ctx, s.tasks.newTask(tenant, TaskReplay, TaskParams{Since: since, Until: until, Endpoint: endpointID}, by))
}

// StartBackfill stores a task that backfills endpoint endpointID of
// tenant (backfill.go) with the events of [since, until) (until zero:
// now), and runs it in the background (backfillStep); it returns the
// task as stored, running. At a pending bound it waits for the backlog
// to go down (Task.Waiting) and goes on: it leaves nothing for a later
// call. The range and the endpoint are
// checked first (CodeInvalidField naming since or until,
// CodeEndpointNotFound), and a tenant at its bound of running tasks is
// refused (CodeLimitReached).
func (s *Service) StartBackfill(ctx context.Context, tenant, endpointID string, since, until time.Time, by string) (Task, error) {
	if _, err := s.Tenant(ctx, tenant); err != nil {
		return Task{}, err
	}
	since, until, err := s.timeRange(since, until)
	if err != nil {
		return Task{}, err
	}
	if _, err := s.Endpoint(ctx, tenant, endpointID); err != nil {
		return Task{}, err
	}
	return s.tasks.create(ctx, s.tasks.newTask(tenant, TaskBackfill, TaskParams{Since: since, Until: until, Endpoint: endpointID}, by))
}

// Task returns task id, of any tenant or the operator's (an admin's
// read); TaskNotFound.
func (s *Service) Task(ctx context.Context, id string) (Task, error) {
	if !validTaskID(id) {
		return Task{}, TaskNotFound()
	}
	return s.store.Task(ctx, id)
}

// TenantTask returns task id of tenant; TaskNotFound when tenant has no
// such task (another tenant's, or the operator's, included).
func (s *Service) TenantTask(ctx context.Context, tenant, id string) (Task, error) {
	if _, err := s.Tenant(ctx, tenant); err != nil {
		return Task{}, err
	}
	t, err := s.Task(ctx, id)
	if err != nil {
		return Task{}, err
	}
	if t.Tenant != tenant {
		return Task{}, TaskNotFound()
	}
	return t, nil
}

// Tasks pages through every task, the operator's included, newest first
// (an admin's listing); TenantTasks through one tenant's. The cursor is
// one a page returned ("": the first page); limit 0 is DefaultPageLimit.
func (s *Service) Tasks(ctx context.Context, cursor string, limit int) ([]Task, string, error) {
	return s.listTasks(ctx, TaskFilter{Cursor: cursor, Limit: limit})
}

// TenantTasks pages through tenant's tasks, newest first.
func (s *Service) TenantTasks(ctx context.Context, tenant, cursor string, limit int) ([]Task, string, error) {
	if _, err := s.Tenant(ctx, tenant); err != nil {
		return nil, "", err
	}
	return s.listTasks(ctx, TaskFilter{Tenant: tenant, Cursor: cursor, Limit: limit})
}

func (s *Service) listTasks(ctx context.Context, f TaskFilter) ([]Task, string, error) {
	if f.Limit, _ = pageLimit(f.Limit); f.Limit == 0 {
		return nil, "", Errorf(CodeInvalidField, "limit", "limit must be from 1 to %d", MaxPageLimit)
	}
	if f.Cursor != "" && !validTaskID(f.Cursor) {
		return nil, "", InvalidCursor()
	}
	return s.store.ListTasks(ctx, f)
}

// validTaskID reports whether id is shaped like a task's ID (NewID("task")).
func validTaskID(id string) bool {
	return strings.HasPrefix(id, "task_") && validID(id)
}
