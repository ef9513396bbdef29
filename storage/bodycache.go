package storage

import "sync"

// Bounds of bodyCache: whichever is reached first evicts the oldest entry.
const (
	maxCachedBodyBytes = 8 << 20
	maxCachedBodies    = 16384
)

// bodyCache keeps the bodies of the events attempts read most recently
// (with their IngestTrace, which attempts read too),
// so that the attempts of one event (one per endpoint, then its retries)
// read it from the log once: AttemptInput's lookup of the event's ID, its
// log record and the copy out of bbolt's memory are skipped on a hit.
//
// A cached body is never stale and needs no invalidation. An event's body
// never changes once it is in the log (every attempt and replay signs the
// same stored bytes), event IDs are made by NewID and never reused, and
// AttemptInput reads the delivery first in its own transaction: retention
// deletes an event only with all its deliveries, so a body whose event is
// gone is never asked for. Entries leave in the order they came once a
// bound is reached. The bodies are shared by every attempt that gets
// them and must not be changed. Safe for concurrent use.
type bodyCache struct {
	mu    sync.Mutex
	m     map[string]cachedBody // by event ID
	order []string              // event IDs, oldest first from head
	head  int
	bytes int
}

// cachedBody is an event's body and IngestTrace.
type cachedBody struct {
	body  []byte
	trace string
}

// get returns the cached body and IngestTrace of event id.
func (c *bodyCache) get(id string) ([]byte, string, bool) {
	c.mu.Lock()
	b, ok := c.m[id]
	c.mu.Unlock()
	return b.body, b.trace, ok
}

// put caches body, which must not be bbolt's memory and is kept, and
// trace as those of event id, evicting the oldest entries beyond the
// bounds.
func (c *bodyCache) put(id string, body []byte, trace string) {
	if len(body) > maxCachedBodyBytes/64 {
		return // a large event would push out many; read it each time
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]cachedBody)
	}
	if _, ok := c.m[id]; ok {
		return
	}
	c.m[id] = cachedBody{body[:len(body):len(body)], trace}
	c.order = append(c.order, id)
	c.bytes += len(body)
	for c.bytes > maxCachedBodyBytes || len(c.m) > maxCachedBodies {
		old := c.order[c.head]
		c.order[c.head] = ""
		c.head++
		c.bytes -= len(c.m[old].body)
		delete(c.m, old)
	}
	if c.head > len(c.order)/2 { // compact the evicted prefix away
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
}
