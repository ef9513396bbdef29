package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// Background tasks (engine/tasks.go). Four buckets, kept in step by every
// write:
//
//	tasks           task ID                    task record (v1 ‖ JSON)
//	tenant_tasks    tenant ‖ 0x00 ‖ task ID    empty (a tenant's tasks; the operator's, of no tenant, are not here)
//	running_tasks   task ID                    the task's tenant ("": the operator's): the running tasks
//	finished_tasks  finished(8) ‖ task ID      the task's tenant: the finished tasks, by when they finished
//
// Task IDs are time ordered, so the first three list tasks in creation
// order and a listing reads them backwards, newest first. A task is in
// running_tasks if and only if it is running, and in finished_tasks
// otherwise, under its Finished, so retention (PruneTasks) reads only
// what it deletes.

func init() {
	// Schema 10 to 11: the task buckets, which Open creates. A file of
	// an older webhookd has no task, so there is nothing to write; the
	// version is there so that a webhookd without tasks refuses a file
	// whose tasks it would leave running forever.
	migrations[10] = func(*bolt.Tx) error { return nil }
}

// taskRecord is the on-disk form of an engine.Task.
type taskRecord struct {
	ID         string            `json:"id"`
	Tenant     string            `json:"tenant,omitempty"`
	Kind       string            `json:"kind"`
	State      string            `json:"state"`
	Params     taskParamsRecord  `json:"params"`
	Done       int               `json:"done,omitempty"`
	Skipped    int               `json:"skipped,omitempty"`
	Total      *int              `json:"total,omitempty"`
	Waiting    string            `json:"waiting,omitempty"`
	Errors     []taskErrorRecord `json:"errors,omitempty"`
	Error      string            `json:"error,omitempty"`
	By         string            `json:"by,omitempty"`
	Resumed    int               `json:"resumed,omitempty"`
	Started    time.Time         `json:"started"`
	Updated    time.Time         `json:"updated"`
	Finished   time.Time         `json:"finished,omitzero"`
	Cursor     string            `json:"cursor,omitempty"`
	Owner      string            `json:"owner,omitempty"`
	LeaseUntil time.Time         `json:"lease_until,omitzero"`
}

type taskParamsRecord struct {
	Since    time.Time `json:"since,omitzero"`
	Until    time.Time `json:"until,omitzero"`
	Endpoint string    `json:"endpoint,omitempty"`
	Tenant   string    `json:"tenant,omitempty"`
	Force    bool      `json:"force,omitempty"`
}

type taskErrorRecord struct {
	At      time.Time `json:"at"`
	Message string    `json:"message"`
}

func encodeTask(t engine.Task) ([]byte, error) {
	r := taskRecord{
		ID: t.ID, Tenant: t.Tenant, Kind: string(t.Kind), State: string(t.State),
		Params: taskParamsRecord{Since: utc(t.Params.Since), Until: utc(t.Params.Until), Endpoint: t.Params.Endpoint, Tenant: t.Params.Tenant, Force: t.Params.Force},
		Done:   t.Done, Skipped: t.Skipped, Total: t.Total, Waiting: t.Waiting, Error: t.Error, By: t.By, Resumed: t.Resumed,
		Started: utc(t.Started), Updated: utc(t.Updated), Finished: utc(t.Finished),
		Cursor: t.Cursor, Owner: t.Owner, LeaseUntil: utc(t.LeaseUntil),
	}
	for _, e := range t.Errors {
		r.Errors = append(r.Errors, taskErrorRecord{At: utc(e.At), Message: e.Message})
	}
	return encodeJSON(r)
}

