package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
	"github.com/webhookd/webhookd/storage"
)

// TestPrepareEvent_DeliverAt: deliver_at is taken from MaxDeliverAtSkew
// in the past to MaxDeliverAtAhead ahead, refused as invalid_field
// naming deliver_at outside; a scheduled event's deliveries are pending,
// due at deliver_at, their cycle (and so its deadline) starting then; and
// the idempotency hash of a request without deliver_at is what it was.
func TestPrepareEvent_DeliverAt(t *testing.T) {
	now := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	opts := engine.IngestOptions{APIVersion: "v1", Now: func() time.Time { return now }}
	in := engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{"a":1}`), IdempotencyKey: "k"}
	plain, err := engine.PrepareEvent("acme", in, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !plain.Event.DeliverAt.IsZero() {
		t.Fatalf("deliver_at %v without one asked", plain.Event.DeliverAt)
	}

	for _, tt := range []struct {
		name string
		at   time.Time
		ok   bool
	}{
		{"within the skew", now.Add(-engine.MaxDeliverAtSkew), true},
		{"past the skew", now.Add(-engine.MaxDeliverAtSkew - time.Millisecond), false},
		{"at the horizon", now.Add(engine.MaxDeliverAtAhead), true},
		{"past the horizon", now.Add(engine.MaxDeliverAtAhead + time.Millisecond), false},
		{"ahead, another offset", now.Add(time.Hour).In(time.FixedZone("", 5*3600+1800)), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := in
			in.DeliverAt = tt.at
			ne, err := engine.PrepareEvent("acme", in, opts)
			if !tt.ok {
				var e *engine.Error
				if !errors.As(err, &e) || e.Code != engine.CodeInvalidField || e.Field != "deliver_at" {
					t.Fatalf("err = %v, want invalid_field naming deliver_at", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.at.UTC(); !ne.Event.DeliverAt.Equal(want) || ne.Event.DeliverAt.Location() != time.UTC {
				t.Fatalf("DeliverAt = %v, want %v in UTC", ne.Event.DeliverAt, want)
			}
			if ne.RequestHash == plain.RequestHash {
				t.Fatal("a request with deliver_at hashes as one without: an idempotent retry at another time would not conflict")
			}
		})
	}

	// Two times hash apart; the same time in another zone hashes alike.
	at := now.Add(2 * time.Hour)
	hash := func(at time.Time) [32]byte {
		in := in
		in.DeliverAt = at
		ne, err := engine.PrepareEvent("acme", in, opts)
		if err != nil {
			t.Fatal(err)
		}
		return ne.RequestHash
	}
	if hash(at) == hash(at.Add(time.Second)) {
		t.Fatal("two deliver_at hash alike")
	}
	if hash(at) != hash(at.In(time.FixedZone("", -7*3600))) {
		t.Fatal("one instant in two zones hashes apart")
	}

	// The deliveries: pending, due at deliver_at, the cycle from it.
	in.DeliverAt = at
	ne, err := engine.PrepareEvent("acme", in, opts)
	if err != nil {
		t.Fatal(err)
	}
	ep := engine.Endpoint{ID: "ep_1", TenantID: "acme", EventTypes: []string{"order.created"}}
	ds := ne.Deliveries(ne.Event, "", []engine.Endpoint{ep})
	if len(ds) != 1 {
		t.Fatalf("%d deliveries", len(ds))
	}
	d := ds[0]
	if d.State != engine.StatePending || !d.NextAttemptAt.Equal(at) || !d.CycleStart.Equal(at) || !d.DeliverAt.Equal(at) {
		t.Fatalf("delivery %s next %v cycle start %v deliver_at %v, want pending at %v", d.State, d.NextAttemptAt, d.CycleStart, d.DeliverAt, at)
	}
	// The deadline runs from deliver_at: a first attempt failing at its
	// time has its retry due by the schedule, not cut off by a deadline
	// counted from ingest.
	p := engine.DefaultRetryPolicy()
	due, dead := p.Next(1, d.CycleStart, at, 0, func() float64 { return 0.5 })
	if dead != "" || !due.After(at) {
		t.Fatalf("after a first attempt at deliver_at: due %v dead %q", due, dead)
	}
	last := at.Add(p.Deadline - p.AttemptTimeout - time.Second)
	if _, dead := p.Next(1, d.CycleStart, last, 0, func() float64 { return 0.5 }); dead != "" {
		t.Fatalf("a retry just before the deadline counted from deliver_at: %s", dead)
	}

	// A waiting delivery promoted before its time is due at its time.
	w := d
	w.State, w.NextAttemptAt = engine.StateWaiting, time.Time{}
	if pd := engine.PromoteDelivery(w, now); !pd.NextAttemptAt.Equal(at) || !pd.CycleStart.Equal(at) {
		t.Fatalf("promoted early: next %v cycle start %v, want %v", pd.NextAttemptAt, pd.CycleStart, at)
	}
	if pd := engine.PromoteDelivery(w, at.Add(time.Minute)); !pd.NextAttemptAt.Equal(at.Add(time.Minute)) {
		t.Fatalf("promoted late: next %v", pd.NextAttemptAt)
	}
}

// TestService_ResumeKeepsSchedule: a scheduled event's delivery held for
// its disabled endpoint and delivered held when the endpoint is enabled
// before deliver_at stays due at deliver_at, its window counting from
// then: enabling the endpoint does not send it early.
func TestService_ResumeKeepsSchedule(t *testing.T) {
	t.Run("memstore", func(t *testing.T) { resumeKeepsSchedule(t, memstore.New()) })
	t.Run("bbolt", func(t *testing.T) {
		db, err := storage.Open(filepath.Join(t.TempDir(), "webhookd.db"), storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		resumeKeepsSchedule(t, db)
		// The retry index, which the timers are rebuilt from at start,
		// has it at deliver_at too.
		due, ok, err := db.OldestDue(context.Background())
		if err != nil || !ok || !due.Equal(time.Date(2030, 1, 2, 4, 4, 5, 0, time.UTC)) {
			t.Errorf("the retry index's first due time: %v (%v), %v; want deliver_at", due, ok, err)
		}
	})
}

func resumeKeepsSchedule(t *testing.T, store engine.Store) {
	ctx := context.Background()
	clock := &settableClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	svc := engine.NewService(store, nil, engine.ServiceOptions{Now: clock.Now, Targets: engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}})
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/in", EventTypes: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.SetEndpointEnabled(ctx, "acme", ep.ID, false, false, "admin"); err != nil {
		t.Fatal(err)
	}
	at := clock.Now().Add(time.Hour)
	res, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{}`), DeliverAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Deliveries) != 1 || res.Deliveries[0].State != engine.StatePaused {
		t.Fatalf("ingest to a disabled endpoint: %+v, want one paused delivery", res.Deliveries)
	}
	clock.now = clock.now.Add(10 * time.Minute)
	if _, n, err := svc.SetEndpointEnabled(ctx, "acme", ep.ID, true, true, "admin"); err != nil || n != 1 {
		t.Fatalf("enable and deliver held: %d, %v", n, err)
	}
	d, err := svc.Delivery(ctx, "acme", res.Deliveries[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != engine.StatePending || !d.NextAttemptAt.Equal(at) || !d.CycleStart.Equal(at) {
		t.Errorf("resumed: %s, due %v, cycle from %v; want pending, due and counting from deliver_at %v", d.State, d.NextAttemptAt, d.CycleStart, at)
	}
}
