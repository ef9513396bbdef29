package client_test

import (
	"errors"
	"testing"

	"github.com/webhookd/webhookd/client"
)

// TestClient_RetryPolicies: the client lists the server's retry
// policies, sets a tenant's and an endpoint's, reads the policy a
// delivery follows, and reports a name the server does not have as
// CodeInvalidField on retry_policy.
func TestClient_RetryPolicies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client("", client.Options{})
	ctx := t.Context()

	ps := collect(t, c.RetryPolicies(ctx, client.ListOptions{}))
	if len(ps) != 2 || ps[0].Name != client.ExtendedRetryPolicy || ps[1].Name != client.StandardRetryPolicy ||
		ps[0].MaxAttempts != 8 || ps[0].Deadline().Hours() != 28 || len(ps[0].Schedule()) != 7 || ps[1].MaxAttempts != 2 {
		t.Fatalf("RetryPolicies = %+v", ps)
	}
	_, _, err := c.PutTenant(ctx, "acme", client.TenantInput{Name: "Acme", RetryPolicy: "nightly"})
	var p *client.Problem
	if !errors.As(err, &p) || p.Code != client.CodeInvalidField || p.Field != "retry_policy" {
		t.Fatalf("PutTenant with an unknown policy: %v, want invalid_field on retry_policy", err)
	}
	tn, _, err := c.PutTenant(ctx, "acme", client.TenantInput{Name: "Acme", RetryPolicy: client.ExtendedRetryPolicy})
	if err != nil || tn.RetryPolicy != client.ExtendedRetryPolicy {
		t.Fatalf("PutTenant = %+v, %v", tn, err)
	}
	if _, _, err := c.PutEventType(ctx, "invoice.paid", ""); err != nil {
		t.Fatal(err)
	}
	ep, err := c.CreateEndpoint(ctx, "acme", client.EndpointInput{URL: e.receiver.URL + "/ok", EventTypes: []string{"invoice.paid"}})
	if err != nil || ep.RetryPolicy != "" || ep.EffectiveRetryPolicy != client.ExtendedRetryPolicy {
		t.Fatalf("CreateEndpoint = %q effective %q, %v", ep.RetryPolicy, ep.EffectiveRetryPolicy, err)
	}
	std := client.StandardRetryPolicy
	got, err := c.UpdateEndpoint(ctx, "acme", ep.ID, client.EndpointPatch{RetryPolicy: &std})
	if err != nil || got.RetryPolicy != std || got.EffectiveRetryPolicy != std {
		t.Fatalf("UpdateEndpoint = %q effective %q, %v", got.RetryPolicy, got.EffectiveRetryPolicy, err)
	}
	res, err := c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]int{"n": 1}})
	if err != nil || len(res.Deliveries) != 1 {
		t.Fatalf("Ingest = %+v, %v", res, err)
	}
	if d, err := c.Delivery(ctx, "acme", res.Deliveries[0].ID); err != nil || d.RetryPolicy != std {
		t.Fatalf("Delivery = %+v, %v; want retry policy standard", d, err)
	}
	none := ""
	if got, err := c.UpdateEndpoint(ctx, "acme", ep.ID, client.EndpointPatch{RetryPolicy: &none}); err != nil || got.RetryPolicy != "" || got.EffectiveRetryPolicy != client.ExtendedRetryPolicy {
		t.Fatalf("UpdateEndpoint to the tenant's = %q effective %q, %v", got.RetryPolicy, got.EffectiveRetryPolicy, err)
	}
}