func decodeTask(data []byte) (engine.Task, error) {
	var r taskRecord
	if err := decodeJSON("task", data, &r); err != nil {
		return engine.Task{}, err
	}
	if r.ID == "" || r.Kind == "" {
		return engine.Task{}, errors.New("decode task: no id or kind")
	}
	switch engine.TaskState(r.State) {
	case engine.TaskRunning, engine.TaskSucceeded, engine.TaskFailed:
	default:
		return engine.Task{}, fmt.Errorf("decode task: unknown state %q", r.State)
	}
	t := engine.Task{
		ID: r.ID, Tenant: r.Tenant, Kind: engine.TaskKind(r.Kind), State: engine.TaskState(r.State),
		Params: engine.TaskParams{Since: r.Params.Since, Until: r.Params.Until, Endpoint: r.Params.Endpoint, Tenant: r.Params.Tenant, Force: r.Params.Force},
		Done:   r.Done, Skipped: r.Skipped, Total: r.Total, Waiting: r.Waiting, Error: r.Error, By: r.By, Resumed: r.Resumed,
		Started: r.Started, Updated: r.Updated, Finished: r.Finished,
		Cursor: r.Cursor, Owner: r.Owner, LeaseUntil: r.LeaseUntil,
		Errors: make([]engine.TaskError, 0, len(r.Errors)),
	}
	for _, e := range r.Errors {
		t.Errors = append(t.Errors, engine.TaskError{At: e.At, Message: e.Message})
	}
	return t, nil
}

// putTask writes t with its index entries, old being the task as stored
// before (nil: a new one). The caller's transaction is the task's write.
func putTask(tx *bolt.Tx, t engine.Task, old *engine.Task) error {
	if old == nil && t.Tenant != "" {
		if err := tx.Bucket(bucketTenantTasks).Put(append(tenantPrefix(t.Tenant), t.ID...), nil); err != nil {
			return err
		}
	}
	if old != nil && old.State != engine.TaskRunning {
		if err := tx.Bucket(bucketFinishedTasks).Delete(finishedTaskKey(*old)); err != nil {
			return err
		}
	}
	v, err := encodeTask(t)
	if err != nil {
		return err
	}
	if err := tx.Bucket(bucketTasks).Put([]byte(t.ID), v); err != nil {
		return err
	}
	running := tx.Bucket(bucketRunningTasks)
	if t.State == engine.TaskRunning {
		return running.Put([]byte(t.ID), []byte(t.Tenant))
	}
	if err := running.Delete([]byte(t.ID)); err != nil {
		return err
	}
	return tx.Bucket(bucketFinishedTasks).Put(finishedTaskKey(t), []byte(t.Tenant))
}

// finishedTaskKey is t's key in finished_tasks: finished(8) ‖ ID.
func finishedTaskKey(t engine.Task) []byte {
	return append(u64(unixNano(t.Finished)), t.ID...)
}

// CreateTask stores t, refusing it when its tenant does not exist or has
// limit running tasks (limit 0: none), in one transaction.
func (db *DB) CreateTask(ctx context.Context, t engine.Task, limit int) error {
	err := db.update(ctx, func(tx *bolt.Tx) error {
		if t.Tenant != "" {
			if !validTenantID(t.Tenant) || tx.Bucket(bucketTenants).Get([]byte(t.Tenant)) == nil {
				return engine.TenantNotFound()
			}
			if limit > 0 && runningTasks(tx, t.Tenant) >= limit {
				return engine.TaskLimitReached(limit)
			}
		}
		if tx.Bucket(bucketTasks).Get([]byte(t.ID)) != nil {
			return fmt.Errorf("task %s exists", t.ID) // NewID: never
		}
		return putTask(tx, t, nil)
	})
	if err != nil {
		return wrap("create task "+t.ID, err)
	}
	return nil
}

// runningTasks counts tenant's running tasks.
func runningTasks(tx *bolt.Tx, tenant string) int {
	n := 0
	c := tx.Bucket(bucketRunningTasks).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if string(v) == tenant {
			n++
		}
	}
	return n
}

// Task returns task id; TaskNotFound.
func (db *DB) Task(ctx context.Context, id string) (engine.Task, error) {
	var out engine.Task
	err := db.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketTasks).Get([]byte(id))
		if v == nil || id == "" {
			return engine.TaskNotFound()
		}
		var err error
		out, err = decodeTask(v)
		return err
	})
	if err != nil {
		return engine.Task{}, wrap("task "+id, err)
	}
	return out, nil
}

