package client

import (
	"encoding/json"
	"time"
)

// The JSON shapes of the API. Times are UTC with millisecond precision as
// the server writes them; a zero time.Time stands for a member the server
// left out.

// Environment keeps test data apart from live data: every tenant is in
// one, fixed when it is created, and a test token acts on test tenants
// only.
type Environment string

const (
	EnvironmentLive Environment = "live"
	EnvironmentTest Environment = "test"
)

// Tenant is a customer of the sender: the owner of endpoints.
type Tenant struct {
	ID          string      `json:"id"`
	Name        string      `json:"name"`
	Environment Environment `json:"environment"`
	// RetryPolicy is the retry policy of its endpoints that choose none:
	// StandardRetryPolicy unless it chose another.
	RetryPolicy string    `json:"retry_policy"`
	Created     time.Time `json:"created"`
	Updated     time.Time `json:"updated"`
}

// TenantInput is what PutTenant sets.
type TenantInput struct {
	Name string `json:"name,omitempty"`
	// Environment is chosen when the tenant is created ("": the server's
	// default, test for a test token) and must be "" or unchanged after.
	Environment Environment `json:"environment,omitempty"`
	// RetryPolicy names one of the server's retry policies
	// (RetryPolicies) for the tenant's endpoints that choose none; "":
	// unchanged (StandardRetryPolicy for a new tenant). Another name is
	// CodeInvalidField on "retry_policy".
	RetryPolicy string `json:"retry_policy,omitempty"`
}

// The retry policies every server has; its configuration may name more
// (RetryPolicies lists them).
const (
	StandardRetryPolicy = "standard" // a tenant's unless it chooses another: 6 attempts within 75 minutes by default
	ExtendedRetryPolicy = "extended" // for receivers down for a night: 8 attempts within 28 hours by default
)

// RetryPolicy is one of the server's retry policies: when a failed
// attempt is tried again, and which failures are worth it.
type RetryPolicy struct {
	Name    string `json:"name"`
	Summary string `json:"summary"` // like "8 attempts within 28 h"
	// MaxAttempts is how many attempts a cycle gets at most: one at
	// once, then one after each wait of ScheduleMS.
	MaxAttempts int     `json:"max_attempts"`
	ScheduleMS  []int64 `json:"schedule_ms"`
	// Jitter spreads each wait over ±Jitter of it (0.2: ±20%).
	Jitter float64 `json:"jitter"`
	// DeadlineMS bounds a cycle, from its start; every attempt's time
	// counts.
	DeadlineMS int64 `json:"deadline_ms"`
	// RetryStatuses are statuses that are permanent failures by default
	// (3xx, and 4xx but 408, 425 and 429) that this policy retries.
	RetryStatuses []int `json:"retry_statuses"`
}

// Schedule returns the waits between attempts.
func (p RetryPolicy) Schedule() []time.Duration {
	waits := make([]time.Duration, len(p.ScheduleMS))
	for i, ms := range p.ScheduleMS {
		waits[i] = time.Duration(ms) * time.Millisecond
	}
	return waits
}

// Deadline returns the cycle's deadline.
func (p RetryPolicy) Deadline() time.Duration { return time.Duration(p.DeadlineMS) * time.Millisecond }

// EventType is one entry of the catalogue of event types that may be
// ingested, named "resource.action" (payment.succeeded).
type EventType struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Status is what ingest does with events of the type: active,
	// deprecated (taken, and counted) or archived (refused with
	// CodeEventTypeArchived).
	Status EventTypeStatus `json:"status"`
	// Schema is the JSON Schema (draft 2020-12) the data of every event
	// of the type must match (CodeSchemaMismatch otherwise); nil when it
	// has none.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Example is the data of an example event of the type, which "Send
	// test event" sends (Client.SendTestEvent); nil when it has none.
	Example json.RawMessage `json:"example,omitempty"`
	Created time.Time       `json:"created"`
	Updated time.Time       `json:"updated"`
}

// EventTypeStatus is where an event type is in its life.
type EventTypeStatus string

