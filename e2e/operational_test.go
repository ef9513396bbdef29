package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The operational event types a test can cause here, by their actions
// (task.finished: the end of a deleted tenant's purge task).
var operationalTypes = []string{
	"endpoint.created", "endpoint.updated", "endpoint.deleted", "endpoint.disabled", "endpoint.enabled",
	"endpoint.failing", "endpoint.recovered", "delivery.dead", "tenant.deleted", "task.finished",
}

// opDelivery is one operational event an operator's receiver got.
type opDelivery struct {
	Type string                     `json:"type"`
	Data map[string]json.RawMessage `json:"data"`
	body []byte
}

// str is the string at data[name], "" when there is none.
func (d opDelivery) str(name string) string {
	var s string
	json.Unmarshal(d.Data[name], &s)
	return s
}

// opReceiver is an operator's endpoint on 127.0.0.1: it checks every
// request's signature with the official Standard Webhooks library and
// its body against the schema of its type's webhook in openapi.json,
// answers 204, and keeps what it got.
type opReceiver struct {
	t       *testing.T
	srv     *httptest.Server
	schemas *webhookSchemas

	mu     sync.Mutex
	secret string
	got    []opDelivery
}

func newOpReceiver(t *testing.T, schemas *webhookSchemas) *opReceiver {
	rc := &opReceiver{t: t, schemas: schemas}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		secret := rc.secret
		rc.mu.Unlock()
		wh, err := standardwebhooks.NewWebhook(secret)
		if err == nil {
			err = wh.Verify(body, r.Header)
		}
		if err != nil {
			t.Errorf("operational event %s: the official Standard Webhooks library refuses it: %v", body, err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var d opDelivery
		if err := json.Unmarshal(body, &d); err != nil {
			t.Errorf("operational event %s: %v", body, err)
		}
		d.body = body
		if err := schemas.validate(d.Type, body); err != nil {
			t.Errorf("operational event %s breaks its schema in openapi.json: %v\n%s", d.Type, err, body)
		}
		rc.mu.Lock()
		rc.got = append(rc.got, d)
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *opReceiver) setSecret(s string) {
	rc.mu.Lock()
	rc.secret = s
	rc.mu.Unlock()
}

// wait returns the first event of typ for which match holds, waiting up
// to 15s for it.
func (rc *opReceiver) wait(typ string, match func(opDelivery) bool) opDelivery {
	rc.t.Helper()
	var found opDelivery
	ok := poll(15*time.Second, func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, d := range rc.got {
			if d.Type == typ && match(d) {
				found = d
				return true
			}
		}
		return false
	})
	if !ok {
		rc.mu.Lock()
		var types []string
		for _, d := range rc.got {
			types = append(types, d.Type+" "+string(d.body))
		}
		rc.mu.Unlock()
		rc.t.Fatalf("no %s came; the operator's endpoint got:\n%s", typ, strings.Join(types, "\n"))
	}
	return found
}

// about matches an event about tenant and, when endpoint is not "", that
// endpoint.
func about(tenant, endpoint string) func(opDelivery) bool {
	return func(d opDelivery) bool {
		return d.str("tenant") == tenant && (endpoint == "" || d.str("endpoint_id") == endpoint)
	}
}

// webhookSchemas are the request bodies of openapi.json's webhooks,
// compiled by a JSON Schema (2020-12) validator.
type webhookSchemas struct {
	byType map[string]*jsonschema.Schema
}

// loadWebhookSchemas compiles the body schema of each webhook of
// httpapi/openapi.json named in types, with formats asserted.
func loadWebhookSchemas(t *testing.T, types []string) *webhookSchemas {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "httpapi", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	const loc = "https://webhookd.invalid/openapi.json"
	if err := c.AddResource(loc, doc); err != nil {
		t.Fatal(err)
	}
	ws := &webhookSchemas{byType: map[string]*jsonschema.Schema{}}
	for _, typ := range types {
		sch, err := c.Compile(loc + "#/webhooks/" + typ + "/post/requestBody/content/application~1json/schema")
		if err != nil {
			t.Fatalf("openapi.json has no schema for webhook %s: %v", typ, err)
		}
		ws.byType[typ] = sch
	}
	return ws
}

// validate checks body, an event of typ, against its webhook's schema.
func (ws *webhookSchemas) validate(typ string, body []byte) error {
	sch, ok := ws.byType[typ]
	if !ok {
		return fmt.Errorf("no webhook %q in openapi.json", typ)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return err
	}
	return sch.Validate(v)
}

// TestOperational_EveryEventFromItsAction runs webhookd with [alerts] on
// and an operational endpoint made through the API, and causes each
// operational event by its real action: an endpoint created, changed,
// disabled and enabled, failing then recovering, its delivery dead, a
// 410 that disables it, its deletion, a tenant's deletion. Each arrives
// at a loopback receiver that verifies it with the official Standard
// Webhooks library and validates it against its schema in openapi.json's
// webhooks; [alerts] keeps getting its three types; and the reserved
// tenant stays out of sight: not listed, not reported, the admin report
// answering 200 (before, 404 tenant_not_found with [alerts] on).
func TestOperational_EveryEventFromItsAction(t *testing.T) {
	t.Parallel()
	schemas := loadWebhookSchemas(t, operationalTypes)
	alerts := newOpReceiver(t, schemas)
	alertSecret := "whsec_" + strings.Repeat("QUJD", 8)
	alerts.setSecret(alertSecret)
	in := startInstance(t, t.TempDir(), testConfig+"\n[alerts]\nurl = \""+alerts.srv.URL+"\"\nsecret = \""+alertSecret+"\"\n")
	in.setup()
	in.mustCall(201, "PUT", "/v1/tenants/globex", map[string]string{"name": "Globex"}, nil)

	ops := newOpReceiver(t, schemas)
	var op struct {
		ID, Secret, Source string
	}
	in.mustCall(201, "POST", "/v1/operational-endpoints", map[string]any{"url": ops.srv.URL, "event_types": []string{"*"}, "description": "pager"}, &op)
	ops.setSecret(op.Secret)
	if op.Source != "api" {
		t.Errorf("the API's operational endpoint has source %q", op.Source)
	}
	var list struct {
		Data []struct{ ID, Source string } `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/operational-endpoints", nil, &list)
	if len(list.Data) != 2 || list.Data[0].Source != "config" || list.Data[1].ID != op.ID {
		t.Errorf("operational endpoints %+v, want the [alerts] one, then the API's", list.Data)
	}

	// An endpoint's life, through the API.
	// customer is a customer's receiver that answers first to its first
	// request and then to the others.
	customer := func(first, then int) *receiver {
		return newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				w.WriteHeader(first)
				return
			}
			w.WriteHeader(then)
		})
	}
	flaky := customer(http.StatusInternalServerError, http.StatusOK)
	ep := in.createEndpoint(flaky.srv.URL, "payment.succeeded")
	flaky.setSecret(ep.Secret)
	ops.wait("endpoint.created", about("acme", ep.ID))
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+ep.ID, map[string]any{"description": "orders"}, nil)
	if got := ops.wait("endpoint.updated", about("acme", ep.ID)); string(got.Data["changed"]) != `["description"]` {
		t.Errorf("endpoint.updated says changed %s, want [\"description\"]", got.Data["changed"])
	}
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+ep.ID, map[string]any{"disabled": true}, nil)
	if got := ops.wait("endpoint.disabled", about("acme", ep.ID)); got.str("reason") != "disabled by request (admin)" {
		t.Errorf("endpoint.disabled by request: reason %q", got.str("reason"))
	}
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+ep.ID, map[string]any{"disabled": false}, nil)
	ops.wait("endpoint.enabled", about("acme", ep.ID))

	// Its health: a failed attempt, then the retry succeeds.
	in.waitState(in.ingest("payment.succeeded", `{"n":1}`).Deliveries[0].ID, "succeeded")
	failing := ops.wait("endpoint.failing", about("acme", ep.ID))
	recovered := ops.wait("endpoint.recovered", about("acme", ep.ID))
	if failing.str("failing_since") == "" || recovered.str("failing_since") != failing.str("failing_since") {
		t.Errorf("failing since %q, recovered from %q: want the same run", failing.str("failing_since"), recovered.str("failing_since"))
	}

	// A delivery refused for good is dead; a 410 disables its endpoint.
	refusing := customer(http.StatusBadRequest, http.StatusBadRequest)
	refused := in.createEndpoint(refusing.srv.URL, "invoice.paid")
	refusing.setSecret(refused.Secret)
	dead := in.ingest("invoice.paid", `{"n":2}`).Deliveries[0].ID
	in.waitState(dead, "dead")
	got := ops.wait("delivery.dead", func(d opDelivery) bool { return d.str("delivery_id") == dead })
	if got.str("tenant") != "acme" || got.str("endpoint_id") != refused.ID || string(got.Data["last_status"]) != "400" {
		t.Errorf("delivery.dead: %s", got.body)
	}
	alerts.wait("delivery.dead", func(d opDelivery) bool { return d.str("delivery_id") == dead }) // [alerts] too
	in.mustCall(204, "DELETE", "/v1/tenants/acme/endpoints/"+refused.ID, nil, nil)
	ops.wait("endpoint.deleted", about("acme", refused.ID))

	gone := customer(http.StatusGone, http.StatusGone)
	goneEp := in.createEndpoint(gone.srv.URL, "invoice.paid")
	gone.setSecret(goneEp.Secret)
	in.waitState(in.ingest("invoice.paid", `{"n":3}`).Deliveries[0].ID, "dead")
	if got := ops.wait("endpoint.disabled", about("acme", goneEp.ID)); !strings.Contains(got.str("reason"), "410 Gone") {
		t.Errorf("endpoint.disabled by a 410: reason %q", got.str("reason"))
	}
	alerts.wait("endpoint.disabled", about("acme", goneEp.ID))

	// A tenant's deletion.
	var purge struct{ Task struct{ ID string } }
	in.mustCall(202, "DELETE", "/v1/tenants/globex?force=true", nil, &purge)
	if got := ops.wait("tenant.deleted", about("globex", "")); string(got.Data["force"]) != "true" || got.str("task_id") != purge.Task.ID {
		t.Errorf("tenant.deleted: %s, want force and its purge's task %s", got.body, purge.Task.ID)
	}
	// Its purge's task, as it ends.
	if got := ops.wait("task.finished", about("globex", "")); got.str("task_id") != purge.Task.ID || got.str("kind") != "tenant.purge" || got.str("state") != "succeeded" {
		t.Errorf("task.finished of the purge: %s, want task %s succeeded", got.body, purge.Task.ID)
	}

	// Every type came, each once per action: none about the operator's
	// own endpoints, and [alerts] only the three it subscribes to.
	ops.mu.Lock()
	seen := map[string]bool{}
	for _, d := range ops.got {
		seen[d.Type] = true
		if d.str("tenant") == "_operator" {
			t.Errorf("an operational event about the operator's tenant: %s", d.body)
		}
	}
	ops.mu.Unlock()
	for _, typ := range operationalTypes {
		if !seen[typ] {
			t.Errorf("no %s came", typ)
		}
	}
	alerts.mu.Lock()
	for _, d := range alerts.got {
		if d.Type != "endpoint.failing" && d.Type != "endpoint.disabled" && d.Type != "delivery.dead" {
			t.Errorf("the [alerts] endpoint got %s, which it does not subscribe to", d.Type)
		}
	}
	alerts.mu.Unlock()

	// The reserved tenant is no customer.
	var tenants struct {
		Data []struct{ ID string } `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/tenants", nil, &tenants)
	if len(tenants.Data) != 1 || tenants.Data[0].ID != "acme" {
		t.Errorf("GET /v1/tenants lists %+v, want acme alone", tenants.Data)
	}
	var report struct {
		Tenants []struct{ Tenant string } `json:"tenants"`
	}
	in.mustCall(200, "GET", "/v1/admin/report", nil, &report)
	if len(report.Tenants) != 1 || report.Tenants[0].Tenant != "acme" {
		t.Errorf("the admin report covers %+v, want acme alone", report.Tenants)
	}
	in.mustCall(404, "GET", "/v1/tenants/_operator", nil, nil)
	in.mustCall(404, "GET", "/v1/tenants/_operator/endpoints/"+op.ID, nil, nil)

	// The admin's console lists both operational endpoints.
	status, body := in.consoleGet("/console/operational-endpoints")
	if status != 200 || !strings.Contains(body, op.ID) || !strings.Contains(body, list.Data[0].ID) || !strings.Contains(body, "config file") {
		t.Errorf("the console's operational webhooks page: %d\n%s", status, body)
	}
}

// TestOperational_FailingEndpointNoStorm: an operational endpoint that
// answers 500 to everything, beside a healthy one that watches every
// type, while a customer's endpoint takes a burst. The customer's
// deliveries all succeed at once (the operator's failures slow nothing);
// the failing endpoint's deliveries retry with the schedule and die, and
// that makes no event about the operator's tenant (no endpoint.failing,
// no delivery.dead of itself: no loop), nothing in the customer's dead
// letters, and the watcher's count settles. Its secret rotated with a
// grace window, the watcher verifies the next event with the old secret
// and the one after with the new.
func TestOperational_FailingEndpointNoStorm(t *testing.T) {
	t.Parallel()
	schemas := loadWebhookSchemas(t, operationalTypes)
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()

	var broken struct{ N int }
	var brokenMu sync.Mutex
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		brokenMu.Lock()
		broken.N++
		brokenMu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	in.mustCall(201, "POST", "/v1/operational-endpoints", map[string]any{"url": failing.URL, "event_types": []string{"*"}}, nil)
	watch := newOpReceiver(t, schemas)
	var op struct{ ID, Secret string }
	in.mustCall(201, "POST", "/v1/operational-endpoints", map[string]any{"url": watch.srv.URL, "event_types": []string{"*"}}, &op)
	watch.setSecret(op.Secret)

	rc := newReceiver(t, status(http.StatusOK))
	ep := in.createEndpoint(rc.srv.URL, "payment.succeeded")
	rc.setSecret(ep.Secret)
	watch.wait("endpoint.created", about("acme", ep.ID))
	start := time.Now()
	var ids []string
	for i := range 20 {
		ids = append(ids, in.ingest("payment.succeeded", fmt.Sprintf(`{"n":%d}`, i)).Deliveries[0].ID)
		in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+ep.ID, map[string]any{"description": fmt.Sprint("d", i)}, nil)
	}
	for _, id := range ids {
		in.waitState(id, "succeeded")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the customer's 20 deliveries took %v beside a failing operational endpoint", took)
	}
	// 21 events for the failing endpoint, 4 attempts each (testConfig).
	waitFor(t, "the failing operational endpoint's 84 attempts", func() bool {
		brokenMu.Lock()
		defer brokenMu.Unlock()
		return broken.N >= 84
	})
	count := func() int {
		watch.mu.Lock()
		defer watch.mu.Unlock()
		for _, d := range watch.got {
			if d.str("tenant") == "_operator" || d.str("tenant") == "" && d.Type != "task.finished" {
				t.Errorf("an operational event about the operator's own endpoints: %s", d.body)
			}
		}
		return len(watch.got)
	}
	settled := count()
	time.Sleep(time.Second)
	if now := count(); now != settled {
		t.Errorf("the watcher got %d events, then %d a second later: the failing endpoint's deaths make events", settled, now)
	}
	brokenMu.Lock()
	if broken.N != 84 {
		t.Errorf("the failing endpoint got %d requests, want 84 (21 events, 4 attempts each)", broken.N)
	}
	brokenMu.Unlock()
	var dead struct {
		Data []json.RawMessage `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/tenants/acme/dead-letters", nil, &dead)
	if len(dead.Data) != 0 {
		t.Errorf("acme's dead letters hold %d: the operator's", len(dead.Data))
	}

	// A rotation with grace: both secrets sign for a while.
	var rot struct{ Secret string }
	in.mustCall(200, "POST", "/v1/operational-endpoints/"+op.ID+"/secret/rotate", map[string]any{"grace": "1h"}, &rot)
	if rot.Secret == "" || rot.Secret == op.Secret {
		t.Fatalf("the rotation answered secret %q", rot.Secret)
	}
	n := count()
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+ep.ID, map[string]any{"description": "old secret"}, nil)
	waitFor(t, "an endpoint.updated verified with the old secret", func() bool { return count() > n })
	watch.setSecret(rot.Secret)
	in.mustCall(204, "DELETE", "/v1/tenants/acme/endpoints/"+ep.ID, nil, nil)
	watch.wait("endpoint.deleted", about("acme", ep.ID)) // verified with the new
}

// TestOperational_DeletedWhilePending: an operational endpoint deleted
// while its deliveries wait for a retry gets no request more, and
// nothing it left is counted pending: not by the metrics, not as
// overdue, not by /readyz.
func TestOperational_DeletedWhilePending(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	requests := 0
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	got := func() int { mu.Lock(); defer mu.Unlock(); return requests }
	// The second attempt is due soon after the deletion.
	in := startInstance(t, t.TempDir(), configWith(t, testConfig, map[string]any{"delivery.schedule": []string{"800ms", "800ms", "800ms"}}))
	in.setup()
	var op struct{ ID string }
	in.mustCall(201, "POST", "/v1/operational-endpoints", map[string]any{"url": failing.URL, "event_types": []string{"*"}}, &op)
	rc := newReceiver(t, status(http.StatusOK))
	for range 3 {
		in.createEndpoint(rc.srv.URL, "payment.succeeded") // endpoint.created, each
	}
	waitFor(t, "the three first attempts", func() bool { return got() >= 3 })
	in.waitCounted(3)
	in.mustCall(204, "DELETE", "/v1/operational-endpoints/"+op.ID, nil, nil)
	n := got()
	time.Sleep(1500 * time.Millisecond) // past the second attempts' due time
	if now := got(); now != n {
		t.Errorf("the deleted operational endpoint got %d requests more", now-n)
	}
	waitFor(t, "nothing pending", func() bool {
		m, err := scrapeMetrics(in.base)
		return err == nil && m["webhookd_pending_deliveries"] == 0 && m["webhookd_oldest_pending_overdue_seconds"] == 0 && m["webhookd_due_deliveries"] == 0
	})
	if got := in.call("GET", "/readyz", nil, nil); got != 200 {
		t.Errorf("/readyz answered %d", got)
	}
}
