package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/storage"
)

// wallClock is a wall clock that the test can jump: Now is time.Now
// without its monotonic reading (as a wall-clock read is), plus an offset.
type wallClock struct{ offset atomic.Int64 }

func (c *wallClock) Now() time.Time {
	return time.Now().Round(0).Add(time.Duration(c.offset.Load()))
}

func (c *wallClock) jump(d time.Duration) { c.offset.Add(int64(d)) }

// jumpReceiver answers each delivery 500, 500, then 200. The first request
// of each is held until hold is closed. It answers in the process
// (receive, through bubbleClient): the clock test runs in a synctest
// bubble.
type jumpReceiver struct {
	hold chan struct{}

	mu   sync.Mutex
	reqs map[string][]jumpRequest // by webhook-id
	cond *sync.Cond
}

type jumpRequest struct {
	arrived  time.Time // monotonic
	answered time.Time
}

func newJumpReceiver() *jumpReceiver {
	rc := &jumpReceiver{hold: make(chan struct{}), reqs: make(map[string][]jumpRequest)}
	rc.cond = sync.NewCond(&rc.mu)
	return rc
}

// receive answers one request.
func (rc *jumpReceiver) receive(r *http.Request) int {
	id := r.Header.Get("webhook-id")
	rc.mu.Lock()
	n := len(rc.reqs[id])
	rc.reqs[id] = append(rc.reqs[id], jumpRequest{arrived: time.Now()})
	rc.cond.Broadcast()
	rc.mu.Unlock()
	if n == 0 {
		select {
		case <-rc.hold:
		case <-r.Context().Done():
			return http.StatusInternalServerError // not seen: the attempt ended
		}
	}
	rc.mu.Lock()
	rc.reqs[id][n].answered = time.Now()
	rc.cond.Broadcast()
	rc.mu.Unlock()
	if n < 2 {
		return http.StatusInternalServerError
	}
	return http.StatusOK
}

// wait blocks until every one of ids has at least n requests, or fails the
// test after limit.
func (rc *jumpReceiver) wait(t *testing.T, ids []string, n int, limit time.Duration) {
	t.Helper()
	timer := time.AfterFunc(limit, func() {
		rc.mu.Lock()
		rc.cond.Broadcast()
		rc.mu.Unlock()
	})
	defer timer.Stop()
	end := time.Now().Add(limit)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for {
		short := 0
		for _, id := range ids {
			if len(rc.reqs[id]) < n {
				short++
			}
		}
		if short == 0 {
			return
		}
		if !time.Now().Before(end) {
			t.Fatalf("%d of %d deliveries did not get request %d within %s: the queue stalled", short, len(ids), n, limit)
		}
		rc.cond.Wait()
	}
}

// TestDispatcher_ClockJump jumps the wall clock by an hour, forward and
// back, while attempts are in flight and while retries wait in the timer
// queue. Waits run on the monotonic clock, so every retry still comes one
// schedule step after the attempt before it ended: none at once, none an
// hour late. Wall time is only written to the records. It runs in a
// synctest bubble (the bbolt file included): the monotonic clock is the
// bubble's, which moves only while every goroutine waits, and the wall
// clock is that plus the jump.
func TestDispatcher_ClockJump(t *testing.T) {
	for _, jump := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(fmt.Sprintf("jump %s", jump), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testClockJump(t, jump) })
		})
	}
}

func testClockJump(t *testing.T, jump time.Duration) {
	const (
		wait  = 400 * time.Millisecond // every step of the schedule
		slack = 1500 * time.Millisecond
		k     = 10 // deliveries
	)
	ctx := context.Background()
	clock := &wallClock{}
	rc := newJumpReceiver()
	db, err := storage.Open(filepath.Join(t.TempDir(), "webhookd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	policy := engine.RetryPolicy{
		Schedule: []time.Duration{wait, wait, wait},
		// A deadline well past the jump: a wall-clock deadline is what a
		// jump of the wall clock moves, and that is not under test here.
		Deadline:       10 * time.Hour,
		AttemptTimeout: 5 * time.Second,
		RetryAfterMax:  time.Minute,
	}
	disp := engine.NewDispatcher(db, engine.DispatcherOptions{Policy: policy, Workers: 2 * k, EndpointConcurrency: 2 * k, Client: bubbleClient(rc.receive), Targets: bubbleTargets, Now: clock.Now})
	svc := engine.NewService(db, disp, engine.ServiceOptions{Now: clock.Now, Targets: bubbleTargets})
	if err := disp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { disp.Stop(context.Background()) })
	acmeEndpoint(t, svc, bubbleURL)
	var ids []string
	for i := range k {
		res, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Event.ID)
	}

	// Every first attempt is in flight: jump, then let them end (500).
	rc.wait(t, ids, 1, 10*time.Second)
	clock.jump(jump)
	close(rc.hold)
	// Every second attempt ended (500), its retry waits in the timer queue:
	// jump back a third of the way into the wait.
	rc.wait(t, ids, 2, wait+slack)
	time.Sleep(wait / 3) // the bubble's clock: no real time passes
	clock.jump(-jump)
	rc.wait(t, ids, 3, wait+slack)

	rc.mu.Lock()
	defer rc.mu.Unlock()
	minGap, maxGap := time.Duration(1<<62), time.Duration(0)
	for _, id := range ids {
		reqs := rc.reqs[id]
		for i, phase := range []string{"jump while in flight", "jump while waiting"} {
			gap := reqs[i+1].arrived.Sub(reqs[i].answered)
			minGap, maxGap = min(minGap, gap), max(maxGap, gap)
			if gap < wait*3/4 || gap > wait+slack {
				t.Errorf("%s: %s: retry %d came %s after attempt %d ended, want about %s", id, phase, i+2, gap.Round(time.Millisecond), i+1, wait)
			}
		}
	}
	t.Logf("RELIABILITY clock jump %s then back: %d deliveries, retries %s to %s after the attempt before them (schedule %s)",
		jump, k, minGap.Round(time.Millisecond), maxGap.Round(time.Millisecond), wait)
}