// The statuses of an event type.
const (
	EventTypeActive     EventTypeStatus = "active"
	EventTypeDeprecated EventTypeStatus = "deprecated" // still taken and delivered; counted, shown as deprecated
	EventTypeArchived   EventTypeStatus = "archived"   // ingest refused (CodeEventTypeArchived)
)

// EventTypeInput is what PutEventTypeWith stores of a type: the whole
// entry, a field left out reset (no example, no schema, active).
type EventTypeInput struct {
	Description string `json:"description"`
	// Status, optional: active when empty.
	Status EventTypeStatus `json:"status,omitempty"`
	// Schema, optional, is a JSON Schema (draft 2020-12): an object or
	// a boolean, at most 64 KiB compacted, with no reference outside
	// itself. The server compiles it: one that does not compile is a
	// Problem with CodeInvalidField naming "schema".
	Schema json.RawMessage `json:"schema,omitempty"`
	// Example, optional, is the data of an example event of the type:
	// any JSON value, at most 16 KiB compacted, that matches Schema
	// (CodeSchemaMismatch naming "example/…" otherwise).
	Example json.RawMessage `json:"example,omitempty"`
}

// AllEventTypes, as an endpoint's only event type, subscribes it to every
// type.
const AllEventTypes = "*"

// Endpoint is a tenant's URL that receives the event types it subscribes
// to, signed with its own secret (shown only by CreateEndpoint,
// RotateSecret and RevokeSecret).
type Endpoint struct {
	ID          string   `json:"id"`
	Tenant      string   `json:"tenant"`
	URL         string   `json:"url"`
	EventTypes  []string `json:"event_types"`
	Description string   `json:"description"`
	Disabled    bool     `json:"disabled"`
	// DisabledReason says who or what disabled the endpoint.
	DisabledReason string    `json:"disabled_reason,omitempty"`
	DisabledAt     time.Time `json:"disabled_at,omitzero"`
	// FailingSince is when the current run of failed attempts began;
	// zero after a success. LastFailure says why the latest failed.
	FailingSince  time.Time `json:"failing_since,omitzero"`
	LastFailure   string    `json:"last_failure,omitempty"`
	LastFailureAt time.Time `json:"last_failure_at,omitzero"`
	Created       time.Time `json:"created"`
	Updated       time.Time `json:"updated"`
	// VerificationRequired: no delivery is attempted until the endpoint
	// answers the verification challenge (VerifyEndpoint).
	VerificationRequired bool `json:"verification_required"`
	// Verified is when the endpoint last passed the challenge at its
	// current URL; zero when it has not.
	Verified time.Time `json:"verified,omitzero"`
	// Ordering is the order its deliveries are attempted in: "none",
	// "key" (one line per ordering key) or "endpoint" (one line).
	Ordering Ordering `json:"ordering"`
	// OnDead is what a line does when its head dies: "skip" or "block".
	OnDead OnDead `json:"on_dead"`
	// Channels is its channel filter: it receives only the events on one
	// of these channels. Nil: every event, on channels or not.
	Channels []string `json:"channels,omitempty"`
	// RetryPolicy is the endpoint's own retry policy, "" when it follows
	// its tenant's; EffectiveRetryPolicy the one its new deliveries
	// follow. A change applies to the delivery cycles that start after
	// it.
	RetryPolicy          string `json:"retry_policy,omitempty"`
	EffectiveRetryPolicy string `json:"effective_retry_policy,omitempty"`
	// Headers are the endpoint's custom headers, name (canonical) to
	// value masked ("Bearer ••••"): sent with every request to it.
	// RevealSecret shows the values. Nil when it has none.
	Headers map[string]string `json:"headers,omitempty"`
	// RateLimit is the endpoint's own bound on its attempts per second;
	// nil when it has none. EffectiveRateLimit is the bound that holds:
	// RateLimit within the server's [delivery] endpoint_rate (each of
	// rate and burst the lower), or endpoint_rate alone; nil when none.
	RateLimit          *RateLimit `json:"rate_limit,omitempty"`
	EffectiveRateLimit *RateLimit `json:"effective_rate_limit,omitempty"`
	// SendTraceparent: each attempt's request carries a traceparent
	// header naming the attempt's span when the server traces
	// ([tracing] on), so the receiver's spans join the attempt's trace.
	SendTraceparent bool `json:"send_traceparent"`
	// SecretReveals records each RevealSecret of the endpoint, oldest
	// first: the latest 20. Nil when its secrets were never revealed.
	SecretReveals []SecretReveal `json:"secret_reveals,omitempty"`
}

