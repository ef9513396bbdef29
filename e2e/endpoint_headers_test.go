package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/verify"
)

// TestEndpointHeaders: an endpoint's custom headers reach its receiver
// on a normal delivery, a test event and the verification challenge
// (the endpoint requires verification, so the challenge comes first),
// each beside webhookd's own headers; a PATCH that changes a value is
// what the next request carries. Every answer masks the values but the
// reveal's, the database file (with a secret key) holds none of them,
// and the process's debug log holds none, from start to stop, refusals
// included. On bbolt, rotate-key re-seals them and the deliveries after
// it still carry them.
func TestEndpointHeaders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeKey := func(name string) string {
		var k [32]byte
		rand.Read(k[:])
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(base64.StdEncoding.EncodeToString(k[:])+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	oldKey, newKey := writeKey("old.key"), writeKey("new.key")
	config := func(key string) string {
		return withDelivery(testConfig, "require_endpoint_verification = true") + "[storage]\nsecret_key_file = \"" + key + "\"\n"
	}
	in := startInstance(t, dir, config(oldKey))
	in.setup()

	const (
		token  = "Bearer e2e-hdr-token-7e3f9a1c5b2d8e4f6a0c"
		tenant = "e2e-tenant-value-4b8d"
		token2 = "Bearer e2e-hdr-token-rotated-1a2b3c4d5e"
	)
	var secret atomic.Pointer[string]
	rc := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if nonce := r.Header.Get("webhook-challenge"); nonce != "" {
			if s := secret.Load(); s != nil {
				resp, _ := verify.ChallengeResponse(*s, nonce)
				w.Header().Set("webhook-challenge-response", resp)
			}
		}
		w.WriteHeader(http.StatusOK)
	})
	var ep struct {
		ID      string            `json:"id"`
		Secret  string            `json:"secret"`
		Headers map[string]string `json:"headers"`
	}
	in.mustCall(201, "POST", "/v1/tenants/acme/endpoints", map[string]any{"url": rc.srv.URL + "/in", "event_types": []string{"*"},
		"headers": map[string]string{"authorization": token, "X-Tenant": tenant}}, &ep)
	secret.Store(&ep.Secret)
	masked := map[string]string{"Authorization": "Bearer ••••", "X-Tenant": "••••"}
	if !reflect.DeepEqual(ep.Headers, masked) {
		t.Errorf("create answered headers %v, want %v", ep.Headers, masked)
	}
	epPath := "/v1/tenants/acme/endpoints/" + ep.ID

	// wantHeaders fails unless every request in cs carries the headers
	// with auth as its Authorization, and webhookd's own.
	wantHeaders := func(what string, cs []capture, auth string) {
		t.Helper()
		if len(cs) == 0 {
			t.Fatalf("no %s reached the receiver", what)
		}
		for i, c := range cs {
			if got := c.header.Values("Authorization"); !reflect.DeepEqual(got, []string{auth}) {
				t.Errorf("%s %d: Authorization %q, want [%q]", what, i, got, auth)
			}
			if got := c.header.Get("X-Tenant"); got != tenant {
				t.Errorf("%s %d: X-Tenant %q, want %q", what, i, got, tenant)
			}
			if c.header.Get("User-Agent") == "" {
				t.Errorf("%s %d: no User-Agent", what, i)
			}
		}
	}
	challenges := func() []capture {
		var out []capture
		for _, c := range rc.requests() {
			if c.header.Get("webhook-challenge") != "" {
				out = append(out, c)
			}
		}
		return out
	}

	// A normal delivery: the challenge, then the event.
	ev := in.ingest("payment.succeeded", `{"n":1}`)
	in.waitState(ev.Deliveries[0].ID, "succeeded")
	wantHeaders("challenge", challenges(), token)
	wantHeaders("delivery", rc.deliveries(), token)
	for _, c := range rc.deliveries() {
		if std, x, ours := verifiesWith(c, ep.Secret); !std || !x || !ours {
			t.Errorf("a delivery with custom headers does not verify: %v %v %v", std, x, ours)
		}
	}

	// A test event.
	var te ingestResponse
	in.mustCall(202, "POST", epPath+"/test-events", map[string]string{}, &te)
	in.waitState(te.Deliveries[0].ID, "succeeded")
	wantHeaders("test event", rc.deliveries()[1:], token)

	// The challenge again, asked for.
	n := len(challenges())
	var v struct {
		Verified bool `json:"verified"`
	}
	in.mustCall(200, "POST", epPath+"/verify", nil, &v)
	if !v.Verified || len(challenges()) != n+1 {
		t.Fatalf("verify: %+v, %d challenges, want verified by one more", v, len(challenges())-n)
	}
	wantHeaders("asked-for challenge", challenges()[n:], token)

	// A change of one value is what the next delivery carries.
	in.mustCall(200, "PATCH", epPath, map[string]any{"headers": map[string]string{"Authorization": token2}}, nil)
	ev = in.ingest("payment.succeeded", `{"n":2}`)
	in.waitState(ev.Deliveries[0].ID, "succeeded")
	ds := rc.deliveries()
	wantHeaders("delivery after a PATCH", ds[len(ds)-1:], token2)

	// Masked everywhere but the reveal.
	var got struct {
		Headers map[string]string `json:"headers"`
	}
	in.mustCall(200, "GET", epPath, nil, &got)
	if !reflect.DeepEqual(got.Headers, masked) {
		t.Errorf("GET answered headers %v, want %v", got.Headers, masked)
	}
	in.mustCall(200, "POST", epPath+"/secret/reveal", nil, &got)
	if want := map[string]string{"Authorization": token2, "X-Tenant": tenant}; !reflect.DeepEqual(got.Headers, want) {
		t.Errorf("the reveal answered %v, want %v", got.Headers, want)
	}
	// Refusals that carry a value: their answers and the log hold none.
	var p struct{ Detail, Field string }
	if code := in.call("PATCH", epPath, map[string]any{"headers": map[string]string{"X-Tenant": tenant + "\r\nX-Injected: " + tenant}}, &p); code != 422 || p.Field != "headers.X-Tenant" || strings.Contains(p.Detail, tenant) {
		t.Errorf("a CRLF value: %d %+v, want 422 naming headers.X-Tenant without the value", code, p)
	}
	if code := in.call("PATCH", epPath, map[string]any{"headers": map[string]string{"Host": tenant}}, &p); code != 422 || p.Field != "headers.Host" || strings.Contains(p.Detail, tenant) {
		t.Errorf("a reserved header: %d %+v, want 422 naming headers.Host without the value", code, p)
	}
	in.stop()

	values := []string{token, token2, tenant, strings.TrimPrefix(token, "Bearer "), strings.TrimPrefix(token2, "Bearer ")}
	logs := in.logs.String()
	if !strings.Contains(logs, "level=DEBUG") {
		t.Fatal("the logs have no debug lines: the test does not look where it should")
	}
	for _, s := range values {
		if strings.Contains(logs, s) {
			t.Errorf("the log holds a header value (%d characters)", len(s))
		}
	}
	if onPostgres {
		return // at rest and rotate-key on postgres: the postgres package's tests
	}
	dbPath := filepath.Join(dir, "webhookd.db")
	raw, err := os.ReadFile(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range values {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("the database file holds a header value (%d characters)", len(s))
		}
	}

	// rotate-key re-seals them: after it, a delivery still carries them.
	oldB64, _ := os.ReadFile(oldKey)
	cfgPath := filepath.Join(dir, "plain.toml")
	os.WriteFile(cfgPath, []byte(testConfig), 0o600)
	if _, err := commandEnv(t, 5*time.Minute, []string{"WEBHOOKD_SECRET_KEY=" + string(oldB64)}, "rotate-key", "-config", cfgPath, "-db", dbPath, "-new-key-file", newKey); err != nil {
		t.Fatalf("rotate-key: %v", err)
	}
	in = startInstance(t, dir, config(newKey))
	ev = in.ingest("payment.succeeded", `{"n":3}`)
	in.waitState(ev.Deliveries[0].ID, "succeeded")
	ds = rc.deliveries()
	wantHeaders("delivery after rotate-key", ds[len(ds)-1:], token2)
	in.stop()
	if raw, err := os.ReadFile(dbPath); err != nil || bytes.Contains(raw, []byte(tenant)) || bytes.Contains(raw, []byte(token2)) {
		t.Errorf("after rotate-key the file holds a header value (%v)", err)
	}
	for _, s := range values {
		if strings.Contains(in.logs.String(), s) {
			t.Errorf("the log after rotate-key holds a header value (%d characters)", len(s))
		}
	}
}
