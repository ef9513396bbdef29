package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/webhookd/webhookd/verify"
)

// The end-to-end tests of the security story: README "Security" names
// each. They run the webhookd binary, like the delivery tests.

// strictConfig is testConfig with the built-in target policy: https only,
// no private addresses.
var strictConfig = strings.NewReplacer(
	"allow_http = true ", "allow_http = false",
	"allow_private_targets = true ", "allow_private_targets = false",
).Replace(testConfig)

// withDelivery returns config with lines added to its [delivery] section.
func withDelivery(config string, lines ...string) string {
	return strings.Replace(config, "[delivery]\n", "[delivery]\n"+strings.Join(lines, "\n")+"\n", 1)
}

// capture is one request a recorder got.
type capture struct {
	header http.Header
	body   []byte
}

// recorder is a loopback endpoint that keeps every request and answers
// with answer (nil: 204).
type recorder struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []capture
	answer func(w http.ResponseWriter, r *http.Request)
}

func newRecorder(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *recorder {
	rc := &recorder{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, capture{header: r.Header.Clone(), body: body})
		answer := rc.answer
		rc.mu.Unlock()
		if answer == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		answer(w, r)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *recorder) requests() []capture {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]capture(nil), rc.got...)
}

func (rc *recorder) setAnswer(a func(w http.ResponseWriter, r *http.Request)) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.answer = a
}

// deliveries returns the requests that carried an event (not challenges).
func (rc *recorder) deliveries() []capture {
	var out []capture
	for _, c := range rc.requests() {
		if c.header.Get("webhook-challenge") == "" {
			out = append(out, c)
		}
	}
	return out
}

// verifiesWith reports whether the request verifies with secret under
// each scheme: the official Standard Webhooks library, stripe-go's
// t=…,v1=… verifier and this repository's verify.Verifier on the
// X-Webhook-Signature header alone.
func verifiesWith(c capture, secret string) (standard, stripe, ours bool) {
	if wh, err := standardwebhooks.NewWebhook(secret); err == nil {
		standard = wh.Verify(c.body, c.header) == nil
	}
	stripe = stripewebhook.ValidatePayloadWithTolerance(c.body, c.header.Get("X-Webhook-Signature"), secret, 5*time.Minute) == nil
	onlyX := http.Header{"X-Webhook-Signature": c.header.Values("X-Webhook-Signature")}
	_, err := (&verify.Verifier{Secrets: []string{secret}}).Verify(onlyX, c.body)
	ours = err == nil
	return standard, stripe, ours
}

type secretAnswer struct {
	Secret                string    `json:"secret"`
	Environment           string    `json:"environment"`
	PreviousSecretExpires time.Time `json:"previous_secret_expires"`
}

