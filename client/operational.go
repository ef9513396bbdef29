package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"time"
)

// Operational webhooks are webhookd's own events about what happens to
// the customers' endpoints, deliveries and tenants, sent to the
// operator's operational endpoints. Admin tokens only.

// The operational event types: an operational endpoint subscribes to
// some of them, or to AllEventTypes.
const (
	EventEndpointCreated   = "endpoint.created"
	EventEndpointUpdated   = "endpoint.updated"
	EventEndpointDeleted   = "endpoint.deleted"
	EventEndpointDisabled  = "endpoint.disabled"
	EventEndpointEnabled   = "endpoint.enabled"
	EventEndpointFailing   = "endpoint.failing"
	EventEndpointRecovered = "endpoint.recovered"
	EventDeliveryDead      = "delivery.dead"
	EventTenantDeleted     = "tenant.deleted"
	EventTaskFinished      = "task.finished"
)

// EndpointSource says who manages an operational endpoint.
type EndpointSource string

const (
	// SourceAPI: made through the API or the console, which change and
	// delete it.
	SourceAPI EndpointSource = "api"
	// SourceConfig: the server's [alerts] endpoint. Every start of the
	// server sets its URL and secret from its config file, and a start
	// without [alerts] deletes it; the API changes its event types,
	// description and disabled, and answers CodeConfigManaged to the
	// rest.
	SourceConfig EndpointSource = "config"
)

// OperationalEndpoint is an endpoint of the operator's that receives
// webhookd's operational events. It never carries a secret.
type OperationalEndpoint struct {
	ID          string         `json:"id"`
	URL         string         `json:"url"`
	EventTypes  []string       `json:"event_types"`
	Description string         `json:"description"`
	Disabled    bool           `json:"disabled"`
	Source      EndpointSource `json:"source"`
	// DisabledReason says who or what disabled it; "" while enabled.
	DisabledReason string    `json:"disabled_reason,omitempty"`
	DisabledAt     time.Time `json:"disabled_at,omitzero"`
	FailingSince   time.Time `json:"failing_since,omitzero"`
	LastFailure    string    `json:"last_failure,omitempty"`
	LastFailureAt  time.Time `json:"last_failure_at,omitzero"`
	Created        time.Time `json:"created"`
	Updated        time.Time `json:"updated"`
}

// OperationalEndpointInput is what CreateOperationalEndpoint makes.
type OperationalEndpointInput struct {
	URL string `json:"url"`
	// EventTypes are operational event types (EventEndpointCreated…),
	// or []string{AllEventTypes} for every one.
	EventTypes  []string `json:"event_types"`
	Description string   `json:"description,omitempty"`
	// Disabled makes it disabled: its events are held until it is
	// enabled.
	Disabled bool `json:"disabled,omitempty"`
}

// OperationalEndpointPatch is what UpdateOperationalEndpoint changes:
// nil fields are left as they are.
type OperationalEndpointPatch struct {
	URL         *string   `json:"url,omitempty"`
	EventTypes  *[]string `json:"event_types,omitempty"`
	Description *string   `json:"description,omitempty"`
	Disabled    *bool     `json:"disabled,omitempty"`
	// DeliverHeld, with Disabled set to false, sends the events held
	// while it was disabled; false dead-letters them.
	DeliverHeld bool `json:"deliver_held,omitempty"`
}

// OperationalSecret is an operational endpoint with its signing secret,
// which no later read shows again: the answer of its creation and of a
// rotation.
type OperationalSecret struct {
	OperationalEndpoint
	Secret string `json:"secret"`
	// PreviousSecretExpires is when the previous secret stops signing;
	// zero for a new endpoint, or when it stopped at once.
	PreviousSecretExpires time.Time `json:"previous_secret_expires,omitzero"`
}

