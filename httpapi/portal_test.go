package httpapi_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
)

// portalEnv is a security env with tenant acme, a clock the test moves,
// and the console options given.
func portalEnv(t *testing.T, opts httpapi.ConsoleOptions) (*apiEnv, *atomic.Int64) {
	t.Helper()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	e := newSecurityEnv(t, engine.ServiceOptions{Now: func() time.Time { return time.Unix(0, clock.Load()) }}, httpapi.Options{Console: opts})
	e.fixture()
	return e, &clock
}

type portalLinkJSON struct {
	ID, URL, ReturnURL string
	Expires            time.Time
}

// link asks for a portal link of acme with body.
func link(e *apiEnv, body string) portalLinkJSON {
	e.t.Helper()
	var l struct {
		ID        string    `json:"id"`
		URL       string    `json:"url"`
		Expires   time.Time `json:"expires"`
		ReturnURL string    `json:"return_url"`
	}
	e.must(req{method: "POST", path: "/v1/tenants/acme/portal-links", body: body}, 201, &l)
	return portalLinkJSON{l.ID, l.URL, l.ReturnURL, l.Expires}
}

// open opens link l as a browser does: the page, then its form's POST
// from the page's own origin.
func (b *browser) open(l portalLinkJSON) page {
	b.t.Helper()
	u, err := url.Parse(l.URL)
	if err != nil {
		b.t.Fatal(err)
	}
	if p := b.get(u.Path); p.status != http.StatusOK || !strings.Contains(p.body, `action="`+u.Path+`"`) {
		b.t.Fatalf("GET %s: %d\n%s", u.Path, p.status, p.body)
	}
	return b.do("POST", u.Path, url.Values{}, "Origin", b.base)
}

