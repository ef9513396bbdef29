package postgres

import "sync"

// groupQueue lets concurrent callers share one write: each queues its
// item, and whoever finds fewer than parallel writes running takes what
// waits (at most size items) into one write and runs it for all of them.
// A caller waits for at most the write before its own, and under load
// one round trip and one commit carry many items. The ingests and the
// holders' records of a store each have one.
type groupQueue[T any] struct {
	parallel, size int

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []*queued[T]
	running int
}

type queued[T any] struct {
	v    T
	done bool
}

// do queues v and returns once a write that carried it has run. write
// is called, by whichever caller runs the group, with the group's items
// (v among them, in queue order) and sets each one's outcome in it: the
// callers read their outcomes after do returns.
func (q *groupQueue[T]) do(v T, write func(group []T)) {
	it := &queued[T]{v: v}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cond == nil {
		q.cond = sync.NewCond(&q.mu)
	}
	q.queue = append(q.queue, it)
	for !it.done {
		if q.running >= q.parallel || len(q.queue) == 0 {
			q.cond.Wait()
			continue
		}
		n := min(len(q.queue), q.size)
		group := q.queue[:n:n]
		q.queue = q.queue[n:]
		q.running++
		q.mu.Unlock()
		vs := make([]T, n)
		for i, g := range group {
			vs[i] = g.v
		}
		write(vs)
		q.mu.Lock() // the outcomes write set happen before done, for their callers
		for _, g := range group {
			g.done = true
		}
		q.running--
		q.cond.Broadcast()
	}
}
