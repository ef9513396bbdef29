package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// recordTests: tenants, the event catalogue and endpoints.
var recordTests = []test{
	{"a tenant is created, then only its name changes", testPutTenant},
	{"a tenant's environment never changes", testTenantEnvironment},
	{"tenants are listed by id", testTenants},
	{"times come back in UTC", testTimesInUTC},
	{"the catalogue is created, updated and listed by name", testPutEventType},
	{"a type taken out of the catalogue stays on its endpoints", testDeleteEventType},
	{"an endpoint comes back as created, secrets included", testCreateEndpoint},
	{"an endpoint belongs to its tenant only", testEndpointIsolation},
	{"endpoints are listed in creation order", testEndpoints},
	{"the endpoint limit holds under concurrent creates", testEndpointLimit},
	{"a record without a name it can be keyed by is refused", testUnkeyable},
	{"UpdateEndpoint applies fn and stores its result", testUpdateEndpoint},
	{"UpdateEndpoint stores nothing when fn fails", testUpdateEndpointAbort},
	{"concurrent endpoint updates all land", testUpdateEndpointConcurrent},
	{"endpoint health is merged as attempts report it", testEndpointHealth},
	{"an endpoint keeps the reveals of its secrets through health and rotation", testSecretReveals},
	{"an endpoint keeps its custom headers, in plain to every reader, through health and updates", testCustomHeaders},
	{"an endpoint's rate limit is stored, changed and removed, and an attempt reads it", testEndpointRateLimit},
	{"a deleted endpoint's deliveries stay", testDeleteEndpoint},
	{"what a caller changes is not the store's", testNoAliasing},
}

func testPutTenant(t *testing.T, f *fixture) {
	in := engine.Tenant{ID: "acme", Name: "Acme", Environment: engine.EnvironmentLive, Created: t0, Updated: t0}
	got, created, err := f.s.PutTenant(t.Context(), in)
	if err != nil || !created {
		t.Fatalf("PutTenant = %v, %v; want created", created, err)
	}
	wantEqual(t, "created tenant", got, in)

	later := t0.Add(time.Hour)
	got, created, err = f.s.PutTenant(t.Context(), engine.Tenant{ID: "acme", Name: "Acme Inc", Environment: engine.EnvironmentLive, Created: later, Updated: later})
	if err != nil || created {
		t.Fatalf("PutTenant of an existing tenant = %v, %v; want updated", created, err)
	}
	want := engine.Tenant{ID: "acme", Name: "Acme Inc", Environment: engine.EnvironmentLive, Created: t0, Updated: later}
	wantEqual(t, "updated tenant", got, want)
	read, err := f.s.Tenant(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "Tenant", read, want)

	_, err = f.s.Tenant(t.Context(), "nobody")
	wantError(t, err, engine.TenantNotFound())
}

