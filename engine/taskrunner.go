package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// TaskOptions configure how a Service runs its tasks (ServiceOptions.Tasks).
// The zero value of each field means the default named on it.
type TaskOptions struct {
	// MaxPerTenant bounds a tenant's running tasks: one more is refused
	// with CodeLimitReached until one ends. Zero: no bound.
	MaxPerTenant int
	// Lease is how long a process holds a task it runs without saving
	// its progress (it saves after each step, and at least every third
	// of the lease): on a shared store another process takes over a task
	// whose lease has ended. Zero: DefaultTaskLease.
	Lease time.Duration
	// Shared says that other processes run on the same store (a
	// cluster on PostgreSQL): a running task whose lease has not ended
	// is another's, and this process takes over only those whose lease
	// ended. False: the store is this process's alone, so a running task
	// found at start was left by a process that stopped or died, and is
	// resumed at once. NewNode sets it when the Dispatcher's Scheduler is
	// a SharedScheduler.
	Shared bool
	// Node names this process in the tasks it runs; "": NewID("node").
	Node string
	// Logger receives a line for each task that ends, and the errors
	// the runner met; nil: discard.
	Logger *slog.Logger
}

// DefaultTaskLease is TaskOptions.Lease when zero.
const DefaultTaskLease = 30 * time.Second

// Bounds of a task's retries of a step that failed on an error that may
// pass (CodeUnavailable, or an uncoded one): the wait doubles from
// taskRetryFirst up to taskRetryMax, and the task fails after
// taskRetries such errors in a row (about four minutes).
const (
	taskRetryFirst = time.Second
	taskRetryMax   = 30 * time.Second
	taskRetries    = 10
)

// taskWaitRoom is how long a backfill at a pending bound waits before it
// looks at the backlog again.
const taskWaitRoom = time.Second

// errTaskNotOurs is UpdateTask's function's error when the stored task is
// no longer this process's to run: ended, or taken over by another.
var errTaskNotOurs = errors.New("the task is no longer this process's to run")

// taskRunner runs a Service's tasks on goroutines of its own, from the
// request (or the recovery at start) that made or claimed each, until
// each ends or StopTasks.
type taskRunner struct {
	svc  *Service
	opts TaskOptions
	log  *slog.Logger

	ctx    context.Context // every task's; cancelled by stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	running map[string]bool // the tasks this process runs now
	stopped bool
	watch   chan struct{} // closed when the watch loop ends; nil: none
}

func newTaskRunner(svc *Service, opts TaskOptions) *taskRunner {
	if opts.Lease <= 0 {
		opts.Lease = DefaultTaskLease
	}
	if opts.Node == "" {
		opts.Node = NewID("node")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &taskRunner{svc: svc, opts: opts, log: opts.Logger, ctx: ctx, cancel: cancel, running: map[string]bool{}}
}

// newTask returns a running task of this process, of tenant, as a
// request makes it.
func (r *taskRunner) newTask(tenant string, kind TaskKind, p TaskParams, by string) Task {
	now := r.svc.now()
	if by == "" {
		by = "admin"
	}
	return Task{
		ID: NewID("task"), Tenant: tenant, Kind: kind, State: TaskRunning, Params: p, By: by,
		Errors: []TaskError{}, Started: now, Updated: now, Owner: r.opts.Node, LeaseUntil: now.Add(r.opts.Lease),
	}
}

// create stores t, within its tenant's bound, and runs it.
func (r *taskRunner) create(ctx context.Context, t Task) (Task, error) {
	limit := r.opts.MaxPerTenant
	if err := r.svc.store.CreateTask(ctx, t, limit); err != nil {
		if ErrorCode(err) == CodeLimitReached {
			return Task{}, Errorf(CodeLimitReached, "", "tenant %s has %d tasks running, the most it may have ([limits] tasks_per_tenant = %d): wait until one ends (GET /v1/tenants/%s/tasks)",
				t.Tenant, limit, limit, t.Tenant)
		}
		return Task{}, err
	}
	r.run(t)
	return t, nil
}

// run runs t, claimed by this process, on a goroutine of its own, unless
// this process runs it already or has stopped (then t stays running in
// the store, for the next process).
func (r *taskRunner) run(t Task) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.running[t.ID] {
		return
	}
	r.running[t.ID] = true
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			delete(r.running, t.ID)
			r.mu.Unlock()
		}()
		r.loop(t)
	}()
}

