package storetest

import (
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// retryPolicyTests hold a store to what retry policies need of it: the
// policy a tenant and an endpoint name kept, the tenant's handed to an
// ingest's fan-out as it is in the append's transaction (also right
// after it changed), and the policy a delivery's cycle follows kept
// wherever the delivery is read and through every transition.
var retryPolicyTests = []test{
	{"a tenant's and an endpoint's retry policy are kept", testRetryPolicyRecords},
	{"an ingest's fan-out gets the tenant's retry policy as it is now", testRetryPolicyFanOut},
	{"a delivery keeps the retry policy of its cycle", testRetryPolicyDelivery},
}

func testRetryPolicyRecords(t *testing.T, f *fixture) {
	ctx := t.Context()
	tn, created, err := f.s.PutTenant(ctx, engine.Tenant{ID: "acme", Name: "Acme", Environment: engine.EnvironmentLive, RetryPolicy: "extended", Created: t0, Updated: t0})
	if err != nil || !created || tn.RetryPolicy != "extended" {
		t.Fatalf("PutTenant with retry policy extended = %+v, %v, %v", tn, created, err)
	}
	readTenant := func() engine.Tenant {
		t.Helper()
		got, err := f.s.Tenant(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		all, err := f.s.Tenants(ctx)
		if err != nil || len(all) != 1 || all[0] != got {
			t.Errorf("Tenants = %+v, %v; want [%+v]", all, err, got)
		}
		return got
	}
	if got := readTenant(); got.RetryPolicy != "extended" {
		t.Errorf("stored tenant's retry policy %q, want extended", got.RetryPolicy)
	}
	// An update that names no policy keeps it; one that names one sets it.
	if got, _, err := f.s.PutTenant(ctx, engine.Tenant{ID: "acme", Name: "Acme 2", Updated: t0.Add(time.Second)}); err != nil || got.RetryPolicy != "extended" || got.Name != "Acme 2" {
		t.Errorf("PutTenant without a policy = %+v, %v; want the name changed and the policy kept", got, err)
	}
	if got := readTenant(); got.RetryPolicy != "extended" {
		t.Errorf("after an update without a policy: %q, want extended", got.RetryPolicy)
	}
	if got, _, err := f.s.PutTenant(ctx, engine.Tenant{ID: "acme", Name: "Acme 2", RetryPolicy: engine.StandardRetryPolicy, Updated: t0.Add(2 * time.Second)}); err != nil || got.RetryPolicy != engine.StandardRetryPolicy {
		t.Errorf("PutTenant with policy standard = %+v, %v", got, err)
	}
	if got := readTenant(); got.RetryPolicy != engine.StandardRetryPolicy {
		t.Errorf("after an update to standard: %q", got.RetryPolicy)
	}

	ep := newEndpoint("acme", "*")
	ep.RetryPolicy = "nightly-long"
	ep.EffectiveRetryPolicy = "nightly-long" // the Service's to fill in: never stored
	if err := f.s.CreateEndpoint(ctx, ep, 0); err != nil {
		t.Fatal(err)
	}
	plain := f.endpoint(t, "acme", "*")
	check := func(id string, want engine.RetryPolicyName) {
		t.Helper()
		got, err := f.s.Endpoint(ctx, "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		if got.RetryPolicy != want || got.EffectiveRetryPolicy != "" {
			t.Errorf("Endpoint %s: retry policy %q, effective %q; want %q and none stored", id, got.RetryPolicy, got.EffectiveRetryPolicy, want)
		}
		all, err := f.s.Endpoints(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range all {
			if e.ID == id && (e.RetryPolicy != want || e.EffectiveRetryPolicy != "") {
				t.Errorf("Endpoints: %s has retry policy %q, effective %q; want %q", id, e.RetryPolicy, e.EffectiveRetryPolicy, want)
			}
		}
	}
	check(ep.ID, "nightly-long")
	check(plain.ID, "")
	if _, err := f.s.UpdateEndpoint(ctx, "acme", ep.ID, func(e *engine.Endpoint) error { e.RetryPolicy, e.Updated = "", t0.Add(time.Minute); return nil }); err != nil {
		t.Fatal(err)
	}
	check(ep.ID, "")
	if _, err := f.s.UpdateEndpoint(ctx, "acme", plain.ID, func(e *engine.Endpoint) error { e.RetryPolicy, e.Updated = "extended", t0.Add(time.Minute); return nil }); err != nil {
		t.Fatal(err)
	}
	check(plain.ID, "extended")
}

func testRetryPolicyFanOut(t *testing.T, f *fixture) {
	ctx := t.Context()
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	own := newEndpoint("acme", "order.created")
	own.RetryPolicy = "nightly-long"
	if err := f.s.CreateEndpoint(ctx, own, 0); err != nil {
		t.Fatal(err)
	}
	inherits := f.endpoint(t, "acme", "order.created")
	want := map[string]engine.RetryPolicyName{own.ID: "nightly-long"}
	// Each round the tenant's policy changes and nothing else, then an
	// event comes: a store that kept what an earlier ingest read must
	// see the change.
	for i, policy := range []engine.RetryPolicyName{"", "extended", engine.StandardRetryPolicy, "extended", "nightly-long"} {
		if policy != "" {
			if _, _, err := f.s.PutTenant(ctx, engine.Tenant{ID: "acme", Name: "Tenant acme", RetryPolicy: policy, Updated: t0.Add(time.Duration(i) * time.Second)}); err != nil {
				t.Fatal(err)
			}
		}
		in := newEvent("acme", "order.created", `{}`)
		var gave engine.RetryPolicyName
		in.Deliveries = func(stored engine.Event, tp engine.RetryPolicyName, eps []engine.Endpoint) []engine.Delivery {
			gave = tp
			return engine.NewDeliveries(stored, tp, eps, engine.NewID)
		}
		res := f.ingest(t, in)
		if gave != policy {
			t.Errorf("round %d: the fan-out was given the tenant's retry policy %q, want %q", i, gave, policy)
		}
		want[inherits.ID] = engine.CyclePolicy(policy, engine.Endpoint{})
		if len(res.Deliveries) != 2 {
			t.Fatalf("round %d: %d deliveries, want 2", i, len(res.Deliveries))
		}
		for _, d := range res.Deliveries {
			if d.RetryPolicy != want[d.EndpointID] {
				t.Errorf("round %d: delivery to %s answered with retry policy %q, want %q", i, d.EndpointID, d.RetryPolicy, want[d.EndpointID])
			}
			if got := f.read(t, d); got.RetryPolicy != want[d.EndpointID] {
				t.Errorf("round %d: delivery to %s stored with retry policy %q, want %q", i, d.EndpointID, got.RetryPolicy, want[d.EndpointID])
			}
		}
	}
}

func testRetryPolicyDelivery(t *testing.T, f *fixture) {
	ctx := t.Context()
	if _, _, err := f.s.PutTenant(ctx, engine.Tenant{ID: "acme", Name: "Acme", Environment: engine.EnvironmentLive, RetryPolicy: "extended", Created: t0, Updated: t0}); err != nil {
		t.Fatal(err)
	}
	ep, typ := f.lane(t, "acme")
	d := f.deliver(t, ep, typ)
	if d.RetryPolicy != "extended" {
		t.Fatalf("delivery made with retry policy %q, want the tenant's, extended", d.RetryPolicy)
	}
	reads := func(what string, want engine.RetryPolicyName) {
		t.Helper()
		if got := f.read(t, d); got.RetryPolicy != want {
			t.Errorf("%s: Delivery has retry policy %q, want %q", what, got.RetryPolicy, want)
		}
		in, err := f.s.AttemptInput(ctx, d.ID)
		if err != nil || in.Delivery.RetryPolicy != want {
			t.Errorf("%s: AttemptInput has retry policy %q (%v), want %q", what, in.Delivery.RetryPolicy, err, want)
		}
		_, ds, err := f.s.Event(ctx, "acme", d.EventID)
		if err != nil || len(ds) != 1 || ds[0].RetryPolicy != want {
			t.Errorf("%s: Event's deliveries %+v (%v), want one with retry policy %q", what, ds, err, want)
		}
		list, _, err := f.s.ListDeliveries(ctx, "acme", engine.DeliveryFilter{Limit: 10})
		if err != nil || len(list) != 1 || list[0].RetryPolicy != want {
			t.Errorf("%s: ListDeliveries %+v (%v), want one with retry policy %q", what, list, err, want)
		}
	}
	reads("made", "extended")
	d = f.settle(t, d, engine.StatePending, t0.Add(time.Second), t0.Add(time.Minute))
	reads("after a failed attempt", "extended")
	d = f.settle(t, d, engine.StateDead, t0.Add(2*time.Minute), time.Time{})
	reads("dead", "extended")
	if dl := f.deadLetters(t, "acme"); len(dl) != 1 || dl[0].RetryPolicy != "extended" {
		t.Errorf("DeadLetters = %+v, want the delivery with retry policy extended", dl)
	}
	// A replay's cycle follows the policy it was started with.
	d = f.update(t, d.ID, func(cur engine.Delivery) engine.Delivery {
		return engine.ReplayDelivery(cur, engine.Replay{At: t0.Add(time.Hour), By: "admin"}, "nightly-long")
	})
	reads("replayed on another policy", "nightly-long")
	d = f.update(t, d.ID, func(cur engine.Delivery) engine.Delivery {
		return engine.ReplayDelivery(cur, engine.Replay{At: t0.Add(2 * time.Hour), By: "admin"}, "")
	})
	reads("replayed on the standard policy", "")
}
