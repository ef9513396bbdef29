package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Operational webhooks are webhookd's own events about what happens to
// the customers' endpoints, deliveries, tenants and tasks, sent to the
// operator's operational endpoints: the endpoints of the reserved
// OperatorTenant, which the API manages under /v1/operational-endpoints
// and the config file's [alerts] adds one to. They are delivered as any
// other event is: stored, signed with Standard Webhooks headers, retried
// with the standard policy, dead-lettered.
//
// An operational event is best effort: emitOperational is called after
// the action it tells of has committed, and never slows that action or
// makes it fail. It queues the event (OperationalSink), and a goroutine
// of its own ingests it into OperatorTenant; a full queue, a stopped node
// or a store error drops it, and says so in the log. An event about
// OperatorTenant itself is never emitted: an event about an operational
// endpoint's delivery would be delivered to it, and so on.

// The operational event types (OperationalEventTypes). endpoint.failing,
// endpoint.disabled and delivery.dead are the alerts [alerts] always sent
// (health.go); an endpoint.disabled also comes of a request now.
const (
	OpEndpointCreated   = "endpoint.created"
	OpEndpointUpdated   = "endpoint.updated"
	OpEndpointDeleted   = "endpoint.deleted"
	OpEndpointDisabled  = AlertEndpointDisabled
	OpEndpointEnabled   = "endpoint.enabled"
	OpEndpointFailing   = AlertEndpointFailing
	OpEndpointRecovered = AlertEndpointRecovered
	OpDeliveryDead      = AlertDeliveryDead
	OpTenantDeleted     = "tenant.deleted"
	OpTaskFinished      = "task.finished"
)

// OperationalEventType is one type of operational event: its name and
// what it tells. Its data's schema is in the OpenAPI document's webhooks.
type OperationalEventType struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// OperationalEventTypes are the types an operational endpoint may
// subscribe to, in the order the documents list them. They are not in
// the customers' catalogue (EventTypes): an event of OperatorTenant needs
// no catalogue entry, and a customer never sees these.
var OperationalEventTypes = []OperationalEventType{
	{OpEndpointCreated, "a customer's endpoint was created"},
	{OpEndpointUpdated, "a customer's endpoint was changed (its URL, event types, description, ordering, channels, retry policy, headers, rate limit or send_traceparent)"},
	{OpEndpointDeleted, "a customer's endpoint was deleted"},
	{OpEndpointDisabled, "an endpoint was disabled: by a request, or by webhookd (it answered 410 Gone or asked to be disabled, or failed every attempt for too long)"},
	{OpEndpointEnabled, "a disabled endpoint was enabled again"},
	{OpEndpointFailing, "an endpoint failed an attempt after a success (or for the first time)"},
	{OpEndpointRecovered, "a failing endpoint answered an attempt with success"},
	{OpDeliveryDead, "a delivery's attempts ended it in the dead letters"},
	{OpTenantDeleted, "a tenant was deleted"},
	{OpTaskFinished, "a background task ended: succeeded or failed"},
}

// operationalType reports whether name is one of OperationalEventTypes.
func operationalType(name string) bool {
	return slices.ContainsFunc(OperationalEventTypes, func(t OperationalEventType) bool { return t.Name == name })
}

// configEventTypes are the event types the [alerts] endpoint subscribes
// to when it is made: the three [alerts] always sent. A change through
// the API is kept.
var configEventTypes = []string{OpEndpointFailing, OpEndpointDisabled, OpDeliveryDead}

// EndpointSource says who manages an operational endpoint
// (Endpoint.Source).
type EndpointSource string

const (
	// SourceAPI: made with POST /v1/operational-endpoints (or the
	// console); the API changes and deletes it.
	SourceAPI EndpointSource = "api"
	// SourceConfig: the config file's [alerts]. Every start sets its URL
	// and secret from the file, and a start without [alerts] deletes it;
	// the API may change its event types, description and disabled, and
	// refuses the rest (CodeConfigManaged).
	SourceConfig EndpointSource = "config"
)