// loop runs t's steps until it ends, the process stops (t stays running,
// as last saved) or another process takes it over.
func (r *taskRunner) loop(t Task) {
	ctx := r.ctx
	step := r.svc.taskStep(t.Kind)
	if step == nil {
		r.finish(t, Errorf(CodeInvalidField, "kind", "this webhookd does not know tasks of kind %q (was it made by a newer one?)", t.Kind))
		return
	}
	saved, failures, wait := r.svc.now(), 0, taskRetryFirst
	for {
		before := t
		res, err := step(ctx, &t)
		if ctx.Err() != nil {
			r.release(t)
			return
		}
		if err != nil {
			code := ErrorCode(err)
			if code != CodeUnavailable && code != CodeInternal || failures+1 >= taskRetries {
				r.finish(t, err)
				return
			}
			failures++
			t = before
			t.Errors = appendTaskError(t.Errors, TaskError{At: r.svc.now(), Message: r.message(t, err)})
			if !r.save(ctx, &t) || !sleep(ctx, wait) {
				r.release(t)
				return
			}
			saved, wait = r.svc.now(), min(2*wait, taskRetryMax)
			continue
		}
		failures, wait = 0, taskRetryFirst
		if res.done {
			r.finish(t, nil)
			return
		}
		if changed(before, t) || r.svc.now().Sub(saved) >= r.opts.Lease/3 {
			if !r.save(ctx, &t) {
				r.release(t)
				return
			}
			saved = r.svc.now()
		}
		if res.wait > 0 && !sleep(ctx, res.wait) {
			r.release(t)
			return
		}
	}
}

// changed reports whether a step changed t's progress.
func changed(before, after Task) bool {
	return before.Done != after.Done || before.Skipped != after.Skipped || before.Cursor != after.Cursor || before.Waiting != after.Waiting
}

// sleep waits d, and reports false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// appendTaskError appends e to errs, keeping the last MaxTaskErrors.
func appendTaskError(errs []TaskError, e TaskError) []TaskError {
	errs = append(errs, e)
	if n := len(errs); n > MaxTaskErrors {
		errs = append([]TaskError{}, errs[n-MaxTaskErrors:]...)
	}
	return errs
}

// message is err in words a task's reader may see: a coded error's
// message; an uncoded one is "internal error", its cause logged for the
// operator only, as the API answers it.
func (r *taskRunner) message(t Task, err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != CodeInternal {
		return e.Message
	}
	r.log.Error("task step failed", "task", t.ID, "kind", string(t.Kind), "err", err)
	return "internal error"
}

// save stores t's progress and renews its lease, if the stored task is
// still this process's; false when it is not (ended, taken over, gone
// with its tenant) or could not be saved.
func (r *taskRunner) save(ctx context.Context, t *Task) bool {
	now := r.svc.now()
	got, err := r.svc.store.UpdateTask(ctx, t.ID, func(stored Task) (Task, error) {
		if stored.State != TaskRunning || stored.Owner != r.opts.Node {
			return stored, errTaskNotOurs
		}
		stored.Done, stored.Skipped, stored.Total, stored.Cursor, stored.Waiting, stored.Errors = t.Done, t.Skipped, t.Total, t.Cursor, t.Waiting, t.Errors
		stored.Updated, stored.LeaseUntil = now, now.Add(r.opts.Lease)
		return stored, nil
	})
	if err != nil {
		if !errors.Is(err, errTaskNotOurs) && ErrorCode(err) != CodeTaskNotFound && ctx.Err() == nil {
			r.log.Warn("task progress not saved; left for another process to resume", "task", t.ID, "err", err)
		}
		return false
	}
	*t = got
	return true
}

// release ends this process's lease of t when it stops running it (the
// process stops), so that on a shared store another process takes it
// over at once rather than when the lease ends. Best effort: a lease not
// released ends by itself.
func (r *taskRunner) release(t Task) {
	if !r.opts.Shared {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), 2*time.Second)
	defer cancel()
	r.svc.store.UpdateTask(ctx, t.ID, func(stored Task) (Task, error) {
		if stored.State != TaskRunning || stored.Owner != r.opts.Node {
			return stored, errTaskNotOurs
		}
		stored.LeaseUntil = time.Time{}
		return stored, nil
	})
}

