package storetest

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// deleteTenantTests: DeleteTenant and the purge after it.
var deleteTenantTests = []test{
	{"a deleted tenant goes at once, its data by the end of the purge", testDeleteTenant},
	{"deleting a tenant that is not there", testDeleteTenantMissing},
}

// tenantData is what the DeleteTenant test gives a tenant.
type tenantData struct {
	endpoints  []engine.Endpoint
	token      engine.AccessToken
	tokenHash  [sha256.Size]byte
	keyed      engine.NewEvent // ingested with an idempotency key
	events     []engine.IngestResult
	deliveries []engine.Delivery // as stored after the test moved them
}

// populate gives tenant two endpoints, a token and three events with
// deliveries left pending, succeeded, dead and paused, one ingested with
// an idempotency key.
func (f *fixture) populate(t *testing.T, tenant string) tenantData {
	t.Helper()
	var td tenantData
	f.tenant(t, tenant)
	td.endpoints = []engine.Endpoint{f.endpoint(t, tenant, "order.created"), f.endpoint(t, tenant, "order.created")}
	td.token, td.tokenHash = f.issue(t, tenant)
	for i := range 3 {
		in := newEvent(tenant, "order.created", `{"n":1}`)
		if i == 0 {
			in.IdempotencyKey, in.RequestHash, in.IdempotencyExpires = "order-1", [32]byte{1}, in.Event.Created.Add(24*time.Hour)
			td.keyed = in
		}
		res := f.ingest(t, in)
		td.events = append(td.events, res)
		td.deliveries = append(td.deliveries, res.Deliveries...)
	}
	for i, state := range []engine.State{engine.StateSucceeded, engine.StateDead, engine.StatePending} {
		td.deliveries[i] = f.settle(t, td.deliveries[i], state, t0.Add(time.Second), t0.Add(time.Minute))
	}
	td.deliveries[3] = f.pause(t, td.deliveries[3], t0.Add(time.Second))
	return td
}

