package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/webhookd/webhookd/verify"
)

// Service is the domain API behind httpapi: it validates input, talks to the
// Store and hands new work to the Dispatcher.
type Service struct {
	store Store
	disp  *Dispatcher
	opts  ServiceOptions

	ingestRates    keyedLimiters // ServiceOptions.TenantIngestRate, per tenant
	testEventRates keyedLimiters // TestEventBurst and TestEventInterval, per endpoint
	schemas        *Schemas      // the catalogue's schemas, compiled (ServiceOptions.Schemas)

	ops *OperationalSink // where emitOperational queues; nil: nothing is emitted

	tasks *taskRunner // runs the background tasks (taskrunner.go)

	fan fanOut // the fan-outs the store left owed (fanout.go)
}

// ServiceOptions configure a Service. The zero value of each field means the
// default named on it.
type ServiceOptions struct {
	IdempotencyWindow time.Duration    // zero: DefaultIdempotencyWindow
	APIVersion        string           // api_version when ingest names none; "": DefaultAPIVersion
	Now               func() time.Time // zero: time.Now

	// Targets is checked when an endpoint URL is created or changed. The
	// zero value is the strict policy: https only, public addresses only
	// (see TargetPolicy).
	Targets TargetPolicy
	// DefaultEnvironment is the environment of a tenant created without
	// one by a caller that is not a test caller. "": EnvironmentLive.
	DefaultEnvironment Environment
	// RequireEndpointVerification makes new endpoints require the
	// Standard Webhooks challenge before their first delivery (see
	// verification.go). Zero: they do not.
	RequireEndpointVerification bool
	// LookupHost resolves endpoint hosts for the create-time target check;
	// nil: the default resolver.
	LookupHost func(ctx context.Context, host string) ([]netip.Addr, error)

	// MaxPending bounds the backlog (backlog.go): the deliveries that are
	// not final, those the dispatcher holds (waiting for their time,
	// ready, or in flight) and those held in the store (waiting behind
	// their line's head, paused, dead and blocking their line). While
	// there are MaxPending or more, Ingest refuses new events with
	// CodeOverloaded instead of growing the backlog without limit. The
	// bound is checked before each ingest, so ingests already past the
	// check can take the count a little over it. Replays are not refused.
	// Zero: no bound.
	MaxPending int

	// Limits per tenant, so that one tenant cannot take what the others
	// need (OperatorTenant is exempt). Each zero means no limit.
	//
	// MaxEndpointsPerTenant bounds a tenant's endpoints: creating one more
	// is CodeLimitReached. It also bounds how many requests one event of
	// the tenant can make.
	MaxEndpointsPerTenant int
	// MaxPendingPerTenant bounds the backlog of one tenant: while it has
	// that many deliveries that are not final or more, the tenant's
	// ingest is CodeTenantOverloaded, checked like MaxPending, which stays
	// the bound of them all.
	MaxPendingPerTenant int
	// TenantIngestRate limits ingest per tenant, in events per second,
	// with bursts of TenantIngestBurst (zero: the rate rounded up); over
	// it ingest is CodeRateLimited with the wait in RetryAfter.
	TenantIngestRate  float64
	TenantIngestBurst int

	// TenantDeleted, when set, is told of every tenant DeleteTenant
	// deleted, after the store did (its purge task is about to run). It
	// must not block.
	TenantDeleted func(tenant string)

	// RetryPolicies are the retry policies a tenant or an endpoint may
	// choose, by name, StandardRetryPolicy among them (its definition is
	// the Dispatcher's Policy). Nil: the Dispatcher's (NewNode), or the
	// standard one only.
	RetryPolicies map[string]RetryPolicy

	// Schemas compiles the event types' JSON Schemas (schema.go); main's
	// is package jsonschema's. Nil: a PUT of an event type with a schema
	// is refused (CodeInvalidField "schema"), and so is an event of a
	// type that has one (an internal error).
	Schemas SchemaCompiler
	// DeprecatedEvent, when set, is told the type of every event of a
	// deprecated type stored (not an idempotent repeat): main counts
	// them (webhookd_deprecated_events_total). It must not block.
	DeprecatedEvent func(eventType string)
	// Tasks configure the background tasks (tasks.go): their bound per
	// tenant, their lease, whether the store is shared.
	Tasks TaskOptions

	// Tracer, when set, traces each Ingest (tracing.go). Nil: none.
	Tracer Tracer
}