// TestPortal_LinkOpensOnce: a portal link opens a console session as its
// tenant, with a way back to the app, once; the session is a tenant
// token of purpose portal_session that lives the configured TTL; a GET of
// the link (a scanner, a prefetch) does not use it up.
func TestPortal_LinkOpensOnce(t *testing.T) {
	e, clock := portalEnv(t, httpapi.ConsoleOptions{SessionTTL: 2 * time.Hour})
	l := link(e, `{"ttl":"5m","return_url":"https://app.example.com/settings?tab=hooks&x=<y>"}`)
	if !strings.HasPrefix(l.URL, e.srv.URL+"/console/portal/whk_t_") || l.ReturnURL == "" {
		t.Fatalf("link %+v: want %s/console/portal/whk_t_… with its return_url", l, e.srv.URL)
	}
	now := time.Unix(0, clock.Load()).UTC()
	if !l.Expires.Equal(now.Add(5 * time.Minute).Truncate(time.Millisecond)) {
		t.Errorf("expires %s, want %s", l.Expires, now.Add(5*time.Minute))
	}
	secret := l.URL[strings.LastIndex(l.URL, "/")+1:]

	// The link is no bearer token.
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries", header: bearer(secret)}, 401, nil)

	b := e.browser()
	b.get(strings.TrimPrefix(l.URL, e.srv.URL)) // a prefetch
	p := b.open(l)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/t/acme/deliveries" {
		t.Fatalf("open: %d to %q, want 303 to the deliveries\n%s", p.status, p.header.Get("Location"), p.body)
	}
	home := b.get("/console/t/acme/deliveries")
	if home.status != http.StatusOK || !strings.Contains(home.body, `href="https://app.example.com/settings?tab=hooks&amp;x=%3cy%3e"`) {
		t.Errorf("deliveries page %d without the escaped link back to the app:\n%s", home.status, home.body)
	}
	if again := e.browser().open(l); again.status != http.StatusUnauthorized || !strings.Contains(again.body, "used already") {
		t.Errorf("the link a second time: %d\n%s", again.status, again.body)
	}

	var toks struct {
		Data []struct {
			ID, Purpose string
			Created     time.Time
			Expires     time.Time
			Revoked     time.Time
		} `json:"data"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/access-tokens"}, 200, &toks)
	var sessions int
	for _, tk := range toks.Data {
		switch tk.Purpose {
		case engine.PurposePortalLink:
			if tk.ID != l.ID || tk.Revoked.IsZero() {
				t.Errorf("link token %+v: want %s, revoked", tk, l.ID)
			}
		case engine.PurposePortalSession:
			sessions++
			if !tk.Expires.Equal(tk.Created.Add(2 * time.Hour)) {
				t.Errorf("session %+v: want it to live 2h", tk)
			}
		}
	}
	if sessions != 1 {
		t.Errorf("%d portal sessions, want 1: %+v", sessions, toks.Data)
	}
}

// TestPortal_LinkRefused: a link expired, revoked before use, forged, or
// posted from another site opens nothing; two browsers racing for one
// link get one session.
func TestPortal_LinkRefused(t *testing.T) {
	e, clock := portalEnv(t, httpapi.ConsoleOptions{})

	expired := link(e, `{"ttl_seconds":60}`)
	clock.Add(int64(61 * time.Second))
	if p := e.browser().open(expired); p.status != http.StatusUnauthorized {
		t.Errorf("expired link: %d\n%s", p.status, p.body)
	}

	revoked := link(e, `{}`)
	e.must(req{method: "DELETE", path: "/v1/tenants/acme/access-tokens/" + revoked.ID}, 204, nil)
	if p := e.browser().open(revoked); p.status != http.StatusUnauthorized {
		t.Errorf("revoked link: %d\n%s", p.status, p.body)
	}

	forged := portalLinkJSON{URL: e.srv.URL + "/console/portal/whk_t_" + strings.Repeat("A", 43)}
	if p := e.browser().open(forged); p.status != http.StatusUnauthorized {
		t.Errorf("forged link: %d\n%s", p.status, p.body)
	}

	// A regular tenant token is no portal link either.
	tok := e.issue("acme", "")
	if p := e.browser().open(portalLinkJSON{URL: e.srv.URL + "/console/portal/" + tok.Token}); p.status != http.StatusUnauthorized {
		t.Errorf("a tenant token as a link: %d\n%s", p.status, p.body)
	}

	cross := link(e, `{}`)
	u, _ := url.Parse(cross.URL)
	b := e.browser()
	if p := b.do("POST", u.Path, url.Values{}, "Origin", "https://evil.example"); p.status != http.StatusForbidden {
		t.Errorf("a POST from another site: %d\n%s", p.status, p.body)
	}
	if p := b.open(cross); p.status != http.StatusSeeOther { // not used up by the refused POST
		t.Errorf("the link after a refused cross-site POST: %d\n%s", p.status, p.body)
	}

	raced := link(e, `{}`)
	var wg sync.WaitGroup
	var opened atomic.Int32
	for range 8 {
		wg.Go(func() {
			if e.browser().open(raced).status == http.StatusSeeOther {
				opened.Add(1)
			}
		})
	}
	wg.Wait()
	if n := opened.Load(); n != 1 {
		t.Errorf("8 browsers opening one link: %d sessions, want 1", n)
	}
}

// TestPortal_Framing: by default no site may frame the console; with
// frame_ancestors, the listed origins only, and the cookies are the
// kind a cross-site frame keeps.
func TestPortal_Framing(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		e, _ := portalEnv(t, httpapi.ConsoleOptions{})
		p := e.browser().open(link(e, `{}`))
		if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || p.header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("CSP %q, X-Frame-Options %q: want no framing", csp, p.header.Get("X-Frame-Options"))
		}
		if c := p.header.Get("Set-Cookie"); !strings.Contains(c, "SameSite=Strict") || strings.Contains(c, "Partitioned") {
			t.Errorf("session cookie %q, want SameSite=Strict", c)
		}
	})
	t.Run("frame_ancestors", func(t *testing.T) {
		e, _ := portalEnv(t, httpapi.ConsoleOptions{FrameAncestors: []string{"https://app.example.com", "https://admin.example.com"}})
		b := e.browser()
		p := b.open(link(e, `{}`))
		if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors https://app.example.com https://admin.example.com") || p.header.Get("X-Frame-Options") != "" {
			t.Errorf("CSP %q, X-Frame-Options %q: want the two origins", csp, p.header.Get("X-Frame-Options"))
		}
		c := p.header.Get("Set-Cookie")
		for _, want := range []string{"SameSite=None", "Secure", "Partitioned", "HttpOnly", "Path=/console"} {
			if !strings.Contains(c, want) {
				t.Errorf("session cookie %q lacks %s", c, want)
			}
		}
		if lp := b.get("/console/login"); !strings.Contains(lp.header.Get("Set-Cookie"), "SameSite=None") {
			t.Errorf("login cookie %q, want SameSite=None", lp.header.Get("Set-Cookie"))
		}
	})
}

// TestPortal_Brand: the console shows the operator's name (escaped), logo
// and accent colour, and lets the logo's origin in img-src; without a
// brand it is webhookd's own.
func TestPortal_Brand(t *testing.T) {
	t.Run("branded", func(t *testing.T) {
		e, _ := portalEnv(t, httpapi.ConsoleOptions{Brand: httpapi.Brand{
			Name: "Acme <Hooks>", Accent: "#0a7cff", LogoURL: "https://cdn.example.com/brand/logo.svg",
		}})
		b := e.browser()
		b.open(link(e, `{}`))
		p := b.get("/console/t/acme/endpoints")
		for _, want := range []string{
			`<title>Endpoints · Acme &lt;Hooks&gt;</title>`,
			`<img class="logo" src="https://cdn.example.com/brand/logo.svg" alt="" height="24">Acme &lt;Hooks&gt;</a>`,
			`<link rel="stylesheet" href="/console/brand.css">`,
		} {
			if !strings.Contains(p.body, want) {
				t.Errorf("the page lacks %s:\n%s", want, p.body)
			}
		}
		if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "img-src 'self' data: https://cdn.example.com;") {
			t.Errorf("CSP %q: want the logo's origin in img-src", csp)
		}
		css := b.get("/console/brand.css")
		// #0a7cff reads at 4.06:1 on white: a shade darker in the light
		// palette, lighter in the dark one.
		if css.status != 200 || css.body != ":root { --accent: #096bdb; }\n@media (prefers-color-scheme: dark) { :root { --accent: #4099ff; } }\n" || !strings.HasPrefix(css.header.Get("Content-Type"), "text/css") {
			t.Errorf("brand.css: %d %q %q", css.status, css.header.Get("Content-Type"), css.body)
		}
		if lp := b.get("/console/login"); !strings.Contains(lp.body, "Log in · Acme &lt;Hooks&gt;") {
			t.Errorf("the login page is not branded:\n%s", lp.body)
		}
	})
	t.Run("default", func(t *testing.T) {
		e, _ := portalEnv(t, httpapi.ConsoleOptions{})
		b := e.browser()
		if p := b.get("/console/login"); !strings.Contains(p.body, "<title>Log in · webhookd</title>") || strings.Contains(p.body, `class="logo"`) {
			t.Errorf("the default login page:\n%s", p.body)
		}
		if css := b.get("/console/brand.css"); css.status != 200 || css.body != "" {
			t.Errorf("brand.css without a brand: %d %q", css.status, css.body)
		}
	})
}

func TestValidBrand(t *testing.T) {
	for _, tt := range []struct {
		b     httpapi.Brand
		field string
	}{
		{httpapi.Brand{}, ""},
		{httpapi.Brand{Name: "Acme", Accent: "#ABCDEF", LogoURL: "http://localhost:3000/logo.png"}, ""},
		{httpapi.Brand{Name: strings.Repeat("x", 61)}, "name"},
		{httpapi.Brand{Name: "a\nb"}, "name"},
		{httpapi.Brand{Name: "Acme \u202eevil"}, "name"},
		{httpapi.Brand{Name: "Acme\u0085"}, "name"},
		{httpapi.Brand{Name: "Acme\ufeff"}, "name"},
		{httpapi.Brand{Name: "Ácme 株式会社"}, ""},
		{httpapi.Brand{Accent: "red"}, "accent"},
		{httpapi.Brand{Accent: "#abc"}, "accent"},
		{httpapi.Brand{LogoURL: "/logo.png"}, "logo_url"},
		{httpapi.Brand{LogoURL: "https://cdn.example.com/a.png; script-src *"}, "logo_url"},
	} {
		if field, _ := httpapi.ValidBrand(tt.b); field != tt.field {
			t.Errorf("ValidBrand(%+v) = %q, want %q", tt.b, field, tt.field)
		}
	}
}

// TestPortal_LogoutEndsTheSession: logging out of a portal session
// revokes its token, so the old cookie, replayed, opens nothing; the
// browser goes back to the link's return_url (the form targets the top
// window), or, without one, to a page that says where to open the portal
// again, not to the operator's token login. A pasted tenant token is not
// revoked by logging out.
func TestPortal_LogoutEndsTheSession(t *testing.T) {
	e, _ := portalEnv(t, httpapi.ConsoleOptions{Brand: httpapi.Brand{Name: "Acme Cloud"}})
	base, err := url.Parse(e.srv.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	logout := func(b *browser) page {
		t.Helper()
		home := b.get("/console/t/acme/endpoints")
		if home.status != http.StatusOK {
			t.Fatalf("endpoints page: %d", home.status)
		}
		return b.do("POST", "/console/logout", url.Values{"csrf": {home.field(t, csrfField)}})
	}

	t.Run("with a return_url", func(t *testing.T) {
		b := e.browser()
		b.open(link(e, `{"return_url":"https://app.example.com/settings/hooks"}`))
		// The form posts in the frame, where the cookie is (console.js
		// then takes the top window to data-return).
		home := b.get("/console/t/acme/endpoints")
		if !strings.Contains(home.body, `action="/console/logout" data-return="https://app.example.com/settings/hooks">`) {
			t.Errorf("the portal's logout form does not carry the way back:\n%s", home.body)
		}
		old := b.client.Jar.Cookies(base)
		p := logout(b)
		if p.status != http.StatusOK || !strings.Contains(p.body, `href="https://app.example.com/settings/hooks" target="_top"`) || strings.Contains(p.body, "Log out") {
			t.Errorf("logout: %d, want the page with the way back to the return_url:\n%s", p.status, p.body)
		}
		replay := e.browser()
		replay.client.Jar.SetCookies(base, old)
		// Refused, and the page leads back to the app, not to the
		// operator's login.
		p = replay.get("/console/t/acme/endpoints")
		if p.status != http.StatusUnauthorized || !strings.Contains(p.body, `href="https://app.example.com/settings/hooks" target="_top"`) ||
			strings.Contains(p.body, "/console/login") || strings.Contains(p.body, "Log out") || strings.Contains(p.body, `id="endpoints"`) {
			t.Errorf("the cookie replayed after logout: %d, want the session ended with the way back to the app:\n%s", p.status, p.body)
		}
		if p := replay.get("/console/"); p.status != http.StatusUnauthorized || !strings.Contains(p.body, `href="https://app.example.com/settings/hooks" target="_top"`) {
			t.Errorf("the console's root after logout: %d, want the way back to the app:\n%s", p.status, p.body)
		}
		// The same browser coming back to a bookmarked page after
		// logging out is led back to the app too.
		if p := b.get("/console/t/acme/deliveries"); p.status != http.StatusUnauthorized || !strings.Contains(p.body, `href="https://app.example.com/settings/hooks" target="_top"`) {
			t.Errorf("a page after logout: %d, want the way back to the app:\n%s", p.status, p.body)
		}
	})

	t.Run("without one", func(t *testing.T) {
		b := e.browser()
		b.open(link(e, `{}`))
		p := logout(b)
		if p.status != http.StatusOK || !strings.Contains(p.body, "open them from Acme Cloud") || strings.Contains(p.body, "access-tokens") {
			t.Errorf("logout: %d, want a page that says to open the portal from Acme Cloud:\n%s", p.status, p.body)
		}
	})

	t.Run("a pasted tenant token lives on", func(t *testing.T) {
		tok := e.issue("acme", "")
		b := e.browser()
		b.mustLogin(tok.Token, "/console/t/acme/endpoints")
		if p := logout(b); p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/login?m=out" {
			t.Errorf("logout: %d to %q", p.status, p.header.Get("Location"))
		}
		e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries", header: bearer(tok.Token)}, 200, nil)
	})
}

// TestPortal_ShowsNothingOfTheOperators: a portal session's pages name
// the tenant by its display name only and show no token ID, no tenant
// ID and no API path (those are the operator's console's); a replay the
// customer made is theirs ("you"), not "token tok_…". A tenant-token
// session keeps them.
func TestPortal_ShowsNothingOfTheOperators(t *testing.T) {
	e := newConsoleEnv(t) // acme ("Acme"), with a dead delivery
	dl := e.delivery
	b := e.browser()
	b.open(link(e.apiEnv, `{"return_url":"https://app.example.com/hooks"}`))
	csrf := b.get("/console/t/acme/deliveries/"+dl).field(t, csrfField)
	if p := b.do("POST", "/console/t/acme/deliveries/"+dl+"/resend", url.Values{"csrf": {csrf}}); p.status != http.StatusSeeOther {
		t.Fatalf("resend from the portal: %d\n%s", p.status, p.body)
	}

	tags := regexp.MustCompile(`(?s)<[^>]*>`)
	pages := []string{"endpoints", "endpoints/" + e.endpoint.ID + "/edit", "events", "deliveries", "deliveries/" + dl, "dead-letters", "report"}
	for _, path := range pages {
		p := b.get("/console/t/acme/" + path)
		if p.status != http.StatusOK {
			t.Errorf("%s: %d", path, p.status)
			continue
		}
		text := html.UnescapeString(tags.ReplaceAllString(p.body, " "))
		for _, operators := range []string{"tok_", "/v1/", "acme", "expires"} {
			if strings.Contains(text, operators) {
				i := strings.Index(text, operators)
				t.Errorf("portal page %s shows %q: …%s…", path, operators, text[max(0, i-60):min(len(text), i+60)])
			}
		}
		if !strings.Contains(text, "Acme") || !strings.Contains(text, "Log out") {
			t.Errorf("portal page %s lacks the tenant's name or Log out", path)
		}
	}
	if text := tags.ReplaceAllString(b.get("/console/t/acme/deliveries/"+dl).body, " "); !strings.Contains(text, "you") {
		t.Errorf("the delivery page does not say the customer replayed it:\n%s", text)
	}

	// The operator's console keeps its hints.
	tb := e.browser()
	tb.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	if p := tb.get("/console/t/acme/endpoints"); !strings.Contains(strings.ReplaceAll(p.body, "<wbr>", ""), "/v1/tenants/acme/endpoints") || !strings.Contains(p.body, "tok_") {
		t.Errorf("a tenant token's console lost its API hint or its token name:\n%s", p.body)
	}
}

// TestPortal_LinkNotValidOffersTheWayBack: a used or expired link's page
// tells the customer to open the webhooks again from the app (by the
// brand's name when there is one), not to log in with a token; and an
// error inside a portal session still leads back to its pages.
func TestPortal_LinkNotValidOffersTheWayBack(t *testing.T) {
	for _, tc := range []struct {
		brand, from string
	}{{"Acme Cloud", "Acme Cloud"}, {"", "the app that sent you here"}} {
		e, clock := portalEnv(t, httpapi.ConsoleOptions{Brand: httpapi.Brand{Name: tc.brand}})
		used := link(e, `{}`)
		e.browser().open(used)
		expired := link(e, `{"ttl_seconds":60}`)
		clock.Add(int64(61 * time.Second))
		for name, l := range map[string]portalLinkJSON{"used": used, "expired": expired} {
			p := e.browser().open(l)
			if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "open them from "+tc.from) ||
				strings.Contains(p.body, `href="/console/login"`) || strings.Contains(p.body, "Log out") {
				t.Errorf("brand %q, %s link: %d, want the way back through %q and no login or logout:\n%s", tc.brand, name, p.status, tc.from, p.body)
			}
		}
	}
	// A link made with a return_url leads back to it once it is used
	// or expired, and so does its session once it has expired.
	e, clock := portalEnv(t, httpapi.ConsoleOptions{Brand: httpapi.Brand{Name: "Acme Cloud"}, SessionTTL: time.Hour})
	withReturn := link(e, `{"return_url":"https://app.example.com/hooks"}`)
	sess := e.browser()
	sess.open(withReturn)
	for name, p := range map[string]page{
		"the used link":       e.browser().open(withReturn),
		"the expired session": func() page { clock.Add(int64(2 * time.Hour)); return sess.get("/console/t/acme/endpoints") }(),
	} {
		if p.status != http.StatusUnauthorized || !strings.Contains(p.body, `href="https://app.example.com/hooks" target="_top"`) ||
			!strings.Contains(p.body, "Acme Cloud") || strings.Contains(p.body, "/console/login") {
			t.Errorf("%s: %d, want the way back to the return_url:\n%s", name, p.status, p.body)
		}
	}

	b := e.browser()
	b.open(link(e, `{}`))
	if p := b.get("/console/t/acme/deliveries/dlv_nosuch"); p.status != http.StatusNotFound || !strings.Contains(p.body, "Back to the endpoints") {
		t.Errorf("an error in a portal session: %d\n%s", p.status, p.body)
	}
}

// TestConsole_EventTypesPage: the catalogue page lists every event type
// with its description and its example, pretty-printed and escaped, in a
// portal session as in the operator's console.
func TestConsole_EventTypesPage(t *testing.T) {
	e, _ := portalEnv(t, httpapi.ConsoleOptions{})
	e.must(req{method: "PUT", path: "/v1/event-types/payment.succeeded", body: `{"description":"A payment <went> through.","example":{"amount":1250,"note":"</pre><b>x</b>"}}`}, 200, nil)
	e.must(req{method: "PUT", path: "/v1/event-types/invoice.paid", body: `{"description":"An invoice was paid."}`}, 201, nil)
	b := e.browser()
	b.open(link(e, `{}`))
	p := b.get("/console/t/acme/event-types")
	if p.status != http.StatusOK {
		t.Fatalf("event types page: %d\n%s", p.status, p.body)
	}
	for _, want := range []string{
		`<code>invoice.<wbr>paid</code>`, "An invoice was paid.", "No example published.",
		`<code>payment.<wbr>succeeded</code>`, "A payment &lt;went&gt; through.",
		"\n  &#34;amount&#34;: 1250,",
		`aria-current="page">Event types</a>`,
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the event types page lacks %q:\n%s", want, p.body)
		}
	}
	if strings.Contains(p.body, "<b>x") {
		t.Error("the example's markup reached the page unescaped")
	}
	if strings.Index(p.body, "invoice.paid") > strings.Index(p.body, "payment.succeeded") {
		t.Error("the event types are not in name order")
	}
}

// TestConsole_EventTypesPage_SchemaAndStatus: the catalogue page shows
// a type's schema pretty-printed and escaped (the operator wrote it,
// a customer reads it), and a deprecated or archived type marked as
// such, in a portal session as in the operator's console.
func TestConsole_EventTypesPage_SchemaAndStatus(t *testing.T) {
	e, _ := portalEnv(t, httpapi.ConsoleOptions{})
	e.must(req{method: "PUT", path: "/v1/event-types/payment.succeeded", body: `{"description":"A payment went through.","status":"deprecated","schema":{"type":"object","required":["amount"],"properties":{"amount":{"type":"integer","description":"</pre><b>cents</b>"}}},"example":{"amount":1250}}`}, 200, nil)
	e.must(req{method: "PUT", path: "/v1/event-types/invoice.paid", body: `{"description":"An invoice was paid.","status":"archived"}`}, 201, nil)
	e.must(req{method: "PUT", path: "/v1/event-types/order.created", body: `{"description":"An order was placed."}`}, 201, nil)
	admin := e.browser()
	admin.mustLogin(testToken, "/console/tenants")
	customer := e.browser()
	customer.open(link(e, `{}`))
	for who, b := range map[string]*browser{"the operator": admin, "a customer": customer} {
		p := b.get("/console/t/acme/event-types")
		if p.status != http.StatusOK {
			t.Fatalf("%s: event types page: %d\n%s", who, p.status, p.body)
		}
		for _, want := range []string{
			`<summary>Schema of the <code>data</code></summary><pre class="schema">{
  &#34;type&#34;: &#34;object&#34;,`,
			// As stored: JSON's escapes of <, > and &.
			`&#34;description&#34;: &#34;\u003c/pre\u003e\u003cb\u003ecents\u003c/b\u003e&#34;`,
			`<span class="badge status-deprecated">Deprecated</span>`,
			`<span class="badge status-archived">Archived</span>`,
			"No schema published.",
		} {
			if !strings.Contains(p.body, want) {
				t.Errorf("%s: the event types page lacks %q:\n%s", who, want, p.body)
			}
		}
		if strings.Contains(p.body, "<b>cents") {
			t.Errorf("%s: the schema's markup reached the page unescaped", who)
		}
		if strings.Count(p.body, "status-active") != 0 {
			t.Errorf("%s: an active type is marked", who)
		}
		// Where an endpoint's types are chosen, too.
		if p := b.get("/console/t/acme/endpoints"); !strings.Contains(p.body, `<code>payment.succeeded</code> <span class="badge status-deprecated">deprecated</span>`) {
			t.Errorf("%s: the new endpoint's form does not mark the deprecated type:\n%s", who, p.body)
		}
	}
}
