package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// validTenantID reports whether id can be part of a key: not empty and
// without the separator byte.
func validTenantID(id string) bool {
	return id != "" && !strings.ContainsRune(id, sep)
}

// PutTenant creates tenant t.ID or updates its Name (and Updated), and its
// RetryPolicy when t names one. It
// returns the stored tenant and whether it was created. A tenant is created
// with t.Environment ("": live); an update never changes the environment,
// and one whose t.Environment is set and differs fails with
// CodeInvalidField "environment" and changes nothing.
func (db *DB) PutTenant(ctx context.Context, t engine.Tenant) (engine.Tenant, bool, error) {
	if !validTenantID(t.ID) {
		return engine.Tenant{}, false, engine.InvalidTenantID()
	}
	var out engine.Tenant
	var created bool
	err := db.update(ctx, func(tx *bolt.Tx) error {
		if tx.Bucket(bucketDeletedTenants).Get([]byte(t.ID)) != nil {
			return engine.TenantDeleting(t.ID)
		}
		b := tx.Bucket(bucketTenants)
		next := t
		created = true
		if v := b.Get([]byte(t.ID)); v != nil {
			old, err := decodeTenant(v)
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
			created = false
		}
		v, err := encodeTenant(next)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(t.ID), v); err != nil {
			return err
		}
		out, err = decodeTenant(v)
		return err
	})
	if err != nil {
		return engine.Tenant{}, false, wrap("put tenant "+t.ID, err)
	}
	return out, created, nil
}

// Tenant returns tenant id, or CodeTenantNotFound.
func (db *DB) Tenant(ctx context.Context, id string) (engine.Tenant, error) {
	var out engine.Tenant
	err := db.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketTenants).Get([]byte(id))
		if v == nil {
			return engine.TenantNotFound()
		}
		var err error
		out, err = decodeTenant(v)
		return err
	})
	if err != nil {
		return engine.Tenant{}, wrap("tenant "+id, err)
	}
	return out, nil
}

// DeleteEventType takes name out of the catalogue (CodeNotFound). The
// endpoints that subscribe to it keep the name: if it is added again, they
// receive it again.
func (db *DB) DeleteEventType(ctx context.Context, name string) error {
	err := db.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEventTypes)
		if b.Get([]byte(name)) == nil {
			return engine.EventTypeNotFound(name)
		}
		return b.Delete([]byte(name))
	})
	if err != nil {
		return wrap("delete event type "+name, err)
	}
	return nil
}

// PutEventType adds et.Name to the catalogue or replaces its Description,
// Status, Schema and Example (and Updated). It returns the stored entry and whether it was created.
func (db *DB) PutEventType(ctx context.Context, et engine.EventType) (engine.EventType, bool, error) {
	if et.Name == "" {
		return engine.EventType{}, false, engine.EmptyEventTypeName()
	}
	var out engine.EventType
	var created bool
	err := db.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEventTypes)
		next := et
		created = true
		if v := b.Get([]byte(et.Name)); v != nil {
			old, err := decodeEventType(v)
			if err != nil {
				return err
			}
			next = old
			next.Description, next.Example, next.Updated = et.Description, et.Example, et.Updated
			next.Status, next.Schema = et.Status, et.Schema
			created = false
		}
		v, err := encodeEventType(next)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(et.Name), v); err != nil {
			return err
		}
		out, err = decodeEventType(v)
		return err
	})
	if err != nil {
		return engine.EventType{}, false, wrap("put event type "+et.Name, err)
	}
	return out, created, nil
}

// EventTypes lists the catalogue in name order.
func (db *DB) EventTypes(ctx context.Context) ([]engine.EventType, error) {
	out := []engine.EventType{}
	err := db.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEventTypes).ForEach(func(k, v []byte) error {
			et, err := decodeEventType(v)
			if err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
			out = append(out, et)
			return nil
		})
	})
	if err != nil {
		return nil, wrap("event types", err)
	}
	return out, nil
}