// sourceOf returns ep's source, reading "" as SourceConfig (see
// Endpoint.Source).
func sourceOf(ep Endpoint) EndpointSource {
	if ep.Source == "" {
		return SourceConfig
	}
	return ep.Source
}

// CheckStoredSource reports what is wrong with ep's Source as stored: a
// value the engine never writes, or one on a customer's endpoint (only
// OperatorTenant's have a source). Check and migrate hold stores to it.
func CheckStoredSource(ep Endpoint) error {
	switch {
	case ep.Source == "":
		return nil
	case ep.Source != SourceAPI && ep.Source != SourceConfig:
		return Errorf(CodeInvalidField, "source", "source %q is none of api, config", ep.Source)
	case ep.TenantID != OperatorTenant:
		return Errorf(CodeInvalidField, "source", "source %q on an endpoint of a customer's tenant: only operational endpoints have one", ep.Source)
	}
	return nil
}

// MaxOperationalEndpoints is how many operational endpoints the API may
// make; the [alerts] endpoint is not counted against it.
const MaxOperationalEndpoints = 20

// OperationalEndpoint is an operational endpoint as the API shows it:
// its own fields, its health, and where it comes from. Never a secret.
type OperationalEndpoint struct {
	ID          string   `json:"id"`
	URL         string   `json:"url"`
	EventTypes  []string `json:"event_types"`
	Description string   `json:"description"`
	Disabled    bool     `json:"disabled"`
	// Source is SourceAPI or SourceConfig.
	Source         EndpointSource `json:"source"`
	DisabledReason string         `json:"disabled_reason,omitempty"`
	DisabledAt     time.Time      `json:"disabled_at,omitzero"`
	FailingSince   time.Time      `json:"failing_since,omitzero"`
	LastFailure    string         `json:"last_failure,omitempty"`
	LastFailureAt  time.Time      `json:"last_failure_at,omitzero"`
	Created        time.Time      `json:"created"`
	Updated        time.Time      `json:"updated"`
}

// operationalView is ep as an OperationalEndpoint.
func operationalView(ep Endpoint) OperationalEndpoint {
	return OperationalEndpoint{
		ID: ep.ID, URL: ep.URL, EventTypes: ep.EventTypes, Description: ep.Description,
		Disabled: ep.Disabled, Source: sourceOf(ep),
		DisabledReason: ep.DisabledReason, DisabledAt: ep.DisabledAt,
		FailingSince: ep.FailingSince, LastFailure: ep.LastFailure, LastFailureAt: ep.LastFailureAt,
		Created: ep.Created, Updated: ep.Updated,
	}
}

// OperationalEndpointInput is the body of POST /v1/operational-endpoints.
type OperationalEndpointInput struct {
	URL string `json:"url"`
	// EventTypes are the operational event types it receives, or ["*"]
	// for every one (those added later included).
	EventTypes  []string `json:"event_types"`
	Description string   `json:"description"`
	// Disabled makes it disabled: its events are held until it is
	// enabled.
	Disabled bool `json:"disabled"`
}

// OperationalEndpointPatch is the body of PATCH
// /v1/operational-endpoints/{id}; nil fields are left as they are.
type OperationalEndpointPatch struct {
	URL         *string   `json:"url"`
	EventTypes  *[]string `json:"event_types"`
	Description *string   `json:"description"`
	Disabled    *bool     `json:"disabled"`
	// DeliverHeld, with disabled false, sends the events held while it
	// was disabled; without it they are dead-lettered (as
	// SetEndpointEnabled).
	DeliverHeld bool `json:"deliver_held"`
	// By is who asks, recorded on the replays of held deliveries; not
	// read from JSON. "": "admin".
	By string `json:"-"`
}

// OperationalSecret is the answer of a new operational endpoint or of a
// rotation of its secret: the secret no read shows again.
type OperationalSecret struct {
	Endpoint OperationalEndpoint
	Secret   string
	// PreviousExpires is when the previous secret stops signing; zero
	// for a new endpoint, or when it stopped at once.
	PreviousExpires time.Time
}

