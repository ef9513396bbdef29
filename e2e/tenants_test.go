package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tests of the per-tenant limits: one tenant, however it behaves, must not
// make ingest or delivery fail or wait for another.

// addTenant creates tenant id with an endpoint at url for every type and
// returns the endpoint's secret.
func (in *instance) addTenant(id, url string) string {
	in.t.Helper()
	in.mustCall(201, "PUT", "/v1/tenants/"+id, map[string]string{"name": id}, nil)
	var ep endpointCreated
	in.mustCall(201, "POST", "/v1/tenants/"+id+"/endpoints", map[string]any{"url": url, "event_types": []string{"*"}}, &ep)
	return ep.Secret
}

// holdingReceiver answers 200 only once release is closed (or the attempt
// is cut off); the test's cleanup releases it.
func holdingReceiver(t *testing.T) (*receiver, func()) {
	release := make(chan struct{})
	var once sync.Once
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	})
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	return rc, free
}

// TestTenantLimits_Endpoints: a tenant may have at most
// [limits] endpoints_per_tenant endpoints; one over is 409 limit_reached
// naming the key, and changes nothing; another tenant is not affected.
func TestTenantLimits_Endpoints(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), configWith(t, testConfig, map[string]any{"limits.endpoints_per_tenant": 3}))
	in.setup()
	for range 3 {
		in.createEndpoint("http://127.0.0.1:1/hooks", "*")
	}
	req, _ := http.NewRequest("POST", in.base+"/v1/tenants/acme/endpoints", strings.NewReader(`{"url":"http://127.0.0.1:1/four","event_types":["*"]}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, raw := doRequest(t, req)
	if detail := wantProblem(t, resp, raw, 409, "limit_reached", ""); !strings.Contains(detail, "endpoints_per_tenant") || !strings.Contains(detail, "3") {
		t.Errorf("detail %q, want it to name [limits] endpoints_per_tenant and its value", detail)
	}
	var eps struct {
		Data []struct{ URL string } `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/tenants/acme/endpoints", nil, &eps)
	if len(eps.Data) != 3 {
		t.Errorf("acme has %d endpoints after the refusal, want 3", len(eps.Data))
	}
	in.addTenant("globex", "http://127.0.0.1:1/hooks") // another tenant's first: allowed
}

// TestTenantLimits_Pending: while a tenant has [limits] pending_per_tenant
// deliveries pending, its ingest is 429 tenant_overloaded with
// Retry-After, naming the key; another tenant's ingest is still 202, and
// /readyz stays 200 (the node takes work).
func TestTenantLimits_Pending(t *testing.T) {
	t.Parallel()
	cfg := configWith(t, testConfig, map[string]any{
		"limits.pending_per_tenant": 4,
		"delivery.attempt_timeout":  "10s",
	})
	in := startInstance(t, t.TempDir(), cfg)
	in.setup()
	held, release := holdingReceiver(t)
	held.setSecret(in.addTenant("noisy", held.srv.URL))
	calm := newReceiver(t, status(200))
	calm.setSecret(in.addTenant("calm", calm.srv.URL))

	for i := range 4 {
		if resp, raw := in.postEventTo("noisy", fmt.Sprintf(`{"type":"invoice.paid","data":{"n":%d}}`, i)); resp.StatusCode != 202 {
			t.Fatalf("ingest %d of noisy: %d %s", i, resp.StatusCode, raw)
		}
	}
	in.waitCounted(4)
	resp, raw := in.postEventTo("noisy", `{"type":"invoice.paid","data":{"n":4}}`)
	if detail := wantProblem(t, resp, raw, 429, "tenant_overloaded", "5"); !strings.Contains(detail, "pending_per_tenant") {
		t.Errorf("detail %q does not name the setting", detail)
	}
	for i := range 6 { // over noisy's bound: calm has its own, and its deliveries succeed as it sends
		resp, raw := in.postEventTo("calm", fmt.Sprintf(`{"type":"invoice.paid","data":{"n":%d}}`, i))
		if resp.StatusCode != 202 {
			t.Fatalf("ingest %d of calm while noisy is over its bound: %d %s", i, resp.StatusCode, raw)
		}
		var ing ingestResponse
		if err := json.Unmarshal(raw, &ing); err != nil || len(ing.Deliveries) != 1 {
			t.Fatalf("ingest %d of calm: %v %s", i, err, raw)
		}
		// Until its outcome is recorded (on postgres, a node claims
		// nothing for a tenth of a lease after it starts) it counts
		// toward calm's bound: the receiver's having it is not enough.
		waitFor(t, "calm's delivery to succeed", func() bool {
			var d deliveryView
			in.mustCall(200, "GET", "/v1/tenants/calm/deliveries/"+ing.Deliveries[0].ID, nil, &d)
			return d.State == "succeeded"
		})
	}
	if resp, raw := in.get("/readyz"); resp.StatusCode != 200 {
		t.Errorf("/readyz %d %s while one tenant is over its bound, want 200", resp.StatusCode, raw)
	}
	release()
	waitFor(t, "noisy's backlog to drain", func() bool {
		resp, _ := in.postEventTo("noisy", `{"type":"invoice.paid","data":{"n":5}}`)
		return resp.StatusCode == 202
	})
}

// TestTenantLimits_IngestRate: a tenant over [limits] ingest_rate_per_tenant
// gets 429 rate_limited with Retry-After, naming the key, while another
// tenant's ingest through the same token goes on.
func TestTenantLimits_IngestRate(t *testing.T) {
	t.Parallel()
	cfg := configWith(t, testConfig, map[string]any{
		"limits.ingest_rate_per_tenant":  0.5,
		"limits.ingest_burst_per_tenant": 2,
	})
	in := startInstance(t, t.TempDir(), cfg)
	in.setup()
	in.addTenant("noisy", "http://127.0.0.1:1/hooks")
	in.addTenant("calm", "http://127.0.0.1:1/hooks")
	for i := range 2 {
		if resp, raw := in.postEventTo("noisy", `{"type":"invoice.paid","data":{}}`); resp.StatusCode != 202 {
			t.Fatalf("ingest %d within the burst: %d %s", i, resp.StatusCode, raw)
		}
	}
	resp, raw := in.postEventTo("noisy", `{"type":"invoice.paid","data":{}}`)
	if detail := wantProblem(t, resp, raw, 429, "rate_limited", "2"); !strings.Contains(detail, "ingest_rate_per_tenant") {
		t.Errorf("detail %q does not name the setting", detail)
	}
	if resp, raw := in.postEventTo("calm", `{"type":"invoice.paid","data":{}}`); resp.StatusCode != 202 {
		t.Errorf("calm's ingest while noisy is over its rate: %d %s", resp.StatusCode, raw)
	}
}

// TestTenantFairness_BackloggedTenantDoesNotDelayAnother keeps every
// attempt of one tenant hanging (a receiver that is down in the slowest
// way: it accepts and never answers) with more of its deliveries due than
// there are workers, then sends events to a second tenant: they must be
// delivered at once, not after the first tenant's attempts time out,
// because no tenant may hold more than [delivery] tenant_concurrency
// workers and workers take tenants in turn.
//
// Not parallel: it bounds how long a delivery takes.
func TestTenantFairness_BackloggedTenantDoesNotDelayAnother(t *testing.T) {
	const hang = 3 * time.Second
	cfg := configWith(t, testConfig, map[string]any{
		"delivery.workers":              8,
		"delivery.endpoint_concurrency": 8,
		"delivery.attempt_timeout":      hang.String(),
		"log.level":                     "info",
	})
	in := startInstance(t, t.TempDir(), cfg)
	in.setup()
	held, release := holdingReceiver(t)
	in.addTenant("noisy", held.srv.URL+"/1")
	for i := 2; i <= 4; i++ {
		in.mustCall(201, "POST", "/v1/tenants/noisy/endpoints", map[string]any{"url": fmt.Sprintf("%s/%d", held.srv.URL, i), "event_types": []string{"*"}}, nil)
	}
	for i := range 10 { // 40 deliveries for 8 workers
		if resp, raw := in.postEventTo("noisy", fmt.Sprintf(`{"type":"invoice.paid","data":{"n":%d}}`, i)); resp.StatusCode != 202 {
			t.Fatalf("ingest %d of noisy: %d %s", i, resp.StatusCode, raw)
		}
	}
	waitFor(t, "noisy's attempts to fill the workers it may have", func() bool {
		held.mu.Lock()
		defer held.mu.Unlock()
		return len(held.requests) >= 6
	})

	calm := newReceiver(t, status(200))
	calm.setSecret(in.addTenant("calm", calm.srv.URL))
	var worst time.Duration
	for i := range 5 {
		start := time.Now()
		resp, raw := in.postEventTo("calm", fmt.Sprintf(`{"type":"invoice.paid","data":{"n":%d}}`, i))
		if resp.StatusCode != 202 {
			t.Fatalf("ingest %d of calm: %d %s", i, resp.StatusCode, raw)
		}
		waitFor(t, "calm's delivery", func() bool { return len(calm.got()) > i })
		worst = max(worst, time.Since(start))
	}
	// Without fairness each of calm's deliveries waits for one of noisy's
	// attempts to time out (3 s); with it, a worker is free at once. The
	// bound only tells the two apart on a loaded machine.
	if worst > hang/2 {
		t.Errorf("calm's slowest delivery took %s while noisy's attempts hang for %s: it waited for noisy's workers", worst, hang)
	}
	t.Logf("calm's slowest delivery took %s while noisy hung %d attempts", worst, len(held.got()))
	release()
	calm.checkSignatures()
}

// TestTenantDelete: DELETE /v1/tenants/{t} is refused while deliveries
// are pending, then with ?force=true deletes the tenant at once (404 on
// its routes, its ingest refused, its pending deliveries never attempted
// again) and its data soon after, when its id can be used again, empty;
// another tenant keeps everything. A tenant token may not delete.
func TestTenantDelete(t *testing.T) {
	t.Parallel()
	cfg := configWith(t, testConfig, map[string]any{"delivery.attempt_timeout": "10s"})
	in := startInstance(t, t.TempDir(), cfg)
	in.setup()
	held, release := holdingReceiver(t)
	defer release()
	held.setSecret(in.addTenant("gone", held.srv.URL))
	calm := newReceiver(t, status(200))
	calm.setSecret(in.addTenant("kept", calm.srv.URL))
	for i := range 3 {
		if resp, raw := in.postEventTo("gone", fmt.Sprintf(`{"type":"invoice.paid","data":{"n":%d}}`, i)); resp.StatusCode != 202 {
			t.Fatalf("ingest %d: %d %s", i, resp.StatusCode, raw)
		}
	}
	resp, raw := in.postEventTo("kept", `{"type":"invoice.paid","data":{"kept":true}}`)
	if resp.StatusCode != 202 {
		t.Fatalf("ingest to kept: %d %s", resp.StatusCode, raw)
	}
	var tok struct{ Token string }
	in.mustCall(201, "POST", "/v1/tenants/gone/access-tokens", map[string]string{}, &tok)
	if code, _ := in.callAs(tok.Token, "DELETE", "/v1/tenants/gone"); code != 403 {
		t.Errorf("DELETE with the tenant's own token: %d, want 403", code)
	}
	waitFor(t, "the first attempts to hang", func() bool { return len(held.got()) >= 3 })
	in.waitCounted(3)

	del := func(query string) (*http.Response, []byte) {
		req, _ := http.NewRequest("DELETE", in.base+"/v1/tenants/gone"+query, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		return doRequest(t, req)
	}
	resp, raw = del("")
	if detail := wantProblem(t, resp, raw, 409, "pending_deliveries", ""); !strings.Contains(detail, "force=true") {
		t.Errorf("detail %q does not say how to force", detail)
	}
	in.mustCall(200, "GET", "/v1/tenants/gone", nil, nil) // refused: nothing changed
	resp, raw = del("?force=maybe")
	wantProblem(t, resp, raw, 422, "invalid_field", "")
	if resp, raw = del("?force=true"); resp.StatusCode != 202 {
		t.Fatalf("DELETE ?force=true: %d %s", resp.StatusCode, raw)
	}
	before := len(held.got())
	in.mustCall(404, "GET", "/v1/tenants/gone", nil, nil)
	in.mustCall(404, "GET", "/v1/tenants/gone/endpoints", nil, nil)
	if resp, raw := in.postEventTo("gone", `{"type":"invoice.paid","data":{}}`); resp.StatusCode != 404 {
		t.Errorf("ingest to the deleted tenant: %d %s, want 404", resp.StatusCode, raw)
	}
	if code, _ := in.callAs(tok.Token, "GET", "/v1/tenants/gone"); code != 401 {
		t.Errorf("the deleted tenant's token: %d, want 401", code)
	}

	// The purge runs at once, in the background, in the task the delete
	// answered; until it is done the id is refused with 409
	// tenant_deleting, then it can be used again.
	var purge struct{ Task struct{ ID string } }
	if err := json.Unmarshal(raw, &purge); err != nil || purge.Task.ID == "" {
		t.Fatalf("DELETE answered %s, want its task", raw)
	}
	waitFor(t, "the id to be free again", func() bool {
		return in.call("PUT", "/v1/tenants/gone", map[string]string{"name": "again"}, nil) == 201
	})
	var feed struct {
		Data []json.RawMessage `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/tenants/gone/events", nil, &feed)
	if len(feed.Data) != 0 {
		t.Errorf("the new tenant of that id sees %d events of the deleted one", len(feed.Data))
	}
	var task struct {
		State string `json:"state"`
		Done  int    `json:"done"`
	}
	// The task records its end in a write of its own, a moment after
	// the purge that frees the id.
	waitFor(t, "the purge task to end", func() bool {
		in.mustCall(200, "GET", "/v1/tasks/"+purge.Task.ID, nil, &task)
		return task.State != "running"
	})
	if task.State != "succeeded" || task.Done != 3 {
		t.Errorf("the purge task: %+v, want succeeded with the 3 events deleted", task)
	}
	if n := in.countList("/v1/tenants/gone/tasks"); n != 0 {
		t.Errorf("the new tenant of that id has %d tasks, want none (the purge is the operator's)", n)
	}
	release()
	// Nothing may reach the receiver during this window, which is what is
	// tested: the released attempts end now, and whatever the dispatcher
	// still held of the deleted tenant (a requeue, a retry: testConfig
	// waits 20ms, then 40ms) would be attempted within it.
	time.Sleep(100 * time.Millisecond)
	if after := len(held.got()); after != before {
		t.Errorf("the deleted tenant's receiver got %d requests after the delete", after-before)
	}
	in.mustCall(200, "GET", "/v1/tenants/kept", nil, nil)
	waitFor(t, "kept's delivery", func() bool { return len(calm.got()) == 1 })
}

// TestEventTypeDelete: DELETE /v1/event-types/{type} takes a type out of
// the catalogue: its ingest is then 422 unknown_event_type; a second
// DELETE is 404; adding it back makes it work again for the endpoints
// that subscribe to it.
func TestEventTypeDelete(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	rc := newReceiver(t, status(200))
	ep := in.createEndpoint(rc.srv.URL, "invoice.paid")
	rc.setSecret(ep.Secret)
	first := in.ingest("invoice.paid", `{"n":1}`, "Idempotency-Key", "before-the-delete")
	in.mustCall(204, "DELETE", "/v1/event-types/invoice.paid", nil, nil)
	in.mustCall(404, "DELETE", "/v1/event-types/invoice.paid", nil, nil)
	resp, raw := in.postEvent(`{"type":"invoice.paid","data":{}}`)
	wantProblem(t, resp, raw, 422, "unknown_event_type", "")
	// A retry of the event taken before the delete gets its answer: it is
	// stored, and delivered.
	var again ingestResponse
	in.mustCall(202, "POST", "/v1/tenants/acme/events", `{"type":"invoice.paid","data":{"n":1}}`, &again, "Idempotency-Key", "before-the-delete")
	if again.ID != first.ID || len(again.Deliveries) != 1 || again.Deliveries[0].ID != first.Deliveries[0].ID {
		t.Errorf("the retry after the type was deleted answered %+v, want the first event %+v", again, first)
	}
	in.waitState(first.Deliveries[0].ID, "succeeded")
	in.mustCall(201, "PUT", "/v1/event-types/invoice.paid", map[string]string{"description": "back"}, nil)
	ev := in.ingest("invoice.paid", `{}`)
	in.waitState(ev.Deliveries[0].ID, "succeeded")
}