func testDeleteTenant(t *testing.T, f *fixture) {
	f.eventType(t, "order.created")
	// The kept tenant's id begins with the deleted one's.
	gone := f.populate(t, "acme")
	kept := f.populate(t, "acme.eu")
	keptIndex := f.retryIndex(t)
	for i := 0; i < len(keptIndex); {
		if keptIndex[i].TenantID == "acme" {
			keptIndex = append(keptIndex[:i], keptIndex[i+1:]...)
		} else {
			i++
		}
	}

	if err := f.s.DeleteTenant(t.Context(), "acme", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	f.check(t)

	t.Run("at once", func(t *testing.T) {
		_, err := f.s.Tenant(t.Context(), "acme")
		wantError(t, err, engine.TenantNotFound())
		wantError(t, f.s.DeleteTenant(t.Context(), "acme", t0), engine.TenantNotFound())
		list, _ := f.s.Tenants(t.Context())
		if len(list) != 1 || list[0].ID != "acme.eu" {
			t.Errorf("Tenants = %+v, want acme.eu alone", list)
		}
		_, err = f.s.Endpoints(t.Context(), "acme")
		wantError(t, err, engine.TenantNotFound())
		_, err = f.s.Endpoint(t.Context(), "acme", gone.endpoints[0].ID)
		wantError(t, err, engine.EndpointNotFound())
		if _, ok, err := f.s.AccessTokenByHash(t.Context(), gone.tokenHash); ok || err != nil {
			t.Errorf("the deleted tenant's token: found %v, %v", ok, err)
		}
		toks, _ := f.s.AccessTokens(t.Context(), "acme")
		wantEmpty(t, "the deleted tenant's tokens", toks)
		_, err = f.appendEvent(t, newEvent("acme", "order.created", `{}`))
		wantError(t, err, engine.TenantNotFound())
		wantError(t, f.s.CreateEndpoint(t.Context(), newEndpoint("acme", "*"), 0), engine.TenantNotFound())
		tok, hash := accessToken("acme", t0.Add(time.Hour))
		wantError(t, f.s.CreateAccessToken(t.Context(), hash, tok), engine.TenantNotFound())
		if f.h.Purge != nil {
			_, _, err = f.s.PutTenant(t.Context(), engine.Tenant{ID: "acme", Name: "again", Environment: engine.EnvironmentLive, Created: t0, Updated: t0})
			wantError(t, err, engine.TenantDeleting("acme"))
		}
	})

	if f.h.Purge != nil {
		if err := f.h.Purge(t.Context(), f.s); err != nil {
			t.Fatalf("Purge: %v", err)
		}
		f.check(t)
	}

	t.Run("after the purge", func(t *testing.T) {
		for _, res := range gone.events {
			_, _, err := f.s.Event(t.Context(), "acme", res.Event.ID)
			wantError(t, err, engine.EventNotFound())
		}
		for _, d := range gone.deliveries {
			_, err := f.s.Delivery(t.Context(), "acme", d.ID)
			wantError(t, err, engine.DeliveryNotFound())
			_, err = f.s.AttemptInput(t.Context(), d.ID)
			wantError(t, err, engine.DeliveryNotFound())
		}
		wantEqual(t, "the retry index", f.retryIndex(t), keptIndex)
		dead, _, _ := f.s.DeadLetters(t.Context(), "acme", "", 100)
		wantEmpty(t, "the deleted tenant's dead letters", dead)
		ds, _, _ := f.s.ListDeliveries(t.Context(), "acme", engine.DeliveryFilter{Limit: 100})
		wantEmpty(t, "the deleted tenant's delivery log", ds)
		evs, _, _ := f.s.ListEvents(t.Context(), "acme", engine.EventFilter{Limit: 100})
		wantEmpty(t, "the deleted tenant's event feed", evs)
		recent, _ := f.s.RecentEvents(t.Context(), "acme", 100)
		wantEmpty(t, "the deleted tenant's recent events", recent)
		paused, err := f.s.UpdateDeliveries(t.Context(), engine.Selection{Tenant: "acme", State: engine.StatePaused, EndpointID: gone.endpoints[1].ID}, 10,
			func(d engine.Delivery) engine.Delivery { return engine.DropHeldDelivery(d, t0) })
		if err != nil {
			t.Fatal(err)
		}
		wantEmpty(t, "the deleted tenant's paused deliveries", paused)

		// The id is free: a new tenant, with nothing of the old one's,
		// and the old idempotency key is free too.
		tn, created, err := f.s.PutTenant(t.Context(), engine.Tenant{ID: "acme", Name: "again", Environment: engine.EnvironmentTest, Created: t0.Add(2 * time.Hour), Updated: t0.Add(2 * time.Hour)})
		if err != nil || !created || tn.Environment != engine.EnvironmentTest {
			t.Fatalf("PutTenant of the purged id = %+v, created %v, %v; want a new test tenant", tn, created, err)
		}
		eps, _ := f.s.Endpoints(t.Context(), "acme")
		wantEmpty(t, "the new tenant's endpoints", eps)
		again := gone.keyed
		again.Event.ID = engine.NewID("evt")
		res := f.ingest(t, again)
		if res.Duplicate {
			t.Error("the old tenant's idempotency key holds in the new one")
		}
		// Its events go on from the old tenant's last number, so a
		// receiver that tracks sequences never sees one go back.
		wantEqual(t, "the new tenant's first Sequence", res.Event.Sequence, uint64(len(gone.events)+1))
	})

	t.Run("the other tenant keeps everything", func(t *testing.T) {
		eps, _ := f.s.Endpoints(t.Context(), "acme.eu")
		wantEqual(t, "its endpoints", eps, kept.endpoints)
		tok, ok, _ := f.s.AccessTokenByHash(t.Context(), kept.tokenHash)
		if !ok {
			t.Error("its token is gone")
		}
		wantEqual(t, "its token", tok, kept.token)
		for _, d := range kept.deliveries {
			wantEqual(t, "its delivery", f.read(t, d), d)
		}
		f.wantPlace(t, kept.deliveries...)
		dup := f.ingest(t, kept.keyed)
		if !dup.Duplicate || dup.Event.ID != kept.keyed.Event.ID {
			t.Errorf("its keyed ingest again = %+v, want a duplicate", dup)
		}
		paused := f.takePaused(t, kept.endpoints[1], t0.Add(time.Hour))
		wantEqual(t, "its paused deliveries", ids(paused), []string{kept.deliveries[3].ID})
	})
}

func testDeleteTenantMissing(t *testing.T, f *fixture) {
	wantError(t, f.s.DeleteTenant(t.Context(), "nobody", t0), engine.TenantNotFound())
	f.tenant(t, "acme")
	list, _ := f.s.Tenants(t.Context())
	if len(list) != 1 {
		t.Errorf("Tenants = %+v, want acme", list)
	}
}
