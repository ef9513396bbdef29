package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// TestAPI_ReplayOfADeletedEndpointsDelivery: a delivery whose endpoint
// was deleted has nowhere to go, so its replay is refused (404
// endpoint_not_found naming endpoint_id) and changes nothing, instead of
// starting a cycle that can only die "endpoint deleted" (a succeeded
// delivery turned into a new dead letter). A replay of selected
// deliveries that holds one is refused whole, replaying none.
func TestAPI_ReplayOfADeletedEndpointsDelivery(t *testing.T) {
	e := newAPIEnv(t)
	ep := e.fixture()
	var kept endpointJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://other.example.com/in","event_types":["payment.succeeded"]}`}, 201, &kept)
	var ing ingestJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, &ing)
	var gone, live string
	for _, d := range ing.Deliveries {
		if d.EndpointID == ep.ID {
			gone = d.ID
		} else {
			live = d.ID
		}
	}
	if gone == "" || live == "" {
		t.Fatalf("deliveries %+v: want one to each endpoint", ing.Deliveries)
	}
	e.must(req{method: "DELETE", path: "/v1/tenants/acme/endpoints/" + ep.ID}, 204, nil)

	var before engine.Delivery
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + gone}, 200, &before)
	p := checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/acme/deliveries/" + gone + "/replay"}), 404, engine.CodeEndpointNotFound, "endpoint_id")
	if !strings.Contains(p.Detail, ep.ID) || !strings.Contains(p.Detail, "deleted") {
		t.Errorf("detail %q: want it to name the deleted endpoint", p.Detail)
	}
	var after engine.Delivery
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + gone}, 200, &after)
	if after.Cycle != before.Cycle || len(after.Replays) != 0 || after.State != before.State {
		t.Errorf("after the refused replay: cycle %d, %d replays, %s; want cycle %d, none, %s", after.Cycle, len(after.Replays), after.State, before.Cycle, before.State)
	}

	// The other endpoint's delivery replays as ever.
	var d engine.Delivery
	e.must(req{method: "POST", path: "/v1/tenants/acme/deliveries/" + live + "/replay"}, 202, &d)
	if d.Cycle != 2 || len(d.Replays) != 1 {
		t.Errorf("replay of the live endpoint's delivery: %+v", d)
	}
}

// TestConsole_DeletedEndpointsDeliveryOffersNoResend: in the console (a
// portal session here), the page of a delivery whose endpoint was deleted
// says why it has no Resend, its row in the delivery log and the dead
// letters has no box to select it for a replay, and a resend posted all
// the same is refused and changes nothing.
func TestConsole_DeletedEndpointsDeliveryOffersNoResend(t *testing.T) {
	e := newConsoleEnv(t) // acme, with a dead delivery to e.endpoint
	b := e.browser()
	b.open(link(e.apiEnv, `{}`))
	dl := e.delivery
	csrf := b.get("/console/t/acme/deliveries/"+dl).field(t, csrfField)
	e.must(req{method: "DELETE", path: "/v1/tenants/acme/endpoints/" + e.endpoint.ID}, 204, nil)

	p := b.get("/console/t/acme/deliveries/" + dl)
	if p.status != http.StatusOK || strings.Contains(p.body, `id="resend"`) || !strings.Contains(p.body, "nowhere to resend it") {
		t.Errorf("the delivery page of a deleted endpoint: %d, want no Resend and why:\n%s", p.status, p.body)
	}
	for _, list := range []string{"deliveries", "dead-letters"} {
		if p := b.get("/console/t/acme/" + list); p.status != http.StatusOK || !strings.Contains(p.body, dl) || strings.Contains(p.body, `value="`+dl+`"`) {
			t.Errorf("%s: %d, want the delivery listed without a box to select it:\n%s", list, p.status, p.body)
		}
	}
	if p := b.do("POST", "/console/t/acme/deliveries/"+dl+"/resend", url.Values{"csrf": {csrf}}); p.status != http.StatusNotFound || !strings.Contains(p.body, "deleted") {
		t.Errorf("a resend posted all the same: %d\n%s", p.status, p.body)
	}
	if p := b.do("POST", "/console/t/acme/replay-selected", url.Values{"csrf": {csrf}, "id": {dl}}); p.status != http.StatusNotFound {
		t.Errorf("a replay of it selected all the same: %d\n%s", p.status, p.body)
	}
	var d engine.Delivery
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + dl}, 200, &d)
	if d.State != engine.StateDead || d.Cycle != 1 || len(d.Replays) != 0 {
		t.Errorf("after the refused resends: %s, cycle %d, %d replays; want dead, cycle 1, none", d.State, d.Cycle, len(d.Replays))
	}
}

// TestConsole_ResendToADisabledEndpointSaysHeld: Resend of a delivery
// whose endpoint is disabled starts a cycle that is held until the
// endpoint is enabled, and its notice says so, instead of promising
// attempts "as they are made" that none will be.
func TestConsole_ResendToADisabledEndpointSaysHeld(t *testing.T) {
	e := newConsoleEnv(t) // acme, with a dead delivery to e.endpoint
	b := e.browser()
	b.open(link(e.apiEnv, `{}`))
	dl := e.delivery
	csrf := b.get("/console/t/acme/deliveries/"+dl).field(t, csrfField)
	e.must(req{method: "PATCH", path: "/v1/tenants/acme/endpoints/" + e.endpoint.ID, body: `{"disabled":true}`}, 200, nil)

	p := b.do("POST", "/console/t/acme/deliveries/"+dl+"/resend", url.Values{"csrf": {csrf}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("resend: %d\n%s", p.status, p.body)
	}
	page := b.get(p.header.Get("Location"))
	if !strings.Contains(page.body, "held") || !strings.Contains(page.body, "disabled") || strings.Contains(page.body, "as they are made") {
		t.Errorf("the notice after a resend to a disabled endpoint (%s):\n%s", p.header.Get("Location"), page.body)
	}

	// Enabled again, a resend says what it always said.
	e.must(req{method: "PATCH", path: "/v1/tenants/acme/endpoints/" + e.endpoint.ID, body: `{"disabled":false,"deliver_held":false}`}, 200, nil)
	p = b.do("POST", "/console/t/acme/deliveries/"+dl+"/resend", url.Values{"csrf": {csrf}})
	if page := b.get(p.header.Get("Location")); !strings.Contains(page.body, "as they are made") {
		t.Errorf("the notice after a resend to an enabled endpoint (%s):\n%s", p.header.Get("Location"), page.body)
	}
}