// SecretReveal is one reveal of an endpoint's secrets.
type SecretReveal struct {
	At time.Time `json:"at"`
	By string    `json:"by"` // "admin" or "token tok_…"
}

// Ordering is an endpoint's ordering.
type Ordering string

const (
	OrderingNone     Ordering = "none"     // in parallel, no order promised
	OrderingKey      Ordering = "key"      // one line per ordering key; events without one are not ordered
	OrderingEndpoint Ordering = "endpoint" // one line: one request in flight
)

// OnDead is what an ordered line does when its head dies.
type OnDead string

const (
	OnDeadSkip  OnDead = "skip"  // the line goes on; the dead letter records the skip
	OnDeadBlock OnDead = "block" // the line stops until the dead letter is replayed and succeeds, or skipped (Skip)
)

// EndpointInput is what CreateEndpoint makes.
type EndpointInput struct {
	URL         string   `json:"url"`
	EventTypes  []string `json:"event_types"`
	Description string   `json:"description,omitempty"`
	// Ordering and OnDead, when empty, are none and skip.
	Ordering Ordering `json:"ordering,omitempty"`
	OnDead   OnDead   `json:"on_dead,omitempty"`
	// Channels, optional, filters the events the endpoint receives by
	// their channels (at most 10, each 1–128 ASCII letters, digits, '_',
	// '.' or '-'); nil: every event.
	Channels []string `json:"channels,omitempty"`
	// RetryPolicy names one of the server's retry policies
	// (RetryPolicies); "": the tenant's.
	RetryPolicy string `json:"retry_policy,omitempty"`
	// Headers are custom headers, name to value, sent with every
	// request to the endpoint (each attempt, test event and verification
	// challenge), for the receiver's own authentication: at most 20, a
	// name an HTTP token of at most 64 bytes and not one of webhookd's
	// own (webhook-*, Content-Type, Host, …), a value 1 to 2048 bytes of
	// visible ASCII and spaces, 4096 bytes in all. The values are
	// secrets: stored sealed when the server has a key, and masked in
	// every answer but RevealSecret's.
	Headers map[string]string `json:"headers,omitempty"`
	// RateLimit, when set, bounds the endpoint's attempts per second.
	RateLimit *RateLimit `json:"rate_limit,omitempty"`
	// SendTraceparent sends each attempt's traceparent to the receiver
	// when the server traces. Off by default: it shows the sender's
	// trace IDs to a third party.
	SendTraceparent bool `json:"send_traceparent,omitempty"`
	// Secret, optional, is a signing secret of your own, for an endpoint
	// moved from another service (Svix, Convoy) whose receiver verifies
	// with it: "whsec_" + base64 (padded or not) of 24 to 64 bytes, or
	// that base64 alone. "": the server makes one, which is the advice.
	Secret string `json:"secret,omitempty"`
}

// RateLimit is an endpoint's own bound on how fast its attempts start, in
// the whole cluster: PerSecond on average (0.01 to 10000), up to Burst at
// once after a quiet time (1 to 10000). The server's [delivery]
// endpoint_rate is its ceiling: a limit above it is accepted and held to
// it. A change applies from the endpoint's next attempt.
type RateLimit struct {
	PerSecond float64 `json:"per_second"`
	// Burst, sent as 0, is the default: max(1, floor(PerSecond)). An
	// endpoint read back always has its burst.
	Burst int `json:"burst,omitempty"`
}

// MarshalJSON writes the zero RateLimit as null, which in an
// EndpointPatch removes the endpoint's limit.
func (rl RateLimit) MarshalJSON() ([]byte, error) {
	if rl == (RateLimit{}) {
		return []byte("null"), nil
	}
	type plain RateLimit
	return json.Marshal(plain(rl))
}

// CreatedEndpoint is a new endpoint with its signing secret, which no
// later read shows again.
type CreatedEndpoint struct {
	Endpoint
	Secret string `json:"secret"`
	// Environment is the tenant's (secrets carry no environment prefix).
	Environment Environment `json:"environment,omitempty"`
}

