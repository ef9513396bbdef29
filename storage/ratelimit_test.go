package storage

import (
	"context"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// TestDB_Check_rateLimit: the integrity check holds an endpoint's stored
// rate limit to the API's bounds (engine.CheckStoredRateLimit), naming
// the endpoint and the member at fault; none, or one the API gives, is
// fine.
func TestDB_Check_rateLimit(t *testing.T) {
	db := MustOpenDB(t)
	mustTenant(t, db, "acme")
	ep := mustEndpoint(t, db, "acme", "*")
	set := func(rl engine.RateLimit) {
		t.Helper()
		if _, err := db.UpdateEndpoint(context.Background(), "acme", ep.ID, func(e *engine.Endpoint) error {
			e.RateLimit = rl
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, rl := range []engine.RateLimit{{PerSecond: 2.5, Burst: 4}, {PerSecond: 0.01, Burst: 1}, {PerSecond: 5}} {
		set(rl)
		mustCheck(t, db)
	}
	for _, c := range []struct {
		rl   engine.RateLimit
		says string
	}{
		{engine.RateLimit{PerSecond: -1, Burst: 1}, "rate_limit.per_second"},
		{engine.RateLimit{PerSecond: 20000, Burst: 1}, "rate_limit.per_second"},
		{engine.RateLimit{PerSecond: 5, Burst: -3}, "rate_limit.burst"},
	} {
		set(c.rl)
		if err := db.Check(); err == nil || !strings.Contains(err.Error(), ep.ID) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("rate limit %+v: Check = %v, want it to name the endpoint and %s", c.rl, err, c.says)
		}
	}
	set(engine.RateLimit{})
	mustCheck(t, db)
}
