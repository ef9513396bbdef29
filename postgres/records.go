package postgres

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/engine"
)

// nextSequenceSQL is a CTE that bumps tenant $2's sequence and returns
// it as last.
const nextSequenceSQL = `INSERT INTO tenant_sequences AS s (tenant_id, last) VALUES ($2, 1)
	ON CONFLICT (tenant_id) DO UPDATE SET last = s.last + 1 RETURNING last`

// validTenantID reports whether id can name a tenant: not empty, and
// without a NUL byte, which PostgreSQL's text refuses.
func validTenantID(id string) bool {
	return id != "" && !strings.ContainsRune(id, 0)
}

// PutTenant creates tenant t.ID (with t.Environment; "": live) or updates
// its Name and Updated. An update naming another environment fails with
// CodeInvalidField "environment"; a deleted tenant still being purged,
// with CodeTenantDeleting.
func (s *Store) PutTenant(ctx context.Context, t engine.Tenant) (engine.Tenant, bool, error) {
	if !validTenantID(t.ID) {
		return engine.Tenant{}, false, engine.InvalidTenantID()
	}
	var out engine.Tenant
	var created bool
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var doc []byte
		var deleted *int64
		err := tx.QueryRow(ctx, "SELECT doc, deleted_at FROM tenants WHERE id = $1 FOR UPDATE", t.ID).Scan(&doc, &deleted)
		next := t
		created = errors.Is(err, pgx.ErrNoRows)
		policyChanged := false
		switch {
		case created:
			if next.Environment == "" {
				next.Environment = engine.EnvironmentLive
			}
		case err != nil:
			return err
		case deleted != nil:
			return engine.TenantDeleting(t.ID)
		default:
			old, err := decodeTenant(doc)
			if err != nil {
				return err
			}
			if t.Environment != "" && t.Environment != old.Environment {
				return engine.EnvironmentNeverChanges(t.ID, old.Environment)
			}
			next = old
			next.Name, next.Updated = t.Name, t.Updated
			if t.RetryPolicy != "" {
				next.RetryPolicy = t.RetryPolicy
			}
			policyChanged = next.RetryPolicy != old.RetryPolicy
		}
		next.Created, next.Updated = utc(next.Created), utc(next.Updated)
		doc, err = encodeTenant(next)
		if err != nil {
			return err
		}
		// A change of the tenant's retry policy moves endpoints_version,
		// as a change of its endpoints does: ingests that kept what they
		// read (appendCached) must read the policy again.
		if _, err := tx.Exec(ctx, `INSERT INTO tenants (id, doc) VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET doc = excluded.doc,
			endpoints_version = CASE WHEN $3 THEN nextval('endpoints_versions') ELSE tenants.endpoints_version END`, t.ID, doc, policyChanged); err != nil {
			return err
		}
		out = next
		return nil
	})
	if err != nil {
		return engine.Tenant{}, false, err
	}
	return out, created, nil
}

// utc is t in UTC without a monotonic reading, as it comes back.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.Round(0).UTC()
}

// Tenant returns tenant id, or CodeTenantNotFound (also while a deleted
// one is purged).
func (s *Store) Tenant(ctx context.Context, id string) (engine.Tenant, error) {
	return tenant(ctx, s.pool, id, "")
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// tenant reads tenant id, with lock ("FOR SHARE", "FOR UPDATE" or "")
// in a transaction; CodeTenantNotFound when there is none or it is
// deleted.
func tenant(ctx context.Context, q querier, id, lock string) (engine.Tenant, error) {
	var doc []byte
	err := q.QueryRow(ctx, "SELECT doc FROM tenants WHERE id = $1 AND deleted_at IS NULL "+lock, id).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.Tenant{}, engine.TenantNotFound()
	}
	if err != nil {
		return engine.Tenant{}, storeError(err)
	}
	return decodeTenant(doc)
}

// Tenants lists every tenant by ID (deleted ones left out).
func (s *Store) Tenants(ctx context.Context) ([]engine.Tenant, error) {
	return collectDocs(ctx, s.pool, decodeTenant, "SELECT doc FROM tenants WHERE deleted_at IS NULL ORDER BY id")
}

// collectDocs decodes, with decode, the one doc column of every row of a
// query; an empty result is an empty slice.
func collectDocs[T any](ctx context.Context, q querier, decode func([]byte) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, storeError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) {
		var doc []byte
		if err := r.Scan(&doc); err != nil {
			var zero T
			return zero, err
		}
		return decode(doc)
	})
	if err != nil {
		return nil, storeError(err)
	}
	if out == nil {
		out = []T{}
	}
	return out, nil
}

