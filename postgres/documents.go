package postgres

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// The stored documents: the JSON in the doc column of tenants,
// event_types, endpoints, access_tokens and deliveries, and in
// endpoints.secrets. Their types are the store's own, not the engine's:
// the engine's JSON tags are the HTTP API's shape, and renaming a field
// of the API must not change what is on disk. One encode/decode pair per
// document; the pairs only convert, and times are stored as they are
// given (the callers give them in UTC: normalizeDelivery and the like).
//
// IMPORTANT: these types are on disk, in databases of every release. A
// field's JSON name, its omitempty or omitzero, and its type never
// change; testdata/documents holds documents as released, and
// TestDocuments requires that each still decodes to its value and
// encodes back to its bytes. A change of shape is a new format.
//
// Format: every document written so far is docFormat 1, which has no "v"
// member. A later format writes "v" (the number); a decoder reads the
// formats it knows and refuses any other, so that a node of an older
// webhookd never rewrites a newer document without the fields it does
// not know. The secrets document is a JSON array in format 1; a later
// format is an object with "v": format 2 (secretsFormatHeaders) is the
// one of an endpoint with custom headers.
const docFormat = 1

// checkFormat refuses the document of kind whose "v" is v unless this
// code reads that format (0, no "v": format 1).
func checkFormat(kind string, v int) error {
	if v != 0 && v != docFormat {
		return fmt.Errorf("postgres: stored %s is in format %d, which this webhookd does not read (it reads %d): run a newer webhookd", kind, v, docFormat)
	}
	return nil
}

// unmarshalDoc decodes the document of kind into v.
func unmarshalDoc(kind string, doc []byte, v any) error {
	if err := json.Unmarshal(doc, v); err != nil {
		return fmt.Errorf("postgres: stored %s does not decode: %w", kind, err)
	}
	return nil
}

type tenantDoc struct {
	V           int       `json:"v,omitempty"`
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Environment string    `json:"environment"`
	Created     time.Time `json:"created"`
	Updated     time.Time `json:"updated"`
	// RetryPolicy names the tenant's retry policy; absent: the standard
	// one (and every document written before retry policies).
	RetryPolicy string `json:"retry_policy,omitempty"`
}

func encodeTenant(t engine.Tenant) ([]byte, error) {
	return json.Marshal(tenantDoc{
		ID: t.ID, Name: t.Name, Environment: string(t.Environment),
		Created: t.Created, Updated: t.Updated, RetryPolicy: string(t.RetryPolicy),
	})
}

func decodeTenant(doc []byte) (engine.Tenant, error) {
	var r tenantDoc
	if err := unmarshalDoc("tenant", doc, &r); err != nil {
		return engine.Tenant{}, err
	}
	if err := checkFormat("tenant", r.V); err != nil {
		return engine.Tenant{}, err
	}
	if r.ID == "" {
		return engine.Tenant{}, errors.New("postgres: stored tenant has no id")
	}
	return engine.Tenant{
		ID: r.ID, Name: r.Name, Environment: engine.Environment(r.Environment),
		Created: r.Created, Updated: r.Updated, RetryPolicy: engine.RetryPolicyName(r.RetryPolicy),
	}, nil
}