// NewService returns a Service over store that hands work to disp.
func NewService(store Store, disp *Dispatcher, opts ServiceOptions) *Service {
	if opts.IdempotencyWindow == 0 {
		opts.IdempotencyWindow = DefaultIdempotencyWindow
	}
	if opts.APIVersion == "" {
		opts.APIVersion = DefaultAPIVersion
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.DefaultEnvironment == "" {
		opts.DefaultEnvironment = EnvironmentLive
	}
	if opts.LookupHost == nil {
		opts.LookupHost = lookupNetIP
	}
	if opts.RetryPolicies == nil {
		if disp != nil {
			opts.RetryPolicies = disp.RetryPolicies()
		} else {
			opts.RetryPolicies = map[string]RetryPolicy{StandardRetryPolicy: DefaultRetryPolicy()}
		}
	}
	s := &Service{store: store, disp: disp, opts: opts, schemas: NewSchemas(opts.Schemas)}
	s.tasks = newTaskRunner(s, opts.Tasks)
	s.ingestRates.init(opts.TenantIngestRate, opts.TenantIngestBurst)
	s.testEventRates.init(1/TestEventInterval.Seconds(), TestEventBurst)
	return s
}

func (s *Service) now() time.Time { return s.opts.Now().UTC() }

// TenantInput is the body of PUT /v1/tenants/{tenant}.
type TenantInput struct {
	Name string `json:"name"`
	// Environment is "test" or "live" when the tenant is created ("": the
	// default; see putTenant), and must be "" or unchanged on an update.
	Environment Environment `json:"environment"`
	// RetryPolicy names the retry policy of the tenant's endpoints that
	// name none (ServiceOptions.RetryPolicies): "" keeps the tenant's
	// (StandardRetryPolicy for a new one).
	RetryPolicy string `json:"retry_policy"`
}

// RetryPolicies returns the retry policies a tenant or an endpoint may
// choose, by name (ServiceOptions.RetryPolicies). The map is the
// caller's.
func (s *Service) RetryPolicies() map[string]RetryPolicy {
	return maps.Clone(s.opts.RetryPolicies)
}

// RetryPolicy returns the policy a cycle of a delivery whose
// RetryPolicy is name follows, the name it is known by, and whether
// the node has that policy: one it does not have (the configuration
// dropped it) is followed as the standard one.
func (s *Service) RetryPolicy(name RetryPolicyName) (RetryPolicy, bool) {
	if name == "" {
		name = StandardRetryPolicy
	}
	if p, ok := s.opts.RetryPolicies[string(name)]; ok {
		return p, true
	}
	return s.opts.RetryPolicies[StandardRetryPolicy], false
}

// checkRetryPolicy reports CodeInvalidField on field unless name is one
// of the node's retry policies.
func (s *Service) checkRetryPolicy(field, name string) error {
	if _, ok := s.opts.RetryPolicies[name]; ok {
		return nil
	}
	names := slices.Sorted(maps.Keys(s.opts.RetryPolicies))
	if !ValidRetryPolicyName(name) {
		return Errorf(CodeInvalidField, field, "%s must name a retry policy: one of %s", field, strings.Join(names, ", "))
	}
	return Errorf(CodeInvalidField, field, "no retry policy %q is configured; the policies are %s", name, strings.Join(names, ", "))
}

// withEffectivePolicy fills in each endpoint's EffectiveRetryPolicy:
// its own RetryPolicy, or that of tenant t.
func withEffectivePolicy(t Tenant, eps []Endpoint) {
	for i := range eps {
		eps[i].EffectiveRetryPolicy = CyclePolicy(t.RetryPolicy, eps[i])
		if eps[i].EffectiveRetryPolicy == "" {
			eps[i].EffectiveRetryPolicy = StandardRetryPolicy
		}
	}
}

// effectivePolicy is withEffectivePolicy for ep of tenant, which it
// reads, and withEffectiveRate. ep's policy is answered as it is when the
// tenant cannot be read: the endpoint was read, and its policy is only
// shown.
func (s *Service) effectivePolicy(ctx context.Context, tenant string, ep Endpoint) Endpoint {
	eps := []Endpoint{ep}
	if t, err := s.store.Tenant(ctx, tenant); err == nil {
		withEffectivePolicy(t, eps)
	}
	s.withEffectiveRate(eps)
	return eps[0]
}

// withEffectiveRate fills in each endpoint's EffectiveRateLimit.
func (s *Service) withEffectiveRate(eps []Endpoint) {
	for i := range eps {
		eps[i].EffectiveRateLimit = s.EffectiveRateLimit(eps[i])
	}
}

// PutTenant creates or updates tenant id; it reports whether it was created.
// Its environment is set at creation and never changes (environment.go).
func (s *Service) PutTenant(ctx context.Context, id string, in TenantInput) (Tenant, bool, error) {
	return s.putTenant(ctx, id, in)
}

// Tenant returns tenant id.
func (s *Service) Tenant(ctx context.Context, id string) (Tenant, error) {
	if err := ValidateTenantID(id); err != nil {
		return Tenant{}, TenantNotFound()
	}
	return s.store.Tenant(ctx, id)
}

// EventTypeInput is the body of PUT /v1/event-types/{type}. A put
// replaces the whole entry but its created time: a field it leaves out
// is reset (no example, no schema, active).
type EventTypeInput struct {
	Description string `json:"description"`
	// Status, optional, is active (""), deprecated or archived
	// (EventTypeStatus).
	Status EventTypeStatus `json:"status"`
	// Schema, optional, is a JSON Schema (draft 2020-12) of the data of
	// the type's events: a JSON object or boolean, at most MaxSchemaLen
	// bytes compacted, that compiles (ServiceOptions.Schemas) with no
	// reference outside itself. A put without it removes the one stored.
	Schema json.RawMessage `json:"schema"`
	// Example, optional, is the data of an example event of the type:
	// any JSON value an ingest would take as data (stored compacted, at
	// most MaxExampleLen bytes), matching Schema when there is one. A
	// put without it removes the one stored.
	Example json.RawMessage `json:"example"`
}

// PutEventType adds name to the catalogue or replaces its description,
// status, schema and example. The schema is compiled here, so that a
// schema that does not compile (CodeInvalidField "schema") and an
// example that does not match it (CodeSchemaMismatch "example/…") are
// refused, and the next ingest finds it compiled.
func (s *Service) PutEventType(ctx context.Context, name string, in EventTypeInput) (EventType, bool, error) {
	if err := ValidateEventType("type", name); err != nil {
		return EventType{}, false, err
	}
	if err := ValidateText("description", in.Description, MaxDescriptionLen, FreeText); err != nil {
		return EventType{}, false, err
	}
	status, err := ValidateEventTypeStatus("status", in.Status)
	if err != nil {
		return EventType{}, false, err
	}
	example, err := optionalJSON(in.Example, "example", MaxExampleLen)
	if err != nil {
		return EventType{}, false, err
	}
	schema, err := optionalJSON(in.Schema, "schema", MaxSchemaLen)
	if err != nil {
		return EventType{}, false, err
	}
	var compiled CompiledSchema
	if schema != nil {
		if schema[0] != '{' && string(schema) != "true" && string(schema) != "false" {
			return EventType{}, false, Errorf(CodeInvalidField, "schema", "schema must be a JSON Schema: an object (or true or false)")
		}
		if compiled, err = s.schemas.compile(schema); err != nil {
			return EventType{}, false, err
		}
		if example != nil {
			if err := compiled.Validate(example); err != nil {
				return EventType{}, false, schemaMismatch("example", name, err)
			}
		}
	}
	now := s.now()
	et, created, err := s.store.PutEventType(ctx, EventType{Name: name, Description: in.Description, Status: status, Schema: schema, Example: example, Created: now, Updated: now})
	if err == nil && compiled != nil {
		s.schemas.put(name, et.Schema, compiled)
	}
	return et, created, err
}

// optionalJSON returns v, the optional JSON value of field, compacted
// (appendData), or nil when it is absent or null: CodeInvalidField when
// it is more than max bytes compacted.
func optionalJSON(v json.RawMessage, field string, max int) (json.RawMessage, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return nil, nil
	}
	b, err := appendData(nil, v, field)
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, Errorf(CodeInvalidField, field, "%s is %d bytes compacted; at most %d", field, len(b), max)
	}
	return b, nil
}

// DeleteEventType takes name out of the catalogue: ingest of that type is
// refused from then on (CodeUnknownEventType), and events already stored
// are delivered as usual. Endpoints that subscribe to it keep the name, so
// they receive it again if it is added back.
func (s *Service) DeleteEventType(ctx context.Context, name string) error {
	if err := ValidateEventType("type", name); err != nil {
		return err
	}
	err := s.store.DeleteEventType(ctx, name)
	if err == nil {
		s.schemas.forget(name)
	}
	return err
}

// EventTypes lists the catalogue.
func (s *Service) EventTypes(ctx context.Context) ([]EventType, error) {
	return s.store.EventTypes(ctx)
}

// EndpointInput is the body of POST /v1/tenants/{tenant}/endpoints.
type EndpointInput struct {
	URL         string   `json:"url"`
	EventTypes  []string `json:"event_types"`
	Description string   `json:"description"`
	// Ordering and OnDead are the endpoint's (see lines.go); absent:
	// none and skip.
	Ordering Ordering `json:"ordering"`
	OnDead   OnDead   `json:"on_dead"`

	// Channels, optional, filters the events the endpoint receives by
	// their channels (Endpoint.Channels, ValidateChannels); absent or
	// []: every event.
	Channels []string `json:"channels"`
	// RetryPolicy names the endpoint's retry policy; "": its tenant's.
	RetryPolicy string `json:"retry_policy"`
	// Headers are the endpoint's custom headers, name to value
	// (NewHeaders); absent: none.
	Headers map[string]string `json:"headers,omitempty"`
	// RateLimit, when set, is the endpoint's own bound on its attempts
	// per second (see RateLimit); absent or null: none.
	RateLimit *RateLimitInput `json:"rate_limit"`
	// SendTraceparent makes each attempt carry its span's traceparent
	// when tracing is on (Endpoint.SendTraceparent); absent: false.
	SendTraceparent bool `json:"send_traceparent"`
	// Secret, optional, is the endpoint's signing secret, the caller's
	// own (GivenSecret): a team moving from another service keeps the
	// one its receiver verifies with. Absent: webhookd makes one.
	Secret string `json:"secret,omitempty"`
}

