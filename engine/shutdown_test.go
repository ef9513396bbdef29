package engine_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
)

// unreadableLines is memstore whose LineHead fails while fail is set, and
// counts its calls.
type unreadableLines struct {
	*memstore.Store
	fail  atomic.Bool
	reads atomic.Int64
}

func (s *unreadableLines) LineHead(ctx context.Context, endpointID, line string) (engine.Delivery, bool, error) {
	s.reads.Add(1)
	if s.fail.Load() {
		return engine.Delivery{}, false, errors.New("disk read error")
	}
	return s.Store.LineHead(ctx, endpointID, line)
}

// TestDispatcher_StopEndsLineRetries: a line whose head the store cannot
// read after an attempt is read again every storeRetryDelay while the
// dispatcher runs, and never after Stop (the retry once outlived the
// dispatcher and re-armed itself every second against a closed store).
func TestDispatcher_StopEndsLineRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &unreadableLines{Store: memstore.New()}
		node := bubbleNode(t, store, ok200, engine.DispatcherOptions{Workers: 2})
		ctx := t.Context()
		svc := node.Service
		if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"*"}, Ordering: engine.OrderingEndpoint}); err != nil {
			t.Fatal(err)
		}
		if err := node.Start(ctx); err != nil {
			t.Fatal(err)
		}
		store.fail.Store(true)
		d := ingestKeyed(t, svc, "")
		synctest.Wait() // attempted, recorded, its line's head not read
		if got, _ := svc.Delivery(ctx, "acme", d.ID); got.State != engine.StateSucceeded {
			t.Fatalf("delivery is %s, want succeeded", got.State)
		}
		first := store.reads.Load()
		if first == 0 {
			t.Fatal("the line's head was not read after the attempt")
		}
		time.Sleep(3*time.Second + time.Millisecond) // the bubble's clock: no real time passes
		if got := store.reads.Load(); got != first+3 {
			t.Errorf("the line's head was read %d times in the 3 s after the first failed read, want 3 (once a second while running)", got-first)
		}

		if err := node.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if armed := engine.ArmedTimers(node.Dispatcher); armed != 0 {
			t.Errorf("%d timers armed after Stop, want none", armed)
		}
		atStop := store.reads.Load()
		time.Sleep(time.Minute) // the bubble's clock
		if got := store.reads.Load() - atStop; got != 0 {
			t.Errorf("the line's head was read %d times in the minute after Stop, want none", got)
		}
		store.fail.Store(false) // so that a retry left behind ends the bubble
	})
}

// hungDisk is memstore whose record of an outcome does not return until
// open is closed: a disk that has stopped answering, and ignores ctx.
type hungDisk struct {
	*memstore.Store
	open    chan struct{}
	waiting chan struct{} // closed at the first record
	once    atomic.Bool
}

func (s *hungDisk) RecordOutcome(ctx context.Context, u engine.OutcomeUpdate) (engine.Delivery, error) {
	if s.once.CompareAndSwap(false, true) {
		close(s.waiting)
	}
	<-s.open
	return s.Store.RecordOutcome(ctx, u)
}

