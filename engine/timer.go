package engine

import (
	"container/heap"
	"time"
)

// timerQueue holds the pending deliveries that are not due yet, earliest
// first, at most once each. It is the in-memory schedule that the retry
// index is rebuilt into at start.
//
// It is a binary min-heap with an index by delivery ID rather than a
// hashed timing wheel: insert, move and pop cost O(log n) (20 steps at a
// million entries), nothing is scanned on a tick, and an entry fires at its
// exact time instead of a slot's. Times carry Go's monotonic clock reading,
// so a jump of the wall clock neither fires the whole queue nor stalls it.
// Not safe for concurrent use: the Dispatcher's mutex guards it.
type timerQueue struct {
	h     timerHeap
	index map[string]*timerEntry
}

type timerEntry struct {
	at         time.Time // with a monotonic reading
	id         string
	endpointID string
	pos        int
}

type timerHeap []*timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].pos = i; h[j].pos = j }
func (h *timerHeap) Push(x any)        { e := x.(*timerEntry); e.pos = len(*h); *h = append(*h, e) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

func newTimerQueue() *timerQueue {
	return &timerQueue{index: make(map[string]*timerEntry)}
}

// set schedules id at at, moving it if it is already queued. It reports
// whether id is now the earliest entry.
func (q *timerQueue) set(id, endpointID string, at time.Time) bool {
	if e, ok := q.index[id]; ok {
		e.at = at
		e.endpointID = endpointID
		heap.Fix(&q.h, e.pos)
	} else {
		e = &timerEntry{at: at, id: id, endpointID: endpointID}
		heap.Push(&q.h, e)
		q.index[id] = e
	}
	return q.h[0].id == id
}

// remove drops id if it is queued.
func (q *timerQueue) remove(id string) {
	if e, ok := q.index[id]; ok {
		heap.Remove(&q.h, e.pos)
		delete(q.index, id)
	}
}

// popDue removes and returns the earliest entry if it is due at now.
func (q *timerQueue) popDue(now time.Time) (*timerEntry, bool) {
	if len(q.h) == 0 || q.h[0].at.After(now) {
		return nil, false
	}
	e := heap.Pop(&q.h).(*timerEntry)
	delete(q.index, e.id)
	return e, true
}

// next returns the earliest time queued, and false when empty.
func (q *timerQueue) next() (time.Time, bool) {
	if len(q.h) == 0 {
		return time.Time{}, false
	}
	return q.h[0].at, true
}

func (q *timerQueue) len() int { return len(q.h) }
