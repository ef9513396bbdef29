package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/jsonschema"
	"github.com/webhookd/webhookd/storage"
)

// publicLookup resolves every host to a public address, so that the
// create-time target check passes without DNS.
func publicLookup(context.Context, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
}

const (
	liveToken = "whk_live_0123456789abcdef"
	testEnvTk = "whk_test_0123456789abcdef"
)

// newSecurityEnv is newAPIEnv with the given options; testToken is always
// a live token, liveToken another, testEnvTk a test one.
func newSecurityEnv(t *testing.T, sopts engine.ServiceOptions, opts httpapi.Options) *apiEnv {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if sopts.LookupHost == nil {
		sopts.LookupHost = publicLookup
	}
	if sopts.Schemas == nil {
		sopts.Schemas = jsonschema.Compiler{} // as main wires it
	}
	svc := engine.NewService(db, nil, sopts)
	t.Cleanup(func() { svc.StopTasks(context.Background()) }) // before the store closes
	logs := new(syncBuffer)
	opts.Tokens = append(opts.Tokens, testToken, liveToken)
	opts.TestTokens = append(opts.TestTokens, testEnvTk)
	opts.MaxBody = maxBody
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewServer(httpapi.New(svc, opts))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		for _, tok := range []string{testToken, liveToken, testEnvTk} {
			if strings.Contains(logs.String(), tok) {
				t.Errorf("a token was logged: %s", logs.String())
			}
		}
	})
	return &apiEnv{t: t, db: db, svc: svc, srv: srv, logs: logs}
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

