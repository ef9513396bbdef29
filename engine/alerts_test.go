package engine_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
)

// TestEnsureOperatorEndpoint_NodesStartingAtOnce: the nodes of a cluster
// start together and each makes sure of the operator's alert endpoint;
// every one of them starts, and there is one [alerts] endpoint, beside
// the one the API made (in every other round).
func TestEnsureOperatorEndpoint_NodesStartingAtOnce(t *testing.T) {
	for round := range 1000 {
		st := memstore.New()
		apiMade := 0
		if round%2 == 1 {
			svc := engine.NewService(st, nil, engine.ServiceOptions{LookupHost: publicHost})
			if _, err := svc.CreateOperationalEndpoint(t.Context(), engine.OperationalEndpointInput{URL: "https://ops.example.com/api", EventTypes: []string{"*"}}); err != nil {
				t.Fatal(err)
			}
			apiMade = 1
		}
		var start, done sync.WaitGroup
		start.Add(1)
		errs := make([]error, 4)
		for i := range errs {
			done.Add(1)
			go func() {
				defer done.Done()
				svc := engine.NewService(st, nil, engine.ServiceOptions{})
				start.Wait()
				errs[i] = svc.EnsureOperatorEndpoint(t.Context(), "https://ops.example.com/alerts", engine.NewSecret())
			}()
		}
		start.Done()
		done.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: node %d: %v", round, i, err)
			}
		}
		eps, err := st.Endpoints(t.Context(), engine.OperatorTenant)
		if err != nil || len(eps) != 1+apiMade {
			t.Fatalf("round %d: %d operator endpoints (%v), want %d", round, len(eps), err, 1+apiMade)
		}
	}
}

