package storage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// Tenant access tokens (engine/tokens.go). Two buckets, kept in step by
// every write:
//
//	access_tokens         sha256(token)(32)          access token record (v1 ‖ JSON)
//	tenant_access_tokens  tenant ‖ 0x00 ‖ token ID   sha256(token)(32)
//
// The token itself is never stored: a request is authenticated by one Get
// of its hash, and a copied file holds no token that works.

// accessTokenRecord is the on-disk form of an engine.AccessToken.
type accessTokenRecord struct {
	ID          string    `json:"id"`
	TenantID    string    `json:"tenant"`
	Environment string    `json:"environment"`
	Created     time.Time `json:"created"`
	Expires     time.Time `json:"expires"`
	Revoked     time.Time `json:"revoked,omitzero"`
	Purpose     string    `json:"purpose,omitempty"`
	ReturnURL   string    `json:"return_url,omitempty"`
}

func encodeAccessToken(t engine.AccessToken) ([]byte, error) {
	return encodeJSON(accessTokenRecord{
		ID: t.ID, TenantID: t.TenantID, Environment: string(t.Environment),
		Created: utc(t.Created), Expires: utc(t.Expires), Revoked: utc(t.Revoked),
		Purpose: t.Purpose, ReturnURL: t.ReturnURL,
	})
}

func decodeAccessToken(data []byte) (engine.AccessToken, error) {
	var r accessTokenRecord
	if err := decodeJSON("access token", data, &r); err != nil {
		return engine.AccessToken{}, err
	}
	if r.ID == "" || r.TenantID == "" {
		return engine.AccessToken{}, errors.New("decode access token: no id or tenant")
	}
	env := engine.Environment(r.Environment)
	if env == "" {
		env = engine.EnvironmentLive
	}
	return engine.AccessToken{
		ID: r.ID, TenantID: r.TenantID, Environment: env,
		Created: r.Created, Expires: r.Expires, Revoked: r.Revoked,
		Purpose: r.Purpose, ReturnURL: r.ReturnURL,
	}, nil
}

// tenantAccessTokenKey is tenant ‖ 0x00 ‖ token ID. Token IDs are time
// ordered, so a tenant's tokens sort in the order they were issued.
func tenantAccessTokenKey(tenant, id string) []byte {
	return append(tenantPrefix(tenant), id...)
}

// CreateAccessToken stores t under hash (the token's SHA-256) and indexes
// it under its tenant, in one transaction. CodeTenantNotFound when the
// tenant does not exist.
func (db *DB) CreateAccessToken(ctx context.Context, hash [sha256.Size]byte, t engine.AccessToken) error {
	v, err := encodeAccessToken(t)
	if err != nil {
		return fmt.Errorf("storage: create access token %s: %w", t.ID, err)
	}
	err = db.update(ctx, func(tx *bolt.Tx) error {
		if !validTenantID(t.TenantID) || tx.Bucket(bucketTenants).Get([]byte(t.TenantID)) == nil {
			return engine.TenantNotFound()
		}
		b := tx.Bucket(bucketAccessTokens)
		if b.Get(hash[:]) != nil {
			return errors.New("access token hash exists") // 256 random bits: never
		}
		if err := b.Put(hash[:], v); err != nil {
			return err
		}
		return tx.Bucket(bucketTenantAccessTokens).Put(tenantAccessTokenKey(t.TenantID, t.ID), hash[:])
	})
	if err != nil {
		return wrap("create access token "+t.ID, err)
	}
	return nil
}

// AccessTokenByHash returns the token whose SHA-256 is hash, and whether
// there is one. It is one Get in one read transaction: it runs on every
// request that bears a tenant token.
func (db *DB) AccessTokenByHash(ctx context.Context, hash [sha256.Size]byte) (engine.AccessToken, bool, error) {
	var out engine.AccessToken
	var found bool
	err := db.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketAccessTokens).Get(hash[:])
		if v == nil {
			return nil
		}
		var err error
		out, err = decodeAccessToken(v)
		found = err == nil
		return err
	})
	if err != nil {
		return engine.AccessToken{}, false, wrap("access token", err)
	}
	return out, found, nil
}

