package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// eventType is the type of every event the harness sends.
const eventType = "bench.sent"

// eventBody returns an ingest request body of size bytes (at least the
// minimal event).
func eventBody(size int) []byte { return keyedEventBody(size, "") }

// keyedEventBody is eventBody with the event's ordering_key, unless key
// is "": the same size, with less padding.
func keyedEventBody(size int, key string) []byte {
	head := `{"type":"` + eventType + `",`
	if key != "" {
		head += `"ordering_key":"` + key + `",`
	}
	head += `"data":{"pad":"`
	const tail = `"}}`
	pad := max(0, size-len(head)-len(tail))
	return []byte(head + strings.Repeat("x", pad) + tail)
}

// keyedBody is an ingest request body and the ordering key it carries.
type keyedBody struct {
	key  string
	body []byte
}

// loadSpec is one ingest load: clients concurrent clients sending events
// back to back (closed loop), or, with rate, events paced at that rate
// with at most clients in flight (open loop). It stops after events or
// after duration, whichever comes first.
type loadSpec struct {
	tenant   string
	clients  int
	rate     float64
	events   int
	duration time.Duration
	body     []byte
	// nodes, when set, are what the clients send to instead of the api
	// runLoad is given: each client sends to them in turn, and when one
	// cannot be reached, sends the same event (with its Idempotency-Key,
	// when keys) to the next and leaves that node out from then on.
	nodes []*apiClient
	keys  bool
	// keyed, when set, replaces body: the i-th event the clients take
	// (from 0) is keyed[i%len(keyed)], round-robin over its keys.
	keyed []keyedBody
}

// event returns the body of the load's i-th event (from 0) and its
// ordering key.
func (s *loadSpec) event(i int) ([]byte, string) {
	if len(s.keyed) == 0 {
		return s.body, ""
	}
	k := s.keyed[i%len(s.keyed)]
	return k.body, k.key
}

// ack is one acknowledged event.
type ack struct {
	id         string
	sent       time.Time // when it was sent (open loop: when it was due)
	acked      time.Time // when the 202 was read
	deliveries []string
	key        string // its ordering key, if any
	// failedOver: a node could not be reached, and the event went to the
	// next; began is when it was first sent.
	failedOver bool
	began      time.Time
}

// loadResult is what a load did.
type loadResult struct {
	acks       []ack // in no particular order
	errors     int64
	throttled  int64 // 429 or 503 answers, each retried after Retry-After
	firstErr   error
	failovers  int64 // sends to a node that could not be reached
	start, end time.Time
	cpu        time.Duration // CPU time the process used meanwhile
}

// maxLoadErrors stops a load that fails this often: something is broken.
const maxLoadErrors = 100

// runLoad runs spec against api. sent counts acknowledged events as they
// come, for the progress line.
func runLoad(ctx context.Context, api *apiClient, spec loadSpec, sent *atomic.Int64) loadResult {
	ctx, cancel := context.WithTimeout(ctx, spec.duration)
	defer cancel()
	var (
		mu  sync.Mutex
		res = loadResult{acks: make([]ack, 0, spec.events)}
		wg  sync.WaitGroup
	)
	nodes := spec.nodes
	if len(nodes) == 0 {
		nodes = []*apiClient{api}
	}
	record := func(a ack, c *client, err error) {
		mu.Lock()
		defer mu.Unlock()
		res.throttled += c.throttled
		res.failovers += c.failovers
		c.throttled, c.failovers = 0, 0
		if err != nil {
			if ctx.Err() != nil {
				return // the load's time ran out mid-request: not an error
			}
			res.errors++
			if res.firstErr == nil {
				res.firstErr = err
			}
			if res.errors >= maxLoadErrors {
				cancel()
			}
			return
		}
		res.acks = append(res.acks, a)
		sent.Add(1)
	}
	res.start = time.Now()
	cpu0 := cpuTime()
	if spec.rate > 0 {
		sem := make(chan struct{}, spec.clients)
		interval := float64(time.Second) / spec.rate
	pace:
		for i := range spec.events {
			due := res.start.Add(time.Duration(float64(i) * interval))
			if d := time.Until(due); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					break pace
				case <-t.C:
				}
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				break pace
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				c := newClient(i, nodes, spec.keys)
				body, key := spec.event(i)
				a, err := c.send(ctx, spec.tenant, body)
				a.sent, a.key = due, key
				record(a, c, err)
			}()
		}
	} else {
		var issued atomic.Int64
		for i := range spec.clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := newClient(i, nodes, spec.keys)
				for ctx.Err() == nil {
					n := int(issued.Add(1))
					if n > spec.events {
						break
					}
					body, key := spec.event(n - 1)
					a, err := c.send(ctx, spec.tenant, body)
					a.key = key
					record(a, c, err)
				}
			}()
		}
	}
	wg.Wait()
	res.end = time.Now()
	res.cpu = cpuTime() - cpu0
	return res
}

// client is one ingest client of a load.
type client struct {
	id        int
	nodes     []*apiClient
	down      []bool // nodes this client could not reach
	turn      int
	keys      bool
	throttled int64
	failovers int64
}

func newClient(id int, nodes []*apiClient, keys bool) *client {
	return &client{id: id, nodes: nodes, down: make([]bool, len(nodes)), turn: id, keys: keys}
}

// send ingests one event; an answer of 429 or 503 (backpressure) is
// retried after its Retry-After (at most 1s, 10ms when absent) and
// counted. With several nodes it sends to the next one each time, and a
// node it cannot reach is left out and the event sent to the next.
func (c *client) send(ctx context.Context, tenant string, body []byte) (ack, error) {
	var key string
	if c.keys {
		key = rand.Text()
	}
	node, began, failedOver := c.next(), time.Now(), false
	for {
		sent := time.Now()
		ans, err := c.nodes[node].ingest(ctx, tenant, body, key)
		if err == nil {
			ids := make([]string, len(ans.Deliveries))
			for i, d := range ans.Deliveries {
				ids[i] = d.ID
			}
			return ack{id: ans.ID, sent: sent, acked: time.Now(), deliveries: ids, failedOver: failedOver, began: began}, nil
		}
		var ae *apiError
		if !errors.As(err, &ae) {
			if ctx.Err() != nil || len(c.nodes) == 1 {
				return ack{}, err
			}
			c.down[node] = true
			c.failovers++
			failedOver = true
			if node = c.next(); node < 0 {
				return ack{}, err
			}
			continue
		}
		if ae.Status != 429 && ae.Status != 503 {
			return ack{}, err
		}
		c.throttled++
		wait := min(max(ae.RetryAfter, 10*time.Millisecond), time.Second)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ack{}, ctx.Err()
		case <-t.C:
		}
	}
}

// next returns the next node this client has not left out, or -1.
func (c *client) next() int {
	for range c.nodes {
		n := c.turn % len(c.nodes)
		c.turn++
		if !c.down[n] {
			return n
		}
	}
	return -1
}
