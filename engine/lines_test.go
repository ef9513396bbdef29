package engine

import (
	"reflect"
	"testing"
	"time"
)

func TestLineOf(t *testing.T) {
	keyed, plain := Event{OrderingKey: "order-1"}, Event{}
	tests := []struct {
		ordering Ordering
		ev       Event
		want     string
	}{
		{OrderingNone, keyed, ""},
		{OrderingKey, keyed, "key:order-1"},
		{OrderingKey, plain, ""},
		{OrderingEndpoint, keyed, "endpoint"},
		{OrderingEndpoint, plain, "endpoint"},
	}
	for _, tt := range tests {
		if got := LineOf(tt.ev, Endpoint{Ordering: tt.ordering}); got != tt.want {
			t.Errorf("LineOf(key %q, ordering %q) = %q, want %q", tt.ev.OrderingKey, tt.ordering, got, tt.want)
		}
	}
}

// ordered is pending() in line "endpoint" with sequence 7.
func ordered() Delivery {
	d := pending()
	d.Line, d.Sequence = LineEndpoint, 7
	return d
}

func TestSettleLine(t *testing.T) {
	dead := RecordAttempt(ordered(), AttemptRecord{Cycle: 1, State: StateDead, Reason: "HTTP 410", At: tt2})
	succeeded := RecordAttempt(ordered(), AttemptRecord{Cycle: 1, State: StateSucceeded, At: tt2})
	retried := RecordAttempt(ordered(), AttemptRecord{Cycle: 1, State: StatePending, NextAttemptAt: tt2, At: tt1})
	paused := PauseDelivery(ordered(), 1, tt1)
	skipped := dead
	skipped.Skips = []Skip{{At: tt2, By: SkipByOnDead, Cycle: 1}}
	waiting := func(d Delivery, behind string) Delivery {
		d.State, d.NextAttemptAt, d.WaitingBehind = StateWaiting, time.Time{}, behind
		return d
	}
	mine := LineView{Head: "dlv_1", OnDead: OnDeadSkip}
	other := LineView{Head: "dlv_0", OnDead: OnDeadSkip}
	unordered := pending()
	tests := []struct {
		name          string
		before, after Delivery
		line          LineView
		want          Delivery
		advance       bool
	}{
		{"unordered: as it is", Delivery{}, unordered, other, unordered, false},
		{"new into an empty line: the head", Delivery{}, ordered(), LineView{}, ordered(), false},
		{"new behind a head: waits", Delivery{}, ordered(), other, waiting(ordered(), "dlv_0"), false},
		{"new paused behind a head: waits, no paused reason", Delivery{}, paused, other, func() Delivery {
			d := waiting(paused, "dlv_0")
			d.Reason = ""
			return d
		}(), false},
		{"head retried: stays", ordered(), retried, mine, retried, false},
		{"head paused: stays", ordered(), paused, mine, paused, false},
		{"head succeeded: advances", ordered(), succeeded, mine, succeeded, true},
		{"head dead, skip: skipped, advances", ordered(), dead, mine, skipped, true},
		{"head dead, block: blocks", ordered(), dead, LineView{Head: "dlv_1", OnDead: OnDeadBlock}, dead, false},
		{"head dead, dropped: advances whatever on_dead", ordered(), skipped, LineView{Head: "dlv_1", OnDead: OnDeadBlock}, skipped, true},
		{"blocking head skipped: advances", dead, skipped, LineView{Head: "dlv_1", OnDead: OnDeadBlock}, skipped, true},
		{"blocking head, dead to dead: nothing", dead, dead, LineView{Head: "dlv_1", OnDead: OnDeadSkip}, dead, false},
		{"blocking head replayed: stays", dead, ReplayDelivery(dead, Replay{At: tt2}, ""), mine, ReplayDelivery(dead, Replay{At: tt2}, ""), false},
		{"replayed behind another head: waits", succeeded, ReplayDelivery(succeeded, Replay{At: tt2}, ""), other,
			waiting(ReplayDelivery(succeeded, Replay{At: tt2}, ""), "dlv_0"), false},
		{"waiting stays waiting, behind the head", waiting(ordered(), "dlv_x"), waiting(ordered(), "dlv_x"), other, waiting(ordered(), "dlv_0"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, advance := SettleLine(tt.before, tt.after, tt.line)
			if !reflect.DeepEqual(got, tt.want) || advance != tt.advance {
				t.Errorf("SettleLine =\n%+v, %v\nwant\n%+v, %v", got, advance, tt.want, tt.advance)
			}
			if err := CheckStorable(got); err != nil {
				t.Errorf("result not storable: %v", err)
			}
		})
	}
}