func TestAuth_TestTokenActsOnTestTenantsOnly(t *testing.T) {
	e := newSecurityEnv(t, engine.ServiceOptions{}, httpapi.Options{})
	test := bearer(testEnvTk)
	e.must(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme"}`}, 201, nil)
	e.must(req{method: "PUT", path: "/v1/event-types/payment.succeeded"}, 201, nil)
	var ep endpointJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/in","event_types":["*"]}`}, 201, &ep)
	before := e.snapshot()

	// A test tenant, made by the test token without naming an environment.
	var sandbox engine.Tenant
	e.must(req{method: "PUT", path: "/v1/tenants/sandbox", body: `{"name":"Sandbox"}`, header: test}, 201, &sandbox)
	if sandbox.Environment != engine.EnvironmentTest {
		t.Fatalf("a tenant made by a test token is %q, want test", sandbox.Environment)
	}

	epPath := "/v1/tenants/acme/endpoints/" + ep.ID
	forbidden := []req{
		{method: "GET", path: "/v1/tenants/acme"},
		{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Evil"}`},
		{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`},
		{method: "GET", path: "/v1/tenants/acme/endpoints"},
		{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://evil.example/","event_types":["*"]}`},
		{method: "GET", path: epPath},
		{method: "PATCH", path: epPath, body: `{"url":"https://evil.example/"}`},
		{method: "DELETE", path: epPath},
		{method: "POST", path: epPath + "/secret/rotate"},
		{method: "POST", path: epPath + "/secret/revoke"},
		{method: "GET", path: "/v1/tenants/acme/dead-letters"},
		{method: "GET", path: "/v1/tenants/acme/deliveries/dlv_01hzzzzzzzzzzzzzzzzzzzzzzz"},
		{method: "PUT", path: "/v1/event-types/payment.refunded"},
		{method: "GET", path: "/v1/admin/backup"},
	}
	for _, rq := range forbidden {
		t.Run("403 "+rq.method+" "+rq.path, func(t *testing.T) {
			rq.header = test
			field := "tenant" // the live tenant is at fault
			if !strings.HasPrefix(rq.path, "/v1/tenants/") {
				field = "" // a route for live tokens only
			}
			checkProblem(t, e.do(rq), 403, engine.CodeForbidden, field)
		})
	}
	t.Run("cannot create a live tenant", func(t *testing.T) {
		r := e.do(req{method: "PUT", path: "/v1/tenants/newlive", body: `{"environment":"live"}`, header: test})
		checkProblem(t, r, 403, engine.CodeForbidden, "environment")
		checkProblem(t, e.do(req{method: "GET", path: "/v1/tenants/newlive"}), 404, engine.CodeTenantNotFound, "tenant")
	})
	t.Run("a live tenant is unchanged", func(t *testing.T) {
		if after := e.snapshot(); after != before {
			t.Errorf("the test token changed live data:\n%s\nwas\n%s", after, before)
		}
	})
	t.Run("reads the catalogue, works on its tenant", func(t *testing.T) {
		e.must(req{method: "GET", path: "/v1/event-types", header: test}, 200, nil)
		e.must(req{method: "POST", path: "/v1/tenants/sandbox/endpoints", body: `{"url":"https://hooks.example.com/t","event_types":["*"]}`, header: test}, 201, nil)
		e.must(req{method: "POST", path: "/v1/tenants/sandbox/events", body: `{"type":"payment.succeeded","data":{}}`, header: test}, 202, nil)
		checkProblem(t, e.do(req{method: "GET", path: "/v1/tenants/nobody", header: test}), 404, engine.CodeTenantNotFound, "tenant")
	})
	t.Run("a live token acts on both", func(t *testing.T) {
		e.must(req{method: "GET", path: "/v1/tenants/sandbox/endpoints"}, 200, nil)
		e.must(req{method: "PUT", path: "/v1/tenants/sandbox", body: `{"name":"Sandbox 2"}`, header: bearer(liveToken)}, 200, nil)
	})
	t.Run("an environment never changes", func(t *testing.T) {
		checkProblem(t, e.do(req{method: "PUT", path: "/v1/tenants/sandbox", body: `{"environment":"live"}`}), 422, engine.CodeInvalidField, "environment")
		checkProblem(t, e.do(req{method: "PUT", path: "/v1/tenants/x", body: `{"environment":"staging"}`}), 422, engine.CodeInvalidField, "environment")
	})
}

func TestAuth_DefaultEnvironment(t *testing.T) {
	e := newSecurityEnv(t, engine.ServiceOptions{DefaultEnvironment: engine.EnvironmentTest}, httpapi.Options{})
	var tn engine.Tenant
	e.must(req{method: "PUT", path: "/v1/tenants/a"}, 201, &tn)
	if tn.Environment != engine.EnvironmentTest {
		t.Errorf("environment %q, want the configured default test", tn.Environment)
	}
	e.must(req{method: "PUT", path: "/v1/tenants/b", body: `{"environment":"live"}`}, 201, &tn)
	if tn.Environment != engine.EnvironmentLive {
		t.Errorf("environment %q, want live as asked", tn.Environment)
	}
}

func TestAuth_FailuresAreGeneric(t *testing.T) {
	sum := sha256.Sum256([]byte("hashed-token-0123456789"))
	e := newSecurityEnv(t, engine.ServiceOptions{}, httpapi.Options{Tokens: []string{httpapi.TokenHashPrefix + hex.EncodeToString(sum[:])}})
	e.must(req{method: "GET", path: "/v1/event-types", header: bearer("hashed-token-0123456789")}, 200, nil)

	var bodies []string
	for _, h := range []map[string]string{
		{"Authorization": "-"},
		bearer("nope"),
		bearer(testEnvTk + "x"),
		bearer(liveToken[:len(liveToken)-1]),
		bearer(httpapi.TokenHashPrefix + hex.EncodeToString(sum[:])), // the hash is not the token
		{"Authorization": "Basic " + liveToken},
		{"Authorization": "Bearer"},
	} {
		r := e.do(req{method: "GET", path: "/v1/tenants/acme", header: h})
		p := checkProblem(t, r, 401, engine.CodeUnauthorized, "")
		bodies = append(bodies, p.Detail)
		if strings.Contains(string(r.body), "nope") || strings.Contains(string(r.body), liveToken[:12]) {
			t.Errorf("the 401 echoes the token: %s", r.body)
		}
	}
	for _, b := range bodies {
		if b != bodies[0] {
			t.Errorf("401 details differ (%q, %q): they must not say what was wrong", b, bodies[0])
		}
	}
}

func TestIngest_RateLimitPerToken(t *testing.T) {
	e := newSecurityEnv(t, engine.ServiceOptions{}, httpapi.Options{IngestRate: 0.5, IngestBurst: 2})
	e.fixture()
	ingest := func(tok string) response {
		return e.do(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`, header: bearer(tok)})
	}
	for i := range 2 {
		if r := ingest(testToken); r.status != 202 {
			t.Fatalf("ingest %d within the burst: %d %s", i+1, r.status, r.body)
		}
	}
	r := ingest(testToken)
	checkProblem(t, r, 429, engine.CodeRateLimited, "")
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 2 {
		t.Errorf("Retry-After = %q, want 1 or 2 seconds at 0.5/s", r.header.Get("Retry-After"))
	}
	if n := len(e.pendingDeliveries()); n != 2 {
		t.Errorf("%d deliveries stored, want 2: a 429 stores nothing", n)
	}
	// Another token has its own budget; reads are not limited.
	if r := ingest(liveToken); r.status != 202 {
		t.Errorf("another token: %d %s", r.status, r.body)
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme"}, 200, nil)
}

func TestSecret_RotateAndRevoke(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	e := newSecurityEnv(t, engine.ServiceOptions{Now: func() time.Time { return now }}, httpapi.Options{})
	ep := e.fixture()
	path := "/v1/tenants/acme/endpoints/" + ep.ID

	type secretJSON struct {
		endpointJSON
		Environment           string    `json:"environment"`
		PreviousSecretExpires time.Time `json:"previous_secret_expires"`
	}
	var rot secretJSON
	r := e.must(req{method: "POST", path: path + "/secret/rotate", body: `{"grace":"24h"}`}, 200, &rot)
	if !strings.HasPrefix(rot.Secret, "whsec_") || rot.Secret == ep.Secret || rot.ID != ep.ID {
		t.Fatalf("rotate answered %s", r.body)
	}
	if rot.Environment != "live" || !rot.PreviousSecretExpires.Equal(now.Add(24*time.Hour)) {
		t.Errorf("rotate: environment %q, previous expires %v", rot.Environment, rot.PreviousSecretExpires)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Error("a secret answered without Cache-Control: no-store")
	}
	stored, err := e.db.Endpoint(context.Background(), "acme", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := stored.SigningKeys(now); len(got) != 2 || got[0] != rot.Secret || got[1] != ep.Secret {
		t.Errorf("during grace the keys are %d, want the new and the old", len(got))
	}
	if got := stored.SigningKeys(now.Add(24 * time.Hour)); len(got) != 1 || got[0] != rot.Secret {
		t.Errorf("after grace the keys are %d, want the new only", len(got))
	}

	t.Run("no route shows a secret again", func(t *testing.T) {
		for _, p := range []string{path, "/v1/tenants/acme/endpoints"} {
			if b := e.must(req{method: "GET", path: p}, 200, nil).body; strings.Contains(string(b), "whsec_") || strings.Contains(string(b), `"secret`) {
				t.Errorf("GET %s shows a secret: %s", p, b)
			}
		}
	})
	t.Run("bad grace", func(t *testing.T) {
		for _, g := range []string{`"soon"`, `"-1s"`, `"169h"`, `5`} {
			r := e.do(req{method: "POST", path: path + "/secret/rotate", body: `{"grace":` + g + `}`})
			checkProblem(t, r, 422, engine.CodeInvalidField, "grace")
		}
		after, _ := e.db.Endpoint(context.Background(), "acme", ep.ID)
		if len(after.Secrets) != 2 || after.Secrets[0].Key != rot.Secret {
			t.Error("a refused rotation changed the secrets")
		}
	})
	t.Run("revoke drops every old key at once", func(t *testing.T) {
		var rev secretJSON
		e.must(req{method: "POST", path: path + "/secret/revoke"}, 200, &rev)
		after, _ := e.db.Endpoint(context.Background(), "acme", ep.ID)
		if len(after.Secrets) != 1 || after.Secrets[0].Key != rev.Secret || rev.Secret == rot.Secret || !rev.PreviousSecretExpires.IsZero() {
			t.Errorf("after revoke: %d keys, previous expires %v; want the new key alone", len(after.Secrets), rev.PreviousSecretExpires)
		}
	})
	t.Run("grace 0s is a revocation", func(t *testing.T) {
		var rev secretJSON
		e.must(req{method: "POST", path: path + "/secret/rotate", body: `{"grace":"0s"}`}, 200, &rev)
		after, _ := e.db.Endpoint(context.Background(), "acme", ep.ID)
		if len(after.Secrets) != 1 || after.Secrets[0].Key != rev.Secret {
			t.Errorf("after grace 0s: %d keys, want the new key alone", len(after.Secrets))
		}
	})
	t.Run("unknown endpoint", func(t *testing.T) {
		checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/acme/endpoints/ep_nope/secret/rotate"}), 404, engine.CodeEndpointNotFound, "id")
		checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/nobody/endpoints/" + ep.ID + "/secret/revoke"}), 404, engine.CodeTenantNotFound, "tenant")
	})
}

