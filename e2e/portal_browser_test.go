package e2e

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// resizeScript is the script docs/portal.md gives operators to size the
// portal's frame, as written there, with the console's origin in place
// of the doc's example origin: the test runs the doc.
func resizeScript(t *testing.T, origin string) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/portal.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- frame-resize:[^>]*-->\n```html\n.*?(<script>.*?</script>)\n```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/portal.md has no frame-resize snippet with a <script>")
	}
	return strings.ReplaceAll(string(m[1]), "https://hooks.example.com", origin)
}

// contrastJS lists each visible text of the page whose colour reads at
// less than 4.5:1 on the background it is drawn on (the nearest
// ancestor's opaque one), WCAG 2's ratio. SVG text (the report's chart
// ticks, drawn with fill) is left to TestConsole_Palette.
const contrastJS = `(() => {
	const parse = c => { const m = /rgba?\(([^)]+)\)/.exec(c); if (!m) return null; const p = m[1].split(",").map(Number); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
	const lin = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
	const lum = c => 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b);
	const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
	const bg = el => { for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor); if (c && c.a > 0) return c; } return {r: 255, g: 255, b: 255, a: 1}; };
	const bad = [], seen = new Set();
	const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
	while (w.nextNode()) {
		const el = w.currentNode.parentElement;
		if (!w.currentNode.textContent.trim() || seen.has(el) || el.closest("svg, option, select")) continue;
		seen.add(el);
		const r = el.getBoundingClientRect(), st = getComputedStyle(el);
		if (r.width === 0 || r.height === 0 || st.visibility === "hidden") continue;
		const c = ratio(parse(st.color), bg(el));
		if (c < 4.5) bad.push(el.tagName.toLowerCase() + " " + JSON.stringify(w.currentNode.textContent.trim().slice(0, 40)) + ": " + st.color + " on " + getComputedStyle(el).backgroundColor + " = " + c.toFixed(2));
	}
	return bad;
})()`

