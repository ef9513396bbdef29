package bench

import (
	"context"
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
func eventBody(size int) []byte {
	const head, tail = `{"type":"` + eventType + `","data":{"pad":"`, `"}}`
	pad := max(0, size-len(head)-len(tail))
	return []byte(head + strings.Repeat("x", pad) + tail)
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
}

// ack is one acknowledged event.
type ack struct {
	id         string
	sent       time.Time // when it was sent (open loop: when it was due)
	acked      time.Time // when the 202 was read
	deliveries []string
}

// loadResult is what a load did.
type loadResult struct {
	acks       []ack // in no particular order
	errors     int64
	throttled  int64 // 429 or 503 answers, each retried after Retry-After
	firstErr   error
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
	record := func(a ack, throttled int64, err error) {
		mu.Lock()
		defer mu.Unlock()
		res.throttled += throttled
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
				a, th, err := sendEvent(ctx, api, spec.tenant, spec.body)
				a.sent = due
				record(a, th, err)
			}()
		}
	} else {
		var issued atomic.Int64
		for range spec.clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil && issued.Add(1) <= int64(spec.events) {
					a, th, err := sendEvent(ctx, api, spec.tenant, spec.body)
					record(a, th, err)
				}
			}()
		}
	}
	wg.Wait()
	res.end = time.Now()
	res.cpu = cpuTime() - cpu0
	return res
}

// sendEvent ingests one event; an answer of 429 or 503 (backpressure) is
// retried after its Retry-After (at most 1s, 10ms when absent) and counted.
func sendEvent(ctx context.Context, api *apiClient, tenant string, body []byte) (ack, int64, error) {
	var throttled int64
	for {
		sent := time.Now()
		ans, err := api.ingest(ctx, tenant, body)
		if err == nil {
			ids := make([]string, len(ans.Deliveries))
			for i, d := range ans.Deliveries {
				ids[i] = d.ID
			}
			return ack{id: ans.ID, sent: sent, acked: time.Now(), deliveries: ids}, throttled, nil
		}
		var ae *apiError
		if !errors.As(err, &ae) || (ae.Status != 429 && ae.Status != 503) {
			return ack{}, throttled, err
		}
		throttled++
		wait := min(max(ae.RetryAfter, 10*time.Millisecond), time.Second)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ack{}, throttled, ctx.Err()
		case <-t.C:
		}
	}
}
