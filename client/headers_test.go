package client_test

import (
	"errors"
	"maps"
	"testing"

	"github.com/webhookd/webhookd/client"
)

// TestClient_EndpointHeaders: custom headers go in on create, come back
// masked from every read, change as a merge on update (a nil value
// removes one; an empty map, all of them), are shown in plain by
// RevealSecret, and a bad one is a *Problem naming it.
func TestClient_EndpointHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client("", client.Options{})
	ctx := t.Context()
	if _, _, err := c.PutTenant(ctx, "acme", client.TenantInput{Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	const token = "Bearer client-hdr-0123456789abcdef0123"
	ep, err := c.CreateEndpoint(ctx, "acme", client.EndpointInput{URL: e.receiver.URL + "/ok", EventTypes: []string{client.AllEventTypes},
		Headers: map[string]string{"authorization": token, "X-Tenant": "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	masked := map[string]string{"Authorization": "Bearer ••••", "X-Tenant": "••••"}
	if !maps.Equal(ep.Headers, masked) {
		t.Errorf("CreateEndpoint headers = %v, want %v", ep.Headers, masked)
	}
	if got, err := c.Endpoint(ctx, "acme", ep.ID); err != nil || !maps.Equal(got.Headers, masked) {
		t.Errorf("Endpoint headers = %v, %v; want %v", got.Headers, err, masked)
	}
	shown, err := c.RevealSecret(ctx, "acme", ep.ID)
	if want := map[string]string{"Authorization": token, "X-Tenant": "acme"}; err != nil || !maps.Equal(shown.Headers, want) {
		t.Errorf("RevealSecret headers = %v, %v; want %v", shown.Headers, err, want)
	}

	region := "eu"
	upd, err := c.UpdateEndpoint(ctx, "acme", ep.ID, client.EndpointPatch{Headers: map[string]*string{"X-Tenant": nil, "X-Region": &region}})
	if want := map[string]string{"Authorization": "Bearer ••••", "X-Region": "••••"}; err != nil || !maps.Equal(upd.Headers, want) {
		t.Errorf("UpdateEndpoint (merge) headers = %v, %v; want %v", upd.Headers, err, want)
	}
	desc := "kept"
	if upd, err = c.UpdateEndpoint(ctx, "acme", ep.ID, client.EndpointPatch{Description: &desc}); err != nil || len(upd.Headers) != 2 {
		t.Errorf("UpdateEndpoint without Headers changed them: %v, %v", upd.Headers, err)
	}
	if upd, err = c.UpdateEndpoint(ctx, "acme", ep.ID, client.EndpointPatch{Headers: map[string]*string{}}); err != nil || upd.Headers != nil {
		t.Errorf("UpdateEndpoint with an empty map = %v, %v; want none left", upd.Headers, err)
	}
	if shown, err := c.RevealSecret(ctx, "acme", ep.ID); err != nil || shown.Headers == nil || len(shown.Headers) != 0 {
		t.Errorf("RevealSecret after clearing = %#v, %v; want an empty map", shown.Headers, err)
	}

	_, err = c.CreateEndpoint(ctx, "acme", client.EndpointInput{URL: e.receiver.URL + "/ok", EventTypes: []string{client.AllEventTypes},
		Headers: map[string]string{"webhook-id": "x"}})
	var p *client.Problem
	if !errors.As(err, &p) || p.Code != "invalid_field" || p.Field != "headers.Webhook-Id" {
		t.Errorf("a reserved header = %v, want a problem naming headers.Webhook-Id", err)
	}
}