func TestEndpoint_TargetRefusedAtCreate(t *testing.T) {
	e := newSecurityEnv(t, engine.ServiceOptions{LookupHost: func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "rebind.example" {
			return []netip.Addr{netip.MustParseAddr("10.0.0.8")}, nil
		}
		return publicLookup(nil, host)
	}}, httpapi.Options{})
	ep := e.fixture()
	before := e.snapshot()
	for _, u := range []string{"http://hooks.example.com/in", "https://127.0.0.1/in", "https://localhost:8443/", "https://169.254.169.254/latest/meta-data", "https://[fd00::1]/", "https://rebind.example/"} {
		body, _ := json.Marshal(map[string]any{"url": u, "event_types": []string{"*"}})
		p := checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: string(body)}), 422, engine.CodeInvalidField, "url")
		if !strings.Contains(p.Detail, "allow_") {
			t.Errorf("%s: detail %q does not name the setting", u, p.Detail)
		}
		body, _ = json.Marshal(map[string]any{"url": u})
		checkProblem(t, e.do(req{method: "PATCH", path: "/v1/tenants/acme/endpoints/" + ep.ID, body: string(body)}), 422, engine.CodeInvalidField, "url")
	}
	if after := e.snapshot(); after != before {
		t.Errorf("refused URLs changed something:\n%s\nwas\n%s", after, before)
	}
}

