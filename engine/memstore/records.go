package memstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// PutTenant creates tenant t.ID (with t.Environment; "": live) or updates
// its Name and Updated, and its RetryPolicy when t names one. An update
// that names another environment fails with CodeInvalidField
// "environment" and changes nothing.
func (s *Store) PutTenant(ctx context.Context, t engine.Tenant) (engine.Tenant, bool, error) {
	if !validTenantID(t.ID) {
		return engine.Tenant{}, false, engine.InvalidTenantID()
	}
	if err := s.lock(ctx); err != nil {
		return engine.Tenant{}, false, err
	}
	defer s.mu.Unlock()
	old, ok := s.tenants[t.ID]
	if !ok {
		if t.Environment == "" {
			t.Environment = engine.EnvironmentLive
		}
		t = copyTenant(t)
		s.tenants[t.ID] = t
		return t, true, nil
	}
	if t.Environment != "" && t.Environment != old.Environment {
		return engine.Tenant{}, false, engine.EnvironmentNeverChanges(t.ID, old.Environment)
	}
	old.Name, old.Updated = t.Name, utc(t.Updated)
	if t.RetryPolicy != "" {
		old.RetryPolicy = t.RetryPolicy
	}
	s.tenants[t.ID] = old
	return old, false, nil
}

// Tenant returns tenant id, or CodeTenantNotFound.
func (s *Store) Tenant(ctx context.Context, id string) (engine.Tenant, error) {
	if err := s.lock(ctx); err != nil {
		return engine.Tenant{}, err
	}
	defer s.mu.Unlock()
	t, ok := s.tenants[id]
	if !ok {
		return engine.Tenant{}, engine.TenantNotFound()
	}
	return t, nil
}

// Tenants lists every tenant by ID.
func (s *Store) Tenants(ctx context.Context) ([]engine.Tenant, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return sortedValues(s.tenants, func(a, b engine.Tenant) int { return strings.Compare(a.ID, b.ID) }, copyTenant), nil
}

// DeleteTenant deletes tenant id with everything of its: endpoints,
// access tokens, events, deliveries and idempotency keys, at once.
// CodeTenantNotFound when there is none.
func (s *Store) DeleteTenant(ctx context.Context, id string, _ time.Time) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.tenants[id]; !ok {
		return engine.TenantNotFound()
	}
	delete(s.tenants, id)
	delete(s.endpoints, id)
	for hash, t := range s.tokens {
		if t.TenantID == id {
			delete(s.tokens, hash)
		}
	}
	for _, e := range s.log[id] {
		for _, d := range e.deliveries {
			delete(s.deliveries, d)
		}
		delete(s.events, e.ev.ID)
	}
	delete(s.log, id)
	for k := range s.idempotency {
		if k.tenant == id {
			delete(s.idempotency, k)
		}
	}
	s.deleteTasks(id)
	return nil
}

// PutEventType adds et.Name to the catalogue or replaces its Description,
// Status, Schema and Example (and Updated).
func (s *Store) PutEventType(ctx context.Context, et engine.EventType) (engine.EventType, bool, error) {
	if et.Name == "" {
		return engine.EventType{}, false, engine.EmptyEventTypeName()
	}
	if err := s.lock(ctx); err != nil {
		return engine.EventType{}, false, err
	}
	defer s.mu.Unlock()
	old, ok := s.eventTypes[et.Name]
	if !ok {
		et = copyEventType(et)
		s.eventTypes[et.Name] = et
		return et, true, nil
	}
	old.Description, old.Example, old.Updated = et.Description, slices.Clone(et.Example), utc(et.Updated)
	old.Status, old.Schema = et.Status, slices.Clone(et.Schema)
	s.eventTypes[et.Name] = old
	return old, false, nil
}

// DeleteEventType takes name out of the catalogue (CodeNotFound).
func (s *Store) DeleteEventType(ctx context.Context, name string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.eventTypes[name]; !ok {
		return engine.EventTypeNotFound(name)
	}
	delete(s.eventTypes, name)
	return nil
}

// EventTypes lists the catalogue by name.
func (s *Store) EventTypes(ctx context.Context) ([]engine.EventType, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return sortedValues(s.eventTypes, func(a, b engine.EventType) int { return strings.Compare(a.Name, b.Name) }, copyEventType), nil
}

