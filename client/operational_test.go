package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/webhookd/webhookd/client"
	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/verify"
)

// TestClient_OperationalEndpoints manages operational endpoints through
// the client against the real server (a Node on a bbolt file, with
// [alerts] on), and decodes the operational events they receive.
func TestClient_OperationalEndpoints(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	events := make(chan client.OperationalEvent, 10)
	var secret string
	ops := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if _, err := (&verify.Verifier{Secrets: []string{secret}}).Verify(r.Header, body); err != nil {
			t.Errorf("operational event: %v", err)
		}
		var env client.Envelope
		if err := json.Unmarshal(body, &env); err != nil {
			t.Error(err)
		}
		ev, err := client.DecodeOperationalEvent(env)
		if err != nil || env.Type != client.EventEndpointCreated {
			t.Errorf("operational event %s: %v", body, err)
		}
		events <- ev
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(ops.Close)

	db := openDB(t)
	loopback := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	node := engine.NewNode(db, engine.NodeOptions{
		Dispatcher: engine.DispatcherOptions{Targets: loopback},
		Service:    engine.ServiceOptions{Targets: loopback, LookupHost: publicLookup},
		Alerts:     &engine.AlertOptions{URL: "https://alerts.example.com/", Secret: engine.NewSecret()},
	})
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Stop(context.Background()) })
	api := httptest.NewServer(httpapi.New(node.Service, httpapi.Options{Tokens: []string{adminToken}}))
	t.Cleanup(api.Close)
	c, err := client.New(api.URL, client.Options{Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}

	made, err := c.CreateOperationalEndpoint(ctx, client.OperationalEndpointInput{URL: ops.URL, EventTypes: []string{client.EventEndpointCreated}, Description: "pager"})
	if err != nil || made.Secret == "" || made.Source != client.SourceAPI || made.Description != "pager" {
		t.Fatalf("CreateOperationalEndpoint = %+v, %v", made, err)
	}
	secret = made.Secret
	all := collect(t, c.OperationalEndpoints(ctx, client.ListOptions{}))
	if len(all) != 2 || all[0].Source != client.SourceConfig || all[1].ID != made.ID {
		t.Fatalf("OperationalEndpoints = %+v, want the [alerts] one and the new one", all)
	}
	types := []string{client.AllEventTypes}
	if got, err := c.UpdateOperationalEndpoint(ctx, made.ID, client.OperationalEndpointPatch{EventTypes: &types}); err != nil || !slices.Equal(got.EventTypes, types) {
		t.Fatalf("UpdateOperationalEndpoint = %+v, %v", got, err)
	}
	types = []string{client.EventEndpointCreated}
	if _, err := c.UpdateOperationalEndpoint(ctx, made.ID, client.OperationalEndpointPatch{EventTypes: &types}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.OperationalEndpoint(ctx, made.ID); err != nil || !slices.Equal(got.EventTypes, types) {
		t.Fatalf("OperationalEndpoint = %+v, %v", got, err)
	}
	rot, err := c.RotateOperationalSecret(ctx, made.ID, 0)
	if err != nil || rot.Secret == "" || rot.Secret == made.Secret || !rot.PreviousSecretExpires.IsZero() {
		t.Fatalf("RotateOperationalSecret(0) = %+v, %v", rot, err)
	}
	secret = rot.Secret
	url := "https://evil.example.com/"
	_, err = c.UpdateOperationalEndpoint(ctx, all[0].ID, client.OperationalEndpointPatch{URL: &url})
	if p, ok := errors.AsType[*client.Problem](err); !ok || p.Code != client.CodeConfigManaged || p.Field != "url" {
		t.Errorf("a change of the [alerts] endpoint's URL: %v, want config_managed", err)
	}

	// An endpoint created tells the operational endpoint.
	if _, _, err := c.PutTenant(ctx, "acme", client.TenantInput{Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	ep, err := c.CreateEndpoint(ctx, "acme", client.EndpointInput{URL: "https://hooks.example.com/", EventTypes: []string{client.AllEventTypes}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.Tenant != "acme" || ev.EndpointID != ep.ID || ev.At.IsZero() {
			t.Errorf("DecodeOperationalEvent = %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no endpoint.created came")
	}

	if err := c.DeleteOperationalEndpoint(ctx, made.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OperationalEndpoint(ctx, made.ID); client.CodeOf(err) != client.CodeEndpointNotFound {
		t.Errorf("OperationalEndpoint after its deletion: %v", err)
	}
}
