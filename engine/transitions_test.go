package engine

import (
	"reflect"
	"testing"
	"time"
)

var (
	tt0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	tt1 = tt0.Add(time.Minute)
	tt2 = tt0.Add(2 * time.Minute)
)

// pending is a delivery in cycle 1, pending, one attempt made.
func pending() Delivery {
	return Delivery{
		ID: "dlv_1", TenantID: "acme", EventID: "evt_1", EventType: "order.created", EndpointID: "ep_1",
		State: StatePending, Cycle: 1, CycleStart: tt0, CycleAttempts: 1, NextAttemptAt: tt1,
		LastStatus: 500, Reason: "HTTP 500", Created: tt0, Updated: tt0,
		Attempts: []Attempt{{Cycle: 1, Number: 1, Start: tt0, Status: 500, Outcome: OutcomeRetry}},
		Replays:  []Replay{},
	}
}

func with(d Delivery, change func(*Delivery)) Delivery {
	change(&d)
	return d
}

func TestRecordAttempt(t *testing.T) {
	a2 := Attempt{Cycle: 1, Number: 2, Start: tt1, Status: 200, Outcome: OutcomeSuccess}
	attempts := append(pending().Attempts, a2)
	tests := []struct {
		name string
		d    Delivery
		rec  AttemptRecord
		want Delivery
	}{
		{"success", pending(), AttemptRecord{Cycle: 1, Attempt: a2, State: StateSucceeded, LastStatus: 200, At: tt2},
			with(pending(), func(d *Delivery) {
				d.State, d.CycleAttempts, d.LastStatus, d.Reason, d.NextAttemptAt, d.Updated, d.Attempts = StateSucceeded, 2, 200, "", time.Time{}, tt2, attempts
			})},
		{"retry", pending(), AttemptRecord{Cycle: 1, Attempt: a2, State: StatePending, NextAttemptAt: tt2, LastStatus: 503, Reason: "HTTP 503", At: tt1},
			with(pending(), func(d *Delivery) {
				d.CycleAttempts, d.LastStatus, d.Reason, d.NextAttemptAt, d.Updated, d.Attempts = 2, 503, "HTTP 503", tt2, tt1, attempts
			})},
		{"dead", pending(), AttemptRecord{Cycle: 1, Attempt: a2, State: StateDead, LastStatus: 404, Reason: "HTTP 404", At: tt2},
			with(pending(), func(d *Delivery) {
				d.State, d.CycleAttempts, d.LastStatus, d.Reason, d.NextAttemptAt, d.DeadAt, d.Updated, d.Attempts = StateDead, 2, 404, "HTTP 404", time.Time{}, tt2, tt2, attempts
			})},
		{"older cycle: logged only", with(pending(), func(d *Delivery) { d.Cycle = 2 }),
			AttemptRecord{Cycle: 1, Attempt: a2, State: StateSucceeded, LastStatus: 200, At: tt2},
			with(pending(), func(d *Delivery) { d.Cycle, d.Updated, d.Attempts = 2, tt2, attempts })},
		{"not pending: logged only", with(pending(), func(d *Delivery) { d.State = StateSucceeded }),
			AttemptRecord{Cycle: 1, Attempt: a2, State: StateDead, Reason: "late", At: tt2},
			with(pending(), func(d *Delivery) { d.State, d.Updated, d.Attempts = StateSucceeded, tt2, attempts })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.d
			got := RecordAttempt(tt.d, tt.rec)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("RecordAttempt =\n%+v\nwant\n%+v", got, tt.want)
			}
			if len(before.Attempts) != 1 || !reflect.DeepEqual(tt.d, before) {
				t.Error("RecordAttempt changed the delivery it was given")
			}
		})
	}
}

func TestHoldPauseReplayDrop(t *testing.T) {
	r := Replay{At: tt2, By: "admin"}
	tests := []struct {
		name string
		got  Delivery
		want Delivery
	}{
		{"hold", HoldDelivery(pending(), 1, tt2, "endpoint not verified", tt1),
			with(pending(), func(d *Delivery) { d.NextAttemptAt, d.Reason, d.Updated = tt2, "endpoint not verified", tt1 })},
		{"hold, moved on", HoldDelivery(pending(), 2, tt2, "x", tt1), pending()},
		{"pause", PauseDelivery(pending(), 1, tt1),
			with(pending(), func(d *Delivery) {
				d.State, d.NextAttemptAt, d.Reason, d.Updated = StatePaused, time.Time{}, ReasonPaused, tt1
			})},
		{"pause, not pending", PauseDelivery(with(pending(), func(d *Delivery) { d.State = StateDead }), 1, tt1),
			with(pending(), func(d *Delivery) { d.State = StateDead })},
		{"replay of a dead one", ReplayDelivery(with(pending(), func(d *Delivery) { d.State, d.DeadAt, d.NextAttemptAt = StateDead, tt1, time.Time{} }), r, ""),
			with(pending(), func(d *Delivery) {
				d.Cycle, d.State, d.CycleStart, d.CycleAttempts, d.NextAttemptAt, d.Updated = 2, StatePending, tt2, 0, tt2, tt2
				d.Replays = []Replay{{At: tt2, By: "admin", Cycle: 2}}
			})},
		{"drop held", DropHeldDelivery(PauseDelivery(pending(), 1, tt1), tt2),
			with(pending(), func(d *Delivery) {
				d.State, d.NextAttemptAt, d.Reason, d.DeadAt, d.Updated = StateDead, time.Time{}, ReasonHeldNotSent, tt2, tt2
			})},
		{"drop held, not paused", DropHeldDelivery(pending(), tt2), pending()},
		{"drop for a deleted endpoint", DropDeletedEndpointDelivery(PauseDelivery(pending(), 1, tt1), tt2),
			with(pending(), func(d *Delivery) {
				d.State, d.NextAttemptAt, d.Reason, d.DeadAt, d.Updated = StateDead, time.Time{}, ReasonEndpointDeleted, tt2, tt2
			})},
		{"drop for a deleted endpoint, not paused", DropDeletedEndpointDelivery(pending(), tt2), pending()},
		{"unpause", UnpauseDelivery(PauseDelivery(pending(), 1, tt1), pending(), PauseDelivery(pending(), 1, tt1), tt2),
			with(pending(), func(d *Delivery) { d.NextAttemptAt, d.Updated = tt2, tt2 })},
		{"unpause, resumed by the enabling first", UnpauseDelivery(ReplayDelivery(PauseDelivery(pending(), 1, tt1), r, ""), pending(), PauseDelivery(pending(), 1, tt1), tt2),
			ReplayDelivery(PauseDelivery(pending(), 1, tt1), r, "")},
		{"unpause, dropped by the enabling first", UnpauseDelivery(DropHeldDelivery(PauseDelivery(pending(), 1, tt1), tt2), pending(), PauseDelivery(pending(), 1, tt1), tt2),
			DropHeldDelivery(PauseDelivery(pending(), 1, tt1), tt2)},
		{"unpause, paused again later", UnpauseDelivery(PauseDelivery(pending(), 1, tt2), pending(), PauseDelivery(pending(), 1, tt1), tt2),
			PauseDelivery(pending(), 1, tt2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got\n%+v\nwant\n%+v", tt.got, tt.want)
			}
		})
	}
}

