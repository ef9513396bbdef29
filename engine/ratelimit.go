package engine

import "math"

// RateLimit is an endpoint's own bound on how fast its attempts start, in
// the whole cluster: a token bucket that lets PerSecond attempts a second
// through on average, and up to Burst at once after a quiet time. The zero
// value is no limit of the endpoint's own.
//
// It holds within [delivery] endpoint_rate (DispatcherOptions.EndpointRate),
// the bound of every endpoint, as a ceiling: an endpoint whose limit is
// above it (or whose burst is above the global burst) is held to the global
// bound, not refused (EffectiveRateLimit). The Dispatcher reads the limit
// from the endpoint record it reads for each attempt, so a change applies
// from the endpoint's next attempt on.
type RateLimit struct {
	PerSecond float64 `json:"per_second"`
	// Burst is how many attempts may start at once. Every RateLimit the
	// Service stores has one (1..MaxRateLimitBurst); zero, in a record
	// written otherwise, means the default, max(1, floor(PerSecond)).
	Burst int `json:"burst"`
}

// Bounds of a RateLimit: attempts per second, and the burst.
const (
	// MinRateLimitPerSecond is one attempt per 100 seconds: slower, an
	// endpoint's backlog would wait for longer than the retry window.
	MinRateLimitPerSecond = 0.01
	MaxRateLimitPerSecond = 10_000
	MaxRateLimitBurst     = 10_000
)

// IsZero reports whether rl is no limit.
func (rl RateLimit) IsZero() bool { return rl == RateLimit{} }

// burst is rl's burst, its default when it has none.
func (rl RateLimit) burst() int {
	if rl.Burst > 0 {
		return rl.Burst
	}
	return defaultBurst(rl.PerSecond)
}

// defaultBurst is the burst of a rate that names none: the attempts of
// one second, at least one.
func defaultBurst(perSecond float64) int {
	return max(1, int(min(perSecond, MaxRateLimitBurst)))
}

// RateLimitInput is rate_limit as create and update take it: per_second
// (required) and burst (absent: the default, max(1, floor(per_second))).
type RateLimitInput struct {
	PerSecond float64 `json:"per_second"`
	Burst     *int    `json:"burst"`
}

// RateLimitPatch is rate_limit in an update: absent (Set false, Limit
// nil) leaves the endpoint's limit as it is, null (Set, Limit nil)
// removes it, an object (Limit) sets it. httpapi's decoder knows this
// type and decodes it so: a plain Go field cannot tell absent from null.
type RateLimitPatch struct {
	Set   bool
	Limit *RateLimitInput
}

// RateLimit validates in and returns the limit it asks for, its burst
// filled in. Its errors are CodeInvalidField naming rate_limit.per_second
// or rate_limit.burst.
func (in RateLimitInput) RateLimit() (RateLimit, error) {
	r := in.PerSecond
	if !(r >= MinRateLimitPerSecond && r <= MaxRateLimitPerSecond) || math.IsInf(r, 0) {
		return RateLimit{}, Errorf(CodeInvalidField, "rate_limit.per_second",
			"rate_limit.per_second must be a number of attempts per second from %g (one per 100 seconds) to %d; to remove the limit, send rate_limit null",
			MinRateLimitPerSecond, MaxRateLimitPerSecond)
	}
	rl := RateLimit{PerSecond: r, Burst: defaultBurst(r)}
	if in.Burst != nil {
		if b := *in.Burst; b < 1 || b > MaxRateLimitBurst {
			return RateLimit{}, Errorf(CodeInvalidField, "rate_limit.burst",
				"rate_limit.burst must be a whole number of attempts from 1 to %d (absent: max(1, floor(per_second)))", MaxRateLimitBurst)
		}
		rl.Burst = *in.Burst
	}
	return rl, nil
}

// CheckStoredRateLimit reports what is wrong with rl as an endpoint's
// stored rate limit, as RateLimitInput.RateLimit would (CodeInvalidField
// naming rate_limit.per_second or rate_limit.burst): the zero RateLimit
// (none) is fine, and so is a Burst of 0 (the default). The integrity
// check and the migration to PostgreSQL hold stored endpoints to it.
func CheckStoredRateLimit(rl RateLimit) error {
	if rl.IsZero() {
		return nil
	}
	in := RateLimitInput{PerSecond: rl.PerSecond}
	if rl.Burst != 0 {
		in.Burst = &rl.Burst
	}
	_, err := in.RateLimit()
	return err
}

// EffectiveRateLimit returns the bound an endpoint whose own limit is own
// is held to in the whole cluster, where every endpoint is held to global
// attempts per second (0: no global bound) with a burst of max(1,
// floor(global)): own within global, each of rate and burst the lower
// one. The zero RateLimit is no bound at all.
func EffectiveRateLimit(global float64, own RateLimit) RateLimit {
	if global <= 0 {
		if own.IsZero() {
			return RateLimit{}
		}
		return RateLimit{PerSecond: own.PerSecond, Burst: own.burst()}
	}
	g := RateLimit{PerSecond: global, Burst: max(1, int(global))}
	if own.IsZero() {
		return g
	}
	return RateLimit{PerSecond: min(own.PerSecond, g.PerSecond), Burst: min(own.burst(), g.Burst)}
}