type eventTypeDoc struct {
	V           int             `json:"v,omitempty"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Example     json.RawMessage `json:"example,omitempty"`
	Created     time.Time       `json:"created"`
	Updated     time.Time       `json:"updated"`
	Status      string          `json:"status,omitempty"` // "": active (and before statuses)
	Schema      json.RawMessage `json:"schema,omitempty"` // none: no schema (and before schemas)
}

func encodeEventType(et engine.EventType) ([]byte, error) {
	return json.Marshal(eventTypeDoc{
		Name: et.Name, Description: et.Description, Example: et.Example,
		Created: et.Created, Updated: et.Updated,
		Status: string(et.Status), Schema: et.Schema,
	})
}

func decodeEventType(doc []byte) (engine.EventType, error) {
	var r eventTypeDoc
	if err := unmarshalDoc("event type", doc, &r); err != nil {
		return engine.EventType{}, err
	}
	if err := checkFormat("event type", r.V); err != nil {
		return engine.EventType{}, err
	}
	if r.Name == "" {
		return engine.EventType{}, errors.New("postgres: stored event type has no name")
	}
	return engine.EventType{
		Name: r.Name, Description: r.Description, Example: r.Example,
		Created: r.Created, Updated: r.Updated,
		Status: engine.EventTypeStatus(r.Status), Schema: r.Schema,
	}, nil
}

// endpointDoc is an endpoint without its secrets (secretDoc).
type endpointDoc struct {
	V           int      `json:"v,omitempty"`
	ID          string   `json:"id"`
	TenantID    string   `json:"tenant"`
	URL         string   `json:"url"`
	EventTypes  []string `json:"event_types"`
	Description string   `json:"description"`
	Disabled    bool     `json:"disabled"`

	DisabledReason string    `json:"disabled_reason,omitempty"`
	DisabledAt     time.Time `json:"disabled_at,omitzero"`
	FailingSince   time.Time `json:"failing_since,omitzero"`
	LastFailure    string    `json:"last_failure,omitempty"`
	LastFailureAt  time.Time `json:"last_failure_at,omitzero"`
	Created        time.Time `json:"created"`
	Updated        time.Time `json:"updated"`

	VerificationRequired bool      `json:"verification_required"`
	Verified             time.Time `json:"verified,omitzero"`

	Ordering string `json:"ordering"` // "none", "key", "endpoint"; "" (absent): none
	OnDead   string `json:"on_dead"`  // "skip", "block"; "" (absent): skip

	// SecretReveals is the audit trail of the secrets' reveals, oldest
	// first; absent when there is none (every document written before
	// reveals).
	SecretReveals []secretRevealDoc `json:"secret_reveals,omitempty"`

	// Channels is the channel filter; absent when there is none (and in
	// every document written before channels).
	Channels []string `json:"channels,omitempty"`
	// RetryPolicy names the endpoint's own retry policy; absent: its
	// tenant's (and every document written before retry policies).
	RetryPolicy string `json:"retry_policy,omitempty"`
	// RateLimit is the endpoint's own bound on its attempts; absent
	// when it has none (every document written before rate limits).
	RateLimit *rateLimitDoc `json:"rate_limit,omitempty"`
	// Source says who manages an operational endpoint (one of
	// engine.OperatorTenant): "api" or "config"; absent for a
	// customer's endpoint (and in every document written before
	// sources).
	Source string `json:"source,omitempty"`
	// SendTraceparent: each attempt carries its span's traceparent;
	// absent: it does not (and in every document written before
	// tracing).
	SendTraceparent bool `json:"send_traceparent,omitempty"`
}

// rateLimitDoc is an engine.RateLimit that is not zero.
type rateLimitDoc struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst"`
}

// secretRevealDoc is one engine.SecretReveal: who was shown the
// secrets, and when. It holds no secret.
type secretRevealDoc struct {
	At time.Time `json:"at"`
	By string    `json:"by"`
}

// The stored names of the zero Ordering and OnDead.
const (
	orderingNone = "none"
	onDeadSkip   = "skip"
)

// encodeEndpoint is the document of ep without its secrets
// (encodeSecrets).
func encodeEndpoint(ep engine.Endpoint) ([]byte, error) {
	r := endpointDoc{
		ID: ep.ID, TenantID: ep.TenantID, URL: ep.URL, EventTypes: ep.EventTypes,
		Description: ep.Description, Disabled: ep.Disabled,
		DisabledReason: ep.DisabledReason, DisabledAt: ep.DisabledAt,
		FailingSince: ep.FailingSince, LastFailure: ep.LastFailure, LastFailureAt: ep.LastFailureAt,
		Created: ep.Created, Updated: ep.Updated,
		VerificationRequired: ep.VerificationRequired, Verified: ep.Verified,
		Ordering: string(ep.Ordering), OnDead: string(ep.OnDead),
		Channels:        ep.Channels,
		RetryPolicy:     string(ep.RetryPolicy),
		Source:          string(ep.Source),
		SendTraceparent: ep.SendTraceparent,
	}
	if ep.Ordering == engine.OrderingNone {
		r.Ordering = orderingNone
	}
	if ep.OnDead == engine.OnDeadSkip {
		r.OnDead = onDeadSkip
	}
	if len(ep.SecretReveals) > 0 {
		r.SecretReveals = make([]secretRevealDoc, len(ep.SecretReveals))
		for i, rv := range ep.SecretReveals {
			r.SecretReveals[i] = secretRevealDoc{At: rv.At, By: rv.By}
		}
	}
	if !ep.RateLimit.IsZero() {
		r.RateLimit = &rateLimitDoc{PerSecond: ep.RateLimit.PerSecond, Burst: ep.RateLimit.Burst}
	}
	return json.Marshal(r)
}

