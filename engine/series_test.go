package engine_test

import (
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

func TestAttemptSeries(t *testing.T) {
	from := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	at := func(h, m int) time.Time { return from.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
	attempt := func(start time.Time, ms int, ok bool) engine.Attempt {
		out := engine.OutcomeRetry
		if ok {
			out = engine.OutcomeSuccess
		}
		return engine.Attempt{Start: start, Duration: time.Duration(ms) * time.Millisecond, Outcome: out}
	}
	var slow []engine.Attempt
	for i := range 100 {
		slow = append(slow, attempt(at(2, i%60), i+1, i%4 != 0)) // 1…100 ms, three in four succeed
	}
	ds := []engine.Delivery{
		{EndpointID: "ep_a", Attempts: []engine.Attempt{attempt(at(0, 5), 10, false), attempt(at(0, 50), 30, true), attempt(from.Add(-time.Minute), 1, true)}},
		{EndpointID: "ep_b", Attempts: slow},
		{EndpointID: "ep_a", Attempts: []engine.Attempt{attempt(at(24, 0), 5, true)}}, // past the range
	}
	ps := engine.AttemptSeries(ds, from, time.Hour, 24, "")
	if len(ps) != 24 || !ps[0].Start.Equal(from) || !ps[23].Start.Equal(at(23, 0)) {
		t.Fatalf("%d points from %s to %s", len(ps), ps[0].Start, ps[len(ps)-1].Start)
	}
	if p := ps[0]; p.Attempts != 2 || p.Successes != 1 || p.P50 != 10*time.Millisecond || p.P99 != 30*time.Millisecond || p.SuccessRate() != 0.5 {
		t.Errorf("hour 0: %+v", p)
	}
	if p := ps[2]; p.Attempts != 100 || p.Successes != 75 || p.P50 != 50*time.Millisecond || p.P99 != 99*time.Millisecond {
		t.Errorf("hour 2: %+v", p)
	}
	if p := ps[1]; p.Attempts != 0 || p.P99 != 0 || p.SuccessRate() != 0 {
		t.Errorf("hour 1, no attempt: %+v", p)
	}
	if a := engine.AttemptSeries(ds, from, time.Hour, 24, "ep_a"); a[0].Attempts != 2 || a[2].Attempts != 0 {
		t.Errorf("ep_a alone: hour 0 %+v, hour 2 %+v", a[0], a[2])
	}
}