// TestSecurity_RotationAndRevocation rotates an endpoint's secret with a
// grace window and checks, with the official Standard Webhooks library and
// two t=…,v1=… verifiers, that the old key verifies during the window and
// not after it, and that a revocation or a zero grace drops old keys at
// once.
func TestSecurity_RotationAndRevocation(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	rc := newRecorder(t, nil)
	ep := in.createEndpoint(rc.srv.URL, "*")
	epPath := "/v1/tenants/acme/endpoints/" + ep.ID

	deliver := func() capture {
		t.Helper()
		n := len(rc.requests())
		ev := in.ingest("invoice.paid", `{"n":1}`)
		in.waitState(ev.Deliveries[0].ID, "succeeded")
		reqs := rc.requests()
		if len(reqs) != n+1 {
			t.Fatalf("%d requests, want %d", len(reqs), n+1)
		}
		return reqs[n]
	}
	want := func(t *testing.T, c capture, secret string, ok bool, what string) {
		t.Helper()
		s, x, o := verifiesWith(c, secret)
		if s != ok || x != ok || o != ok {
			t.Errorf("%s: verifies with standardwebhooks %v, stripe-go %v, verify.Verifier %v; want %v", what, s, x, o, ok)
		}
	}
	entries := func(c capture) (std, x int) {
		return len(strings.Fields(c.header.Get("webhook-signature"))), strings.Count(c.header.Get("X-Webhook-Signature"), "v1=")
	}

	first := deliver()
	want(t, first, ep.Secret, true, "before rotation, the first key")

	var rot secretAnswer
	in.mustCall(200, "POST", epPath+"/secret/rotate", map[string]string{"grace": "2s"}, &rot)
	if rot.Secret == ep.Secret || !strings.HasPrefix(rot.Secret, "whsec_") || rot.Environment != "live" {
		t.Fatalf("rotate answered %+v", rot)
	}
	rotatedAt := time.Now()
	t.Run("during grace: both keys, both verify", func(t *testing.T) {
		c := deliver()
		if std, x := entries(c); std != 2 || x != 2 {
			t.Errorf("signature entries: webhook-signature %d, X-Webhook-Signature %d; want 2 each", std, x)
		}
		want(t, c, ep.Secret, true, "old key during grace")
		want(t, c, rot.Secret, true, "new key during grace")
	})
	// The grace window passing is what the next case tests.
	time.Sleep(time.Until(rotatedAt.Add(2100 * time.Millisecond)))
	t.Run("after grace: the new key only", func(t *testing.T) {
		c := deliver()
		if std, x := entries(c); std != 1 || x != 1 {
			t.Errorf("signature entries %d, %d; want 1 each", std, x)
		}
		want(t, c, ep.Secret, false, "old key after grace")
		want(t, c, rot.Secret, true, "new key after grace")
	})
	t.Run("revoke: the old keys stop at once", func(t *testing.T) {
		var again, rev secretAnswer
		in.mustCall(200, "POST", epPath+"/secret/rotate", map[string]string{"grace": "24h"}, &again)
		in.mustCall(200, "POST", epPath+"/secret/revoke", nil, &rev)
		c := deliver()
		if std, x := entries(c); std != 1 || x != 1 {
			t.Errorf("signature entries %d, %d; want 1 each", std, x)
		}
		want(t, c, rev.Secret, true, "the revocation's new key")
		want(t, c, again.Secret, false, "the revoked key")
		want(t, c, rot.Secret, false, "the key in its grace window at revocation")
	})
	t.Run("grace 0s: the old key stops at once", func(t *testing.T) {
		var rot0 secretAnswer
		in.mustCall(200, "POST", epPath+"/secret/rotate", map[string]string{"grace": "0s"}, &rot0)
		c := deliver()
		if std, _ := entries(c); std != 1 {
			t.Errorf("%d signature entries, want 1", std)
		}
		want(t, c, rot0.Secret, true, "the new key")
	})
}

// TestSecurity_TargetsRefusedAtCreate: with the built-in policy, an
// endpoint URL that is plain http or names an internal address is refused
// when it is created, with a problem that names the setting.
func TestSecurity_TargetsRefusedAtCreate(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), strictConfig)
	in.setup()
	for _, u := range []string{
		"http://hooks.example.com/in", "https://127.0.0.1:8443/in", "https://localhost/in",
		"https://[::1]/in", "https://10.1.2.3/in", "https://169.254.169.254/latest/meta-data",
		"https://100.64.0.1/", "https://0.0.0.0/", "https://[::ffff:127.0.0.1]/",
	} {
		var p struct{ Code, Field, Detail string }
		if got := in.call("POST", "/v1/tenants/acme/endpoints", map[string]any{"url": u, "event_types": []string{"*"}}, &p); got != 422 || p.Code != "invalid_field" || p.Field != "url" || !strings.Contains(p.Detail, "allow_") {
			t.Errorf("%s: %d %+v, want 422 invalid_field url naming the setting", u, got, p)
		}
	}
	var list struct{ Data []any }
	in.mustCall(200, "GET", "/v1/tenants/acme/endpoints", nil, &list)
	if len(list.Data) != 0 {
		t.Errorf("%d endpoints stored", len(list.Data))
	}
}