// decodeEndpoint decodes an endpoint's document; its Secrets are nil.
func decodeEndpoint(doc []byte) (engine.Endpoint, error) {
	var r endpointDoc
	if err := unmarshalDoc("endpoint", doc, &r); err != nil {
		return engine.Endpoint{}, err
	}
	if err := checkFormat("endpoint", r.V); err != nil {
		return engine.Endpoint{}, err
	}
	if r.ID == "" || r.TenantID == "" {
		return engine.Endpoint{}, errors.New("postgres: stored endpoint has no id or tenant")
	}
	ep := engine.Endpoint{
		ID: r.ID, TenantID: r.TenantID, URL: r.URL, EventTypes: r.EventTypes,
		Description: r.Description, Disabled: r.Disabled,
		DisabledReason: r.DisabledReason, DisabledAt: r.DisabledAt,
		FailingSince: r.FailingSince, LastFailure: r.LastFailure, LastFailureAt: r.LastFailureAt,
		Created: r.Created, Updated: r.Updated,
		VerificationRequired: r.VerificationRequired, Verified: r.Verified,
		Ordering: engine.Ordering(r.Ordering), OnDead: engine.OnDead(r.OnDead),
		RetryPolicy:     engine.RetryPolicyName(r.RetryPolicy),
		Source:          engine.EndpointSource(r.Source),
		SendTraceparent: r.SendTraceparent,
	}
	if r.Ordering == orderingNone {
		ep.Ordering = engine.OrderingNone
	}
	if r.OnDead == onDeadSkip {
		ep.OnDead = engine.OnDeadSkip
	}
	if len(r.Channels) > 0 {
		ep.Channels = r.Channels
	}
	if len(r.SecretReveals) > 0 {
		ep.SecretReveals = make([]engine.SecretReveal, len(r.SecretReveals))
		for i, rv := range r.SecretReveals {
			ep.SecretReveals[i] = engine.SecretReveal{At: rv.At, By: rv.By}
		}
	}
	if r.RateLimit != nil {
		ep.RateLimit = engine.RateLimit{PerSecond: r.RateLimit.PerSecond, Burst: r.RateLimit.Burst}
	}
	return ep, nil
}

// secretDoc is one element of the secrets document, an array, current
// first. Key is "whsec_…", or sealed (package sealing). Its names are
// capitalized: they were the engine's field names, written untagged.
type secretDoc struct {
	Key     string    `json:"Key"`
	Expires time.Time `json:"Expires"`
}

// encodeSecrets is the secrets document of secs: an empty array for
// none.
func encodeSecrets(secs []engine.Secret) ([]byte, error) {
	r := make([]secretDoc, len(secs))
	for i, s := range secs {
		r[i] = secretDoc{Key: s.Key, Expires: s.Expires}
	}
	return json.Marshal(r)
}

// decodeSecrets decodes a secrets document; none is nil.
func decodeSecrets(doc []byte) ([]engine.Secret, error) {
	var r []secretDoc
	if err := unmarshalDoc("secrets", doc, &r); err != nil {
		return nil, err
	}
	if len(r) == 0 {
		return nil, nil
	}
	secs := make([]engine.Secret, len(r))
	for i, s := range r {
		secs[i] = engine.Secret{Key: s.Key, Expires: s.Expires}
	}
	return secs, nil
}

// secretsFormatHeaders is the format of the secrets document of an
// endpoint with custom headers: the object
//
//	{"v":2,"keys":[secretDoc…],"headers":[headerDoc…]}
//
// The document of an endpoint without custom headers stays the format 1
// array, byte for byte as before there were any. A webhookd that reads
// only format 1 refuses a format 2 document rather than sign and send
// without the headers, or drop them at its next write of the endpoint.
const secretsFormatHeaders = 2