func TestPromoteDelivery(t *testing.T) {
	d := ordered()
	d.State, d.NextAttemptAt, d.WaitingBehind, d.Reason = StateWaiting, time.Time{}, "dlv_0", "old"
	got := PromoteDelivery(d, tt2)
	want := d
	want.State, want.NextAttemptAt, want.CycleStart, want.Updated, want.WaitingBehind, want.Reason = StatePending, tt2, tt2, tt2, "", ""
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PromoteDelivery =\n%+v\nwant\n%+v", got, want)
	}
	if p := ordered(); !reflect.DeepEqual(PromoteDelivery(p, tt2), p) {
		t.Error("PromoteDelivery changed a delivery that is not waiting")
	}
}

func TestSkipDelivery(t *testing.T) {
	dead := RecordAttempt(ordered(), AttemptRecord{Cycle: 1, State: StateDead, At: tt1})
	got, err := SkipDelivery(dead, Skip{At: tt2, By: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Blocking() || !reflect.DeepEqual(got.Skips, []Skip{{At: tt2, By: "admin", Cycle: 1}}) || !got.Updated.Equal(tt2) {
		t.Errorf("skipped = blocking %v, skips %+v, updated %v", got.Blocking(), got.Skips, got.Updated)
	}
	for name, d := range map[string]Delivery{"skipped already": got, "pending": ordered(), "unordered dead": RecordAttempt(pending(), AttemptRecord{Cycle: 1, State: StateDead, At: tt1})} {
		if _, err := SkipDelivery(d, Skip{At: tt2}); ErrorCode(err) != CodeNotBlocking {
			t.Errorf("%s: SkipDelivery error %v, want %s", name, err, CodeNotBlocking)
		}
	}
	// A replay starts a cycle that blocks again.
	again := RecordAttempt(ReplayDelivery(got, Replay{At: tt2}, ""), AttemptRecord{Cycle: 2, State: StateDead, At: tt2})
	if !again.Blocking() {
		t.Error("a skip of cycle 1 still counts in cycle 2")
	}
}

func TestCompareLineOrder(t *testing.T) {
	a, b, c := Delivery{ID: "b", Sequence: 1}, Delivery{ID: "a", Sequence: 2}, Delivery{ID: "b", Sequence: 2}
	if CompareLineOrder(a, b) >= 0 || CompareLineOrder(b, c) >= 0 || CompareLineOrder(c, c) != 0 {
		t.Error("CompareLineOrder is not by Sequence, then ID")
	}
}

func TestNewReport_Lines(t *testing.T) {
	dead := RecordAttempt(ordered(), AttemptRecord{Cycle: 1, State: StateDead, Reason: "HTTP 400", At: tt1})
	skipped, _ := SkipDelivery(dead, Skip{At: tt2, By: "admin"})
	waiting := ordered()
	waiting.State, waiting.NextAttemptAt = StateWaiting, time.Time{}
	unorderedDead := RecordAttempt(pending(), AttemptRecord{Cycle: 1, State: StateDead, Reason: "HTTP 400", At: tt1})
	r := NewReport([]EventDeliveries{{Deliveries: []Delivery{dead, skipped, waiting, unorderedDead}}})
	if r.Waiting != 1 || r.Blocking != 1 || r.Skipped != 1 || r.Dead != 3 || r.Pending != 0 {
		t.Errorf("report: waiting %d, blocking %d, skipped %d, dead %d, pending %d; want 1, 1, 1, 3, 0", r.Waiting, r.Blocking, r.Skipped, r.Dead, r.Pending)
	}
}