// CreateEndpoint stores the new endpoint ep (with its secrets). The tenant
// must exist (CodeTenantNotFound) and, when limit is not 0, have fewer
// than limit endpoints (CodeLimitReached).
func (db *DB) CreateEndpoint(ctx context.Context, ep engine.Endpoint, limit int) error {
	if ep.ID == "" {
		return engine.EmptyEndpointID()
	}
	v, err := encodeEndpoint(db.sealSecrets(ep))
	if err != nil {
		return fmt.Errorf("storage: create endpoint %s: %w", ep.ID, err)
	}
	err = db.update(ctx, func(tx *bolt.Tx) error {
		if !validTenantID(ep.TenantID) || tx.Bucket(bucketTenants).Get([]byte(ep.TenantID)) == nil {
			return engine.TenantNotFound()
		}
		b := tx.Bucket(bucketEndpoints)
		if limit > 0 && countPrefix(b, tenantPrefix(ep.TenantID), limit) >= limit {
			return engine.EndpointLimitReached(limit)
		}
		k := endpointKey(ep.TenantID, ep.ID)
		if b.Get(k) != nil {
			return errors.New("endpoint id exists")
		}
		return b.Put(k, v)
	})
	if err != nil {
		return wrap("create endpoint "+ep.ID, err)
	}
	return nil
}

// getEndpoint reads endpoint id of tenant; found is false when there is
// none. Its secrets are as stored, maybe sealed: see DB.openSecrets.
func getEndpoint(tx *bolt.Tx, tenant, id string) (ep engine.Endpoint, found bool, err error) {
	if !validTenantID(tenant) {
		return engine.Endpoint{}, false, nil
	}
	v := tx.Bucket(bucketEndpoints).Get(endpointKey(tenant, id))
	if v == nil {
		return engine.Endpoint{}, false, nil
	}
	ep, err = decodeEndpoint(v)
	return ep, err == nil, err
}

// Endpoint returns endpoint id of tenant, or CodeEndpointNotFound (also
// when the endpoint belongs to another tenant).
func (db *DB) Endpoint(ctx context.Context, tenant, id string) (engine.Endpoint, error) {
	var out engine.Endpoint
	err := db.view(ctx, func(tx *bolt.Tx) error {
		ep, found, err := getEndpoint(tx, tenant, id)
		if err != nil {
			return err
		}
		if !found {
			return engine.EndpointNotFound()
		}
		out = ep
		return nil
	})
	if err == nil {
		err = db.openSecrets(&out)
	}
	if err != nil {
		return engine.Endpoint{}, wrap("endpoint "+id, err)
	}
	return out, nil
}

// forEachEndpoint calls fn for each endpoint of tenant in creation order,
// with its secrets as stored, maybe sealed. With cache set, an endpoint
// whose stored bytes are cached is not decoded again (see endpointCache),
// and one that is decoded is cached: ingest's fan-out reads every
// endpoint of the tenant in the commit loop, where a JSON decode of each
// was half of an ingest's time in a profile of the fanout bench (10
// endpoints), time every other write of the loop waited for. A cached
// endpoint's EventTypes, Secrets, SecretReveals and Headers are the
// cache's: with cache set, fn must not change them.
func forEachEndpoint(tx *bolt.Tx, tenant string, cache *endpointCache, fn func(engine.Endpoint) error) error {
	prefix := tenantPrefix(tenant)
	c := tx.Bucket(bucketEndpoints).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if cache != nil {
			if ep, ok := cache.peek(k, v); ok {
				if err := fn(ep); err != nil {
					return err
				}
				continue
			}
		}
		ep, err := decodeEndpoint(v)
		if err != nil {
			return fmt.Errorf("endpoint %q: %w", k[len(prefix):], err)
		}
		if cache != nil {
			cache.put(k, bytes.Clone(v), ep)
		}
		if err := fn(ep); err != nil {
			return err
		}
	}
	return nil
}

