package httpapi_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
)

// browser is a console client: a cookie jar, no redirects followed.
type browser struct {
	t      *testing.T
	base   string
	client *http.Client
}

func (e *apiEnv) browser() *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return &browser{t: e.t, base: e.srv.URL, client: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// page is one console answer.
type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form url.Values, header ...string) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	resp, err := b.client.Do(r)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

func (b *browser) get(path string) page { b.t.Helper(); return b.do("GET", path, nil) }

var (
	csrfField  = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	loginField = regexp.MustCompile(`name="login" value="([^"]+)"`)
)

// field returns the value of the hidden input re matches in p.
func (p page) field(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	m := re.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no %s in the page (%d):\n%s", re, p.status, p.body)
	}
	return m[1]
}

// login logs in with token and returns the login POST's answer.
func (b *browser) login(token string) page {
	b.t.Helper()
	form := b.get("/console/login")
	return b.do("POST", "/console/login", url.Values{"token": {token}, "login": {form.field(b.t, loginField)}})
}

// mustLogin logs in and fails unless it lands on want.
func (b *browser) mustLogin(token, want string) {
	b.t.Helper()
	if p := b.login(token); p.status != http.StatusSeeOther || p.header.Get("Location") != want {
		b.t.Fatalf("login: %d to %q, want 303 to %q\n%s", p.status, p.header.Get("Location"), want, p.body)
	}
}

// consoleEnv is a security env with tenants acme (one endpoint, one
// dead delivery whose response is hostile HTML) and globex.
type consoleEnv struct {
	*apiEnv
	endpoint endpointJSON
	delivery string
	token    issuedJSON // acme's tenant token
}

const hostileExcerpt = `<script>alert("pwned")</script><img src=x onerror=alert(1)>`

func newConsoleEnv(t *testing.T) *consoleEnv {
	t.Helper()
	e := newSecurityEnv(t, engine.ServiceOptions{}, httpapi.Options{})
	ep := e.fixture()
	e.must(req{method: "PUT", path: "/v1/tenants/globex", body: `{"name":"Globex"}`}, 201, nil)
	var ing ingestJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","ordering_key":"<b>order</b>","data":{"note":"</pre><script>alert(2)</script>"}}`}, 202, &ing)
	now := time.Now().UTC()
	rec := engine.AttemptRecord{
		DeliveryID: ing.Deliveries[0].ID, Cycle: 1,
		Attempt: engine.Attempt{
			Cycle: 1, Number: 1, Start: now, Duration: 12 * time.Millisecond, Status: 500,
			Error: "HTTP 500 <b>bold</b>", Response: hostileExcerpt, Outcome: engine.OutcomePermanent,
		},
		State: engine.StateDead, Reason: "HTTP 500: <i>permanent</i>", LastStatus: 500, At: now,
	}
	_, err := e.db.UpdateDelivery(context.Background(), rec.DeliveryID, func(d engine.Delivery) (engine.Delivery, error) {
		return engine.RecordAttempt(d, rec), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return &consoleEnv{apiEnv: e, endpoint: ep, delivery: ing.Deliveries[0].ID, token: e.issue("acme", "")}
}

func TestConsole_Login(t *testing.T) {
	e := newConsoleEnv(t)

	t.Run("tenant token: cookie and landing page", func(t *testing.T) {
		b := e.browser()
		p := b.login(e.token.Token)
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/t/acme/endpoints" {
			t.Fatalf("login: %d to %q", p.status, p.header.Get("Location"))
		}
		u, err := url.Parse(e.srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		var session *http.Cookie
		for _, c := range (&http.Response{Header: p.header}).Cookies() {
			if c.Name == "webhookd_session_"+u.Port() { // per port: see TestConsole_TwoConsolesOnOneHost
				session = c
			}
		}
		if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/console" || session.MaxAge != 0 || session.Expires != (time.Time{}) {
			t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/console, for the browser session", session)
		}
		if strings.Contains(p.header.Get("Set-Cookie"), e.token.Token) {
			t.Error("the cookie carries the token as is (it is base64url-encoded)")
		}
		home := b.get("/console/t/acme/endpoints")
		if home.status != 200 || !strings.Contains(strings.ReplaceAll(home.body, "<wbr>", ""), e.endpoint.URL) || !strings.Contains(home.body, "token "+e.token.ID) {
			t.Fatalf("endpoints page: %d\n%s", home.status, home.body)
		}
		for k, want := range map[string]string{
			"X-Frame-Options":        "DENY",
			"Cache-Control":          "no-store",
			"X-Content-Type-Options": "nosniff",
			"Content-Type":           "text/html; charset=utf-8",
		} {
			if got := home.header.Get(k); got != want {
				t.Errorf("%s = %q, want %q", k, got, want)
			}
		}
		if csp := home.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("CSP %q", csp)
		}
		if r := b.get("/console/"); r.header.Get("Location") != "/console/t/acme/endpoints" {
			t.Errorf("/console/ sends a tenant to %q", r.header.Get("Location"))
		}
		if r := b.get("/console/tenants"); r.header.Get("Location") != "/console/t/acme/endpoints" {
			t.Errorf("the tenant picker sends a tenant to %q", r.header.Get("Location"))
		}
	})

	t.Run("admin token picks any tenant", func(t *testing.T) {
		b := e.browser()
		b.mustLogin(testToken, "/console/tenants")
		p := b.get("/console/tenants")
		if p.status != 200 || !strings.Contains(p.body, "/console/t/acme/endpoints") || !strings.Contains(p.body, "/console/t/globex/endpoints") {
			t.Fatalf("picker: %d\n%s", p.status, p.body)
		}
		if p := b.get("/console/t/globex/deliveries"); p.status != 200 {
			t.Errorf("admin on globex: %d", p.status)
		}
		if p := b.get("/console/t/nobody/deliveries"); p.status != 404 {
			t.Errorf("admin on an unknown tenant: %d, want 404", p.status)
		}
	})

	t.Run("test token sees test tenants only", func(t *testing.T) {
		e.must(req{method: "PUT", path: "/v1/tenants/sandbox", body: `{"environment":"test"}`}, 201, nil)
		b := e.browser()
		b.mustLogin(testEnvTk, "/console/tenants")
		p := b.get("/console/tenants")
		if !strings.Contains(p.body, "/console/t/sandbox/") || strings.Contains(p.body, "/console/t/acme/") {
			t.Errorf("a test token's picker:\n%s", p.body)
		}
		if p := b.get("/console/t/acme/endpoints"); p.status != 403 {
			t.Errorf("a test token on a live tenant: %d, want 403", p.status)
		}
	})

	t.Run("bad token", func(t *testing.T) {
		b := e.browser()
		for _, tok := range []string{"", "wrong-token-0123456789", engine.AccessTokenPrefix + "nope"} {
			if p := b.login(tok); p.status != 401 || !strings.Contains(p.body, "not valid") || strings.Contains(p.header.Get("Set-Cookie"), "webhookd_session_") && !strings.Contains(p.header.Get("Set-Cookie"), "Max-Age=0") {
				t.Errorf("login with %q: %d", tok, p.status)
			}
		}
		if p := b.get("/console/t/acme/endpoints"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/login" {
			t.Errorf("no session: %d to %q, want the login page", p.status, p.header.Get("Location"))
		}
	})

	t.Run("login form from elsewhere", func(t *testing.T) {
		b := e.browser()
		nonce := b.get("/console/login").field(t, loginField)
		if p := b.do("POST", "/console/login", url.Values{"token": {e.token.Token}}); p.status != 403 {
			t.Errorf("no login CSRF token: %d", p.status)
		}
		if p := b.do("POST", "/console/login", url.Values{"token": {e.token.Token}, "login": {nonce}}, "Origin", "https://evil.example"); p.status != 403 {
			t.Errorf("cross-site login: %d", p.status)
		}
		fresh := e.browser() // another browser: no nonce cookie
		if p := fresh.do("POST", "/console/login", url.Values{"token": {e.token.Token}, "login": {nonce}}); p.status != 403 {
			t.Errorf("a login CSRF token without its cookie: %d", p.status)
		}
	})

	t.Run("revoked token ends the session at once", func(t *testing.T) {
		tok := e.issue("acme", "")
		b := e.browser()
		b.mustLogin(tok.Token, "/console/t/acme/endpoints")
		e.must(req{method: "DELETE", path: "/v1/tenants/acme/access-tokens/" + tok.ID}, 204, nil)
		if p := b.get("/console/t/acme/endpoints"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/login?m=ended" {
			t.Errorf("after revocation: %d to %q", p.status, p.header.Get("Location"))
		}
	})

	t.Run("logout", func(t *testing.T) {
		b := e.browser()
		b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
		csrf := b.get("/console/t/acme/endpoints").field(t, csrfField)
		if p := b.do("POST", "/console/logout", url.Values{}); p.status != 403 {
			t.Errorf("logout without CSRF: %d", p.status)
		}
		if p := b.do("POST", "/console/logout", url.Values{"csrf": {csrf}}); p.status != http.StatusSeeOther {
			t.Errorf("logout: %d", p.status)
		}
		if p := b.get("/console/t/acme/endpoints"); p.status != http.StatusSeeOther {
			t.Errorf("after logout: %d", p.status)
		}
	})
}