// OperationalEvent is the data of an operational event, as its receiver
// decodes the envelope's "data": each type sets the fields its schema
// (the server's OpenAPI document, webhooks) names, and leaves the
// others zero. Times are the server's, in milliseconds.
type OperationalEvent struct {
	// Tenant is the customer's tenant it is about; "" for none.
	Tenant     string `json:"tenant,omitempty"`
	EndpointID string `json:"endpoint_id,omitempty"`
	DeliveryID string `json:"delivery_id,omitempty"`
	EventID    string `json:"event_id,omitempty"`
	EventType  string `json:"event_type,omitempty"`
	TaskID     string `json:"task_id,omitempty"`
	// Reason says why, where there is one: why an endpoint was disabled
	// or failed, why a delivery is dead.
	Reason string `json:"reason,omitempty"`
	// Changed names the settings an endpoint.updated changed.
	Changed []string `json:"changed,omitempty"`
	// By and DeliverHeld say who enabled an endpoint, and whether its
	// held deliveries were sent.
	By          string `json:"by,omitempty"`
	DeliverHeld bool   `json:"deliver_held,omitempty"`
	// FailingSince is when an endpoint's run of failures began.
	FailingSince time.Time `json:"failing_since,omitzero"`
	// Attempts and LastStatus are a dead delivery's, in its last cycle.
	Attempts   int `json:"attempts,omitempty"`
	LastStatus int `json:"last_status,omitempty"`
	// Force says a tenant was deleted with force.
	Force bool `json:"force,omitempty"`
	// Kind, State and the counts are a finished task's (Reason: why it
	// failed).
	Kind    string `json:"kind,omitempty"`
	State   string `json:"state,omitempty"`
	Done    int    `json:"done,omitempty"`
	Skipped int    `json:"skipped,omitempty"`
	Total   int    `json:"total,omitempty"`
	// At is when it happened.
	At time.Time `json:"at"`
}

// DecodeOperationalEvent returns the data of env, an operational event's
// envelope (verify it first: verify.Verifier).
func DecodeOperationalEvent(env Envelope) (OperationalEvent, error) {
	var ev OperationalEvent
	err := json.Unmarshal(env.Data, &ev)
	return ev, err
}

// CreateOperationalEndpoint makes an operational endpoint and returns it
// with its signing secret. No read shows the secret again.
func (c *Client) CreateOperationalEndpoint(ctx context.Context, in OperationalEndpointInput) (OperationalSecret, error) {
	var ep OperationalSecret
	_, _, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/operational-endpoints", body: in}, &ep)
	return ep, err
}

// OperationalEndpoints walks the operational endpoints, in creation
// order, the [alerts] one (SourceConfig) among them.
func (c *Client) OperationalEndpoints(ctx context.Context, o ListOptions) iter.Seq2[OperationalEndpoint, error] {
	return list[OperationalEndpoint](ctx, c, "/v1/operational-endpoints", limitQuery(o.Limit), o.Cursor)
}

// OperationalEndpoint returns operational endpoint id.
func (c *Client) OperationalEndpoint(ctx context.Context, id string) (OperationalEndpoint, error) {
	var ep OperationalEndpoint
	_, _, err := c.do(ctx, get("/v1/operational-endpoints/"+seg(id), nil), &ep)
	return ep, err
}

// UpdateOperationalEndpoint changes the fields of operational endpoint
// id that p sets.
func (c *Client) UpdateOperationalEndpoint(ctx context.Context, id string, p OperationalEndpointPatch) (OperationalEndpoint, error) {
	var ep OperationalEndpoint
	_, _, err := c.do(ctx, request{method: http.MethodPatch, path: "/v1/operational-endpoints/" + seg(id), body: p}, &ep)
	return ep, err
}

// DeleteOperationalEndpoint deletes operational endpoint id.
func (c *Client) DeleteOperationalEndpoint(ctx context.Context, id string) error {
	_, _, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/operational-endpoints/" + seg(id)}, nil)
	return err
}

// RotateOperationalSecret gives operational endpoint id a new secret, as
// RotateSecret does an endpoint (grace: DefaultGrace, 0 or a window).
func (c *Client) RotateOperationalSecret(ctx context.Context, id string, grace time.Duration) (OperationalSecret, error) {
	body := struct {
		Grace string `json:"grace,omitempty"`
	}{}
	if grace != DefaultGrace {
		body.Grace = grace.String()
	}
	var res OperationalSecret
	_, _, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/operational-endpoints/" + seg(id) + "/secret/rotate", body: body}, &res)
	return res, err
}
