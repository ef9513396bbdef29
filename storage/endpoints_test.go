package storage

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

func TestDB_PutTenant(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)

	t.Run("create", func(t *testing.T) {
		got, created, err := db.PutTenant(ctx, engine.Tenant{ID: "acme", Name: "Acme", Created: t0, Updated: t0})
		if err != nil {
			t.Fatal(err)
		}
		want := engine.Tenant{ID: "acme", Name: "Acme", Environment: engine.EnvironmentLive, Created: t0, Updated: t0}
		if !created || !reflect.DeepEqual(got, want) {
			t.Errorf("PutTenant = %+v, %v; want %+v, true", got, created, want)
		}
	})
	t.Run("update keeps Created", func(t *testing.T) {
		later := t0.Add(time.Hour)
		got, created, err := db.PutTenant(ctx, engine.Tenant{ID: "acme", Name: "Acme Inc", Created: later, Updated: later})
		if err != nil {
			t.Fatal(err)
		}
		want := engine.Tenant{ID: "acme", Name: "Acme Inc", Environment: engine.EnvironmentLive, Created: t0, Updated: later}
		if created || !reflect.DeepEqual(got, want) {
			t.Errorf("PutTenant = %+v, %v; want %+v, false", got, created, want)
		}
		read, err := db.Tenant(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(read, want) {
			t.Errorf("Tenant = %+v, want %+v", read, want)
		}
	})
	t.Run("environment is kept and never changes", func(t *testing.T) {
		got, _, err := db.PutTenant(ctx, engine.Tenant{ID: "sandbox", Environment: engine.EnvironmentTest, Created: t0, Updated: t0})
		if err != nil || got.Environment != engine.EnvironmentTest {
			t.Fatalf("PutTenant = %+v, %v; want a test tenant", got, err)
		}
		_, _, err = db.PutTenant(ctx, engine.Tenant{ID: "sandbox", Name: "x", Environment: engine.EnvironmentLive, Created: t0, Updated: t0})
		wantCode(t, err, engine.CodeInvalidField, "environment")
		if read, _ := db.Tenant(ctx, "sandbox"); read.Name != "" || read.Environment != engine.EnvironmentTest {
			t.Errorf("a refused update changed the tenant: %+v", read)
		}
		if got, _, err = db.PutTenant(ctx, engine.Tenant{ID: "sandbox", Name: "renamed", Updated: t0}); err != nil || got.Environment != engine.EnvironmentTest {
			t.Errorf("an update without environment: %+v, %v; want it kept", got, err)
		}
	})
	t.Run("times are stored in UTC", func(t *testing.T) {
		local := t0.In(time.FixedZone("X", 3600))
		got, _, err := db.PutTenant(ctx, engine.Tenant{ID: "zoned", Created: local, Updated: local})
		if err != nil {
			t.Fatal(err)
		}
		if got.Created != t0 {
			t.Errorf("Created = %v, want %v", got.Created, t0)
		}
	})
	t.Run("missing", func(t *testing.T) {
		_, err := db.Tenant(ctx, "nobody")
		wantCode(t, err, engine.CodeTenantNotFound, "tenant")
	})
	t.Run("invalid id", func(t *testing.T) {
		for _, id := range []string{"", "a\x00b"} {
			_, _, err := db.PutTenant(ctx, engine.Tenant{ID: id})
			wantCode(t, err, engine.CodeInvalidField, "tenant")
		}
	})
}

func TestDB_PutEventType(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	for _, name := range []string{"order.shipped", "invoice.paid", "order.created"} {
		_, created, err := db.PutEventType(ctx, engine.EventType{Name: name, Description: "d", Created: t0, Updated: t0})
		if err != nil || !created {
			t.Fatalf("PutEventType(%s) = %v, %v; want created", name, created, err)
		}
	}
	later := t0.Add(time.Minute)
	got, created, err := db.PutEventType(ctx, engine.EventType{Name: "invoice.paid", Description: "new", Created: later, Updated: later})
	if err != nil {
		t.Fatal(err)
	}
	want := engine.EventType{Name: "invoice.paid", Description: "new", Created: t0, Updated: later}
	if created || !reflect.DeepEqual(got, want) {
		t.Errorf("PutEventType = %+v, %v; want %+v, false", got, created, want)
	}

	list, err := db.EventTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, et := range list {
		names = append(names, et.Name)
	}
	if want := []string{"invoice.paid", "order.created", "order.shipped"}; !reflect.DeepEqual(names, want) {
		t.Errorf("EventTypes = %v, want %v", names, want)
	}
}

func TestDB_CreateEndpoint(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustTenant(t, db, "a.b")

	t.Run("missing tenant", func(t *testing.T) {
		err := db.CreateEndpoint(ctx, newEndpoint("nobody", "*"), 0)
		wantCode(t, err, engine.CodeTenantNotFound, "tenant")
	})

	ep := newEndpoint("a", "*")
	ep.Secrets = append(ep.Secrets, engine.Secret{Key: "whsec_old", Expires: t0.Add(time.Hour)})
	if err := db.CreateEndpoint(ctx, ep, 0); err != nil {
		t.Fatal(err)
	}
	t.Run("read back with secrets", func(t *testing.T) {
		got, err := db.Endpoint(ctx, "a", ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, ep) {
			t.Errorf("Endpoint = %+v, want %+v", got, ep)
		}
	})
	t.Run("duplicate id", func(t *testing.T) {
		if err := db.CreateEndpoint(ctx, ep, 0); err == nil {
			t.Error("CreateEndpoint of an existing id succeeded")
		}
	})
	t.Run("other tenant", func(t *testing.T) {
		_, err := db.Endpoint(ctx, "a.b", ep.ID)
		wantCode(t, err, engine.CodeEndpointNotFound, "id")
	})
	t.Run("error has no secret", func(t *testing.T) {
		if err := db.CreateEndpoint(ctx, ep, 0); err == nil || strings.Contains(err.Error(), ep.Secrets[0].Key) {
			t.Errorf("error %v shows the secret", err)
		}
	})
}