// ConfigManaged is the error for a change through the API of what the
// config file's [alerts] sets: field "url" or "secret", or the endpoint
// itself ("id", a deletion).
func ConfigManaged(field string) *Error {
	what := map[string]string{"url": "its URL is", "secret": "its secret is", "id": "it is"}[field]
	return Errorf(CodeConfigManaged, field, "this operational endpoint comes from [alerts] in the config file: %s set there, at every start (edit the file and restart; without [alerts] it is deleted)", what)
}

// checkOperationalTypes validates an operational endpoint's event_types:
// ["*"] alone, or names of OperationalEventTypes without repeats.
func checkOperationalTypes(types []string) ([]string, error) {
	const field = "event_types"
	if len(types) == 0 {
		return nil, Errorf(CodeInvalidField, field, `event_types must list at least one type, or be ["*"] for all`)
	}
	if len(types) > len(OperationalEventTypes) {
		return nil, Errorf(CodeInvalidField, field, "at most %d event types: there are no more", len(OperationalEventTypes))
	}
	if len(types) == 1 && types[0] == AllEventTypes {
		return []string{AllEventTypes}, nil
	}
	names := make([]string, len(OperationalEventTypes))
	for i, t := range OperationalEventTypes {
		names[i] = t.Name
	}
	for i, t := range types {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case t == AllEventTypes:
			return nil, Errorf(CodeInvalidField, f, `"*" must be the only entry`)
		case !operationalType(t):
			return nil, Errorf(CodeUnknownEventType, f, "%q is no operational event type; they are %s", t, strings.Join(names, ", "))
		case slices.Contains(types[:i], t):
			return nil, Errorf(CodeInvalidField, f, "event type %q is listed twice", t)
		}
	}
	return slices.Clone(types), nil
}

// checkOperationalURL checks an operational endpoint's URL as every
// endpoint's is: its form and the target policy.
func (s *Service) checkOperationalURL(ctx context.Context, url string) error {
	if err := ValidateEndpointURL(url); err != nil {
		return err
	}
	return s.opts.Targets.checkTargetURL(ctx, url, s.opts.LookupHost)
}

// ensureOperatorTenant makes the reserved tenant, idempotently.
func (s *Service) ensureOperatorTenant(ctx context.Context) error {
	now := s.now()
	if _, _, err := s.store.PutTenant(ctx, Tenant{ID: OperatorTenant, Name: "webhookd operator", Environment: EnvironmentLive, Created: now, Updated: now}); err != nil {
		return fmt.Errorf("engine: operator tenant: %w", err)
	}
	return nil
}

// operatorEndpoints returns the operational endpoints; none when the
// operator tenant was never made.
func (s *Service) operatorEndpoints(ctx context.Context) ([]Endpoint, error) {
	eps, err := s.store.Endpoints(ctx, OperatorTenant)
	if ErrorCode(err) == CodeTenantNotFound {
		return []Endpoint{}, nil
	}
	return eps, err
}

// operatorEndpoint returns operational endpoint id (CodeEndpointNotFound).
func (s *Service) operatorEndpoint(ctx context.Context, id string) (Endpoint, error) {
	if !validID(id) {
		return Endpoint{}, EndpointNotFound()
	}
	ep, err := s.store.Endpoint(ctx, OperatorTenant, id)
	if ErrorCode(err) == CodeTenantNotFound {
		return Endpoint{}, EndpointNotFound()
	}
	return ep, err
}

