package engine_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/storage"
)

// settableClock is a clock a test moves by hand.
type settableClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *settableClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *settableClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestService_AccessTokens(t *testing.T) {
	ctx := context.Background()
	db, err := storage.Open(filepath.Join(t.TempDir(), "webhookd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	clock := &settableClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	svc := engine.NewService(db, nil, engine.ServiceOptions{Now: clock.Now})
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme", Environment: engine.EnvironmentTest}); err != nil {
		t.Fatal(err)
	}

	t.Run("ttl", func(t *testing.T) {
		tests := []struct {
			ttl, def string
			want     time.Duration
			bad      bool
		}{
			{ttl: "", def: "", want: engine.DefaultAccessTokenTTL},
			{ttl: "", def: "1h", want: time.Hour},
			{ttl: "90m", def: "1h", want: 90 * time.Minute},
			{ttl: "720h", want: engine.MaxAccessTokenTTL},
			{ttl: "721h", bad: true},
			{ttl: "0s", bad: true},
			{ttl: "-1h", bad: true},
			{ttl: "soon", bad: true},
		}
		for _, tc := range tests {
			t.Run(tc.ttl+"/"+tc.def, func(t *testing.T) {
				var def time.Duration
				if tc.def != "" {
					def, _ = time.ParseDuration(tc.def)
				}
				tok, value, err := svc.IssueAccessToken(ctx, "acme", engine.AccessTokenInput{TTL: tc.ttl}, def)
				if tc.bad {
					if engine.ErrorCode(err) != engine.CodeInvalidField {
						t.Fatalf("err = %v, want invalid_field", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := tok.Expires.Sub(tok.Created); got != tc.want {
					t.Errorf("lifetime %s, want %s", got, tc.want)
				}
				if !strings.HasPrefix(value, engine.AccessTokenPrefix) || len(value) != 49 {
					t.Errorf("token %q: want %s + 43 characters", value, engine.AccessTokenPrefix)
				}
				if tok.Environment != engine.EnvironmentTest || tok.TenantID != "acme" {
					t.Errorf("token %+v: want acme's test environment", tok)
				}
			})
		}
	})

	t.Run("unknown tenant", func(t *testing.T) {
		_, _, err := svc.IssueAccessToken(ctx, "nobody", engine.AccessTokenInput{}, 0)
		if engine.ErrorCode(err) != engine.CodeTenantNotFound {
			t.Errorf("err = %v", err)
		}
	})

	t.Run("lookup: active, then expired", func(t *testing.T) {
		tok, value, err := svc.IssueAccessToken(ctx, "acme", engine.AccessTokenInput{TTL: "1h"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := svc.LookupAccessToken(ctx, value)
		if err != nil || got.ID != tok.ID {
			t.Fatalf("lookup = %+v, %v", got, err)
		}
		if got.Principal() != "token "+tok.ID {
			t.Errorf("principal %q", got.Principal())
		}
		clock.Add(time.Hour)
		if _, err := svc.LookupAccessToken(ctx, value); engine.ErrorCode(err) != engine.CodeUnauthorized {
			t.Errorf("expired: err = %v, want unauthorized", err)
		}
	})

	t.Run("lookup: revoked at once", func(t *testing.T) {
		tok, value, err := svc.IssueAccessToken(ctx, "acme", engine.AccessTokenInput{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.RevokeAccessToken(ctx, "acme", tok.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.LookupAccessToken(ctx, value); engine.ErrorCode(err) != engine.CodeUnauthorized {
			t.Errorf("revoked: err = %v, want unauthorized", err)
		}
		if _, err := svc.RevokeAccessToken(ctx, "acme", "tok_nope"); engine.ErrorCode(err) != engine.CodeNotFound {
			t.Errorf("unknown id: err = %v", err)
		}
	})

	t.Run("lookup: not a tenant token", func(t *testing.T) {
		for _, v := range []string{"", "whk_live_abc", "whk_t_", "whk_t_" + strings.Repeat("a", 200)} {
			if _, err := svc.LookupAccessToken(ctx, v); engine.ErrorCode(err) != engine.CodeUnauthorized {
				t.Errorf("%q: err = %v", v, err)
			}
		}
	})

	t.Run("listing shows no token values", func(t *testing.T) {
		ts, err := svc.AccessTokens(ctx, "acme")
		if err != nil || len(ts) < 3 {
			t.Fatalf("AccessTokens = %d, %v", len(ts), err)
		}
	})
}

func TestSumReports(t *testing.T) {
	a := engine.Report{
		Tenant: "a", Events: 10, Deliveries: 10, FirstAttemptSuccesses: 8, RetrySuccesses: 1, Dead: 1,
		DeadByReason: map[string]int{"HTTP 410 Gone": 1},
		Checks:       []engine.ReportCheck{{Name: "every dead letter has a reason", OK: true}, {Name: "every replay is recorded", OK: true}},
	}
	b := engine.Report{
		Tenant: "b", Events: 90, Deliveries: 90, FirstAttemptSuccesses: 86, Replayed: 2, Paused: 1, Waiting: 1, DuplicateDeliveries: 1,
		DeadByReason: map[string]int{},
		Checks:       []engine.ReportCheck{{Name: "every dead letter has a reason", OK: true}, {Name: "every replay is recorded", OK: false, Note: "1 deliveries whose cycles outnumber their replay records"}},
	}
	got := engine.SumReports([]engine.Report{a, b})
	if got.Events != 100 || got.Deliveries != 100 || got.FirstAttemptSuccesses != 94 || got.RetrySuccesses != 1 ||
		got.Dead != 1 || got.Replayed != 2 || got.Paused != 1 || got.Waiting != 1 || got.DuplicateDeliveries != 1 || got.DeadByReason["HTTP 410 Gone"] != 1 {
		t.Errorf("sums: %+v", got)
	}
	if got.EffectiveDeliveryRate != 0.95 || got.MeetsTarget {
		t.Errorf("rate %v (met %v), want 0.95 and not met", got.EffectiveDeliveryRate, got.MeetsTarget)
	}
	if len(got.Checks) != 2 || !got.Checks[0].OK || got.Checks[1].OK || !strings.HasPrefix(got.Checks[1].Note, "b: ") {
		t.Errorf("checks: %+v", got.Checks)
	}
	if empty := engine.SumReports(nil); empty.EffectiveDeliveryRate != 1 || empty.Checks == nil {
		t.Errorf("empty sum: %+v", empty)
	}
}