func TestIngest_HostileInput(t *testing.T) {
	e := newSecurityEnv(t, engine.ServiceOptions{}, httpapi.Options{})
	e.fixture()
	before := e.snapshot()
	deep := strings.Repeat("[", engine.MaxDataDepth+1) + strings.Repeat("]", engine.MaxDataDepth+1)
	atLimit := strings.Repeat("[", engine.MaxDataDepth) + strings.Repeat("]", engine.MaxDataDepth)
	tests := []struct {
		name   string
		rq     req
		status int
		code   engine.Code
		field  string
	}{
		{"data too deep", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":` + deep + `}`}, 422, engine.CodeInvalidField, "data"},
		{"data far too deep", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":` + strings.Repeat("[", 3000) + strings.Repeat("]", 3000) + `}`}, 413, engine.CodeBodyTooLarge, ""},
		{"tenant id with a dot-dot path", req{method: "GET", path: "/v1/tenants/..%2F..%2Fetc/endpoints"}, 404, engine.CodeNotFound, ""},
		{"tenant id of dots", req{method: "GET", path: "/v1/tenants/../endpoints"}, 404, engine.CodeTenantNotFound, "tenant"},
		{"tenant id too long", req{method: "PUT", path: "/v1/tenants/" + strings.Repeat("a", 65)}, 422, engine.CodeInvalidField, "tenant"},
		{"tenant id with NUL", req{method: "PUT", path: "/v1/tenants/a%00b"}, 422, engine.CodeInvalidField, "tenant"},
		{"tenant id unicode", req{method: "PUT", path: "/v1/tenants/%C3%A9t%C3%A9"}, 422, engine.CodeInvalidField, "tenant"},
		{"endpoint id garbage", req{method: "GET", path: "/v1/tenants/acme/endpoints/ep_%27%20OR%201=1"}, 404, engine.CodeEndpointNotFound, "id"},
		{"delivery id too long", req{method: "GET", path: "/v1/tenants/acme/deliveries/dlv_" + strings.Repeat("0", 500)}, 404, engine.CodeDeliveryNotFound, "id"},
		{"idempotency key too long", req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`, header: map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}}, 422, engine.CodeInvalidField, "Idempotency-Key"},
		{"control character in a name", req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"a\u0000b"}`}, 422, engine.CodeInvalidField, "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkProblem(t, e.do(tt.rq), tt.status, tt.code, tt.field)
		})
	}
	if after := e.snapshot(); after != before {
		t.Errorf("hostile input changed something:\n%s\nwas\n%s", after, before)
	}
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":` + atLimit + `}`}, 202, nil)
}

func TestEndpoint_URLChangeClearsVerification(t *testing.T) {
	e := newSecurityEnv(t, engine.ServiceOptions{RequireEndpointVerification: true}, httpapi.Options{})
	ep := e.fixture()
	if _, err := e.db.UpdateEndpoint(context.Background(), "acme", ep.ID, func(s *engine.Endpoint) error {
		s.Verified = time.Now()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var got engine.Endpoint
	path := "/v1/tenants/acme/endpoints/" + ep.ID
	e.must(req{method: "PATCH", path: path, body: `{"description":"same URL"}`}, 200, &got)
	if !got.VerificationRequired || got.Verified.IsZero() {
		t.Fatalf("after a PATCH that keeps the URL: %+v, want still verified", got)
	}
	got = engine.Endpoint{}
	e.must(req{method: "PATCH", path: path, body: `{"url":"https://hooks.example.com/elsewhere"}`}, 200, &got)
	if !got.Verified.IsZero() {
		t.Errorf("a new URL kept the verification of the old one")
	}
	checkProblem(t, e.do(req{method: "POST", path: path + "/verify"}), 503, engine.CodeUnavailable, "")
}