// CreateOperationalEndpoint makes an operational endpoint (SourceAPI) and
// returns it with its signing secret, which no read shows again. Its URL
// obeys the same target policy as every endpoint's; at most
// MaxOperationalEndpoints (CodeLimitReached).
func (s *Service) CreateOperationalEndpoint(ctx context.Context, in OperationalEndpointInput) (OperationalSecret, error) {
	if err := s.checkOperationalURL(ctx, in.URL); err != nil {
		return OperationalSecret{}, err
	}
	types, err := checkOperationalTypes(in.EventTypes)
	if err != nil {
		return OperationalSecret{}, err
	}
	if err := ValidateText("description", in.Description, MaxDescriptionLen, FreeText); err != nil {
		return OperationalSecret{}, err
	}
	if err := s.ensureOperatorTenant(ctx); err != nil {
		return OperationalSecret{}, err
	}
	eps, err := s.operatorEndpoints(ctx)
	if err != nil {
		return OperationalSecret{}, err
	}
	made := 0
	for _, ep := range eps {
		if sourceOf(ep) == SourceAPI {
			made++
		}
	}
	// The store's limit counts every endpoint of the tenant, the
	// [alerts] one among them: bound the API's by what is there now, and
	// let the store refuse a create that raced past the count.
	limitReached := Errorf(CodeLimitReached, "", "there are %d operational endpoints, the most there may be: delete one first", MaxOperationalEndpoints)
	if made >= MaxOperationalEndpoints {
		return OperationalSecret{}, limitReached
	}
	secret, now := NewSecret(), s.now()
	ep := Endpoint{
		ID: NewID("ep"), TenantID: OperatorTenant, URL: in.URL, EventTypes: types,
		Description: in.Description, Created: now, Updated: now, Source: SourceAPI,
		Secrets: []Secret{{Key: secret}},
	}
	if in.Disabled {
		ep.Disabled, ep.DisabledAt, ep.DisabledReason = true, now, disabledByRequest+" (admin)"
	}
	if err := s.store.CreateEndpoint(ctx, ep, len(eps)-made+MaxOperationalEndpoints); err != nil {
		if ErrorCode(err) == CodeLimitReached {
			return OperationalSecret{}, limitReached
		}
		return OperationalSecret{}, err
	}
	s.operationalChanged()
	return OperationalSecret{Endpoint: operationalView(ep), Secret: secret}, nil
}

// OperationalEndpoints lists the operational endpoints in creation order.
func (s *Service) OperationalEndpoints(ctx context.Context) ([]OperationalEndpoint, error) {
	eps, err := s.operatorEndpoints(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]OperationalEndpoint, len(eps))
	for i, ep := range eps {
		out[i] = operationalView(ep)
	}
	return out, nil
}

// OperationalEndpoint returns operational endpoint id.
func (s *Service) OperationalEndpoint(ctx context.Context, id string) (OperationalEndpoint, error) {
	ep, err := s.operatorEndpoint(ctx, id)
	if err != nil {
		return OperationalEndpoint{}, err
	}
	return operationalView(ep), nil
}

// UpdateOperationalEndpoint applies p to operational endpoint id.
// Disabling and enabling are SetEndpointEnabled's. The URL of the
// [alerts] endpoint is the config file's: CodeConfigManaged.
func (s *Service) UpdateOperationalEndpoint(ctx context.Context, id string, p OperationalEndpointPatch) (OperationalEndpoint, error) {
	if !validID(id) {
		return OperationalEndpoint{}, EndpointNotFound()
	}
	if p.URL != nil {
		if err := s.checkOperationalURL(ctx, *p.URL); err != nil {
			return OperationalEndpoint{}, err
		}
	}
	var types []string
	if p.EventTypes != nil {
		var err error
		if types, err = checkOperationalTypes(*p.EventTypes); err != nil {
			return OperationalEndpoint{}, err
		}
	}
	if p.Description != nil {
		if err := ValidateText("description", *p.Description, MaxDescriptionLen, FreeText); err != nil {
			return OperationalEndpoint{}, err
		}
	}
	now := s.now()
	ep, err := s.store.UpdateEndpoint(ctx, OperatorTenant, id, func(ep *Endpoint) error {
		if p.URL != nil && *p.URL != ep.URL && sourceOf(*ep) == SourceConfig {
			return ConfigManaged("url")
		}
		if p.URL != nil {
			ep.URL = *p.URL
		}
		if p.EventTypes != nil {
			ep.EventTypes = types
		}
		if p.Description != nil {
			ep.Description = *p.Description
		}
		ep.Updated = now
		return nil
	})
	if ErrorCode(err) == CodeTenantNotFound {
		err = EndpointNotFound()
	}
	if err == nil && p.Disabled != nil {
		by := p.By
		if by == "" {
			by = "admin"
		}
		ep, _, err = s.SetEndpointEnabled(ctx, OperatorTenant, id, !*p.Disabled, p.DeliverHeld, by)
	}
	if err != nil {
		return OperationalEndpoint{}, err
	}
	s.operationalChanged()
	return operationalView(ep), nil
}