// finish ends t: succeeded when err is nil, failed with err's message
// otherwise; once that is recorded it sends the operator task.finished,
// as every operational event, best effort after the action it tells of
// (a process that dies between the two does not send it).
func (r *taskRunner) finish(t Task, err error) {
	now := r.svc.now()
	t.Waiting, t.Finished, t.Updated = "", now, now
	if err == nil {
		t.State = TaskSucceeded
		total := t.Done + t.Skipped
		t.Total = &total
	} else {
		t.State, t.Error = TaskFailed, r.message(t, err)
	}
	ctx := r.ctx
	_, uerr := r.svc.store.UpdateTask(ctx, t.ID, func(stored Task) (Task, error) {
		if stored.State != TaskRunning || stored.Owner != r.opts.Node {
			return stored, errTaskNotOurs
		}
		stored.State, stored.Error, stored.Done, stored.Skipped, stored.Total = t.State, t.Error, t.Done, t.Skipped, t.Total
		stored.Cursor, stored.Waiting, stored.Errors = t.Cursor, "", t.Errors
		stored.Finished, stored.Updated = t.Finished, t.Updated
		return stored, nil
	})
	switch {
	case uerr == nil:
		r.log.Info("task finished", "task", t.ID, "kind", string(t.Kind), "tenant", taskTenant(t), "state", string(t.State),
			"done", t.Done, "skipped", t.Skipped, "error", t.Error)
		if err := r.svc.emitOperational(ctx, OpTaskFinished, taskFinishedData(t)); err != nil {
			r.log.Warn("operational event dropped", "type", OpTaskFinished, "task", t.ID, "err", err)
		}
	case ctx.Err() == nil && !errors.Is(uerr, errTaskNotOurs) && ErrorCode(uerr) != CodeTaskNotFound:
		r.log.Warn("task end not recorded; left for another process to resume", "task", t.ID, "err", uerr)
	}
}

// taskFinishedData is the data of t's task.finished: the tenant it
// concerned (absent for none), its ID and kind, how it ended (reason:
// why it failed), its counts and when it ended, in TimeFormat.
func taskFinishedData(t Task) map[string]any {
	data := map[string]any{
		"task_id": t.ID, "kind": string(t.Kind), "state": string(t.State),
		"done": t.Done, "skipped": t.Skipped, "at": t.Finished.UTC().Format(TimeFormat),
	}
	if tenant := taskTenant(t); tenant != "" {
		data["tenant"] = tenant
	}
	if t.Total != nil {
		data["total"] = *t.Total
	}
	if t.Error != "" {
		data["reason"] = t.Error
	}
	return data
}

// taskTenant is the tenant t concerns: its own, or the one a purge
// purges; "" for none.
func taskTenant(t Task) string {
	if t.Tenant != "" {
		return t.Tenant
	}
	return t.Params.Tenant
}

// resume claims every running task no process runs: at start on a store
// of its own every one; on a shared store those whose lease ended. It
// runs what it claimed and reports how many.
func (r *taskRunner) resume(ctx context.Context) (int, error) {
	n := 0
	f := TaskFilter{Running: true, Limit: MaxPageLimit}
	for {
		ts, next, err := r.svc.store.ListTasks(ctx, f)
		if err != nil {
			return n, err
		}
		for _, t := range ts {
			if r.claim(ctx, t) {
				n++
			}
		}
		if next == "" {
			return n, nil
		}
		f.Cursor = next
	}
}

// claim takes t over for this process, if it is still running and no
// other process holds it, and runs it; it reports whether it did.
func (r *taskRunner) claim(ctx context.Context, t Task) bool {
	r.mu.Lock()
	mine := r.running[t.ID]
	r.mu.Unlock()
	if mine {
		return false
	}
	now := r.svc.now()
	got, err := r.svc.store.UpdateTask(ctx, t.ID, func(stored Task) (Task, error) {
		if stored.State != TaskRunning || r.opts.Shared && stored.LeaseUntil.After(now) {
			return stored, errTaskNotOurs
		}
		stored.Owner, stored.LeaseUntil, stored.Updated = r.opts.Node, now.Add(r.opts.Lease), now
		stored.Resumed++
		return stored, nil
	})
	if err != nil {
		if !errors.Is(err, errTaskNotOurs) && ErrorCode(err) != CodeTaskNotFound {
			r.log.Warn("task not taken over", "task", t.ID, "err", err)
		}
		return false
	}
	r.log.Info("task resumed", "task", got.ID, "kind", string(got.Kind), "tenant", taskTenant(got), "done", got.Done, "resumed", got.Resumed)
	r.run(got)
	return true
}

// watchLoop, on a shared store, takes over the tasks whose process died
// (their lease ended) every half lease, until stop.
func (r *taskRunner) watchLoop() {
	defer close(r.watch)
	t := time.NewTicker(r.opts.Lease / 2)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
			if _, err := r.resume(r.ctx); err != nil && r.ctx.Err() == nil {
				r.log.Warn("tasks of stopped processes not taken over", "err", err)
			}
		}
	}
}