// TestSecurity_TargetsRefusedAtDial: an endpoint accepted when it was
// created (the policy allowed it then, or DNS pointed elsewhere) is still
// refused on the address actually dialled: "localhost" resolves to
// 127.0.0.1, which the dialer's Control hook refuses, and the receiver
// never sees a request. The reason names the host, not the address it
// resolved to.
func TestSecurity_TargetsRefusedAtDial(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := startInstance(t, dir, testConfig)
	in.setup()
	rc := newRecorder(t, nil)
	port := rc.srv.URL[strings.LastIndex(rc.srv.URL, ":"):]
	viaName := in.createEndpoint("http://localhost"+port+"/hooks", "payment.succeeded")
	plain := in.createEndpoint(rc.srv.URL+"/plain", "invoice.paid")
	_ = plain
	in.stop()

	// The same file under the strict policy for addresses only.
	in = startInstance(t, dir, strings.Replace(testConfig, "allow_private_targets = true ", "allow_private_targets = false", 1))
	ev := in.ingest("payment.succeeded", `{"n":1}`)
	d := in.waitState(ev.Deliveries[0].ID, "dead")
	// "localhost" may resolve to 127.0.0.1 or ::1: both are refused.
	if len(d.Attempts) != 1 || !strings.Contains(d.Reason, "host localhost resolves to a non-public address") || !strings.Contains(d.Reason, "allow_private_targets") || strings.Contains(d.Reason, "127.0.0.1") {
		t.Errorf("delivery to %s: %d attempts, reason %q; want one refused attempt naming the host (not its address) and the setting", viaName.ID, len(d.Attempts), d.Reason)
	}
	in.stop()

	// And under the strict policy for schemes only.
	in = startInstance(t, dir, strings.Replace(testConfig, "allow_http = true ", "allow_http = false", 1))
	ev = in.ingest("invoice.paid", `{"n":2}`)
	d = in.waitState(ev.Deliveries[0].ID, "dead")
	if !strings.Contains(d.Reason, "plain http is not allowed") {
		t.Errorf("plain http delivery: reason %q", d.Reason)
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("the receiver got %d requests; every one should have been refused before it was sent", n)
	}
}

// TestSecurity_Transport: redirects are not followed, a response body is
// read up to a cap, and the attempt timeout covers the body.
func TestSecurity_Transport(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	target := newRecorder(t, nil)
	redirect := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.srv.URL+"/stolen", http.StatusTemporaryRedirect)
	})
	endless := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				return // webhookd hung up
			}
		}
	})
	trickle := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		for range 20 {
			w.Write([]byte("."))
			http.NewResponseController(w).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	ids := map[string]string{}
	for name, rc := range map[string]*recorder{"redirect": redirect, "endless": endless, "trickle": trickle} {
		in.mustCall(201, "PUT", "/v1/event-types/"+name+".sent", nil, nil)
		in.createEndpoint(rc.srv.URL, name+".sent")
		ids[name] = in.ingest(name+".sent", `{}`).Deliveries[0].ID
	}

	d := in.waitState(ids["redirect"], "dead")
	if d.LastStatus != 307 || len(d.Attempts) != 1 || !strings.Contains(d.Reason, "redirects are not followed") {
		t.Errorf("redirect: status %d, %d attempts, reason %q", d.LastStatus, len(d.Attempts), d.Reason)
	}
	if n := len(target.requests()); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}

	d = in.waitState(ids["endless"], "succeeded")
	var raw struct {
		Attempts []struct {
			Response string `json:"response"`
			Duration millis `json:"duration_ms"`
		} `json:"attempts"`
	}
	in.mustCall(200, "GET", "/v1/tenants/acme/deliveries/"+ids["endless"], nil, &raw)
	if a := raw.Attempts[0]; len(a.Response) != 1024 || time.Duration(a.Duration) >= 300*time.Millisecond {
		t.Errorf("endless body: kept %d bytes in %s; want 1 KiB, well within the 300ms attempt timeout (the rest is not read)", len(a.Response), time.Duration(a.Duration))
	}

	// A 2xx whose body trickles past the timeout stands (2xx = received;
	// a retry would only duplicate it), but the body read is still cut at
	// the attempt timeout.
	d = in.waitState(ids["trickle"], "succeeded")
	if len(d.Attempts) != 1 || d.Attempts[0].Status != 200 {
		t.Errorf("trickled body: attempts %+v, want one 200", d.Attempts)
	}
	in.mustCall(200, "GET", "/v1/tenants/acme/deliveries/"+ids["trickle"], nil, &raw)
	if a := raw.Attempts[0]; time.Duration(a.Duration) < 300*time.Millisecond || time.Duration(a.Duration) > 2*time.Second {
		t.Errorf("trickled body: attempt took %s, want the 300ms timeout to cut the read", time.Duration(a.Duration))
	}
}

