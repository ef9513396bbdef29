package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// healthOf is what an attempt that failed at at shows of its endpoint,
// disabling it when disable is set (a 410).
func healthOf(ep engine.Endpoint, at time.Time, disable bool) *engine.Endpoint {
	seen := ep
	seen.FailingSince, seen.LastFailure, seen.LastFailureAt = at, "HTTP 410 Gone", at
	if disable {
		seen.Disabled, seen.DisabledReason, seen.DisabledAt = true, "answered 410 Gone", at
	}
	return &seen
}

// outcome is the outcome of an attempt of read (the delivery as read for
// it) that moved it to state at at, with health (nil: none), as the
// dispatcher decides it.
func outcome(read engine.Delivery, state engine.State, at time.Time, health *engine.Endpoint) engine.OutcomeUpdate {
	rec := attemptRecord(read, state, at, time.Time{})
	rec.Endpoint = health
	return engine.NewOutcomeUpdate(read, rec)
}

var outcomeTests = []test{
	{"the outcome and the endpoint's health land together", func(t *testing.T, f *fixture) {
		f.tenant(t, "acme")
		ep, typ := f.lane(t, "acme")
		d := f.deliver(t, ep, typ)
		at := t0.Add(time.Minute)
		u := outcome(d, engine.StateDead, at, healthOf(ep, at, true))
		got, err := f.s.RecordOutcome(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "the delivery RecordOutcome returns", got, u.Delivery)
		wantEqual(t, "the delivery as stored", f.read(t, d), u.Delivery)
		f.wantPlace(t, d)
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
	{"health merges into the endpoint as stored", func(t *testing.T, f *fixture) {
		// Two attempts read the endpoint healthy; the later failure is
		// recorded first. The run of failures began at the earlier one,
		// the last failure is the later one.
		f.tenant(t, "acme")
		ep, typ := f.lane(t, "acme")
		a, b := f.deliver(t, ep, typ), f.deliver(t, ep, typ)
		early, late := t0.Add(time.Minute), t0.Add(2*time.Minute)
		if _, err := f.s.RecordOutcome(t.Context(), outcome(b, engine.StateDead, late, healthOf(ep, late, false))); err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.RecordOutcome(t.Context(), outcome(a, engine.StateDead, early, healthOf(ep, early, false))); err != nil {
			t.Fatal(err)
		}
		stored, err := f.s.Endpoint(t.Context(), "acme", ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !stored.FailingSince.Equal(early) || !stored.LastFailureAt.Equal(late) || stored.Disabled {
			t.Errorf("endpoint failing since %s, last failure at %s, disabled %v; want since %s, last at %s, enabled",
				stored.FailingSince, stored.LastFailureAt, stored.Disabled, early, late)
		}
	}},
	{"without health the endpoint is untouched; a deleted one is no error", func(t *testing.T, f *fixture) {
		f.tenant(t, "acme")
		ep, typ := f.lane(t, "acme")
		a, b := f.deliver(t, ep, typ), f.deliver(t, ep, typ)
		before, _ := f.s.Endpoint(t.Context(), "acme", ep.ID)
		if _, err := f.s.RecordOutcome(t.Context(), outcome(a, engine.StateSucceeded, t0.Add(time.Minute), nil)); err != nil {
			t.Fatal(err)
		}
		if after, _ := f.s.Endpoint(t.Context(), "acme", ep.ID); !reflect.DeepEqual(after, before) {
			t.Errorf("endpoint changed without health: %+v, was %+v", after, before)
		}
		if err := f.s.DeleteEndpoint(t.Context(), "acme", ep.ID); err != nil {
			t.Fatal(err)
		}
		if got, err := f.s.RecordOutcome(t.Context(), outcome(b, engine.StateSucceeded, t0.Add(time.Minute), healthOf(ep, t0, false))); err != nil || got.State != engine.StateSucceeded {
			t.Errorf("outcome with the endpoint deleted: %v, %v; want it recorded", got.State, err)
		}
	}},
	{"OnHealth is told of each merge as stored, once, after the record", func(t *testing.T, f *fixture) {
		// Two attempts read the endpoint healthy and both failed with a
		// 410: only the first record finds it healthy and enabled, so
		// only it makes the transitions its alerts are raised from.
		f.tenant(t, "acme")
		ep, typ := f.lane(t, "acme")
		a, b, c := f.deliver(t, ep, typ), f.deliver(t, ep, typ), f.deliver(t, ep, typ)
		type told struct{ stored, merged engine.Endpoint }
		record := func(u engine.OutcomeUpdate) []told {
			t.Helper()
			var got []told
			u.OnHealth = func(stored, merged engine.Endpoint) { got = append(got, told{stored, merged}) }
			if _, err := f.s.RecordOutcome(t.Context(), u); err != nil {
				t.Fatal(err)
			}
			return got
		}
		at := t0.Add(time.Minute)
		first := record(outcome(a, engine.StateDead, at, healthOf(ep, at, true)))
		if len(first) != 1 {
			t.Fatalf("OnHealth told %d times of one record, want 1", len(first))
		}
		if !first[0].stored.FailingSince.IsZero() || first[0].stored.Disabled || !first[0].merged.Disabled || !first[0].merged.FailingSince.Equal(at) {
			t.Errorf("the first record: stored %+v, merged %+v; want healthy, then disabled and failing since %s", first[0].stored, first[0].merged, at)
		}
		if got := engine.HealthAlerts(first[0].stored, first[0].merged); len(got) != 2 {
			t.Errorf("the first record's alerts: %v, want failing and disabled", got)
		}
		second := record(outcome(b, engine.StateDead, at.Add(time.Second), healthOf(ep, at.Add(time.Second), true)))
		if len(second) != 1 {
			t.Fatalf("OnHealth told %d times of one record, want 1", len(second))
		}
		if got := engine.HealthAlerts(second[0].stored, second[0].merged); len(got) != 0 {
			t.Errorf("the second record found the endpoint %+v and left it %+v: alerts %v, want none", second[0].stored, second[0].merged, got)
		}
		if got := record(outcome(c, engine.StateSucceeded, at, nil)); len(got) != 0 {
			t.Errorf("OnHealth told of a record without health: %+v", got)
		}
	}},
	{"an attempt's response headers come back as recorded, wherever the delivery is read", testResponseHeaders},
	{"a delivery changed since it was read is a conflict: nothing is written; read again, it records", testOutcomeConflict},
	{"an ordered delivery changed since it was read is a conflict too", testOutcomeConflictOrdered},
	{"a refused outcome changes neither", func(t *testing.T, f *fixture) {
		f.tenant(t, "acme")
		ep, typ := f.lane(t, "acme")
		d := f.deliver(t, ep, typ)
		before, _ := f.s.Endpoint(t.Context(), "acme", ep.ID)
		u := outcome(d, engine.StatePending, t0.Add(time.Minute), healthOf(ep, t0, true))
		u.Delivery.NextAttemptAt = time.Time{} // pending with no time to be due
		if _, err := f.s.RecordOutcome(t.Context(), u); err == nil {
			t.Error("RecordOutcome stored a delivery it cannot keep")
		}
		wantEqual(t, "the delivery after the refusal", f.read(t, d), d)
		f.wantPlace(t, d)
		if after, _ := f.s.Endpoint(t.Context(), "acme", ep.ID); !reflect.DeepEqual(after, before) {
			t.Errorf("endpoint changed: %+v", after)
		}
	}},
	{"no such delivery; an ended context writes nothing", func(t *testing.T, f *fixture) {
		f.tenant(t, "acme")
		ep, typ := f.lane(t, "acme")
		d := f.deliver(t, ep, typ)
		gone := outcome(d, engine.StateSucceeded, t0.Add(time.Minute), nil)
		gone.Delivery.ID = "dlv_nope"
		_, err := f.s.RecordOutcome(t.Context(), gone)
		wantCode(t, err, engine.CodeDeliveryNotFound, "id")

		canceled, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := f.s.RecordOutcome(canceled, outcome(d, engine.StateSucceeded, t0.Add(time.Minute), nil)); !errors.Is(err, context.Canceled) {
			t.Errorf("RecordOutcome with an ended context: %v, want context.Canceled", err)
		}
		wantEqual(t, "the delivery after a record with an ended context", f.read(t, d), d)
	}},
}

// testOutcomeConflict: an outcome decided on a delivery that changed
// before it was recorded (a replay, a pause, another outcome recorded
// first) is refused with engine.ErrDeliveryChanged and writes nothing,
// neither the delivery nor the endpoint's health; decided again on the
// delivery read again, it records.
func testOutcomeConflict(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	tests := []struct {
		name   string
		change func(t *testing.T, f *fixture, d engine.Delivery) // what came between the read and the record
		want   engine.State                                      // the state the record read again leaves
	}{
		{"replayed", func(t *testing.T, f *fixture, d engine.Delivery) {
			if _, err := f.replay(t, d.TenantID, d.ID, engine.Replay{At: t0.Add(30 * time.Second), By: "admin"}); err != nil {
				t.Fatal(err)
			}
		}, engine.StatePending}, // the attempt of the older cycle is only logged
		{"paused", func(t *testing.T, f *fixture, d engine.Delivery) {
			f.pause(t, d, t0.Add(30*time.Second))
		}, engine.StatePaused},
		{"another outcome recorded first", func(t *testing.T, f *fixture, d engine.Delivery) {
			if _, err := f.s.RecordOutcome(t.Context(), outcome(d, engine.StateSucceeded, t0.Add(30*time.Second), nil)); err != nil {
				t.Fatal(err)
			}
		}, engine.StateSucceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep, typ := f.lane(t, "acme")
			read := f.deliver(t, ep, typ)
			at := t0.Add(time.Minute)
			u := outcome(read, engine.StateDead, at, healthOf(ep, at, true))
			tt.change(t, f, read)
			changed := f.read(t, read)
			epBefore, _ := f.s.Endpoint(t.Context(), "acme", ep.ID)

			if _, err := f.s.RecordOutcome(t.Context(), u); !errors.Is(err, engine.ErrDeliveryChanged) {
				t.Fatalf("RecordOutcome of an outcome decided before the change: %v, want ErrDeliveryChanged", err)
			}
			wantEqual(t, "the delivery after the conflict", f.read(t, read), changed)
			f.wantPlace(t, read)
			if epAfter, _ := f.s.Endpoint(t.Context(), "acme", ep.ID); !reflect.DeepEqual(epAfter, epBefore) {
				t.Errorf("the endpoint's health was written with a conflict: %+v", epAfter)
			}
			f.check(t)

			// Read again, decided again: it records.
			again := engine.NewOutcomeUpdate(changed, attemptRecord(read, engine.StateDead, at, time.Time{}))
			again.Endpoint = u.Endpoint
			got, err := f.s.RecordOutcome(t.Context(), again)
			if err != nil {
				t.Fatalf("RecordOutcome read again: %v", err)
			}
			wantEqual(t, "the delivery recorded again", got, again.Delivery)
			wantEqual(t, "the delivery as stored", f.read(t, read), again.Delivery)
			if got.State != tt.want || len(got.Attempts) != len(changed.Attempts)+1 {
				t.Errorf("recorded again: %s with %d attempts, want %s with %d", got.State, len(got.Attempts), tt.want, len(changed.Attempts)+1)
			}
			f.wantPlace(t, read)
			if epAfter, _ := f.s.Endpoint(t.Context(), "acme", ep.ID); !epAfter.Disabled {
				t.Error("the endpoint's health was not merged with the outcome recorded again")
			}
		})
	}
}

// testOutcomeConflictOrdered: the same for the head of a line, whose
// record is settled in its line: refused, the line is as it was; read
// again, the head's success promotes the next.
func testOutcomeConflictOrdered(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadSkip)
	ds := f.line(t, ep, typ, 2)
	head := ds[0]
	at := t0.Add(time.Minute)
	u := outcome(head, engine.StateSucceeded, at, nil)
	f.update(t, head.ID, func(d engine.Delivery) engine.Delivery {
		return engine.HoldDelivery(d, d.Cycle, t0.Add(30*time.Second), "endpoint not verified: no answer yet; held until it answers the challenge", t0.Add(10*time.Second))
	})
	held := f.read(t, head)

	if _, err := f.s.RecordOutcome(t.Context(), u); !errors.Is(err, engine.ErrDeliveryChanged) {
		t.Fatalf("RecordOutcome of an outcome decided before the change: %v, want ErrDeliveryChanged", err)
	}
	wantEqual(t, "the head after the conflict", f.read(t, head), held)
	f.wantHead(t, ep, engine.LineEndpoint, head.ID)
	f.wantWaiting(t, head.ID, ds[1])
	f.check(t)

	if _, err := f.s.RecordOutcome(t.Context(), outcome(held, engine.StateSucceeded, at, nil)); err != nil {
		t.Fatalf("RecordOutcome read again: %v", err)
	}
	f.wantHead(t, ep, engine.LineEndpoint, ds[1].ID)
	if next := f.read(t, ds[1]); next.State != engine.StatePending {
		t.Errorf("the next in line is %s after the head succeeded, want pending", next.State)
	}
	f.wantPlace(t, ds...)
}

// testResponseHeaders: the headers an attempt kept (engine.KeepResponseHeaders
// at its bounds: names in order, a value at MaxResponseHeaderValue, text
// beyond ASCII, an empty value) come back from every read of the
// delivery, attempt by attempt; an attempt without any has none (nil),
// and a later attempt leaves an earlier one's as they were.
func testResponseHeaders(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	d := f.deliver(t, ep, typ)

	first := attemptRecord(d, engine.StatePending, t0.Add(time.Second), t0.Add(time.Minute))
	first.Attempt.Status, first.Attempt.Response, first.Attempt.ResponseHeaders = 0, "", nil // no response
	first.LastStatus, first.Reason, first.Attempt.Error = 0, "connection error: refused", "connection error: refused"
	d = f.record(t, first)

	kept := []engine.Header{
		{Name: "Content-Type", Value: "application/json"},
		{Name: "Link", Value: strings.Repeat("é", engine.MaxResponseHeaderValue/2)}, // at the bound, valid UTF-8
		{Name: "Server", Value: "Ünïcode/1 ☃"},
		{Name: "X-Empty", Value: ""},
		{Name: "X-Request-Id", Value: "req_42"},
	}
	second := attemptRecord(d, engine.StateDead, t0.Add(2*time.Minute), time.Time{})
	second.Attempt.ResponseHeaders = kept
	d = f.record(t, second)

	want := []engine.Attempt{first.Attempt, second.Attempt}
	wantHeaders := func(t *testing.T, where string, got engine.Delivery) {
		t.Helper()
		if len(got.Attempts) != len(want) {
			t.Fatalf("%s: %d attempts, want %d", where, len(got.Attempts), len(want))
		}
		for i := range want {
			wantEqual(t, fmt.Sprintf("%s: attempt %d's response headers", where, i+1), got.Attempts[i].ResponseHeaders, want[i].ResponseHeaders)
		}
		wantEqual(t, where+": the attempts", got.Attempts, want)
	}
	wantHeaders(t, "Delivery", f.read(t, d))
	ds, _, err := f.s.ListDeliveries(t.Context(), "acme", engine.DeliveryFilter{Limit: 10})
	if err != nil || len(ds) != 1 {
		t.Fatalf("ListDeliveries = %d, %v; want the one", len(ds), err)
	}
	wantHeaders(t, "ListDeliveries", ds[0])
	dead := f.deadLetters(t, "acme")
	if len(dead) != 1 {
		t.Fatalf("dead letters: %d, want 1", len(dead))
	}
	wantHeaders(t, "DeadLetters", dead[0])
	_, eds, err := f.s.Event(t.Context(), "acme", d.EventID)
	if err != nil || len(eds) != 1 {
		t.Fatalf("Event = %d deliveries, %v", len(eds), err)
	}
	wantHeaders(t, "Event", eds[0])
	recent, err := f.s.RecentEvents(t.Context(), "acme", 1)
	if err != nil || len(recent) != 1 || len(recent[0].Deliveries) != 1 {
		t.Fatalf("RecentEvents = %+v, %v", recent, err)
	}
	wantHeaders(t, "RecentEvents", recent[0].Deliveries[0])

	// Replayed, the delivery keeps its attempts' headers.
	d = f.update(t, d.ID, func(cur engine.Delivery) engine.Delivery {
		return engine.ReplayDelivery(cur, engine.Replay{At: t0.Add(time.Hour), By: "admin"}, "")
	})
	wantHeaders(t, "after a replay", f.read(t, d))
}