// DeleteOperationalEndpoint deletes operational endpoint id as
// DeleteEndpoint deletes any. The [alerts] endpoint is the config
// file's: CodeConfigManaged.
func (s *Service) DeleteOperationalEndpoint(ctx context.Context, id string) error {
	ep, err := s.operatorEndpoint(ctx, id)
	if err != nil {
		return err
	}
	if sourceOf(ep) == SourceConfig {
		return ConfigManaged("id")
	}
	if err := s.DeleteEndpoint(ctx, OperatorTenant, id); err != nil {
		return err
	}
	s.operationalChanged()
	return nil
}

// RotateOperationalSecret gives operational endpoint id a new secret, as
// RotateSecret does any endpoint's. The [alerts] endpoint's secret is the
// config file's: CodeConfigManaged.
func (s *Service) RotateOperationalSecret(ctx context.Context, id string, in RotateInput) (OperationalSecret, error) {
	grace, err := in.grace()
	if err != nil {
		return OperationalSecret{}, err
	}
	if !validID(id) {
		return OperationalSecret{}, EndpointNotFound()
	}
	secret, err := in.newKey()
	if err != nil {
		return OperationalSecret{}, err
	}
	now := s.now()
	ep, err := s.store.UpdateEndpoint(ctx, OperatorTenant, id, func(ep *Endpoint) error {
		if sourceOf(*ep) == SourceConfig {
			return ConfigManaged("secret")
		}
		if err := checkNewKey(ep.Secrets, secret); err != nil {
			return err
		}
		ep.Secrets = rotateSecrets(ep.Secrets, secret, now, grace)
		ep.Updated = now
		return nil
	})
	if ErrorCode(err) == CodeTenantNotFound {
		err = EndpointNotFound()
	}
	if err != nil {
		return OperationalSecret{}, err
	}
	res := OperationalSecret{Endpoint: operationalView(ep), Secret: secret}
	if grace > 0 {
		res.PreviousExpires = now.Add(grace)
	}
	return res, nil
}

