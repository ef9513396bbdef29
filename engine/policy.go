package engine

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// RetryPolicy decides when a failed attempt is tried again, and which
// answers are worth trying again. The zero value is not useful;
// DefaultRetryPolicy returns the published schedule (the policy named
// StandardRetryPolicy), ExtendedRetryPolicy the built-in long one.
//
// A node knows several policies by name (DispatcherOptions.Policies); a
// delivery follows the one named when its cycle started
// (Delivery.RetryPolicy), so a change of a tenant's or an endpoint's
// choice applies to the cycles that start after it. A policy's
// definition is read from the node's configuration at each attempt.
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
	// RetryStatuses are HTTP statuses that classify would make a
	// permanent failure (3xx, and 4xx but 408, 425 and 429) and that this
	// policy retries by its Schedule instead (a receiver that answers 404
	// while it deploys). Nil: none, as the default. Each is from 300 to
	// 499 (ValidRetryStatus).
	RetryStatuses []int
}

// The names of the built-in policies.
const (
	// StandardRetryPolicy names the policy a tenant follows unless it
	// chooses another: DispatcherOptions.Policy, DefaultRetryPolicy unless
	// configured. A delivery stores it as "" (Delivery.RetryPolicy).
	StandardRetryPolicy = "standard"
	// ExtendedRetryPolicyName names ExtendedRetryPolicy, for receivers
	// that may be down for a night.
	ExtendedRetryPolicyName = "extended"
)

// MaxRetryPolicyName is the longest name of a retry policy.
const MaxRetryPolicyName = 32

// ValidRetryPolicyName reports whether name may name a retry policy: 1
// to MaxRetryPolicyName lowercase letters, digits, '_' and '-', starting
// with a letter.
func ValidRetryPolicyName(name string) bool {
	if len(name) == 0 || len(name) > MaxRetryPolicyName {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z':
		case i > 0 && ('0' <= c && c <= '9' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ValidRetryStatus reports why status cannot be one of a policy's
// RetryStatuses, or "" when it can: from 300 to 499, but 408, 425 and
// 429, which every policy retries.
func ValidRetryStatus(status int) string {
	switch {
	case status < 300 || status > 499:
		return "must be a 3xx or 4xx status (2xx is received; 5xx is always retried)"
	case status == 408 || status == 425 || status == 429:
		return "is retried by every policy; leave it out"
	}
	return ""
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

// ExtendedRetryPolicy returns the built-in policy named
// ExtendedRetryPolicyName, about Svix's schedule: an attempt at once,
// then retries after 5s, 5m, 30m, 2h, 5h, 10h and 10h, ±20% jitter: 8
// attempts, about 27.6 hours of waiting, inside a 28-hour deadline (the
// waits and 8 attempt timeouts with 25 minutes to spare), 10s per
// attempt and Retry-After honoured up to 10 minutes, as the default.
func ExtendedRetryPolicy() RetryPolicy {
	p := DefaultRetryPolicy()
	p.Schedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}
	p.Deadline = 28 * time.Hour
	return p
}

// MaxAttempts returns how many attempts a cycle gets at most.
func (p RetryPolicy) MaxAttempts() int { return len(p.Schedule) + 1 }

// Retries reports whether the policy retries status, which classify
// would otherwise make a permanent failure (RetryStatuses).
func (p RetryPolicy) Retries(status int) bool { return slices.Contains(p.RetryStatuses, status) }

// Summary describes p in a few words for a person choosing a policy:
// "6 attempts within 75 min", "8 attempts within 28 h", with ", retries
// 404, 409" when it retries statuses.
func (p RetryPolicy) Summary() string {
	noun := "attempts"
	if p.MaxAttempts() == 1 {
		noun = "attempt"
	}
	s := fmt.Sprintf("%d %s within %s", p.MaxAttempts(), noun, roughDuration(p.Deadline))
	for i, st := range p.RetryStatuses {
		if i == 0 {
			s += ", retries "
		} else {
			s += ", "
		}
		s += strconv.Itoa(st)
	}
	return s
}

// roughDuration is d in one unit, rounded, as a person reads it: "45 s",
// "75 min", "28 h".
func roughDuration(d time.Duration) string {
	switch {
	case d < 2*time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
	case d < 2*time.Hour:
		return strconv.FormatInt(int64((d+time.Minute/2)/time.Minute), 10) + " min"
	}
	return strconv.FormatInt(int64((d+time.Hour/2)/time.Hour), 10) + " h"
}

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
