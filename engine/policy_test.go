package engine

import (
	"strings"
	"testing"
	"time"
)

// TestRetryPolicy_PublishedSchedule walks the default policy through a
// delivery whose attempts all fail instantly, with the jitter source at its
// midpoint (no jitter), and checks the schedule the README publishes.
func TestRetryPolicy_PublishedSchedule(t *testing.T) {
	p := DefaultRetryPolicy()
	mid := func() float64 { return 0.5 }
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	want := []time.Duration{0, 5 * time.Second, 35 * time.Second, 2*time.Minute + 35*time.Second,
		12*time.Minute + 35*time.Second, 72*time.Minute + 35*time.Second}
	now := start
	for n := 1; n <= len(want); n++ {
		if got := now.Sub(start); got != want[n-1] {
			t.Fatalf("attempt %d at %s, want %s", n, got, want[n-1])
		}
		due, dead := p.Next(n, start, now, 0, mid)
		if n == len(want) {
			if dead == "" || !strings.Contains(dead, "all 6 attempts") {
				t.Fatalf("after attempt %d: got due %v dead %q, want dead", n, due, dead)
			}
			break
		}
		if dead != "" {
			t.Fatalf("after attempt %d: dead %q", n, dead)
		}
		now = due
	}
	if got := p.MaxAttempts(); got != 6 {
		t.Errorf("MaxAttempts = %d, want 6", got)
	}
	// The waits add up to about 72.6 minutes, inside the 75-minute deadline.
	var total time.Duration
	for _, w := range p.Schedule {
		total += w
	}
	if total != 72*time.Minute+35*time.Second || total >= p.Deadline {
		t.Errorf("total wait %s, deadline %s", total, p.Deadline)
	}
}

func TestRetryPolicy_Next(t *testing.T) {
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	p := DefaultRetryPolicy()
	tests := []struct {
		name       string
		n          int
		now        time.Duration // since start
		retryAfter time.Duration
		random     float64
		wantWait   time.Duration // from now; ignored when wantDead
		wantDead   string
	}{
		{"first retry, low jitter", 1, 0, 0, 0, 4 * time.Second, ""},
		{"first retry, high jitter", 1, 0, 0, 0.999999, 5999998 * time.Microsecond, ""},
		{"retry-after longer than the wait wins", 1, 0, 90 * time.Second, 0.5, 90 * time.Second, ""},
		{"retry-after shorter than the wait is a floor only", 2, 0, 2 * time.Second, 0.5, 30 * time.Second, ""},
		{"retry-after is capped", 1, 0, 5 * time.Hour, 0.5, 10 * time.Minute, ""},
		{"last retry cut to the deadline's last start", 5, 12 * time.Minute, 0, 0.999, 74*time.Minute + 50*time.Second - 12*time.Minute, ""},
		{"no room before the deadline", 3, 74*time.Minute + 55*time.Second, 0, 0.5, 0, "deadline reached"},
		{"retry-after past the deadline is honoured: dead", 2, 70 * time.Minute, 9 * time.Minute, 0.5, 0, "deadline reached"},
		{"out of attempts", 6, 73 * time.Minute, 0, 0.5, 0, "all 6 attempts failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := start.Add(tt.now)
			due, dead := p.Next(tt.n, start, now, tt.retryAfter, func() float64 { return tt.random })
			if tt.wantDead != "" {
				if !strings.Contains(dead, tt.wantDead) || !due.IsZero() {
					t.Fatalf("got due %v dead %q, want dead %q", due, dead, tt.wantDead)
				}
				return
			}
			if dead != "" {
				t.Fatalf("dead %q, want a retry", dead)
			}
			if got := due.Sub(now); got != tt.wantWait {
				t.Errorf("wait %s, want %s", got, tt.wantWait)
			}
		})
	}
}

func TestRetryPolicy_EmptySchedule(t *testing.T) {
	p := RetryPolicy{Deadline: time.Minute, AttemptTimeout: time.Second}
	now := time.Now()
	if _, dead := p.Next(1, now, now, 0, func() float64 { return 0 }); dead == "" {
		t.Fatal("an empty schedule allows one attempt only")
	}
}
