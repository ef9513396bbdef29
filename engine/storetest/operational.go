package storetest

import (
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// operationalTests hold what operational webhooks (engine/operational.go)
// ask of a store: the reserved tenant's events need no catalogue entry,
// and an endpoint keeps its source.
var operationalTests = []test{
	{"an event of the operator tenant needs no catalogue entry", testOperatorEventUncatalogued},
	{"an endpoint keeps its source", testEndpointSource},
}

// testOperatorEventUncatalogued: webhookd's own event types are not in
// the customers' catalogue, and its events of them are stored and fan
// out all the same, every time (a store that keeps what an ingest read
// takes its other path the second time); a customer's event of such a
// type is still refused.
func testOperatorEventUncatalogued(t *testing.T, f *fixture) {
	f.tenant(t, engine.OperatorTenant)
	f.tenant(t, "acme")
	ep := f.endpoint(t, engine.OperatorTenant, "*")
	f.endpoint(t, "acme", "*")
	for i := range 3 {
		res := f.ingest(t, newEvent(engine.OperatorTenant, engine.OpEndpointCreated, `{"tenant":"acme"}`))
		if len(res.Deliveries) != 1 || res.Deliveries[0].EndpointID != ep.ID {
			t.Fatalf("operator event %d: deliveries %+v, want one to %s", i+1, res.Deliveries, ep.ID)
		}
		f.wantPlace(t, res.Deliveries...)
	}
	_, err := f.appendEvent(t, newEvent("acme", engine.OpEndpointCreated, `{}`))
	wantError(t, err, engine.UnknownEventType(engine.OpEndpointCreated))
}

// testEndpointSource: an endpoint's Source comes back as it was created,
// through an update and in the listing; "" stays "".
func testEndpointSource(t *testing.T, f *fixture) {
	f.tenant(t, engine.OperatorTenant)
	api := newEndpoint(engine.OperatorTenant, engine.OpDeliveryDead)
	api.Source = engine.SourceAPI
	config := newEndpoint(engine.OperatorTenant, "*")
	config.Source = engine.SourceConfig
	legacy := newEndpoint(engine.OperatorTenant, "*")
	for _, ep := range []engine.Endpoint{api, config, legacy} {
		if err := f.s.CreateEndpoint(t.Context(), ep, 0); err != nil {
			t.Fatal(err)
		}
		got, err := f.s.Endpoint(t.Context(), engine.OperatorTenant, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "Endpoint", got, ep)
	}
	got, err := f.s.UpdateEndpoint(t.Context(), engine.OperatorTenant, api.ID, func(ep *engine.Endpoint) error {
		ep.Description = "changed"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	api.Description = "changed"
	wantEqual(t, "UpdateEndpoint", got, api)
	list, err := f.s.Endpoints(t.Context(), engine.OperatorTenant)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "Endpoints", list, []engine.Endpoint{api, config, legacy})
}
