package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/sealing"
)

func newKey(tb testing.TB) []byte {
	tb.Helper()
	k := make([]byte, SecretKeySize)
	if _, err := rand.Read(k); err != nil {
		tb.Fatal(err)
	}
	return k
}

// openKeyed opens path with key and closes it at cleanup.
func openKeyed(tb testing.TB, path string, key []byte) *DB {
	tb.Helper()
	db, err := Open(path, Options{SecretKey: key})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// fileLeaks reports which of secrets appear in the file at path, as the
// string (a "whsec_…" secret also without its prefix, or as the raw key
// bytes after base64 decoding).
func fileLeaks(tb testing.TB, path string, secrets ...string) []string {
	tb.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var leaked []string
	for _, s := range secrets {
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if bytes.Contains(raw, []byte(s)) || bytes.Contains(raw, []byte(strings.TrimPrefix(s, "whsec_"))) || (len(key) > 0 && bytes.Contains(raw, key)) {
			leaked = append(leaked, s)
		}
	}
	return leaked
}

func TestOpen_secretKey(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "webhookd.db")
	key := newKey(t)

	db := openKeyed(t, path, key)
	mustTenant(t, db, "acme")
	ep := mustEndpoint(t, db, "acme", "*")
	secret := ep.Secrets[0].Key
	rotated, err := db.UpdateEndpoint(ctx, "acme", ep.ID, func(e *engine.Endpoint) error {
		e.Secrets = append([]engine.Secret{{Key: engine.NewSecret()}}, engine.Secret{Key: e.Secrets[0].Key, Expires: t0})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Secrets[1].Key != secret || !strings.HasPrefix(rotated.Secrets[0].Key, "whsec_") {
		t.Fatalf("UpdateEndpoint gave fn or returned sealed secrets: %+v", rotated.Secrets)
	}
	newSecret := rotated.Secrets[0].Key

	t.Run("reads return plain secrets", func(t *testing.T) {
		got, err := db.Endpoint(ctx, "acme", ep.ID)
		if err != nil || got.Secrets[0].Key != newSecret || got.Secrets[1].Key != secret {
			t.Errorf("Endpoint = %+v, %v", got.Secrets, err)
		}
		eps, err := db.Endpoints(ctx, "acme")
		if err != nil || eps[0].Secrets[0].Key != newSecret {
			t.Errorf("Endpoints = %+v, %v", eps, err)
		}
		mustEventType(t, db, "order.created")
		res := mustAppend(t, db, newEvent("acme", "order.created", `{}`))
		in, err := db.AttemptInput(ctx, res.Deliveries[0].ID)
		if err != nil || in.Endpoint.Secrets[0].Key != newSecret {
			t.Errorf("AttemptInput = %+v, %v", in.Endpoint.Secrets, err)
		}
	})
	t.Run("stored sealed", func(t *testing.T) {
		err := db.bolt.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketEndpoints).ForEach(func(_, v []byte) error {
				rec, err := decodeEndpoint(v)
				for _, s := range rec.Secrets {
					if !sealing.Sealed(s.Key) {
						t.Errorf("secret stored as %q", s.Key)
					}
				}
				return err
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		mustCheck(t, db)
	})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if leaked := fileLeaks(t, path, secret, newSecret); len(leaked) > 0 {
		t.Errorf("the database file holds %d secrets in plain", len(leaked))
	}

	t.Run("without the key", func(t *testing.T) {
		_, err := Open(path, Options{})
		if !errors.Is(err, ErrSecretKeyRequired) {
			t.Fatalf("Open = %v, want ErrSecretKeyRequired", err)
		}
		for _, want := range []string{"encrypted", "WEBHOOKD_SECRET_KEY", "secret_key_file"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	})
	t.Run("with another key", func(t *testing.T) {
		_, err := Open(path, Options{SecretKey: newKey(t)})
		if !errors.Is(err, ErrSecretKeyMismatch) || !strings.Contains(err.Error(), "rotate-key") {
			t.Fatalf("Open = %v, want ErrSecretKeyMismatch naming rotate-key", err)
		}
		if strings.Contains(err.Error(), base64.StdEncoding.EncodeToString(key)) {
			t.Error("the error shows the key")
		}
	})
	t.Run("with a key of the wrong size", func(t *testing.T) {
		if _, err := Open(path, Options{SecretKey: key[:31]}); err == nil {
			t.Fatal("a 31-byte key opened the file")
		}
	})
	t.Run("with the key again", func(t *testing.T) {
		db := openKeyed(t, path, key)
		got, err := db.Endpoint(ctx, "acme", ep.ID)
		if err != nil || got.Secrets[0].Key != newSecret {
			t.Errorf("Endpoint after reopen = %+v, %v", got.Secrets, err)
		}
		if db.SecretKeyID() == "" {
			t.Error("SecretKeyID is empty")
		}
	})
}

func TestOpen_secretKeySealsPlainFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "webhookd.db")
	db := mustOpenDBAt(t, path)
	mustTenant(t, db, "acme")
	ep := mustEndpoint(t, db, "acme", "*")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	db = openKeyed(t, path, key)
	got, err := db.Endpoint(ctx, "acme", ep.ID)
	if err != nil || got.Secrets[0].Key != ep.Secrets[0].Key {
		t.Fatalf("Endpoint = %+v, %v; want the secret it had in plain", got.Secrets, err)
	}
	db.Close()
	if _, err := Open(path, Options{}); !errors.Is(err, ErrSecretKeyRequired) {
		t.Fatalf("Open without the key after sealing = %v, want ErrSecretKeyRequired", err)
	}
}

func TestRotateSecretKey(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "webhookd.db")
	// Plain at first: the plain secret is in the file.
	db := mustOpenDBAt(t, path)
	mustTenant(t, db, "acme")
	var secrets []string
	var ids []string
	for range 3 {
		ep := mustEndpoint(t, db, "acme", "*")
		secrets, ids = append(secrets, ep.Secrets[0].Key), append(ids, ep.ID)
	}
	db.Close()
	if len(fileLeaks(t, path, secrets...)) == 0 {
		t.Fatal("test is broken: the plain file does not hold the secrets")
	}

	oldKey, newKey1 := newKey(t), newKey(t)
	res, err := RotateSecretKey(path, nil, oldKey, Options{})
	if err != nil || res.Endpoints != 3 || res.AlreadyRotated || res.Stale {
		t.Fatalf("RotateSecretKey from plain = %+v, %v; want 3 endpoints", res, err)
	}
	if leaked := fileLeaks(t, path, secrets...); len(leaked) > 0 {
		t.Errorf("after sealing and rewriting, %d plain secrets are still in the file (free pages)", len(leaked))
	}
	res, err = RotateSecretKey(path, oldKey, newKey1, Options{})
	if err != nil || res.Endpoints != 3 {
		t.Fatalf("RotateSecretKey = %+v, %v; want 3 endpoints", res, err)
	}
	if _, err := Open(path, Options{SecretKey: oldKey}); !errors.Is(err, ErrSecretKeyMismatch) {
		t.Errorf("Open with the old key = %v, want ErrSecretKeyMismatch", err)
	}
	if _, err := RotateSecretKey(path, newKey(t), newKey(t), Options{}); !errors.Is(err, ErrSecretKeyMismatch) {
		t.Errorf("RotateSecretKey with a wrong old key = %v, want ErrSecretKeyMismatch", err)
	}
	// To the key the file is under already: only the rewrite (what a
	// rerun after an interrupted rotation needs).
	if res, err := RotateSecretKey(path, newKey(t), newKey1, Options{}); err != nil || !res.AlreadyRotated || res.Endpoints != 0 {
		t.Errorf("RotateSecretKey to the file's own key = %+v, %v; want AlreadyRotated", res, err)
	}
	db = openKeyed(t, path, newKey1)
	for i, id := range ids {
		ep, err := db.Endpoint(ctx, "acme", id)
		if err != nil || ep.Secrets[0].Key != secrets[i] {
			t.Errorf("endpoint %d after rotation: %v; want its secret unchanged", i, err)
		}
	}
	mustCheck(t, db)
	db.Close()

	t.Run("in use", func(t *testing.T) {
		db := openKeyed(t, path, newKey1)
		_, err := RotateSecretKey(path, newKey1, oldKey, Options{LockTimeout: 50 * time.Millisecond})
		if !errors.Is(err, ErrInUse) {
			t.Errorf("RotateSecretKey on an open file = %v, want ErrInUse", err)
		}
		db.Close()
	})
	if _, err := os.Stat(path + ".rotate"); !os.IsNotExist(err) {
		t.Errorf("the rewrite left %s.rotate behind", path)
	}
}

// headerValues are the custom header values the tests below store: long
// and distinct, so that finding one in a file is no accident.
var headerValues = map[string]string{
	"Authorization": "Bearer hdr-secret-4f1c9e2a7b3d5c8e0a1f6b2d9c4e7a3b",
	"X-Tenant":      "tenant-secret-8b2e5d1f9a3c7e4b0d6f2a8c5e1b3d7f",
}

// mustEndpointWithHeaders creates an endpoint of tenant with the custom
// headers headerValues.
func mustEndpointWithHeaders(tb testing.TB, db *DB, tenant string) engine.Endpoint {
	tb.Helper()
	ep := newEndpoint(tenant, "*")
	h, err := engine.NewHeaders(headerValues)
	if err != nil {
		tb.Fatal(err)
	}
	ep.Headers = h
	if err := db.CreateEndpoint(context.Background(), ep, 0); err != nil {
		tb.Fatal(err)
	}
	return ep
}

// plainHeaders reports whether h are headerValues, opened.
func plainHeaders(h engine.CustomHeaders) bool {
	if len(h) != len(headerValues) {
		return false
	}
	for _, x := range h {
		if x.Sealed || x.Value != headerValues[x.Name] {
			return false
		}
	}
	return true
}

func headerSecrets() []string {
	var out []string
	for _, v := range headerValues {
		out = append(out, v)
	}
	return out
}

// TestOpen_secretKeyHeaders: with a secret key, custom header values are
// sealed at rest like the signing keys, and every read opens them.
func TestOpen_secretKeyHeaders(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "webhookd.db")
	db := openKeyed(t, path, newKey(t))
	mustTenant(t, db, "acme")
	ep := mustEndpointWithHeaders(t, db, "acme")

	got, err := db.Endpoint(ctx, "acme", ep.ID)
	if err != nil || !plainHeaders(got.Headers) {
		t.Errorf("Endpoint = %+v, %v; want the headers in plain", got.Headers, err)
	}
	eps, err := db.Endpoints(ctx, "acme")
	if err != nil || !plainHeaders(eps[0].Headers) {
		t.Errorf("Endpoints = %+v, %v", eps, err)
	}
	updated, err := db.UpdateEndpoint(ctx, "acme", ep.ID, func(e *engine.Endpoint) error {
		if !plainHeaders(e.Headers) {
			t.Errorf("UpdateEndpoint gave fn %+v", e.Headers)
		}
		e.Description = "changed"
		return nil
	})
	if err != nil || !plainHeaders(updated.Headers) {
		t.Errorf("UpdateEndpoint = %+v, %v", updated.Headers, err)
	}
	mustEventType(t, db, "order.created")
	res := mustAppend(t, db, newEvent("acme", "order.created", `{}`))
	for range 2 { // decoded, then from the attempts' cache
		in, err := db.AttemptInput(ctx, res.Deliveries[0].ID)
		if err != nil || !plainHeaders(in.Endpoint.Headers) {
			t.Errorf("AttemptInput = %+v, %v", in.Endpoint.Headers, err)
		}
		in.Endpoint.Headers[0].Value = "changed by the caller"
	}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEndpoints).ForEach(func(_, v []byte) error {
			rec, err := decodeEndpoint(v)
			for _, h := range rec.Headers {
				if !h.Sealed || !sealing.Sealed(h.Value) {
					t.Errorf("header %s stored as %+v", h.Name, h)
				}
			}
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	mustCheck(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if leaked := fileLeaks(t, path, headerSecrets()...); len(leaked) > 0 {
		t.Errorf("the database file holds %d header values in plain", len(leaked))
	}
}

// TestOpen_secretKeySealsPlainHeaders: a file written without a key
// holds the values in plain; opened with one, they are sealed.
func TestOpen_secretKeySealsPlainHeaders(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "webhookd.db")
	db := mustOpenDBAt(t, path)
	mustTenant(t, db, "acme")
	ep := mustEndpointWithHeaders(t, db, "acme")
	if got, err := db.Endpoint(ctx, "acme", ep.ID); err != nil || !plainHeaders(got.Headers) {
		t.Fatalf("Endpoint without a key = %+v, %v", got.Headers, err)
	}
	db.Close()
	if len(fileLeaks(t, path, headerSecrets()...)) == 0 {
		t.Fatal("test is broken: the plain file does not hold the values")
	}
	db = openKeyed(t, path, newKey(t))
	if got, err := db.Endpoint(ctx, "acme", ep.ID); err != nil || !plainHeaders(got.Headers) {
		t.Fatalf("Endpoint after sealing = %+v, %v", got.Headers, err)
	}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		rec, err := decodeEndpoint(tx.Bucket(bucketEndpoints).Get(endpointKey("acme", ep.ID)))
		for _, h := range rec.Headers {
			if !h.Sealed {
				t.Errorf("header %s left in plain when the key came", h.Name)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRotateSecretKey_headers: rotate-key re-seals the header values
// under the new key, and its rewrite leaves no copy of them in plain.
func TestRotateSecretKey_headers(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "webhookd.db")
	db := mustOpenDBAt(t, path)
	mustTenant(t, db, "acme")
	ep := mustEndpointWithHeaders(t, db, "acme")
	db.Close()
	oldKey, newKey1 := newKey(t), newKey(t)
	if _, err := RotateSecretKey(path, nil, oldKey, Options{}); err != nil {
		t.Fatal(err)
	}
	if leaked := fileLeaks(t, path, headerSecrets()...); len(leaked) > 0 {
		t.Errorf("after sealing and rewriting, %d header values are still in the file in plain", len(leaked))
	}
	if _, err := RotateSecretKey(path, oldKey, newKey1, Options{}); err != nil {
		t.Fatal(err)
	}
	db = openKeyed(t, path, newKey1)
	got, err := db.Endpoint(ctx, "acme", ep.ID)
	if err != nil || !plainHeaders(got.Headers) {
		t.Errorf("headers after the rotation = %+v, %v; want them unchanged", got.Headers, err)
	}
	mustCheck(t, db)
}

// TestDB_Check_headers: the integrity check holds an endpoint's stored
// custom headers to their rules (canonical, unreserved names in order,
// within the count) and to the file's key: sealed when the file has one,
// plain when it has none, so that a value left in plain under a key is
// found.
func TestDB_Check_headers(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		name := "plain file"
		if keyed {
			name = "keyed file"
		}
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "webhookd.db")
			var db *DB
			if keyed {
				db = openKeyed(t, path, newKey(t))
			} else {
				db = mustOpenDBAt(t, path)
			}
			mustTenant(t, db, "acme")
			ep := mustEndpointWithHeaders(t, db, "acme")
			mustCheck(t, db)
			var stored engine.Endpoint
			if err := db.bolt.View(func(tx *bolt.Tx) error {
				var err error
				stored, err = decodeEndpoint(tx.Bucket(bucketEndpoints).Get(endpointKey("acme", ep.ID)))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			put := func(h engine.CustomHeaders) {
				t.Helper()
				rec := stored
				rec.Headers = h
				v, err := encodeEndpoint(rec)
				if err != nil {
					t.Fatal(err)
				}
				if err := db.update(context.Background(), func(tx *bolt.Tx) error {
					return tx.Bucket(bucketEndpoints).Put(endpointKey("acme", ep.ID), v)
				}); err != nil {
					t.Fatal(err)
				}
			}
			x := stored.Headers[1]
			other := x
			other.Sealed = !x.Sealed
			for _, c := range []struct {
				what string
				h    engine.CustomHeaders
				says string
			}{
				{"a reserved name", engine.CustomHeaders{stored.Headers[0], {Name: "Webhook-Id", Value: x.Value, Sealed: x.Sealed}}, "Webhook-Id"},
				{"a name not canonical", engine.CustomHeaders{stored.Headers[0], {Name: "x-tenant", Value: x.Value, Sealed: x.Sealed}}, "canonical"},
				{"out of order", engine.CustomHeaders{x, stored.Headers[0]}, "order"},
				{"sealed in a plain file, or plain in a keyed one", engine.CustomHeaders{stored.Headers[0], other}, "X-Tenant"},
			} {
				put(c.h)
				if err := db.Check(); err == nil || !strings.Contains(err.Error(), ep.ID) || !strings.Contains(err.Error(), c.says) {
					t.Errorf("%s: Check = %v, want it to name the endpoint and %q", c.what, err, c.says)
				} else if strings.Contains(err.Error(), headerValues["X-Tenant"]) {
					t.Errorf("%s: Check shows a value: %v", c.what, err)
				}
			}
			put(stored.Headers)
			mustCheck(t, db)
		})
	}
}