// EnsureOperatorEndpoint makes sure of the [alerts] endpoint
// (SourceConfig), at url signed with secret, idempotently and safely
// when the nodes of a cluster start at once: made with configEventTypes
// if there is none; else its URL and secret set from the file, and
// enabled again if webhookd disabled it (a person's disabling, through
// the API or the console, stays). An [alerts] endpoint stored before
// sources were is taken as it, and subscribed to configEventTypes (the
// types it was sent; it was stored with ["*"]). The URL obeys the same
// target policy as every endpoint.
func (s *Service) EnsureOperatorEndpoint(ctx context.Context, url, secret string) error {
	if err := s.ensureOperatorTenant(ctx); err != nil {
		return err
	}
	defer s.operationalChanged()
	for range 10 {
		eps, err := s.operatorEndpoints(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(eps, func(ep Endpoint) bool { return sourceOf(ep) == SourceConfig })
		if i >= 0 {
			return s.updateConfigEndpoint(ctx, eps[i].ID, url, secret)
		}
		now := s.now()
		err = s.store.CreateEndpoint(ctx, Endpoint{
			ID: NewID("ep"), TenantID: OperatorTenant, URL: url, EventTypes: slices.Clone(configEventTypes),
			Description: "operator alerts ([alerts] in the config file)", Created: now, Updated: now,
			Source: SourceConfig, Secrets: []Secret{{Key: secret}},
		}, len(eps)+1)
		if ErrorCode(err) != CodeLimitReached {
			return err
		}
		// Another node of a cluster, starting at the same time, made it
		// first (the limit let one create through), or an API create
		// came between: read again.
	}
	return fmt.Errorf("engine: the [alerts] endpoint: the operator's endpoints kept changing while it was made")
}

// updateConfigEndpoint is EnsureOperatorEndpoint's update of the
// [alerts] endpoint id.
func (s *Service) updateConfigEndpoint(ctx context.Context, id, url, secret string) error {
	now := s.now()
	reenable := false
	_, err := s.store.UpdateEndpoint(ctx, OperatorTenant, id, func(ep *Endpoint) error {
		if ep.Source == "" { // stored before sources: the [alerts] endpoint, ["*"] then
			ep.Source, ep.EventTypes = SourceConfig, slices.Clone(configEventTypes)
		}
		if ep.URL != url || len(ep.Secrets) != 1 || ep.Secrets[0].Key != secret {
			ep.URL, ep.Secrets, ep.Updated = url, []Secret{{Key: secret}}, now
		}
		reenable = ep.Disabled && !strings.HasPrefix(ep.DisabledReason, disabledByRequest)
		return nil
	})
	if err != nil || !reenable {
		return err
	}
	_, _, err = s.SetEndpointEnabled(ctx, OperatorTenant, id, true, false, "webhookd start ([alerts])")
	return err
}

// RemoveOperatorEndpoint deletes the [alerts] endpoint, if there is one:
// a start without [alerts] calls it, so that removing the section stops
// the alerts. The API's operational endpoints stay.
func (s *Service) RemoveOperatorEndpoint(ctx context.Context) error {
	eps, err := s.operatorEndpoints(ctx)
	if err != nil {
		return err
	}
	for _, ep := range eps {
		if sourceOf(ep) != SourceConfig {
			continue
		}
		if err := s.DeleteEndpoint(ctx, OperatorTenant, ep.ID); err != nil && ErrorCode(err) != CodeEndpointNotFound {
			return err
		}
		s.operationalChanged()
	}
	return nil
}

// emitOperational emits an operational event of eventType with data (a
// JSON object carrying "tenant" — absent for none —, the object's ID
// field, "reason" where there is one, and "at"), best effort: it queues
// the event and returns at once. Call it after the action it tells of
// has committed, and never fail the action for its error: it says the
// event could not be encoded or queued (and is dropped; the log says so
// too). Nothing is emitted about OperatorTenant, nor when the Service
// has no OperationalSink (a Node gives it one). In a map[string]any, a
// time.Time value is written in TimeFormat; other data must write its
// times so itself.
func (s *Service) emitOperational(ctx context.Context, eventType string, data any) error {
	_ = ctx // the event outlives the request that emits it: the sink has its own
	if s.ops == nil {
		return nil
	}
	if m, ok := data.(map[string]any); ok {
		m = withTimeText(m)
		if m["tenant"] == OperatorTenant {
			return nil
		}
		data = m
	}
	body, err := json.Marshal(data)
	if err != nil {
		err = fmt.Errorf("operational event %s: %w", eventType, err)
		s.ops.onErr(err)
		return err
	}
	var about struct {
		Tenant string `json:"tenant"`
	}
	if json.Unmarshal(body, &about) == nil && about.Tenant == OperatorTenant {
		return nil
	}
	return s.ops.Put(opItem{typ: eventType, body: body})
}

// withTimeText returns m with every time.Time value replaced by its text
// in TimeFormat (json.Marshal would write nine fraction digits).
func withTimeText(m map[string]any) map[string]any {
	var out map[string]any
	for k, v := range m {
		if t, ok := v.(time.Time); ok {
			if out == nil {
				out = make(map[string]any, len(m))
				for k, v := range m {
					out[k] = v
				}
			}
			out[k] = t.UTC().Format(TimeFormat)
		}
	}
	if out == nil {
		return m
	}
	return out
}

// operationalChanged tells the sink that the operational endpoints
// changed, so that the next event reads them again.
func (s *Service) operationalChanged() {
	if s.ops != nil {
		s.ops.subs.forget()
	}
}

// alertData is the data of the operational event of alert a.
func alertData(a Alert) map[string]any {
	d := a.Delivery
	data := map[string]any{"tenant": d.TenantID, "endpoint_id": d.EndpointID, "at": a.At}
	switch a.Kind {
	case AlertDeliveryDead:
		data["delivery_id"], data["event_id"], data["event_type"] = d.ID, d.EventID, d.EventType
		data["reason"], data["attempts"], data["last_status"] = d.Reason, d.CycleAttempts, d.LastStatus
	case AlertEndpointFailing:
		if a.Endpoint != nil {
			data["reason"] = a.Endpoint.LastFailure
			if !a.Endpoint.FailingSince.IsZero() {
				data["failing_since"] = a.Endpoint.FailingSince
			}
		}
	case AlertEndpointRecovered:
		if !a.FailingSince.IsZero() {
			data["failing_since"] = a.FailingSince
		}
	case AlertEndpointDisabled:
		if a.Endpoint != nil {
			data["reason"] = a.Endpoint.DisabledReason
		}
	}
	return withTimeText(data)
}

// opItem is one operational event in the sink's queue: an alert of the
// dispatcher's (alert set), or an event made by emitOperational.
type opItem struct {
	alert *Alert
	typ   string
	body  []byte
}

// OperationalSink takes operational events without blocking whoever
// emits them (the dispatcher's workers, the API's requests) and ingests
// them into OperatorTenant on a goroutine of its own, from Start to Stop,
// when an operational endpoint subscribes to their type. Repeated
// endpoint.failing (or endpoint.recovered) alerts of one endpoint within
// a minute, with no other health alert of it between, are sent once
// (concurrent attempts each see the same transition).
type OperationalSink struct {
	svc     *Service
	ch      chan opItem
	done    chan struct{}
	onErr   func(error)
	started bool
	ctx     context.Context    // the events' store calls; cancelled when a stop gives up waiting
	cancel  context.CancelFunc //
	subs    opSubscribers

	mu     sync.Mutex
	closed bool // ch is closed: Stop was called
}

// opQueue is how many operational events wait at most; one more is
// dropped.
const opQueue = 1024

// NewOperationalSink returns a sink that emits through svc's store, and
// makes it svc's (emitOperational); onErr is told of events that could
// not be stored or were dropped.
func NewOperationalSink(svc *Service, onErr func(error)) *OperationalSink {
	ctx, cancel := context.WithCancel(context.Background())
	k := &OperationalSink{svc: svc, ch: make(chan opItem, opQueue), done: make(chan struct{}), onErr: onErr, ctx: ctx, cancel: cancel}
	k.subs.store = svc.store
	svc.ops = k
	return k
}

// Start ingests the events Put queues until Stop.
func (k *OperationalSink) Start() {
	k.started = true
	go k.run()
}

// PutAlert queues the operational event of alert a (the dispatcher's
// OnAlert).
func (k *OperationalSink) PutAlert(a Alert) {
	k.Put(opItem{alert: &a, typ: a.Kind})
}

// Put queues it; when opQueue events are already waiting, or the sink
// has stopped, it drops it, tells onErr and returns why.
func (k *OperationalSink) Put(it opItem) error {
	k.mu.Lock()
	var dropped error
	switch {
	case k.closed:
		dropped = fmt.Errorf("operational event %s dropped: the sink has stopped (the node is stopping)", it.typ)
	default:
		select {
		case k.ch <- it:
		default:
			dropped = fmt.Errorf("operational event %s dropped: %d events waiting", it.typ, opQueue)
		}
	}
	k.mu.Unlock()
	if dropped != nil {
		k.onErr(dropped)
	}
	return dropped
}

// Stop ingests what is queued and stops. Call it after the dispatcher
// has stopped: an event Put after it is dropped. Safe to call twice, and
// before Start.
func (k *OperationalSink) Stop() {
	k.stopWithin(context.Background())
}

// stopWithin is Stop that waits for the queued events only until ctx
// ends; then it drops those not ingested yet and returns ctx's error
// (the sink's goroutine ends when the store call under way returns).
func (k *OperationalSink) stopWithin(ctx context.Context) error {
	k.mu.Lock()
	if !k.closed {
		k.closed = true
		close(k.ch)
	}
	k.mu.Unlock()
	if !k.started {
		return nil
	}
	select {
	case <-k.done:
		return nil
	case <-ctx.Done():
		k.cancel()
		return fmt.Errorf("engine: operational events: stop gave up waiting (%w): the events not stored yet are dropped", ctx.Err())
	}
}

// healthSeen is the last health alert the sink sent of an endpoint.
type healthSeen struct {
	kind string
	at   time.Time
}

func (k *OperationalSink) run() {
	defer close(k.done)
	last := map[string]healthSeen{} // endpoint ID → its last health alert sent
	for it := range k.ch {
		if k.ctx.Err() != nil {
			continue // a stop gave up waiting: dropped
		}
		if a := it.alert; a != nil {
			if a.Delivery.TenantID == OperatorTenant {
				continue // about an operational endpoint: it would loop
			}
			if a.Kind == AlertEndpointFailing || a.Kind == AlertEndpointRecovered {
				ep := a.Delivery.EndpointID
				if h, ok := last[ep]; ok && h.kind == a.Kind && a.At.Sub(h.at) < time.Minute {
					continue
				}
				if len(last) >= 4096 { // keep it bounded: only the last minute matters
					for id, h := range last {
						if a.At.Sub(h.at) >= time.Minute {
							delete(last, id)
						}
					}
				}
				last[ep] = healthSeen{a.Kind, a.At}
			} else if a.Kind == AlertEndpointDisabled {
				delete(last, a.Delivery.EndpointID)
			}
		}
		if err := k.send(it); err != nil {
			k.onErr(fmt.Errorf("operational event %s: %w", it.typ, err))
		}
	}
}

// send ingests it into OperatorTenant, when an operational endpoint
// subscribes to its type.
func (k *OperationalSink) send(it opItem) error {
	wanted, err := k.subs.wants(k.ctx, it.typ)
	if err != nil || !wanted {
		return err
	}
	if it.alert != nil {
		if it.body, err = json.Marshal(alertData(*it.alert)); err != nil {
			return err
		}
	}
	_, err = k.svc.ingest(k.ctx, OperatorTenant, IngestInput{Type: it.typ, Data: it.body})
	return err
}

// opSubscribers is what the sink knows of the operational endpoints: read
// at most once a second (another node's change is seen within a second),
// and again at once after this node's Service changed them.
type opSubscribers struct {
	store Store

	mu   sync.Mutex
	read time.Time // zero: read them again
	eps  []Endpoint
}

// opSubscribersTTL is how long the sink trusts what it read of the
// operational endpoints.
const opSubscribersTTL = time.Second

// forget makes the next wants read the endpoints again.
func (o *opSubscribers) forget() {
	o.mu.Lock()
	o.read = time.Time{}
	o.mu.Unlock()
}

// wants reports whether an operational endpoint, enabled or not (a
// disabled one holds its events), subscribes to typ.
func (o *opSubscribers) wants(ctx context.Context, typ string) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.read.IsZero() || time.Since(o.read) >= opSubscribersTTL {
		eps, err := o.store.Endpoints(ctx, OperatorTenant)
		switch {
		case ErrorCode(err) == CodeTenantNotFound:
			eps = nil
		case err != nil:
			return false, err
		}
		o.eps, o.read = eps, time.Now()
	}
	for i := range o.eps {
		if o.eps[i].Subscribes(typ) {
			return true, nil
		}
	}
	return false, nil
}

// endpointChanges names the fields of an endpoint's settings (as the API
// names them) that differ between before and after: the "changed" of an
// endpoint.updated event. Health, secrets and enabling are not settings
// here: they have events, or none, of their own.
func endpointChanges(before, after Endpoint) []string {
	var out []string
	add := func(name string, changed bool) {
		if changed {
			out = append(out, name)
		}
	}
	add("url", before.URL != after.URL)
	add("event_types", !slices.Equal(before.EventTypes, after.EventTypes))
	add("description", before.Description != after.Description)
	add("ordering", before.Ordering != after.Ordering)
	add("on_dead", before.OnDead != after.OnDead)
	add("channels", !slices.Equal(before.Channels, after.Channels))
	add("retry_policy", before.RetryPolicy != after.RetryPolicy)
	add("headers", !slices.Equal(before.Headers, after.Headers))
	add("rate_limit", before.RateLimit != after.RateLimit)
	add("send_traceparent", before.SendTraceparent != after.SendTraceparent)
	return out
}
