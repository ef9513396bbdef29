package storage

import (
	"context"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

func TestDB_PausedDeliveries(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "acme")
	mustEventType(t, db, "order.created")
	ep := mustEndpoint(t, db, "acme", "order.created")

	// Pending, then found disabled by the dispatcher: paused.
	d := mustAppend(t, db, newEvent("acme", "order.created", `{}`)).Deliveries[0]
	got, err := recordAttempt(ctx, db, engine.AttemptRecord{DeliveryID: d.ID, Cycle: 1, State: engine.StatePaused, At: t0})
	if err != nil || got.State != engine.StatePaused || len(got.Attempts) != 0 || !got.NextAttemptAt.IsZero() {
		t.Fatalf("paused: %+v %v", got, err)
	}
	// Ingest for a disabled endpoint: paused at once.
	if _, err := db.UpdateEndpoint(ctx, "acme", ep.ID, func(e *engine.Endpoint) error { e.Disabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	held := mustAppend(t, db, newEvent("acme", "order.created", `{}`)).Deliveries[0]
	if held.State != engine.StatePaused {
		t.Fatalf("ingest to a disabled endpoint made a %s delivery", held.State)
	}
	mustCheck(t, db)

	r := engine.Replay{At: t0.Add(time.Hour), By: "admin"}
	resumed, err := resumePaused(ctx, db, "acme", ep.ID, true, r, 1) // one per call
	if err != nil || len(resumed) != 1 || resumed[0].State != engine.StatePending || resumed[0].Cycle != 2 {
		t.Fatalf("resume: %+v %v", resumed, err)
	}
	dropped, err := resumePaused(ctx, db, "acme", ep.ID, false, r, 10)
	if err != nil || len(dropped) != 1 || dropped[0].State != engine.StateDead {
		t.Fatalf("enable from now on: %+v %v", dropped, err)
	}
	if more, _ := resumePaused(ctx, db, "acme", ep.ID, true, r, 10); len(more) != 0 {
		t.Errorf("paused index not emptied: %d more", len(more))
	}
	mustCheck(t, db)
}

func TestDB_RecordAttemptEndpointHealth(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "acme")
	d := mustDelivery(t, db, "acme")
	ep, err := db.Endpoint(ctx, "acme", d.EndpointID)
	if err != nil {
		t.Fatal(err)
	}
	record := func(failingSince time.Time, reason string, at time.Time) {
		t.Helper()
		h := ep
		h.FailingSince, h.LastFailure, h.LastFailureAt = failingSince, reason, at
		_, err := recordAttempt(ctx, db, engine.AttemptRecord{DeliveryID: d.ID, Cycle: 2, State: engine.StateDead, At: at, Endpoint: &h,
			Attempt: engine.Attempt{Cycle: 2, Number: 1, Outcome: engine.OutcomeRetry}})
		if err != nil {
			t.Fatal(err)
		}
	}
	record(t0.Add(2*time.Second), "HTTP 502", t0.Add(2*time.Second))
	record(t0.Add(time.Second), "HTTP 503", t0.Add(time.Second)) // an earlier attempt reports late
	got, _ := db.Endpoint(ctx, "acme", d.EndpointID)
	if !got.FailingSince.Equal(t0.Add(time.Second)) || got.LastFailure != "HTTP 502" {
		t.Errorf("health %v %q, want failing since the earliest failure and the latest reason", got.FailingSince, got.LastFailure)
	}
	if len(got.Secrets) == 0 || got.Secrets[0].Key != ep.Secrets[0].Key {
		t.Error("a health update touched the secrets")
	}
	record(time.Time{}, "", t0.Add(3*time.Second)) // a success clears the run
	if got, _ := db.Endpoint(ctx, "acme", d.EndpointID); !got.FailingSince.IsZero() {
		t.Errorf("failing since %v after a success", got.FailingSince)
	}
}
