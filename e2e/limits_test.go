package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// Tests of what the pending bounds and a tenant's deletion count: every
// delivery that is not final, wherever it waits (due, behind its line's
// head, held for a disabled endpoint, or dead at the head of a blocked
// line), and of the bound on test events.

// addOrderedTenant creates tenant id with an access token of its own,
// and with that token an endpoint at url for every type, ordered as one
// line that a dead head blocks (on_dead block). It returns the endpoint.
func (in *instance) addOrderedTenant(id, url string) endpointCreated {
	in.t.Helper()
	in.mustCall(201, "PUT", "/v1/tenants/"+id, map[string]string{"name": id}, nil)
	var tok struct{ Token string }
	in.mustCall(201, "POST", "/v1/tenants/"+id+"/access-tokens", map[string]string{}, &tok)
	var ep endpointCreated
	in.mustCall(201, "POST", "/v1/tenants/"+id+"/endpoints",
		map[string]any{"url": url, "event_types": []string{"*"}, "ordering": "endpoint", "on_dead": "block"}, &ep,
		"Authorization", "Bearer "+tok.Token)
	return ep
}

// waitRefused posts, until the answer is status, an event of tenant with
// one Idempotency-Key, so that it stores one event at most: on the
// bbolt driver a bound holds at once, so the first post is refused; on
// the postgres driver a node counts the database's deliveries every few
// seconds (docs/cluster.md), and the refusal comes with the next count.
func (in *instance) waitRefused(tenant string, status int) {
	in.t.Helper()
	key := "probe-" + tenant
	waitFor(in.t, fmt.Sprintf("ingest of %s to answer %d", tenant, status), func() bool {
		resp, _ := in.postEventTo(tenant, `{"type":"invoice.paid","data":{"probe":true}}`, "Idempotency-Key", key)
		return resp.StatusCode == status
	})
}

// countList returns how many items GET path (with ?limit=1000) lists. The
// delivery log, not the reconciliation feed, counts what is stored: on
// the postgres driver the feed shows only what is below the oldest
// transaction running on the server.
func (in *instance) countList(path string) int {
	in.t.Helper()
	var page struct {
		Data []json.RawMessage `json:"data"`
	}
	in.mustCall(200, "GET", path+"?limit=1000", nil, &page)
	return len(page.Data)
}

