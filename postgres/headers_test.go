package postgres

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres/pgtest"
	"github.com/webhookd/webhookd/sealing"
)

// headerValues are the custom header values these tests store: long and
// distinct, so that finding one in a column is no accident.
var headerValues = map[string]string{
	"Authorization": "Bearer pg-hdr-secret-4f1c9e2a7b3d5c8e0a1f6b2d9c4e",
	"X-Tenant":      "pg-tenant-secret-8b2e5d1f9a3c7e4b0d6f2a8c5e",
}

// rawEndpoint returns the doc and secrets columns of endpoint id of
// tenant as stored.
func rawEndpointColumns(t *testing.T, s *Store, tenant, id string) (doc, secrets []byte) {
	t.Helper()
	if err := s.pool.QueryRow(context.Background(), "SELECT doc, secrets FROM endpoints WHERE tenant_id = $1 AND id = $2", tenant, id).Scan(&doc, &secrets); err != nil {
		t.Fatal(err)
	}
	return doc, secrets
}

// headerEndpoint creates tenant acme and an endpoint of it with the
// headers headerValues.
func headerEndpoint(t *testing.T, s *Store) engine.Endpoint {
	t.Helper()
	ctx := context.Background()
	if _, _, err := s.PutTenant(ctx, engine.Tenant{ID: "acme", Name: "Acme", Created: suiteEpoch, Updated: suiteEpoch}); err != nil {
		t.Fatal(err)
	}
	h, err := engine.NewHeaders(headerValues)
	if err != nil {
		t.Fatal(err)
	}
	ep := engine.Endpoint{ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/in", EventTypes: []string{"*"},
		Created: suiteEpoch, Updated: suiteEpoch, Secrets: []engine.Secret{{Key: engine.NewSecret()}}, Headers: h}
	if err := s.CreateEndpoint(ctx, ep, 0); err != nil {
		t.Fatal(err)
	}
	return ep
}

// wantPlainHeaders fails t unless ep's headers are headerValues, opened.
func wantPlainHeaders(t *testing.T, what string, h engine.CustomHeaders) {
	t.Helper()
	if len(h) != len(headerValues) {
		t.Fatalf("%s: %d headers, want %d", what, len(h), len(headerValues))
	}
	for _, x := range h {
		if x.Sealed || x.Value != headerValues[x.Name] {
			t.Errorf("%s: header %s = %+v, want its value in plain", what, x.Name, x)
		}
	}
}

// TestStore_headersAtRest: an endpoint's custom headers are in the
// secrets column, not in the document an application's role may read
// (docs/cluster.md), sealed there when the store has a key; a store
// given a key for the first time seals the values stored in plain.
func TestStore_headersAtRest(t *testing.T) {
	ctx := context.Background()
	key := bytes.Repeat([]byte{9}, sealing.KeySize)
	leaks := func(col []byte) []string {
		var out []string
		for name, v := range headerValues {
			if bytes.Contains(col, []byte(v)) {
				out = append(out, name)
			}
		}
		return out
	}

	t.Run("sealed with a key", func(t *testing.T) {
		s := openTest(t, Options{SecretKey: key})
		ep := headerEndpoint(t, s)
		doc, secrets := rawEndpointColumns(t, s, "acme", ep.ID)
		if bytes.Contains(doc, []byte("headers")) || len(leaks(doc)) > 0 {
			t.Errorf("the endpoint's document holds its headers: %s", doc)
		}
		if got := leaks(secrets); len(got) > 0 {
			t.Errorf("the secrets column holds %v in plain", got)
		}
		es, err := decodeEndpointSecrets(secrets)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range es.Headers {
			if !h.Sealed || !sealing.Sealed(h.Value) {
				t.Errorf("header %s stored as %+v", h.Name, h)
			}
		}
		got, err := s.Endpoint(ctx, "acme", ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantPlainHeaders(t, "Endpoint", got.Headers)
	})

	t.Run("plain, then sealed when a key comes", func(t *testing.T) {
		url := pgtest.URL(t)
		schema := pgtest.Schema(t)
		open := func(key []byte) *Store {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := Open(ctx, url, Options{Schema: schema, SecretKey: key, MaxConns: 2})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		s := open(nil)
		ep := headerEndpoint(t, s)
		if _, secrets := rawEndpointColumns(t, s, "acme", ep.ID); len(leaks(secrets)) != len(headerValues) {
			t.Fatal("test is broken: the plain store does not hold the values in plain")
		}
		s.Close()
		s = open(key)
		defer s.Close()
		_, secrets := rawEndpointColumns(t, s, "acme", ep.ID)
		if got := leaks(secrets); len(got) > 0 {
			t.Errorf("after the key came, the secrets column holds %v in plain", got)
		}
		got, err := s.Endpoint(ctx, "acme", ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantPlainHeaders(t, "Endpoint after sealing", got.Headers)
	})
}