// TestSecurity_EndpointVerification: with require_endpoint_verification,
// an endpoint gets the Standard Webhooks challenge before its first
// delivery; one that answers it with the official library's
// EndpointVerificationResponse is verified and delivered to, one that does
// not has its deliveries held as pending, visible in the API, until it
// does.
func TestSecurity_EndpointVerification(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), withDelivery(testConfig, "require_endpoint_verification = true"))
	in.setup()

	var secret atomic.Value
	answerChallenge := func(w http.ResponseWriter, r *http.Request) {
		wh, err := standardwebhooks.NewWebhook(secret.Load().(string))
		if err != nil {
			w.WriteHeader(500)
			return
		}
		if ch := r.Header.Get(standardwebhooks.HeaderWebhookChallenge); ch != "" {
			w.Header().Set(standardwebhooks.HeaderWebhookChallengeResponse, wh.EndpointVerificationResponse(ch))
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	good := newRecorder(t, answerChallenge)
	ep := in.createEndpoint(good.srv.URL, "payment.succeeded")
	secret.Store(ep.Secret)

	type endpointView struct {
		VerificationRequired bool      `json:"verification_required"`
		Verified             time.Time `json:"verified"`
	}
	var view endpointView
	in.mustCall(200, "GET", "/v1/tenants/acme/endpoints/"+ep.ID, nil, &view)
	if !view.VerificationRequired || !view.Verified.IsZero() {
		t.Fatalf("new endpoint %+v, want verification required and not verified", view)
	}
	ev := in.ingest("payment.succeeded", `{"n":1}`)
	in.waitState(ev.Deliveries[0].ID, "succeeded")
	reqs := good.requests()
	if len(reqs) != 2 || reqs[0].header.Get("webhook-challenge") == "" || reqs[1].header.Get("webhook-challenge") != "" {
		t.Fatalf("the endpoint got %d requests, want the challenge and then the event", len(reqs))
	}
	in.mustCall(200, "GET", "/v1/tenants/acme/endpoints/"+ep.ID, nil, &view)
	if view.Verified.IsZero() {
		t.Error("the endpoint is not marked verified")
	}

	// An endpoint that answers 200 but not the challenge.
	deaf := newRecorder(t, nil)
	deafEp := in.createEndpoint(deaf.srv.URL, "invoice.paid")
	ev = in.ingest("invoice.paid", `{"n":2}`)
	id := ev.Deliveries[0].ID
	var d deliveryView
	poll(10*time.Second, func() bool {
		// pending, or delivering while a challenge is in flight
		d = in.delivery(id)
		return d.State == "pending" && strings.Contains(d.Reason, "endpoint not verified") && len(deaf.requests()) >= 2
	})
	if d.State != "pending" || len(d.Attempts) != 0 || d.NextAttemptAt.IsZero() || !strings.Contains(d.Reason, "without a webhook-challenge-response header") {
		t.Fatalf("held delivery: %+v; want pending, no attempt, a next attempt time and the reason", d)
	}
	if n := len(deaf.deliveries()); n != 0 {
		t.Fatalf("the unverified endpoint got %d events", n)
	}
	var vr struct {
		Verified bool
		Reason   string
	}
	in.mustCall(200, "POST", "/v1/tenants/acme/endpoints/"+deafEp.ID+"/verify", nil, &vr)
	if vr.Verified || !strings.Contains(vr.Reason, "webhook-challenge-response") {
		t.Errorf("verify of the deaf endpoint: %+v", vr)
	}

	// It learns to answer; a verify request releases the held delivery.
	secret.Store(deafEp.Secret)
	deaf.setAnswer(answerChallenge)
	in.mustCall(200, "POST", "/v1/tenants/acme/endpoints/"+deafEp.ID+"/verify", nil, &vr)
	if !vr.Verified {
		t.Fatalf("verify: %+v", vr)
	}
	d = in.waitState(id, "succeeded")
	if len(d.Attempts) != 1 {
		t.Errorf("%d attempts, want 1: holding does not count as attempts", len(d.Attempts))
	}
	if n := len(deaf.deliveries()); n != 1 {
		t.Errorf("the endpoint got %d events, want 1", n)
	}
}

// TestSecurity_EndpointVerificationDeadline: a delivery held for an
// endpoint that never answers the challenge is dead at its deadline, with
// a reason that says so, and can be replayed.
func TestSecurity_EndpointVerificationDeadline(t *testing.T) {
	t.Parallel()
	deadline := "1s"
	if onPostgres {
		deadline = "3s" // a retry is a claim from the database: slower on a loaded machine
	}
	cfg := strings.Replace(withDelivery(testConfig, "require_endpoint_verification = true"), `deadline = "30s"`, `deadline = "`+deadline+`"`, 1)
	in := startInstance(t, t.TempDir(), cfg)
	in.setup()
	deaf := newRecorder(t, nil)
	in.createEndpoint(deaf.srv.URL, "*")
	ev := in.ingest("invoice.paid", `{}`)
	d := in.waitState(ev.Deliveries[0].ID, "dead")
	if !strings.Contains(d.Reason, "endpoint not verified within the delivery deadline") || len(deaf.deliveries()) != 0 {
		t.Errorf("dead with reason %q after %d events sent; want the verification reason and none", d.Reason, len(deaf.deliveries()))
	}
	if len(deaf.requests()) < 3 {
		t.Errorf("%d challenges in the deadline, want them repeated", len(deaf.requests()))
	}
}

// TestSecurity_NoSecretsInLogs runs a delivery cycle with failures,
// retries, a dead letter, a replay, a rotation, a reveal, a verification
// failure and refused requests, at debug level, and looks for every secret, token and
// complete signature in the logs and in every error body.
func TestSecurity_NoSecretsInLogs(t *testing.T) {
	t.Parallel()
	testTok := "whk_test_" + strings.Repeat("t", 20)
	cfg := strings.Replace(withDelivery(testConfig, "require_endpoint_verification = false"),
		`tokens = ["test-admin-token-0123456789"]`,
		`tokens = ["test-admin-token-0123456789"]`+"\n"+`test_tokens = ["`+testTok+`"]`+"\ningest_rate = 0.5\ningest_burst = 5", 1)
	in := startInstance(t, t.TempDir(), cfg)
	in.setup()

	var errorBodies []string
	record := func(method, path string, body any, token string, want int) []byte {
		t.Helper()
		var r io.Reader
		if body != nil {
			j, _ := json.Marshal(body)
			r = bytes.NewReader(j)
		}
		req, _ := http.NewRequest(method, in.base+path, r)
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 400 {
			errorBodies = append(errorBodies, string(b))
		}
		if want != 0 && resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
		return b
	}

	var n atomic.Int32
	flaky := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%3 != 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("busy"))
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	denied := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
	var secrets []string
	var created endpointCreated
	json.Unmarshal(record("POST", "/v1/tenants/acme/endpoints", map[string]any{"url": flaky.srv.URL, "event_types": []string{"*"}}, testToken, 201), &created)
	secrets = append(secrets, created.Secret)
	json.Unmarshal(record("POST", "/v1/tenants/acme/endpoints", map[string]any{"url": denied.srv.URL, "event_types": []string{"payment.succeeded"}}, testToken, 201), &created)
	secrets = append(secrets, created.Secret)
	deniedID := created.ID
	var rot secretAnswer
	json.Unmarshal(record("POST", "/v1/tenants/acme/endpoints/"+deniedID+"/secret/rotate", map[string]string{"grace": "1h"}, testToken, 200), &rot)
	secrets = append(secrets, rot.Secret)
	record("POST", "/v1/tenants/acme/endpoints/"+deniedID+"/secret/reveal", nil, testToken, 200)

	// settle waits (10s at most) until none of the deliveries ids is
	// pending or in flight: every attempt they make has been made.
	settle := func(ids []string) {
		deadline := time.Now().Add(10 * time.Second)
		for _, id := range ids {
			poll(time.Until(deadline), func() bool {
				d := in.delivery(id)
				return d.State != "pending" && d.State != "delivering"
			})
		}
	}
	var ids []string
	for i := range 4 {
		var res ingestResponse
		json.Unmarshal(record("POST", "/v1/tenants/acme/events", map[string]any{"type": "payment.succeeded", "data": map[string]int{"i": i}}, testToken, 202), &res)
		for _, d := range res.Deliveries {
			ids = append(ids, d.ID)
		}
	}
	settle(ids)
	record("POST", "/v1/tenants/acme/deliveries/"+ids[1]+"/replay", nil, testToken, 202)
	record("POST", "/v1/tenants/acme/endpoints/"+deniedID+"/verify", nil, testToken, 200)
	// Refusals: wrong and near-miss tokens, a test token on live data, bad input.
	record("GET", "/v1/tenants/acme", nil, testToken+"x", 401)
	record("GET", "/v1/tenants/acme", nil, testToken[:len(testToken)-1], 401)
	record("GET", "/v1/tenants/acme", nil, secrets[0], 401)
	record("GET", "/v1/tenants/acme/endpoints", nil, testTok, 403)
	record("POST", "/v1/tenants/acme/endpoints/"+deniedID+"/secret/reveal", nil, testTok, 403)
	record("POST", "/v1/tenants/acme/events", map[string]any{"type": "payment.succeeded", "data": map[string]string{"leak": secrets[0]}}, testTok, 403)
	record("POST", "/v1/tenants/acme/endpoints/"+deniedID+"/secret/rotate", map[string]string{"grace": secrets[1]}, testToken, 422)
	record("PATCH", "/v1/tenants/acme/endpoints/"+deniedID, map[string]string{"url": "ftp://" + secrets[1]}, testToken, 422)
	last := []string{ids[1]} // replayed above
	for range 10 {
		var res ingestResponse // no deliveries in a refusal (429)
		json.Unmarshal(record("POST", "/v1/tenants/acme/events", map[string]any{"type": "payment.succeeded", "data": 1}, testToken, 0), &res)
		for _, d := range res.Deliveries {
			last = append(last, d.ID)
		}
	}
	settle(last) // so that their attempts are in the logs
	in.stop()

	// Everything secret that went by: secrets, tokens, and each complete
	// signature the receivers got (both header values and every entry).
	forbidden := append([]string{testToken, testTok}, secrets...)
	for _, s := range secrets {
		forbidden = append(forbidden, strings.TrimPrefix(s, "whsec_"))
	}
	sigEntry := regexp.MustCompile(`v1[,=]([A-Za-z0-9+/=]{40,})`)
	for _, rc := range []*recorder{flaky, denied} {
		for _, c := range rc.requests() {
			for _, h := range []string{"webhook-signature", "X-Webhook-Signature"} {
				v := c.header.Get(h)
				forbidden = append(forbidden, v)
				for _, m := range sigEntry.FindAllStringSubmatch(v, -1) {
					forbidden = append(forbidden, m[1])
				}
			}
		}
	}
	if len(forbidden) < 20 {
		t.Fatalf("the test saw only %d secrets and signatures", len(forbidden))
	}
	logs := in.logs.String()
	if !strings.Contains(logs, "level=DEBUG") {
		t.Fatal("the logs have no debug lines: the test does not look where it should")
	}
	for _, s := range forbidden {
		if s == "" {
			continue
		}
		if strings.Contains(logs, s) {
			t.Errorf("the logs contain a secret, token or signature (%d characters)", len(s))
		}
		for _, b := range errorBodies {
			if strings.Contains(b, s) {
				t.Errorf("an error body contains a secret, token or signature: %.80s…", b)
			}
		}
	}
	if len(errorBodies) < 8 {
		t.Errorf("only %d error bodies were checked", len(errorBodies))
	}
}