// EndpointPatch is the body of PATCH .../endpoints/{id}; nil fields are left
// as they are.
type EndpointPatch struct {
	URL         *string   `json:"url"`
	EventTypes  *[]string `json:"event_types"`
	Description *string   `json:"description"`
	// Ordering applies to the events ingested after the change: a
	// delivery's line is fixed when it is made. OnDead applies to the
	// next head that dies.
	Ordering *Ordering `json:"ordering"`
	OnDead   *OnDead   `json:"on_dead"`
	// RetryPolicy applies to the cycles that start after the change (a
	// delivery's policy is fixed when its cycle starts); "": the
	// tenant's from then on.
	RetryPolicy *string `json:"retry_policy"`
	Disabled    *bool   `json:"disabled"`
	// Headers changes the endpoint's custom headers as a merge
	// (CheckHeadersPatch): a name with a string sets that header, a name
	// with null removes it, the others stay; {} removes them all. Absent
	// or null: unchanged.
	Headers map[string]*string `json:"headers"`
	// RateLimit sets the endpoint's own bound on its attempts per
	// second, or with null removes it; absent: unchanged. It applies
	// from the endpoint's next attempt.
	RateLimit RateLimitPatch `json:"rate_limit"`
	// SendTraceparent turns the attempts' traceparent on or off
	// (Endpoint.SendTraceparent), from the next attempt; absent:
	// unchanged.
	SendTraceparent *bool `json:"send_traceparent"`
	// DeliverHeld, with disabled false, says what becomes of the
	// deliveries held (paused) while the endpoint was disabled: true sends
	// them now, false (the default) dead-letters them. See
	// SetEndpointEnabled.
	DeliverHeld bool `json:"deliver_held"`
	// By is who asks ("admin", "token tok_…"), recorded on the replays of
	// held deliveries; not read from JSON. "": "admin".
	By string `json:"-"`

	// Channels replaces the endpoint's channel filter ([]: none, every
	// event), for the events ingested after the change.
	Channels *[]string `json:"channels"`
}

// CreateEndpoint stores a new endpoint and returns it with its signing
// secret. No read shows the secret again: only RevealSecret, which records
// who asked.
func (s *Service) CreateEndpoint(ctx context.Context, tenant string, in EndpointInput) (Endpoint, string, error) {
	if err := ValidateTenantID(tenant); err != nil {
		return Endpoint{}, "", TenantNotFound()
	}
	if err := ValidateEndpointURL(in.URL); err != nil {
		return Endpoint{}, "", err
	}
	if err := s.opts.Targets.checkTargetURL(ctx, in.URL, s.opts.LookupHost); err != nil {
		return Endpoint{}, "", err
	}
	if err := ValidateText("description", in.Description, MaxDescriptionLen, FreeText); err != nil {
		return Endpoint{}, "", err
	}
	if err := ValidateOrdering(in.Ordering); err != nil {
		return Endpoint{}, "", err
	}
	if err := ValidateOnDead(in.OnDead); err != nil {
		return Endpoint{}, "", err
	}
	if err := ValidateChannels("channels", in.Channels); err != nil {
		return Endpoint{}, "", err
	}
	if in.RetryPolicy != "" {
		if err := s.checkRetryPolicy("retry_policy", in.RetryPolicy); err != nil {
			return Endpoint{}, "", err
		}
	}
	headers, err := NewHeaders(in.Headers)
	if err != nil {
		return Endpoint{}, "", err
	}
	var limit RateLimit
	if in.RateLimit != nil {
		if limit, err = in.RateLimit.RateLimit(); err != nil {
			return Endpoint{}, "", err
		}
	}
	types, err := s.checkSubscriptions(ctx, in.EventTypes)
	if err != nil {
		return Endpoint{}, "", err
	}
	secret := NewSecret()
	if in.Secret != "" {
		if secret, err = GivenSecret("secret", in.Secret); err != nil {
			return Endpoint{}, "", err
		}
	}
	now := s.now()
	ep := Endpoint{
		ID: NewID("ep"), TenantID: tenant, URL: in.URL, EventTypes: types,
		Description: in.Description, Created: now, Updated: now,
		Ordering: in.Ordering, OnDead: in.OnDead, RetryPolicy: RetryPolicyName(in.RetryPolicy), Headers: headers, RateLimit: limit,
		SendTraceparent:      in.SendTraceparent,
		VerificationRequired: s.opts.RequireEndpointVerification,
		Secrets:              []Secret{{Key: secret}},
	}
	ep.Channels = channelsOf(in.Channels)
	if err := s.store.CreateEndpoint(ctx, ep, s.endpointLimit(tenant)); err != nil {
		if ErrorCode(err) == CodeLimitReached {
			return Endpoint{}, "", Errorf(CodeLimitReached, "", "tenant %s has %d endpoints, the most it may have ([limits] endpoints_per_tenant = %d): delete one first, or ask the operator to raise the limit",
				tenant, s.opts.MaxEndpointsPerTenant, s.opts.MaxEndpointsPerTenant)
		}
		return Endpoint{}, "", err
	}
	s.emitOperational(ctx, OpEndpointCreated, map[string]any{"tenant": tenant, "endpoint_id": ep.ID, "at": now})
	return s.effectivePolicy(ctx, tenant, ep), secret, nil
}

// checkSubscriptions validates an endpoint's event_types: ["*"] alone, or
// names from the catalogue, without repeats.
func (s *Service) checkSubscriptions(ctx context.Context, types []string) ([]string, error) {
	const field = "event_types"
	if len(types) == 0 {
		return nil, Errorf(CodeInvalidField, field, `event_types must list at least one type, or be ["*"] for all`)
	}
	if len(types) > MaxEventTypesEach {
		return nil, Errorf(CodeInvalidField, field, "at most %d event types", MaxEventTypesEach)
	}
	if len(types) == 1 && types[0] == AllEventTypes {
		return []string{AllEventTypes}, nil
	}
	catalogue, err := s.store.EventTypes(ctx)
	if err != nil {
		return nil, err
	}
	known := make(map[string]bool, len(catalogue))
	for _, et := range catalogue {
		known[et.Name] = true
	}
	seen := make(map[string]bool, len(types))
	for i, t := range types {
		f := fmt.Sprintf("%s[%d]", field, i)
		if t == AllEventTypes {
			return nil, Errorf(CodeInvalidField, f, `"*" must be the only entry`)
		}
		if err := ValidateEventType(f, t); err != nil {
			return nil, err
		}
		if !known[t] {
			return nil, unknownEventType(f, t, catalogue)
		}
		if seen[t] {
			return nil, Errorf(CodeInvalidField, f, "event type %q is listed twice", t)
		}
		seen[t] = true
	}
	return types, nil
}