func TestNewDeliveries(t *testing.T) {
	ev := Event{ID: "evt_1", TenantID: "acme", Type: "order.created", Created: tt0}
	eps := []Endpoint{
		{ID: "ep_a", EventTypes: []string{"*"}},
		{ID: "ep_b", EventTypes: []string{"order.shipped"}},
		{ID: "ep_c", EventTypes: []string{"order.created"}, Disabled: true},
	}
	n := 0
	ids := func(string) string { n++; return []string{"dlv_2", "dlv_1"}[n-1] }
	got := NewDeliveries(ev, "", eps, ids)
	base := Delivery{TenantID: "acme", EventID: "evt_1", EventType: "order.created", Cycle: 1, CycleStart: tt0,
		Created: tt0, Updated: tt0, Attempts: []Attempt{}, Replays: []Replay{}}
	want := []Delivery{
		with(base, func(d *Delivery) { d.ID, d.EndpointID, d.State, d.Reason = "dlv_1", "ep_c", StatePaused, ReasonPaused }),
		with(base, func(d *Delivery) { d.ID, d.EndpointID, d.State, d.NextAttemptAt = "dlv_2", "ep_a", StatePending, tt0 }),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NewDeliveries =\n%+v\nwant (in ID order)\n%+v", got, want)
	}
	if got := NewDeliveries(ev, "", nil, NewID); len(got) != 0 || got == nil {
		t.Errorf("no endpoints: %#v, want an empty list", got)
	}
}

func TestMergeHealth(t *testing.T) {
	stored := Endpoint{ID: "ep_1", URL: "https://a.example/x", FailingSince: tt1, LastFailure: "HTTP 500", LastFailureAt: tt1}
	tests := []struct {
		name string
		seen Endpoint
		want Endpoint
	}{
		{"an earlier failure wins", Endpoint{FailingSince: tt0, LastFailure: "HTTP 502", LastFailureAt: tt0},
			with2(stored, func(e *Endpoint) { e.FailingSince = tt0 })},
		{"a later one is the last", Endpoint{FailingSince: tt2, LastFailure: "timeout", LastFailureAt: tt2},
			with2(stored, func(e *Endpoint) { e.LastFailure, e.LastFailureAt = "timeout", tt2 })},
		{"a success clears the run", Endpoint{}, with2(stored, func(e *Endpoint) { e.FailingSince = time.Time{} })},
		{"disabled", Endpoint{FailingSince: tt1, Disabled: true, DisabledReason: "410 Gone", DisabledAt: tt2},
			with2(stored, func(e *Endpoint) { e.Disabled, e.DisabledReason, e.DisabledAt = true, "410 Gone", tt2 })},
		{"settings are the stored ones", Endpoint{URL: "https://evil.example/", FailingSince: tt1}, stored},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MergeHealth(stored, tt.seen); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("MergeHealth =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func with2(e Endpoint, change func(*Endpoint)) Endpoint {
	change(&e)
	return e
}

func TestRetention_Prunable(t *testing.T) {
	r := Retention{SucceededBefore: tt1, DeadBefore: tt2}
	ev := Event{Created: tt0}
	ok := Delivery{State: StateSucceeded, Updated: tt0}
	dead := Delivery{State: StateDead, DeadAt: tt1} // before DeadBefore
	tests := []struct {
		name string
		ev   Event
		ds   []Delivery
		want bool
	}{
		{"no deliveries, old", ev, nil, true},
		{"no deliveries, new", Event{Created: tt1}, nil, false},
		{"all finished and old", ev, []Delivery{ok, dead}, true},
		{"one succeeded too recently", ev, []Delivery{ok, {State: StateSucceeded, Updated: tt1}}, false},
		{"one died too recently", ev, []Delivery{ok, {State: StateDead, DeadAt: tt2}}, false},
		{"one pending", ev, []Delivery{ok, {State: StatePending}}, false},
		{"one paused", ev, []Delivery{{State: StatePaused}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Prunable(tt.ev, tt.ds); got != tt.want {
				t.Errorf("Prunable = %v, want %v", got, tt.want)
			}
		})
	}
}