// AccessTokens lists tenant's tokens in the order they were issued.
func (db *DB) AccessTokens(ctx context.Context, tenant string) ([]engine.AccessToken, error) {
	out := []engine.AccessToken{}
	if !validTenantID(tenant) {
		return out, nil
	}
	err := db.view(ctx, func(tx *bolt.Tx) error {
		tokens := tx.Bucket(bucketAccessTokens)
		prefix := tenantPrefix(tenant)
		c := tx.Bucket(bucketTenantAccessTokens).Cursor()
		for k, hash := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, hash = c.Next() {
			v := tokens.Get(hash)
			if v == nil {
				return fmt.Errorf("tenant_access_tokens %q names a token not in access_tokens", k)
			}
			t, err := decodeAccessToken(v)
			if err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("access tokens of "+tenant, err)
	}
	return out, nil
}

// RevokeAccessToken sets Revoked to at on token id of tenant, unless it is
// revoked already, and returns the token and whether this call revoked
// it. CodeNotFound ("id") when tenant has no such token (a token of
// another tenant included).
func (db *DB) RevokeAccessToken(ctx context.Context, tenant, id string, at time.Time) (engine.AccessToken, bool, error) {
	var out engine.AccessToken
	var revoked bool
	err := db.update(ctx, func(tx *bolt.Tx) error {
		if !validTenantID(tenant) {
			return engine.AccessTokenNotFound()
		}
		hash := tx.Bucket(bucketTenantAccessTokens).Get(tenantAccessTokenKey(tenant, id))
		if hash == nil {
			return engine.AccessTokenNotFound()
		}
		b := tx.Bucket(bucketAccessTokens)
		t, err := decodeAccessToken(b.Get(hash))
		if err != nil {
			return err
		}
		revoked = false // a retried transaction starts over
		if t.Revoked.IsZero() {
			t.Revoked, revoked = at, true
			v, err := encodeAccessToken(t)
			if err != nil {
				return err
			}
			if err := b.Put(bytes.Clone(hash), v); err != nil {
				return err
			}
		}
		out = t
		return nil
	})
	if err != nil {
		return engine.AccessToken{}, false, wrap("revoke access token "+id, err)
	}
	return out, revoked, nil
}

// PruneAccessTokens deletes, in one transaction, at most max tokens that
// expired before before (revoked or not) and returns how many it deleted.
// Call again until fewer than max come back. A pruned token answers as an
// unknown one: 401, as it did once expired.
func (db *DB) PruneAccessTokens(ctx context.Context, before time.Time, max int) (int, error) {
	var n int
	err := db.update(ctx, func(tx *bolt.Tx) error {
		n = 0
		b := tx.Bucket(bucketAccessTokens)
		type doomed struct{ hash, index []byte }
		var gone []doomed
		c := b.Cursor()
		for k, v := c.First(); k != nil && len(gone) < max; k, v = c.Next() {
			t, err := decodeAccessToken(v)
			if err != nil {
				return fmt.Errorf("access token %x: %w", k, err)
			}
			if t.Expires.Before(before) {
				gone = append(gone, doomed{bytes.Clone(k), tenantAccessTokenKey(t.TenantID, t.ID)})
			}
		}
		idx := tx.Bucket(bucketTenantAccessTokens)
		for _, d := range gone {
			if err := b.Delete(d.hash); err != nil {
				return err
			}
			if err := idx.Delete(d.index); err != nil {
				return err
			}
		}
		n = len(gone)
		return nil
	})
	if err != nil {
		return 0, wrap("prune access tokens", err)
	}
	return n, nil
}

// Tenants lists every tenant in ID order.
func (db *DB) Tenants(ctx context.Context) ([]engine.Tenant, error) {
	out := []engine.Tenant{}
	err := db.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTenants).ForEach(func(k, v []byte) error {
			t, err := decodeTenant(v)
			if err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
			out = append(out, t)
			return nil
		})
	})
	if err != nil {
		return nil, wrap("tenants", err)
	}
	return out, nil
}

// checkAccessTokens reports where access_tokens and tenant_access_tokens
// disagree: every token decodes and is indexed under its tenant and ID
// with its hash, and every index entry names a token.
func checkAccessTokens(tx *bolt.Tx, report func(format string, args ...any) bool) {
	tokens := tx.Bucket(bucketAccessTokens)
	idx := tx.Bucket(bucketTenantAccessTokens)
	n := 0
	c := tokens.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		n++
		t, err := decodeAccessToken(v)
		if err != nil {
			if !report("access token %x: %v", k, err) {
				return
			}
			continue
		}
		if h := idx.Get(tenantAccessTokenKey(t.TenantID, t.ID)); !bytes.Equal(h, k) {
			if !report("access token %s: tenant_access_tokens has %x, want %x", t.ID, h, k) {
				return
			}
		}
	}
	if m := idx.Stats().KeyN; m != n {
		report("%d access tokens but %d tenant_access_tokens entries", n, m)
	}
}