func TestConsole_TenantTokenOnAnotherTenant(t *testing.T) {
	e := newConsoleEnv(t)
	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	var first string
	for _, path := range []string{
		"/console/t/globex/endpoints", "/console/t/nobody/endpoints",
		"/console/t/globex/deliveries", "/console/t/nobody/deliveries/" + e.delivery,
		"/console/t/globex/dead-letters", "/console/t/globex/report",
	} {
		p := b.get(path)
		if p.status != 403 {
			t.Errorf("%s: %d, want 403", path, p.status)
		}
		if strings.Contains(p.body, "globex") || strings.Contains(p.body, "nobody") {
			t.Errorf("%s names the tenant:\n%s", path, p.body)
		}
		if first == "" {
			first = p.body
		} else if p.body != first {
			t.Errorf("%s answers differently from the first: it may tell something", path)
		}
	}
	csrf := b.get("/console/t/acme/endpoints").field(t, csrfField)
	if p := b.do("POST", "/console/t/globex/dead-letters/replay", url.Values{"csrf": {csrf}, "since": {"2020-01-01T00:00"}}); p.status != 403 {
		t.Errorf("range replay on globex: %d", p.status)
	}
}

func TestConsole_CSRF(t *testing.T) {
	e := newConsoleEnv(t)
	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	resend := "/console/t/acme/deliveries/" + e.delivery + "/resend"
	csrf := b.get("/console/t/acme/deliveries/"+e.delivery).field(t, csrfField)

	other := e.browser()
	other.mustLogin(testToken, "/console/tenants")
	otherCSRF := other.get("/console/t/acme/endpoints").field(t, csrfField)

	for name, tc := range map[string]struct {
		form   url.Values
		header []string
	}{
		"no token":                    {url.Values{}, nil},
		"wrong token":                 {url.Values{"csrf": {"AAAA"}}, nil},
		"another session's token":     {url.Values{"csrf": {otherCSRF}}, nil},
		"good token, foreign Origin":  {url.Values{"csrf": {csrf}}, []string{"Origin", "https://evil.example"}},
		"good token, foreign Referer": {url.Values{"csrf": {csrf}}, []string{"Referer", "https://evil.example/page"}},
		"good token, Origin null":     {url.Values{"csrf": {csrf}}, []string{"Origin", "null"}},
	} {
		t.Run(name, func(t *testing.T) {
			if p := b.do("POST", resend, tc.form, tc.header...); p.status != 403 || !strings.Contains(p.body, "reload the page") {
				t.Errorf("%d\n%s", p.status, p.body)
			}
		})
	}
	var d struct{ Replays []struct{ By string } }
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + e.delivery}, 200, &d)
	if len(d.Replays) != 0 {
		t.Fatalf("a refused form replayed the delivery: %+v", d.Replays)
	}

	p := b.do("POST", resend, url.Values{"csrf": {csrf}}, "Origin", e.srv.URL)
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/console/t/acme/deliveries/"+e.delivery) {
		t.Fatalf("resend: %d to %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + e.delivery}, 200, &d)
	if len(d.Replays) != 1 || d.Replays[0].By != "token "+e.token.ID {
		t.Errorf("replays %+v, want one by the token", d.Replays)
	}
	after := b.get(p.header.Get("Location"))
	if !strings.Contains(after.body, "Resent") {
		t.Errorf("no notice after resend:\n%s", after.body)
	}
	// The new cycle has no attempt yet: the page must not show the last
	// cycle's failure as the reason of the pending delivery, only as
	// what ended that cycle.
	reason := regexp.MustCompile(`(?s)<dd id="reason">(.*?)</dd>`).FindStringSubmatch(after.body)
	if reason == nil || !strings.HasPrefix(reason[1], "none in cycle 2 yet") || !strings.Contains(reason[1], "cycle 1 ended: HTTP 500") {
		t.Errorf("the reason right after Resend: %q, want none in cycle 2 yet, and how cycle 1 ended", reason)
	}
}

