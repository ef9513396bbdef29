package engine

import (
	"encoding/json"
	"testing"
)

// reportBuckets are the report's JSON fields that partition its
// deliveries: each delivery is in exactly one.
var reportBuckets = []string{"first_attempt_successes", "retry_successes", "replayed", "pending", "waiting", "paused", "dead"}

// TestNewReport_EveryDeliveryInOneBucket: with deliveries in every
// state, and replays before and after a success, each delivery is in
// exactly one bucket, the buckets sum to deliveries, and the report's
// check says so.
func TestNewReport_EveryDeliveryInOneBucket(t *testing.T) {
	ok := func(cycle, n int) Attempt {
		return Attempt{Cycle: cycle, Number: n, Start: tt1, Status: 200, Outcome: OutcomeSuccess}
	}
	succeed := func(d Delivery) Delivery {
		return RecordAttempt(d, AttemptRecord{Cycle: d.Cycle, Attempt: ok(d.Cycle, d.CycleAttempts+1), State: StateSucceeded, LastStatus: 200, At: tt1})
	}
	die := func(d Delivery) Delivery {
		return RecordAttempt(d, AttemptRecord{Cycle: d.Cycle, Attempt: Attempt{Cycle: d.Cycle, Number: d.CycleAttempts + 1, Start: tt1, Status: 400, Outcome: OutcomePermanent}, State: StateDead, Reason: "HTTP 400", At: tt1})
	}
	replay := func(d Delivery) Delivery { return ReplayDelivery(d, Replay{At: tt2, By: "admin"}, "") }
	fresh := pending()
	fresh.Attempts, fresh.CycleAttempts = []Attempt{}, 0
	firstTry := succeed(fresh)
	waiting := ordered()
	waiting.State, waiting.Attempts, waiting.CycleAttempts = StateWaiting, []Attempt{}, 0
	delivering := pending()
	delivering.State = StateDelivering

	tests := []struct {
		name   string
		d      Delivery
		bucket string
	}{
		{"succeeded at the first attempt", firstTry, "first_attempt_successes"},
		{"succeeded after a retry", succeed(pending()), "retry_successes"},
		{"delivered, then replayed and pending again", replay(firstTry), "first_attempt_successes"},
		{"delivered, then replayed and delivered again", succeed(replay(succeed(pending()))), "retry_successes"},
		{"dead, replayed, delivered", succeed(replay(die(pending()))), "replayed"},
		{"paused, resumed, delivered", succeed(replay(PauseDelivery(pending(), 1, tt1))), "replayed"},
		{"pending", pending(), "pending"},
		{"in flight", delivering, "pending"},
		{"dead, replayed, pending", replay(die(pending())), "pending"},
		{"waiting in its line", waiting, "waiting"},
		{"paused", PauseDelivery(pending(), 1, tt1), "paused"},
		{"dead", die(pending()), "dead"},
		{"dead, replayed, dead", die(replay(die(pending()))), "dead"},
		{"dead and blocking its line", die(ordered()), "dead"},
	}
	var all []Delivery
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reportCounts(t, NewReport([]EventDeliveries{{Deliveries: []Delivery{tt.d}}}))
			for _, b := range reportBuckets {
				want := 0
				if b == tt.bucket {
					want = 1
				}
				if got[b] != want {
					t.Errorf("%s = %d, want %d (buckets %v)", b, got[b], want, got)
				}
			}
		})
		all = append(all, tt.d)
	}

	r := NewReport([]EventDeliveries{{Deliveries: all[:7]}, {Deliveries: all[7:]}})
	got := reportCounts(t, r)
	sum := 0
	for _, b := range reportBuckets {
		sum += got[b]
	}
	if sum != r.Deliveries || r.Deliveries != len(all) {
		t.Errorf("buckets %v sum to %d, deliveries %d, want %d", got, sum, r.Deliveries, len(all))
	}
	counted := false
	for _, c := range r.Checks {
		if c.Name == "every delivery is counted once" {
			counted = c.OK
		}
	}
	if !counted {
		t.Errorf("checks %+v: want every delivery counted once, ok", r.Checks)
	}
	if r.Dead != 3 || r.Blocking != 1 || r.DeadByReason["HTTP 400"] != 3 {
		t.Errorf("dead %d, blocking %d, by reason %v; want 3, 1, 3 of HTTP 400", r.Dead, r.Blocking, r.DeadByReason)
	}
}

// reportCounts returns r's buckets as its JSON has them.
func reportCounts(t *testing.T, r Report) map[string]int {
	t.Helper()
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, b := range reportBuckets {
		if v, ok := m[b].(float64); ok {
			out[b] = int(v)
		}
	}
	return out
}