// stop stops every task this process runs, each after the step under way
// (its progress saved then stays in the store, running, for the next
// process), waiting only until ctx ends.
func (r *taskRunner) stop(ctx context.Context) error {
	r.mu.Lock()
	r.stopped = true
	watch := r.watch
	r.mu.Unlock()
	r.cancel()
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		if watch != nil {
			<-watch
		}
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("engine: tasks stop gave up waiting (%w): a step of a task is still running", ctx.Err())
	}
}

// ResumeTasks is the tasks' recovery step at start: it claims every
// running task that no process runs (on a store of this process's alone,
// every running task: its process stopped or died; on a shared store,
// those whose lease ended) and runs each from its saved progress, or
// ends it failed with a reason when it cannot go on. On a shared store
// it then goes on taking over the tasks of processes that die, every
// half lease, until StopTasks. It returns how many it resumed. Call it
// once, after the Dispatcher has started (a task hands it deliveries).
func (s *Service) ResumeTasks(ctx context.Context) (int, error) {
	r := s.tasks
	n, err := r.resume(ctx)
	if err != nil {
		return n, fmt.Errorf("engine: resume tasks: %w", err)
	}
	if r.opts.Shared {
		r.mu.Lock()
		if !r.stopped && r.watch == nil {
			r.watch = make(chan struct{})
			go r.watchLoop()
		}
		r.mu.Unlock()
	}
	return n, nil
}

// StopTasks stops the tasks this process runs, each after the step under
// way: they stay running in the store with their progress, for the next
// process (ResumeTasks) to take over. It waits only until ctx ends. Safe
// to call twice; no task starts after it.
func (s *Service) StopTasks(ctx context.Context) error { return s.tasks.stop(ctx) }

// taskStep is one step of a task of some kind: it does a little of the
// task (one transaction of the Store, about), advancing t's progress
// (Done, Skipped, Cursor, Waiting), and says whether the task is done or
// should wait before its next step. It must be idempotent from t as
// last saved: a step made again after a crash does nothing twice.
type taskStep func(ctx context.Context, t *Task) (stepResult, error)

type stepResult struct {
	done bool
	wait time.Duration
}

// taskStep returns the step of kind; nil for a kind this code does not
// know.
func (s *Service) taskStep(kind TaskKind) taskStep {
	switch kind {
	case TaskReplay:
		return s.replayStep
	case TaskBackfill:
		return s.backfillStep
	case TaskPurge:
		return s.purgeStep
	}
	return nil
}

// replayStep replays up to replayBatch of the range's dead letters, each
// recorded with the task's By; done when none is left. A replayed dead
// letter is no longer dead, so a step made again replays none twice.
// Ordered ones are replayed in their lines' order (CompareLineOrder)
// within each step: the lowest Sequence of a line becomes its head
// (unless the line has one) and the others wait behind it; a line whose
// dead letters span steps gets them in step order, the order they died
// in.
//
// Like a backfill's, its steps replay no more than the pending bounds
// leave room for (pendingRoom): a replayed dead letter is in the
// backlog again, and a range may hold far more than a tenant's bound.
// At a bound the task waits (Waiting names it) for the backlog to go
// down, so that one tenant's replay never takes the room of the others
// ([ingest] max_pending) nor its own past pending_per_tenant.
func (s *Service) replayStep(ctx context.Context, t *Task) (stepResult, error) {
	if _, err := s.store.Tenant(ctx, t.Tenant); err != nil {
		return stepResult{}, err
	}
	n, err := s.stepRoom(ctx, t, replayBatch)
	if err != nil {
		return stepResult{}, err
	}
	if n == 0 {
		return stepResult{wait: taskWaitRoom}, nil
	}
	policyOf, err := s.cyclePolicies(ctx, t.Tenant)
	if err != nil {
		return stepResult{}, err
	}
	// The dead letters of the tenant's endpoints, one endpoint at a time:
	// those of an endpoint deleted since are left, as Replay refuses
	// one of them (a cycle to it could only die again).
	eps, err := s.store.Endpoints(ctx, t.Tenant)
	if err != nil {
		return stepResult{}, err
	}
	r := Replay{At: s.now(), By: t.By}
	var ds []Delivery
	for _, ep := range eps {
		if t.Params.Endpoint != "" && ep.ID != t.Params.Endpoint {
			continue
		}
		sel := Selection{Tenant: t.Tenant, State: StateDead, EndpointID: ep.ID, Since: t.Params.Since, Until: t.Params.Until}
		got, err := s.store.UpdateDeliveries(ctx, sel, n-len(ds), func(d Delivery) Delivery { return ReplayDelivery(d, r, policyOf(d.EndpointID)) })
		ds = append(ds, got...)
		if err != nil {
			return stepResult{}, err
		}
		if len(ds) >= n {
			break
		}
	}
	for _, d := range ds {
		if s.disp != nil && d.State == StatePending {
			s.disp.Enqueue(d.ID, d.TenantID, d.EndpointID, d.NextAttemptAt)
		}
	}
	t.Done += len(ds)
	return stepResult{done: len(ds) == 0}, nil
}