// EffectiveRateLimit returns the bound ep's attempts are held to in the
// whole cluster: its own RateLimit within the dispatcher's EndpointRate
// (EffectiveRateLimit); the zero RateLimit when there is none.
func (s *Service) EffectiveRateLimit(ep Endpoint) RateLimit {
	var global float64
	if s.disp != nil {
		global = s.disp.opts.EndpointRate
	}
	return EffectiveRateLimit(global, ep.RateLimit)
}

// Endpoints lists tenant's endpoints, each with its
// EffectiveRetryPolicy and EffectiveRateLimit.
func (s *Service) Endpoints(ctx context.Context, tenant string) ([]Endpoint, error) {
	t, err := s.Tenant(ctx, tenant)
	if err != nil {
		return nil, err
	}
	eps, err := s.store.Endpoints(ctx, tenant)
	if err != nil {
		return nil, err
	}
	withEffectivePolicy(t, eps)
	s.withEffectiveRate(eps)
	return eps, nil
}

// Endpoint returns one endpoint of tenant, with its
// EffectiveRetryPolicy and EffectiveRateLimit.
func (s *Service) Endpoint(ctx context.Context, tenant, id string) (Endpoint, error) {
	if !validID(id) {
		return Endpoint{}, EndpointNotFound()
	}
	ep, err := s.store.Endpoint(ctx, tenant, id)
	if err != nil {
		return Endpoint{}, err
	}
	return s.effectivePolicy(ctx, tenant, ep), nil
}

// UpdateEndpoint applies p to an endpoint of tenant.
func (s *Service) UpdateEndpoint(ctx context.Context, tenant, id string, p EndpointPatch) (Endpoint, error) {
	if !validID(id) {
		return Endpoint{}, EndpointNotFound()
	}
	if p.URL != nil {
		if err := ValidateEndpointURL(*p.URL); err != nil {
			return Endpoint{}, err
		}
		if err := s.opts.Targets.checkTargetURL(ctx, *p.URL, s.opts.LookupHost); err != nil {
			return Endpoint{}, err
		}
	}
	if p.Description != nil {
		if err := ValidateText("description", *p.Description, MaxDescriptionLen, FreeText); err != nil {
			return Endpoint{}, err
		}
	}
	if p.Ordering != nil {
		if err := ValidateOrdering(*p.Ordering); err != nil {
			return Endpoint{}, err
		}
	}
	if p.OnDead != nil {
		if err := ValidateOnDead(*p.OnDead); err != nil {
			return Endpoint{}, err
		}
	}
	if p.Channels != nil {
		if err := ValidateChannels("channels", *p.Channels); err != nil {
			return Endpoint{}, err
		}
	}
	if p.RetryPolicy != nil && *p.RetryPolicy != "" {
		if err := s.checkRetryPolicy("retry_policy", *p.RetryPolicy); err != nil {
			return Endpoint{}, err
		}
	}
	headers, err := CheckHeadersPatch(p.Headers)
	if err != nil {
		return Endpoint{}, err
	}
	var limit RateLimit
	if p.RateLimit.Limit != nil {
		if limit, err = p.RateLimit.Limit.RateLimit(); err != nil {
			return Endpoint{}, err
		}
	}
	var types []string
	if p.EventTypes != nil {
		if types, err = s.checkSubscriptions(ctx, *p.EventTypes); err != nil {
			return Endpoint{}, err
		}
	}
	now := s.now()
	var changed []string
	ep, err := s.store.UpdateEndpoint(ctx, tenant, id, func(ep *Endpoint) error {
		before := *ep
		defer func() { changed = endpointChanges(before, *ep) }()
		if p.URL != nil {
			if ep.URL != *p.URL {
				ep.Verified = time.Time{} // a new URL answers the challenge afresh
			}
			ep.URL = *p.URL
		}
		if p.EventTypes != nil {
			ep.EventTypes = types
		}
		if p.Description != nil {
			ep.Description = *p.Description
		}
		if p.Ordering != nil {
			ep.Ordering = *p.Ordering
		}
		if p.OnDead != nil {
			ep.OnDead = *p.OnDead
		}
		if p.Channels != nil {
			ep.Channels = channelsOf(*p.Channels)
		}
		if p.RetryPolicy != nil {
			ep.RetryPolicy = RetryPolicyName(*p.RetryPolicy)
		}
		h, err := ApplyHeadersPatch(ep.Headers, headers)
		if err != nil {
			return err
		}
		ep.Headers = h
		if p.RateLimit.Set || p.RateLimit.Limit != nil {
			ep.RateLimit = limit // the zero value when null: none
		}
		if p.SendTraceparent != nil {
			ep.SendTraceparent = *p.SendTraceparent
		}
		ep.Updated = now
		return nil
	})
	if err == nil && len(changed) > 0 {
		s.emitOperational(ctx, OpEndpointUpdated, map[string]any{"tenant": tenant, "endpoint_id": id, "changed": changed, "at": now})
	}
	if err == nil && p.Disabled != nil {
		by := p.By
		if by == "" {
			by = "admin"
		}
		ep, _, err = s.SetEndpointEnabled(ctx, tenant, id, !*p.Disabled, p.DeliverHeld, by)
	}
	if err != nil {
		return ep, err
	}
	return s.effectivePolicy(ctx, tenant, ep), nil
}

// DeleteEndpoint removes an endpoint of tenant. Its pending deliveries are
// dead-lettered ("endpoint deleted") when their next attempt comes, with
// no request made; the paused ones (it was disabled), which no attempt
// would ever end, are dead-lettered at once, and the lines they held go
// on, so what waited behind them dies the same way. A crash between the
// endpoint's deletion and that step leaves those paused deliveries
// paused: they are listed, and their events kept, until the tenant is
// deleted.
func (s *Service) DeleteEndpoint(ctx context.Context, tenant, id string) error {
	if !validID(id) {
		return EndpointNotFound()
	}
	if err := s.store.DeleteEndpoint(ctx, tenant, id); err != nil {
		return err
	}
	s.emitOperational(ctx, OpEndpointDeleted, map[string]any{"tenant": tenant, "endpoint_id": id, "at": s.now()})
	// A paused delivery to it may be owed still (fanout.go).
	if err := s.settled(ctx, tenant); err != nil {
		return err
	}
	_, err := s.dropPaused(ctx, tenant, id)
	return err
}