// secretsDocV2 is the secrets document in secretsFormatHeaders.
type secretsDocV2 struct {
	V       int         `json:"v"`
	Keys    []secretDoc `json:"keys"`
	Headers []headerDoc `json:"headers"`
}

// headerDoc is one custom header (engine.CustomHeader) in the secrets
// document: its value under "sealed" when it is sealed (package
// sealing), under "value" when it is plain, never both: a value may be
// any text, so which it is is not read from it.
type headerDoc struct {
	Name   string `json:"name"`
	Value  string `json:"value,omitempty"`
	Sealed string `json:"sealed,omitempty"`
}

// endpointSecrets is what an endpoint's secrets document holds: its
// signing keys and its custom headers, each as stored (sealed or not).
type endpointSecrets struct {
	Keys    []engine.Secret
	Headers engine.CustomHeaders
}

// encodeEndpointSecrets is the secrets document of es: format 1
// (encodeSecrets) when it has no custom headers, secretsFormatHeaders
// when it has.
func encodeEndpointSecrets(es endpointSecrets) ([]byte, error) {
	if len(es.Headers) == 0 {
		return encodeSecrets(es.Keys)
	}
	r := secretsDocV2{V: secretsFormatHeaders, Keys: make([]secretDoc, len(es.Keys)), Headers: make([]headerDoc, len(es.Headers))}
	for i, s := range es.Keys {
		r.Keys[i] = secretDoc{Key: s.Key, Expires: s.Expires}
	}
	for i, h := range es.Headers {
		if h.Sealed {
			r.Headers[i] = headerDoc{Name: h.Name, Sealed: h.Value}
		} else {
			r.Headers[i] = headerDoc{Name: h.Name, Value: h.Value}
		}
	}
	return json.Marshal(r)
}

// decodeEndpointSecrets decodes a secrets document of either format;
// none (keys or headers) is nil.
func decodeEndpointSecrets(doc []byte) (endpointSecrets, error) {
	if t := bytes.TrimLeft(doc, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		keys, err := decodeSecrets(doc)
		return endpointSecrets{Keys: keys}, err
	}
	var r secretsDocV2
	if err := unmarshalDoc("secrets", doc, &r); err != nil {
		return endpointSecrets{}, err
	}
	if r.V != secretsFormatHeaders {
		return endpointSecrets{}, fmt.Errorf("postgres: stored secrets are in format %d, which this webhookd does not read (it reads 1 and %d): run a newer webhookd", r.V, secretsFormatHeaders)
	}
	var es endpointSecrets
	if len(r.Keys) > 0 {
		es.Keys = make([]engine.Secret, len(r.Keys))
		for i, s := range r.Keys {
			es.Keys[i] = engine.Secret{Key: s.Key, Expires: s.Expires}
		}
	}
	if len(r.Headers) > 0 {
		es.Headers = make(engine.CustomHeaders, len(r.Headers))
		for i, h := range r.Headers {
			if (h.Value == "") == (h.Sealed == "") {
				return endpointSecrets{}, fmt.Errorf("postgres: stored secrets: header %q has no value, or two", h.Name)
			}
			es.Headers[i] = engine.CustomHeader{Name: h.Name, Value: h.Value + h.Sealed, Sealed: h.Sealed != ""}
		}
	}
	return es, nil
}

type accessTokenDoc struct {
	V           int       `json:"v,omitempty"`
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
	return json.Marshal(accessTokenDoc{
		ID: t.ID, TenantID: t.TenantID, Environment: string(t.Environment),
		Created: t.Created, Expires: t.Expires, Revoked: t.Revoked,
		Purpose: t.Purpose, ReturnURL: t.ReturnURL,
	})
}

func decodeAccessToken(doc []byte) (engine.AccessToken, error) {
	var r accessTokenDoc
	if err := unmarshalDoc("access token", doc, &r); err != nil {
		return engine.AccessToken{}, err
	}
	if err := checkFormat("access token", r.V); err != nil {
		return engine.AccessToken{}, err
	}
	if r.ID == "" || r.TenantID == "" {
		return engine.AccessToken{}, errors.New("postgres: stored access token has no id or tenant")
	}
	return engine.AccessToken{
		ID: r.ID, TenantID: r.TenantID, Environment: engine.Environment(r.Environment),
		Created: r.Created, Expires: r.Expires, Revoked: r.Revoked,
		Purpose: r.Purpose, ReturnURL: r.ReturnURL,
	}, nil
}

