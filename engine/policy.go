package engine

import (
	"fmt"
	"time"
)

// RetryPolicy decides when a failed attempt is tried again. The zero value
// is not useful; DefaultRetryPolicy returns the published schedule.
type RetryPolicy struct {
	// Schedule holds the waits between attempts: attempt n+1 comes
	// Schedule[n-1] after attempt n ends. A delivery gets len(Schedule)+1
	// attempts in all; an empty Schedule means one attempt only.
	Schedule []time.Duration
	// Jitter spreads each wait uniformly over ±Jitter of it (0.2: ±20%),
	// so endpoints that fail together are not retried together. In [0, 1).
	Jitter float64
	// Deadline bounds a delivery cycle: measured from the cycle's start
	// (ingest or replay), and every attempt's own time counts. No attempt
	// is scheduled to start later than Deadline - AttemptTimeout after the
	// start, so that it ends inside the deadline.
	Deadline time.Duration
	// AttemptTimeout bounds one attempt: connect, TLS, headers and body.
	AttemptTimeout time.Duration
	// RetryAfterMax caps a Retry-After header: a receiver cannot push its
	// next attempt further out than this.
	RetryAfterMax time.Duration
}

// DefaultRetryPolicy returns the published default: an attempt at once,
// then retries after 5s, 30s, 2m, 10m and 1h, ±20% jitter, a 75-minute
// deadline, 10s per attempt and Retry-After honoured up to 10 minutes.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		Schedule:       []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, time.Hour},
		Jitter:         0.2,
		Deadline:       75 * time.Minute,
		AttemptTimeout: 10 * time.Second,
		RetryAfterMax:  10 * time.Minute,
	}
}

// MaxAttempts returns how many attempts a cycle gets at most.
func (p RetryPolicy) MaxAttempts() int { return len(p.Schedule) + 1 }

// Next decides what follows the failed attempt number n (1-based within
// its cycle) that ended at now, in a cycle that started at start.
// retryAfter is the receiver's Retry-After (0 when none); random returns a
// number in [0, 1) for the jitter. It returns the time the next attempt is
// due, or a zero time and the reason the delivery is dead.
//
// The wait is Schedule[n-1] with jitter, at least retryAfter (capped at
// RetryAfterMax). A jittered wait that would start the attempt past the
// deadline's last start (start + Deadline - AttemptTimeout) is shortened to
// that last start; a Retry-After that forbids any start before it is
// honoured instead, and the delivery is dead.
func (p RetryPolicy) Next(n int, start, now time.Time, retryAfter time.Duration, random func() float64) (time.Time, string) {
	if n > len(p.Schedule) {
		return time.Time{}, fmt.Sprintf("all %d attempts failed", p.MaxAttempts())
	}
	wait := p.Schedule[n-1]
	if p.Jitter > 0 {
		wait = time.Duration(float64(wait) * (1 + p.Jitter*(2*random()-1)))
	}
	if retryAfter > p.RetryAfterMax {
		retryAfter = p.RetryAfterMax
	}
	honourRetryAfter := retryAfter > wait
	if honourRetryAfter {
		wait = retryAfter
	}
	due := now.Add(wait)
	last := start.Add(p.Deadline - p.AttemptTimeout)
	if due.After(last) {
		if honourRetryAfter || !last.After(now) {
			return time.Time{}, fmt.Sprintf("deadline reached: no attempt can start within %s of the first", p.Deadline)
		}
		due = last
	}
	return due, ""
}