// TestTenantLimits_OrderedLines: the deliveries that wait behind the head
// of an ordered line, and a dead head that blocks it, count toward
// [limits] pending_per_tenant and [ingest] max_pending like pending ones.
// A tenant whose own token made an ordered, on_dead block endpoint at a
// failing URL is refused with 429 tenant_overloaded at its bound of 50
// (its line then holds one dead head and 49 waiting), while another
// tenant's ingest goes on; a second such tenant takes the node to
// max_pending 100, where every ingest is 503 overloaded and /readyz 503.
func TestTenantLimits_OrderedLines(t *testing.T) {
	t.Parallel()
	cfg := configWith(t, testConfig, map[string]any{
		"ingest.max_pending":        100,
		"limits.pending_per_tenant": 50,
	})
	in := startInstance(t, t.TempDir(), cfg)
	in.setup()
	failing := newReceiver(t, status(500))
	in.addOrderedTenant("first", failing.srv.URL)
	in.addOrderedTenant("second", failing.srv.URL)
	calm := newReceiver(t, status(200))
	calm.setSecret(in.addTenant("calm", calm.srv.URL))

	event := func(i int) string { return fmt.Sprintf(`{"type":"invoice.paid","data":{"n":%d}}`, i) }
	for i := range 50 {
		if resp, raw := in.postEventTo("first", event(i)); resp.StatusCode != 202 {
			t.Fatalf("ingest %d of first, under its bound: %d %s", i, resp.StatusCode, raw)
		}
	}
	in.waitRefused("first", 429)
	for i := 50; i < 60; i++ { // the 600 of the report, bounded: none passes
		resp, raw := in.postEventTo("first", event(i))
		if detail := wantProblem(t, resp, raw, 429, "tenant_overloaded", "5"); !strings.Contains(detail, "pending_per_tenant") || !strings.Contains(detail, "waiting") {
			t.Fatalf("ingest %d of first: detail %q, want it to name the setting and the waiting deliveries", i, detail)
		}
	}
	stored := in.countList("/v1/tenants/first/deliveries")
	if want := 50 + b2i(onPostgres); stored < 50 || stored > want {
		t.Errorf("first has %d deliveries stored, want 50 (its bound; one more on postgres, the probe before its count)", stored)
	}
	if resp, raw := in.postEventTo("calm", event(0)); resp.StatusCode != 202 {
		t.Errorf("calm's ingest while first is at its bound: %d %s", resp.StatusCode, raw)
	}
	if resp, raw := in.get("/readyz"); resp.StatusCode != 200 {
		t.Errorf("/readyz %d %s while one tenant is at its bound, under max_pending, want 200", resp.StatusCode, raw)
	}

	for i := range 50 {
		resp, raw := in.postEventTo("second", event(i))
		if resp.StatusCode == 202 {
			continue
		}
		if !onPostgres { // exact: 50 of first and 49 of second are 99, under 100
			t.Fatalf("ingest %d of second, under both bounds: %d %s", i, resp.StatusCode, raw)
		}
		wantProblem(t, resp, raw, 503, "overloaded", "5") // first's probe counted
		break
	}
	in.waitRefused("calm", 503)
	resp, raw := in.postEventTo("calm", event(1))
	if detail := wantProblem(t, resp, raw, 503, "overloaded", "5"); !strings.Contains(detail, "max_pending") {
		t.Errorf("detail %q does not name the setting", detail)
	}
	if resp, raw := in.get("/readyz"); resp.StatusCode != 503 {
		t.Errorf("/readyz %d %s at max_pending, counting the waiting deliveries; want 503", resp.StatusCode, raw)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestTenantDelete_NotFinal: DELETE /v1/tenants/{t} without force is
// refused while the tenant has deliveries that are not final, not only
// those the dispatcher holds: events waiting behind a dead head that
// blocks its line, the head itself, and deliveries held (paused) for a
// disabled endpoint. The refusal says how many of each; nothing is
// deleted until force.
func TestTenantDelete_NotFinal(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	refusing := newReceiver(t, status(400)) // dead at once
	in.addOrderedTenant("blocked", refusing.srv.URL)
	var first ingestResponse
	for i := range 3 {
		var res ingestResponse
		in.mustCall(202, "POST", "/v1/tenants/blocked/events", fmt.Sprintf(`{"type":"invoice.paid","data":{"n":%d}}`, i), &res)
		if i == 0 {
			first = res
		}
	}
	waitFor(t, "the line's head to die and block it", func() bool {
		var d deliveryView
		in.mustCall(200, "GET", "/v1/tenants/blocked/deliveries/"+first.Deliveries[0].ID, nil, &d)
		return d.State == "dead"
	})

	in.mustCall(201, "PUT", "/v1/tenants/held", map[string]string{"name": "held"}, nil)
	var ep endpointCreated
	in.mustCall(201, "POST", "/v1/tenants/held/endpoints", map[string]any{"url": refusing.srv.URL, "event_types": []string{"*"}}, &ep)
	in.mustCall(200, "PATCH", "/v1/tenants/held/endpoints/"+ep.ID, `{"disabled": true}`, nil)
	var res ingestResponse
	in.mustCall(202, "POST", "/v1/tenants/held/events", `{"type":"invoice.paid","data":{}}`, &res)
	waitFor(t, "the delivery to be held for the disabled endpoint", func() bool {
		var d deliveryView
		in.mustCall(200, "GET", "/v1/tenants/held/deliveries/"+res.Deliveries[0].ID, nil, &d)
		return d.State == "paused"
	})

	del := func(tenant, query string) (*http.Response, []byte) {
		req, _ := http.NewRequest("DELETE", in.base+"/v1/tenants/"+tenant+query, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		return doRequest(t, req)
	}
	for _, c := range []struct{ tenant, counts string }{
		{"blocked", "0 pending, 2 waiting in their lines, 0 paused, 1 blocking their lines"},
		{"held", "0 pending, 0 waiting in their lines, 1 paused, 0 blocking their lines"},
	} {
		resp, raw := del(c.tenant, "")
		if detail := wantProblem(t, resp, raw, 409, "pending_deliveries", ""); !strings.Contains(detail, c.counts) || !strings.Contains(detail, "force=true") {
			t.Errorf("DELETE %s: detail %q, want it to count %q and say how to force", c.tenant, detail, c.counts)
		}
		in.mustCall(200, "GET", "/v1/tenants/"+c.tenant, nil, nil) // refused: nothing changed
		if n := in.countList("/v1/tenants/" + c.tenant + "/deliveries"); n == 0 {
			t.Errorf("%s has no deliveries left after the refusal", c.tenant)
		}
		if resp, raw := del(c.tenant, "?force=true"); resp.StatusCode != 202 {
			t.Errorf("DELETE %s?force=true: %d %s", c.tenant, resp.StatusCode, raw)
		}
	}
}

// TestTestEvents_Bounded: test events, the one way a tenant access token
// (or a customer's portal session) makes events, have a bound of their
// own per endpoint: eight clients looping POST …/test-events get 202 for
// the first TestEventBurst and then 429 rate_limited with Retry-After,
// and the events stored stay that many.
func TestTestEvents_Bounded(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	in.mustCall(200, "PUT", "/v1/event-types/invoice.paid", map[string]any{"example": map[string]string{"invoice": "inv_example"}}, nil)
	rc := newReceiver(t, status(200))
	ep := in.createEndpoint(rc.srv.URL, "invoice.paid")
	rc.setSecret(ep.Secret)
	var tok struct{ Token string }
	in.mustCall(201, "POST", "/v1/tenants/acme/access-tokens", map[string]string{}, &tok)

	const clients, each = 8, 20
	var (
		mu       sync.Mutex
		accepted int
		refusals = map[string]int{}
		wg       sync.WaitGroup
	)
	for range clients {
		wg.Go(func() {
			for range each {
				req, _ := http.NewRequest("POST", in.base+"/v1/tenants/acme/endpoints/"+ep.ID+"/test-events", strings.NewReader(`{}`))
				req.Header.Set("Authorization", "Bearer "+tok.Token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				var p struct{ Code string }
				_ = json.NewDecoder(resp.Body).Decode(&p)
				resp.Body.Close()
				mu.Lock()
				switch {
				case resp.StatusCode == 202:
					accepted++
				case resp.StatusCode == 429 && resp.Header.Get("Retry-After") != "":
					refusals[p.Code]++
				default:
					refusals[fmt.Sprintf("%d %s Retry-After %q", resp.StatusCode, p.Code, resp.Header.Get("Retry-After"))]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	const burst = 10 // engine.TestEventBurst; one more comes a minute later
	if accepted < burst || accepted > burst+1 {
		t.Errorf("%d of %d test events accepted, want %d (the endpoint's burst)", accepted, clients*each, burst)
	}
	if refusals["rate_limited"] != clients*each-accepted || len(refusals) != 1 {
		t.Errorf("refusals %v, want every other one 429 rate_limited with Retry-After", refusals)
	}
	if n := in.countList("/v1/tenants/acme/deliveries"); n != accepted {
		t.Errorf("%d test events stored, want the %d accepted", n, accepted)
	}
	resp, raw := func() (*http.Response, []byte) {
		req, _ := http.NewRequest("POST", in.base+"/v1/tenants/acme/endpoints/"+ep.ID+"/test-events", nil)
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		return doRequest(t, req)
	}()
	if detail := wantProblem(t, resp, raw, 429, "rate_limited", resp.Header.Get("Retry-After")); !strings.Contains(detail, "test event") {
		t.Errorf("detail %q does not say it is the test events' bound", detail)
	}
	// Another endpoint has a bound of its own.
	other := in.createEndpoint(rc.srv.URL, "invoice.paid")
	in.mustCall(202, "POST", "/v1/tenants/acme/endpoints/"+other.ID+"/test-events", nil, nil, "Authorization", "Bearer "+tok.Token)
}

// TestTestEvents_TenantBound: a test event counts toward the tenant's
// pending bound like any event: over [limits] pending_per_tenant it is
// 429 tenant_overloaded.
func TestTestEvents_TenantBound(t *testing.T) {
	t.Parallel()
	cfg := configWith(t, testConfig, map[string]any{
		"limits.pending_per_tenant": 2,
		"delivery.attempt_timeout":  "10s",
	})
	in := startInstance(t, t.TempDir(), cfg)
	in.setup()
	held, release := holdingReceiver(t)
	defer release()
	ep := in.createEndpoint(held.srv.URL, "invoice.paid")
	held.setSecret(ep.Secret)
	for range 2 {
		in.mustCall(202, "POST", "/v1/tenants/acme/endpoints/"+ep.ID+"/test-events", nil, nil)
	}
	in.waitCounted(2)
	req, _ := http.NewRequest("POST", in.base+"/v1/tenants/acme/endpoints/"+ep.ID+"/test-events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, raw := doRequest(t, req)
	wantProblem(t, resp, raw, 429, "tenant_overloaded", "5")
}