// deliveryDoc is a delivery without WaitingBehind, which is read from
// its line (waitingBehindSQL). The one-round-trip ingest writes
// "sequence" as the first member (insertDeliveriesSQL, sequencedDoc).
type deliveryDoc struct {
	V                int    `json:"v,omitempty"`
	ID               string `json:"id"`
	TenantID         string `json:"tenant"`
	EventID          string `json:"event_id"`
	EventType        string `json:"event_type"`
	EndpointID       string `json:"endpoint_id"`
	State            string `json:"state"`
	Sequence         uint64 `json:"sequence,omitempty"`
	Line             string `json:"line,omitempty"`
	PreviousSequence uint64 `json:"previous_sequence,omitempty"`
	Test             bool   `json:"test,omitempty"`

	Cycle         int       `json:"cycle"`
	CycleStart    time.Time `json:"cycle_start"`
	CycleAttempts int       `json:"cycle_attempts"`
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`

	LastStatus int       `json:"last_status,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	DeadAt     time.Time `json:"dead_at,omitzero"`
	Created    time.Time `json:"created"`
	Updated    time.Time `json:"updated"`

	Attempts []attemptDoc `json:"attempts"` // null: none (as made); [] too
	Replays  []replayDoc  `json:"replays"`
	Skips    []skipDoc    `json:"skips,omitempty"`

	// Channels are its event's; absent when it has none (and in every
	// document written before channels).
	Channels []string `json:"channels,omitempty"`
	// RetryPolicy names the retry policy of the current cycle; absent:
	// the standard one (and every document written before retry
	// policies).
	RetryPolicy string `json:"retry_policy,omitempty"`
	// Backfill is the backfill that made it; absent for ingest's (and
	// in every document written before backfills).
	Backfill *backfillDoc `json:"backfill,omitempty"`
	// DeliverAt is its scheduled event's deliver_at; absent when not
	// scheduled (and in every document written before deliver_at).
	DeliverAt time.Time `json:"deliver_at,omitzero"`
}

type backfillDoc struct {
	At time.Time `json:"at"`
	By string    `json:"by"`
}

type attemptDoc struct {
	Cycle        int       `json:"cycle"`
	Number       int       `json:"number"`
	Start        time.Time `json:"start"`
	DurationNS   int64     `json:"duration_ns"`
	Status       int       `json:"status,omitempty"`
	Error        string    `json:"error,omitempty"`
	Response     string    `json:"response,omitempty"`
	Outcome      string    `json:"outcome"`
	RetryAfterNS int64     `json:"retry_after_ns,omitempty"`
	// ResponseHeaders are [name, value] pairs, in the attempt's order;
	// absent when it kept none (nil: an attempt decodes with nil).
	ResponseHeaders [][2]string `json:"response_headers,omitempty"`
}

type replayDoc struct {
	At    time.Time `json:"at"`
	By    string    `json:"by"`
	Cycle int       `json:"cycle"`
}

type skipDoc struct {
	At    time.Time `json:"at"`
	By    string    `json:"by"`
	Cycle int       `json:"cycle"`
}