// EndpointPatch is what UpdateEndpoint changes: nil fields are left as
// they are.
type EndpointPatch struct {
	URL         *string   `json:"url,omitempty"`
	EventTypes  *[]string `json:"event_types,omitempty"`
	Description *string   `json:"description,omitempty"`
	// Ordering applies to the events ingested after the change.
	Ordering *Ordering `json:"ordering,omitempty"`
	OnDead   *OnDead   `json:"on_dead,omitempty"`
	// RetryPolicy names one of the server's retry policies, or "" to
	// follow the tenant's; it applies to the delivery cycles that start
	// after the change.
	RetryPolicy *string `json:"retry_policy,omitempty"`
	Disabled    *bool   `json:"disabled,omitempty"`
	// RateLimit sets the endpoint's own bound on its attempts per
	// second; &RateLimit{} (the zero limit) removes it; nil leaves it.
	RateLimit *RateLimit `json:"rate_limit,omitempty"`
	// SendTraceparent turns the attempts' traceparent on or off, from
	// the next attempt; nil leaves it.
	SendTraceparent *bool `json:"send_traceparent,omitempty"`
	// DeliverHeld, with Disabled set to false, sends the deliveries held
	// while the endpoint was disabled; false dead-letters them.
	DeliverHeld bool `json:"deliver_held,omitempty"`
	// Channels replaces the channel filter, for the events ingested
	// after the change; a pointer to an empty slice removes it.
	Channels *[]string `json:"channels,omitempty"`
	// Headers change the custom headers as a merge: a name with a value
	// sets or replaces that header, a name with nil removes it, the
	// headers not named stay. An empty (not nil) map removes them all;
	// nil leaves them.
	Headers map[string]*string `json:"headers,omitzero"`
}

// SecretResult is an endpoint after RotateSecret or RevokeSecret, with
// its new secret, which no later read shows again.
type SecretResult struct {
	Endpoint
	Secret      string      `json:"secret"`
	Environment Environment `json:"environment"`
	// PreviousSecretExpires is when the previous secret stops signing;
	// zero when it stopped at once.
	PreviousSecretExpires time.Time `json:"previous_secret_expires,omitzero"`
}

// RevealedSecret is what RevealSecret shows: the keys an endpoint signs
// with now, and its custom headers in plain.
type RevealedSecret struct {
	Secret string `json:"secret"`
	// Previous are the old keys still in their rotation grace window,
	// newest first; every attempt is signed with each until it expires.
	Previous []PreviousSecret `json:"previous"`
	// Headers are the endpoint's custom headers with their values in
	// plain, which no other answer shows; empty when it has none.
	Headers     map[string]string `json:"headers"`
	Environment Environment       `json:"environment"`
}

// PreviousSecret is an old key that signs beside the current one until
// Expires.
type PreviousSecret struct {
	Secret  string    `json:"secret"`
	Expires time.Time `json:"expires"`
}

// Verification is the outcome of VerifyEndpoint's challenge.
type Verification struct {
	Verified bool `json:"verified"`
	// Reason says why not, when not verified.
	Reason   string   `json:"reason,omitempty"`
	Endpoint Endpoint `json:"endpoint"`
}