// Endpoints lists tenant's endpoints in creation order (the order of their
// time-ordered IDs). The tenant must exist (CodeTenantNotFound).
func (db *DB) Endpoints(ctx context.Context, tenant string) ([]engine.Endpoint, error) {
	out := []engine.Endpoint{}
	err := db.view(ctx, func(tx *bolt.Tx) error {
		if !validTenantID(tenant) || tx.Bucket(bucketTenants).Get([]byte(tenant)) == nil {
			return engine.TenantNotFound()
		}
		return forEachEndpoint(tx, tenant, nil, func(ep engine.Endpoint) error {
			out = append(out, ep)
			return nil
		})
	})
	for i := 0; err == nil && i < len(out); i++ {
		err = db.openSecrets(&out[i])
	}
	if err != nil {
		return nil, wrap("endpoints of "+tenant, err)
	}
	return out, nil
}

// callerError carries an error of a caller's function through the commit
// loop, so that it can be returned as is.
type callerError struct{ err error }

func (e *callerError) Error() string { return e.err.Error() }

// UpdateEndpoint loads endpoint id of tenant (CodeEndpointNotFound), calls
// fn on it and stores the result, in one transaction. An error from fn
// aborts the update and is returned as is.
//
// IMPORTANT: fn runs inside the write transaction, possibly more than once
// (see the package documentation on group commit), each time on a fresh
// copy of the stored endpoint. It must only change the endpoint it is
// given: it must not block or call the DB. It must not change the
// endpoint's ID, TenantID or Created.
func (db *DB) UpdateEndpoint(ctx context.Context, tenant, id string, fn func(*engine.Endpoint) error) (engine.Endpoint, error) {
	var out engine.Endpoint
	err := db.update(ctx, func(tx *bolt.Tx) error {
		var err error
		out, err = db.updateEndpoint(tx, tenant, id, fn)
		return err
	})
	if ce := (*callerError)(nil); errors.As(err, &ce) {
		return engine.Endpoint{}, ce.err
	}
	if err != nil {
		return engine.Endpoint{}, wrap("update endpoint "+id, err)
	}
	return out, nil
}

// updateEndpoint is UpdateEndpoint inside tx; an error of fn comes back
// as a *callerError.
func (db *DB) updateEndpoint(tx *bolt.Tx, tenant, id string, fn func(*engine.Endpoint) error) (engine.Endpoint, error) {
	ep, found, err := getEndpoint(tx, tenant, id)
	if err != nil {
		return engine.Endpoint{}, err
	}
	if !found {
		return engine.Endpoint{}, engine.EndpointNotFound()
	}
	created := ep.Created
	if err := db.openSecrets(&ep); err != nil {
		return engine.Endpoint{}, err
	}
	if err := fn(&ep); err != nil {
		return engine.Endpoint{}, &callerError{err}
	}
	if ep.ID != id || ep.TenantID != tenant || !ep.Created.Equal(created) {
		return engine.Endpoint{}, errors.New("the update changed the endpoint's id, tenant or creation time")
	}
	v, err := encodeEndpoint(db.sealSecrets(ep))
	if err != nil {
		return engine.Endpoint{}, err
	}
	if err := tx.Bucket(bucketEndpoints).Put(endpointKey(tenant, id), v); err != nil {
		return engine.Endpoint{}, err
	}
	out, err := decodeEndpoint(v)
	if err != nil {
		return engine.Endpoint{}, err
	}
	return out, db.openSecrets(&out)
}

// DeleteEndpoint removes endpoint id of tenant (CodeEndpointNotFound). Its
// deliveries and their retry index entries stay: the dispatcher
// dead-letters pending ones when it finds the endpoint gone.
func (db *DB) DeleteEndpoint(ctx context.Context, tenant, id string) error {
	err := db.update(ctx, func(tx *bolt.Tx) error {
		if !validTenantID(tenant) {
			return engine.EndpointNotFound()
		}
		b := tx.Bucket(bucketEndpoints)
		k := endpointKey(tenant, id)
		if b.Get(k) == nil {
			return engine.EndpointNotFound()
		}
		return b.Delete(k)
	})
	if err != nil {
		return wrap("delete endpoint "+id, err)
	}
	return nil
}

// countPrefix counts the keys of b that start with prefix, stopping at
// max.
func countPrefix(b *bolt.Bucket, prefix []byte, max int) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && n < max; k, _ = c.Next() {
		n++
	}
	return n
}