// encodeDelivery is the document of d, without its WaitingBehind.
func encodeDelivery(d engine.Delivery) ([]byte, error) {
	r := deliveryDoc{
		ID: d.ID, TenantID: d.TenantID, EventID: d.EventID, EventType: d.EventType,
		EndpointID: d.EndpointID, State: string(d.State),
		Sequence: d.Sequence, Line: d.Line, PreviousSequence: d.PreviousSequence, Test: d.Test,
		Cycle: d.Cycle, CycleStart: d.CycleStart, CycleAttempts: d.CycleAttempts, NextAttemptAt: d.NextAttemptAt,
		LastStatus: d.LastStatus, Reason: d.Reason, DeadAt: d.DeadAt, Created: d.Created, Updated: d.Updated,
		Channels:    d.Channels,
		RetryPolicy: string(d.RetryPolicy),
		DeliverAt:   d.DeliverAt,
	}
	if d.Attempts != nil {
		r.Attempts = make([]attemptDoc, len(d.Attempts))
		for i, a := range d.Attempts {
			r.Attempts[i] = attemptDoc{
				Cycle: a.Cycle, Number: a.Number, Start: a.Start, DurationNS: int64(a.Duration),
				Status: a.Status, Error: a.Error, Response: a.Response, Outcome: string(a.Outcome),
				RetryAfterNS: int64(a.RetryAfter),
			}
			if len(a.ResponseHeaders) > 0 {
				hs := make([][2]string, len(a.ResponseHeaders))
				for j, h := range a.ResponseHeaders {
					hs[j] = [2]string{h.Name, h.Value}
				}
				r.Attempts[i].ResponseHeaders = hs
			}
		}
	}
	if d.Replays != nil {
		r.Replays = make([]replayDoc, len(d.Replays))
		for i, p := range d.Replays {
			r.Replays[i] = replayDoc{At: p.At, By: p.By, Cycle: p.Cycle}
		}
	}
	if len(d.Skips) > 0 {
		r.Skips = make([]skipDoc, len(d.Skips))
		for i, s := range d.Skips {
			r.Skips[i] = skipDoc{At: s.At, By: s.By, Cycle: s.Cycle}
		}
	}
	if d.Backfill != nil {
		r.Backfill = &backfillDoc{At: d.Backfill.At, By: d.Backfill.By}
	}
	return json.Marshal(r)
}

// decodeDelivery decodes a delivery's document; WaitingBehind is "".
func decodeDelivery(doc []byte) (engine.Delivery, error) {
	var r deliveryDoc
	if err := unmarshalDoc("delivery", doc, &r); err != nil {
		return engine.Delivery{}, err
	}
	if err := checkFormat("delivery", r.V); err != nil {
		return engine.Delivery{}, err
	}
	if r.ID == "" || r.TenantID == "" {
		return engine.Delivery{}, errors.New("postgres: stored delivery has no id or tenant")
	}
	d := engine.Delivery{
		ID: r.ID, TenantID: r.TenantID, EventID: r.EventID, EventType: r.EventType,
		EndpointID: r.EndpointID, State: engine.State(r.State),
		Sequence: r.Sequence, Line: r.Line, PreviousSequence: r.PreviousSequence, Test: r.Test,
		Cycle: r.Cycle, CycleStart: r.CycleStart, CycleAttempts: r.CycleAttempts, NextAttemptAt: r.NextAttemptAt,
		LastStatus: r.LastStatus, Reason: r.Reason, DeadAt: r.DeadAt, Created: r.Created, Updated: r.Updated,
		RetryPolicy: engine.RetryPolicyName(r.RetryPolicy),
	}
	if r.Attempts != nil {
		d.Attempts = make([]engine.Attempt, len(r.Attempts))
		for i, a := range r.Attempts {
			d.Attempts[i] = engine.Attempt{
				Cycle: a.Cycle, Number: a.Number, Start: a.Start, Duration: time.Duration(a.DurationNS),
				Status: a.Status, Error: a.Error, Response: a.Response, Outcome: engine.Outcome(a.Outcome),
				RetryAfter: time.Duration(a.RetryAfterNS),
			}
			if len(a.ResponseHeaders) > 0 {
				hs := make([]engine.Header, len(a.ResponseHeaders))
				for j, h := range a.ResponseHeaders {
					hs[j] = engine.Header{Name: h[0], Value: h[1]}
				}
				d.Attempts[i].ResponseHeaders = hs
			}
		}
	}
	if r.Replays != nil {
		d.Replays = make([]engine.Replay, len(r.Replays))
		for i, p := range r.Replays {
			d.Replays[i] = engine.Replay{At: p.At, By: p.By, Cycle: p.Cycle}
		}
	}
	if r.Skips != nil {
		d.Skips = make([]engine.Skip, len(r.Skips))
		for i, s := range r.Skips {
			d.Skips[i] = engine.Skip{At: s.At, By: s.By, Cycle: s.Cycle}
		}
	}
	if len(r.Channels) > 0 {
		d.Channels = r.Channels
	}
	if r.Backfill != nil {
		d.Backfill = &engine.Backfill{At: r.Backfill.At, By: r.Backfill.By}
	}
	d.DeliverAt = r.DeliverAt
	return d, nil
}

