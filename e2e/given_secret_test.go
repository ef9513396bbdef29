package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// TestGivenSecret: a team moving from Svix brings each endpoint's
// secret, so its customers' receivers verify webhookd's deliveries with
// the key they already have. The binary takes Svix's bare base64 at
// create and answers it as whsec_…; the delivery verifies with that key
// in the official Standard Webhooks and Stripe-scheme libraries; a
// rotation to a given secret signs with it (and the old one through the
// grace); a secret too short, not base64, or one the endpoint signs with
// already is 422 invalid_field naming secret, with none of the value in
// the answer, and changes nothing; no secret reaches the log.
func TestGivenSecret(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	key := func(n int) []byte { b := make([]byte, n); rand.Read(b); return b }
	bare := base64.StdEncoding.EncodeToString(key(24)) // as Svix shows a secret without its prefix
	rc := newReceiver(t, status(204))
	rc.setSecret("whsec_" + bare)

	var ep endpointCreated
	in.mustCall(201, "POST", "/v1/tenants/acme/endpoints", map[string]any{"url": rc.srv.URL + "/in", "event_types": []string{"*"}, "secret": bare}, &ep)
	if ep.Secret != "whsec_"+bare {
		t.Fatalf("create answered secret %.10s…, want whsec_ + the given base64", ep.Secret)
	}
	in.waitState(in.ingest("payment.succeeded", `{"n":1}`).Deliveries[0].ID, "succeeded")

	refused := func(what, method, path string, body map[string]any, value string) {
		t.Helper()
		var p struct {
			Code, Field, Detail string
		}
		var raw json.RawMessage
		if got := in.call(method, path, body, &raw); got != 422 {
			t.Errorf("%s: status %d, want 422: %s", what, got, raw)
			return
		}
		json.Unmarshal(raw, &p)
		if p.Code != "invalid_field" || p.Field != "secret" {
			t.Errorf("%s: %s, want invalid_field naming secret", what, raw)
		}
		if v := strings.TrimPrefix(value, "whsec_"); strings.Contains(string(raw), v) {
			t.Errorf("%s: the answer shows the secret: %s", what, raw)
		}
	}
	short := "whsec_" + base64.StdEncoding.EncodeToString(key(16))
	for _, bad := range []string{short, "whsec_this is not base64 but a passphrase", "whsec_" + base64.StdEncoding.EncodeToString(key(65))} {
		refused("create with a bad secret", "POST", "/v1/tenants/acme/endpoints", map[string]any{"url": rc.srv.URL + "/other", "event_types": []string{"*"}, "secret": bad}, bad)
	}
	if n := in.countList("/v1/tenants/acme/endpoints"); n != 1 {
		t.Errorf("%d endpoints after the refused creates, want 1", n)
	}

	// The secret the endpoint rotated to on the other service: webhookd
	// signs with it, and with the old one through the grace window.
	next := "whsec_" + base64.StdEncoding.EncodeToString(key(32))
	rot := "/v1/tenants/acme/endpoints/" + ep.ID + "/secret/rotate"
	var res struct {
		Secret string `json:"secret"`
	}
	in.mustCall(200, "POST", rot, map[string]any{"grace": "1h", "secret": next}, &res)
	if res.Secret != next {
		t.Fatalf("rotation answered %.10s…, want the given secret", res.Secret)
	}
	refused("rotation to the current secret", "POST", rot, map[string]any{"secret": next}, next)
	refused("rotation to the secret in its grace", "POST", rot, map[string]any{"secret": bare}, bare)
	refused("rotation to a short secret", "POST", rot, map[string]any{"secret": short}, short)
	rc.setSecret(next)
	in.waitState(in.ingest("payment.succeeded", `{"n":2}`).Deliveries[0].ID, "succeeded")
	rc.setSecret("whsec_" + bare) // the old key signs too, in its grace
	in.waitState(in.ingest("payment.succeeded", `{"n":3}`).Deliveries[0].ID, "succeeded")
	if got := rc.got(); len(got) != 3 {
		t.Errorf("the receiver got %d requests, want 3", len(got))
	}
	rc.checkSignatures()

	in.stop()
	for _, s := range []string{bare, next, short} {
		if strings.Contains(in.logs.String(), strings.TrimPrefix(s, "whsec_")) {
			t.Errorf("a secret is in the log")
		}
	}
}