// TestDB_CreateEndpoint_limit: concurrent creates share commits, and the
// limit is checked inside the transaction, so exactly limit of them pass
// however they interleave; another tenant has its own count.
func TestDB_CreateEndpoint_limit(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustTenant(t, db, "a.b") // "a" ‖ 0x00 is not a prefix of its keys
	const limit, tries = 3, 12
	var wg sync.WaitGroup
	var created, refused atomic.Int32
	for range tries {
		wg.Go(func() {
			err := db.CreateEndpoint(ctx, newEndpoint("a", "*"), limit)
			switch engine.ErrorCode(err) {
			case "":
				created.Add(1)
			case engine.CodeLimitReached:
				refused.Add(1)
			default:
				t.Errorf("CreateEndpoint: %v", err)
			}
		})
	}
	wg.Wait()
	if created.Load() != limit || refused.Load() != tries-limit {
		t.Errorf("%d created, %d refused; want %d and %d", created.Load(), refused.Load(), limit, tries-limit)
	}
	if err := db.CreateEndpoint(ctx, newEndpoint("a.b", "*"), limit); err != nil {
		t.Errorf("another tenant's first endpoint: %v", err)
	}
	if eps, _ := db.Endpoints(ctx, "a"); len(eps) != limit {
		t.Errorf("tenant a has %d endpoints, want %d", len(eps), limit)
	}
}

func TestDB_Endpoints(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustTenant(t, db, "a.b")
	mustTenant(t, db, "empty")
	var want []string
	for range 3 {
		want = append(want, mustEndpoint(t, db, "a", "*").ID)
	}
	mustEndpoint(t, db, "a.b", "*")

	tests := []struct {
		tenant string
		want   []string
		code   engine.Code
	}{
		{tenant: "a", want: want},
		{tenant: "empty", want: nil},
		{tenant: "nobody", code: engine.CodeTenantNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.tenant, func(t *testing.T) {
			list, err := db.Endpoints(ctx, tt.tenant)
			if tt.code != "" {
				wantCode(t, err, tt.code, "tenant")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if list == nil {
				t.Error("Endpoints = nil, want a non-nil slice")
			}
			var got []string
			for _, ep := range list {
				got = append(got, ep.ID)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Endpoints = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDB_UpdateEndpoint(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustTenant(t, db, "b")
	ep := mustEndpoint(t, db, "a", "*")

	t.Run("applies fn", func(t *testing.T) {
		later := t0.Add(time.Hour)
		got, err := db.UpdateEndpoint(ctx, "a", ep.ID, func(e *engine.Endpoint) error {
			e.URL = "https://example.org/new"
			e.Disabled = true
			e.Updated = later
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := ep
		want.URL, want.Disabled, want.Updated = "https://example.org/new", true, later
		if !reflect.DeepEqual(got, want) {
			t.Errorf("UpdateEndpoint = %+v, want %+v", got, want)
		}
		read, _ := db.Endpoint(ctx, "a", ep.ID)
		if !reflect.DeepEqual(read, want) {
			t.Errorf("Endpoint = %+v, want %+v", read, want)
		}
	})
	t.Run("fn error returned as is", func(t *testing.T) {
		sentinel := errors.New("no")
		_, err := db.UpdateEndpoint(ctx, "a", ep.ID, func(e *engine.Endpoint) error {
			e.URL = "https://changed.example"
			return sentinel
		})
		if err != sentinel {
			t.Errorf("error = %v, want the sentinel itself", err)
		}
		read, _ := db.Endpoint(ctx, "a", ep.ID)
		if read.URL == "https://changed.example" {
			t.Error("an aborted update was stored")
		}
	})
	t.Run("fn may not change the id", func(t *testing.T) {
		_, err := db.UpdateEndpoint(ctx, "a", ep.ID, func(e *engine.Endpoint) error {
			e.ID = "ep_other"
			return nil
		})
		if err == nil {
			t.Error("UpdateEndpoint changing the id succeeded")
		}
	})
	t.Run("other tenant", func(t *testing.T) {
		_, err := db.UpdateEndpoint(ctx, "b", ep.ID, func(*engine.Endpoint) error { return nil })
		wantCode(t, err, engine.CodeEndpointNotFound, "id")
	})
}

func TestDB_DeleteEndpoint(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustTenant(t, db, "b")
	mustEventType(t, db, "order.created")
	d := mustDelivery(t, db, "a")

	wantCode(t, db.DeleteEndpoint(ctx, "b", d.EndpointID), engine.CodeEndpointNotFound, "id")
	if err := db.DeleteEndpoint(ctx, "a", d.EndpointID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, db.DeleteEndpoint(ctx, "a", d.EndpointID), engine.CodeEndpointNotFound, "id")
	_, err := db.Endpoint(ctx, "a", d.EndpointID)
	wantCode(t, err, engine.CodeEndpointNotFound, "id")

	// The delivery stays, pending and due.
	got, err := db.Delivery(ctx, "a", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != engine.StatePending {
		t.Errorf("State = %s, want pending", got.State)
	}
	in, err := db.AttemptInput(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if in.EndpointFound {
		t.Error("AttemptInput.EndpointFound = true after delete")
	}
}
