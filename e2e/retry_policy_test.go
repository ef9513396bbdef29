package e2e

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// retryPolicyConfig is testConfig with a standard policy whose window
// is one second (3 attempts, 100 and 200 ms apart) and a policy of the
// operator's own, "night", like the built-in extended one in small: 5
// attempts over about 4.5 seconds, within 10. Real time drives the
// binary; the schedules are what make it quick.
func retryPolicyConfig(t *testing.T) string {
	return configWith(t, testConfig, map[string]any{
		"delivery.schedule": []string{"100ms", "200ms"},
		"delivery.deadline": "1s",
	}) + `
[retry.policies.night]
schedule = ["300ms", "600ms", "1200ms", "2400ms"]
deadline = "10s"
`
}

// TestRetryPolicy_LongWindowOutlivesAnOutage: two receivers are down for
// longer than the standard policy's window. The tenant follows the night
// policy; one endpoint overrides it with standard, whose delivery dies
// after its 3 attempts and gets no request once the receiver is back;
// the endpoint that follows the tenant's night policy is still being
// retried, and is delivered once its receiver comes back.
func TestRetryPolicy_LongWindowOutlivesAnOutage(t *testing.T) {
	in := startInstance(t, t.TempDir(), retryPolicyConfig(t))
	in.setup()
	var policies struct {
		Data []struct {
			Name        string `json:"name"`
			MaxAttempts int    `json:"max_attempts"`
		} `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/retry-policies", nil, &policies)
	if len(policies.Data) != 3 || policies.Data[1].Name != "night" || policies.Data[1].MaxAttempts != 5 || policies.Data[2].Name != "standard" || policies.Data[2].MaxAttempts != 3 {
		t.Fatalf("GET /v1/retry-policies = %+v, want extended, night (5 attempts), standard (3)", policies.Data)
	}
	in.mustCall(200, "PUT", "/v1/tenants/acme", map[string]string{"name": "Acme", "retry_policy": "night"}, nil)
	if code := in.call("PUT", "/v1/tenants/acme", map[string]string{"name": "Acme", "retry_policy": "weekend"}, nil); code != http.StatusUnprocessableEntity {
		t.Fatalf("PUT tenant with a policy the configuration does not have: %d, want 422", code)
	}

	var down atomic.Bool
	down.Store(true)
	answer := func(_ int, w http.ResponseWriter, _ *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
	short, long := newReceiver(t, answer), newReceiver(t, answer)
	var standardEP, nightEP struct {
		endpointCreated
		RetryPolicy          string `json:"retry_policy"`
		EffectiveRetryPolicy string `json:"effective_retry_policy"`
	}
	in.mustCall(201, "POST", "/v1/tenants/acme/endpoints", map[string]any{"url": short.srv.URL, "event_types": []string{"payment.succeeded"}, "retry_policy": "standard"}, &standardEP)
	in.mustCall(201, "POST", "/v1/tenants/acme/endpoints", map[string]any{"url": long.srv.URL, "event_types": []string{"payment.succeeded"}}, &nightEP)
	if standardEP.EffectiveRetryPolicy != "standard" || nightEP.RetryPolicy != "" || nightEP.EffectiveRetryPolicy != "night" {
		t.Fatalf("endpoints follow %q and %q (own %q), want standard and the tenant's night", standardEP.EffectiveRetryPolicy, nightEP.EffectiveRetryPolicy, nightEP.RetryPolicy)
	}
	short.setSecret(standardEP.Secret)
	long.setSecret(nightEP.Secret)

	start := time.Now()
	res := in.ingest("payment.succeeded", `{"amount":1}`)
	ids := map[string]string{}
	for _, d := range res.Deliveries {
		ids[d.EndpointID] = d.ID
	}
	dead := in.waitState(ids[standardEP.ID], "dead")
	if len(dead.Attempts) != 3 || !strings.Contains(dead.Reason, "all 3 attempts failed") {
		t.Errorf("the standard delivery died after %d attempts (%q), want 3, all failed", len(dead.Attempts), dead.Reason)
	}
	// Down for longer than the standard window (its 1s deadline).
	time.Sleep(time.Until(start.Add(1500 * time.Millisecond)))
	if d := in.delivery(ids[nightEP.ID]); d.State != "pending" {
		t.Fatalf("the night delivery is %s after the standard window (%q), want pending: retried still", d.State, d.Reason)
	}
	down.Store(false)

	ok := in.waitState(ids[nightEP.ID], "succeeded")
	if n := len(ok.Attempts); n < 4 || ok.Attempts[n-1].Status != http.StatusNoContent {
		t.Errorf("the night delivery succeeded after %d attempts, want at least 4, the last one answered 204", n)
	}
	for _, id := range []string{ids[standardEP.ID], ids[nightEP.ID]} {
		var d struct {
			EndpointID  string `json:"endpoint_id"`
			RetryPolicy string `json:"retry_policy"`
		}
		in.mustCall(200, "GET", "/v1/tenants/acme/deliveries/"+id, nil, &d)
		if want := map[string]string{standardEP.ID: "standard", nightEP.ID: "night"}[d.EndpointID]; d.RetryPolicy != want {
			t.Errorf("delivery %s follows %q, want %q", id, d.RetryPolicy, want)
		}
	}
	if n := len(short.got()); n != 3 {
		t.Errorf("the standard endpoint's receiver got %d requests, want its 3 attempts and none after its delivery died", n)
	}
	short.checkSignatures()
	long.checkSignatures()
}

// TestRetryPolicy_ReceiverAbort: a receiver that answers a failure with
// webhook-delivery: abort gets exactly one request: the delivery is dead
// at once, saying why, though its policy had retries left.
func TestRetryPolicy_ReceiverAbort(t *testing.T) {
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Webhook-Delivery", "Abort")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	ep := in.createEndpoint(rc.srv.URL, "payment.succeeded")
	rc.setSecret(ep.Secret)
	res := in.ingest("payment.succeeded", `{"amount":2}`)
	d := in.waitState(res.Deliveries[0].ID, "dead")
	const why = "the receiver asked to stop retrying (webhook-delivery: abort)"
	if len(d.Attempts) != 1 || !strings.Contains(d.Reason, why) || d.Attempts[0].Outcome != "permanent" || d.LastStatus != http.StatusServiceUnavailable {
		t.Errorf("dead after %d attempts, reason %q, last status %d; want 1 attempt, %q, 503", len(d.Attempts), d.Reason, d.LastStatus, why)
	}
	// The schedule's retries (20, 40, 80 ms) would have come by now.
	time.Sleep(300 * time.Millisecond)
	if n := len(rc.got()); n != 1 {
		t.Errorf("the receiver got %d requests, want exactly 1", n)
	}
	rc.checkSignatures()
}

// TestRetryPolicy_ReceiverDisables: a receiver moved from Svix keeps its
// delivery control. abort-message ends a delivery's retries as abort
// does; disable, even on a 2xx, disables the endpoint (the reason says
// the receiver asked) and holds its next delivery paused, sending
// nothing more, until its owner enables it with what it held.
func TestRetryPolicy_ReceiverDisables(t *testing.T) {
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	var control atomic.Value
	control.Store("abort-message")
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		v := control.Load().(string)
		w.Header().Set("Webhook-Delivery", v)
		if v == "abort-message" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	ep := in.createEndpoint(rc.srv.URL, "payment.succeeded")
	rc.setSecret(ep.Secret)
	d := in.waitState(in.ingest("payment.succeeded", `{"n":1}`).Deliveries[0].ID, "dead")
	if len(d.Attempts) != 1 || !strings.Contains(d.Reason, "the receiver asked to stop retrying") {
		t.Errorf("abort-message: dead after %d attempts, reason %q; want 1 attempt, the receiver asked", len(d.Attempts), d.Reason)
	}

	control.Store("disable")
	in.waitState(in.ingest("payment.succeeded", `{"n":2}`).Deliveries[0].ID, "succeeded")
	got := in.endpoint(ep.ID)
	if !got.Disabled || got.DisabledReason != "the receiver asked to be disabled (webhook-delivery: disable)" {
		t.Fatalf("after disable: endpoint disabled %v, reason %q", got.Disabled, got.DisabledReason)
	}
	held := in.ingest("payment.succeeded", `{"n":3}`).Deliveries[0].ID
	in.waitState(held, "paused")
	// The schedule's retries (20, 40, 80 ms) would have come by now.
	time.Sleep(300 * time.Millisecond)
	if n := len(rc.got()); n != 2 {
		t.Errorf("the receiver got %d requests, want 2: none while disabled", n)
	}

	control.Store("")
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+ep.ID, map[string]any{"disabled": false, "deliver_held": true}, nil)
	in.waitState(held, "succeeded")
	rc.checkSignatures()
}
