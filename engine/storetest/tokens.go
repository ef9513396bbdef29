package storetest

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// tokenTests: tenant access tokens.
var tokenTests = []test{
	{"a token is found by its hash", testAccessTokenByHash},
	{"a tenant's tokens are listed in issue order", testAccessTokens},
	{"a token is revoked once, by its own tenant only", testRevokeAccessToken},
	{"a portal link keeps its purpose and return URL; one of concurrent revocations revokes", testPortalLinkToken},
}

// accessToken returns a token of tenant as IssueAccessToken makes it, and
// its hash.
func accessToken(tenant string, expires time.Time) (engine.AccessToken, [sha256.Size]byte) {
	tok := engine.AccessToken{
		ID: engine.NewID("tok"), TenantID: tenant, Environment: engine.EnvironmentLive,
		Created: t0, Expires: expires,
	}
	return tok, engine.HashAccessToken(engine.AccessTokenPrefix + tok.ID)
}

// issue stores a new token of tenant and returns it with its hash.
func (f *fixture) issue(t *testing.T, tenant string) (engine.AccessToken, [sha256.Size]byte) {
	t.Helper()
	tok, hash := accessToken(tenant, t0.Add(time.Hour))
	if err := f.s.CreateAccessToken(t.Context(), hash, tok); err != nil {
		t.Fatalf("CreateAccessToken: %v", err)
	}
	return tok, hash
}

func testAccessTokenByHash(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	tok, hash := f.issue(t, "acme")
	got, ok, err := f.s.AccessTokenByHash(t.Context(), hash)
	if err != nil || !ok {
		t.Fatalf("AccessTokenByHash = %v, %v; want found", ok, err)
	}
	wantEqual(t, "AccessTokenByHash", got, tok)
	if _, ok, err := f.s.AccessTokenByHash(t.Context(), engine.HashAccessToken("whk_t_nope")); ok || err != nil {
		t.Errorf("an unknown hash: found %v, error %v; want neither", ok, err)
	}
	x, xhash := accessToken("nobody", t0.Add(time.Hour))
	wantError(t, f.s.CreateAccessToken(t.Context(), xhash, x), engine.TenantNotFound())
	if _, ok, _ := f.s.AccessTokenByHash(t.Context(), xhash); ok {
		t.Error("a refused token was stored")
	}
}

func testAccessTokens(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "acme.eu")
	var want []engine.AccessToken
	for range 3 {
		tok, _ := f.issue(t, "acme")
		want = append(want, tok)
	}
	f.issue(t, "acme.eu")
	got, err := f.s.AccessTokens(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "AccessTokens(acme)", got, want)
	got, err = f.s.AccessTokens(t.Context(), "nobody")
	if err != nil {
		t.Fatal(err)
	}
	wantEmpty(t, "AccessTokens(nobody)", got)
}

func testRevokeAccessToken(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	tok, hash := f.issue(t, "acme")
	other, otherHash := f.issue(t, "globex")

	_, _, err := f.s.RevokeAccessToken(t.Context(), "acme", other.ID, t0)
	wantError(t, err, engine.AccessTokenNotFound())
	_, _, err = f.s.RevokeAccessToken(t.Context(), "acme", "tok_nope", t0)
	wantError(t, err, engine.AccessTokenNotFound())
	if got, _, _ := f.s.AccessTokenByHash(t.Context(), otherHash); !got.Revoked.IsZero() {
		t.Error("another tenant revoked globex's token")
	}

	at := t0.Add(time.Minute)
	got, revoked, err := f.s.RevokeAccessToken(t.Context(), "acme", tok.ID, at)
	if err != nil || !revoked {
		t.Fatalf("RevokeAccessToken = %v, %v; want revoked by this call", revoked, err)
	}
	want := tok
	want.Revoked = at
	wantEqual(t, "RevokeAccessToken", got, want)
	again, revoked, err := f.s.RevokeAccessToken(t.Context(), "acme", tok.ID, at.Add(time.Hour))
	if err != nil || revoked {
		t.Fatalf("a second RevokeAccessToken = %v, %v; want not revoked by this call", revoked, err)
	}
	wantEqual(t, "a second RevokeAccessToken", again, want)
	stored, ok, _ := f.s.AccessTokenByHash(t.Context(), hash)
	if !ok {
		t.Fatal("a revoked token is not found")
	}
	wantEqual(t, "the revoked token by hash", stored, want)
	list, _ := f.s.AccessTokens(t.Context(), "acme")
	wantEqual(t, "AccessTokens after the revocation", list, []engine.AccessToken{want})
}

func testPortalLinkToken(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	tok, hash := accessToken("acme", t0.Add(10*time.Minute))
	tok.Purpose, tok.ReturnURL = engine.PurposePortalLink, "https://app.example.com/settings?tab=webhooks"
	if err := f.s.CreateAccessToken(t.Context(), hash, tok); err != nil {
		t.Fatal(err)
	}
	got, ok, err := f.s.AccessTokenByHash(t.Context(), hash)
	if err != nil || !ok {
		t.Fatalf("AccessTokenByHash = %v, %v", ok, err)
	}
	wantEqual(t, "portal link", got, tok)
	// Of concurrent revocations, exactly one revokes: a link opens one
	// session.
	at := t0.Add(time.Minute)
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, revoked, err := f.s.RevokeAccessToken(t.Context(), "acme", tok.ID, at)
			if err != nil {
				t.Error(err)
			}
			if revoked {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if n := won.Load(); n != 1 {
		t.Errorf("8 concurrent revocations with one time: %d revoked, want 1", n)
	}
}