// EventInput is an event to Ingest.
type EventInput struct {
	// Type is a name from the catalogue (PutEventType).
	Type string `json:"type"`
	// APIVersion is the envelope's api_version; "": the server's default.
	APIVersion string `json:"api_version,omitempty"`
	// Data is the event's payload, marshalled with encoding/json (a
	// json.RawMessage is sent as it is). It must be a JSON object, and
	// I-JSON: a name twice in an object, a lone surrogate escape, a
	// Unicode noncharacter or a number no float64 holds (1e400) is a
	// *Problem with Code "invalid_json" and Field "data".
	Data any `json:"data"`
	// OrderingKey, optional, names what the event is about (an order, a
	// customer; at most 255 characters, with no control or invisible
	// formatting character): events of a tenant with the same key
	// are in sequence order, and an endpoint that asks for ordering gets
	// them in that order.
	OrderingKey string `json:"ordering_key,omitempty"`
	// Channels, optional, are the channels the event is sent on (at most
	// 10, as Endpoint.Channels): an endpoint with a channel filter gets
	// it only when one of them is in its filter. They are not in the
	// envelope. A repeat of the IdempotencyKey with other channels is a
	// *Problem with Code "idempotency_conflict".
	Channels []string `json:"channels,omitempty"`
	// DeliverAt, optional, schedules the event: it is stored at once and
	// its first attempt is made at DeliverAt, not before (the retry
	// window counts from it). At most 5 s in the past and 30 days
	// ahead, else a *Problem with Code "invalid_field" and Field
	// "deliver_at". A repeat of the IdempotencyKey with another
	// DeliverAt is a *Problem with Code "idempotency_conflict". Zero: at
	// once.
	DeliverAt time.Time `json:"deliver_at,omitzero"`
	// IdempotencyKey makes the ingest safe to repeat: the server stores
	// one event per key (within its idempotency window) and answers a
	// repeat with the first one. "": Ingest generates a random key.
	IdempotencyKey string `json:"-"`
}

// IngestResult is the answer of Ingest.
type IngestResult struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	// DeliverAt is when the event is scheduled for; zero when at once.
	DeliverAt time.Time `json:"deliver_at,omitzero"`
	// Deliveries are the ones the event has, one per endpoint that took
	// it when it was acknowledged (final IDs), each in the state it
	// starts in; a read through the API right after shows them all
	// (docs/api.md, "What the 202 answers").
	Deliveries []DeliveryRef `json:"deliveries"`
	// IdempotencyKey is the key the event was sent with: the caller's, or
	// the one Ingest generated.
	IdempotencyKey string `json:"-"`
	// Replayed reports that the server had stored this key already and
	// answered with that event rather than storing a new one.
	Replayed bool `json:"-"`
}

// DeliveryRef names one delivery an ingest created: one per subscribed
// endpoint.
type DeliveryRef struct {
	ID         string `json:"id"`
	EndpointID string `json:"endpoint_id"`
	State      State  `json:"state"`
}

