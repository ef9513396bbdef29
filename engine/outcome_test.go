package engine

import (
	"reflect"
	"testing"
	"time"
)

// TestVersionOf holds every transition to DeliveryVersion's contract:
// one that changes a delivery changes its version.
func TestVersionOf(t *testing.T) {
	ordered := func(d Delivery) Delivery { d.Line = LineEndpoint; return d }
	dead := with(ordered(pending()), func(d *Delivery) {
		d.State, d.NextAttemptAt, d.DeadAt, d.Updated = StateDead, time.Time{}, tt1, tt1
	})
	waiting := with(ordered(pending()), func(d *Delivery) {
		d.State, d.NextAttemptAt, d.WaitingBehind = StateWaiting, time.Time{}, "dlv_0"
	})
	retry := AttemptRecord{Cycle: 1, Attempt: Attempt{Cycle: 1, Number: 2, Start: tt1}, State: StatePending, NextAttemptAt: tt2, At: tt1}
	late := AttemptRecord{Cycle: 1, Attempt: Attempt{Cycle: 1, Number: 2, Start: tt1}, State: StateSucceeded, At: tt0}
	settled := func(before, after Delivery, head string, onDead OnDead) Delivery {
		d, _ := SettleLine(before, after, LineView{Head: head, OnDead: onDead})
		return d
	}
	skipped, err := SkipDelivery(dead, Skip{At: tt0, By: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		before, after Delivery
	}{
		{"an attempt", pending(), RecordAttempt(pending(), retry)},
		{"an attempt of an older cycle, at the same time", with(pending(), func(d *Delivery) { d.Cycle = 2 }),
			RecordAttempt(with(pending(), func(d *Delivery) { d.Cycle = 2 }), late)},
		{"a hold", pending(), HoldDelivery(pending(), 1, tt2, "endpoint not verified", tt1)},
		{"a pause", pending(), PauseDelivery(pending(), 1, tt1)},
		{"a replay", dead, ReplayDelivery(dead, Replay{At: tt2, By: "admin"}, "")},
		{"a drop of a held one", PauseDelivery(pending(), 1, tt1), DropHeldDelivery(PauseDelivery(pending(), 1, tt1), tt2)},
		{"a drop for a deleted endpoint", PauseDelivery(pending(), 1, tt1), DropDeletedEndpointDelivery(PauseDelivery(pending(), 1, tt1), tt2)},
		{"a promotion", waiting, PromoteDelivery(waiting, tt2)},
		{"a skip", dead, skipped},
		{"a replay that enters its line", dead, settled(dead, ReplayDelivery(dead, Replay{At: tt2}, ""), "dlv_0", OnDeadSkip)},
		{"a death skipped by on_dead", ordered(pending()),
			settled(ordered(pending()), RecordAttempt(ordered(pending()), AttemptRecord{Cycle: 1, State: StateDead, At: tt1}), "dlv_1", OnDeadSkip)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, after := tt.before, tt.after
			before.WaitingBehind, after.WaitingBehind = "", "" // what a store fills in as it reads
			if reflect.DeepEqual(before, after) {
				t.Fatal("the transition changed nothing: not a case of this test")
			}
			if VersionOf(tt.before) == VersionOf(tt.after) {
				t.Errorf("the transition kept the version %+v", VersionOf(tt.before))
			}
		})
	}

	t.Run("times are instants", func(t *testing.T) {
		d := pending()
		local := with(d, func(d *Delivery) {
			d.Updated, d.NextAttemptAt = d.Updated.In(time.FixedZone("X", 3600)), d.NextAttemptAt.Add(time.Hour).Add(-time.Hour).Local()
		})
		if VersionOf(d) != VersionOf(local) {
			t.Errorf("versions differ by location: %+v, %+v", VersionOf(d), VersionOf(local))
		}
		if VersionOf(with(d, func(d *Delivery) { d.WaitingBehind = "dlv_0" })) != VersionOf(d) {
			t.Error("WaitingBehind, which a store fills in as it reads, counts in the version")
		}
	})
}

func TestNewOutcomeUpdate(t *testing.T) {
	health := &Endpoint{ID: "ep_1", FailingSince: tt1}
	rec := AttemptRecord{Cycle: 1, Attempt: Attempt{Cycle: 1, Number: 2, Start: tt1}, State: StateSucceeded, At: tt2, Endpoint: health}
	got := NewOutcomeUpdate(pending(), rec)
	if want := RecordAttempt(pending(), rec); !reflect.DeepEqual(got.Delivery, want) {
		t.Errorf("Delivery =\n%+v\nwant\n%+v", got.Delivery, want)
	}
	if got.Read != VersionOf(pending()) || got.Endpoint != health {
		t.Errorf("Read %+v, Endpoint %p; want the version read and the record's health %p", got.Read, got.Endpoint, health)
	}
}