// taskDoc is a background task (engine/tasks.go), the runner's fields
// (cursor, owner, lease) included. Its state and its finish time are
// columns too (tasks.state, tasks.finished), written from it.
type taskDoc struct {
	V          int           `json:"v,omitempty"`
	ID         string        `json:"id"`
	Tenant     string        `json:"tenant,omitempty"`
	Kind       string        `json:"kind"`
	State      string        `json:"state"`
	Params     taskParamsDoc `json:"params"`
	Done       int           `json:"done,omitempty"`
	Skipped    int           `json:"skipped,omitempty"`
	Total      *int          `json:"total,omitempty"`
	Waiting    string        `json:"waiting,omitempty"`
	Errors     []taskErrDoc  `json:"errors,omitempty"`
	Error      string        `json:"error,omitempty"`
	By         string        `json:"by,omitempty"`
	Resumed    int           `json:"resumed,omitempty"`
	Started    time.Time     `json:"started"`
	Updated    time.Time     `json:"updated"`
	Finished   time.Time     `json:"finished,omitzero"`
	Cursor     string        `json:"cursor,omitempty"`
	Owner      string        `json:"owner,omitempty"`
	LeaseUntil time.Time     `json:"lease_until,omitzero"`
}

type taskParamsDoc struct {
	Since    time.Time `json:"since,omitzero"`
	Until    time.Time `json:"until,omitzero"`
	Endpoint string    `json:"endpoint,omitempty"`
	Tenant   string    `json:"tenant,omitempty"`
	Force    bool      `json:"force,omitempty"`
}

type taskErrDoc struct {
	At      time.Time `json:"at"`
	Message string    `json:"message"`
}

func encodeTask(t engine.Task) ([]byte, error) {
	d := taskDoc{
		ID: t.ID, Tenant: t.Tenant, Kind: string(t.Kind), State: string(t.State),
		Params: taskParamsDoc{Since: t.Params.Since, Until: t.Params.Until, Endpoint: t.Params.Endpoint, Tenant: t.Params.Tenant, Force: t.Params.Force},
		Done:   t.Done, Skipped: t.Skipped, Total: t.Total, Waiting: t.Waiting, Error: t.Error, By: t.By, Resumed: t.Resumed,
		Started: t.Started, Updated: t.Updated, Finished: t.Finished,
		Cursor: t.Cursor, Owner: t.Owner, LeaseUntil: t.LeaseUntil,
	}
	for _, e := range t.Errors {
		d.Errors = append(d.Errors, taskErrDoc{At: e.At, Message: e.Message})
	}
	return json.Marshal(d)
}

func decodeTask(doc []byte) (engine.Task, error) {
	var d taskDoc
	if err := unmarshalDoc("task", doc, &d); err != nil {
		return engine.Task{}, err
	}
	if err := checkFormat("task", d.V); err != nil {
		return engine.Task{}, err
	}
	if d.ID == "" || d.Kind == "" {
		return engine.Task{}, errors.New("postgres: stored task has no id or kind")
	}
	switch engine.TaskState(d.State) {
	case engine.TaskRunning, engine.TaskSucceeded, engine.TaskFailed:
	default:
		return engine.Task{}, fmt.Errorf("postgres: stored task %s has state %q", d.ID, d.State)
	}
	t := engine.Task{
		ID: d.ID, Tenant: d.Tenant, Kind: engine.TaskKind(d.Kind), State: engine.TaskState(d.State),
		Params: engine.TaskParams{Since: d.Params.Since, Until: d.Params.Until, Endpoint: d.Params.Endpoint, Tenant: d.Params.Tenant, Force: d.Params.Force},
		Done:   d.Done, Skipped: d.Skipped, Total: d.Total, Waiting: d.Waiting, Error: d.Error, By: d.By, Resumed: d.Resumed,
		Started: d.Started, Updated: d.Updated, Finished: d.Finished,
		Cursor: d.Cursor, Owner: d.Owner, LeaseUntil: d.LeaseUntil,
		Errors: make([]engine.TaskError, 0, len(d.Errors)),
	}
	for _, e := range d.Errors {
		t.Errors = append(t.Errors, engine.TaskError{At: e.At, Message: e.Message})
	}
	return t, nil
}
