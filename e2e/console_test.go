package e2e

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// chromiumPath returns the Chromium the browser test drives:
// $WEBHOOKD_CHROMIUM, else the first of chromium, chromium-browser and
// google-chrome on PATH. Without one the test fails when CI is set (and
// not "false" or "0"; .ci/run installs Debian's chromium) and is skipped
// otherwise.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("WEBHOOKD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium found (chromium, chromium-browser or google-chrome on PATH, or WEBHOOKD_CHROMIUM): " +
		"install it (Debian: apt-get install chromium) to run the console's browser test"
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// TestConsole_Browser drives the web console in headless Chromium, as the
// README's walk-through does: log in with a tenant token, find the dead
// delivery, see why it failed, fix the endpoint, press Resend and see it
// succeed, then replay the other dead letter by range from the dead-letters
// page. Screenshots of each step go to the test's temp dir (and to
// $WEBHOOKD_SCREENSHOTS when set, to keep them).
func TestConsole_Browser(t *testing.T) {
	if testing.Short() {
		t.Skip("the browser test runs in the full suite (go test ./...), not with -short")
	}
	chromium := chromiumPath(t)
	t.Parallel()
	start := time.Now()

	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	var fixed atomic.Bool
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if fixed.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `<b>database is down</b>`) // shown as text, never as HTML
	})
	ep := in.createEndpoint(rc.srv.URL, "payment.succeeded")
	rc.setSecret(ep.Secret)
	firstEvent := in.ingest("payment.succeeded", `{"order":"ord_1"}`)
	first := firstEvent.Deliveries[0].ID
	second := in.ingest("payment.succeeded", `{"order":"ord_2"}`).Deliveries[0].ID
	in.waitState(first, "dead")
	in.waitState(second, "dead")

	var tok struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	in.mustCall(201, "POST", "/v1/tenants/acme/access-tokens", `{"ttl":"1h"}`, &tok)

	bctx, shot := startBrowser(t, chromium)
	ctx, cancel := context.WithTimeout(bctx, 45*time.Second) // the whole walk-through
	defer cancel()
	// Accept the confirmation console.js asks before a range replay.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()

	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	deliveryURL := in.base + "/console/t/acme/deliveries/" + first
	// The browser's time zone, which the pages' times are shown in.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Tokyo"}); err != nil {
		t.Fatal(err)
	}

	// Log in with the tenant token.
	do("log in",
		chromedp.Navigate(in.base+"/console/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		shot("1-login"),
		chromedp.SendKeys(chromedp.ID("token"), tok.Token),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("endpoints")),
		shot("2-endpoints"),
	)
	if who := text(".who span"); !strings.Contains(who, tok.ID) {
		t.Errorf("logged in as %q, want token %s", who, tok.ID)
	}

	// The dead deliveries, then the first one: every attempt, the 500,
	// the reason, the response excerpt as text.
	do("list the dead deliveries",
		chromedp.Navigate(in.base+"/console/t/acme/deliveries?state=dead"),
		chromedp.WaitVisible(chromedp.ID("deliveries")),
		shot("3-dead-deliveries"),
	)
	if list := text("#deliveries tbody"); strings.Count(list, "dead") != 2 {
		t.Errorf("the dead filter should list 2 dead deliveries:\n%s", list)
	}
	// Times read in the browser's zone, how long ago, with UTC on hover.
	when, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
		const el = document.querySelector("#deliveries time");
		return [el.textContent, el.title, el.getAttribute("datetime"), document.getElementById("tz-note").textContent];
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if utc, _ := time.Parse(time.RFC3339, when[2]); !strings.Contains(when[0], utc.In(time.FixedZone("JST", 9*3600)).Format("3:04:05")) ||
		!strings.Contains(when[0], "ago") && !strings.Contains(when[0], "now") || !strings.HasSuffix(when[1], " UTC") || !strings.Contains(when[3], "Asia/Tokyo") {
		t.Errorf("a time reads %q (title %q, datetime %s; note %q), want Tokyo's time and how long ago, UTC on hover", when[0], when[1], when[2], when[3])
	}
	do("open the dead delivery",
		chromedp.Click(chromedp.CSS(`a[href="/console/t/acme/deliveries/`+first+`"]`)),
		chromedp.WaitVisible(chromedp.ID("attempts")),
		shot("4-dead-delivery"),
	)
	if state, reason := text("#state"), text("#reason"); state != "dead" || !strings.Contains(reason, "all 4 attempts failed") {
		t.Errorf("state %q, reason %q; want dead, all 4 attempts failed", state, reason)
	}
	if attempts := text("#attempts"); strings.Count(attempts, "HTTP 500") != 4 || !strings.Contains(attempts, "<b>database is down</b>") {
		t.Errorf("the attempts table should show four HTTP 500s and the excerpt as text:\n%s", attempts)
	}

	// Find the event by its ID from the header's search: its payload,
	// indented, and its delivery.
	do("search for the event",
		chromedp.SendKeys(chromedp.ID("q"), firstEvent.ID),
		chromedp.Submit(chromedp.ID("q")),
		chromedp.WaitVisible(chromedp.ID("payload")),
		shot("4b-event"),
	)
	if payload := text("#payload"); !strings.Contains(payload, "\n  \"data\": {\n    \"order\": \"ord_1\"") {
		t.Errorf("the event page's payload is not the indented envelope:\n%s", payload)
	}
	if ds := text("#event-deliveries"); !strings.Contains(ds, first) {
		t.Errorf("the event page does not list delivery %s:\n%s", first, ds)
	}
	do("back to the delivery", chromedp.Navigate(deliveryURL), chromedp.WaitVisible(chromedp.ID("attempts")))

	// Fix the endpoint, press Resend, see it succeed.
	fixed.Store(true)
	do("resend", chromedp.Click(chromedp.ID("resend")), chromedp.WaitVisible(chromedp.ID("notice")))
	if notice := text("#notice"); !strings.Contains(notice, "Resent") {
		t.Errorf("notice after Resend: %q", notice)
	}
	in.waitState(first, "succeeded") // then the page must show it
	do("reload the delivery", chromedp.Navigate(deliveryURL), chromedp.WaitVisible(chromedp.ID("state")), shot("5-resent"))
	if state := text("#state"); state != "succeeded" {
		t.Fatalf("after Resend the delivery is %q, want succeeded", state)
	}
	if replays := text("#replays"); !strings.Contains(replays, "token "+tok.ID) {
		t.Errorf("the replay history should name the token:\n%s", replays)
	}
	if attempts := text("#attempts"); !strings.Contains(attempts, "HTTP 200") {
		t.Errorf("no HTTP 200 attempt:\n%s", attempts)
	}

	// Replay the other dead letter by range, from the dead-letters page.
	do("open the dead letters",
		chromedp.Navigate(in.base+"/console/t/acme/dead-letters"),
		chromedp.WaitVisible(chromedp.ID("replay-form")),
		shot("6-dead-letters"),
	)
	if dead := text("#dead-letters tbody"); strings.Count(dead, "all 4 attempts failed") != 1 {
		t.Errorf("the dead letters should list the second delivery only:\n%s", dead)
	}
	do("range replay",
		chromedp.Click(chromedp.ID("replay-range")),
		chromedp.WaitVisible(chromedp.ID("notice")),
		shot("7-range-replayed"),
	)
	if notice := text("#notice"); !strings.Contains(notice, "Range replay started") {
		t.Errorf("notice after the range replay: %q", notice)
	}
	if kind := text("h1"); kind != "Replay of dead letters" {
		t.Errorf("the range replay went to %q, want its task's page", kind)
	}
	in.waitState(second, "succeeded")

	// Three more dead letters, ticked one by one and replayed at once.
	fixed.Store(false)
	var three []string
	for i := range 3 {
		id := in.ingest("payment.succeeded", fmt.Sprintf(`{"order":"ord_%d"}`, 10+i)).Deliveries[0].ID
		in.waitState(id, "dead")
		three = append(three, id)
	}
	fixed.Store(true)
	steps := []chromedp.Action[chromedp.Void]{chromedp.Navigate(in.base + "/console/t/acme/dead-letters"), chromedp.WaitVisible(chromedp.ID("dead-letters"))}
	for _, id := range three {
		steps = append(steps, chromedp.Click(chromedp.CSS(`input[value="`+id+`"]`)))
	}
	steps = append(steps, shot("7b-selected"), chromedp.Click(chromedp.ID("replay-selected")), chromedp.WaitVisible(chromedp.ID("notice")))
	do("replay three selected dead letters", steps...)
	if notice := text("#notice"); !strings.Contains(notice, "Replayed the selected deliveries: 3") {
		t.Errorf("notice after replaying the selection: %q", notice)
	}
	for _, id := range three {
		in.waitState(id, "succeeded")
	}

	// The report: its "Over the last [n] events" reads on one line.
	do("open the report",
		chromedp.Navigate(in.base+"/console/t/acme/report"),
		chromedp.WaitVisible(chromedp.ID("rate")),
		shot("8-report"),
	)
	oneLine, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const l = document.querySelector("form.filter label"), i = l.querySelector("input");
		return l.getBoundingClientRect().height < 1.5 * i.getBoundingClientRect().height;
	})()`))
	if err != nil || !oneLine {
		t.Errorf(`the report's "Over the last [n] events" wraps (%v)`, err)
	}
	// Its charts: a point per hour with attempts, as many as the rows of
	// its numbers.
	pts, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[
		document.querySelectorAll("#chart-rate circle").length,
		document.querySelectorAll("#chart-latency circle.pt-p99").length,
		document.querySelectorAll("#chart-table tbody tr").length]`))
	if err != nil || len(pts) != 3 || pts[0] < 1 || pts[0] != pts[1] || pts[0] != pts[2] {
		t.Errorf("the report's charts: %v points (rate, p99, table rows), want the same number, at least 1 (%v)", pts, err)
	}
	// A new endpoint, added from the console: its secret shown once, then
	// a test event of a catalogue type's example, which a loopback
	// receiver verifies with that secret; the events list marks it.
	in.mustCall(200, "PUT", "/v1/event-types/invoice.paid", map[string]any{"description": "an invoice was paid", "example": map[string]any{"invoice": "inv_example", "amount": 4200}}, nil)
	got := make(chan struct{}, 1)
	rc2 := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		select {
		case got <- struct{}{}:
		default:
		}
	})
	do("add an endpoint",
		chromedp.Navigate(in.base+"/console/t/acme/endpoints"),
		chromedp.WaitVisible(chromedp.ID("new-endpoint")),
		chromedp.SendKeys(chromedp.ID("ep-url"), rc2.srv.URL+"/hooks"),
		chromedp.SendKeys(chromedp.ID("ep-desc"), "billing"),
		chromedp.Click(chromedp.CSS(`#new-endpoint input[value="invoice.paid"]`)),
		shot("2b-new-endpoint-form"),
		chromedp.Click(chromedp.ID("add-endpoint")),
		chromedp.WaitVisible(chromedp.ID("secret")),
		shot("2c-new-endpoint-secret"),
	)
	secret, newEp := text("#secret"), text("#endpoint-id")
	if !strings.HasPrefix(secret, "whsec_") || !strings.HasPrefix(newEp, "ep_") {
		t.Fatalf("the new endpoint page shows secret %q, ID %q", secret, newEp)
	}
	rc2.setSecret(secret)
	do("open its page",
		chromedp.Click(chromedp.ID("test-new")),
		chromedp.WaitVisible(chromedp.ID("send-test")),
		shot("2d-endpoint-test-event"),
	)
	// By keyboard alone: Tab from the top of the page reaches the button
	// (every control on the way is focusable in order), Enter presses it.
	reached := false
	for range 80 {
		do("press Tab", chromedp.KeyEvent(kb.Tab))
		id, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.id`))
		if err != nil {
			t.Fatal(err)
		}
		if id == "send-test" {
			reached = true
			break
		}
	}
	if !reached {
		t.Fatal("80 presses of Tab did not reach Send test event")
	}
	do("send it a test event with Enter", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.ID("notice")))
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the test event did not reach the new endpoint's receiver in 10 s")
	}
	tested := rc2.got()
	if len(tested) != 1 || tested[0].sigErr != nil || !strings.Contains(string(tested[0].body), `"type":"invoice.paid"`) || !strings.Contains(string(tested[0].body), `"invoice":"inv_example"`) {
		t.Fatalf("the receiver got %d requests (first: %+v), want the invoice.paid example, signed with the secret the page showed", len(tested), tested)
	}
	if mark := text("#test-mark"); mark != "test" {
		t.Errorf("the test event's delivery page marks it %q", mark)
	}
	do("the events list",
		chromedp.Click(chromedp.CSS(`header nav a[href="/console/t/acme/events"]`)),
		chromedp.WaitVisible(chromedp.ID("events")),
		shot("2e-events"),
	)
	if first := text("#events tbody tr"); !strings.Contains(first, "invoice.paid") || !strings.Contains(first, "test") {
		t.Errorf("the events list's first row is not the test event:\n%s", first)
	}

	// At a phone's width (375 px) every page fits: no sideways scroll of
	// the page; a wide table scrolls inside its own box.
	if _, err := chromedp.Call(ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 375, Height: 800, DeviceScaleFactor: 1, Mobile: true}); err != nil {
		t.Fatal(err)
	}
	for _, pg := range []struct{ name, path, ready string }{
		{"9-phone-endpoints", "/console/t/acme/endpoints", "endpoints"},
		{"9-phone-endpoint", "/console/t/acme/endpoints/" + newEp + "/edit", "test-event"},
		{"9-phone-events", "/console/t/acme/events", "events"},
		{"9-phone-deliveries", "/console/t/acme/deliveries", "deliveries"},
		{"9-phone-delivery", "/console/t/acme/deliveries/" + first, "attempts"},
		{"9-phone-dead-letters", "/console/t/acme/dead-letters", "dead-letters"},
		{"9-phone-report", "/console/t/acme/report", "rate"},
	} {
		do("open "+pg.path+" at 375 px", chromedp.Navigate(in.base+pg.path), chromedp.WaitVisible(chromedp.ID(pg.ready)), shot(pg.name))
		fits, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`))
		if err != nil || len(fits) != 2 || fits[0] > 375 {
			t.Errorf("%s at 375 px: the page is %v wide (page, window) (%v)", pg.path, fits, err)
		}
		checkAccessible(t, ctx, pg.path)
	}
	// The admin's pages: log out, log in with the admin token, the
	// tenants page with every tenant's report and the create form.
	if _, err := chromedp.Call(ctx, emulation.ClearDeviceMetricsOverride, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	do("log in as the admin",
		chromedp.Navigate(in.base+"/console/t/acme/endpoints"),
		chromedp.WaitVisible(chromedp.ID("endpoints")),
		chromedp.Click(chromedp.CSS(".who form button")),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("tenants")),
		shot("10-tenants"),
	)
	if row := text("#tenants tbody"); !strings.Contains(row, "acme") {
		t.Errorf("the tenants page does not list acme:\n%s", row)
	}
	rc.checkSignatures()
	rc2.checkSignatures()
	t.Logf("browser test took %s", time.Since(start).Round(time.Millisecond))
}