// TestPortal_Browser opens a portal link the way a customer does: in a
// frame of the operator's app on another origin, sized by the script
// docs/portal.md gives, in headless Chromium, and walks the customer's
// pages. No page text of the session shows a token ID, the tenant's ID
// or an API path; text reads at 4.5:1 in the light and the dark palette
// (with a brand accent that needs shading); the frame takes the page's
// height (one scrollbar, the app's); the catalogue shows its example;
// the report's buckets add up to its total; an endpoint is deleted and
// another's secret revealed;
// Log out lands on return_url in the top window; the old cookie then
// opens nothing and leads back to the app, as an expired link does.
// Screenshots at 375 and 1280 px, light and dark, go to
// $WEBHOOKD_SCREENSHOTS when set (docs/screenshots).
func TestPortal_Browser(t *testing.T) {
	if testing.Short() {
		t.Skip("the browser test runs in the full suite (go test ./...), not with -short")
	}
	chromium := chromiumPath(t)
	t.Parallel()

	// The operator's app, on another site (localhost, where webhookd is
	// 127.0.0.1): "/" frames the link it is given with the doc's script;
	// "/frame" frames any console URL; "/settings" is where return_url
	// leads.
	var link atomic.Value
	var base string // webhookd's origin, once it runs
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		src := link.Load().(string)
		switch r.URL.Path {
		case "/settings":
			fmt.Fprint(w, `<!doctype html><title>settings</title><h1 id="settings">Your app's settings</h1>`)
			return
		case "/frame":
			src = base + r.URL.Query().Get("path")
		}
		fmt.Fprintf(w, `<!doctype html><meta name="viewport" content="width=device-width, initial-scale=1"><title>app</title><body style="margin:0"><h1>Your app</h1>
<iframe id="webhooks" src="%s" title="Webhooks" style="width: 100%%; border: 0" height="200"></iframe>
%s`, html.EscapeString(src), resizeScript(t, base))
	}))
	defer app.Close()
	appOrigin := strings.Replace(app.URL, "127.0.0.1", "localhost", 1)

	cfg := testConfig + `[console]
frame_ancestors = ["` + appOrigin + `"]
[console.brand]
name = "Acme Cloud"
accent = "#ffb000"
`
	in := startInstance(t, t.TempDir(), cfg)
	base = in.base
	in.setup()
	in.mustCall(200, "PUT", "/v1/event-types/payment.succeeded", `{"description":"A payment went through.","example":{"order":"ord_example","amount":1250}}`, nil)
	const tenant, tenantName = "globex-7", "Globex Corp"
	in.mustCall(201, "PUT", "/v1/tenants/"+tenant, `{"name":"`+tenantName+`"}`, nil)
	good := newReceiver(t, func(int, http.ResponseWriter, *http.Request) {})
	failing := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	gone := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) })
	endpoints, secrets := map[string]string{}, map[string]string{}
	for name, rc := range map[string]*receiver{"Billing service": good, "Audit log": failing, "Old CRM": gone} {
		var ep endpointCreated
		in.mustCall(201, "POST", "/v1/tenants/"+tenant+"/endpoints", map[string]any{"url": rc.srv.URL + "/hooks/" + strings.ToLower(strings.ReplaceAll(name, " ", "_")), "description": name, "event_types": []string{"*"}}, &ep)
		rc.setSecret(ep.Secret)
		endpoints[name], secrets[name] = ep.ID, ep.Secret
	}
	var last string
	for i := range 4 {
		var res ingestResponse
		in.mustCall(202, "POST", "/v1/tenants/"+tenant+"/events", fmt.Sprintf(`{"type":"payment.succeeded","data":{"order":"ord_%d"}}`, i), &res)
		for _, d := range res.Deliveries {
			if d.EndpointID == endpoints["Audit log"] {
				last = d.ID
			}
		}
	}
	// The failing endpoint's last delivery dies after the test schedule
	// (20, 40, 80 ms); the others are done by then too.
	waitFor(t, "the failing endpoint's last delivery dead", func() bool {
		var d struct {
			State string `json:"state"`
		}
		in.mustCall(200, "GET", "/v1/tenants/"+tenant+"/deliveries/"+last, nil, &d)
		return d.State == "dead"
	})
	newLink := func(ttl string) string {
		var l struct {
			URL string `json:"url"`
		}
		in.mustCall(201, "POST", "/v1/tenants/"+tenant+"/portal-links", `{"ttl":"`+ttl+`","return_url":"`+appOrigin+`/settings"}`, &l)
		return l.URL
	}

	bctx, shot := startBrowser(t, chromium)
	ctx, cancel := context.WithTimeout(bctx, 120*time.Second)
	defer cancel()
	began := time.Now()
	step := func(what string, c context.Context, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		t.Logf("%v %s", time.Since(began).Round(time.Millisecond), what)
		if err := chromedp.Do(c, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(c context.Context, js string) string {
		t.Helper()
		v, err := chromedp.Run(c, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}

	link.Store(newLink("5m"))
	step("open the app", ctx, chromedp.Navigate(appOrigin+"/"))
	fctx := waitFrame(t, ctx, in.base+"/console/t/"+tenant+"/deliveries")
	step("the portal's deliveries", fctx, chromedp.WaitVisible(chromedp.ID("deliveries")))

	// open loads a page of the portal inside the frame and waits for the
	// element with id ready.
	open := func(path, ready string) {
		t.Helper()
		step("open "+path, fctx, chromedp.Navigate(in.base+path),
			chromedp.Poll[chromedp.Void](`location.pathname + location.search === `+strconv.Quote(path)+` && document.readyState === "complete" && document.getElementById(`+strconv.Quote(ready)+`)`))
	}
	// sized reports, once the doc's script has run, whether the frame is
	// as tall as its page: the page shows whole and scrolls with the app.
	sized := func(what string) {
		t.Helper()
		for {
			h := eval(fctx, `String(Math.ceil(document.documentElement.getBoundingClientRect().height)) + " " + String(document.documentElement.scrollHeight <= window.innerHeight)`)
			frameH := eval(ctx, `String(Math.ceil(document.getElementById("webhooks").getBoundingClientRect().height))`)
			if strings.HasSuffix(h, " true") && strings.HasPrefix(h, frameH+" ") {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: the frame is %s px tall, its page %s (height, fits): the frame does not take the page's height", what, frameH, h)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	// check asserts what every page of the session must: nothing of the
	// operator's in its text, and text that reads in the current palette.
	check := func(path, palette string) {
		t.Helper()
		text := eval(fctx, `document.body.innerText`)
		for _, leak := range []string{"tok_", tenant, "/v1/"} {
			if strings.Contains(text, leak) {
				t.Errorf("%s shows %q to the customer:\n%s", path, leak, text)
			}
		}
		if !strings.Contains(text, tenantName) {
			t.Errorf("%s does not name the tenant %q", path, tenantName)
		}
		bad, err := chromedp.Run(fctx, chromedp.Evaluate[[]string](contrastJS))
		if err != nil {
			t.Fatal(err)
		}
		if len(bad) > 0 {
			t.Errorf("%s (%s): text below 4.5:1: %q", path, palette, bad)
		}
	}
	pages := []struct{ path, ready string }{
		{"/console/t/" + tenant + "/deliveries", "deliveries"},
		{"/console/t/" + tenant + "/deliveries/" + last, "attempts"},
		{"/console/t/" + tenant + "/endpoints", "endpoints"},
		{"/console/t/" + tenant + "/endpoints/" + endpoints["Billing service"] + "/edit", "test-event"},
		{"/console/t/" + tenant + "/events", "events"},
		{"/console/t/" + tenant + "/event-types", "event-types"},
		{"/console/t/" + tenant + "/dead-letters", "dead-letters"},
		{"/console/t/" + tenant + "/report", "rate"},
	}
	palettes := []struct {
		name   string
		scheme string
	}{{"light", "light"}, {"dark", "dark"}}
	for _, p := range palettes {
		media := emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: p.scheme}}}
		for _, c := range []context.Context{ctx, fctx} {
			if _, err := chromedp.Call(c, emulation.SetEmulatedMedia, media); err != nil {
				t.Fatal(err)
			}
		}
		for _, pg := range pages {
			open(pg.path, pg.ready)
			sized(pg.path)
			check(pg.path, p.name)
		}
		// Screenshots of the app with the portal in it, the frame
		// sized to its page: the deliveries and a dead delivery, at a
		// desktop's and a phone's width.
		for _, width := range []int64{1280, 375} {
			for _, pg := range []struct{ name, path, ready string }{
				{"deliveries", pages[0].path, pages[0].ready},
				{"delivery", pages[1].path, pages[1].ready},
			} {
				if _, err := chromedp.Call(ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: width, Height: 900, DeviceScaleFactor: 1, Mobile: width < 500}); err != nil {
					t.Fatal(err)
				}
				open(pg.path, pg.ready)
				sized(pg.path + " at " + strconv.FormatInt(width, 10) + " px")
				if w := eval(fctx, `String(document.documentElement.scrollWidth <= window.innerWidth)`); w != "true" {
					t.Errorf("%s at %d px scrolls sideways", pg.path, width)
				}
				// The whole app in the window: a full-page capture
				// leaves a cross-site frame blank.
				tall, err := strconv.ParseInt(eval(ctx, `String(document.documentElement.scrollHeight)`), 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := chromedp.Call(ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: width, Height: tall, DeviceScaleFactor: 1, Mobile: width < 500}); err != nil {
					t.Fatal(err)
				}
				sized(pg.path)
				step("screenshot", ctx, shot(fmt.Sprintf("portal-%s-%d-%s", pg.name, width, p.name)))
			}
		}
		if _, err := chromedp.Call(ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 1280, Height: 900, DeviceScaleFactor: 1}); err != nil {
			t.Fatal(err)
		}
	}

	// The catalogue: the type, its description and its example.
	open("/console/t/"+tenant+"/event-types", "event-types")
	if text := eval(fctx, `document.getElementById("event-types").innerText`); !strings.Contains(text, "payment.succeeded") ||
		!strings.Contains(text, "A payment went through.") || !strings.Contains(text, `"ord_example"`) {
		t.Errorf("the catalogue page:\n%s", text)
	}

	// The report: every delivery in exactly one bucket.
	open("/console/t/"+tenant+"/report", "rate")
	sum := eval(fctx, `String(["first", "retry", "replayed", "pending", "waiting", "paused", "dead"].reduce((n, id) => n + Number(document.getElementById(id).textContent), 0)) + " of " + document.getElementById("total").textContent`)
	if sum != "12 of 12" {
		t.Errorf("the report's buckets: %s, want 12 of 12 (4 events to 3 endpoints)", sum)
	}

	// Delete the endpoint that answers 410.
	// Clicks wait for the frame to take its page's height: a click
	// aimed while the app still resizes the frame lands beside its
	// target.
	open("/console/t/"+tenant+"/endpoints/"+endpoints["Old CRM"]+"/edit", "delete-endpoint")
	sized("the endpoint to delete")
	step("tick the confirmation", fctx, chromedp.Click(chromedp.ID("delete-confirm")))
	if eval(fctx, `String(document.getElementById("delete-confirm").checked)`) != "true" {
		t.Fatal("the click did not tick the delete confirmation")
	}
	step("delete it", fctx, chromedp.Click(chromedp.ID("delete")), chromedp.WaitVisible(chromedp.ID("notice")))
	if text := eval(fctx, `document.getElementById("endpoints").innerText`); strings.Contains(text, "Old CRM") || !strings.Contains(text, "Billing service") {
		t.Errorf("the endpoints after the delete:\n%s", text)
	}

	// Reveal the signing secret: the one the endpoint was made with.
	open("/console/t/"+tenant+"/endpoints/"+endpoints["Billing service"]+"/edit", "reveal-secret")
	sized("the endpoint to reveal")
	step("reveal the secret", fctx, chromedp.Click(chromedp.ID("reveal-secret")), chromedp.WaitVisible(chromedp.ID("secret-revealed")))
	if got := eval(fctx, `document.getElementById("secret-revealed").textContent`); got != secrets["Billing service"] {
		t.Errorf("the revealed secret is not the endpoint's (%d bytes, want %d)", len(got), len(secrets["Billing service"]))
	}
	if text := eval(fctx, `document.getElementById("secret-reveals").textContent`); !strings.Contains(text, "revealed once, last by you") {
		t.Errorf("the reveal is not recorded as the customer's: %q", text)
	}
	check("the revealed secret", "dark")

	// Log out: the whole window goes back to the app.
	sized("the page to log out from")
	step("log out", fctx, chromedp.Click(chromedp.CSS(`form[action="/console/logout"] button`)))
	step("back in the app", ctx, chromedp.WaitVisible(chromedp.ID("settings")))
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || loc != appOrigin+"/settings" {
		t.Errorf("after logout the window is at %q (%v), want the return_url %s/settings", loc, err, appOrigin)
	}

	// The old cookie, in the app's frame again: refused, with the way
	// back to the app.
	step("a page after logout", ctx, chromedp.Navigate(appOrigin+"/frame?path=/console/t/"+tenant+"/endpoints"))
	wayBack := func(what, prefix string) {
		t.Helper()
		// The frame may be replaced while it loads (a link's page posts
		// itself at once): find it again until its page shows the way
		// back, a bounded number of times.
		var c context.Context
		for try := 1; ; try++ {
			c = waitFrame(t, ctx, in.base+prefix)
			// Attach first: the context of a target's first action
			// bounds the attachment's life, and tctx ends soon.
			if err := chromedp.Do(c); err != nil {
				t.Fatal(err)
			}
			tctx, cancel := context.WithTimeout(c, 10*time.Second)
			err := chromedp.Do(tctx, chromedp.WaitVisible(chromedp.ID("way-back")))
			cancel()
			if err == nil {
				break
			}
			if try == 5 {
				t.Fatalf("%s: no way back shown after %d tries: %v", what, try, err)
			}
			t.Logf("%s: try %d: %v", what, try, err)
		}
		text := eval(c, `document.body.innerText`)
		href := eval(c, `document.querySelector("#way-back a") ? document.querySelector("#way-back a").href + " " + document.querySelector("#way-back a").target : ""`)
		if href != appOrigin+"/settings _top" || strings.Contains(text, "Log in") || strings.Contains(text, "Log out") || strings.Contains(text, "Billing service") {
			t.Errorf("%s: the way back is %q, want %s/settings in the top window, and nothing else:\n%s", what, href, appOrigin, text)
		}
	}
	wayBack("the old cookie", "/console/t/"+tenant+"/endpoints")

	// An expired link: the same way back.
	link.Store(newLink("1s"))
	time.Sleep(1100 * time.Millisecond) // let the link's second pass: webhookd's own clock, no other way to age it
	step("an expired link", ctx, chromedp.Navigate(appOrigin+"/"))
	wayBack("the expired link", "/console/portal/")
	step("screenshot", ctx, shot("portal-link-expired"))
}

// waitFrame waits for a frame of the page in ctx to show a URL with the
// prefix, and returns a context that acts inside that frame.
func waitFrame(t *testing.T, ctx context.Context, prefix string) context.Context {
	t.Helper()
	for {
		infos, err := chromedp.Targets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range infos {
			if info.Type == "iframe" && strings.HasPrefix(info.URL, prefix) {
				fctx, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(info.TargetID))
				t.Cleanup(cancel)
				return fctx
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no frame showed %s: %v", prefix, infos)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
