package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/verify"
)

type endpointView struct {
	ID             string    `json:"id"`
	Disabled       bool      `json:"disabled"`
	DisabledReason string    `json:"disabled_reason"`
	FailingSince   time.Time `json:"failing_since"`
	LastFailure    string    `json:"last_failure"`
}

func (in *instance) endpoint(id string) endpointView {
	in.t.Helper()
	var ep endpointView
	in.mustCall(200, "GET", "/v1/tenants/acme/endpoints/"+id, nil, &ep)
	return ep
}

// TestEndpointHealth_410DisablesAndHoldsDeliveries: a 410 disables the
// endpoint at once; later events are held as paused, not dropped, and
// enabling it with deliver_held sends them; enabling "from now on"
// dead-letters what was held.
func TestEndpointHealth_410DisablesAndHoldsDeliveries(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	var gone atomic.Bool
	gone.Store(true)
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if gone.Load() {
			w.WriteHeader(http.StatusGone)
			return
		}
		w.WriteHeader(200)
	})
	ep := in.createEndpoint(rc.srv.URL, "*")
	rc.setSecret(ep.Secret)

	first := in.ingest("invoice.paid", `{"n":1}`)
	in.waitState(first.Deliveries[0].ID, "dead")
	got := in.endpoint(ep.ID)
	if !got.Disabled || !strings.Contains(got.DisabledReason, "410") {
		t.Fatalf("after a 410 the endpoint is %+v, want disabled with the reason", got)
	}

	held := []string{in.ingest("invoice.paid", `{"n":2}`).Deliveries[0].ID, in.ingest("invoice.paid", `{"n":3}`).Deliveries[0].ID}
	for _, id := range held {
		if d := in.delivery(id); d.State != "paused" {
			t.Errorf("delivery %s to a disabled endpoint is %s, want paused", id, d.State)
		}
	}
	var paused struct {
		Data []deliveryView `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/tenants/acme/deliveries?state=paused", nil, &paused)
	if len(paused.Data) != 2 {
		t.Errorf("state=paused lists %d, want 2", len(paused.Data))
	}

	gone.Store(false)
	// The tenant's own people enable it: the resumed deliveries' replays
	// name their token, not "admin".
	var tok struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	in.mustCall(201, "POST", "/v1/tenants/acme/access-tokens", `{}`, &tok)
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+ep.ID, `{"disabled": false, "deliver_held": true}`, nil, "Authorization", "Bearer "+tok.Token)
	for _, id := range held {
		if d := in.waitState(id, "succeeded"); len(d.Replays) != 1 || d.Replays[0].By != "token "+tok.ID {
			t.Errorf("held delivery %s: replays %+v, want one by token %s", id, d.Replays, tok.ID)
		}
	}
	if got := in.endpoint(ep.ID); got.Disabled || got.DisabledReason != "" {
		t.Errorf("enabled endpoint is %+v", got)
	}

	// Disable by hand, hold one, enable from now on: it is dead-lettered.
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+ep.ID, `{"disabled": true}`, nil)
	h := in.ingest("invoice.paid", `{"n":4}`).Deliveries[0].ID
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+ep.ID, `{"disabled": false}`, nil)
	if d := in.waitState(h, "dead"); !strings.Contains(d.Reason, "held while the endpoint was disabled") {
		t.Errorf("reason %q", d.Reason)
	}
	rc.checkSignatures()
}

// TestEndpointHealth_FailingTooLongAndAlerts: an endpoint that fails every
// attempt for disable_after is disabled, its pending deliveries pause, and
// the operator endpoint receives signed endpoint.failing,
// endpoint.disabled and delivery.dead events.
func TestEndpointHealth_FailingTooLongAndAlerts(t *testing.T) {
	t.Parallel()
	opSecret := "whsec_" + strings.Repeat("QUJD", 8) // 24 bytes
	type alert struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	alerts := make(chan alert, 100)
	op := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	op.setSecret(opSecret)
	opCheck := &verify.Verifier{Secrets: []string{opSecret}}
	op.answer = func(n int, w http.ResponseWriter, r *http.Request) {
		body := op.got()[n-1].body // this request's: alerts arrive concurrently
		if _, err := opCheck.Verify(r.Header, body); err != nil {
			t.Errorf("alert signature: %v", err)
		}
		var a alert
		json.Unmarshal(body, &a)
		alerts <- a
		w.WriteHeader(200)
	}
	cfg := testConfig + "\n[alerts]\nurl = \"" + op.srv.URL + "\"\nsecret = \"" + opSecret + "\"\n"
	disableAfter, third := "500ms", "1s"
	if onPostgres {
		// A retry is a claim from the database: on a loaded machine the
		// first three attempts may take longer than 500ms.
		disableAfter, third = "2s", "4s"
	}
	cfg = strings.Replace(cfg, `attempt_timeout = "300ms"`, "attempt_timeout = \"300ms\"\ndisable_after = \""+disableAfter+"\"", 1)
	cfg = strings.Replace(cfg, `schedule = ["20ms", "40ms", "80ms"]`, `schedule = ["20ms", "40ms", "`+third+`"]`, 1)
	in := startInstance(t, t.TempDir(), cfg)
	in.setup()
	rc := newReceiver(t, status(500))
	ep := in.createEndpoint(rc.srv.URL, "*")
	rc.setSecret(ep.Secret)

	d := in.ingest("invoice.paid", `{"n":1}`).Deliveries[0].ID
	// 20ms, 40ms, 1s apart: the run of failures passes 500ms at the
	// fourth attempt, which disables the endpoint (and is the delivery's
	// last), however slowly the first three are made.
	in.waitState(d, "dead")
	waitFor(t, "the endpoint disabled", func() bool { return in.endpoint(ep.ID).Disabled })
	if got := in.endpoint(ep.ID); !strings.Contains(got.DisabledReason, "failing every attempt since") || got.LastFailure == "" {
		t.Errorf("endpoint %+v", got)
	}
	later := in.ingest("invoice.paid", `{"n":2}`).Deliveries[0].ID
	if got := in.delivery(later); got.State != "paused" {
		t.Errorf("delivery after the disabling is %s, want paused", got.State)
	}

	seen := map[string]map[string]any{}
	deadline := time.After(10 * time.Second)
	for len(seen) < 3 {
		select {
		case a := <-alerts:
			seen[a.Type] = a.Data
		case <-deadline:
			t.Fatalf("alerts received: %v; want endpoint.failing, endpoint.disabled and delivery.dead", seen)
		}
	}
	if seen["delivery.dead"]["delivery_id"] != d || seen["endpoint.disabled"]["endpoint_id"] != ep.ID {
		t.Errorf("alerts %v", seen)
	}
	// The operator tenant is not reachable through the API.
	in.mustCall(404, "GET", "/v1/tenants/_operator", nil, nil)
}

// TestEndpointHealth_DeletedWhileDisabled: deleting a disabled endpoint
// ends what it held. Its paused deliveries are never attempted, so
// without this they stayed paused for good, unfinished events that
// retention never prunes; on an ordered endpoint the deliveries waiting
// behind a paused head stayed waiting too. They all end dead, "endpoint
// deleted", and no request is made.
func TestEndpointHealth_DeletedWhileDisabled(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	// Only requests for this test's events count: with both drivers'
	// passes running at once, another test's node may still retry a
	// receiver whose port this one got after it closed.
	var mu sync.Mutex
	ours, requests := map[string]bool{}, []string{}
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.Header.Get("webhook-id"))
		mu.Unlock()
		w.WriteHeader(200)
	})
	var plain, ordered endpointCreated
	in.mustCall(201, "POST", "/v1/tenants/acme/endpoints", map[string]any{"url": rc.srv.URL, "event_types": []string{"*"}}, &plain)
	in.mustCall(201, "POST", "/v1/tenants/acme/endpoints", map[string]any{"url": rc.srv.URL, "event_types": []string{"*"}, "ordering": "endpoint", "on_dead": "block"}, &ordered)
	for _, ep := range []endpointCreated{plain, ordered} {
		in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+ep.ID, `{"disabled": true}`, nil)
	}
	var held []string
	for i := range 3 {
		res := in.ingest("invoice.paid", fmt.Sprintf(`{"n":%d}`, i))
		mu.Lock()
		ours[res.ID] = true
		mu.Unlock()
		for _, d := range res.Deliveries {
			held = append(held, d.ID)
		}
	}
	if len(held) != 6 {
		t.Fatalf("%d deliveries, want 6", len(held))
	}
	for _, ep := range []endpointCreated{plain, ordered} {
		in.mustCall(204, "DELETE", "/v1/tenants/acme/endpoints/"+ep.ID, nil, nil)
	}
	for _, id := range held {
		if d := in.waitState(id, "dead"); d.Reason != "endpoint deleted" {
			t.Errorf("delivery %s: reason %q, want %q", id, d.Reason, "endpoint deleted")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range requests {
		if ours[id] {
			t.Errorf("the receiver got a request for event %s, of a deleted endpoint's deliveries", id)
		} else {
			t.Logf("a request for another test's event %q, not counted", id)
		}
	}
}
