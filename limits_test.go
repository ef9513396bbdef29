package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Tests of what the pending bounds count: every delivery that is not
// final, wherever it waits (due, behind its line's head, held for a
// disabled endpoint, or dead at the head of a blocked line).

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