func TestConsole_EscapesHostileText(t *testing.T) {
	e := newConsoleEnv(t)
	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	for _, path := range []string{"/console/t/acme/deliveries/" + e.delivery, "/console/t/acme/deliveries", "/console/t/acme/dead-letters"} {
		p := b.get(path)
		if p.status != 200 {
			t.Fatalf("%s: %d", path, p.status)
		}
		for _, bad := range []string{"<script>alert", "<img src=x", "<b>bold", "<i>permanent", "</pre><script>", "<b>order"} {
			if strings.Contains(p.body, bad) {
				t.Errorf("%s contains %q unescaped", path, bad)
			}
		}
	}
	p := b.get("/console/t/acme/deliveries/" + e.delivery)
	for _, want := range []string{
		`<pre class="excerpt">&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;</pre>`,
		"HTTP 500", "HTTP 500 &lt;b&gt;bold&lt;/b&gt;", "HTTP 500: &lt;i&gt;permanent&lt;/i&gt;",
		`<span id="sequence">sequence 1</span>`, `<code id="ordering-key">&lt;b&gt;order&lt;/b&gt;</code>`,
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the delivery page lacks %s", want)
		}
	}
}

func TestConsole_Pages(t *testing.T) {
	e := newConsoleEnv(t)
	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")

	t.Run("deliveries: filters", func(t *testing.T) {
		p := b.get("/console/t/acme/deliveries?state=dead&type=payment.succeeded&endpoint=" + e.endpoint.ID + "&since=2020-01-01T00:00")
		if p.status != 200 || !strings.Contains(p.body, "/console/t/acme/deliveries/"+e.delivery) {
			t.Errorf("filtered to the dead one: %d\n%s", p.status, p.body)
		}
		if p := b.get("/console/t/acme/deliveries?state=succeeded"); strings.Contains(p.body, e.delivery) {
			t.Error("state=succeeded lists the dead delivery")
		}
		if p := b.get("/console/t/acme/deliveries?since=yesterday"); p.status != 422 || !strings.Contains(p.body, "since must be a time") {
			t.Errorf("bad since: %d", p.status)
		}
	})
	t.Run("report", func(t *testing.T) {
		p := b.get("/console/t/acme/report?last=10")
		if p.status != 200 || !strings.Contains(p.body, `id="rate">0.0%`) {
			t.Errorf("report: %d\n%s", p.status, p.body)
		}
	})
	t.Run("endpoints: success rate", func(t *testing.T) {
		p := b.get("/console/t/acme/endpoints")
		if !strings.Contains(p.body, "0.0%</span> <small>of 1 attempt</small>") {
			t.Errorf("no success rate:\n%s", p.body)
		}
	})
	t.Run("rotate shows the secret once", func(t *testing.T) {
		csrf := b.get("/console/t/acme/endpoints").field(t, csrfField)
		p := b.do("POST", "/console/t/acme/endpoints/"+e.endpoint.ID+"/rotate", url.Values{"csrf": {csrf}, "grace": {"1h"}})
		m := regexp.MustCompile(`id="secret">(whsec_[^<]+)<`).FindStringSubmatch(p.body)
		if p.status != 200 || m == nil || p.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("rotate: %d\n%s", p.status, p.body)
		}
		if again := b.get("/console/t/acme/endpoints"); strings.Contains(again.body, m[1]) {
			t.Error("the endpoints page shows the secret")
		}
	})
	t.Run("disable, enable", func(t *testing.T) {
		csrf := b.get("/console/t/acme/endpoints").field(t, csrfField)
		base := "/console/t/acme/endpoints/" + e.endpoint.ID
		if p := b.do("POST", base+"/disable", url.Values{"csrf": {csrf}}); p.status != http.StatusSeeOther {
			t.Fatalf("disable: %d\n%s", p.status, p.body)
		}
		var ep endpointJSON
		e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints/" + e.endpoint.ID}, 200, &ep)
		if !ep.Disabled {
			t.Fatal("not disabled")
		}
		if p := b.get("/console/t/acme/endpoints?m=disabled"); !strings.Contains(p.body, "Enable and deliver held") || !strings.Contains(p.body, "Endpoint disabled") {
			t.Errorf("no enable buttons:\n%s", p.body)
		}
		if p := b.do("POST", base+"/enable", url.Values{"csrf": {csrf}}); p.status != 422 {
			t.Errorf("enable without a choice: %d", p.status)
		}
		p := b.do("POST", base+"/enable", url.Values{"csrf": {csrf}, "deliver_held": {"1"}})
		if p.status != http.StatusSeeOther || !strings.Contains(p.header.Get("Location"), "m=enabled-held") {
			t.Fatalf("enable: %d %q\n%s", p.status, p.header.Get("Location"), p.body)
		}
		e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints/" + e.endpoint.ID}, 200, &ep)
		if ep.Disabled {
			t.Fatal("still disabled")
		}
	})
	t.Run("range replay", func(t *testing.T) {
		csrf := b.get("/console/t/acme/dead-letters").field(t, csrfField)
		p := b.do("POST", "/console/t/acme/dead-letters/replay", url.Values{"csrf": {csrf}, "since": {"2020-01-01T00:00"}, "endpoint": {e.endpoint.ID}})
		loc := p.header.Get("Location")
		if p.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/console/t/acme/tasks/task_") || !strings.Contains(loc, "m=replay-started") {
			t.Fatalf("range replay: %d %q\n%s", p.status, loc, p.body)
		}
		id := strings.TrimPrefix(strings.SplitN(loc, "?", 2)[0], "/console/t/acme/tasks/")
		e.waitTask(taskJSON{ID: id, location: "/v1/tenants/acme/tasks/" + id})
		if p := b.get(loc); !strings.Contains(p.body, "Range replay started") || !strings.Contains(p.body, `id="task-done">1 dead letters replayed`) {
			t.Errorf("no count:\n%s", p.body)
		}
		if p := b.do("POST", "/console/t/acme/dead-letters/replay", url.Values{"csrf": {csrf}}); p.status != 422 {
			t.Errorf("without since: %d", p.status)
		}
	})
	t.Run("static assets", func(t *testing.T) {
		for _, path := range []string{"/console/static/console.css", "/console/static/console.js"} {
			if p := b.get(path); p.status != 200 || p.header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s: %d", path, p.status)
			}
		}
	})
}

