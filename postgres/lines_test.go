package postgres

import (
	"errors"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// TestStore_RefusesOrderedEndpoints: this store keeps no ordered lines
// yet, so an endpoint asking for ordering is refused, at create and at
// update, naming the field; one without is stored as none.
func TestStore_RefusesOrderedEndpoints(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	if _, _, err := s.PutTenant(ctx, engine.Tenant{ID: "acme", Name: "Acme", Environment: engine.EnvironmentLive}); err != nil {
		t.Fatal(err)
	}
	ep := engine.Endpoint{ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/in", EventTypes: []string{"*"}, Ordering: engine.OrderingKey}
	err := s.CreateEndpoint(ctx, ep, 0)
	var e *engine.Error
	if !errors.As(err, &e) || e.Code != engine.CodeInvalidField || e.Field != "ordering" {
		t.Fatalf("CreateEndpoint(ordering key) = %v, want invalid_field ordering", err)
	}
	ep.Ordering, ep.OnDead = engine.OrderingNone, engine.OnDeadBlock
	if err := s.CreateEndpoint(ctx, ep, 0); err != nil {
		t.Fatal(err)
	}
	_, err = s.UpdateEndpoint(ctx, "acme", ep.ID, func(e *engine.Endpoint) error { e.Ordering = engine.OrderingEndpoint; return nil })
	if engine.ErrorCode(err) != engine.CodeInvalidField {
		t.Fatalf("UpdateEndpoint(ordering endpoint) = %v, want invalid_field", err)
	}
	got, err := s.Endpoint(ctx, "acme", ep.ID)
	if err != nil || got.Ordering != engine.OrderingNone || got.OnDead != engine.OnDeadBlock {
		t.Fatalf("Endpoint = %+v, %v; want ordering none, on_dead block", got, err)
	}
}
