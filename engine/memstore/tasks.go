package memstore

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// Background tasks (engine/tasks.go), by ID. A page of tasks is read from
// all of them sorted, newest first; the cursor is the last task's ID.

func copyTask(t engine.Task) engine.Task {
	t.Started, t.Updated, t.Finished, t.LeaseUntil = utc(t.Started), utc(t.Updated), utc(t.Finished), utc(t.LeaseUntil)
	t.Params.Since, t.Params.Until = utc(t.Params.Since), utc(t.Params.Until)
	if t.Total != nil {
		n := *t.Total
		t.Total = &n
	}
	t.Errors = slices.Clone(t.Errors)
	if t.Errors == nil {
		t.Errors = []engine.TaskError{}
	}
	for i := range t.Errors {
		t.Errors[i].At = utc(t.Errors[i].At)
	}
	return t
}

// CreateTask stores t; CodeTenantNotFound, or TaskLimitReached when its
// tenant has limit running tasks.
func (s *Store) CreateTask(ctx context.Context, t engine.Task, limit int) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if t.Tenant != "" {
		if _, ok := s.tenants[t.Tenant]; !ok {
			return engine.TenantNotFound()
		}
		if limit > 0 && s.runningTasks(t.Tenant) >= limit {
			return engine.TaskLimitReached(limit)
		}
	}
	s.tasks[t.ID] = copyTask(t)
	return nil
}

// runningTasks counts tenant's running tasks. The caller holds the mutex.
func (s *Store) runningTasks(tenant string) int {
	n := 0
	for _, t := range s.tasks {
		if t.Tenant == tenant && t.State == engine.TaskRunning {
			n++
		}
	}
	return n
}

// Task returns task id; TaskNotFound.
func (s *Store) Task(ctx context.Context, id string) (engine.Task, error) {
	if err := s.lock(ctx); err != nil {
		return engine.Task{}, err
	}
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		return engine.Task{}, engine.TaskNotFound()
	}
	return copyTask(t), nil
}

// ListTasks pages through the tasks f selects, newest first.
func (s *Store) ListTasks(ctx context.Context, f engine.TaskFilter) ([]engine.Task, string, error) {
	if f.Limit < 1 {
		return nil, "", engine.InvalidLimit()
	}
	if err := s.lock(ctx); err != nil {
		return nil, "", err
	}
	defer s.mu.Unlock()
	var match []engine.Task
	for _, t := range s.tasks {
		if (f.Tenant == "" || t.Tenant == f.Tenant) && (!f.Running || t.State == engine.TaskRunning) &&
			(f.Cursor == "" || t.ID < f.Cursor) {
			match = append(match, t)
		}
	}
	slices.SortFunc(match, func(a, b engine.Task) int { return strings.Compare(b.ID, a.ID) })
	out := []engine.Task{}
	for _, t := range match {
		if len(out) == f.Limit { // one more matches
			return out, out[len(out)-1].ID, nil
		}
		out = append(out, copyTask(t))
	}
	return out, "", nil
}

// UpdateTask applies fn to task id and stores the result; TaskNotFound.
func (s *Store) UpdateTask(ctx context.Context, id string, fn func(engine.Task) (engine.Task, error)) (engine.Task, error) {
	if err := s.lock(ctx); err != nil {
		return engine.Task{}, err
	}
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		return engine.Task{}, engine.TaskNotFound()
	}
	next, err := fn(copyTask(t))
	if err != nil {
		return engine.Task{}, err
	}
	next.ID, next.Tenant = t.ID, t.Tenant
	s.tasks[id] = copyTask(next)
	return copyTask(next), nil
}

// PruneTasks deletes at most max tasks that finished before before.
func (s *Store) PruneTasks(ctx context.Context, before time.Time, max int) (int, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return deleteSome(s.tasks, max, func(t engine.Task) bool { return t.Ended() && t.Finished.Before(before) }), nil
}

// deleteTasks deletes tenant's tasks. The caller holds the mutex.
func (s *Store) deleteTasks(tenant string) {
	for id, t := range s.tasks {
		if t.Tenant == tenant {
			delete(s.tasks, id)
		}
	}
}