// TestConsole_BlockedLine: the page of a dead head blocking its line
// shows its line and a Skip button (a CSRF-checked form, as Resend); the
// page of the delivery behind it says what it waits behind; Skip records
// the skip by the token and lets the line go on.
func TestConsole_BlockedLine(t *testing.T) {
	e := newConsoleEnv(t)
	e.must(req{method: "PATCH", path: "/v1/tenants/acme/endpoints/" + e.endpoint.ID, body: `{"ordering":"endpoint","on_dead":"block"}`}, 200, nil)
	var first, second ingestJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, &first)
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, &second)
	head, next := first.Deliveries[0].ID, second.Deliveries[0].ID
	killDelivery(t, e.apiEnv, head)

	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	page := b.get("/console/t/acme/deliveries/" + next)
	if !strings.Contains(page.body, "waiting behind "+head) || strings.Contains(page.body, `id="skip"`) {
		t.Errorf("the waiting delivery's page does not say what it waits behind, or offers Skip:\n%s", page.body)
	}
	if log := b.get("/console/t/acme/deliveries?state=waiting"); !strings.Contains(log.body, "waiting behind "+head) {
		t.Errorf("the delivery log does not say what the waiting delivery waits behind:\n%s", log.body)
	}
	page = b.get("/console/t/acme/deliveries/" + head)
	if !strings.Contains(page.body, `id="skip"`) || !strings.Contains(page.body, "blocking its line") {
		t.Fatalf("the blocking head's page offers no Skip:\n%s", page.body)
	}
	skip := "/console/t/acme/deliveries/" + head + "/skip"
	if p := b.do("POST", skip, url.Values{"csrf": {"AAAA"}}); p.status != 403 {
		t.Errorf("skip with a wrong CSRF token: %d", p.status)
	}
	p := b.do("POST", skip, url.Values{"csrf": {page.field(t, csrfField)}}, "Origin", e.srv.URL)
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/console/t/acme/deliveries/"+head) {
		t.Fatalf("skip: %d to %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	if p := b.get(p.header.Get("Location")); !strings.Contains(p.body, "Skipped") || strings.Contains(p.body, `id="skip"`) {
		t.Errorf("after skip: no notice, or Skip still offered:\n%s", p.body)
	}
	var d struct {
		Skips []struct{ By string }
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + head}, 200, &d)
	if len(d.Skips) != 1 || d.Skips[0].By != "token "+e.token.ID {
		t.Errorf("skips %+v, want one by the token", d.Skips)
	}
	var n struct{ State string }
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + next}, 200, &n)
	if n.State != "pending" {
		t.Errorf("the next delivery is %s after the skip, want pending", n.State)
	}
}