func testTenantEnvironment(t *testing.T, f *fixture) {
	in := engine.Tenant{ID: "sandbox", Name: "Sandbox", Environment: engine.EnvironmentTest, Created: t0, Updated: t0}
	if _, _, err := f.s.PutTenant(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	_, _, err := f.s.PutTenant(t.Context(), engine.Tenant{ID: "sandbox", Name: "Live now", Environment: engine.EnvironmentLive, Created: t0, Updated: t0})
	wantError(t, err, engine.EnvironmentNeverChanges("sandbox", engine.EnvironmentTest))
	read, _ := f.s.Tenant(t.Context(), "sandbox")
	wantEqual(t, "tenant after a refused change of environment", read, in)

	got, _, err := f.s.PutTenant(t.Context(), engine.Tenant{ID: "sandbox", Name: "Renamed", Updated: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Environment != engine.EnvironmentTest || got.Name != "Renamed" {
		t.Errorf("an update that names no environment = %+v, want the name changed and the environment kept", got)
	}
}

func testTenants(t *testing.T, f *fixture) {
	list, err := f.s.Tenants(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantEmpty(t, "Tenants of a new store", list)
	for _, id := range []string{"globex", "acme.eu", "acme", "initech"} {
		f.tenant(t, id)
	}
	list, err = f.s.Tenants(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tn := range list {
		got = append(got, tn.ID)
	}
	wantEqual(t, "Tenants", got, []string{"acme", "acme.eu", "globex", "initech"})
}

func testTimesInUTC(t *testing.T, f *fixture) {
	zone := time.FixedZone("UTC+5", 5*3600)
	local := t0.In(zone)
	tn, _, err := f.s.PutTenant(t.Context(), engine.Tenant{ID: "zoned", Environment: engine.EnvironmentLive, Created: local, Updated: local})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "tenant's Created", tn.Created, t0)
	f.eventType(t, "order.created")
	ep := newEndpoint("zoned", "order.created")
	ep.Created, ep.Updated = local, local
	ep.SecretReveals = []engine.SecretReveal{{At: local, By: "admin"}}
	if err := f.s.CreateEndpoint(t.Context(), ep, 0); err != nil {
		t.Fatal(err)
	}
	read, err := f.s.Endpoint(t.Context(), "zoned", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "endpoint's Created", read.Created, t0)
	wantEqual(t, "endpoint's SecretReveals", read.SecretReveals, []engine.SecretReveal{{At: t0, By: "admin"}})
	res := f.ingest(t, newEventAt("zoned", "order.created", `{}`, local))
	wantEqual(t, "event's Created", res.Event.Created, t0)
	wantEqual(t, "delivery's NextAttemptAt", res.Deliveries[0].NextAttemptAt, t0)
	d := f.settle(t, res.Deliveries[0], engine.StateDead, local.Add(time.Second), time.Time{})
	wantEqual(t, "dead delivery's DeadAt", d.DeadAt, t0.Add(time.Second))
	wantEqual(t, "stored delivery", f.read(t, d), d)
}

func testPutEventType(t *testing.T, f *fixture) {
	list, err := f.s.EventTypes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantEmpty(t, "EventTypes of a new store", list)
	for _, name := range []string{"order.shipped", "invoice.paid", "order.created"} {
		in := engine.EventType{Name: name, Description: "d", Created: t0, Updated: t0}
		got, created, err := f.s.PutEventType(t.Context(), in)
		if err != nil || !created {
			t.Fatalf("PutEventType(%s) = %v, %v; want created", name, created, err)
		}
		wantEqual(t, "created event type", got, in)
	}
	later := t0.Add(time.Minute)
	got, created, err := f.s.PutEventType(t.Context(), engine.EventType{Name: "invoice.paid", Description: "new", Created: later, Updated: later})
	if err != nil || created {
		t.Fatalf("PutEventType of an existing type = %v, %v; want updated", created, err)
	}
	wantEqual(t, "updated event type", got, engine.EventType{Name: "invoice.paid", Description: "new", Created: t0, Updated: later})

	list, err = f.s.EventTypes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, et := range list {
		names = append(names, et.Name)
	}
	wantEqual(t, "EventTypes", names, []string{"invoice.paid", "order.created", "order.shipped"})
	wantEqual(t, "EventTypes[0]", list[0], got)
}

func testDeleteEventType(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	f.eventType(t, "order.shipped")
	ep := f.endpoint(t, "acme", "order.created", "order.shipped")

	wantError(t, f.s.DeleteEventType(t.Context(), "order.refunded"), engine.EventTypeNotFound("order.refunded"))
	if err := f.s.DeleteEventType(t.Context(), "order.created"); err != nil {
		t.Fatal(err)
	}
	wantError(t, f.s.DeleteEventType(t.Context(), "order.created"), engine.EventTypeNotFound("order.created"))
	list, _ := f.s.EventTypes(t.Context())
	if len(list) != 1 || list[0].Name != "order.shipped" {
		t.Errorf("EventTypes after the delete = %+v, want order.shipped only", list)
	}
	read, err := f.s.Endpoint(t.Context(), "acme", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "the subscriber's event types", read.EventTypes, ep.EventTypes)
	_, err = f.appendEvent(t, newEvent("acme", "order.created", `{}`))
	wantError(t, err, engine.UnknownEventType("order.created"))

	// Back in the catalogue, the type reaches its subscriber again.
	f.eventType(t, "order.created")
	if res := f.ingest(t, newEvent("acme", "order.created", `{}`)); len(res.Deliveries) != 1 {
		t.Errorf("ingest after the type came back made %d deliveries, want 1", len(res.Deliveries))
	}
}

func testCreateEndpoint(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	err := f.s.CreateEndpoint(t.Context(), newEndpoint("nobody", "*"), 0)
	wantError(t, err, engine.TenantNotFound())

	ep := newEndpoint("acme", "order.created", "order.shipped")
	ep.Secrets = append(ep.Secrets, engine.Secret{Key: engine.NewSecret(), Expires: t0.Add(24 * time.Hour)})
	ep.VerificationRequired, ep.Verified = true, t0.Add(time.Minute)
	ep.FailingSince, ep.LastFailure, ep.LastFailureAt = t0.Add(2*time.Minute), "HTTP 503", t0.Add(3*time.Minute)
	ep.Disabled, ep.DisabledReason, ep.DisabledAt = true, "disabled by request (admin)", t0.Add(4*time.Minute)
	ep.SecretReveals = []engine.SecretReveal{{At: t0.Add(5 * time.Minute), By: "admin"}, {At: t0.Add(6 * time.Minute), By: "token tok_1"}}
	ep.Headers = engine.CustomHeaders{{Name: "Authorization", Value: "Bearer conformance-0123456789"}}
	ep.RateLimit = engine.RateLimit{PerSecond: 0.25, Burst: 3}
	if err := f.s.CreateEndpoint(t.Context(), ep, 0); err != nil {
		t.Fatal(err)
	}
	got, err := f.s.Endpoint(t.Context(), "acme", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "Endpoint", got, ep)

	// An endpoint id is created once; the first stays as it was.
	again := ep
	again.URL, again.Secrets = "https://example.org/other", []engine.Secret{{Key: engine.NewSecret()}}
	if err := f.s.CreateEndpoint(t.Context(), again, 0); err == nil {
		t.Error("CreateEndpoint of an existing id succeeded")
	} else if strings.Contains(err.Error(), again.Secrets[0].Key) || strings.Contains(err.Error(), ep.Secrets[0].Key) {
		t.Errorf("error %q shows a secret", err)
	}
	got, _ = f.s.Endpoint(t.Context(), "acme", ep.ID)
	wantEqual(t, "Endpoint after a second create", got, ep)
}

func testEndpointIsolation(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	ep := f.endpoint(t, "acme", "*")
	_, err := f.s.Endpoint(t.Context(), "globex", ep.ID)
	wantError(t, err, engine.EndpointNotFound())
	_, err = f.s.Endpoint(t.Context(), "acme", "ep_nope")
	wantError(t, err, engine.EndpointNotFound())
	_, err = f.s.UpdateEndpoint(t.Context(), "globex", ep.ID, func(e *engine.Endpoint) error {
		e.URL = "https://globex.example/stolen"
		return nil
	})
	wantError(t, err, engine.EndpointNotFound())
	wantError(t, f.s.DeleteEndpoint(t.Context(), "globex", ep.ID), engine.EndpointNotFound())
	got, err := f.s.Endpoint(t.Context(), "acme", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "the endpoint after another tenant's tries", got, ep)
	list, _ := f.s.Endpoints(t.Context(), "globex")
	wantEmpty(t, "the other tenant's endpoints", list)
}

func testEndpoints(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "acme.eu") // its id begins with the other's
	f.tenant(t, "empty")
	var want []engine.Endpoint
	for range 5 {
		want = append(want, f.endpoint(t, "acme", "*"))
	}
	f.endpoint(t, "acme.eu", "*")

	got, err := f.s.Endpoints(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "Endpoints(acme)", got, want)
	got, err = f.s.Endpoints(t.Context(), "empty")
	if err != nil {
		t.Fatal(err)
	}
	wantEmpty(t, "Endpoints(empty)", got)
	_, err = f.s.Endpoints(t.Context(), "nobody")
	wantError(t, err, engine.TenantNotFound())
}

func testEndpointLimit(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "acme.eu")
	const limit, tries = 3, 16
	var created, refused atomic.Int32
	var wg sync.WaitGroup
	for range tries {
		wg.Go(func() {
			err := f.s.CreateEndpoint(t.Context(), newEndpoint("acme", "*"), limit)
			switch engine.ErrorCode(err) {
			case "":
				created.Add(1)
			case engine.CodeLimitReached:
				refused.Add(1)
				want := engine.EndpointLimitReached(limit)
				var e *engine.Error
				if errors.As(err, &e) && (e.Field != want.Field || e.Message != want.Message) {
					t.Errorf("CodeLimitReached: field %q, message %q; want the engine's %q, %q", e.Field, e.Message, want.Field, want.Message)
				}
			default:
				t.Errorf("CreateEndpoint: %v", err)
			}
		})
	}
	wg.Wait()
	if created.Load() != limit || refused.Load() != tries-limit {
		t.Errorf("%d created, %d refused; want %d and %d", created.Load(), refused.Load(), limit, tries-limit)
	}
	if eps, _ := f.s.Endpoints(t.Context(), "acme"); len(eps) != limit {
		t.Errorf("acme has %d endpoints, want %d", len(eps), limit)
	}
	// Another tenant has its own count, and 0 is no limit.
	if err := f.s.CreateEndpoint(t.Context(), newEndpoint("acme.eu", "*"), limit); err != nil {
		t.Errorf("another tenant's first endpoint: %v", err)
	}
	if err := f.s.CreateEndpoint(t.Context(), newEndpoint("acme", "*"), 0); err != nil {
		t.Errorf("an endpoint with no limit: %v", err)
	}
}

func testUnkeyable(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	_, _, err := f.s.PutTenant(t.Context(), engine.Tenant{ID: "", Name: "none", Created: t0, Updated: t0})
	wantError(t, err, engine.InvalidTenantID())
	_, _, err = f.s.PutEventType(t.Context(), engine.EventType{Name: "", Created: t0, Updated: t0})
	wantError(t, err, engine.EmptyEventTypeName())
	ep := newEndpoint("acme", "*")
	ep.ID = ""
	wantError(t, f.s.CreateEndpoint(t.Context(), ep, 0), engine.EmptyEndpointID())
	in := newEvent("acme", "order.created", `{}`)
	in.Event.ID = ""
	_, err = f.appendEvent(t, in)
	wantError(t, err, engine.InvalidEventID())
	in = newEvent("acme", "", `{}`)
	_, err = f.appendEvent(t, in)
	wantError(t, err, engine.EventTypeRequired())
	if eps, _ := f.s.Endpoints(t.Context(), "acme"); len(eps) != 0 {
		t.Errorf("endpoints after a refused create: %+v", eps)
	}
}

func testUpdateEndpoint(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep := f.endpoint(t, "acme", "*")
	later := t0.Add(time.Hour)
	rotated := engine.Secret{Key: engine.NewSecret()}
	got, err := f.s.UpdateEndpoint(t.Context(), "acme", ep.ID, func(e *engine.Endpoint) error {
		e.URL, e.Verified, e.Updated = "https://example.org/new", time.Time{}, later
		e.EventTypes = []string{"order.created"}
		e.Secrets = []engine.Secret{rotated, {Key: e.Secrets[0].Key, Expires: later.Add(24 * time.Hour)}}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := ep
	want.URL, want.Updated, want.EventTypes = "https://example.org/new", later, []string{"order.created"}
	want.Secrets = []engine.Secret{rotated, {Key: ep.Secrets[0].Key, Expires: later.Add(24 * time.Hour)}}
	wantEqual(t, "UpdateEndpoint", got, want)
	read, _ := f.s.Endpoint(t.Context(), "acme", ep.ID)
	wantEqual(t, "Endpoint after the update", read, want)

	_, err = f.s.UpdateEndpoint(t.Context(), "acme", "ep_nope", func(*engine.Endpoint) error { return nil })
	wantError(t, err, engine.EndpointNotFound())
}

func testUpdateEndpointAbort(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep := f.endpoint(t, "acme", "*")
	sentinel := errors.New("refused by fn")
	_, err := f.s.UpdateEndpoint(t.Context(), "acme", ep.ID, func(e *engine.Endpoint) error {
		e.URL, e.Disabled = "https://changed.example", true
		e.Secrets[0].Key = "whsec_changed"
		return sentinel
	})
	if err != sentinel {
		t.Errorf("error = %v, want fn's error itself", err)
	}
	read, _ := f.s.Endpoint(t.Context(), "acme", ep.ID)
	wantEqual(t, "Endpoint after an aborted update", read, ep)
}

func testUpdateEndpointConcurrent(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep := f.endpoint(t, "acme", "base.created")
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := f.s.UpdateEndpoint(t.Context(), "acme", ep.ID, func(e *engine.Endpoint) error {
				e.EventTypes = append(slices.Clip(e.EventTypes), fmt.Sprintf("type%02d.created", i))
				return nil
			})
			if err != nil {
				t.Errorf("UpdateEndpoint %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	read, _ := f.s.Endpoint(t.Context(), "acme", ep.ID)
	want := []string{"base.created"}
	for i := range n {
		want = append(want, fmt.Sprintf("type%02d.created", i))
	}
	wantEqual(t, "event types after concurrent updates", sorted(read.EventTypes), want)
}

func testEndpointHealth(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	d := f.deliver(t, ep, typ)
	// report records an attempt that ended at at, after which the
	// endpoint, as that attempt saw it, had health h.
	report := func(at time.Time, h engine.Endpoint) {
		t.Helper()
		rec := attemptRecord(d, engine.StatePending, at, at.Add(time.Minute))
		rec.Endpoint = &h
		d = f.record(t, rec)
	}
	failed := func(since time.Time, reason string, at time.Time) engine.Endpoint {
		h := ep
		h.FailingSince, h.LastFailure, h.LastFailureAt = since, reason, at
		return h
	}
	report(t0.Add(2*time.Second), failed(t0.Add(2*time.Second), "HTTP 502", t0.Add(2*time.Second)))
	report(t0.Add(time.Second), failed(t0.Add(time.Second), "HTTP 503", t0.Add(time.Second))) // an earlier attempt reports late
	got, _ := f.s.Endpoint(t.Context(), "acme", ep.ID)
	want := ep
	want.FailingSince, want.LastFailure, want.LastFailureAt = t0.Add(time.Second), "HTTP 502", t0.Add(2*time.Second)
	wantEqual(t, "health after two failures", got, want)

	gone := failed(t0.Add(time.Second), "HTTP 410", t0.Add(3*time.Second))
	gone.Disabled, gone.DisabledReason, gone.DisabledAt = true, "HTTP 410 Gone: the endpoint asked for no more deliveries", t0.Add(3*time.Second)
	report(t0.Add(3*time.Second), gone)
	report(t0.Add(4*time.Second), ep) // a success seen by an attempt that read ep: the run ends, the endpoint stays disabled
	got, _ = f.s.Endpoint(t.Context(), "acme", ep.ID)
	want.FailingSince, want.LastFailure, want.LastFailureAt = time.Time{}, "HTTP 410", t0.Add(3*time.Second)
	want.Disabled, want.DisabledReason, want.DisabledAt = true, gone.DisabledReason, gone.DisabledAt
	wantEqual(t, "health after a 410 and a success", got, want)
}

// testSecretReveals: the audit trail of an endpoint's secret reveals
// (RecordSecretReveal through UpdateEndpoint, as Service.RevealSecret
// writes it) is stored and listed, and kept by what rewrites the
// endpoint without reading the trail: an attempt's health merged by
// RecordOutcome, and a rotation.
func testSecretReveals(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	var want []engine.SecretReveal
	for i := range engine.MaxSecretReveals + 2 {
		r := engine.SecretReveal{At: t0.Add(time.Duration(i)*time.Second + time.Duration(i)), By: fmt.Sprintf("token tok_%02d", i)}
		got, err := f.s.UpdateEndpoint(t.Context(), "acme", ep.ID, func(e *engine.Endpoint) error {
			*e = engine.RecordSecretReveal(*e, r)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want = engine.RecordSecretReveal(engine.Endpoint{SecretReveals: want}, r).SecretReveals
		wantEqual(t, fmt.Sprintf("the reveals UpdateEndpoint %d returns", i), got.SecretReveals, want)
	}
	if len(want) != engine.MaxSecretReveals || want[0].By != "token tok_02" {
		t.Fatalf("the engine kept %d reveals from %q, want %d from the third", len(want), want[0].By, engine.MaxSecretReveals)
	}
	read, err := f.s.Endpoint(t.Context(), "acme", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	withReveals := ep
	withReveals.SecretReveals = want
	wantEqual(t, "the endpoint after the reveals", read, withReveals)
	list, _ := f.s.Endpoints(t.Context(), "acme")
	if len(list) != 1 {
		t.Fatalf("Endpoints = %d, want 1", len(list))
	}
	wantEqual(t, "the listed endpoint's reveals", list[0].SecretReveals, want)

	// An attempt that read the endpoint before the reveals reports its
	// health: merged, the reveals stay.
	d := f.deliver(t, ep, typ)
	at := t0.Add(time.Hour)
	if _, err := f.s.RecordOutcome(t.Context(), outcome(d, engine.StateDead, at, healthOf(ep, at, false))); err != nil {
		t.Fatal(err)
	}
	read, _ = f.s.Endpoint(t.Context(), "acme", ep.ID)
	if !read.FailingSince.Equal(at) {
		t.Errorf("FailingSince = %v, want the attempt's %v", read.FailingSince, at)
	}
	wantEqual(t, "the reveals after an attempt's health", read.SecretReveals, want)

	rotated := engine.Secret{Key: engine.NewSecret()}
	read, err = f.s.UpdateEndpoint(t.Context(), "acme", ep.ID, func(e *engine.Endpoint) error {
		e.Secrets = []engine.Secret{rotated, {Key: e.Secrets[0].Key, Expires: at.Add(time.Hour)}}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "the reveals after a rotation", read.SecretReveals, want)
	read, _ = f.s.Endpoint(t.Context(), "acme", ep.ID)
	wantEqual(t, "the stored reveals after a rotation", read.SecretReveals, want)
	wantEqual(t, "the secrets after a rotation", read.Secrets, []engine.Secret{rotated, {Key: ep.Secrets[0].Key, Expires: at.Add(time.Hour)}})
}

// testCustomHeaders: an endpoint's custom headers (engine.CustomHeaders) are
// stored as given and come back in plain, never Sealed, to every reader:
// Endpoint, Endpoints, UpdateEndpoint's fn and result, and AttemptInput,
// whatever a store keeps at rest. An attempt's health, a reveal and a
// rotation leave them; an update changes them; nil removes them. A
// value that reads like a sealed one is a value like any other.
func testCustomHeaders(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	ep := newEndpoint("acme", "order.created")
	ep.Headers = engine.CustomHeaders{
		{Name: "Authorization", Value: "Bearer conformance-0123456789"},
		{Name: "X-Odd", Value: "sealed:v1:not-sealed-at-all"},
		{Name: "X-Tenant", Value: "acme"},
	}
	want := ep
	want.Headers = slices.Clone(ep.Headers)
	if err := f.s.CreateEndpoint(t.Context(), ep, 0); err != nil {
		t.Fatal(err)
	}
	got, err := f.s.Endpoint(t.Context(), "acme", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "Endpoint", got, want)
	list, _ := f.s.Endpoints(t.Context(), "acme")
	if len(list) != 1 {
		t.Fatalf("Endpoints = %d, want 1", len(list))
	}
	wantEqual(t, "the listed endpoint's headers", list[0].Headers, want.Headers)
	res := f.ingest(t, newEvent("acme", "order.created", `{}`))
	for i := range 2 { // a store may cache what the first read
		in, err := f.s.AttemptInput(t.Context(), res.Deliveries[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, fmt.Sprintf("the headers AttemptInput %d gives", i), in.Endpoint.Headers, want.Headers)
	}

	// An attempt's health and a reveal leave them.
	at := t0.Add(time.Hour)
	if _, err := f.s.RecordOutcome(t.Context(), outcome(res.Deliveries[0], engine.StateDead, at, healthOf(ep, at, false))); err != nil {
		t.Fatal(err)
	}
	updated, err := f.s.UpdateEndpoint(t.Context(), "acme", ep.ID, func(e *engine.Endpoint) error {
		wantEqual(t, "the headers fn is given", e.Headers, want.Headers)
		*e = engine.RecordSecretReveal(*e, engine.SecretReveal{At: at, By: "admin"})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "the headers after health and a reveal", updated.Headers, want.Headers)

	// An update changes them; removing all of them leaves none.
	changed := engine.CustomHeaders{{Name: "Authorization", Value: "Bearer rotated-9876543210"}, {Name: "X-Region", Value: "eu"}}
	updated, err = f.s.UpdateEndpoint(t.Context(), "acme", ep.ID, func(e *engine.Endpoint) error {
		e.Headers = slices.Clone(changed)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "the headers UpdateEndpoint returns", updated.Headers, changed)
	got, _ = f.s.Endpoint(t.Context(), "acme", ep.ID)
	wantEqual(t, "the headers after an update", got.Headers, changed)
	in, err := f.s.AttemptInput(t.Context(), res.Deliveries[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "the headers an attempt reads after an update", in.Endpoint.Headers, changed)
	if _, err := f.s.UpdateEndpoint(t.Context(), "acme", ep.ID, func(e *engine.Endpoint) error {
		e.Headers = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, _ = f.s.Endpoint(t.Context(), "acme", ep.ID)
	if got.Headers != nil {
		t.Errorf("headers after removing them all = %+v, want nil", got.Headers)
	}
}

// testEndpointRateLimit: an endpoint's rate limit is stored as created,
// changed and removed through UpdateEndpoint, and listed; AttemptInput
// (where the dispatcher reads it for each attempt) sees every change at
// once; an attempt's health merged by RecordOutcome keeps it.
func testEndpointRateLimit(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	ep := newEndpoint("acme", "order.created")
	ep.RateLimit = engine.RateLimit{PerSecond: 5, Burst: 10}
	if err := f.s.CreateEndpoint(t.Context(), ep, 0); err != nil {
		t.Fatal(err)
	}
	d := f.deliver(t, ep, "order.created")
	check := func(what string, want engine.RateLimit) {
		t.Helper()
		read, err := f.s.Endpoint(t.Context(), "acme", ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, what+": the endpoint's rate limit", read.RateLimit, want)
		list, _ := f.s.Endpoints(t.Context(), "acme")
		if len(list) != 1 {
			t.Fatalf("Endpoints = %d, want 1", len(list))
		}
		wantEqual(t, what+": the listed endpoint's rate limit", list[0].RateLimit, want)
		in, err := f.s.AttemptInput(t.Context(), d.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, what+": the rate limit an attempt reads", in.Endpoint.RateLimit, want)
	}
	check("as created", ep.RateLimit)

	for _, want := range []engine.RateLimit{{PerSecond: 0.5, Burst: 1}, {PerSecond: 10_000, Burst: 10_000}, {}} {
		got, err := f.s.UpdateEndpoint(t.Context(), "acme", ep.ID, func(e *engine.Endpoint) error {
			e.RateLimit = want
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "the rate limit UpdateEndpoint returns", got.RateLimit, want)
		check(fmt.Sprintf("changed to %+v", want), want)
	}

	limited := engine.RateLimit{PerSecond: 2.5, Burst: 2}
	read, err := f.s.UpdateEndpoint(t.Context(), "acme", ep.ID, func(e *engine.Endpoint) error {
		e.RateLimit = limited
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// An attempt that read the endpoint before reports its health:
	// merged, the rate limit stays.
	at := t0.Add(time.Hour)
	if _, err := f.s.RecordOutcome(t.Context(), outcome(d, engine.StateDead, at, healthOf(ep, at, false))); err != nil {
		t.Fatal(err)
	}
	after, _ := f.s.Endpoint(t.Context(), "acme", ep.ID)
	if !after.FailingSince.Equal(at) {
		t.Errorf("FailingSince = %v, want the attempt's %v", after.FailingSince, at)
	}
	wantEqual(t, "the rate limit after an attempt's health", after.RateLimit, read.RateLimit)
}

func testDeleteEndpoint(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	d := f.deliver(t, ep, typ)
	if err := f.s.DeleteEndpoint(t.Context(), "acme", ep.ID); err != nil {
		t.Fatal(err)
	}
	wantError(t, f.s.DeleteEndpoint(t.Context(), "acme", ep.ID), engine.EndpointNotFound())
	_, err := f.s.Endpoint(t.Context(), "acme", ep.ID)
	wantError(t, err, engine.EndpointNotFound())

	// The delivery stays pending and due; its retry entry no longer
	// names a tenant, and its attempt input no endpoint.
	wantEqual(t, "the delivery", f.read(t, d), d)
	wantEqual(t, "the retry index", f.retryIndex(t), []engine.RetryEntry{{Due: d.NextAttemptAt, DeliveryID: d.ID, EndpointID: ep.ID}})
	in, err := f.s.AttemptInput(t.Context(), d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if in.EndpointFound || in.Delivery.ID != d.ID || string(in.Body) != `{"n":1}` {
		t.Errorf("AttemptInput = %+v, want the delivery and its body, EndpointFound false", in)
	}

	// The dispatcher dead-letters it.
	rec := attemptRecord(d, engine.StateDead, t0.Add(time.Second), time.Time{})
	rec.Reason, rec.LastStatus = engine.ReasonEndpointDeleted, 0
	rec.Attempt.Error, rec.Attempt.Status = "endpoint deleted; no request made", 0
	dead := f.record(t, rec)
	if dead.State != engine.StateDead {
		t.Fatalf("after the attempt: %+v", dead)
	}
	f.wantPlace(t, dead)
}

func testNoAliasing(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.eventType(t, "order.created")

	// What the caller passes in.
	ep := newEndpoint("acme", "order.created")
	ep.SecretReveals = []engine.SecretReveal{{At: t0, By: "admin"}}
	ep.Headers = engine.CustomHeaders{{Name: "X-Tenant", Value: "acme"}}
	want := ep
	want.EventTypes, want.Secrets, want.SecretReveals = slices.Clone(ep.EventTypes), slices.Clone(ep.Secrets), slices.Clone(ep.SecretReveals)
	want.Headers = slices.Clone(ep.Headers)
	if err := f.s.CreateEndpoint(t.Context(), ep, 0); err != nil {
		t.Fatal(err)
	}
	ep.EventTypes[0], ep.Secrets[0].Key, ep.SecretReveals[0].By = "changed.by_caller", "whsec_changed", "changed by caller"
	ep.Headers[0].Value = "changed by caller"
	in := newEvent("acme", "order.created", `{"n":1}`)
	res := f.ingest(t, in)
	in.Event.Body[0] = 'X'

	// What the store hands out.
	mutate := func(e *engine.Endpoint) {
		if len(e.EventTypes) > 0 {
			e.EventTypes[0] = "changed.by_caller"
		}
		if len(e.Secrets) > 0 {
			e.Secrets[0].Key = "whsec_changed"
		}
		if len(e.SecretReveals) > 0 {
			e.SecretReveals[0].By = "changed by caller"
		}
		if len(e.Headers) > 0 {
			e.Headers[0].Value = "changed by caller"
		}
	}
	got, _ := f.s.Endpoint(t.Context(), "acme", ep.ID)
	mutate(&got)
	list, _ := f.s.Endpoints(t.Context(), "acme")
	mutate(&list[0])
	var kept *engine.Endpoint // what fn was given, changed after it returned
	updated, _ := f.s.UpdateEndpoint(t.Context(), "acme", ep.ID, func(e *engine.Endpoint) error {
		e.Updated, kept = t0, e
		return nil
	})
	mutate(&updated)
	mutate(kept)
	ai, _ := f.s.AttemptInput(t.Context(), res.Deliveries[0].ID)
	mutate(&ai.Endpoint)
	got, _ = f.s.Endpoint(t.Context(), "acme", ep.ID)
	wantEqual(t, "Endpoint after callers changed theirs", got, want)

	rec := attemptRecord(res.Deliveries[0], engine.StatePending, t0.Add(time.Second), t0.Add(time.Minute))
	var returned engine.Delivery // what fn returned, changed after
	d := f.update(t, res.Deliveries[0].ID, func(cur engine.Delivery) engine.Delivery {
		returned = engine.RecordAttempt(cur, rec)
		return returned
	})
	wantD := cloneDelivery(f.read(t, d))
	returned.Attempts[0].Response = "changed by caller"
	returned.Attempts[0].ResponseHeaders[0].Value = "changed by caller"
	d.Attempts[0].Error = "changed by caller"
	d.Attempts[0].ResponseHeaders[1].Value = "changed by caller"
	res.Event.Body[1] = 'X'
	ev, ds, _ := f.s.Event(t.Context(), "acme", res.Event.ID)
	ds[0].Attempts[0].Error = "changed by caller"
	ds[0].Attempts[0].ResponseHeaders[0].Name = "Changed-By-Caller"
	ev.Body[2] = 'X'
	read := f.read(t, d)
	read.Attempts[0].Error = "changed by caller"
	read.Attempts[0].ResponseHeaders[1].Name = "Changed-By-Caller"
	evs, _, _ := f.s.ListEvents(t.Context(), "acme", engine.EventFilter{Limit: 10})
	evs[0].Body[3] = 'X'
	wantEqual(t, "Delivery after callers changed theirs", f.read(t, d), wantD)
	ev, _, _ = f.s.Event(t.Context(), "acme", res.Event.ID)
	wantEqual(t, "event body after callers changed theirs", string(ev.Body), `{"n":1}`)
}

// cloneDelivery is a copy of d that shares no memory with it.
func cloneDelivery(d engine.Delivery) engine.Delivery {
	d.Attempts = slices.Clone(d.Attempts)
	for i := range d.Attempts {
		d.Attempts[i].ResponseHeaders = slices.Clone(d.Attempts[i].ResponseHeaders)
	}
	d.Replays, d.Skips = slices.Clone(d.Replays), slices.Clone(d.Skips)
	return d
}