// checkAccessible fails t when the page open in ctx has a form control
// without a label (a <label> tied to it, or aria-label), a button or
// link without a name, or an element put out of the keyboard's natural
// order (a positive tabindex) or made clickable without being focusable.
func checkAccessible(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
		const bad = [];
		const name = e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.name ? "[name=" + e.name + "]" : "");
		for (const e of document.querySelectorAll("input:not([type=hidden]), select, textarea"))
			if (!e.labels.length && !e.getAttribute("aria-label")) bad.push("no label: " + name(e));
		for (const e of document.querySelectorAll("button, a[href]"))
			if (!e.textContent.trim() && !e.getAttribute("aria-label") && !e.querySelector("img[alt]:not([alt=''])")) bad.push("no name: " + name(e));
		for (const e of document.querySelectorAll("[tabindex]"))
			if (e.tabIndex > 0) bad.push("tabindex > 0: " + name(e));
		for (const e of document.querySelectorAll("[onclick]"))
			if (e.tabIndex < 0) bad.push("clickable, not focusable: " + name(e));
		return bad;
	})()`))
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if len(bad) > 0 {
		t.Errorf("%s is not accessible: %v", page, bad)
	}
}

// startBrowser starts headless Chromium at 1280×900 and returns its
// context and an action that saves a screenshot of the page under name
// in the test's temp dir (and in $WEBHOOKD_SCREENSHOTS when set, to keep
// them).
func startBrowser(t *testing.T, chromium string) (context.Context, func(name string) chromedp.Action[chromedp.Void]) {
	t.Helper()
	shots := t.TempDir()
	keep := os.Getenv("WEBHOOKD_SCREENSHOTS")
	if keep != "" {
		if err := os.MkdirAll(keep, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			// A page that fits the window is shot as the window shows
			// it: the full-page capture leaves a cross-site frame blank.
			fits, err := chromedp.Evaluate[bool](`document.documentElement.scrollHeight <= window.innerHeight`)(ctx, tg)
			if err != nil {
				return err
			}
			capture := chromedp.FullScreenshot(100) // quality 100: PNG
			if fits {
				capture = chromedp.CaptureScreenshot()
			}
			png, err := capture(ctx, tg)
			if err != nil {
				return err
			}
			for _, dir := range []string{shots, keep} {
				if dir == "" {
					continue
				}
				path := filepath.Join(dir, name+".png")
				if err := os.WriteFile(path, png, 0o644); err != nil {
					return err
				}
				t.Logf("screenshot %s", path)
			}
			return nil
		})
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "profile")),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(bctx); err != nil { // start the browser, with no timeout on it
		t.Fatalf("start %s: %v", chromium, err)
	}
	return bctx, shot
}

// TestConsole_PortalFramed opens portal links inside an iframe of an
// operator's app served by another loopback site (localhost frames
// 127.0.0.1: another site to the browser): an app listed in
// [console] frame_ancestors shows the tenant's console, logged in by the
// link, with a cookie the cross-site frame keeps; the link a second time
// shows that it is used; an app not listed gets no console, and its link
// stays unused.
func TestConsole_PortalFramed(t *testing.T) {
	if testing.Short() {
		t.Skip("the browser test runs in the full suite (go test ./...), not with -short")
	}
	chromium := chromiumPath(t)
	t.Parallel()

	// The operator's apps: a page that frames the link it is given and
	// says in its title when the frame has loaded.
	appPage := func(link *atomic.Value) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><title>app</title><h1>Your app</h1>
<iframe id="portal" title="Webhooks" src="%s" width="1200" height="700" onload="document.title='loaded '+(++window.loads)"></iframe>
<script>window.loads = 0</script>`, html.EscapeString(link.Load().(string)))
		}
	}
	var allowedLink, otherLink atomic.Value
	allowed := httptest.NewServer(appPage(&allowedLink))
	defer allowed.Close()
	other := httptest.NewServer(appPage(&otherLink))
	defer other.Close()
	allowedApp := strings.Replace(allowed.URL, "127.0.0.1", "localhost", 1)
	otherApp := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)

	cfg := testConfig + "[console]\nframe_ancestors = [\"" + allowedApp + "\"]\n"
	in := startInstance(t, t.TempDir(), cfg)
	in.setup()
	rc := newReceiver(t, func(int, http.ResponseWriter, *http.Request) {})
	ep := in.createEndpoint(rc.srv.URL, "payment.succeeded")
	rc.setSecret(ep.Secret)
	dlv := in.ingest("payment.succeeded", `{"order":"ord_1"}`).Deliveries[0].ID
	in.waitState(dlv, "succeeded")

	type link struct {
		ID  string `json:"id"`
		URL string `json:"url"`
	}
	newLink := func() link {
		var l link
		in.mustCall(201, "POST", "/v1/tenants/acme/portal-links", `{"ttl":"5m","return_url":"`+allowedApp+`/settings"}`, &l)
		return l
	}
	used := func(l link) bool {
		var toks struct {
			Data []struct {
				ID      string    `json:"id"`
				Revoked time.Time `json:"revoked"`
			} `json:"data"`
		}
		in.mustCall(200, "GET", "/v1/tenants/acme/access-tokens?limit=1000", nil, &toks)
		for _, tk := range toks.Data {
			if tk.ID == l.ID {
				return !tk.Revoked.IsZero()
			}
		}
		t.Fatalf("link %s is not among the tokens", l.ID)
		return false
	}

	bctx, shot := startBrowser(t, chromium)
	ctx, cancel := context.WithTimeout(bctx, 45*time.Second)
	defer cancel()
	frame := func(prefix string) context.Context { return waitFrame(t, ctx, in.base+prefix) }

	// Listed: the link logs the frame in and lands on the deliveries.
	l := newLink()
	allowedLink.Store(l.URL)
	if err := chromedp.Do(ctx, chromedp.Navigate(allowedApp)); err != nil {
		t.Fatal(err)
	}
	fctx := frame("/console/t/acme/deliveries")
	rows, err := chromedp.Run(fctx, chromedp.Text(chromedp.CSS("#deliveries tbody"), chromedp.NodeVisible))
	if err != nil || !strings.Contains(rows, "payment.succeeded") {
		t.Fatalf("the framed console's deliveries: %q, %v", rows, err)
	}
	back, err := chromedp.Run(fctx, chromedp.Text(chromedp.CSS("a.back"), chromedp.NodeVisible))
	if err != nil || !strings.Contains(back, "Back to the app") {
		t.Errorf("the way back to the app: %q, %v", back, err)
	}
	// The session cookie works from page to page inside the frame.
	if err := chromedp.Do(fctx, chromedp.Click(chromedp.CSS(`nav a[href$="/endpoints"]`)), chromedp.WaitVisible(chromedp.ID("endpoints"))); err != nil {
		t.Fatalf("the endpoints page inside the frame: %v", err)
	}
	if err := chromedp.Do(ctx, shot("portal-framed")); err != nil {
		t.Fatal(err)
	}
	if !used(l) {
		t.Error("the link that logged the frame in is not used up")
	}

	// The same link again: refused, in the frame.
	if err := chromedp.Do(ctx, chromedp.Navigate(allowedApp)); err != nil {
		t.Fatal(err)
	}
	msg, err := chromedp.Run(frame("/console/portal/"), chromedp.Text(chromedp.ID("error"), chromedp.NodeVisible))
	if err != nil || !strings.Contains(msg, "used already") {
		t.Errorf("the link a second time: %q, %v", msg, err)
	}

	// Not listed: the browser refuses to show the frame, so its page never
	// runs and the link stays unused.
	l2 := newLink()
	otherLink.Store(l2.URL)
	if err := chromedp.Do(ctx, chromedp.Navigate(otherApp), chromedp.WaitReady(chromedp.ID("portal"))); err != nil {
		t.Fatal(err)
	}
	for {
		title, err := chromedp.Run(ctx, chromedp.Title())
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(title, "loaded") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the other app's frame never finished loading")
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := chromedp.Do(ctx, shot("portal-refused")); err != nil {
		t.Fatal(err)
	}
	// The frame holds the browser's error page, not the console's.
	infos, _ := chromedp.Targets(ctx)
	for _, info := range infos {
		if info.Type != "iframe" || !strings.HasPrefix(info.URL, in.base) {
			continue
		}
		fctx, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(info.TargetID))
		shown, err := chromedp.Run(fctx, chromedp.Evaluate[bool](`document.querySelector("#open, main") !== null`))
		cancel()
		if err != nil || shown {
			t.Errorf("the unlisted app's frame shows webhookd's page (%v): %s", err, info.URL)
		}
	}
	if used(l2) {
		t.Error("a frame of an unlisted app used its link")
	}
}
