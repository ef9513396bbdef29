package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/storage"
	"github.com/webhookd/webhookd/verify"
)

// revealJSON is the answer of POST …/secret/reveal.
type revealJSON struct {
	Secret   string `json:"secret"`
	Previous []struct {
		Secret  string    `json:"secret"`
		Expires time.Time `json:"expires"`
	} `json:"previous"`
	Environment string `json:"environment"`
}

// received is what a loopback receiver got: each request's headers and
// body.
type received struct {
	mu   sync.Mutex
	reqs []receivedRequest
}

type receivedRequest struct {
	header http.Header
	body   []byte
}

func (rc *received) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, receivedRequest{r.Header.Clone(), b})
	rc.mu.Unlock()
}

// wait returns the first n requests, failing t after ten seconds.
func (rc *received) wait(t *testing.T, n int) []receivedRequest {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		rc.mu.Lock()
		got := rc.reqs
		rc.mu.Unlock()
		if len(got) >= n {
			return got[:n]
		}
	}
	t.Fatalf("the receiver got fewer than %d requests", n)
	return nil
}

// newDeliveringEnv is newSecurityEnv over a database whose secrets are
// sealed with a key, with a running dispatcher that may send to loopback
// receivers, and every log line at debug level kept.
func newDeliveringEnv(t *testing.T) (*apiEnv, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db")
	key := bytes.Repeat([]byte{7}, storage.SecretKeySize)
	db, err := storage.Open(path, storage.Options{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	logs := new(syncBuffer)
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	open := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	disp := engine.NewDispatcher(db, engine.DispatcherOptions{Targets: open, Logger: logger})
	if err := disp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		disp.Stop(ctx)
		db.Close()
	})
	svc := engine.NewService(db, disp, engine.ServiceOptions{Targets: open})
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{
		Tokens: []string{testToken, liveToken}, TestTokens: []string{testEnvTk},
		MaxBody: maxBody, Logger: logger,
	}))
	t.Cleanup(srv.Close)
	return &apiEnv{t: t, db: db, svc: svc, srv: srv, logs: logs}, path
}

