package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// callAs makes a GET with token and returns the status and body.
func (in *instance) callAs(token, method, path string) (int, string) {
	in.t.Helper()
	req, err := http.NewRequest(method, in.base+path, nil)
	if err != nil {
		in.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTenantTokens runs tenant access tokens through the real service:
// the configured default lifetime, the tenant's routes only, revocation at
// once, tokens that survive a restart, and the all-tenants report.
func TestTenantTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := strings.Replace(testConfig, "[api]\n", "[api]\ntenant_token_ttl = \"2h\"\n", 1)
	in := startInstance(t, dir, cfg)
	in.setup()
	in.mustCall(201, "PUT", "/v1/tenants/globex", map[string]string{"name": "Globex"}, nil)

	type issued struct {
		ID      string    `json:"id"`
		Token   string    `json:"token"`
		Created time.Time `json:"created"`
		Expires time.Time `json:"expires"`
	}
	var keep, revoked issued
	in.mustCall(201, "POST", "/v1/tenants/acme/access-tokens", nil, &keep)
	in.mustCall(201, "POST", "/v1/tenants/acme/access-tokens", `{"ttl":"10m"}`, &revoked)
	if got := keep.Expires.Sub(keep.Created); got != 2*time.Hour {
		t.Errorf("a token issued without ttl lives %s, want [api] tenant_token_ttl = 2h", got)
	}
	if !strings.HasPrefix(keep.Token, "whk_t_") {
		t.Fatalf("token %q", keep.Token)
	}

	for _, path := range []string{"/v1/tenants/acme/deliveries", "/v1/tenants/acme/report?last=1000", "/v1/tenants/acme/dead-letters"} {
		if code, body := in.callAs(keep.Token, "GET", path); code != 200 {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}
	_, other := in.callAs(keep.Token, "GET", "/v1/tenants/globex/deliveries")
	for _, path := range []string{"/v1/tenants/globex/deliveries", "/v1/tenants/nobody/deliveries", "/v1/admin/report", "/v1/admin/backup"} {
		code, body := in.callAs(keep.Token, "GET", path)
		if code != 403 || body != other {
			t.Errorf("GET %s: %d %s, want the same 403 as on globex", path, code, body)
		}
	}

	in.mustCall(204, "DELETE", "/v1/tenants/acme/access-tokens/"+revoked.ID, nil, nil)
	if code, _ := in.callAs(revoked.Token, "GET", "/v1/tenants/acme/deliveries"); code != 401 {
		t.Errorf("a revoked token: %d, want 401", code)
	}

	var report struct {
		Tenants []struct {
			Tenant string `json:"tenant"`
		} `json:"tenants"`
		Total struct {
			Events int `json:"events"`
		} `json:"total"`
	}
	in.mustCall(200, "GET", "/v1/admin/report?last=1000", nil, &report)
	if len(report.Tenants) != 2 {
		t.Errorf("admin report over %d tenants, want 2", len(report.Tenants))
	}

	// Tokens are on disk: they work after a restart, revoked ones stay revoked.
	firstLogs := in.logs
	in.stop()
	in = startInstance(t, dir, cfg)
	if code, body := in.callAs(keep.Token, "GET", "/v1/tenants/acme/endpoints"); code != 200 {
		t.Errorf("after a restart: %d %s", code, body)
	}
	if code, _ := in.callAs(revoked.Token, "GET", "/v1/tenants/acme/endpoints"); code != 401 {
		t.Errorf("a revoked token after a restart: %d, want 401", code)
	}
	if strings.Contains(firstLogs.String()+in.logs.String(), keep.Token) {
		t.Error("a tenant token was logged")
	}
}