// ListTasks pages through the tasks f selects, newest first: of a tenant
// backwards through its entries in tenant_tasks, of all backwards through
// tasks (running ones: running_tasks). The cursor is the page's last
// task's ID; the next page starts below it.
func (db *DB) ListTasks(ctx context.Context, f engine.TaskFilter) ([]engine.Task, string, error) {
	if f.Limit < 1 {
		return nil, "", engine.InvalidLimit()
	}
	out := []engine.Task{}
	var next string
	err := db.view(ctx, func(tx *bolt.Tx) error {
		out, next = out[:0], ""
		var (
			c      *bolt.Cursor
			prefix []byte
		)
		switch {
		case f.Tenant != "":
			if !validTenantID(f.Tenant) {
				return nil
			}
			c, prefix = tx.Bucket(bucketTenantTasks).Cursor(), tenantPrefix(f.Tenant)
		case f.Running:
			c = tx.Bucket(bucketRunningTasks).Cursor()
		default:
			c = tx.Bucket(bucketTasks).Cursor()
		}
		// The first key below the cursor (the page's start), backwards.
		var k []byte
		if f.Cursor == "" {
			k = lastWithPrefix(c, prefix)
		} else {
			if k, _ = c.Seek(append(bytes.Clone(prefix), f.Cursor...)); k == nil {
				k, _ = c.Last()
			} else {
				k, _ = c.Prev()
			}
		}
		running := tx.Bucket(bucketRunningTasks)
		for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
			id := k[len(prefix):]
			if f.Running && running.Get(id) == nil {
				continue
			}
			if len(out) == f.Limit { // one more matches
				next = out[len(out)-1].ID
				return nil
			}
			v := tx.Bucket(bucketTasks).Get(id)
			if v == nil {
				return fmt.Errorf("task %s is listed but not stored", id)
			}
			t, err := decodeTask(v)
			if err != nil {
				return err
			}
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		return nil, "", wrap("list tasks", err)
	}
	return out, next, nil
}

// lastWithPrefix moves c to the last key with prefix (the last key of all
// for none) and returns it, or nil when there is none.
func lastWithPrefix(c *bolt.Cursor, prefix []byte) []byte {
	if len(prefix) == 0 {
		k, _ := c.Last()
		return k
	}
	end := append(bytes.Clone(prefix[:len(prefix)-1]), prefix[len(prefix)-1]+1) // the first key past the prefix: its last byte is 0x00
	k, _ := c.Seek(end)
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	if k != nil && !bytes.HasPrefix(k, prefix) {
		return nil
	}
	return k
}

// UpdateTask applies fn to task id and stores the result with its index
// entries, in one transaction; TaskNotFound.
func (db *DB) UpdateTask(ctx context.Context, id string, fn func(engine.Task) (engine.Task, error)) (engine.Task, error) {
	var out engine.Task
	err := db.update(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketTasks).Get([]byte(id))
		if v == nil || id == "" {
			return engine.TaskNotFound()
		}
		old, err := decodeTask(v)
		if err != nil {
			return err
		}
		t, err := fn(old)
		if err != nil {
			return err
		}
		t.ID, t.Tenant = old.ID, old.Tenant
		out = t
		return putTask(tx, t, &old)
	})
	if err != nil {
		return engine.Task{}, wrap("update task "+id, err)
	}
	return out, nil
}

// PruneTasks deletes, in one transaction, at most max tasks (0: 1000)
// that finished before before, oldest first, and returns how many. It
// reads only those, in finished_tasks.
func (db *DB) PruneTasks(ctx context.Context, before time.Time, max int) (int, error) {
	if max <= 0 {
		max = defaultPruneMax
	}
	var n int
	err := db.update(ctx, func(tx *bolt.Tx) error {
		n = 0
		type doomed struct{ id, tenant string }
		var gone []doomed
		end := unixNano(before)
		c := tx.Bucket(bucketFinishedTasks).Cursor()
		for k, v := c.First(); k != nil && len(gone) < max; k, v = c.Next() {
			if len(k) < 8 {
				return fmt.Errorf("finished_tasks key %q is too short", k)
			}
			if binary.BigEndian.Uint64(k) >= end {
				break
			}
			gone = append(gone, doomed{string(k[8:]), string(v)})
		}
		for _, d := range gone {
			if err := deleteTask(tx, d.id, d.tenant); err != nil {
				return err
			}
		}
		n = len(gone)
		return nil
	})
	if err != nil {
		return 0, wrap("prune tasks", err)
	}
	return n, nil
}

