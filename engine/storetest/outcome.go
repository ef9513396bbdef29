package storetest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// healthOf is what an attempt that failed at at shows of its endpoint,
// disabling it when disable is set (a 410).
func healthOf(ep engine.Endpoint, at time.Time, disable bool) func(*engine.Endpoint) {
	seen := ep
	seen.FailingSince, seen.LastFailure, seen.LastFailureAt = at, "HTTP 410 Gone", at
	if disable {
		seen.Disabled, seen.DisabledReason, seen.DisabledAt = true, "answered 410 Gone", at
	}
	return func(e *engine.Endpoint) { *e = engine.MergeHealth(*e, seen) }
}

var outcomeTests = []test{
	{"the outcome and the endpoint's health land together", func(t *testing.T, f *fixture) {
		f.tenant(t, "acme")
		ep, typ := f.lane(t, "acme")
		d := f.deliver(t, ep, typ)
		at := t0.Add(time.Minute)
		got, err := f.s.RecordOutcome(t.Context(), d.ID, func(cur engine.Delivery) (engine.Delivery, error) {
			return engine.RecordAttempt(cur, attemptRecord(cur, engine.StateDead, at, time.Time{})), nil
		}, healthOf(ep, at, true))
		if err != nil {
			t.Fatal(err)
		}
		if got.State != engine.StateDead {
			t.Errorf("delivery %s, want dead", got.State)
		}
		stored, err := f.s.Endpoint(t.Context(), "acme", ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !stored.Disabled || !stored.FailingSince.Equal(at) || stored.LastFailure != "HTTP 410 Gone" {
			t.Errorf("endpoint after the outcome: %+v, want disabled, failing since %s", stored, at)
		}
		if !reflect.DeepEqual(stored.Secrets, ep.Secrets) || stored.URL != ep.URL {
			t.Error("the health update changed the endpoint's secrets or settings")
		}
		// An ingest now holds its delivery for the disabled endpoint.
		if next := f.deliver(t, ep, typ); next.State != engine.StatePaused {
			t.Errorf("a delivery made after the outcome is %s, want paused", next.State)
		}
	}},
	{"without health the endpoint is untouched; a deleted one is no error", func(t *testing.T, f *fixture) {
		f.tenant(t, "acme")
		ep, typ := f.lane(t, "acme")
		a, b := f.deliver(t, ep, typ), f.deliver(t, ep, typ)
		before, _ := f.s.Endpoint(t.Context(), "acme", ep.ID)
		succeed := func(cur engine.Delivery) (engine.Delivery, error) {
			return engine.RecordAttempt(cur, attemptRecord(cur, engine.StateSucceeded, t0.Add(time.Minute), time.Time{})), nil
		}
		if _, err := f.s.RecordOutcome(t.Context(), a.ID, succeed, nil); err != nil {
			t.Fatal(err)
		}
		if after, _ := f.s.Endpoint(t.Context(), "acme", ep.ID); !reflect.DeepEqual(after, before) {
			t.Errorf("endpoint changed without health: %+v, was %+v", after, before)
		}
		if err := f.s.DeleteEndpoint(t.Context(), "acme", ep.ID); err != nil {
			t.Fatal(err)
		}
		if got, err := f.s.RecordOutcome(t.Context(), b.ID, succeed, healthOf(ep, t0, false)); err != nil || got.State != engine.StateSucceeded {
			t.Errorf("outcome with the endpoint deleted: %v, %v; want it recorded", got.State, err)
		}
	}},
	{"an error of fn changes neither", func(t *testing.T, f *fixture) {
		f.tenant(t, "acme")
		ep, typ := f.lane(t, "acme")
		d := f.deliver(t, ep, typ)
		before, _ := f.s.Endpoint(t.Context(), "acme", ep.ID)
		refuse := errors.New("refused")
		_, err := f.s.RecordOutcome(t.Context(), d.ID, func(engine.Delivery) (engine.Delivery, error) { return engine.Delivery{}, refuse }, healthOf(ep, t0, true))
		if !errors.Is(err, refuse) {
			t.Errorf("RecordOutcome = %v, want fn's error as is", err)
		}
		if got, _ := f.s.Delivery(t.Context(), "acme", d.ID); !reflect.DeepEqual(got, d) {
			t.Errorf("delivery changed: %+v", got)
		}
		if after, _ := f.s.Endpoint(t.Context(), "acme", ep.ID); !reflect.DeepEqual(after, before) {
			t.Errorf("endpoint changed: %+v", after)
		}
	}},
}
