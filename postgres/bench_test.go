package postgres

import (
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// BenchmarkAppendEvent_Parallel is ingest on PostgreSQL: one event with
// two deliveries per append, from 8 goroutines per CPU, each its own
// transaction committed with the server's synchronous_commit.
func BenchmarkAppendEvent_Parallel(b *testing.B) {
	clock := &manualClock{t: time.Now()}
	s := nodes(b, 1, clock)[0]
	ctx := b.Context()
	now := clock.now()
	if _, _, err := s.PutTenant(ctx, engine.Tenant{ID: "acme", Created: now, Updated: now}); err != nil {
		b.Fatal(err)
	}
	if _, _, err := s.PutEventType(ctx, engine.EventType{Name: "order.created", Created: now, Updated: now}); err != nil {
		b.Fatal(err)
	}
	for range 2 {
		ep := engine.Endpoint{ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/hook", EventTypes: []string{"*"},
			Created: now, Updated: now, Secrets: []engine.Secret{{Key: engine.NewSecret()}}}
		if err := s.CreateEndpoint(ctx, ep, 0); err != nil {
			b.Fatal(err)
		}
	}
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
