package engine_test

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/storage"
)

// TestService_RevealSecret: a reveal shows the keys that sign now (the
// current one, and the old ones still in their grace window), records
// who and when on the endpoint, keeps the latest MaxSecretReveals, and
// changes nothing else.
func TestService_RevealSecret(t *testing.T) {
	ctx := context.Background()
	svc, clock := newSecretsService(t, engine.EnvironmentTest)
	ep, secret, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/in", EventTypes: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}

	got, err := svc.RevealSecret(ctx, "acme", ep.ID, "token tok_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Secret != secret || len(got.Previous) != 0 || got.Environment != engine.EnvironmentTest {
		t.Errorf("reveal = %q, %d previous, %q; want the secret made at create, none, test", got.Secret, len(got.Previous), got.Environment)
	}
	want := []engine.SecretReveal{{At: clock.Now(), By: "token tok_1"}}
	if !reflect.DeepEqual(got.Endpoint.SecretReveals, want) {
		t.Errorf("reveals = %+v, want %+v", got.Endpoint.SecretReveals, want)
	}
	stored, _ := svc.Endpoint(ctx, "acme", ep.ID)
	if !reflect.DeepEqual(stored.SecretReveals, want) || !stored.Updated.Equal(ep.Updated) || !reflect.DeepEqual(stored.Secrets, ep.Secrets) {
		t.Errorf("stored after the reveal: reveals %+v, updated %v, %d secrets; want the reveal recorded and nothing else changed", stored.SecretReveals, stored.Updated, len(stored.Secrets))
	}

	// After a rotation with grace, both keys sign: both are shown; after
	// the window, the new one alone.
	clock.Add(time.Minute)
	rot, err := svc.RotateSecret(ctx, "acme", ep.ID, engine.RotateInput{Grace: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	got, err = svc.RevealSecret(ctx, "acme", ep.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	wantPrev := []engine.Secret{{Key: secret, Expires: clock.Now().Add(time.Hour)}}
	if got.Secret != rot.Secret || !reflect.DeepEqual(got.Previous, wantPrev) {
		t.Errorf("reveal during the grace window = %q, %+v; want the new secret and the old one until %v", got.Secret, got.Previous, wantPrev[0].Expires)
	}
	if n := len(got.Endpoint.SecretReveals); n != 2 || got.Endpoint.SecretReveals[1].By != "admin" {
		t.Errorf("reveals = %+v, want a second one by admin (by \"\")", got.Endpoint.SecretReveals)
	}
	clock.Add(time.Hour)
	if got, err = svc.RevealSecret(ctx, "acme", ep.ID, "admin"); err != nil || got.Secret != rot.Secret || len(got.Previous) != 0 {
		t.Errorf("reveal after the window = %q, %d previous, %v; want the new secret alone", got.Secret, len(got.Previous), err)
	}

	// Bounded: the latest MaxSecretReveals are kept.
	for range engine.MaxSecretReveals {
		clock.Add(time.Second)
		if _, err := svc.RevealSecret(ctx, "acme", ep.ID, "admin"); err != nil {
			t.Fatal(err)
		}
	}
	stored, _ = svc.Endpoint(ctx, "acme", ep.ID)
	if n := len(stored.SecretReveals); n != engine.MaxSecretReveals || !stored.SecretReveals[n-1].At.Equal(clock.Now()) {
		t.Errorf("reveals kept = %+v; want %d, the last now", stored.SecretReveals, engine.MaxSecretReveals)
	}

	for _, tt := range []struct {
		tenant, id string
		code       engine.Code
	}{
		{"acme", "ep_nope", engine.CodeEndpointNotFound},
		{"acme", "../x", engine.CodeEndpointNotFound},
		{"nobody", ep.ID, engine.CodeTenantNotFound},
	} {
		if _, err := svc.RevealSecret(ctx, tt.tenant, tt.id, "admin"); engine.ErrorCode(err) != tt.code {
			t.Errorf("RevealSecret(%s, %s) = %v, want %s", tt.tenant, tt.id, err, tt.code)
		}
	}
}

// newSecretsService returns a Service on a bbolt file with a secret key
// (so secrets are sealed, as they would be), on a settable clock, with
// tenant acme in environment env and loopback targets allowed.
func newSecretsService(t *testing.T, env engine.Environment) (*engine.Service, *settableClock) {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "webhookd.db"), storage.Options{SecretKey: make([]byte, storage.SecretKeySize)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	clock := &settableClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	svc := engine.NewService(db, nil, engine.ServiceOptions{Now: clock.Now, Targets: engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}})
	if _, _, err := svc.PutTenant(context.Background(), "acme", engine.TenantInput{Name: "Acme", Environment: env}); err != nil {
		t.Fatal(err)
	}
	return svc, clock
}
