package storage

import (
	"context"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

func newAccessToken(tenant string, expires time.Time) (engine.AccessToken, [32]byte) {
	t := engine.AccessToken{
		ID: engine.NewID("tok"), TenantID: tenant, Environment: engine.EnvironmentLive,
		Created: t0, Expires: expires,
	}
	return t, engine.HashAccessToken("whk_t_" + t.ID)
}

func TestDB_AccessTokens(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "acme")
	mustTenant(t, db, "globex")

	a, hashA := newAccessToken("acme", t0.Add(time.Hour))
	b, hashB := newAccessToken("acme", t0.Add(2*time.Hour))
	g, hashG := newAccessToken("globex", t0.Add(time.Hour))
	for _, tc := range []struct {
		tok  engine.AccessToken
		hash [32]byte
	}{{a, hashA}, {b, hashB}, {g, hashG}} {
		if err := db.CreateAccessToken(ctx, tc.hash, tc.tok); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("unknown tenant", func(t *testing.T) {
		x, hash := newAccessToken("nobody", t0.Add(time.Hour))
		wantCode(t, db.CreateAccessToken(ctx, hash, x), engine.CodeTenantNotFound, "tenant")
	})
	t.Run("by hash", func(t *testing.T) {
		got, ok, err := db.AccessTokenByHash(ctx, hashB)
		if err != nil || !ok {
			t.Fatalf("AccessTokenByHash = %v, %v", ok, err)
		}
		if !reflect.DeepEqual(got, b) {
			t.Errorf("got %+v, want %+v", got, b)
		}
		if _, ok, err := db.AccessTokenByHash(ctx, engine.HashAccessToken("whk_t_nope")); ok || err != nil {
			t.Errorf("unknown hash: found %v, err %v", ok, err)
		}
	})
	t.Run("listed per tenant in issue order", func(t *testing.T) {
		got, err := db.AccessTokens(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID != a.ID || got[1].ID != b.ID {
			t.Errorf("acme's tokens = %+v, want %s then %s", got, a.ID, b.ID)
		}
		if got, _ := db.AccessTokens(ctx, "nobody"); len(got) != 0 {
			t.Errorf("nobody's tokens = %+v", got)
		}
	})
	t.Run("revoke", func(t *testing.T) {
		_, _, err := db.RevokeAccessToken(ctx, "acme", g.ID, t0)
		wantCode(t, err, engine.CodeNotFound, "id") // globex's token, asked as acme
		got, _, err := db.RevokeAccessToken(ctx, "acme", a.ID, t0.Add(time.Minute))
		if err != nil || !got.Revoked.Equal(t0.Add(time.Minute)) {
			t.Fatalf("revoke = %+v, %v", got, err)
		}
		again, _, err := db.RevokeAccessToken(ctx, "acme", a.ID, t0.Add(time.Hour))
		if err != nil || !again.Revoked.Equal(t0.Add(time.Minute)) {
			t.Errorf("second revoke moved the time: %+v, %v", again, err)
		}
		stored, _, _ := db.AccessTokenByHash(ctx, hashA)
		if stored.Revoked.IsZero() {
			t.Error("the revocation was not stored")
		}
	})
	t.Run("prune", func(t *testing.T) {
		n, err := db.PruneAccessTokens(ctx, t0.Add(90*time.Minute), 100)
		if err != nil || n != 2 {
			t.Fatalf("pruned %d (%v), want a and g", n, err)
		}
		if _, ok, _ := db.AccessTokenByHash(ctx, hashA); ok {
			t.Error("a is still there")
		}
		if got, _ := db.AccessTokens(ctx, "acme"); len(got) != 1 || got[0].ID != b.ID {
			t.Errorf("acme's tokens after pruning = %+v", got)
		}
		mustCheck(t, db)
	})
	t.Run("tenants", func(t *testing.T) {
		got, err := db.Tenants(ctx)
		if err != nil || len(got) != 2 || got[0].ID != "acme" || got[1].ID != "globex" {
			t.Errorf("Tenants = %+v, %v", got, err)
		}
	})
}

func TestCheck_accessTokenIndex(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "acme")
	tok, hash := newAccessToken("acme", t0.Add(time.Hour))
	if err := db.CreateAccessToken(ctx, hash, tok); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, db)
	if err := db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTenantAccessTokens).Delete(tenantAccessTokenKey("acme", tok.ID))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Check(); err == nil {
		t.Fatal("Check passed a token missing from its index")
	}
	// Put it back so the cleanup check passes.
	if err := db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTenantAccessTokens).Put(tenantAccessTokenKey("acme", tok.ID), hash[:])
	}); err != nil {
		t.Fatal(err)
	}
}

func FuzzDecodeAccessToken(f *testing.F) {
	tok, _ := newAccessToken("acme", t0.Add(time.Hour))
	tok.Revoked = t0.Add(time.Minute)
	fuzzRecord(f, seed(tok, encodeAccessToken), decodeAccessToken, encodeAccessToken)
}