// stepRoom returns how many deliveries a step of t may add to its
// tenant's backlog, at most batch: what the pending bounds leave room for
// (pendingRoom). At a bound it returns 0 with t.Waiting naming the bound,
// and the step waits taskWaitRoom; otherwise it clears t.Waiting.
func (s *Service) stepRoom(ctx context.Context, t *Task, batch int) (int, error) {
	room, bound, err := s.pendingRoom(ctx, t.Tenant)
	if err != nil {
		return 0, err
	}
	if room == 0 {
		t.Waiting = bound
		return 0, nil
	}
	t.Waiting = ""
	if room > 0 {
		return min(room, batch), nil
	}
	return batch, nil
}

// backfillStep is one step of a backfill (Log.Backfill) from the task's
// cursor, a place in the tenant's log: it reads no more events than the
// pending bounds leave room for, so that it makes a delivery for every
// event it reads that wants one and its cursor never passes an event
// left without. At a bound it waits (Waiting names it) for the backlog
// to go down. An event that has a delivery to the endpoint counts in
// Skipped, so a step made again makes none twice.
func (s *Service) backfillStep(ctx context.Context, t *Task) (stepResult, error) {
	tn, err := s.store.Tenant(ctx, t.Tenant)
	if err != nil {
		return stepResult{}, err
	}
	n, err := s.stepRoom(ctx, t, backfillScan)
	if err != nil {
		return stepResult{}, err
	}
	if n == 0 {
		return stepResult{wait: taskWaitRoom}, nil
	}
	var after uint64
	if t.Cursor != "" {
		if after, err = strconv.ParseUint(t.Cursor, 10, 64); err != nil {
			return stepResult{}, Errorf(CodeInvalidField, "cursor", "the task's saved cursor %q is not a place in the log", t.Cursor)
		}
	}
	res, err := s.store.Backfill(ctx, BackfillStep{
		Tenant: t.Tenant, EndpointID: t.Params.Endpoint, Since: t.Params.Since, Until: t.Params.Until,
		After: after, Scan: n, Max: n, At: s.now(), By: t.By, TenantPolicy: tn.RetryPolicy,
	})
	if err != nil {
		return stepResult{}, err
	}
	for _, d := range res.Created {
		if s.disp != nil && d.State == StatePending {
			s.disp.Enqueue(d.ID, d.TenantID, d.EndpointID, d.NextAttemptAt)
		}
	}
	t.Done += len(res.Created)
	t.Skipped += res.Existing
	if res.Next == 0 {
		return stepResult{done: true}, nil
	}
	t.Cursor = strconv.FormatUint(res.Next, 10)
	return stepResult{}, nil
}

// purgeStep deletes a batch of what the deleted tenant left
// (Maintenance.PurgeDeletedTenants); done when nothing is left, by this
// task or by the janitor. A tenant that is live and was made before the
// task started was never deleted: its process stopped between making
// the task and deleting the tenant, so the task fails saying so.
func (s *Service) purgeStep(ctx context.Context, t *Task) (stepResult, error) {
	res, err := s.store.PurgeDeletedTenants(ctx, t.Params.Tenant, janitorBatch)
	if err != nil {
		return stepResult{}, err
	}
	if res.Tenant == "" {
		tn, err := s.store.Tenant(ctx, t.Params.Tenant)
		switch {
		case err == nil && tn.Created.Before(t.Started):
			return stepResult{}, Errorf(CodeInvalidField, "tenant", "tenant %s was not deleted: the process stopped before it deleted it; delete it again", t.Params.Tenant)
		case err != nil && ErrorCode(err) != CodeTenantNotFound:
			return stepResult{}, err
		}
		return stepResult{done: true}, nil
	}
	t.Done += res.Events
	return stepResult{done: res.Done}, nil
}