// TestNode_StopHonoursItsDeadline: with the record of an outcome hung on
// the disk, Stop returns when its context ends, with an error that says
// so and what it left running, rather than wait for the disk; a second
// Stop is as safe. Once the disk answers, what was left ends on its own:
// the outcome is recorded, and its operational event (the endpoint's
// first failure), which comes after the sink stopped, is dropped, not
// sent on a closed queue.
func TestNode_StopHonoursItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &hungDisk{Store: memstore.New(), open: make(chan struct{}), waiting: make(chan struct{})}
		var logs bytes.Buffer // written under the handler's lock; read once all is stopped
		node := engine.NewNode(store, engine.NodeOptions{
			Dispatcher: engine.DispatcherOptions{Workers: 2, Targets: bubbleTargets, Client: bubbleClient(func(*http.Request) int {
				return http.StatusInternalServerError
			})},
			Service: engine.ServiceOptions{Targets: bubbleTargets},
			Alerts:  &engine.AlertOptions{URL: bubbleURL, Secret: engine.NewSecret()},
			Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		})
		ctx := t.Context()
		acmeEndpoint(t, node.Service, bubbleURL)
		if err := node.Start(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := node.Service.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		<-store.waiting

		const timeout = 5 * time.Second
		sctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		start := time.Now()
		err = node.Stop(sctx)
		if took := time.Since(start); took > timeout {
			t.Errorf("Stop took %s with a timeout of %s", took, timeout)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want the deadline exceeded", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "1 outcome") {
			t.Errorf("Stop = %q, want it to name the 1 outcome left being recorded", msg)
		}
		sctx, cancel = context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := node.Stop(sctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the second Stop = %v, want the deadline exceeded again (the disk still hangs)", err)
		}

		close(store.open) // the disk answers: what Stop left ends
		if err := node.Stop(ctx); err != nil {
			t.Errorf("Stop once the disk answered = %v", err)
		}
		if got, _ := node.Service.Delivery(ctx, "acme", res.Deliveries[0].ID); got.CycleAttempts != 1 {
			t.Errorf("the delivery has %d attempts recorded once the disk answered, want 1", got.CycleAttempts)
		}
		synctest.Wait()
		if !strings.Contains(logs.String(), "endpoint.failing dropped: the sink has stopped") {
			t.Errorf("no alert dropped after the sink stopped; the log:\n%s", logs.String())
		}
	})
}

// TestDispatcher_StopEndsRateWaits: an endpoint held to its rate waits on
// a timer of the dispatcher's, which Stop stops: none is left armed, and
// no request is made after Stop.
func TestDispatcher_StopEndsRateWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var requests atomic.Int64
		node := bubbleNode(t, nil, func(*http.Request) int { requests.Add(1); return http.StatusOK },
			engine.DispatcherOptions{Workers: 2, EndpointRate: 1})
		ctx := t.Context()
		acmeEndpoint(t, node.Service, bubbleURL)
		if err := node.Start(ctx); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			if _, err := node.Service.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if got, armed := requests.Load(), engine.ArmedTimers(node.Dispatcher); got != 1 || armed != 1 {
			t.Fatalf("at once: %d requests and %d timers armed, want 1 (the rate is 1/s) and 1 (the endpoint waits)", got, armed)
		}
		time.Sleep(time.Second) // the bubble's clock
		synctest.Wait()
		if got := requests.Load(); got != 2 {
			t.Fatalf("after a second: %d requests, want 2", got)
		}
		if err := node.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if armed := engine.ArmedTimers(node.Dispatcher); armed != 0 {
			t.Errorf("%d timers armed after Stop, want none", armed)
		}
		time.Sleep(time.Minute) // the bubble's clock
		if got := requests.Load(); got != 2 {
			t.Errorf("%d requests after Stop, want none", got-2)
		}
	})
}

// hungPurge is memstore whose purge of deleted tenants does not return
// until open is closed, and ignores ctx.
type hungPurge struct {
	*memstore.Store
	open, waiting chan struct{}
}

func (s *hungPurge) PurgeDeletedTenants(ctx context.Context, tenant string, max int) (engine.PurgeResult, error) {
	close(s.waiting)
	<-s.open
	return engine.PurgeResult{}, nil
}

// TestNode_StopHonoursItsDeadlineWithTheJanitor: a janitor transaction
// hung on the disk holds Stop only until its context ends.
func TestNode_StopHonoursItsDeadlineWithTheJanitor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &hungPurge{Store: memstore.New(), open: make(chan struct{}), waiting: make(chan struct{})}
		node := engine.NewNode(store, engine.NodeOptions{
			Dispatcher: engine.DispatcherOptions{Targets: bubbleTargets, Client: bubbleClient(ok200)},
			Janitor:    &engine.JanitorOptions{},
		})
		ctx := t.Context()
		if err := node.Start(ctx); err != nil {
			t.Fatal(err)
		}
		<-store.waiting // the purge at Start
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		start := time.Now()
		if err := node.Stop(sctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "janitor") {
			t.Errorf("Stop = %v, want the deadline exceeded, naming the janitor", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("Stop took %s with a timeout of 1s", took)
		}
		close(store.open)
		if err := node.Stop(ctx); err != nil {
			t.Errorf("Stop once the disk answered = %v", err)
		}
	})
}