// TestEnsureOperatorEndpoint_Config: the [alerts] endpoint is the config
// file's: a start makes it, subscribed to the three alerts [alerts]
// always sent; a later start sets its URL and secret again and enables
// it when webhookd had disabled it, but keeps what the API changed (its
// event types, a person's disabling); the API refuses to change its URL
// or secret or to delete it; a start without [alerts] deletes it, and
// only it.
func TestEnsureOperatorEndpoint_Config(t *testing.T) {
	ctx := t.Context()
	st := memstore.New()
	svc := engine.NewService(st, nil, engine.ServiceOptions{LookupHost: publicHost})
	api, err := svc.CreateOperationalEndpoint(ctx, engine.OperationalEndpointInput{URL: "https://ops.example.com/api", EventTypes: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	secret := engine.NewSecret()
	if err := svc.EnsureOperatorEndpoint(ctx, "https://ops.example.com/alerts", secret); err != nil {
		t.Fatal(err)
	}
	config := findSource(t, svc, engine.SourceConfig)
	if want := []string{"endpoint.failing", "endpoint.disabled", "delivery.dead"}; !slices.Equal(config.EventTypes, want) {
		t.Errorf("the [alerts] endpoint subscribes to %v, want %v", config.EventTypes, want)
	}

	// What the API may change of it, and what it may not.
	types := []string{"*"}
	if _, err := svc.UpdateOperationalEndpoint(ctx, config.ID, engine.OperationalEndpointPatch{EventTypes: &types}); err != nil {
		t.Fatal(err)
	}
	url := "https://evil.example.com/"
	for name, err := range map[string]error{
		"url":    second(svc.UpdateOperationalEndpoint(ctx, config.ID, engine.OperationalEndpointPatch{URL: &url})),
		"secret": second(svc.RotateOperationalSecret(ctx, config.ID, engine.RotateInput{})),
		"id":     svc.DeleteOperationalEndpoint(ctx, config.ID),
	} {
		if e, ok := errors.AsType[*engine.Error](err); !ok || e.Code != engine.CodeConfigManaged || e.Field != name {
			t.Errorf("a change of the [alerts] endpoint's %s: %v, want config_managed", name, err)
		}
	}

	// webhookd disables it (a 410); a start enables it again, with the
	// file's URL and secret, and the API's event types.
	if _, err := st.UpdateEndpoint(ctx, engine.OperatorTenant, config.ID, func(ep *engine.Endpoint) error {
		ep.Disabled, ep.DisabledReason = true, "HTTP 410 Gone: the endpoint asked for no more deliveries"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	secret2 := engine.NewSecret()
	if err := svc.EnsureOperatorEndpoint(ctx, "https://ops.example.com/alerts2", secret2); err != nil {
		t.Fatal(err)
	}
	stored, err := st.Endpoint(ctx, engine.OperatorTenant, config.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Disabled || stored.URL != "https://ops.example.com/alerts2" || len(stored.Secrets) != 1 || stored.Secrets[0].Key != secret2 || !slices.Equal(stored.EventTypes, types) {
		t.Errorf("after a start: %+v, want enabled, the file's URL and secret, the API's types", stored)
	}

	// A person disables it: a start leaves it so.
	off := true
	if _, err := svc.UpdateOperationalEndpoint(ctx, config.ID, engine.OperationalEndpointPatch{Disabled: &off}); err != nil {
		t.Fatal(err)
	}
	if err := svc.EnsureOperatorEndpoint(ctx, "https://ops.example.com/alerts2", secret2); err != nil {
		t.Fatal(err)
	}
	if got := findSource(t, svc, engine.SourceConfig); !got.Disabled {
		t.Errorf("a start enabled the [alerts] endpoint a person disabled: %+v", got)
	}

	// A start without [alerts].
	if err := svc.RemoveOperatorEndpoint(ctx); err != nil {
		t.Fatal(err)
	}
	all, err := svc.OperationalEndpoints(ctx)
	if err != nil || len(all) != 1 || all[0].ID != api.Endpoint.ID {
		t.Errorf("after a start without [alerts]: %+v %v, want the API's endpoint alone", all, err)
	}
}

// TestEnsureOperatorEndpoint_Legacy: an [alerts] endpoint stored before
// sources were (the only operator endpoint then, subscribed to every
// type) is taken as the config's: no second one is made, and it is
// subscribed to the three alerts it was sent.
func TestEnsureOperatorEndpoint_Legacy(t *testing.T) {
	ctx := t.Context()
	st := memstore.New()
	if _, _, err := st.PutTenant(ctx, engine.Tenant{ID: engine.OperatorTenant, Environment: engine.EnvironmentLive}); err != nil {
		t.Fatal(err)
	}
	legacy := engine.Endpoint{ID: engine.NewID("ep"), TenantID: engine.OperatorTenant, URL: "https://ops.example.com/alerts",
		EventTypes: []string{"*"}, Secrets: []engine.Secret{{Key: engine.NewSecret()}}}
	if err := st.CreateEndpoint(ctx, legacy, 0); err != nil {
		t.Fatal(err)
	}
	svc := engine.NewService(st, nil, engine.ServiceOptions{})
	if err := svc.EnsureOperatorEndpoint(ctx, legacy.URL, legacy.Secrets[0].Key); err != nil {
		t.Fatal(err)
	}
	all, err := svc.OperationalEndpoints(ctx)
	if err != nil || len(all) != 1 || all[0].ID != legacy.ID || all[0].Source != engine.SourceConfig || len(all[0].EventTypes) != 3 {
		t.Errorf("after a start: %+v %v, want the legacy endpoint as the config's, subscribed to the three alerts", all, err)
	}
}

// findSource returns the one operational endpoint of source.
func findSource(t *testing.T, svc *engine.Service, source engine.EndpointSource) engine.OperationalEndpoint {
	t.Helper()
	all, err := svc.OperationalEndpoints(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var found []engine.OperationalEndpoint
	for _, ep := range all {
		if ep.Source == source {
			found = append(found, ep)
		}
	}
	if len(found) != 1 {
		t.Fatalf("operational endpoints of source %s: %+v, want one", source, found)
	}
	return found[0]
}

// second returns the error of a call that returns two values.
func second[T any](_ T, err error) error { return err }

// publicHost resolves every host to a public address, with no DNS.
func publicHost(context.Context, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
}
