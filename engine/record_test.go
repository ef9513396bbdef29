package engine_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
)

// conflictWatch is a store that counts the outcomes it was given to
// record, and those it refused because the delivery changed since it
// was read; with always set, every delivery changes between any read
// and its record.
type conflictWatch struct {
	engine.Store
	always             bool
	records, conflicts atomic.Int64
}

func (s *conflictWatch) RecordOutcome(ctx context.Context, u engine.OutcomeUpdate) (engine.Delivery, error) {
	s.records.Add(1)
	if s.always {
		s.conflicts.Add(1)
		return engine.Delivery{}, engine.ErrDeliveryChanged
	}
	d, err := s.Store.RecordOutcome(ctx, u)
	if errors.Is(err, engine.ErrDeliveryChanged) {
		s.conflicts.Add(1)
	}
	return d, err
}

// TestDispatcher_ReplayDuringAnAttempt: a delivery replayed while its
// attempt is in flight keeps that attempt in its log, in the old cycle,
// and is attempted again in the new one: the outcome, decided on the
// delivery as read before the replay, is refused by the store
// (ErrDeliveryChanged), and the dispatcher reads the delivery again and
// records the attempt over the replayed delivery.
func TestDispatcher_ReplayDuringAnAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started, release := make(chan struct{}), make(chan struct{})
		var requests atomic.Int64
		answer := func(*http.Request) int {
			if requests.Add(1) == 1 {
				close(started)
				<-release
				return http.StatusInternalServerError // left alone, a retry in the same cycle
			}
			return http.StatusNoContent
		}
		store := &conflictWatch{Store: memstore.New()}
		node := bubbleNode(t, store, answer, engine.DispatcherOptions{Workers: 2})
		ctx := t.Context()
		svc := node.Service
		acmeEndpoint(t, svc, bubbleURL)
		if err := node.Start(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		id := res.Deliveries[0].ID
		<-started
		if _, err := svc.Replay(ctx, "acme", id, "admin"); err != nil {
			t.Fatal(err)
		}
		close(release)

		d := waitState(t, svc, id, engine.StateSucceeded)
		if d.Cycle != 2 || d.CycleAttempts != 1 || len(d.Attempts) != 2 {
			t.Fatalf("cycle %d, %d attempts in it, %d in all; want cycle 2, 1, 2", d.Cycle, d.CycleAttempts, len(d.Attempts))
		}
		if a := d.Attempts[0]; a.Cycle != 1 || a.Status != http.StatusInternalServerError {
			t.Errorf("first attempt: cycle %d, status %d; want cycle 1, 500 (kept in the log)", a.Cycle, a.Status)
		}
		if a := d.Attempts[1]; a.Cycle != 2 || a.Status != http.StatusNoContent {
			t.Errorf("second attempt: cycle %d, status %d; want cycle 2, 204", a.Cycle, a.Status)
		}
		if n := store.conflicts.Load(); n != 1 {
			t.Errorf("the store refused %d outcomes as changed since read, want 1 (the attempt's, read before the replay)", n)
		}
		if err := node.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDispatcher_RecordReadsAgainABoundedNumberOfTimes: an outcome the
// store keeps refusing as changed since read, read again and decided
// again each time, is tried MaxRecordReads times and then left: the
// delivery stays pending, and is attempted again a second later
// (storeRetryDelay).
func TestDispatcher_RecordReadsAgainABoundedNumberOfTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var requests atomic.Int64
		answer := func(*http.Request) int { requests.Add(1); return http.StatusNoContent }
		store := &conflictWatch{Store: memstore.New(), always: true}
		node := bubbleNode(t, store, answer, engine.DispatcherOptions{Workers: 1})
		ctx := t.Context()
		acmeEndpoint(t, node.Service, bubbleURL)
		if err := node.Start(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := node.Service.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // attempted once, its record tried and given up
		if got, n := requests.Load(), store.records.Load(); got != 1 || n != engine.MaxRecordReads {
			t.Errorf("%d requests, the outcome tried %d times; want 1 request, its outcome tried %d times", got, n, engine.MaxRecordReads)
		}
		if d, err := store.Delivery(ctx, "acme", res.Deliveries[0].ID); err != nil || d.State != engine.StatePending {
			t.Errorf("delivery %v, %v; want pending", d.State, err)
		}
		time.Sleep(time.Second + time.Millisecond) // the bubble's clock: no real time passes
		synctest.Wait()
		if got, n := requests.Load(), store.records.Load(); got != 2 || n != 2*engine.MaxRecordReads {
			t.Errorf("a second later: %d requests, %d records tried; want 2 and %d", got, n, 2*engine.MaxRecordReads)
		}
		if err := node.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