// deleteTask deletes task id of tenant with its index entries.
func deleteTask(tx *bolt.Tx, id, tenant string) error {
	v := tx.Bucket(bucketTasks).Get([]byte(id))
	if v == nil {
		return fmt.Errorf("task %s is indexed but not stored", id)
	}
	t, err := decodeTask(v)
	if err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	if tenant != "" {
		if err := tx.Bucket(bucketTenantTasks).Delete(append(tenantPrefix(tenant), id...)); err != nil {
			return err
		}
	}
	if t.State == engine.TaskRunning {
		if err := tx.Bucket(bucketRunningTasks).Delete([]byte(id)); err != nil {
			return err
		}
	} else if err := tx.Bucket(bucketFinishedTasks).Delete(finishedTaskKey(t)); err != nil {
		return err
	}
	return tx.Bucket(bucketTasks).Delete([]byte(id))
}

// purgeTasks deletes every task of tenant (its purge task, the
// operator's, is none of them).
func purgeTasks(tx *bolt.Tx, tenant string) error {
	prefix := tenantPrefix(tenant)
	var ids []string
	c := tx.Bucket(bucketTenantTasks).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		ids = append(ids, string(k[len(prefix):]))
	}
	for _, id := range ids {
		if err := deleteTask(tx, id, tenant); err != nil {
			return err
		}
	}
	return nil
}

// checkTasks reports a task that does not decode or is not under its own
// ID, and index entries that disagree with the tasks: a tenant's task is
// in tenant_tasks, the operator's is not; a task is in running_tasks,
// under its tenant, iff it is running, and in finished_tasks, under its
// Finished, iff it is not; and its tenant is live or being purged.
func checkTasks(tx *bolt.Tx, report func(format string, args ...any) bool) {
	tenantIdx, running, finished := tx.Bucket(bucketTenantTasks), tx.Bucket(bucketRunningTasks), tx.Bucket(bucketFinishedTasks)
	var nTenant, nRunning, nFinished int
	c := tx.Bucket(bucketTasks).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		t, err := decodeTask(v)
		if err != nil || t.ID != string(k) {
			if !report("task %q: %v (id %q)", k, err, t.ID) {
				return
			}
			continue
		}
		if t.Tenant != "" {
			nTenant++
			if tenantIdx.Get(append(tenantPrefix(t.Tenant), t.ID...)) == nil {
				if !report("task %s of %s is not in tenant_tasks", t.ID, t.Tenant) {
					return
				}
			}
			if tx.Bucket(bucketTenants).Get([]byte(t.Tenant)) == nil && tx.Bucket(bucketDeletedTenants).Get([]byte(t.Tenant)) == nil {
				if !report("task %s is of tenant %s, which is neither live nor being purged", t.ID, t.Tenant) {
					return
				}
			}
		}
		if t.State == engine.TaskRunning {
			nRunning++
			if v := running.Get(k); v == nil || string(v) != t.Tenant {
				if !report("running task %s: running_tasks has %q, want its tenant %q", t.ID, v, t.Tenant) {
					return
				}
			}
		} else {
			nFinished++
			if finished.Get(finishedTaskKey(t)) == nil {
				if !report("%s task %s is not in finished_tasks at %s", t.State, t.ID, t.Finished) {
					return
				}
			}
		}
	}
	for _, b := range []struct {
		name string
		b    *bolt.Bucket
		want int
	}{{"tenant_tasks", tenantIdx, nTenant}, {"running_tasks", running, nRunning}, {"finished_tasks", finished, nFinished}} {
		if n := b.b.Stats().KeyN; n != b.want {
			if !report("%d entries in %s, want %d", n, b.name, b.want) {
				return
			}
		}
	}
}