// TestConsole_SearchAndEvent: the header's search finds an event or a
// delivery of the tenant by ID, never another tenant's; the event page
// shows its payload indented and escaped, and links its deliveries; the
// endpoints page links each endpoint's deliveries and dead letters; the
// delivery page shows the request's headers.
func TestConsole_SearchAndEvent(t *testing.T) {
	e := newConsoleEnv(t)
	var other ingestJSON
	e.must(req{method: "PUT", path: "/v1/event-types/invoice.paid", body: `{}`}, 201, nil)
	e.must(req{method: "POST", path: "/v1/tenants/globex/events", body: `{"type":"invoice.paid","data":{}}`}, 202, &other)
	var d struct {
		EventID string `json:"event_id"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + e.delivery}, 200, &d)

	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	for _, tc := range []struct{ q, to string }{
		{d.EventID, "/console/t/acme/events/" + d.EventID},
		{" " + e.delivery + " ", "/console/t/acme/deliveries/" + e.delivery},
	} {
		if p := b.get("/console/t/acme/search?q=" + url.QueryEscape(tc.q)); p.status != http.StatusSeeOther || p.header.Get("Location") != tc.to {
			t.Errorf("search %q: %d to %q, want %s", tc.q, p.status, p.header.Get("Location"), tc.to)
		}
	}
	for _, q := range []string{other.ID, "dlv_nope", "<script>x</script>", ""} {
		p := b.get("/console/t/acme/search?q=" + url.QueryEscape(q))
		if p.status != http.StatusNotFound || strings.Contains(p.body, "<script>x") {
			t.Errorf("search %q: %d, want 404 with the query escaped\n%s", q, p.status, p.body)
		}
	}

	ev := b.get("/console/t/acme/events/" + d.EventID)
	for _, want := range []string{
		`"ordering_key": "\u003cb\u003eorder\u003c/b\u003e"`, // the envelope's own escaping, kept
		`"note": "</pre><script>alert(2)</script>"`,          // stored raw, escaped by the page
		`href="/console/t/acme/deliveries/` + e.delivery + `"`,
	} {
		if !strings.Contains(ev.body, html.EscapeString(want)) && (strings.Contains(want, "<") || !strings.Contains(ev.body, want)) {
			t.Errorf("the event page lacks %s:\n%s", want, ev.body)
		}
	}
	if strings.Contains(ev.body, "<script>alert") || !strings.Contains(ev.body, "{\n  &#34;id&#34;") {
		t.Errorf("the event page's payload is not indented and escaped:\n%s", ev.body)
	}
	if p := b.get("/console/t/acme/events/" + other.ID); p.status != http.StatusNotFound {
		t.Errorf("another tenant's event: %d", p.status)
	}

	eps := b.get("/console/t/acme/endpoints")
	for _, want := range []string{
		`href="/console/t/acme/deliveries?endpoint=` + e.endpoint.ID + `"`,
		`href="/console/t/acme/deliveries?endpoint=` + e.endpoint.ID + `&amp;state=dead"`,
	} {
		if !strings.Contains(eps.body, want) {
			t.Errorf("the endpoints page lacks %s", want)
		}
	}

	dp := b.get("/console/t/acme/deliveries/" + e.delivery)
	req := regexp.MustCompile(`(?s)<pre class="request" id="request">(.*?)</pre>`).FindStringSubmatch(dp.body)
	if req == nil || !strings.Contains(req[1], "webhook-id: "+d.EventID) || !regexp.MustCompile(`webhook-timestamp: \d{10}\n`).MatchString(req[1]) ||
		!strings.Contains(req[1], "webhook-sequence: 1") || !strings.Contains(req[1], "webhook-signature: v1,… (one per signing key, not kept)") {
		t.Errorf("the delivery's request section: %q", req)
	}
	if !strings.Contains(dp.body, `href="/console/t/acme/events/`+d.EventID+`"`) {
		t.Error("the delivery page does not link its event")
	}
}

// TestConsole_ReplaySelected: the ticked deliveries are replayed, by the
// logged-in token, and the browser goes back to the list it came from
// (only a page of the tenant's console); the form needs its CSRF token;
// an ID that is not the tenant's replays nothing.
func TestConsole_ReplaySelected(t *testing.T) {
	e := newConsoleEnv(t)
	var other ingestJSON
	e.must(req{method: "PUT", path: "/v1/event-types/invoice.paid", body: `{}`}, 201, nil)
	e.must(req{method: "POST", path: "/v1/tenants/globex/endpoints", body: `{"url":"https://example.com/in","event_types":["*"]}`}, 201, nil)
	e.must(req{method: "POST", path: "/v1/tenants/globex/events", body: `{"type":"invoice.paid","data":{}}`}, 202, &other)

	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	list := b.get("/console/t/acme/dead-letters")
	if !strings.Contains(list.body, `<input type="checkbox" name="id" value="`+e.delivery+`" form="bulk"`) {
		t.Fatalf("the dead letters have no checkbox for %s:\n%s", e.delivery, list.body)
	}
	csrf := list.field(t, csrfField)
	post := func(form url.Values) page {
		return b.do("POST", "/console/t/acme/replay-selected", form, "Origin", e.srv.URL)
	}
	replays := func() int {
		var d struct{ Replays []struct{ By string } }
		e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + e.delivery}, 200, &d)
		return len(d.Replays)
	}

	if p := post(url.Values{"id": {e.delivery}}); p.status != 403 {
		t.Errorf("without the CSRF token: %d", p.status)
	}
	if p := post(url.Values{"csrf": {csrf}, "id": {e.delivery, other.Deliveries[0].ID}}); p.status != 404 {
		t.Errorf("with globex's delivery among them: %d", p.status)
	}
	if n := replays(); n != 0 {
		t.Fatalf("%d replays after refused forms", n)
	}
	p := post(url.Values{"csrf": {csrf}, "id": {e.delivery, e.delivery}, "back": {"/console/t/acme/dead-letters"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/t/acme/dead-letters?m=replayed-selected&n=1" {
		t.Errorf("replay selected: %d to %q", p.status, p.header.Get("Location"))
	}
	if n := replays(); n != 1 {
		t.Errorf("%d replays, want 1 (the ID was ticked twice)", n)
	}
	for _, back := range []string{"https://evil.example/", "/console/t/globex/deliveries", "//evil.example/x"} {
		p := post(url.Values{"csrf": {csrf}, "id": {e.delivery}, "back": {back}})
		if loc := p.header.Get("Location"); !strings.HasPrefix(loc, "/console/t/acme/deliveries?") {
			t.Errorf("back %q: sent to %q, want the deliveries", back, loc)
		}
	}
}

// TestConsole_Tenants: the admin's tenants page reports each tenant's
// delivery and their total, and creates a tenant (never changes one); a
// test token creates test tenants only; a tenant token none.
func TestConsole_Tenants(t *testing.T) {
	e := newConsoleEnv(t)
	admin := e.browser()
	admin.mustLogin(testToken, "/console/tenants")
	list := admin.get("/console/tenants")
	for _, want := range []string{`<strong id="total-rate">0.0%</strong> of 1 deliveries`, `href="/console/t/acme/dead-letters">1</a>`} {
		if !strings.Contains(list.body, want) {
			t.Errorf("the tenants page lacks %s:\n%s", want, list.body)
		}
	}
	csrf := list.field(t, csrfField)
	create := func(b *browser, csrf, id, env string) page {
		return b.do("POST", "/console/tenants", url.Values{"csrf": {csrf}, "id": {id}, "name": {"Tenant <" + id + ">"}, "environment": {env}}, "Origin", e.srv.URL)
	}
	if p := create(admin, csrf, "beta", "live"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/t/beta/endpoints?m=tenant-created" {
		t.Fatalf("create beta: %d to %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	var beta struct{ Name, Environment string }
	e.must(req{method: "GET", path: "/v1/tenants/beta"}, 200, &beta)
	if beta.Name != "Tenant <beta>" || beta.Environment != "live" {
		t.Errorf("beta = %+v", beta)
	}
	if p := create(admin, csrf, "beta", "live"); p.status != 422 || !strings.Contains(p.body, "exists already") {
		t.Errorf("create beta again: %d\n%s", p.status, p.body)
	}
	if p := create(admin, csrf, "Bad ID", "live"); p.status != 422 {
		t.Errorf("create with a bad ID: %d", p.status)
	}
	if p := create(admin, "", "gamma", "live"); p.status != 403 {
		t.Errorf("create without the CSRF token: %d", p.status)
	}

	tester := e.browser()
	tester.mustLogin(testEnvTk, "/console/tenants")
	tcsrf := tester.get("/console/tenants").field(t, csrfField)
	if p := create(tester, tcsrf, "live-one", "live"); p.status != 403 {
		t.Errorf("a test token creating a live tenant: %d", p.status)
	}
	if p := create(tester, tcsrf, "sandbox", "test"); p.status != http.StatusSeeOther {
		t.Errorf("a test token creating a test tenant: %d\n%s", p.status, p.body)
	}

	tenant := e.browser()
	tenant.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	if p := create(tenant, tenant.get("/console/t/acme/endpoints").field(t, csrfField), "mine", "live"); p.status != 403 {
		t.Errorf("a tenant token creating a tenant: %d", p.status)
	}
}

// TestConsole_Charts: the report's charts have one point per hour that
// had attempts, in the window asked for, and the same numbers in a
// table.
func TestConsole_Charts(t *testing.T) {
	e := newConsoleEnv(t)                        // one attempt now
	hour := time.Now().UTC().Truncate(time.Hour) // attempts 10 and 20 minutes into hours before this one
	for _, back := range []time.Duration{2*time.Hour - 10*time.Minute, 5*time.Hour - 10*time.Minute, 5*time.Hour - 20*time.Minute, 3*24*time.Hour - 10*time.Minute} {
		var ing ingestJSON
		e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, &ing)
		at := hour.Add(-back)
		rec := engine.AttemptRecord{
			DeliveryID: ing.Deliveries[0].ID, Cycle: 1,
			Attempt: engine.Attempt{Cycle: 1, Number: 1, Start: at, Duration: 40 * time.Millisecond, Status: 200, Outcome: engine.OutcomeSuccess},
			State:   engine.StateSucceeded, LastStatus: 200, At: at,
		}
		if _, err := e.db.UpdateDelivery(context.Background(), rec.DeliveryID, func(d engine.Delivery) (engine.Delivery, error) {
			return engine.RecordAttempt(d, rec), nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	count := func(body, class string) int { return strings.Count(body, `<circle class="`+class+`"`) }
	for _, tc := range []struct {
		query  string
		points int
	}{
		{"", 3},           // now, 2 h and 5 h ago (two attempts in that hour); 3 days ago is out
		{"?window=7d", 4}, // and 3 days ago
		{"?window=7d&endpoint=" + e.endpoint.ID, 4},
		{"?window=1y", 3}, // an unknown window: 24 h
	} {
		p := b.get("/console/t/acme/report" + tc.query)
		if p.status != 200 {
			t.Fatalf("report%s: %d", tc.query, p.status)
		}
		if n, p50, p99 := count(p.body, "pt-rate"), count(p.body, "pt-p50"), count(p.body, "pt-p99"); n != tc.points || p50 != tc.points || p99 != tc.points {
			t.Errorf("report%s: %d rate, %d p50, %d p99 points, want %d of each", tc.query, n, p50, p99, tc.points)
		}
		table := regexp.MustCompile(`(?s)<table id="chart-table">.*?</table>`).FindString(p.body)
		if rows := strings.Count(table, "<tr>") - 1; rows != tc.points {
			t.Errorf("report%s: %d rows in the numbers table, want %d", tc.query, rows, tc.points)
		}
	}
	p := b.get("/console/t/acme/report")
	if !strings.Contains(p.body, ": 100.0% of 2 attempts</title>") {
		t.Errorf("no point says it counts the hour's two attempts:\n%s", p.body)
	}
	if !strings.Contains(p.body, `<svg id="chart-rate" viewBox="0 0 720 200" width="100%" role="img" aria-label="Successful attempts, per hour">`) {
		t.Error("the rate chart is not labelled for screen readers")
	}
}

// TestConsole_EndpointForms: a tenant's people add an endpoint from the
// console (its secret shown once, on that page only) and edit it: URL,
// description, subscribed types from the catalogue, ordering; bad input
// is refused and changes nothing; each form needs its CSRF token.
func TestConsole_EndpointForms(t *testing.T) {
	e := newConsoleEnv(t)
	e.must(req{method: "PUT", path: "/v1/event-types/invoice.paid", body: `{"description":"an invoice was paid"}`}, 201, nil)
	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	list := b.get("/console/t/acme/endpoints")
	for _, want := range []string{`<input type="checkbox" name="type" value="invoice.paid">`, `<input type="checkbox" name="type" value="payment.succeeded">`} {
		if !strings.Contains(list.body, want) {
			t.Fatalf("the new endpoint form lacks %s", want)
		}
	}
	csrf := list.field(t, csrfField)
	post := func(path string, form url.Values) page {
		return b.do("POST", path, form, "Origin", e.srv.URL)
	}

	if p := post("/console/t/acme/endpoints", url.Values{"csrf": {csrf}, "url": {"ftp://nope"}, "type": {"invoice.paid"}}); p.status != 422 {
		t.Errorf("a bad URL: %d", p.status)
	}
	if p := post("/console/t/acme/endpoints", url.Values{"url": {"https://hooks.example.com/in"}, "type": {"invoice.paid"}}); p.status != 403 {
		t.Errorf("without the CSRF token: %d", p.status)
	}
	created := post("/console/t/acme/endpoints", url.Values{"csrf": {csrf}, "url": {"https://hooks.example.com/in"}, "description": {"<ours>"}, "type": {"invoice.paid", "payment.succeeded"}})
	secret := regexp.MustCompile(`<code id="secret">(whsec_[^<]+)</code>`).FindStringSubmatch(created.body)
	if created.status != http.StatusCreated || secret == nil || !strings.Contains(created.body, "New endpoint") {
		t.Fatalf("add endpoint: %d\n%s", created.status, created.body)
	}
	var eps struct {
		Data []struct {
			ID, URL, Description, Ordering string
			EventTypes                     []string `json:"event_types"`
		} `json:"data"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints"}, 200, &eps)
	if len(eps.Data) != 2 {
		t.Fatalf("%d endpoints, want 2 (the refused forms made none)", len(eps.Data))
	}
	ep := eps.Data[1]
	if ep.URL != "https://hooks.example.com/in" || ep.Description != "<ours>" || strings.Join(ep.EventTypes, ",") != "invoice.paid,payment.succeeded" {
		t.Errorf("created %+v", ep)
	}
	if p := b.get("/console/t/acme/endpoints"); strings.Contains(p.body, secret[1]) {
		t.Error("the endpoints page shows the new secret again")
	}

	edit := b.get("/console/t/acme/endpoints/" + ep.ID + "/edit")
	for _, want := range []string{`value="https://hooks.example.com/in"`, `value="&lt;ours&gt;"`, `value="invoice.paid" checked`, `<option value="none" selected>`} {
		if !strings.Contains(edit.body, want) {
			t.Errorf("the edit form lacks %s", want)
		}
	}
	saved := post("/console/t/acme/endpoints/"+ep.ID, url.Values{"csrf": {csrf}, "url": {"https://hooks.example.com/v2"}, "description": {""}, "type": {"*", "invoice.paid"}, "ordering": {"key"}, "on_dead": {"block"}})
	if saved.status != http.StatusSeeOther || saved.header.Get("Location") != "/console/t/acme/endpoints?m=endpoint-updated" {
		t.Fatalf("save: %d to %q\n%s", saved.status, saved.header.Get("Location"), saved.body)
	}
	var got struct {
		URL, Description, Ordering string
		OnDead                     string   `json:"on_dead"`
		EventTypes                 []string `json:"event_types"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints/" + ep.ID}, 200, &got)
	if got.URL != "https://hooks.example.com/v2" || got.Description != "" || strings.Join(got.EventTypes, ",") != "*" || got.Ordering != "key" || got.OnDead != "block" {
		t.Errorf("after save: %+v", got)
	}
	if p := post("/console/t/acme/endpoints/"+ep.ID, url.Values{"csrf": {csrf}, "url": {"https://hooks.example.com/v2"}, "type": {"nope.type"}, "ordering": {"none"}, "on_dead": {"skip"}}); p.status != 422 {
		t.Errorf("an unknown type: %d", p.status)
	}
}

// TestConsole_TestEventAndEvents: "Send test event" on an endpoint's
// page sends a subscribed catalogue type's example to that endpoint
// only and shows its delivery, marked test there, in the delivery log,
// on the event's page and in the events list; the form needs its CSRF
// token, refuses a type the endpoint does not take and a disabled
// endpoint, and the example (tenant-visible, operator-written) is
// escaped.
func TestConsole_TestEventAndEvents(t *testing.T) {
	e := newConsoleEnv(t)
	e.must(req{method: "PUT", path: "/v1/event-types/payment.succeeded", body: `{"description":"A payment went through.","example":{"amount":1200,"note":"</pre><script>alert(3)</script>"}}`}, 200, nil)
	e.must(req{method: "PUT", path: "/v1/event-types/invoice.paid", body: `{"description":"an invoice was paid"}`}, 201, nil)
	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	if p := b.get("/console/t/acme/endpoints"); !strings.Contains(p.body, `href="/console/t/acme/endpoints/`+e.endpoint.ID+`/edit#test-event">Send test event</a>`) {
		t.Error("the endpoints list has no Send test event link")
	}
	edit := b.get("/console/t/acme/endpoints/" + e.endpoint.ID + "/edit")
	for _, want := range []string{
		`<option value="payment.succeeded" selected>payment.succeeded</option>`,
		`<summary>Example data of <code>payment.succeeded</code></summary><pre>{
  &#34;amount&#34;: 1200,`,
	} {
		if !strings.Contains(edit.body, want) {
			t.Errorf("the endpoint page lacks %s", want)
		}
	}
	if strings.Contains(edit.body, `value="invoice.paid">invoice.paid`) || strings.Contains(edit.body, "<script>alert(3)") {
		t.Errorf("the test form offers a type the endpoint does not take, or the example is not escaped:\n%s", edit.body)
	}
	csrf := edit.field(t, csrfField)
	send := "/console/t/acme/endpoints/" + e.endpoint.ID + "/test"
	post := func(form url.Values) page { return b.do("POST", send, form, "Origin", e.srv.URL) }
	before := e.snapshot()
	if p := post(url.Values{"type": {"payment.succeeded"}}); p.status != 403 {
		t.Errorf("without the CSRF token: %d", p.status)
	}
	if p := post(url.Values{"csrf": {csrf}, "type": {"invoice.paid"}}); p.status != 422 || !strings.Contains(p.body, "does not subscribe") {
		t.Errorf("a type the endpoint does not take: %d\n%s", p.status, p.body)
	}
	if after := e.snapshot(); after != before {
		t.Errorf("refused forms changed state:\n%s\nthen\n%s", before, after)
	}

	sent := post(url.Values{"csrf": {csrf}, "type": {"payment.succeeded"}})
	loc := sent.header.Get("Location")
	m := regexp.MustCompile(`^/console/t/acme/deliveries/(dlv_\w+)\?m=test-sent$`).FindStringSubmatch(loc)
	if sent.status != http.StatusSeeOther || m == nil {
		t.Fatalf("send: %d to %q\n%s", sent.status, loc, sent.body)
	}
	var d struct {
		EventID string `json:"event_id"`
		Test    bool   `json:"test"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + m[1]}, 200, &d)
	if !d.Test {
		t.Errorf("the delivery %s is not marked test in the API", m[1])
	}
	dp := b.get(loc)
	if !strings.Contains(dp.body, `<span class="badge test" id="test-mark">test</span>`) || !strings.Contains(dp.body, `id="notice">Test event sent`) {
		t.Errorf("the delivery page does not say it is a test:\n%s", dp.body)
	}
	if p := b.get("/console/t/acme/deliveries"); strings.Count(p.body, `<span class="badge test">test</span>`) != 1 {
		t.Errorf("the delivery log marks %d deliveries test, want 1", strings.Count(p.body, `<span class="badge test">test</span>`))
	}
	ev := b.get("/console/t/acme/events/" + d.EventID)
	if !strings.Contains(ev.body, `id="test-mark"`) || !strings.Contains(ev.body, `&#34;amount&#34;: 1200`) {
		t.Errorf("the event page does not show the test mark or the example's data:\n%s", ev.body)
	}

	// The events list: newest first, the test event marked, the states
	// linked; ?last= takes the page's choices only.
	list := b.get("/console/t/acme/events")
	rows := regexp.MustCompile(`<tr id="(evt_\w+)">`).FindAllStringSubmatch(list.body, -1)
	if list.status != 200 || len(rows) != 2 || rows[0][1] != d.EventID {
		t.Fatalf("events list: %d, rows %v, want the test event %s first of 2\n%s", list.status, rows, d.EventID, list.body)
	}
	if strings.Count(list.body, `<span class="badge test">test</span>`) != 2 { // its row and the help text
		t.Errorf("the events list does not mark the test event alone")
	}
	if !strings.Contains(list.body, `href="/console/t/acme/deliveries/`+m[1]+`" title="https://hooks.example.com/in">pending</a>`) ||
		!strings.Contains(list.body, `href="/console/t/acme/deliveries/`+e.delivery+`" title="https://hooks.example.com/in">dead</a>`) {
		t.Errorf("the events list does not link each delivery's state:\n%s", list.body)
	}
	if strings.Contains(list.body, "<b>order") {
		t.Error("the events list shows an ordering key unescaped")
	}
	for q, want := range map[string]string{"?last=200": `<option value="200" selected>`, "?last=7": `<option value="50" selected>`, "?last=x": `<option value="50" selected>`} {
		if p := b.get("/console/t/acme/events" + q); p.status != 200 || !strings.Contains(p.body, want) {
			t.Errorf("events%s: %d, want %s", q, p.status, want)
		}
	}

	// A disabled endpoint: no form, and the action is refused.
	e.must(req{method: "PATCH", path: "/v1/tenants/acme/endpoints/" + e.endpoint.ID, body: `{"disabled":true}`}, 200, nil)
	if p := b.get("/console/t/acme/endpoints/" + e.endpoint.ID + "/edit"); strings.Contains(p.body, `id="send-test"`) || !strings.Contains(p.body, "enable it to send it a test event") {
		t.Errorf("a disabled endpoint's page offers the test form:\n%s", p.body)
	}
	if p := post(url.Values{"csrf": {csrf}}); p.status != http.StatusConflict {
		t.Errorf("a test event to a disabled endpoint: %d", p.status)
	}
}

// TestConsole_TwoConsolesOnOneHost: a browser sends a host's cookies to
// every port of it; two consoles on one host at different ports keep a
// session each, so logging in to one does not end the other's.
func TestConsole_TwoConsolesOnOneHost(t *testing.T) {
	a, b := newConsoleEnv(t), newConsoleEnv(t)
	onA := a.browser()
	onB := &browser{t: t, base: b.srv.URL, client: onA.client} // one browser, one cookie jar
	onA.mustLogin(a.token.Token, "/console/t/acme/endpoints")
	onB.mustLogin(b.token.Token, "/console/t/acme/endpoints")
	for _, tc := range []struct {
		name string
		br   *browser
	}{{"the first console", onA}, {"the second console", onB}} {
		if p := tc.br.get("/console/t/acme/endpoints"); p.status != http.StatusOK {
			t.Errorf("%s after logging in to both: %d to %q, want its page", tc.name, p.status, p.header.Get("Location"))
		}
	}
}

// TestConsole_DeleteEndpoint: an endpoint's page can delete it, once the
// confirm box is ticked: without it (or without the CSRF token) nothing
// changes; with it the endpoint is gone, its unfinished deliveries end
// dead "endpoint deleted", and the endpoints page says so. The page says
// what happens before the user confirms.
func TestConsole_DeleteEndpoint(t *testing.T) {
	e := newConsoleEnv(t)
	var ing ingestJSON
	e.must(req{method: "PATCH", path: "/v1/tenants/acme/endpoints/" + e.endpoint.ID, body: `{"disabled":true}`}, 200, nil)
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, &ing)
	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	edit := b.get("/console/t/acme/endpoints/" + e.endpoint.ID + "/edit")
	if !strings.Contains(edit.body, `end dead with the reason "endpoint deleted"`) && !strings.Contains(edit.body, "end dead with the reason &#34;endpoint deleted&#34;") {
		t.Errorf("the endpoint's page does not say what deleting does:\n%s", edit.body)
	}
	csrf := edit.field(t, csrfField)
	path := "/console/t/acme/endpoints/" + e.endpoint.ID + "/delete"
	for _, form := range []url.Values{{"confirm": {"yes"}}, {"csrf": {csrf}}, {"csrf": {csrf}, "confirm": {"no"}}} {
		if p := b.do("POST", path, form); p.status < 400 {
			t.Errorf("delete with %v: %d, want refused", form, p.status)
		}
		e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints/" + e.endpoint.ID}, 200, nil)
	}
	p := b.do("POST", path, url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/console/t/acme/endpoints?m=endpoint-deleted") {
		t.Fatalf("delete: %d to %q", p.status, p.header.Get("Location"))
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints/" + e.endpoint.ID}, 404, nil)
	var d struct{ State, Reason string }
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + ing.Deliveries[0].ID}, 200, &d)
	if d.State != "dead" || d.Reason != "endpoint deleted" {
		t.Errorf("the paused delivery after the delete: %s %q, want dead \"endpoint deleted\"", d.State, d.Reason)
	}
	if list := b.get(p.header.Get("Location")); !strings.Contains(list.body, "Endpoint deleted") {
		t.Errorf("the endpoints page does not say the endpoint was deleted:\n%s", list.body)
	}
}