// Envelope is an event exactly as its endpoints receive it. Raw holds its
// bytes as the server stored, signed and sent them (a signature covers
// these bytes, so hash Raw, not a re-encoding); the other fields are
// decoded from them.
type Envelope struct {
	ID      string    `json:"id"`
	Type    string    `json:"type"`
	Created time.Time `json:"created"`
	// Sequence numbers the tenant's events 1, 2, 3… in the order they
	// were stored, with no gap among stored events; 0 for an event
	// stored before events were numbered.
	Sequence    uint64          `json:"sequence,omitempty"`
	OrderingKey string          `json:"ordering_key,omitempty"`
	APIVersion  string          `json:"api_version"`
	Data        json.RawMessage `json:"data"`
	Raw         json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes the envelope and keeps its bytes in Raw.
func (e *Envelope) UnmarshalJSON(b []byte) error {
	type plain Envelope // without this method
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*e = Envelope(p)
	e.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// MarshalJSON writes Raw when it is set, else the fields.
func (e Envelope) MarshalJSON() ([]byte, error) {
	if e.Raw != nil {
		return e.Raw, nil
	}
	type plain Envelope
	return json.Marshal(plain(e))
}

// EventDetail is an event with its deliveries (GetEvent).
type EventDetail struct {
	Event      Envelope   `json:"event"`
	Test       bool       `json:"test,omitempty"` // a test event (SendTestEvent)
	Deliveries []Delivery `json:"deliveries"`
	// Channels are the event's channels, which are not in the envelope.
	Channels []string `json:"channels,omitempty"`
	// DeliverAt is when the event was scheduled for; zero when not.
	DeliverAt time.Time `json:"deliver_at,omitzero"`
}

// TestEventResult is the answer of SendTestEvent: the event, of Type,
// and its one delivery.
type TestEventResult struct {
	ID         string        `json:"id"`
	Type       string        `json:"type"`
	Created    time.Time     `json:"created"`
	Deliveries []DeliveryRef `json:"deliveries"`
}

// State is where a delivery is in its life.
type State string

const (
	StatePending    State = "pending"    // an attempt is due at NextAttemptAt
	StateDelivering State = "delivering" // an attempt is in flight
	StateSucceeded  State = "succeeded"  // an attempt got a 2xx
	StateDead       State = "dead"       // out of attempts or refused for good: a dead letter until replayed
	StatePaused     State = "paused"     // its endpoint is disabled; waits for it to be enabled
	StateWaiting    State = "waiting"    // ordered, behind the head of its line (WaitingBehind)
)

// Delivery is the sending of one event to one endpoint: its state, every
// attempt and every replay.
type Delivery struct {
	ID         string `json:"id"`
	Tenant     string `json:"tenant"`
	EventID    string `json:"event_id"`
	EventType  string `json:"event_type"`
	EndpointID string `json:"endpoint_id"`
	State      State  `json:"state"`
	// Sequence is its event's sequence; Line the line it is ordered in
	// at its endpoint ("endpoint" or "key:"+the ordering key), "" when
	// not ordered; WaitingBehind, while waiting, the ID of the delivery
	// at the head of its line.
	Sequence      uint64 `json:"sequence,omitempty"`
	Line          string `json:"line,omitempty"`
	WaitingBehind string `json:"waiting_behind,omitempty"`
	// PreviousSequence is, for an event with an ordering key, the
	// sequence of the previous event with that key delivered to this
	// endpoint (the webhook-previous-sequence header); 0 when none.
	PreviousSequence uint64 `json:"previous_sequence,omitempty"`
	// Test marks the delivery of a test event (SendTestEvent).
	Test bool `json:"test,omitempty"`
	// Channels are its event's channels; nil when none.
	Channels []string `json:"channels,omitempty"`
	// RetryPolicy is the retry policy its current cycle follows, fixed
	// when the cycle started (its endpoint's, or its tenant's, then).
	RetryPolicy string `json:"retry_policy"`
	// DeliverAt is its event's deliver_at: its first cycle starts then,
	// and no attempt is made before. Zero when not scheduled.
	DeliverAt time.Time `json:"deliver_at,omitzero"`
	// Cycle counts delivery cycles: 1 at ingest, +1 per replay.
	Cycle         int       `json:"cycle"`
	CycleStart    time.Time `json:"cycle_start"`
	CycleAttempts int       `json:"cycle_attempts"`
	// NextAttemptAt is when the next attempt is due; zero unless pending.
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	// LastStatus is the HTTP status of the last attempt; 0 if none.
	LastStatus int `json:"last_status,omitempty"`
	// Reason says why the last attempt failed, or why it is dead.
	Reason   string    `json:"reason,omitempty"`
	DeadAt   time.Time `json:"dead_at,omitzero"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
	Attempts []Attempt `json:"attempts"`
	Replays  []Replay  `json:"replays"`
	// Skips records each time it let its line go on without it.
	Skips []Skip `json:"skips,omitempty"`
	// Backfill is the backfill that made it (Client.Backfill); nil for
	// a delivery made at ingest.
	Backfill *Backfill `json:"backfill,omitempty"`
}

// Backfill records that a backfill made a delivery: who asked, and
// when its first cycle began.
type Backfill struct {
	At time.Time `json:"at"`
	By string    `json:"by"` // "admin" or "token tok_…"
}

// Skip records that a dead ordered delivery let its line go on without
// it: By is who asked (Skip), or "on_dead skip" (it died on a line whose
// endpoint has on_dead skip), or "held, not sent".
type Skip struct {
	At    time.Time `json:"at"`
	By    string    `json:"by"`
	Cycle int       `json:"cycle"`
}

// Outcome is how an attempt was classified.
type Outcome string

const (
	OutcomeSuccess   Outcome = "success"   // 2xx
	OutcomeRetry     Outcome = "retry"     // 408, 425, 429, 5xx, timeout, connection error
	OutcomePermanent Outcome = "permanent" // 3xx and other 4xx
)

// Attempt is one HTTP request to the endpoint and what came of it.
type Attempt struct {
	Cycle  int       `json:"cycle"`
	Number int       `json:"number"` // 1-based within its cycle
	Start  time.Time `json:"start"`
	// Duration is the attempt's time, in whole milliseconds
	// (duration_ms).
	Duration time.Duration `json:"-"`
	// Status is the endpoint's HTTP status; 0 when none was read.
	Status int `json:"status,omitempty"`
	// Error is the transport error or why the answer was classified so.
	Error string `json:"error,omitempty"`
	// Response is the start of the endpoint's answer body.
	Response string  `json:"response,omitempty"`
	Outcome  Outcome `json:"outcome"`
	// RetryAfter is the endpoint's Retry-After, in whole milliseconds
	// (retry_after_ms); zero when it gave none.
	RetryAfter time.Duration `json:"-"`
	// ResponseHeaders are the endpoint's response headers as the server
	// kept them, by canonical name (Content-Type), each with its values
	// joined by ", ": at most 20, each value cut to 256 bytes, 2 KiB in
	// all, never Set-Cookie, Authorization, WWW-Authenticate nor another
	// credential header. Nil when no response was read.
	ResponseHeaders map[string]string `json:"response_headers,omitempty"`
}

// attemptJSON is Attempt as the server writes it.
type attemptJSON struct {
	attemptFields
	DurationMS   int64 `json:"duration_ms"`
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`
}

type attemptFields Attempt // without the methods

// UnmarshalJSON reads duration_ms and retry_after_ms as durations.
func (a *Attempt) UnmarshalJSON(b []byte) error {
	var j attemptJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*a = Attempt(j.attemptFields)
	a.Duration = time.Duration(j.DurationMS) * time.Millisecond
	a.RetryAfter = time.Duration(j.RetryAfterMS) * time.Millisecond
	return nil
}

// MarshalJSON writes the server's shape.
func (a Attempt) MarshalJSON() ([]byte, error) {
	return json.Marshal(attemptJSON{attemptFields(a), a.Duration.Milliseconds(), a.RetryAfter.Milliseconds()})
}

// Replay records one manual re-send of a delivery.
type Replay struct {
	At    time.Time `json:"at"`
	By    string    `json:"by"` // "admin" or "token tok_…"
	Cycle int       `json:"cycle"`
}

// DeadLetterRange selects the dead letters ReplayDeadLetters sends again:
// those that died in [Since, Until), of one endpoint or of all.
type DeadLetterRange struct {
	// Since is required: a zero Since is refused (CodeInvalidField).
	Since time.Time `json:"since,omitzero"`
	// Until zero: now.
	Until time.Time `json:"until,omitzero"`
	// Endpoint is an endpoint ID; "": every endpoint.
	Endpoint string `json:"endpoint,omitempty"`
}

// DeliveryFilter selects the deliveries of the delivery log. Zero fields
// select everything.
type DeliveryFilter struct {
	State    State
	Type     string // event type
	Endpoint string // endpoint ID
	// Status selects by what the last attempt got: the class of its
	// HTTP status, or StatusNone. A delivery never attempted is in no
	// class.
	Status StatusClass
	Since  time.Time
	Until  time.Time
	// Limit is the page size asked of the server (1–1000); 0: the
	// server's default (100). The iterator pages on regardless.
	Limit int
	// Cursor starts the walk after a cursor the server gave; "": from
	// the start.
	Cursor string
	// Channel selects the deliveries of events on this channel.
	Channel string
}

// StatusClass is a class of the HTTP status of a delivery's last attempt
// (its LastStatus), for DeliveryFilter.Status.
type StatusClass string

const (
	Status2xx StatusClass = "2xx"
	Status3xx StatusClass = "3xx"
	Status4xx StatusClass = "4xx"
	Status5xx StatusClass = "5xx"
	// StatusNone: the last attempt got no response (a timeout, a
	// connection or TLS error, or no request was made).
	StatusNone StatusClass = "none"
)

// ListOptions page a listing that takes no filter.
type ListOptions struct {
	// Limit is the page size asked of the server (1–1000); 0: the
	// server's default (100). The iterator pages on regardless.
	Limit int
	// Cursor starts the walk after a cursor the server gave; "": from
	// the start.
	Cursor string
}

// FeedFilter selects the events of the reconciliation feed.
type FeedFilter struct {
	// Cursor resumes after the event it names (Feed.Cursor of an earlier
	// walk); "": from the first event.
	Cursor string
	Type   string    // event type; "": all
	Since  time.Time // events created at or after; zero: all
	// Limit is the page size asked of the server; 0: its default.
	Limit int
	// Channel selects the events on this channel; "": all.
	Channel string
}

// FeedEvent is one entry of the reconciliation feed.
type FeedEvent struct {
	// Cursor resumes the feed after this event.
	Cursor string   `json:"cursor"`
	Event  Envelope `json:"event"`
	// Test marks a test event, sent to one endpoint only
	// (SendTestEvent): a reconciler of another endpoint skips it.
	Test bool `json:"test,omitempty"`
	// Channels are the event's channels, which are not in the envelope.
	Channels []string `json:"channels,omitempty"`
	// DeliverAt is when the event was scheduled for; zero when not.
	DeliverAt time.Time `json:"deliver_at,omitzero"`
}

// Report is the delivery report over a tenant's last events. Each
// delivery is in exactly one of FirstAttemptSuccesses, RetrySuccesses,
// Replayed, Pending, Waiting, Paused and Dead, so they sum to Deliveries
// (the check "every delivery is counted once").
type Report struct {
	Tenant                string  `json:"tenant,omitempty"`
	Events                int     `json:"events"`
	Deliveries            int     `json:"deliveries"`
	FirstAttemptSuccesses int     `json:"first_attempt_successes"`
	RetrySuccesses        int     `json:"retry_successes"`
	EffectiveDeliveryRate float64 `json:"effective_delivery_rate"` // (first + retry successes) / deliveries
	// Replayed: succeeded only in a later cycle (after a replay, or a
	// resume of a paused delivery).
	Replayed int `json:"replayed"`
	// Pending (due or in flight), Waiting (behind their line's head),
	// Paused (held for a disabled endpoint) and Dead: not delivered in
	// their first cycle, by their state now.
	Pending int `json:"pending"`
	Waiting int `json:"waiting"`
	Paused  int `json:"paused"`
	Dead    int `json:"dead"`
	// DeadByReason splits Dead by reason; Blocking and Skipped count the
	// dead ordered deliveries holding their line and gone past by it.
	DeadByReason        map[string]int `json:"dead_by_reason"`
	Blocking            int            `json:"blocking,omitempty"`
	Skipped             int            `json:"skipped,omitempty"`
	DuplicateDeliveries int            `json:"duplicate_deliveries"`
	Target              float64        `json:"target"`
	MeetsTarget         bool           `json:"meets_target"`
	Checks              []ReportCheck  `json:"checks"`
}

// ReportCheck is one consistency check of a Report.
type ReportCheck struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	Note string `json:"note,omitempty"`
}

// TenantsReport is the report of every tenant and their total.
type TenantsReport struct {
	Tenants []Report `json:"tenants"`
	Total   Report   `json:"total"`
}

// AccessToken is what the server keeps of a tenant access token: never
// the token itself.
type AccessToken struct {
	ID          string      `json:"id"` // "tok_…"
	Tenant      string      `json:"tenant"`
	Environment Environment `json:"environment"`
	Created     time.Time   `json:"created"`
	Expires     time.Time   `json:"expires"`
	// Revoked is when the token was revoked; zero while it is not.
	Revoked time.Time `json:"revoked,omitzero"`
	// Purpose is "" for a token issued by IssueAccessToken, "portal_link"
	// for a portal link and "portal_session" for the console session one
	// opened; ReturnURL is a portal link's (and its session's).
	Purpose   string `json:"purpose,omitempty"`
	ReturnURL string `json:"return_url,omitempty"`
}

// PortalLink is a one-time URL that opens the console as a tenant
// (CreatePortalLink). ID names it among the tenant's access tokens, to
// revoke it before it is used.
type PortalLink struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Expires   time.Time `json:"expires"`
	ReturnURL string    `json:"return_url,omitempty"`
}

// IssuedToken is a new access token: its facts and the token itself,
// shown this once. Use Token as Options.Token of a Client that acts on
// that tenant only.
type IssuedToken struct {
	AccessToken
	Token string `json:"token"`
}
