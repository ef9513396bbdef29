package engine_test

import (
	"math"
	"testing"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
)

func intp(n int) *int { return &n }

func TestRateLimitInput_RateLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    engine.RateLimitInput
		want  engine.RateLimit
		field string // "" : valid
	}{
		{"the burst defaults to a second's attempts", engine.RateLimitInput{PerSecond: 5}, engine.RateLimit{PerSecond: 5, Burst: 5}, ""},
		{"a fraction rounds the default burst down", engine.RateLimitInput{PerSecond: 2.5}, engine.RateLimit{PerSecond: 2.5, Burst: 2}, ""},
		{"under one a second, a burst of one", engine.RateLimitInput{PerSecond: 0.5}, engine.RateLimit{PerSecond: 0.5, Burst: 1}, ""},
		{"the least rate", engine.RateLimitInput{PerSecond: engine.MinRateLimitPerSecond}, engine.RateLimit{PerSecond: engine.MinRateLimitPerSecond, Burst: 1}, ""},
		{"the greatest rate", engine.RateLimitInput{PerSecond: engine.MaxRateLimitPerSecond}, engine.RateLimit{PerSecond: engine.MaxRateLimitPerSecond, Burst: engine.MaxRateLimitBurst}, ""},
		{"a burst given", engine.RateLimitInput{PerSecond: 5, Burst: intp(10)}, engine.RateLimit{PerSecond: 5, Burst: 10}, ""},
		{"a burst under the rate", engine.RateLimitInput{PerSecond: 50, Burst: intp(1)}, engine.RateLimit{PerSecond: 50, Burst: 1}, ""},
		{"the greatest burst", engine.RateLimitInput{PerSecond: 1, Burst: intp(engine.MaxRateLimitBurst)}, engine.RateLimit{PerSecond: 1, Burst: engine.MaxRateLimitBurst}, ""},
		{"no rate", engine.RateLimitInput{}, engine.RateLimit{}, "rate_limit.per_second"},
		{"no rate, a burst", engine.RateLimitInput{Burst: intp(3)}, engine.RateLimit{}, "rate_limit.per_second"},
		{"a negative rate", engine.RateLimitInput{PerSecond: -1}, engine.RateLimit{}, "rate_limit.per_second"},
		{"under the least rate", engine.RateLimitInput{PerSecond: 0.009}, engine.RateLimit{}, "rate_limit.per_second"},
		{"over the greatest rate", engine.RateLimitInput{PerSecond: engine.MaxRateLimitPerSecond + 0.5}, engine.RateLimit{}, "rate_limit.per_second"},
		{"NaN", engine.RateLimitInput{PerSecond: math.NaN()}, engine.RateLimit{}, "rate_limit.per_second"},
		{"infinite", engine.RateLimitInput{PerSecond: math.Inf(1)}, engine.RateLimit{}, "rate_limit.per_second"},
		{"a burst of zero", engine.RateLimitInput{PerSecond: 5, Burst: intp(0)}, engine.RateLimit{}, "rate_limit.burst"},
		{"a negative burst", engine.RateLimitInput{PerSecond: 5, Burst: intp(-1)}, engine.RateLimit{}, "rate_limit.burst"},
		{"over the greatest burst", engine.RateLimitInput{PerSecond: 5, Burst: intp(engine.MaxRateLimitBurst + 1)}, engine.RateLimit{}, "rate_limit.burst"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.in.RateLimit()
			if tc.field != "" {
				if engine.ErrorCode(err) != engine.CodeInvalidField || errorField(err) != tc.field {
					t.Fatalf("RateLimit() = %+v, %v; want invalid_field naming %s", got, err, tc.field)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("RateLimit() = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestEffectiveRateLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		global float64
		own    engine.RateLimit
		want   engine.RateLimit
	}{
		{"neither", 0, engine.RateLimit{}, engine.RateLimit{}},
		{"the global bound alone", 10, engine.RateLimit{}, engine.RateLimit{PerSecond: 10, Burst: 10}},
		{"a global fraction", 2.5, engine.RateLimit{}, engine.RateLimit{PerSecond: 2.5, Burst: 2}},
		{"a global rate under one", 0.5, engine.RateLimit{}, engine.RateLimit{PerSecond: 0.5, Burst: 1}},
		{"the endpoint's alone", 0, engine.RateLimit{PerSecond: 5, Burst: 7}, engine.RateLimit{PerSecond: 5, Burst: 7}},
		{"the endpoint's alone, no burst stored", 0, engine.RateLimit{PerSecond: 5}, engine.RateLimit{PerSecond: 5, Burst: 5}},
		{"the endpoint's under the global", 10, engine.RateLimit{PerSecond: 5, Burst: 5}, engine.RateLimit{PerSecond: 5, Burst: 5}},
		{"the endpoint's above the global: capped", 10, engine.RateLimit{PerSecond: 50, Burst: 50}, engine.RateLimit{PerSecond: 10, Burst: 10}},
		{"a burst above the global's: capped", 10, engine.RateLimit{PerSecond: 2, Burst: 40}, engine.RateLimit{PerSecond: 2, Burst: 10}},
		{"a rate above the global's, a small burst", 10, engine.RateLimit{PerSecond: 20, Burst: 3}, engine.RateLimit{PerSecond: 10, Burst: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := engine.EffectiveRateLimit(tc.global, tc.own); got != tc.want {
				t.Errorf("EffectiveRateLimit(%v, %+v) = %+v, want %+v", tc.global, tc.own, got, tc.want)
			}
		})
	}
}

// TestService_EndpointRateLimit: an endpoint takes its rate limit on
// create and update, with the default burst filled in; an update without
// rate_limit leaves it, null removes it; a bad one is refused naming the
// field, and nothing is stored.
func TestService_EndpointRateLimit(t *testing.T) {
	ctx := t.Context()
	store := memstore.New()
	svc := engine.NewService(store, nil, engine.ServiceOptions{Targets: bubbleTargets})
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
		t.Fatal(err)
	}
	ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"*"}, RateLimit: &engine.RateLimitInput{PerSecond: 2.5}})
	if err != nil {
		t.Fatal(err)
	}
	want := engine.RateLimit{PerSecond: 2.5, Burst: 2}
	if ep.RateLimit != want || ep.EffectiveRateLimit != want {
		t.Fatalf("created with %+v, effective %+v; want %+v both", ep.RateLimit, ep.EffectiveRateLimit, want)
	}
	read := func() engine.RateLimit {
		t.Helper()
		got, err := svc.Endpoint(ctx, "acme", ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.RateLimit
	}
	if got := read(); got != want {
		t.Fatalf("stored %+v, want %+v", got, want)
	}

	desc := "orders"
	if _, err := svc.UpdateEndpoint(ctx, "acme", ep.ID, engine.EndpointPatch{Description: &desc}); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != want {
		t.Errorf("after an update without rate_limit: %+v, want it left: %+v", got, want)
	}
	want = engine.RateLimit{PerSecond: 20, Burst: 5}
	got, err := svc.UpdateEndpoint(ctx, "acme", ep.ID, engine.EndpointPatch{RateLimit: engine.RateLimitPatch{Set: true, Limit: &engine.RateLimitInput{PerSecond: 20, Burst: intp(5)}}})
	if err != nil || got.RateLimit != want {
		t.Fatalf("update = %+v, %v; want %+v", got.RateLimit, err, want)
	}

	for _, tc := range []struct {
		field string
		in    engine.RateLimitInput
	}{
		{"rate_limit.per_second", engine.RateLimitInput{PerSecond: 0}},
		{"rate_limit.per_second", engine.RateLimitInput{PerSecond: engine.MaxRateLimitPerSecond * 2}},
		{"rate_limit.burst", engine.RateLimitInput{PerSecond: 1, Burst: intp(0)}},
	} {
		d := "changed"
		_, err := svc.UpdateEndpoint(ctx, "acme", ep.ID, engine.EndpointPatch{Description: &d, RateLimit: engine.RateLimitPatch{Set: true, Limit: &tc.in}})
		if engine.ErrorCode(err) != engine.CodeInvalidField || errorField(err) != tc.field {
			t.Errorf("update with %+v = %v, want invalid_field naming %s", tc.in, err, tc.field)
		}
		if now, _ := svc.Endpoint(ctx, "acme", ep.ID); now.Description == d || now.RateLimit != want {
			t.Errorf("a refused update stored something: %+v", now)
		}
		_, _, err = svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"*"}, RateLimit: &tc.in})
		if engine.ErrorCode(err) != engine.CodeInvalidField || errorField(err) != tc.field {
			t.Errorf("create with %+v = %v, want invalid_field naming %s", tc.in, err, tc.field)
		}
	}
	if eps, _ := svc.Endpoints(ctx, "acme"); len(eps) != 1 {
		t.Errorf("%d endpoints after refused creates, want 1", len(eps))
	}

	got, err = svc.UpdateEndpoint(ctx, "acme", ep.ID, engine.EndpointPatch{RateLimit: engine.RateLimitPatch{Set: true}})
	if err != nil || !got.RateLimit.IsZero() {
		t.Fatalf("update with rate_limit null = %+v, %v; want none", got.RateLimit, err)
	}
	if got := read(); !got.IsZero() {
		t.Errorf("stored %+v after null, want none", got)
	}
}

func TestCheckStoredRateLimit(t *testing.T) {
	for _, tc := range []struct {
		rl    engine.RateLimit
		field string // "": fine
	}{
		{engine.RateLimit{}, ""},
		{engine.RateLimit{PerSecond: 2.5, Burst: 4}, ""},
		{engine.RateLimit{PerSecond: 5}, ""}, // the default burst
		{engine.RateLimit{PerSecond: -1, Burst: 1}, "rate_limit.per_second"},
		{engine.RateLimit{Burst: 3}, "rate_limit.per_second"},
		{engine.RateLimit{PerSecond: math.Inf(1), Burst: 1}, "rate_limit.per_second"},
		{engine.RateLimit{PerSecond: 5, Burst: -2}, "rate_limit.burst"},
		{engine.RateLimit{PerSecond: 5, Burst: engine.MaxRateLimitBurst + 1}, "rate_limit.burst"},
	} {
		err := engine.CheckStoredRateLimit(tc.rl)
		if tc.field == "" && err != nil || tc.field != "" && errorField(err) != tc.field {
			t.Errorf("CheckStoredRateLimit(%+v) = %v, want field %q", tc.rl, err, tc.field)
		}
	}
}
