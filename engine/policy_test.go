package engine

import (
	"net/http"
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

// TestExtendedRetryPolicy_PublishedSchedule walks the built-in extended
// policy as TestRetryPolicy_PublishedSchedule walks the default: at
// once, then 5s, 5m, 30m, 2h, 5h, 10h and 10h, the last inside the
// 28-hour deadline.
func TestExtendedRetryPolicy_PublishedSchedule(t *testing.T) {
	p := ExtendedRetryPolicy()
	mid := func() float64 { return 0.5 }
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	waits := []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}
	now, since := start, time.Duration(0)
	for n := 1; n <= len(waits); n++ {
		due, dead := p.Next(n, start, now, 0, mid)
		if dead != "" {
			t.Fatalf("after attempt %d: dead %q", n, dead)
		}
		if got := due.Sub(now); got != waits[n-1] {
			t.Fatalf("wait after attempt %d = %s, want %s", n, got, waits[n-1])
		}
		now, since = due, since+waits[n-1]
	}
	if since != 27*time.Hour+35*time.Minute+5*time.Second || since+8*p.AttemptTimeout >= p.Deadline {
		t.Errorf("the last attempt starts %s after the first; with 8 attempt timeouts it must end inside the %s deadline", since, p.Deadline)
	}
	if _, dead := p.Next(8, start, now, 0, mid); !strings.Contains(dead, "all 8 attempts failed") {
		t.Errorf("after attempt 8: %q, want all 8 attempts failed", dead)
	}
	if got, want := p.Summary(), "8 attempts within 28 h"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	if got, want := DefaultRetryPolicy().Summary(), "6 attempts within 75 min"; got != want {
		t.Errorf("default Summary = %q, want %q", got, want)
	}
	one := RetryPolicy{Deadline: 30 * time.Second, RetryStatuses: []int{404, 409}}
	if got, want := one.Summary(), "1 attempt within 30 s, retries 404, 409"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
}

func TestValidRetryPolicyName(t *testing.T) {
	for name, want := range map[string]bool{
		"standard": true, "extended": true, "nightly-long": true, "a": true, "p2_x": true,
		strings.Repeat("a", MaxRetryPolicyName): true, strings.Repeat("a", MaxRetryPolicyName+1): false,
		"": false, "Extended": false, "2nd": false, "-x": false, "a b": false, "a.b": false, "é": false,
	} {
		if got := ValidRetryPolicyName(name); got != want {
			t.Errorf("ValidRetryPolicyName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestValidRetryStatus(t *testing.T) {
	for status, ok := range map[int]bool{300: true, 302: true, 400: true, 404: true, 409: true, 410: true, 499: true,
		200: false, 299: false, 408: false, 425: false, 429: false, 500: false, 503: false, 0: false, 600: false} {
		if got := ValidRetryStatus(status) == ""; got != ok {
			t.Errorf("ValidRetryStatus(%d) = %q, want ok %v", status, ValidRetryStatus(status), ok)
		}
	}
}

// TestClassify_policy: a policy's RetryStatuses turn those permanent
// failures into retries and nothing else; a receiver's abort makes any
// failed response permanent, with its own reason; a 2xx is a success
// whatever it says.
func TestClassify_policy(t *testing.T) {
	retry := []int{404, 409, 302}
	tests := []struct {
		status     int
		abort      bool
		want       Outcome
		wantReason string
	}{
		{404, false, OutcomeRetry, "HTTP 404 Not Found"},
		{409, false, OutcomeRetry, "HTTP 409 Conflict"},
		{302, false, OutcomeRetry, "HTTP 302 Found"},
		{400, false, OutcomePermanent, "permanent failure"},
		{301, false, OutcomePermanent, "redirects are not followed"},
		{503, false, OutcomeRetry, "HTTP 503"},
		{404, true, OutcomePermanent, "HTTP 404 Not Found: the receiver asked to stop retrying (webhook-delivery: abort)"},
		{503, true, OutcomePermanent, "HTTP 503 Service Unavailable: the receiver asked to stop retrying (webhook-delivery: abort)"},
		{429, true, OutcomePermanent, "the receiver asked to stop retrying"},
		{200, true, OutcomeSuccess, ""},
	}
	for _, tt := range tests {
		got, reason := classify(tt.status, nil, time.Second, tt.abort, retry)
		if got != tt.want || !strings.Contains(reason, tt.wantReason) || (tt.wantReason == "" && reason != "") {
			t.Errorf("classify(%d, abort %v) = %s %q, want %s %q", tt.status, tt.abort, got, reason, tt.want, tt.wantReason)
		}
	}
	// Without the policy's statuses, as before.
	if got, _ := classify(404, nil, time.Second, false, nil); got != OutcomePermanent {
		t.Errorf("classify(404) without RetryStatuses = %s, want permanent", got)
	}
}

func TestReceiverAborts(t *testing.T) {
	tests := []struct {
		values []string
		want   bool
	}{
		{nil, false},
		{[]string{"abort"}, true},
		{[]string{"ABORT"}, true},
		{[]string{" Abort "}, true},
		{[]string{"retry, abort"}, true},
		{[]string{"later", "abort"}, true},
		{[]string{"aborted"}, false},
		{[]string{"no-abort"}, false},
		{[]string{""}, false},
		{[]string{"abort-message"}, true}, // Svix's name
		{[]string{"Abort-Message, later"}, true},
		{[]string{"disable"}, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		for _, v := range tt.values {
			h.Add("Webhook-Delivery", v)
		}
		if got := receiverAborts(h); got != tt.want {
			t.Errorf("receiverAborts(%q) = %v, want %v", tt.values, got, tt.want)
		}
	}
}