// DeleteTenant deletes tenant id with its endpoints and access tokens in
// one transaction; its events, deliveries and idempotency keys are left
// to PurgeDeletedTenants, and until that is done PutTenant refuses the id
// (CodeTenantDeleting). CodeTenantNotFound when there is none.
func (s *Store) DeleteTenant(ctx context.Context, id string, at time.Time) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		// Alone: no ingest of the tenant is under way (see appendEvent).
		if _, err := tx.Exec(ctx, lockTenantSQL, id); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, "UPDATE tenants SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL", id, at.UnixNano())
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return engine.TenantNotFound()
		}
		if _, err := tx.Exec(ctx, "DELETE FROM endpoints WHERE tenant_id = $1", id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "DELETE FROM access_tokens WHERE tenant_id = $1", id)
		return err
	})
}

// PutEventType adds et.Name to the catalogue or replaces its Description,
// Status, Schema and Example (and Updated). The row's version moves
// (the schema's trigger), so every node's next ingest of the type reads
// it again (appendCached).
func (s *Store) PutEventType(ctx context.Context, et engine.EventType) (engine.EventType, bool, error) {
	if et.Name == "" {
		return engine.EventType{}, false, engine.EmptyEventTypeName()
	}
	var out engine.EventType
	var created bool
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var doc []byte
		err := tx.QueryRow(ctx, "SELECT doc FROM event_types WHERE name = $1 FOR UPDATE", et.Name).Scan(&doc)
		next := et
		created = errors.Is(err, pgx.ErrNoRows)
		if !created {
			if err != nil {
				return err
			}
			if next, err = decodeEventType(doc); err != nil {
				return err
			}
			next.Description, next.Example, next.Updated = et.Description, et.Example, et.Updated
			next.Status, next.Schema = et.Status, et.Schema
		}
		next.Created, next.Updated = utc(next.Created), utc(next.Updated)
		if doc, err = encodeEventType(next); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO event_types (name, doc) VALUES ($1, $2)
			ON CONFLICT (name) DO UPDATE SET doc = excluded.doc`, et.Name, doc); err != nil {
			return err
		}
		out = next
		return nil
	})
	if err != nil {
		return engine.EventType{}, false, err
	}
	return out, created, nil
}

// DeleteEventType takes name out of the catalogue (CodeNotFound).
func (s *Store) DeleteEventType(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, "DELETE FROM event_types WHERE name = $1", name)
	if err != nil {
		return storeError(err)
	}
	if tag.RowsAffected() == 0 {
		return engine.EventTypeNotFound(name)
	}
	return nil
}

// EventTypes lists the catalogue by name.
func (s *Store) EventTypes(ctx context.Context) ([]engine.EventType, error) {
	return collectDocs(ctx, s.pool, decodeEventType, "SELECT doc FROM event_types ORDER BY name")
}

// endpointDocs returns the stored documents of ep: the endpoint without
// its secrets, and its secrets (signing keys and custom headers), sealed
// when the store has a key.
func (s *Store) endpointDocs(ep engine.Endpoint) (doc, secrets []byte, err error) {
	ep = normalizeEndpoint(ep)
	if doc, err = encodeEndpoint(ep); err != nil {
		return nil, nil, err
	}
	secrets, err = s.secretsDoc(ep)
	return doc, secrets, err
}

// secretsDoc returns the secrets document of ep: its signing keys and
// custom headers, sealed when the store has a key.
func (s *Store) secretsDoc(ep engine.Endpoint) ([]byte, error) {
	sealed := s.sealer.SealSecrets(ep)
	return encodeEndpointSecrets(endpointSecrets{Keys: sealed.Secrets, Headers: sealed.Headers})
}

// normalizeEndpoint gives ep's times in UTC, as they are read back.
func normalizeEndpoint(ep engine.Endpoint) engine.Endpoint {
	ep.DisabledAt, ep.FailingSince, ep.LastFailureAt = utc(ep.DisabledAt), utc(ep.FailingSince), utc(ep.LastFailureAt)
	ep.Created, ep.Updated, ep.Verified = utc(ep.Created), utc(ep.Updated), utc(ep.Verified)
	if ep.Secrets != nil {
		secs := make([]engine.Secret, len(ep.Secrets))
		for i, sec := range ep.Secrets {
			secs[i] = engine.Secret{Key: sec.Key, Expires: utc(sec.Expires)}
		}
		ep.Secrets = secs
	}
	if ep.SecretReveals != nil {
		rvs := make([]engine.SecretReveal, len(ep.SecretReveals))
		for i, rv := range ep.SecretReveals {
			rvs[i] = engine.SecretReveal{At: utc(rv.At), By: rv.By}
		}
		ep.SecretReveals = rvs
	}
	return ep
}

// scanEndpoint reads an endpoint from a row of (doc, secrets), its
// secrets opened by s (nil: left as stored).
func scanEndpoint(r pgx.Row, s *Store) (engine.Endpoint, error) {
	var doc, secrets []byte
	if err := r.Scan(&doc, &secrets); err != nil {
		return engine.Endpoint{}, err
	}
	return s.endpointFrom(doc, secrets)
}

// endpointFrom decodes an endpoint's two documents, opening its secrets
// when s is not nil.
func (s *Store) endpointFrom(doc, secrets []byte) (engine.Endpoint, error) {
	ep, err := decodeEndpoint(doc)
	if err != nil {
		return ep, err
	}
	es, err := decodeEndpointSecrets(secrets)
	if err != nil {
		return ep, err
	}
	ep.Secrets, ep.Headers = es.Keys, es.Headers
	if len(ep.Secrets) == 0 {
		ep.Secrets = nil
	}
	if s != nil {
		err = s.sealer.OpenSecrets(&ep)
	}
	return ep, err
}

// CreateEndpoint stores the new endpoint ep; CodeTenantNotFound,
// CodeLimitReached when limit is not 0 and the tenant has limit endpoints
// already (the tenant's row is locked while it counts, so concurrent
// creates cannot pass the limit).
func (s *Store) CreateEndpoint(ctx context.Context, ep engine.Endpoint, limit int) error {
	if ep.ID == "" {
		return engine.EmptyEndpointID()
	}
	doc, secrets, err := s.endpointDocs(ep)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tenant(ctx, tx, ep.TenantID, "FOR UPDATE"); err != nil {
			return err
		}
		if limit > 0 {
			var n int
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM endpoints WHERE tenant_id = $1", ep.TenantID).Scan(&n); err != nil {
				return err
			}
			if n >= limit {
				return engine.EndpointLimitReached(limit)
			}
		}
		_, err := tx.Exec(ctx, "INSERT INTO endpoints (tenant_id, id, doc, secrets) VALUES ($1, $2, $3, $4)", ep.TenantID, ep.ID, doc, secrets)
		return err
	})
}

// Endpoint returns endpoint id of tenant, or CodeEndpointNotFound.
func (s *Store) Endpoint(ctx context.Context, tenant, id string) (engine.Endpoint, error) {
	ep, err := scanEndpoint(s.pool.QueryRow(ctx, "SELECT doc, secrets FROM endpoints WHERE tenant_id = $1 AND id = $2", tenant, id), s)
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.Endpoint{}, engine.EndpointNotFound()
	}
	if err != nil {
		return engine.Endpoint{}, storeError(err)
	}
	return ep, nil
}

// Endpoints lists tenant's endpoints in creation order (their IDs'
// order); CodeTenantNotFound.
func (s *Store) Endpoints(ctx context.Context, tenant string) ([]engine.Endpoint, error) {
	var out []engine.Endpoint
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = s.endpointsOf(ctx, tx, tenant, "")
		return err
	})
	return out, err
}

// endpointsOf reads tenant's endpoints in ID order, in tx (lock: "FOR
// SHARE" or ""), checking the tenant exists.
func (s *Store) endpointsOf(ctx context.Context, tx pgx.Tx, tenantID, lock string) ([]engine.Endpoint, error) {
	if _, err := tenant(ctx, tx, tenantID, lock); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, "SELECT doc, secrets FROM endpoints WHERE tenant_id = $1 ORDER BY id", tenantID)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (engine.Endpoint, error) { return scanEndpoint(r, s) })
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []engine.Endpoint{}
	}
	return out, nil
}

// UpdateEndpoint calls fn on endpoint id of tenant (CodeEndpointNotFound)
// read under a row lock and stores the result; an error from fn is
// returned as is and stores nothing. fn may not change the endpoint's
// ID, TenantID or Created.
func (s *Store) UpdateEndpoint(ctx context.Context, tenant, id string, fn func(*engine.Endpoint) error) (engine.Endpoint, error) {
	var out engine.Endpoint
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = s.updateEndpoint(ctx, tx, tenant, id, func(ep *engine.Endpoint) error {
			if err := fn(ep); err != nil {
				return &callerError{err}
			}
			return nil
		})
		return err
	})
	if err != nil {
		return engine.Endpoint{}, err
	}
	return out, nil
}

// updateEndpoint is UpdateEndpoint in tx.
func (s *Store) updateEndpoint(ctx context.Context, tx pgx.Tx, tenant, id string, fn func(*engine.Endpoint) error) (engine.Endpoint, error) {
	old, err := scanEndpoint(tx.QueryRow(ctx, "SELECT doc, secrets FROM endpoints WHERE tenant_id = $1 AND id = $2 FOR UPDATE", tenant, id), s)
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.Endpoint{}, engine.EndpointNotFound()
	}
	if err != nil {
		return engine.Endpoint{}, err
	}
	ep := normalizeEndpoint(old) // a copy: fn may keep its address
	if err := fn(&ep); err != nil {
		return engine.Endpoint{}, err
	}
	if ep.ID != old.ID || ep.TenantID != old.TenantID || !ep.Created.Equal(old.Created) {
		return engine.Endpoint{}, fmt.Errorf("postgres: update endpoint %s: the update changed the endpoint's id, tenant or creation time", id)
	}
	doc, secrets, err := s.endpointDocs(ep)
	if err != nil {
		return engine.Endpoint{}, err
	}
	if _, err := tx.Exec(ctx, "UPDATE endpoints SET doc = $3, secrets = $4 WHERE tenant_id = $1 AND id = $2", tenant, id, doc, secrets); err != nil {
		return engine.Endpoint{}, err
	}
	return s.endpointFrom(doc, secrets)
}

// DeleteEndpoint removes endpoint id of tenant (CodeEndpointNotFound). Its
// deliveries stay.
func (s *Store) DeleteEndpoint(ctx context.Context, tenant, id string) error {
	tag, err := s.pool.Exec(ctx, "DELETE FROM endpoints WHERE tenant_id = $1 AND id = $2", tenant, id)
	if err != nil {
		return storeError(err)
	}
	if tag.RowsAffected() == 0 {
		return engine.EndpointNotFound()
	}
	return nil
}

// CreateAccessToken stores t under hash; CodeTenantNotFound.
func (s *Store) CreateAccessToken(ctx context.Context, hash [sha256.Size]byte, t engine.AccessToken) error {
	t = normalizeToken(t)
	doc, err := encodeAccessToken(t)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tenant(ctx, tx, t.TenantID, "FOR SHARE"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO access_tokens (hash, tenant_id, id, expires, doc) VALUES ($1, $2, $3, $4, $5)",
			hash[:], t.TenantID, t.ID, t.Expires.UnixNano(), doc)
		return err
	})
}

// normalizeToken gives t's times in UTC and its environment, as read
// back.
func normalizeToken(t engine.AccessToken) engine.AccessToken {
	if t.Environment == "" {
		t.Environment = engine.EnvironmentLive
	}
	t.Created, t.Expires, t.Revoked = utc(t.Created), utc(t.Expires), utc(t.Revoked)
	return t
}

// AccessTokenByHash returns the token whose SHA-256 is hash, and whether
// there is one.
func (s *Store) AccessTokenByHash(ctx context.Context, hash [sha256.Size]byte) (engine.AccessToken, bool, error) {
	var doc []byte
	err := s.pool.QueryRow(ctx, "SELECT doc FROM access_tokens WHERE hash = $1", hash[:]).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.AccessToken{}, false, nil
	}
	if err != nil {
		return engine.AccessToken{}, false, storeError(err)
	}
	t, err := decodeAccessToken(doc)
	return t, err == nil, err
}

// AccessTokens lists tenant's tokens in the order they were issued (their
// IDs' order).
func (s *Store) AccessTokens(ctx context.Context, tenant string) ([]engine.AccessToken, error) {
	return collectDocs(ctx, s.pool, decodeAccessToken, "SELECT doc FROM access_tokens WHERE tenant_id = $1 ORDER BY id", tenant)
}

// RevokeAccessToken sets Revoked to at on token id of tenant, unless it is
// revoked already, and returns it and whether this call revoked it (the
// row is locked: of two concurrent calls, one does); CodeNotFound ("id").
func (s *Store) RevokeAccessToken(ctx context.Context, tenant, id string, at time.Time) (engine.AccessToken, bool, error) {
	var out engine.AccessToken
	var revoked bool
	err := s.tx(ctx, func(tx pgx.Tx) error {
		revoked = false
		var doc []byte
		err := tx.QueryRow(ctx, "SELECT doc FROM access_tokens WHERE tenant_id = $1 AND id = $2 FOR UPDATE", tenant, id).Scan(&doc)
		if errors.Is(err, pgx.ErrNoRows) {
			return engine.AccessTokenNotFound()
		}
		if err != nil {
			return err
		}
		if out, err = decodeAccessToken(doc); err != nil {
			return err
		}
		if !out.Revoked.IsZero() {
			return nil
		}
		out.Revoked = utc(at)
		if doc, err = encodeAccessToken(out); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE access_tokens SET doc = $3 WHERE tenant_id = $1 AND id = $2", tenant, id, doc)
		revoked = err == nil
		return err
	})
	if err != nil {
		return engine.AccessToken{}, false, err
	}
	return out, revoked, nil
}
