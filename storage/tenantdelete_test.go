package storage

import (
	"bytes"
	"context"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// keysUnder counts, in every bucket, the keys that start with prefix.
func keysUnder(tb testing.TB, db *DB, prefix []byte) map[string]int {
	tb.Helper()
	out := map[string]int{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			c := b.Cursor()
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				out[string(name)]++
			}
			return nil
		})
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// TestDB_DeleteTenant deletes a tenant with deliveries in every state,
// idempotency keys, endpoints and access tokens, and purges it one event
// at a time: the file passes Check after every step, nothing of the
// tenant is left at the end, its id is free again, and the other tenant
// (whose id is a prefix of the deleted one's) keeps everything.
func TestDB_DeleteTenant(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "acme")
	mustTenant(t, db, "acme.eu")
	mustEventType(t, db, "order.created")
	mustEndpoint(t, db, "acme", "order.created")
	mustEndpoint(t, db, "acme", "order.created")
	mustEndpoint(t, db, "acme.eu", "order.created")
	tok, hash := newAccessToken("acme.eu", t0.Add(time.Hour))
	if err := db.CreateAccessToken(ctx, hash, tok); err != nil {
		t.Fatal(err)
	}
	keep, keepHash := newAccessToken("acme", t0.Add(time.Hour))
	if err := db.CreateAccessToken(ctx, keepHash, keep); err != nil {
		t.Fatal(err)
	}

	// The deleted tenant: 3 events x 2 endpoints, left pending, succeeded,
	// dead and paused; one with an idempotency key.
	var victims []engine.Delivery
	for i := range 3 {
		in := newEvent("acme.eu", "order.created", `{"n":1}`)
		if i == 0 {
			in.IdempotencyKey, in.IdempotencyExpires = "order-1", t0.Add(time.Hour)
		}
		victims = append(victims, mustAppend(t, db, in).Deliveries...)
	}
	for i, state := range []engine.State{engine.StateSucceeded, engine.StateDead, engine.StatePaused} {
		rec := engine.AttemptRecord{DeliveryID: victims[i].ID, Cycle: 1, State: state, Reason: "test", At: t0}
		if _, err := recordAttempt(ctx, db, rec); err != nil {
			t.Fatal(err)
		}
	}
	// The other tenant: one event, one idempotency key.
	other := newEvent("acme", "order.created", `{"n":2}`)
	other.IdempotencyKey, other.IdempotencyExpires = "order-1", t0.Add(time.Hour)
	kept := mustAppend(t, db, other)

	if err := db.DeleteTenant(ctx, "acme.eu", t0); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, db)
	_, err := db.Tenant(ctx, "acme.eu")
	wantCode(t, err, engine.CodeTenantNotFound, "tenant")
	_, err = db.AppendEvent(ctx, newEvent("acme.eu", "order.created", `{}`))
	wantCode(t, err, engine.CodeTenantNotFound, "tenant")
	_, _, err = db.PutTenant(ctx, engine.Tenant{ID: "acme.eu", Name: "again", Created: t0, Updated: t0})
	wantCode(t, err, engine.CodeTenantDeleting, "tenant")
	if _, ok, _ := db.AccessTokenByHash(ctx, hash); ok {
		t.Error("the deleted tenant's access token still works")
	}
	wantCode(t, db.DeleteTenant(ctx, "acme.eu", t0), engine.CodeTenantNotFound, "tenant")

	events := 0
	for step := 0; ; step++ {
		if step > 20 {
			t.Fatal("purge did not finish in 20 steps")
		}
		res, err := db.PurgeDeletedTenants(ctx, "", 1)
		if err != nil {
			t.Fatal(err)
		}
		mustCheck(t, db)
		if res.Tenant == "" {
			break
		}
		if res.Tenant != "acme.eu" || res.Events > 1 {
			t.Fatalf("step %d: %+v, want at most one event of acme.eu", step, res)
		}
		events += res.Events
	}
	if events != 3 {
		t.Errorf("purged %d events, want 3", events)
	}
	if left := keysUnder(t, db, tenantPrefix("acme.eu")); len(left) != 0 {
		t.Errorf("keys of the deleted tenant left: %v", left)
	}
	for _, d := range victims {
		if _, err := db.Delivery(ctx, "acme.eu", d.ID); engine.ErrorCode(err) != engine.CodeDeliveryNotFound {
			t.Errorf("delivery %s after the purge: %v", d.ID, err)
		}
	}
	if got := countKeys(t, db, bucketRetryIndex); got != len(kept.Deliveries) {
		t.Errorf("%d retry index entries, want the other tenant's %d", got, len(kept.Deliveries))
	}

	if _, _, err := db.Event(ctx, "acme", kept.Event.ID); err != nil {
		t.Errorf("the other tenant's event: %v", err)
	}
	if eps, _ := db.Endpoints(ctx, "acme"); len(eps) != 2 {
		t.Errorf("the other tenant has %d endpoints, want 2", len(eps))
	}
	if _, ok, _ := db.AccessTokenByHash(ctx, keepHash); !ok {
		t.Error("the other tenant's access token is gone")
	}
	if _, created, err := db.PutTenant(ctx, engine.Tenant{ID: "acme.eu", Name: "again", Created: t0, Updated: t0}); err != nil || !created {
		t.Errorf("PutTenant of the purged id: created %v, %v", created, err)
	}
}