// TestConsole_CountsReadAsWords: one attempt is "1 attempt", not
// "1: 1 attempts", on a delivery's page and in an endpoint's success rate.
func TestConsole_CountsReadAsWords(t *testing.T) {
	e := newConsoleEnv(t) // one delivery, dead after one attempt
	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	p := b.get("/console/t/acme/deliveries/" + e.delivery)
	if !strings.Contains(p.body, "cycle 1, 1 attempt, started") || strings.Contains(p.body, "1 attempts") {
		t.Errorf("the delivery's cycle does not read \"cycle 1, 1 attempt\":\n%s", p.body)
	}
	if p := b.get("/console/t/acme/endpoints"); strings.Contains(p.body, "1 attempts") {
		t.Errorf("the endpoints page says \"1 attempts\":\n%s", p.body)
	}
}

// TestConsole_ListsReadLikeALog: the lists name an endpoint by its URL,
// whole on hover, and its description, in their rows and in their
// endpoint filters; URLs and event types wrap between their parts, never
// inside a word; the deliveries and dead letters carry their event's ID
// (a link to the event); dead letters are listed newest first like every
// other list; a delivery's envelope is shown indented, and as sent; the
// rotation's grace window is chosen on the endpoint's page, not on every
// row of the endpoints list.
func TestConsole_ListsReadLikeALog(t *testing.T) {
	e := newConsoleEnv(t) // acme, its first delivery dead
	var ep endpointJSON
	longURL := "https://hooks.example.com/webhooks/payments/v2?tenant=acme_corp"
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"` + longURL + `","description":"Billing service","event_types":["payment.succeeded"]}`}, 201, &ep)
	var ing ingestJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{"amount":1250}}`}, 202, &ing)
	var newest string
	for _, d := range ing.Deliveries {
		if d.EndpointID != ep.ID {
			continue
		}
		newest = d.ID
		now := time.Now().UTC()
		rec := engine.AttemptRecord{
			DeliveryID: d.ID, Cycle: 1,
			Attempt: engine.Attempt{Cycle: 1, Number: 1, Start: now, Duration: time.Millisecond, Status: 410, Outcome: engine.OutcomePermanent},
			State:   engine.StateDead, Reason: "HTTP 410", LastStatus: 410, At: now,
		}
		if _, err := e.db.UpdateDelivery(context.Background(), d.ID, func(d engine.Delivery) (engine.Delivery, error) {
			return engine.RecordAttempt(d, rec), nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")

	deliveries := b.get("/console/t/acme/deliveries")
	for _, want := range []string{
		`title="` + longURL + `"`, `<small class="desc">Billing service</small>`,
		`>https://hooks.example.com/webhooks/payments/v2?tenant=acme_c… — Billing service</option>`,
		`<code>payment.<wbr>succeeded</code>`,
		`<a class="event-id" href="/console/t/acme/events/` + ing.ID + `"><code>` + ing.ID + `</code></a>`,
	} {
		if !strings.Contains(deliveries.body, html.UnescapeString(want)) && !strings.Contains(deliveries.body, want) {
			t.Errorf("the deliveries page lacks %s:\n%s", want, deliveries.body)
		}
	}
	if !strings.Contains(deliveries.body, `https:/<wbr>/<wbr>hooks.<wbr>example.<wbr>com/<wbr>webhooks/<wbr>`) {
		t.Errorf("the endpoint's URL does not wrap at its separators:\n%s", deliveries.body)
	}

	dead := b.get("/console/t/acme/dead-letters")
	first, second := strings.Index(dead.body, `value="`+newest+`"`), strings.Index(dead.body, `value="`+e.delivery+`"`)
	if first < 0 || second < 0 || first > second {
		t.Errorf("dead letters: the newest (%s) at %d, the older (%s) at %d: want newest first:\n%s", newest, first, e.delivery, second, dead.body)
	}
	if !strings.Contains(dead.body, `href="/console/t/acme/events/`+ing.ID+`"`) || !strings.Contains(dead.body, `— Billing service</option>`) {
		t.Errorf("the dead letters page lacks the event ID link or the endpoint's description in its filter:\n%s", dead.body)
	}

	delivery := b.get("/console/t/acme/deliveries/" + newest)
	if !strings.Contains(delivery.body, "{\n  &#34;id&#34;: &#34;"+ing.ID) || !strings.Contains(delivery.body, `id="envelope-raw">{&#34;id&#34;:&#34;`+ing.ID) {
		t.Errorf("the delivery page's envelope is not indented, or not also shown as sent:\n%s", delivery.body)
	}

	if list := b.get("/console/t/acme/endpoints"); strings.Contains(list.body, `name="grace"`) {
		t.Errorf("the endpoints list repeats the rotation's grace selector on every row:\n%s", list.body)
	}
	if page := b.get("/console/t/acme/endpoints/" + ep.ID + "/edit"); strings.Count(page.body, `name="grace"`) != 1 || !strings.Contains(page.body, `id="rotate"`) {
		t.Errorf("the endpoint's page does not offer the rotation with its grace window:\n%s", page.body)
	}
	css := b.get("/console/static/console.css")
	if strings.Contains(css.body, "break-all") {
		t.Error("console.css breaks words anywhere (word-break: break-all)")
	}
}