// dropPaused drops the paused deliveries of endpoint id of tenant, which
// is deleted, in batches (DropDeletedEndpointDelivery: dead, "endpoint
// deleted"), and returns how many. DeleteEndpoint calls it after the
// endpoint's deletion; the janitor calls it for what a process that
// stopped in between left (Maintenance.OrphanedPaused).
func (s *Service) dropPaused(ctx context.Context, tenant, id string) (int, error) {
	n := 0
	for {
		at := s.now()
		ds, err := s.store.UpdateDeliveries(ctx, Selection{Tenant: tenant, State: StatePaused, EndpointID: id}, replayBatch, func(d Delivery) Delivery {
			return DropDeletedEndpointDelivery(d, at)
		})
		if err != nil || len(ds) == 0 {
			return n, err
		}
		n += len(ds)
		if s.disp != nil {
			for _, d := range ds {
				s.disp.FollowLine(d) // a dropped head's line goes on
			}
		}
	}
}

// IngestInput is the body of POST /v1/tenants/{tenant}/events plus the
// Idempotency-Key header.
type IngestInput struct {
	Type       string          `json:"type"`
	APIVersion string          `json:"api_version"`
	Data       json.RawMessage `json:"data"`
	// OrderingKey, optional, names what the event is about (an order, a
	// customer: at most MaxOrderingKey bytes that ValidateText takes as
	// IdentifierText).
	// Events of one tenant with the same key are in sequence order, and
	// an endpoint that asks for ordering gets them in that order. It is
	// in the envelope as "ordering_key".
	OrderingKey string `json:"ordering_key"`
	// Channels, optional, are the channels the event is sent on: an
	// endpoint with a channel filter receives it only when one of them
	// is in its filter (Endpoint.ListensTo). At most MaxChannels
	// distinct names (ValidateChannels). Not in the envelope.
	Channels []string `json:"channels"`
	// DeliverAt, optional, schedules the event: its deliveries are made
	// now, pending with the first attempt due at DeliverAt (not before),
	// and each cycle's deadline counts from it. RFC 3339 with an offset;
	// at most MaxDeliverAtSkew in the past and MaxDeliverAtAhead in the
	// future (ValidateDeliverAt). Zero: at once, as ever.
	DeliverAt      time.Time `json:"deliver_at"`
	IdempotencyKey string    `json:"-"`
	// Test marks a test event (Event.Test); SendTestEvent sets it, no
	// request can.
	Test bool `json:"-"`
}

// TimeFormat is the layout of every time webhookd shows: the envelope's
// created and each time in an API answer. Times are shown in UTC, so the
// zone is always "Z", with exactly three fraction digits (milliseconds,
// truncated): every timestamp has the same width, so their text order is
// their time order, and a receiver's parser never meets a trimmed fraction.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// encodeEnvelope returns the body every endpoint receives but its
// sequence, which the store writes in (NewEvent.Sequenced):
// {"id","type","created","ordering_key","api_version","data"} in this
// order, "ordering_key" only when there is one, with data (already
// compacted, valid JSON) appended as it is: encoding it through
// json.Marshal would validate and compact it a second time, the larger
// part of the cost for a 1 KiB event. Room for the sequence is reserved.
func encodeEnvelope(ev Event, data []byte) []byte {
	const fixed = len(`{"id":"","type":"","created":"","sequence":,"api_version":"","data":}`) + len(TimeFormat) + 20
	b := make([]byte, 0, fixed+len(ev.ID)+len(ev.Type)+len(ev.APIVersion)+len(data)+len(ev.OrderingKey)+len(`,"ordering_key":""`))
	b = appendEnvelopeHead(b, ev)
	if ev.OrderingKey != "" {
		b = append(b, `,"ordering_key":`...)
		b = appendJSONString(b, ev.OrderingKey)
	}
	b = append(b, `,"api_version":`...)
	b = appendJSONString(b, ev.APIVersion)
	b = append(b, `,"data":`...)
	b = append(b, data...)
	return append(b, '}')
}

// appendEnvelopeHead appends the envelope of ev up to its "sequence":
// {"id":…,"type":…,"created":"…" .
func appendEnvelopeHead(b []byte, ev Event) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, ev.ID)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, ev.Type)
	b = append(b, `,"created":"`...)
	b = ev.Created.UTC().AppendFormat(b, TimeFormat)
	return append(b, '"')
}

// Sequenced returns the event to store with sequence seq, the tenant's
// next (Event.Sequence): a store calls it in the transaction that
// assigns seq. When the body is the envelope PrepareEvent built,
// "sequence" is written into it after "created" (SequenceOffset); another
// body (a test's, an import's) is kept as it is.
func (ne NewEvent) Sequenced(seq uint64) Event {
	ev := ne.Event
	ev.Sequence = seq
	at := ne.SequenceOffset()
	if seq == 0 || at < 0 {
		return ev
	}
	b := make([]byte, 0, len(ev.Body)+len(`,"sequence":`)+20)
	b = append(b, ev.Body[:at]...)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendUint(b, seq, 10)
	ev.Body = append(b, ev.Body[at:]...)
	return ev
}

// SequenceOffset is where in the body Sequenced writes
// `,"sequence":<n>`, or -1 when it keeps the body as it is: for a store
// that writes the sequence into the body itself (in SQL, say).
func (ne NewEvent) SequenceOffset() int {
	var head [160]byte
	h := appendEnvelopeHead(head[:0], ne.Event)
	if !bytes.HasPrefix(ne.Event.Body, h) {
		return -1
	}
	return len(h)
}