// TestSecurity_EncryptionAtRest: with a master key, a copy of the database
// file holds no endpoint secret; without the key webhookd refuses to
// start, with a message that says what to do; rotate-key re-encrypts under
// a new key, and deliveries keep verifying with the secrets the endpoints
// had.
func TestSecurity_EncryptionAtRest(t *testing.T) {
	skipOnPostgres(t, "reads the bbolt file's bytes and rotate-key re-encrypts it (sealing on postgres: the postgres package's tests)")
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
	keyed := func(path string) string {
		return testConfig + fmt.Sprintf("[storage]\nsecret_key_file = %q\n", path)
	}
	in := startInstance(t, dir, keyed(oldKey))
	in.setup()
	rc := newRecorder(t, nil)
	ep := in.createEndpoint(rc.srv.URL, "*")
	var rot secretAnswer
	in.mustCall(200, "POST", "/v1/tenants/acme/endpoints/"+ep.ID+"/secret/rotate", map[string]string{"grace": "1h"}, &rot)
	in.stop()

	dbPath := filepath.Join(dir, "webhookd.db")
	raw, err := os.ReadFile(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{ep.Secret, rot.Secret} {
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if bytes.Contains(raw, []byte(strings.TrimPrefix(s, "whsec_"))) || bytes.Contains(raw, key) {
			t.Error("the database file holds an endpoint secret")
		}
	}

	runErr := func(config string, env []string, args ...string) error {
		cfgPath := filepath.Join(dir, "other.toml")
		os.WriteFile(cfgPath, []byte(config), 0o600)
		_, err := commandEnv(t, 5*time.Second, env, append([]string{"-config", cfgPath, "-listen", "127.0.0.1:0", "-db", dbPath}, args...)...)
		return err
	}
	var noEnv []string
	err = runErr(testConfig, noEnv)
	if err == nil || !strings.Contains(err.Error(), "encrypted") || !strings.Contains(err.Error(), "WEBHOOKD_SECRET_KEY") {
		t.Fatalf("start without the key: %v; want a refusal that says the secrets are encrypted and how to give the key", err)
	}
	if err = runErr(keyed(newKey), noEnv); err == nil || !strings.Contains(err.Error(), "rotate-key") {
		t.Fatalf("start with another key: %v; want a refusal naming rotate-key", err)
	}
	oldB64, _ := os.ReadFile(oldKey)
	env := []string{"WEBHOOKD_SECRET_KEY=" + string(oldB64)}
	cfgPath := filepath.Join(dir, "plain.toml")
	os.WriteFile(cfgPath, []byte(testConfig), 0o600)
	out, err := commandEnv(t, 5*time.Minute, env, "rotate-key", "-config", cfgPath, "-db", dbPath, "-new-key-file", newKey)
	if err != nil {
		t.Fatalf("rotate-key: %v", err)
	}
	if !strings.Contains(out, "re-encrypted the secrets of 1 endpoints") || strings.Contains(out, strings.TrimSpace(string(oldB64))) {
		t.Errorf("rotate-key printed %q", out)
	}

	in = startInstance(t, dir, keyed(newKey))
	ev := in.ingest("invoice.paid", `{"after":"rotate-key"}`)
	in.waitState(ev.Deliveries[0].ID, "succeeded")
	c := rc.requests()[len(rc.requests())-1]
	for _, s := range []string{rot.Secret, ep.Secret} { // the new key, and the old in its grace window
		if std, x, ours := verifiesWith(c, s); !std || !x || !ours {
			t.Errorf("after rotate-key the delivery does not verify with a key it had: %v %v %v", std, x, ours)
		}
	}
}

// TestSecurity_HeaderAndBodyCaps: a request whose line and headers are
// over 64 KiB is a 431 problem (headers_too_large), as every other error;
// over 1 MiB Go's server refuses it before any handler, with a 431 in plain
// text, the one answer that is not problem+json. Bodies over max_body are
// a 413 problem.
func TestSecurity_HeaderAndBodyCaps(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	head := func(padding int) (int, string, []byte) {
		t.Helper()
		conn, err := net.Dial("tcp", strings.TrimPrefix(in.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		// Written in the background: Go's server answers a head over its
		// bound before it has read it all.
		go fmt.Fprintf(conn, "GET /v1/tenants/acme HTTP/1.1\r\nHost: webhookd.test\r\nAuthorization: Bearer %s\r\nX-Padding: %s\r\n\r\n", testToken, strings.Repeat("p", padding))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), b
	}
	if status, _, b := head(60 << 10); status != http.StatusOK {
		t.Errorf("60 KiB of headers: %d %s, want 200", status, b)
	}
	status, ctype, b := head(80 << 10)
	var problem struct{ Code string }
	json.Unmarshal(b, &problem)
	if status != http.StatusRequestHeaderFieldsTooLarge || ctype != "application/problem+json" || problem.Code != "headers_too_large" {
		t.Errorf("80 KiB of headers: %d %s %s, want 431 application/problem+json headers_too_large", status, ctype, b)
	}
	if status, ctype, b := head(2 << 20); status != http.StatusRequestHeaderFieldsTooLarge || strings.HasPrefix(ctype, "application/problem+json") {
		t.Errorf("2 MiB of headers: %d %s %s, want Go's own 431, in plain text", status, ctype, b)
	}
	var p struct{ Code string }
	if got := in.call("POST", "/v1/tenants/acme/events", `{"type":"invoice.paid","data":"`+strings.Repeat("x", 300<<10)+`"}`, &p); got != 413 || p.Code != "body_too_large" {
		t.Errorf("a 300 KiB body: %d %q, want 413 body_too_large", got, p.Code)
	}
}
