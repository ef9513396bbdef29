package client

import (
	"context"
	"iter"
	"time"
)

// TaskKind is what a background task does.
type TaskKind string

// The kinds of task. A later server may add kinds: show one this client
// does not know by its name.
const (
	TaskReplay   TaskKind = "dead_letters.replay" // ReplayDeadLetters
	TaskBackfill TaskKind = "endpoint.backfill"   // Backfill
	TaskPurge    TaskKind = "tenant.purge"        // DeleteTenant
)

// TaskState is where a task is: running until it ends, succeeded or failed
// (final). A task goes on across a restart of the server.
type TaskState string

// The states of a task.
const (
	TaskRunning   TaskState = "running"
	TaskSucceeded TaskState = "succeeded"
	TaskFailed    TaskState = "failed"
)

// Task is an operation the server runs in the background: a range
// replay, a backfill, the purge of a deleted tenant. The call that starts
// one answers it at once, running; Task, TenantTask and WaitTask follow
// it.
type Task struct {
	ID string `json:"id"` // "task_…"
	// Tenant is the tenant whose task it is; "" for the operator's (a
	// tenant's purge: the tenant is Params.Tenant).
	Tenant string     `json:"tenant,omitempty"`
	Kind   TaskKind   `json:"kind"`
	State  TaskState  `json:"state"`
	Params TaskParams `json:"params"`
	// Done counts what it did so far (dead letters replayed, deliveries
	// made, events deleted); Skipped what it found done already (events
	// that had a delivery to a backfill's endpoint). Total is Done +
	// Skipped once it succeeded, nil until then.
	Done    int  `json:"done"`
	Skipped int  `json:"skipped"`
	Total   *int `json:"total"`
	// Waiting names the pending bound a running backfill waits at
	// ("pending_per_tenant", "max_pending"); "" when not waiting.
	Waiting string `json:"waiting,omitempty"`
	// Errors are the errors its steps went on after, the last 10; Error
	// is why it failed.
	Errors   []TaskError `json:"errors"`
	Error    string      `json:"error,omitempty"`
	By       string      `json:"by"`
	Resumed  int         `json:"resumed,omitempty"`
	Started  time.Time   `json:"started"`
	Updated  time.Time   `json:"updated"`
	Finished time.Time   `json:"finished,omitzero"` // zero while running
}

// Ended reports whether t has ended: succeeded or failed.
func (t Task) Ended() bool { return t.State == TaskSucceeded || t.State == TaskFailed }

// TaskParams are what a task was asked to do.
type TaskParams struct {
	Since    time.Time `json:"since,omitzero"`
	Until    time.Time `json:"until,omitzero"`
	Endpoint string    `json:"endpoint,omitempty"`
	Tenant   string    `json:"tenant,omitempty"`
	Force    bool      `json:"force,omitempty"`
}

// TaskError is an error a task's step met and went on after.
type TaskError struct {
	At      time.Time `json:"at"`
	Message string    `json:"message"`
}

// taskAnswer is the answer of a call that starts a task.
type taskAnswer struct {
	Task Task `json:"task"`
}

// startTask sends r, which starts a task, and returns it.
func (c *Client) startTask(ctx context.Context, r request) (Task, error) {
	var out taskAnswer
	_, _, err := c.do(ctx, r, &out)
	return out.Task, err
}

// Task reads any task, the operator's included. Admin tokens only.
func (c *Client) Task(ctx context.Context, id string) (Task, error) {
	var t Task
	_, _, err := c.do(ctx, get("/v1/tasks/"+seg(id), nil), &t)
	return t, err
}

// TenantTask reads task id of tenant (CodeTaskNotFound for one that is
// not the tenant's).
func (c *Client) TenantTask(ctx context.Context, tenant, id string) (Task, error) {
	var t Task
	_, _, err := c.do(ctx, get(tenantPath(tenant, "tasks", seg(id)), nil), &t)
	return t, err
}

// Tasks walks every task, newest first, the operator's included. Admin
// tokens only.
func (c *Client) Tasks(ctx context.Context, o ListOptions) iter.Seq2[Task, error] {
	return list[Task](ctx, c, "/v1/tasks", limitQuery(o.Limit), o.Cursor)
}

// TenantTasks walks tenant's tasks, newest first.
func (c *Client) TenantTasks(ctx context.Context, tenant string, o ListOptions) iter.Seq2[Task, error] {
	return list[Task](ctx, c, tenantPath(tenant, "tasks"), limitQuery(o.Limit), o.Cursor)
}

// DefaultTaskPoll is how often WaitTask reads a task when its poll is
// zero.
const DefaultTaskPoll = 500 * time.Millisecond

// WaitTask reads t (a tenant's task through its tenant's route, so that
// its tenant's token may wait for it; the operator's through the admin's)
// every poll (zero: DefaultTaskPoll) until it has ended, and returns it
// as it ended: succeeded or failed, which the caller checks (State,
// Error). The error is only that of a read, or ctx's when it ends first.
func (c *Client) WaitTask(ctx context.Context, t Task, poll time.Duration) (Task, error) {
	if poll <= 0 {
		poll = DefaultTaskPoll
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for !t.Ended() {
		select {
		case <-ctx.Done():
			return t, ctx.Err()
		case <-timer.C:
		}
		read := c.Task
		if t.Tenant != "" {
			read = func(ctx context.Context, id string) (Task, error) { return c.TenantTask(ctx, t.Tenant, id) }
		}
		now, err := read(ctx, t.ID)
		if err != nil {
			return t, err
		}
		t = now
		timer.Reset(poll)
	}
	return t, nil
}