// CreateEndpoint stores the new endpoint ep; CodeTenantNotFound,
// CodeLimitReached when limit is not 0 and the tenant has limit
// endpoints already.
func (s *Store) CreateEndpoint(ctx context.Context, ep engine.Endpoint, limit int) error {
	if ep.ID == "" {
		return engine.EmptyEndpointID()
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.tenants[ep.TenantID]; !ok {
		return engine.TenantNotFound()
	}
	eps := s.endpoints[ep.TenantID]
	if limit > 0 && len(eps) >= limit {
		return engine.EndpointLimitReached(limit)
	}
	if _, ok := eps[ep.ID]; ok {
		return fmt.Errorf("memstore: create endpoint %s: endpoint id exists", ep.ID)
	}
	if eps == nil {
		eps = map[string]engine.Endpoint{}
		s.endpoints[ep.TenantID] = eps
	}
	eps[ep.ID] = copyEndpoint(ep)
	return nil
}

// Endpoint returns endpoint id of tenant, or CodeEndpointNotFound.
func (s *Store) Endpoint(ctx context.Context, tenant, id string) (engine.Endpoint, error) {
	if err := s.lock(ctx); err != nil {
		return engine.Endpoint{}, err
	}
	defer s.mu.Unlock()
	ep, ok := s.endpoints[tenant][id]
	if !ok {
		return engine.Endpoint{}, engine.EndpointNotFound()
	}
	return copyEndpoint(ep), nil
}

// Endpoints lists tenant's endpoints in creation order, which is the
// order of their IDs (engine.NewID); CodeTenantNotFound.
func (s *Store) Endpoints(ctx context.Context, tenant string) ([]engine.Endpoint, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if _, ok := s.tenants[tenant]; !ok {
		return nil, engine.TenantNotFound()
	}
	return s.endpointsOf(tenant), nil
}

// endpointsOf returns copies of tenant's endpoints in ID order.
func (s *Store) endpointsOf(tenant string) []engine.Endpoint {
	return sortedValues(s.endpoints[tenant], func(a, b engine.Endpoint) int { return strings.Compare(a.ID, b.ID) }, copyEndpoint)
}

// UpdateEndpoint calls fn on a copy of endpoint id of tenant
// (CodeEndpointNotFound) and stores the result; an error from fn is
// returned as is and stores nothing. fn may not change the endpoint's ID,
// TenantID or Created.
func (s *Store) UpdateEndpoint(ctx context.Context, tenant, id string, fn func(*engine.Endpoint) error) (engine.Endpoint, error) {
	if err := s.lock(ctx); err != nil {
		return engine.Endpoint{}, err
	}
	defer s.mu.Unlock()
	old, ok := s.endpoints[tenant][id]
	if !ok {
		return engine.Endpoint{}, engine.EndpointNotFound()
	}
	ep := copyEndpoint(old)
	if err := fn(&ep); err != nil {
		return engine.Endpoint{}, err
	}
	if ep.ID != old.ID || ep.TenantID != old.TenantID || !ep.Created.Equal(old.Created) {
		return engine.Endpoint{}, errors.New("memstore: update endpoint " + id + ": the update changed the endpoint's id, tenant or creation time")
	}
	stored := copyEndpoint(ep) // not ep: fn may have kept its address
	s.endpoints[tenant][id] = stored
	return copyEndpoint(stored), nil
}

// DeleteEndpoint removes endpoint id of tenant (CodeEndpointNotFound). Its
// deliveries stay.
func (s *Store) DeleteEndpoint(ctx context.Context, tenant, id string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.endpoints[tenant][id]; !ok {
		return engine.EndpointNotFound()
	}
	delete(s.endpoints[tenant], id)
	return nil
}

// CreateAccessToken stores t under hash; CodeTenantNotFound.
func (s *Store) CreateAccessToken(ctx context.Context, hash [sha256.Size]byte, t engine.AccessToken) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.tenants[t.TenantID]; !ok {
		return engine.TenantNotFound()
	}
	if _, ok := s.tokens[hash]; ok {
		return errors.New("memstore: create access token " + t.ID + ": access token hash exists")
	}
	s.tokens[hash] = copyAccessToken(t)
	return nil
}

// AccessTokenByHash returns the token whose SHA-256 is hash, and whether
// there is one.
func (s *Store) AccessTokenByHash(ctx context.Context, hash [sha256.Size]byte) (engine.AccessToken, bool, error) {
	if err := s.lock(ctx); err != nil {
		return engine.AccessToken{}, false, err
	}
	defer s.mu.Unlock()
	t, ok := s.tokens[hash]
	return t, ok, nil
}

// AccessTokens lists tenant's tokens in the order they were issued, which
// is the order of their IDs (engine.NewID).
func (s *Store) AccessTokens(ctx context.Context, tenant string) ([]engine.AccessToken, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := []engine.AccessToken{}
	for _, t := range s.tokens {
		if t.TenantID == tenant {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b engine.AccessToken) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// RevokeAccessToken sets Revoked to at on token id of tenant, unless it is
// revoked already, and returns it; CodeNotFound ("id").
func (s *Store) RevokeAccessToken(ctx context.Context, tenant, id string, at time.Time) (engine.AccessToken, bool, error) {
	if err := s.lock(ctx); err != nil {
		return engine.AccessToken{}, false, err
	}
	defer s.mu.Unlock()
	for hash, t := range s.tokens {
		if t.TenantID != tenant || t.ID != id {
			continue
		}
		if !t.Revoked.IsZero() {
			return t, false, nil
		}
		t.Revoked = utc(at)
		s.tokens[hash] = t
		return t, true, nil
	}
	return engine.AccessToken{}, false, engine.AccessTokenNotFound()
}
