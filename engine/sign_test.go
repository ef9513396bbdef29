package engine

import (
	"strings"
	"testing"
	"time"
)

// Signing itself is verify.Sign, tested there against the official
// libraries' vectors; the dispatcher chooses the keys.
func TestEndpoint_SigningKeys(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	ep := Endpoint{Secrets: []Secret{{Key: "new"}, {Key: "old", Expires: now.Add(time.Hour)}, {Key: "gone", Expires: now}}}
	got := ep.SigningKeys(now)
	if strings.Join(got, ",") != "new,old" {
		t.Errorf("SigningKeys = %v, want [new old]", got)
	}
}
