package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/engine"
)

// Background tasks (engine/tasks.go): the tasks table (migration 10), a
// row per task with its document; tenant_id is "" for the operator's.
// state and finished are written from the document in the same
// statement: the running ones are the partial index tasks_running, the
// finished ones tasks_finished by when they finished, which retention
// reads. A task's runner claims and renews it with UpdateTask (a row
// lock), the lease being the document's; no other lock is taken.

// normalizeTask gives t's times in UTC, as read back.
func normalizeTask(t engine.Task) engine.Task {
	t.Started, t.Updated, t.Finished, t.LeaseUntil = utc(t.Started), utc(t.Updated), utc(t.Finished), utc(t.LeaseUntil)
	t.Params.Since, t.Params.Until = utc(t.Params.Since), utc(t.Params.Until)
	t.Errors = append([]engine.TaskError{}, t.Errors...)
	for i := range t.Errors {
		t.Errors[i].At = utc(t.Errors[i].At)
	}
	return t
}

// CreateTask stores t; with a tenant, under its row's lock, so that
// concurrent creates count each other's running tasks against limit.
func (s *Store) CreateTask(ctx context.Context, t engine.Task, limit int) error {
	doc, err := encodeTask(normalizeTask(t))
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		if t.Tenant != "" {
			if _, err := tenant(ctx, tx, t.Tenant, "FOR UPDATE"); err != nil {
				return err
			}
			if limit > 0 {
				var n int
				if err := tx.QueryRow(ctx, "SELECT count(*) FROM tasks WHERE tenant_id = $1 AND state = 'running'", t.Tenant).Scan(&n); err != nil {
					return err
				}
				if n >= limit {
					return engine.TaskLimitReached(limit)
				}
			}
		}
		_, err := tx.Exec(ctx, "INSERT INTO tasks (id, tenant_id, state, finished, doc) VALUES ($1, $2, $3, $4, $5)",
			t.ID, t.Tenant, string(t.State), finishedNS(t), doc)
		return err
	})
}

// finishedNS is the tasks.finished column of t: NULL while it runs.
func finishedNS(t engine.Task) *int64 {
	if t.State == engine.TaskRunning {
		return nil
	}
	n := t.Finished.UnixNano()
	return &n
}

// Task returns task id; TaskNotFound.
func (s *Store) Task(ctx context.Context, id string) (engine.Task, error) {
	var doc []byte
	err := s.pool.QueryRow(ctx, "SELECT doc FROM tasks WHERE id = $1", id).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.Task{}, engine.TaskNotFound()
	}
	if err != nil {
		return engine.Task{}, storeError(err)
	}
	return decodeTask(doc)
}

// ListTasks pages through the tasks f selects, newest first; the cursor is
// the page's last task's ID.
func (s *Store) ListTasks(ctx context.Context, f engine.TaskFilter) ([]engine.Task, string, error) {
	if f.Limit < 1 {
		return nil, "", engine.InvalidLimit()
	}
	out, err := collectDocs(ctx, s.pool, decodeTask, `SELECT doc FROM tasks
		WHERE ($1 = '' OR tenant_id = $1) AND ($2 = '' OR id < $2) AND (NOT $3 OR state = 'running')
		ORDER BY id DESC LIMIT $4`, f.Tenant, f.Cursor, f.Running, f.Limit+1)
	if err != nil {
		return nil, "", err
	}
	if len(out) > f.Limit {
		out = out[:f.Limit]
		return out, out[len(out)-1].ID, nil
	}
	return out, "", nil
}

// UpdateTask applies fn to task id, read under its row's lock, and stores
// the result; TaskNotFound.
func (s *Store) UpdateTask(ctx context.Context, id string, fn func(engine.Task) (engine.Task, error)) (engine.Task, error) {
	var out engine.Task
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var doc []byte
		err := tx.QueryRow(ctx, "SELECT doc FROM tasks WHERE id = $1 FOR UPDATE", id).Scan(&doc)
		if errors.Is(err, pgx.ErrNoRows) {
			return engine.TaskNotFound()
		}
		if err != nil {
			return err
		}
		old, err := decodeTask(doc)
		if err != nil {
			return err
		}
		t, err := fn(old)
		if err != nil {
			return &callerError{err}
		}
		t.ID, t.Tenant = old.ID, old.Tenant
		t = normalizeTask(t)
		if doc, err = encodeTask(t); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE tasks SET state = $2, finished = $3, doc = $4 WHERE id = $1", id, string(t.State), finishedNS(t), doc); err != nil {
			return err
		}
		out = t
		return nil
	})
	if err != nil {
		return engine.Task{}, err
	}
	return out, nil
}

// PruneTasks deletes at most max tasks (0: 500) that finished before
// before, oldest first.
func (s *Store) PruneTasks(ctx context.Context, before time.Time, max int) (int, error) {
	return s.deleteSome(ctx, `DELETE FROM tasks WHERE id IN
		(SELECT id FROM tasks WHERE state <> 'running' AND finished < $1 ORDER BY finished LIMIT $2)`, before.UnixNano(), orDefault(max))
}