// TestSecret_Reveal: POST …/secret/reveal shows the keys an endpoint
// signs with now (the one a real delivery is signed with; after a
// rotation with grace, the old one beside it), with Cache-Control:
// no-store, from a database that keeps them sealed; every reveal is
// recorded on the endpoint (who, when, in the API's time format) and
// logged without the secret; unknown endpoints and principals that may
// not use the endpoint's routes are refused.
func TestSecret_Reveal(t *testing.T) {
	e, dbPath := newDeliveringEnv(t)
	rc := &received{}
	receiver := httptest.NewServer(rc)
	t.Cleanup(receiver.Close)
	e.must(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme"}`}, 201, nil)
	e.must(req{method: "PUT", path: "/v1/tenants/globex", body: `{"name":"Globex"}`}, 201, nil)
	e.must(req{method: "PUT", path: "/v1/event-types/payment.succeeded"}, 201, nil)
	var ep endpointJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"` + receiver.URL + `/in","event_types":["*"]}`}, 201, &ep)
	path := "/v1/tenants/acme/endpoints/" + ep.ID + "/secret/reveal"

	var rev revealJSON
	r := e.must(req{method: "POST", path: path}, 200, &rev)
	if rev.Secret != ep.Secret || rev.Previous == nil || len(rev.Previous) != 0 || rev.Environment != "live" {
		t.Fatalf("reveal = %s; want the secret made at create, previous [], environment live", r.body)
	}
	if got := r.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("a reveal answered with Cache-Control %q, want no-store", got)
	}
	if raw, err := os.ReadFile(dbPath); err != nil || bytes.Contains(raw, []byte(ep.Secret)) || bytes.Contains(raw, []byte("whsec_")) {
		t.Errorf("the database file holds the secret in plain (%v): it must be sealed at rest", err)
	}

	// The revealed key verifies what the endpoint really receives.
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{"n":1}}`}, 202, nil)
	got := rc.wait(t, 1)[0]
	if _, err := (&verify.Verifier{Secrets: []string{rev.Secret}}).Verify(got.header, got.body); err != nil {
		t.Errorf("the revealed secret does not verify a delivery: %v", err)
	}

	// After a rotation with grace, both keys sign, and both are shown.
	var rot struct {
		Secret                string    `json:"secret"`
		PreviousSecretExpires time.Time `json:"previous_secret_expires"`
	}
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints/" + ep.ID + "/secret/rotate", body: `{"grace":"1h"}`}, 200, &rot)
	rev = revealJSON{}
	e.must(req{method: "POST", path: path, body: `{}`}, 200, &rev)
	if rev.Secret != rot.Secret || len(rev.Previous) != 1 || rev.Previous[0].Secret != ep.Secret || !rev.Previous[0].Expires.Equal(rot.PreviousSecretExpires) {
		t.Errorf("reveal during the grace window = %+v; want the new secret and the old one until %v", rev, rot.PreviousSecretExpires)
	}
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{"n":2}}`}, 202, nil)
	got = rc.wait(t, 2)[1]
	for _, key := range []string{rev.Secret, rev.Previous[0].Secret} {
		if _, err := (&verify.Verifier{Secrets: []string{key}}).Verify(got.header, got.body); err != nil {
			t.Errorf("a revealed key does not verify a delivery in the grace window: %v", err)
		}
	}

	// A tenant token may reveal its own tenant's secrets; it is recorded
	// by its name.
	tok := e.issue("acme", "")
	e.must(req{method: "POST", path: path, header: bearer(tok.Token)}, 200, nil)

	// The trail: on the endpoint, oldest first, in the API's time format.
	ans := e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints/" + ep.ID}, 200, nil)
	var trail struct {
		SecretReveals []struct {
			At time.Time `json:"at"`
			By string    `json:"by"`
		} `json:"secret_reveals"`
	}
	if err := json.Unmarshal(ans.body, &trail); err != nil {
		t.Fatal(err)
	}
	if n := len(trail.SecretReveals); n != 3 || trail.SecretReveals[0].By != "admin" || trail.SecretReveals[1].By != "admin" || trail.SecretReveals[2].By != "token "+tok.ID {
		t.Errorf("secret_reveals = %+v; want admin, admin, token %s", trail.SecretReveals, tok.ID)
	}
	if m := regexp.MustCompile(`"secret_reveals":\[\{"at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z","by":"admin"\}`).Find(ans.body); m == nil {
		t.Errorf("secret_reveals is not in the API's time format (three fraction digits, UTC):\n%s", ans.body)
	}
	if bytes.Contains(ans.body, []byte("whsec_")) {
		t.Errorf("GET endpoint shows a secret: %s", ans.body)
	}

	t.Run("refused", func(t *testing.T) {
		checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/acme/endpoints/ep_nope/secret/reveal"}), 404, engine.CodeEndpointNotFound, "id")
		checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/globex/endpoints/" + ep.ID + "/secret/reveal"}), 404, engine.CodeEndpointNotFound, "id")
		checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/nobody/endpoints/" + ep.ID + "/secret/reveal"}), 404, engine.CodeTenantNotFound, "tenant")
		checkProblem(t, e.do(req{method: "POST", path: path, header: map[string]string{"Authorization": "-"}}), 401, engine.CodeUnauthorized, "")
		checkProblem(t, e.do(req{method: "POST", path: path, header: bearer(testEnvTk)}), 403, engine.CodeForbidden, "tenant")
		checkProblem(t, e.do(req{method: "POST", path: path, header: bearer(e.issue("globex", "").Token)}), 403, engine.CodeForbidden, "")
		checkProblem(t, e.do(req{method: "POST", path: path, body: `{"all":true}`}), 422, engine.CodeInvalidField, "all")
		checkProblem(t, e.do(req{method: "GET", path: path}), 405, engine.CodeMethodNotAllowed, "")
		var after struct {
			SecretReveals []struct{ By string } `json:"secret_reveals"`
		}
		e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints/" + ep.ID}, 200, &after)
		if len(after.SecretReveals) != 3 {
			t.Errorf("refused reveals were recorded: %d reveals, want 3", len(after.SecretReveals))
		}
	})

	t.Run("logged, without the secret", func(t *testing.T) {
		logs := e.logs.String()
		lines := 0
		for line := range strings.Lines(logs) {
			if strings.Contains(line, "endpoint secret revealed") {
				lines++
				if !strings.Contains(line, "level=INFO") || !strings.Contains(line, "tenant=acme") || !strings.Contains(line, "endpoint="+ep.ID) || !strings.Contains(line, "by=") {
					t.Errorf("reveal log line lacks its level, tenant, endpoint or by: %s", line)
				}
			}
		}
		if lines != 3 {
			t.Errorf("%d reveal log lines, want 3:\n%s", lines, logs)
		}
		for _, leak := range []string{"whsec_", ep.Secret, rot.Secret, tok.Token} {
			if strings.Contains(logs, leak) {
				t.Errorf("the log holds a secret or a token (%.10s…):\n%s", leak, logs)
			}
		}
	})
}

// TestConsole_RevealSecret: "Reveal secret" on an endpoint's page shows
// its secret (and an old one still in its grace window) on a no-store
// page that says the reveal was recorded, the same in an admin's, a
// tenant token's and a portal session's console; the form needs its CSRF
// token; each reveal is recorded by the session's principal, the page
// counts them afterwards (a customer sees "you", never a token or the
// tenant's ID), and nothing shows the secret without a reveal.
func TestConsole_RevealSecret(t *testing.T) {
	e := newConsoleEnv(t)
	ep := e.endpoint
	edit := "/console/t/acme/endpoints/" + ep.ID + "/edit"
	reveal := "/console/t/acme/endpoints/" + ep.ID + "/reveal"
	revealed := regexp.MustCompile(`<code id="secret-revealed">(whsec_[^<]+)</code>`)
	tags := regexp.MustCompile(`(?s)<[^>]*>`)
	text := func(p page) string { return html.UnescapeString(tags.ReplaceAllString(p.body, " ")) }

	// do reveals as b, whose console's landing page is home, and returns
	// the page that shows the secret.
	do := func(t *testing.T, b *browser) page {
		t.Helper()
		before := b.get(edit)
		if before.status != http.StatusOK || !strings.Contains(before.body, `action="`+reveal+`"`) || !strings.Contains(before.body, `id="reveal-secret"`) {
			t.Fatalf("the endpoint's page has no Reveal secret form (%d):\n%s", before.status, before.body)
		}
		if strings.Contains(before.body, "whsec_") {
			t.Fatalf("the endpoint's page shows a secret before a reveal:\n%s", before.body)
		}
		csrf := before.field(t, csrfField)
		if p := b.do("POST", reveal, url.Values{}, "Origin", e.srv.URL); p.status != http.StatusForbidden || strings.Contains(p.body, "whsec_") {
			t.Errorf("a reveal without the CSRF token: %d, want 403 and no secret", p.status)
		}
		p := b.do("POST", reveal, url.Values{"csrf": {csrf}}, "Origin", e.srv.URL)
		m := revealed.FindStringSubmatch(p.body)
		if p.status != http.StatusOK || m == nil {
			t.Fatalf("reveal: %d, no secret-revealed:\n%s", p.status, p.body)
		}
		if html.UnescapeString(m[1]) != ep.Secret {
			t.Errorf("revealed %.12s…, want the endpoint's secret", m[1])
		}
		if got := p.header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("the page with the secret has Cache-Control %q, want no-store", got)
		}
		if !strings.Contains(p.body, `id="reveal-recorded"`) || !strings.Contains(text(p), "This reveal was recorded") {
			t.Errorf("the page does not say the reveal was recorded:\n%s", p.body)
		}
		if after := b.get(edit); strings.Contains(after.body, "whsec_") {
			t.Errorf("the endpoint's page shows the secret again without a reveal:\n%s", after.body)
		}
		return p
	}

	t.Run("admin", func(t *testing.T) {
		b := e.browser()
		b.mustLogin(testToken, "/console/tenants")
		p := do(t, b)
		if !strings.Contains(text(p), "Secret revealed once, last by admin at") {
			t.Errorf("the page does not count the reveal, by admin:\n%s", text(p))
		}
	})
	t.Run("tenant token", func(t *testing.T) {
		b := e.browser()
		b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
		p := do(t, b)
		if !strings.Contains(text(p), "Secret revealed 2 times, last by token "+e.token.ID+" at") || !strings.Contains(strings.ReplaceAll(p.body, "<wbr>", ""), "/v1/tenants/acme/endpoints/"+ep.ID+"/secret/reveal") {
			t.Errorf("an operator's page lacks the count by the token's name or the API hint:\n%s", text(p))
		}
	})

	// A rotation with grace: the old key signs beside the new one, and a
	// reveal shows both.
	var rot struct{ Secret string }
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints/" + ep.ID + "/secret/rotate", body: `{"grace":"1h"}`}, 200, &rot)
	old := ep.Secret
	ep.Secret = rot.Secret

	t.Run("portal", func(t *testing.T) {
		b := e.browser()
		b.open(link(e.apiEnv, `{"return_url":"https://app.example.com/hooks"}`))
		p := do(t, b)
		if m := regexp.MustCompile(`<code class="secret-previous">([^<]+)</code>`).FindStringSubmatch(p.body); m == nil || html.UnescapeString(m[1]) != old {
			t.Errorf("the old key in its grace window is not shown:\n%s", p.body)
		}
		txt := text(p)
		if !strings.Contains(txt, "Secret revealed 3 times, last by you at") {
			t.Errorf("a customer's page does not count the reveal as theirs:\n%s", txt)
		}
		for _, operators := range []string{"tok_", "/v1/", "acme"} {
			if strings.Contains(txt, operators) {
				i := strings.Index(txt, operators)
				t.Errorf("the portal's reveal shows %q: …%s…", operators, txt[max(0, i-60):min(len(txt), i+60)])
			}
		}
	})

	var trail struct {
		SecretReveals []struct{ By string } `json:"secret_reveals"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints/" + ep.ID}, 200, &trail)
	if n := len(trail.SecretReveals); n != 3 || trail.SecretReveals[0].By != "admin" || trail.SecretReveals[1].By != "token "+e.token.ID || !strings.HasPrefix(trail.SecretReveals[2].By, "token tok_") || trail.SecretReveals[2].By == trail.SecretReveals[1].By {
		t.Errorf("secret_reveals = %+v; want admin, the tenant token, the portal session", trail.SecretReveals)
	}
	if logs := e.logs.String(); strings.Contains(logs, "whsec_") || strings.Count(logs, "endpoint secret revealed") != 3 {
		t.Errorf("the log holds a secret, or not one line per reveal:\n%s", logs)
	}
}
