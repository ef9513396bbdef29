package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// BenchmarkAppendEvent_Parallel is ingest on PostgreSQL: one event with
// two deliveries per append, from 8 goroutines per CPU, each its own
// transaction committed with the server's synchronous_commit.
func BenchmarkAppendEvent_Parallel(b *testing.B) { benchAppendEvent(b, 2) }

// BenchmarkAppendEvent_Parallel_FanOut compares one endpoint with ten:
// what writing an event's deliveries in the statement that writes the
// event costs an ingest on PostgreSQL (docs/performance.md, "Owed
// fan-out").
func BenchmarkAppendEvent_Parallel_FanOut(b *testing.B) {
	for _, n := range []int{1, 10} {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) { benchAppendEvent(b, n) })
	}
}

func benchAppendEvent(b *testing.B, endpoints int) {
	clock := &manualClock{t: time.Now()}
	s := nodes(b, 1, clock)[0]
	ctx := b.Context()
	now := clock.now()
	acme(b, s, now, endpoints)
	body := make([]byte, 1024)
	for i := range body {
		body[i] = 'a'
	}
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: now, APIVersion: "1", Body: body}
			if _, err := s.AppendEvent(ctx, engine.NewEvent{Event: ev, IdempotencyKey: ev.ID, IdempotencyExpires: now.Add(time.Hour)}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkClaimAndRecord is the cluster's delivery path without HTTP:
// b.N pending deliveries over 16 endpoints, claimed by 4 loops of one
// node in batches of 100, each read (AttemptInput) and recorded as
// succeeded by its holder (RecordOutcome), all of a batch at once, as
// the dispatcher's workers do.
func BenchmarkClaimAndRecord(b *testing.B) {
	clock := &manualClock{t: time.Now()}
	s := nodes(b, 1, clock)[0]
	ctx := b.Context()
	now := clock.now()
	ids := acme(b, s, now, 16)
	// Events with one delivery each to the 16 endpoints in turn, written
	// by SQL: the setup is not what is measured.
	n := (b.N + 15) / 16 * 16
	if _, err := s.pool.Exec(ctx, `INSERT INTO events (seq, id, tenant_id, type, created, api_version, body)
		SELECT i, 'evt_' || i, 'acme', 'order.created', $2, '1', convert_to(repeat('x', 1024), 'UTF8') FROM generate_series(1, $1) AS i`,
		n, now.UnixNano()); err != nil {
		b.Fatal(err)
	}
	ts := now.UTC().Format(time.RFC3339Nano)
	if _, err := s.pool.Exec(ctx, `INSERT INTO deliveries (id, tenant_id, event_id, event_seq, event_type, endpoint_id, state, created, next_attempt_at, due_at, doc)
		SELECT 'dlv_' || lpad(i::text, 12, '0'), 'acme', 'evt_' || i, i, 'order.created', ($3::text[])[1 + i % 16], 'pending', $2, $2, $2,
			convert_to('{"id":"dlv_' || lpad(i::text, 12, '0') || '","tenant":"acme","event_id":"evt_' || i || '","event_type":"order.created","endpoint_id":"' || ($3::text[])[1 + i % 16] || '","state":"pending","cycle":1,"cycle_start":"' || $4 || '","cycle_attempts":0,"next_attempt_at":"' || $4 || '","created":"' || $4 || '","updated":"' || $4 || '","attempts":[],"replays":[]}', 'UTF8')
		FROM generate_series(1, $1) AS i`, n, now.UnixNano(), ids, ts); err != nil {
		b.Fatal(err)
	}
	c := s.Scheduler(SchedulerOptions{EndpointConcurrency: 64, Poll: 10 * time.Millisecond})
	if _, err := c.Recover(ctx, nil); err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ResetTimer()
	var done atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < int64(n) {
				cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				ws, err := c.Claim(cctx, 100)
				cancel()
				if err != nil {
					continue
				}
				var batch sync.WaitGroup
				for _, w := range ws {
					batch.Go(func() {
						in, err := s.AttemptInput(ctx, w.DeliveryID)
						if err != nil {
							b.Error(err)
							return
						}
						at := clock.now()
						cycle := in.Delivery.Cycle
						if _, err := s.RecordOutcome(ctx, engine.NewOutcomeUpdate(in.Delivery, engine.AttemptRecord{DeliveryID: w.DeliveryID, Cycle: cycle, State: engine.StateSucceeded, At: at,
							Attempt: engine.Attempt{Cycle: cycle, Number: 1, Start: at, Status: 204, Outcome: engine.OutcomeSuccess}})); err != nil {
							b.Error(err)
							return
						}
						c.Settle(w, time.Time{})
						done.Add(1)
					})
				}
				batch.Wait()
				if b.Failed() {
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "deliveries/s")
}
