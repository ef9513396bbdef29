package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/verify"
)

// operatorAlert is one alert as the operator endpoint receives it.
type operatorAlert struct {
	Type    string                     `json:"type"`
	Created string                     `json:"created"`
	Data    map[string]json.RawMessage `json:"data"`
}

// startWithAlerts starts webhookd with [alerts] sending to a loopback
// receiver, sets up tenant acme, and returns the instance and the alerts
// as they arrive, each verified with the alert secret.
func startWithAlerts(t *testing.T) (*instance, <-chan operatorAlert) {
	return startWithAlertsOn(t, testConfig)
}

// startWithAlertsOn is startWithAlerts on config cfg.
func startWithAlertsOn(t *testing.T, cfg string) (*instance, <-chan operatorAlert) {
	t.Helper()
	secret := "whsec_" + strings.Repeat("QUJD", 8)
	check := &verify.Verifier{Secrets: []string{secret}}
	alerts := make(chan operatorAlert, 100)
	var op *receiver
	op = newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		body := op.got()[n-1].body
		if _, err := check.Verify(r.Header, body); err != nil {
			t.Errorf("alert signature: %v", err)
		}
		var a operatorAlert
		if err := json.Unmarshal(body, &a); err != nil {
			t.Errorf("alert %s: %v", body, err)
		}
		select {
		case alerts <- a:
		default:
		}
		w.WriteHeader(200)
	})
	in := startInstance(t, t.TempDir(), cfg+"\n[alerts]\nurl = \""+op.srv.URL+"\"\nsecret = \""+secret+"\"\n")
	in.setup()
	return in, alerts
}

// consoleGet logs in to the console with the admin token and returns the
// status and body of GET path.
func (in *instance) consoleGet(path string) (int, string) {
	in.t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		in.t.Fatal(err)
	}
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (int, string) {
		resp, err := c.Get(in.base + path)
		if err != nil {
			in.t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	_, form := get("/console/login")
	m := regexp.MustCompile(`name="login" value="([^"]+)"`).FindStringSubmatch(form)
	if m == nil {
		in.t.Fatalf("no login nonce in the login page:\n%s", form)
	}
	resp, err := c.PostForm(in.base+"/console/login", url.Values{"token": {testToken}, "login": {m[1]}})
	if err != nil {
		in.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		in.t.Fatalf("console login: %d", resp.StatusCode)
	}
	return get(path)
}

// TestAlerts_OperatorTenantIsNoCustomer: with [alerts] on, the reserved
// operator tenant holds the alert endpoint, and is no customer: the
// tenants list, the admin report and the console's Tenants page (where
// an admin lands after login) show the customers alone, and answer.
func TestAlerts_OperatorTenantIsNoCustomer(t *testing.T) {
	t.Parallel()
	in, _ := startWithAlerts(t)

	var tenants struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/tenants", nil, &tenants)
	if len(tenants.Data) != 1 || tenants.Data[0].ID != "acme" {
		t.Errorf("GET /v1/tenants lists %+v, want acme alone", tenants.Data)
	}
	in.mustCall(404, "GET", "/v1/tenants/_operator", nil, nil)

	var report struct {
		Tenants []struct {
			Tenant string `json:"tenant"`
		} `json:"tenants"`
	}
	in.mustCall(200, "GET", "/v1/admin/report", nil, &report)
	if len(report.Tenants) != 1 || report.Tenants[0].Tenant != "acme" {
		t.Errorf("the admin report covers %+v, want acme alone", report.Tenants)
	}

	status, body := in.consoleGet("/console/tenants")
	if status != 200 || !strings.Contains(body, "acme") {
		t.Fatalf("console tenants page: %d\n%s", status, body)
	}
	if strings.Contains(body, "_operator") {
		t.Error("the console's tenants page shows the operator tenant")
	}
}

// TestAlerts_TimesHaveMilliseconds: an alert's times are written like
// every other time webhookd writes (engine.TimeFormat): UTC, exactly
// three fraction digits.
func TestAlerts_TimesHaveMilliseconds(t *testing.T) {
	t.Parallel()
	in, alerts := startWithAlerts(t)
	rc := newReceiver(t, status(500))
	ep := in.createEndpoint(rc.srv.URL, "*")
	rc.setSecret(ep.Secret)
	in.waitState(in.ingest("invoice.paid", `{"n":1}`).Deliveries[0].ID, "dead")

	layout := regexp.MustCompile(`^"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"$`)
	seen := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for !seen["endpoint.failing"] || !seen["delivery.dead"] {
		select {
		case a := <-alerts:
			seen[a.Type] = true
			if !layout.MatchString(`"` + a.Created + `"`) {
				t.Errorf("%s: created %s", a.Type, a.Created)
			}
			for _, field := range []string{"at", "failing_since"} {
				if v, ok := a.Data[field]; ok && !layout.Match(v) {
					t.Errorf("%s: %s is %s, want UTC with three fraction digits", a.Type, field, v)
				}
			}
			if _, ok := a.Data["at"]; !ok {
				t.Errorf("%s: no at in %v", a.Type, a.Data)
			}
		case <-deadline:
			t.Fatalf("alerts received: %v; want endpoint.failing and delivery.dead", seen)
		}
	}
}

// TestAlerts_SentWhileOverloaded: an alert is raised when the node is at
// [ingest] max_pending, which is when an operator needs it most. The
// alerts go through ingest to the operator's tenant, and max_pending
// refused them there, so a delivery that died while the backlog was full
// raised no delivery.dead.
func TestAlerts_SentWhileOverloaded(t *testing.T) {
	t.Parallel()
	// Attempts are held for as long as the test runs: the backlog stays
	// full until the node has counted it (on PostgreSQL every few seconds).
	in, alerts := startWithAlertsOn(t, configWith(t, testConfig, map[string]any{"ingest.max_pending": 3, "delivery.attempt_timeout": "25s"}))
	held, release := holdingReceiver(t)
	// The refusing endpoint's request is held until the backlog is full,
	// then refused: a permanent failure, dead at once.
	gate := make(chan struct{})
	refusing := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-gate:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusBadRequest)
	})
	for range 3 { // one event makes 3 deliveries: the backlog stays full after one dies
		in.createEndpoint(held.srv.URL, "invoice.paid")
	}
	in.createEndpoint(refusing.srv.URL, "payment.succeeded")
	dying := in.ingest("payment.succeeded", `{"n":0}`).Deliveries[0].ID
	in.ingest("invoice.paid", `{"n":1}`)
	// A probe of a type nobody subscribes to, with one Idempotency-Key,
	// stores at most one event of no delivery while it waits for the
	// count (on PostgreSQL the node reads it every few seconds).
	in.mustCall(201, "PUT", "/v1/event-types/probe.sent", map[string]string{"description": "a probe"}, nil)
	probe := func() int {
		return in.call("POST", "/v1/tenants/acme/events", `{"type":"probe.sent","data":{}}`, nil, "Idempotency-Key", "probe")
	}
	if !poll(15*time.Second, func() bool { return probe() == http.StatusServiceUnavailable }) {
		t.Fatalf("ingest at max_pending answered %d, want 503", probe())
	}
	close(gate)
	in.waitState(dying, "dead")
	deadline := time.After(10 * time.Second)
	for {
		select {
		case a := <-alerts:
			if a.Type == "delivery.dead" && string(a.Data["delivery_id"]) == `"`+dying+`"` {
				release()
				return
			}
		case <-deadline:
			t.Fatal("no delivery.dead alert for a delivery that died while the node was at max_pending")
		}
	}
}