// EnvelopeSequence returns the "sequence" of an envelope body, or 0 when
// it has none (an event stored before events were numbered).
func EnvelopeSequence(body []byte) uint64 {
	// Every envelope starts {"id":"evt_…","type":"a.b","created":"<time>"
	// with no quote inside the id or the type.
	i := bytes.Index(body, []byte(`"created":"`))
	if i < 0 {
		return 0
	}
	rest := body[i+len(`"created":"`):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return 0
	}
	rest, ok := bytes.CutPrefix(rest[j+1:], []byte(`,"sequence":`))
	if !ok {
		return 0
	}
	var n uint64
	for _, c := range rest {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}

// appendJSONString appends s as a JSON string, as json.Marshal writes it:
// directly when every byte is one json.Marshal copies as it is, through
// json.Marshal otherwise.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !marshalPlainByte[s[i]] {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// marshalPlainByte is true for the bytes json.Marshal copies into a string
// as they are: printable ASCII but the quote, the backslash and the HTML
// characters it escapes (<, > and &).
var marshalPlainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// Ingest stores one event and its deliveries durably, then hands the
// deliveries to the dispatcher. When it returns nil the event is on disk.
func (s *Service) Ingest(ctx context.Context, tenant string, in IngestInput) (IngestResult, error) {
	if err := ValidateTenantID(tenant); err != nil {
		return IngestResult{}, TenantNotFound()
	}
	if s.opts.Tracer != nil {
		return s.traceIngest(ctx, tenant, in)
	}
	return s.ingest(ctx, tenant, in)
}

// ingest is Ingest for a tenant id already accepted: a customer's, or
// OperatorTenant, which no API request can name.
func (s *Service) ingest(ctx context.Context, tenant string, in IngestInput) (IngestResult, error) {
	ne, err := s.prepare(tenant, in)
	if err != nil {
		return IngestResult{}, err
	}
	return s.appendEvent(ctx, tenant, ne, nil)
}

// prepare is PrepareEvent with the service's options.
func (s *Service) prepare(tenant string, in IngestInput) (NewEvent, error) {
	return PrepareEvent(tenant, in, IngestOptions{
		APIVersion:        s.opts.APIVersion,
		IdempotencyWindow: s.opts.IdempotencyWindow,
		Now:               s.opts.Now,
		Schemas:           s.schemas,
	})
}

// appendEvent stores a prepared event of tenant, once the node's and the
// tenant's bounds allow it and then admit, when set, does, and hands its
// deliveries to the dispatcher.
func (s *Service) appendEvent(ctx context.Context, tenant string, ne NewEvent, admit func() error) (IngestResult, error) {
	if err := s.checkBacklog(ctx, tenant); err != nil {
		return IngestResult{}, err
	}
	if admit != nil {
		if err := admit(); err != nil {
			return IngestResult{}, err
		}
	}
	if err := s.checkTenantRate(tenant); err != nil {
		return IngestResult{}, err
	}
	s.appending(ne.Event.ID, tenant)
	res, err := s.store.AppendEvent(ctx, ne)
	s.owe(ne.Event.ID, res, err)
	if ErrorCode(err) == CodeUnknownEventType {
		if catalogue, cerr := s.store.EventTypes(ctx); cerr == nil {
			err = unknownEventType("type", ne.Event.Type, catalogue)
		}
	}
	if err != nil {
		return IngestResult{}, err
	}
	if ne.checked != nil && ne.checked.status == EventTypeDeprecated && !res.Duplicate && s.opts.DeprecatedEvent != nil {
		s.opts.DeprecatedEvent(ne.Event.Type)
	}
	if !res.Owed && s.disp != nil { // owed: they reach the dispatcher when FanOut stores them (fanout.go)
		for _, d := range res.Deliveries {
			// A duplicate's deliveries are normally in the dispatcher
			// already; not when the first ingest's commit reached the disk
			// but reported a failure (its client retried), so hand over
			// any pending one it does not hold.
			if res.Duplicate && (d.State != StatePending || s.disp.Holds(d.ID)) || d.State == StateWaiting {
				continue // a waiting one is handed over when its line reaches it (FollowLine)
			}
			s.disp.Enqueue(d.ID, d.TenantID, d.EndpointID, d.NextAttemptAt)
		}
	}
	return res, nil
}

// Defaults of ingest, for ServiceOptions and IngestOptions.
const (
	DefaultAPIVersion        = "v1"
	DefaultIdempotencyWindow = 24 * time.Hour
)

// IngestOptions configure PrepareEvent. The zero value of each field means
// the default named on it.
type IngestOptions struct {
	APIVersion        string           // api_version when the input names none; "": DefaultAPIVersion
	IdempotencyWindow time.Duration    // how long an Idempotency-Key is remembered; zero: DefaultIdempotencyWindow
	Now               func() time.Time // the event's created time; nil: time.Now
	// Schemas checks each event against its type's schema, in the
	// append (NewEvent.CheckType, which checks the status too). Nil: an
	// event of a type with a schema is refused (an internal error).
	Schemas *Schemas
}

// PrepareEvent turns an ingest request of tenant into the NewEvent a
// Store appends: it validates in (CodeInvalidField or CodeInvalidJSON
// naming type, api_version, data, ordering_key, channels (or
// channels[i]) or Idempotency-Key; data
// must be I-JSON, see scanData), compacts the data,
// builds the envelope every endpoint receives, and sets the event's ID,
// its created time (opts.Now, in UTC, truncated to milliseconds), the
// request hash of the idempotency record and its expiry. It reads no
// store: whether the tenant exists and the type is in the catalogue is
// the append's check, and so is what the type's status and schema say
// of the event (NewEvent.CheckType, which it sets, with opts.Schemas).
// tenant is taken as it is; a caller that gets it from outside
// validates it first (ValidateTenantID), as Ingest does.
//
// Every ingest path calls it, so that they validate and hash alike: a
// retry with the same Idempotency-Key is a duplicate whichever path the
// first request took. Service's per-node checks (MaxPending, the tenant
// limits) are not part of it.
func PrepareEvent(tenant string, in IngestInput, opts IngestOptions) (NewEvent, error) {
	if opts.APIVersion == "" {
		opts.APIVersion = DefaultAPIVersion
	}
	if opts.IdempotencyWindow == 0 {
		opts.IdempotencyWindow = DefaultIdempotencyWindow
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if in.Type == "" {
		return NewEvent{}, EventTypeRequired()
	}
	if err := ValidateEventType("type", in.Type); err != nil {
		return NewEvent{}, err
	}
	requestedVersion := in.APIVersion
	if in.APIVersion == "" {
		in.APIVersion = opts.APIVersion
	}
	if err := ValidateText("api_version", in.APIVersion, MaxAPIVersionLen, IdentifierText); err != nil {
		return NewEvent{}, err
	}
	if len(bytes.TrimSpace(in.Data)) == 0 {
		return NewEvent{}, Errorf(CodeInvalidField, "data", "data is required (any JSON value)")
	}
	// The idempotency hash covers the request as sent (api_version before
	// the default is filled in), so a change of the default within the
	// window does not turn a retry into a conflict: it is the SHA-256 of
	// type, NUL, api_version as sent, NUL, compacted data. The data is
	// compacted right after that prefix, so the hash reads one buffer.
	hashed := make([]byte, 0, len(in.Type)+len(requestedVersion)+2+len(in.Data))
	hashed = append(hashed, in.Type...)
	hashed = append(hashed, 0)
	hashed = append(hashed, requestedVersion...)
	hashed = append(hashed, 0)
	prefix := len(hashed)
	hashed, err := appendData(hashed, in.Data, "data")
	if err != nil {
		return NewEvent{}, err
	}
	data := hashed[prefix:]
	if err := ValidateText("Idempotency-Key", in.IdempotencyKey, MaxIdempotencyKey, IdentifierText); err != nil {
		return NewEvent{}, err
	}
	if err := ValidateText("ordering_key", in.OrderingKey, MaxOrderingKey, IdentifierText); err != nil {
		return NewEvent{}, err
	}
	if in.OrderingKey != "" {
		// Only when there is one, so that a request without a key hashes
		// as it did before keys existed.
		hashed = append(append(hashed, 0), in.OrderingKey...)
	}
	if err := ValidateChannels("channels", in.Channels); err != nil {
		return NewEvent{}, err
	}
	channels := channelsOf(in.Channels)
	if channels != nil {
		// Only when there are some, as the ordering key. A retry with
		// other channels is a conflict, as one with other data: they
		// decide who receives the event. In any order: they are a set.
		// \x01 starts them, which neither data (JSON) nor an ordering
		// key (identifier text) holds.
		hashed = append(hashed, 1)
		for _, ch := range slices.Sorted(slices.Values(channels)) {
			hashed = append(append(hashed, ch...), 0)
		}
	}

	now := opts.Now().UTC()
	var deliverAt time.Time
	if !in.DeliverAt.IsZero() {
		at, err := ValidateDeliverAt("deliver_at", in.DeliverAt, now)
		if err != nil {
			return NewEvent{}, err
		}
		deliverAt = at
		// Only when there is one, as the ordering key: a retry that
		// asks for another time is a conflict, as one with other data.
		// \x02 starts it, which neither data, an ordering key nor
		// channels hold; then the time in Unix milliseconds, decimal.
		hashed = strconv.AppendInt(append(hashed, 2), deliverAt.UnixMilli(), 10)
	}
	created := now.Truncate(time.Millisecond)
	ev := Event{ID: NewID("evt"), TenantID: tenant, Type: in.Type, Created: created, APIVersion: in.APIVersion, OrderingKey: in.OrderingKey, Test: in.Test, Channels: channels, DeliverAt: deliverAt}
	ev.Body = encodeEnvelope(ev, data)
	check, checked := checkType(opts.Schemas, data[:len(data):len(data)])
	return NewEvent{
		CheckType:          check,
		checked:            checked,
		Event:              ev,
		IdempotencyKey:     in.IdempotencyKey,
		RequestHash:        sha256.Sum256(hashed),
		IdempotencyExpires: now.Add(opts.IdempotencyWindow),
		Deliveries: func(stored Event, policy RetryPolicyName, eps []Endpoint) []Delivery {
			return NewDeliveries(stored, policy, eps, NewID)
		},
	}, nil
}

// Bounds of an event's deliver_at (IngestInput.DeliverAt).
const (
	// MaxDeliverAtSkew is how far in the past a deliver_at may be: a
	// sender whose clock is a little ahead of the node's, or whose
	// request took a moment, asks for "now" and gets it (delivered at
	// once); further back is a mistake worth a 422, not an event sent
	// at once as if it were on time.
	MaxDeliverAtSkew = 5 * time.Second
	// MaxDeliverAtAhead is how far in the future a deliver_at may be.
	// A fixed bound rather than the longest retry policy's deadline: it
	// is the same on every node whatever its [retry.policies], so an
	// event a node takes does not depend on which node took it, and it
	// is documented once (docs/api.md). 30 days is longer than any
	// shipped policy's window and short enough that a scheduled event
	// does not sit in the backlog (max_pending) for months.
	MaxDeliverAtAhead = 30 * 24 * time.Hour
)

// ValidateDeliverAt checks at, an event's deliver_at, against now:
// CodeInvalidField naming field when it is more than MaxDeliverAtSkew
// before now or more than MaxDeliverAtAhead after. It returns at in UTC,
// truncated to the millisecond (as times are stored and shown); a time
// in the skew before now is returned as is and is due at once.
func ValidateDeliverAt(field string, at, now time.Time) (time.Time, error) {
	at = at.UTC().Truncate(time.Millisecond)
	if at.Before(now.Add(-MaxDeliverAtSkew)) {
		return time.Time{}, Errorf(CodeInvalidField, field, "%s is %s in the past; it may be at most %s before now (or absent: at once)", field, now.Sub(at).Truncate(time.Millisecond), MaxDeliverAtSkew)
	}
	if at.After(now.Add(MaxDeliverAtAhead)) {
		return time.Time{}, Errorf(CodeInvalidField, field, "%s is more than %s from now; it may be at most %s ahead", field, "30 days", "30 days")
	}
	return at, nil
}

// channelsOf returns a copy of chs, or nil when it is empty: how an event
// or an endpoint keeps its channels (none is nil).
func channelsOf(chs []string) []string {
	if len(chs) == 0 {
		return nil
	}
	return slices.Clone(chs)
}

// Ready reports whether the service takes work: nil, or why not (the
// dispatcher is not running, or ingest is pushed back by max_pending).
func (s *Service) Ready() error {
	if s.disp != nil && !s.disp.Running() {
		return errors.New("dispatcher not running")
	}
	return s.checkBacklog(context.Background(), "")
}

// checkBacklog returns CodeOverloaded when the backlog (backlog.go) is
// MaxPending deliveries or more, and CodeTenantOverloaded when tenant's
// ("": none) is MaxPendingPerTenant or more. The operator's own tenant
// is bound by neither: its alerts are raised when other tenants'
// deliveries fail, so they are what an operator needs while the node is
// overloaded; there are at most a few per delivery attempted, and they
// count toward MaxPending for everyone else.
func (s *Service) checkBacklog(ctx context.Context, tenant string) error {
	if tenant == OperatorTenant {
		return nil
	}
	perTenant := s.opts.MaxPendingPerTenant
	if tenant == "" {
		perTenant = 0
	}
	if s.disp == nil || s.opts.MaxPending <= 0 && perTenant <= 0 {
		return nil
	}
	if perTenant <= 0 {
		tenant = ""
	}
	mine, all, err := s.backlog(ctx, tenant)
	if err != nil {
		return err
	}
	if n := all.Total(); s.opts.MaxPending > 0 && n >= s.opts.MaxPending {
		return Errorf(CodeOverloaded, "", "%d deliveries are not yet delivered or dead (%s), at or over the bound of %d ([ingest] max_pending); the event was not stored: send it again after Retry-After", n, all, s.opts.MaxPending)
	}
	if n := mine.Total(); perTenant > 0 && n >= perTenant {
		return Errorf(CodeTenantOverloaded, "", "tenant %s has %d deliveries not yet delivered or dead (%s), at or over its bound of %d ([limits] pending_per_tenant); the event was not stored: send it again after Retry-After", tenant, n, mine, perTenant)
	}
	return nil
}

// backlog is the dispatcher's Backlog with the deliveries of this
// process's ingests whose fan-out is owed counted as pending: they are
// not final, wherever they are.
func (s *Service) backlog(ctx context.Context, tenant string) (ofTenant, all Backlog, err error) {
	ofTenant, all, err = s.disp.Backlog(ctx, tenant)
	if err != nil {
		return ofTenant, all, err
	}
	mine, every := s.owed(tenant)
	ofTenant.Pending += mine
	all.Pending += every
	return ofTenant, all, nil
}

// Event returns an event of tenant with its deliveries, each showing
// StateDelivering while its attempt is in flight.
func (s *Service) Event(ctx context.Context, tenant, id string) (Event, []Delivery, error) {
	if !validID(id) {
		return Event{}, nil, EventNotFound()
	}
	ev, ds, err := s.store.Event(ctx, tenant, id)
	if err != nil {
		return Event{}, nil, err
	}
	for i := range ds {
		s.overlay(&ds[i])
	}
	return ev, ds, nil
}

// Delivery returns a delivery of tenant, StateDelivering while in flight.
func (s *Service) Delivery(ctx context.Context, tenant, id string) (Delivery, error) {
	if !validID(id) {
		return Delivery{}, DeliveryNotFound()
	}
	if err := s.settled(ctx, tenant); err != nil {
		return Delivery{}, err
	}
	d, err := s.store.Delivery(ctx, tenant, id)
	if err != nil {
		return Delivery{}, err
	}
	s.overlay(&d)
	return d, nil
}

func (s *Service) overlay(d *Delivery) {
	if d.State == StatePending && s.disp != nil && s.disp.InFlight(d.ID) {
		d.State = StateDelivering
	}
}

// Page sizes of listings.
const (
	DefaultPageLimit = 100  // when a listing names no limit
	MaxPageLimit     = 1000 // the largest limit a listing takes
)

// DeadLetters pages through tenant's dead deliveries, at most limit (0:
// DefaultPageLimit) from cursor on.
func (s *Service) DeadLetters(ctx context.Context, tenant, cursor string, limit int) ([]Delivery, string, error) {
	if _, err := s.Tenant(ctx, tenant); err != nil {
		return nil, "", err
	}
	if limit <= 0 {
		limit = DefaultPageLimit
	}
	if limit > MaxPageLimit {
		return nil, "", Errorf(CodeInvalidField, "limit", "limit must be from 1 to %d", MaxPageLimit)
	}
	return s.store.DeadLetters(ctx, tenant, cursor, limit)
}

// Replay starts a new delivery cycle now for a delivery of tenant, whatever
// its state: same event id and stored body, signed afresh at send time. The
// replay is recorded on the delivery with by. A delivery whose endpoint
// was deleted is refused (CodeEndpointNotFound, field endpoint_id) and
// left as it is: its cycle could only die "endpoint deleted". An endpoint
// deleted while the replay is being made still ends it that way.
func (s *Service) Replay(ctx context.Context, tenant, id, by string) (Delivery, error) {
	if !validID(id) {
		return Delivery{}, DeliveryNotFound()
	}
	policyOf, err := s.cyclePolicies(ctx, tenant)
	if err != nil {
		return Delivery{}, err
	}
	eps, err := s.store.Endpoints(ctx, tenant)
	if err != nil {
		return Delivery{}, err
	}
	if err := s.settled(ctx, tenant); err != nil { // id may be owed still, as Delivery
		return Delivery{}, err
	}
	r := Replay{At: s.now(), By: by}
	d, err := s.store.UpdateDelivery(ctx, id, func(d Delivery) (Delivery, error) {
		if d.TenantID != tenant {
			return Delivery{}, DeliveryNotFound()
		}
		if !slices.ContainsFunc(eps, func(ep Endpoint) bool { return ep.ID == d.EndpointID }) {
			return Delivery{}, endpointDeleted(d)
		}
		return ReplayDelivery(d, r, policyOf(d.EndpointID)), nil
	})
	if err != nil {
		return Delivery{}, err
	}
	if s.disp != nil && d.State == StatePending { // an ordered one may wait behind its line's head
		s.disp.Enqueue(d.ID, d.TenantID, d.EndpointID, d.NextAttemptAt)
	}
	return d, nil
}

// endpointDeleted is the error of a replay of d, whose endpoint was
// deleted.
func endpointDeleted(d Delivery) *Error {
	return Errorf(CodeEndpointNotFound, "endpoint_id", "delivery %s was to endpoint %s, which was deleted: there is nowhere to send it again", d.ID, d.EndpointID)
}

// cyclePolicies returns, by endpoint ID, the retry policy a cycle of a
// delivery of tenant that starts now follows (CyclePolicy of the
// endpoint and the tenant as they are now; the tenant's for an endpoint
// deleted since, and the standard one when the tenant is gone too).
func (s *Service) cyclePolicies(ctx context.Context, tenant string) (func(endpointID string) RetryPolicyName, error) {
	t, err := s.store.Tenant(ctx, tenant)
	if ErrorCode(err) == CodeTenantNotFound {
		return func(string) RetryPolicyName { return "" }, nil
	}
	if err != nil {
		return nil, err
	}
	eps, err := s.store.Endpoints(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return func(id string) RetryPolicyName {
		for i := range eps {
			if eps[i].ID == id {
				return CyclePolicy(t.RetryPolicy, eps[i])
			}
		}
		return CyclePolicy(t.RetryPolicy, Endpoint{})
	}, nil
}

// MaxReplaySelected bounds how many deliveries one ReplaySelected takes.
const MaxReplaySelected = 100

// ReplaySelected replays the deliveries ids of tenant (at most
// MaxReplaySelected; repeats count once), each recorded with by, and
// returns them as replayed. Every ID is checked before any is replayed:
// one that is not the tenant's delivery fails the whole call
// (CodeDeliveryNotFound), and nothing is replayed. They are replayed in
// their lines' order (CompareLineOrder), so that of several deliveries
// of one line the lowest sequence becomes its head and the others wait
// behind it, as a range replay does.
func (s *Service) ReplaySelected(ctx context.Context, tenant string, ids []string, by string) ([]Delivery, error) {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	if len(ids) == 0 {
		return nil, Errorf(CodeInvalidField, "id", "select at least one delivery")
	}
	if len(ids) > MaxReplaySelected {
		return nil, Errorf(CodeInvalidField, "id", "at most %d deliveries at once; for more, replay dead letters by time range", MaxReplaySelected)
	}
	eps, err := s.store.Endpoints(ctx, tenant)
	if err != nil {
		return nil, err
	}
	ds := make([]Delivery, len(ids))
	for i, id := range ids {
		d, err := s.Delivery(ctx, tenant, id)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(eps, func(ep Endpoint) bool { return ep.ID == d.EndpointID }) {
			return nil, endpointDeleted(d)
		}
		ds[i] = d
	}
	slices.SortFunc(ds, CompareLineOrder)
	for i, d := range ds {
		r, err := s.Replay(ctx, tenant, d.ID, by)
		if err != nil {
			return ds[:i], err
		}
		ds[i] = r
	}
	return ds, nil
}

// Skip lets the line of delivery id of tenant go on without it: it must
// be a dead delivery blocking its line (its endpoint's on_dead is
// block), else CodeNotBlocking. The skip is recorded on the delivery
// with by, and the line's next delivery is promoted and handed to the
// dispatcher.
func (s *Service) Skip(ctx context.Context, tenant, id, by string) (Delivery, error) {
	if !validID(id) {
		return Delivery{}, DeliveryNotFound()
	}
	if err := s.settled(ctx, tenant); err != nil { // id may be owed still, as Delivery
		return Delivery{}, err
	}
	sk := Skip{At: s.now(), By: by}
	d, err := s.store.UpdateDelivery(ctx, id, func(d Delivery) (Delivery, error) {
		if d.TenantID != tenant {
			return Delivery{}, DeliveryNotFound()
		}
		return SkipDelivery(d, sk)
	})
	if err != nil {
		return Delivery{}, err
	}
	if s.disp != nil {
		s.disp.FollowLine(d)
	}
	return d, nil
}

// NewSecret returns a new signing secret: "whsec_" + base64 of 32 random
// bytes. Secrets carry no environment in their prefix ("whsec_test_…"):
// the official Standard Webhooks libraries base64-decode everything after
// "whsec_" and would reject it. A test tenant's secrets differ from a live
// one's only in being the tenant's; the answers that show a secret name
// the environment.
func NewSecret() string {
	var b [32]byte
	rand.Read(b[:]) // never returns an error (see newAccessTokenValue)
	return SecretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// SecretPrefix starts every signing secret.
const SecretPrefix = verify.SecretPrefix
