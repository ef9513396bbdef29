package engine

import (
	"encoding/json"
	"slices"
	"time"
)

// Tenant is a customer of the sender: the owner of endpoints that receive
// webhooks. Its ID is chosen by the sender (see ValidateTenantID).
type Tenant struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Environment is test or live, chosen when the tenant is created and
	// never changed; a test token acts on test tenants only.
	Environment Environment `json:"environment"`
	// RetryPolicy names the retry policy its endpoints' deliveries follow
	// unless an endpoint names its own: "" (shown "standard") for
	// StandardRetryPolicy.
	RetryPolicy RetryPolicyName `json:"retry_policy"`
	Created     time.Time       `json:"created"`
	Updated     time.Time       `json:"updated"`
}

// RetryPolicyName names a retry policy (RetryPolicy) of the node's
// configuration. Its zero value is StandardRetryPolicy, and its text
// (JSON) form is "standard" then.
type RetryPolicyName string

// MarshalText returns "standard" for "", n itself otherwise.
func (n RetryPolicyName) MarshalText() ([]byte, error) {
	if n == "" {
		return []byte(StandardRetryPolicy), nil
	}
	return []byte(n), nil
}

// Standard reports whether n names the standard policy ("" or
// "standard").
func (n RetryPolicyName) Standard() bool { return n == "" || n == StandardRetryPolicy }

// EventType is one entry of the published catalogue, named
// "resource.action" in the past tense (payment.succeeded).
type EventType struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Status is active (the zero value, shown "active"), deprecated or
	// archived (schema.go): what ingest does with events of the type.
	Status EventTypeStatus `json:"status"`
	// Schema, optional, is a JSON Schema (draft 2020-12) that the data
	// of every event of the type must match (compacted JSON, at most
	// MaxSchemaLen bytes): ingest refuses a mismatch
	// (CodeSchemaMismatch), and Example matches it (schema.go).
	Schema json.RawMessage `json:"schema,omitempty"`
	// Example, optional, is the data of an event of this type as a
	// receiver would see it (compacted JSON, at most MaxExampleLen
	// bytes): what "Send test event" sends (Service.SendTestEvent).
	Example json.RawMessage `json:"example,omitempty"`
	Created time.Time       `json:"created"`
	Updated time.Time       `json:"updated"`
}

// AllEventTypes is the subscription wildcard: an endpoint whose EventTypes is
// exactly ["*"] receives every type.
const AllEventTypes = "*"

// Endpoint is a URL of a tenant's that receives the event types it
// subscribes to, signed with its own secret.
type Endpoint struct {
	ID          string   `json:"id"`
	TenantID    string   `json:"tenant"`
	URL         string   `json:"url"`
	EventTypes  []string `json:"event_types"`
	Description string   `json:"description"`
	Disabled    bool     `json:"disabled"`
	// DisabledReason says who or what disabled the endpoint: "disabled by
	// request", "HTTP 410 Gone: …", or "failing every attempt since …".
	DisabledReason string    `json:"disabled_reason,omitempty"`
	DisabledAt     time.Time `json:"disabled_at,omitzero"`
	// FailingSince is when the endpoint's current run of failed attempts
	// began; zero after a success. LastFailure says why the latest failed.
	FailingSince  time.Time `json:"failing_since,omitzero"`
	LastFailure   string    `json:"last_failure,omitempty"`
	LastFailureAt time.Time `json:"last_failure_at,omitzero"`
	Created       time.Time `json:"created"`
	Updated       time.Time `json:"updated"`

	// VerificationRequired is set when the endpoint was created while new
	// endpoints needed verification (ServiceOptions); then no delivery is
	// attempted until it answers the Standard Webhooks challenge.
	VerificationRequired bool `json:"verification_required"`
	// Verified is when the endpoint last answered the challenge at its
	// current URL; zero when it has not (a URL change clears it).
	Verified time.Time `json:"verified,omitzero"`

	// Ordering is the order its deliveries are attempted in (see
	// lines.go): OrderingNone (the zero value), OrderingKey or
	// OrderingEndpoint. A delivery's line is fixed when it is made, so a
	// change applies to the events ingested after it.
	Ordering Ordering `json:"ordering"`
	// OnDead is what a line of this endpoint does when its head dies:
	// OnDeadSkip (the zero value) or OnDeadBlock. Read when the head
	// dies.
	OnDead OnDead `json:"on_dead"`
	// RateLimit is the endpoint's own bound on its attempts per second
	// (ratelimit.go); the zero value (absent in JSON): none, only the
	// global [delivery] endpoint_rate. Read at each attempt.
	RateLimit RateLimit `json:"rate_limit,omitzero"`
	// EffectiveRateLimit is the bound the endpoint's attempts are held
	// to: RateLimit within the dispatcher's EndpointRate
	// (EffectiveRateLimit); zero (absent in JSON): none. Not stored: the
	// Service fills it in when it answers with the endpoint.
	EffectiveRateLimit RateLimit `json:"effective_rate_limit,omitzero"`

	// Channels, when not empty, filters the events it receives beside
	// their type: only events on at least one of these channels
	// (ListensTo). Nil (the API's absent or []): every event, with
	// channels or without. A change applies to the events ingested
	// after it.
	Channels []string `json:"channels,omitempty"`
	// RetryPolicy names the retry policy of the endpoint's deliveries;
	// "": its tenant's (Tenant.RetryPolicy). A delivery's policy is fixed
	// when its cycle starts (CyclePolicy), so a change applies to the
	// cycles that start after it.
	RetryPolicy RetryPolicyName `json:"retry_policy,omitempty"`
	// EffectiveRetryPolicy is the policy the endpoint's new deliveries
	// follow: RetryPolicy, or its tenant's. Not stored: the Service fills
	// it in when it answers with the endpoint.
	EffectiveRetryPolicy RetryPolicyName `json:"effective_retry_policy,omitempty"`

	// Headers are the custom headers every request to the endpoint
	// carries (customheaders.go): each attempt, test event and verification
	// challenge. Their values are secrets: the JSON shows them masked,
	// and only Service.RevealSecret shows them. Nil when none.
	Headers CustomHeaders `json:"headers,omitempty"`

	// Secrets are the signing keys, current first. A key with a non-zero
	// Expires is an old key kept for a rotation grace window. Secrets are
	// never serialised to JSON: the API shows a secret when it is made
	// and on an explicit reveal (Service.RevealSecret), never in an
	// endpoint's own answer.
	Secrets []Secret `json:"-"`
	// Source says who manages an operational endpoint (an endpoint of
	// OperatorTenant, operational.go): SourceAPI or SourceConfig. ""
	// for a customer's endpoint, and for an operator endpoint stored
	// before sources were (the [alerts] endpoint, then the only one: it
	// is read as SourceConfig). Not in the endpoint's JSON:
	// OperationalEndpoint shows it.
	Source EndpointSource `json:"-"`

	// SendTraceparent makes each attempt's request carry a traceparent
	// header naming the attempt's span, when tracing is on, so that the
	// receiver's own spans join the attempt's trace. False (the
	// default): none is sent, since it shows a trace ID of the sender's
	// to a third party.
	SendTraceparent bool `json:"send_traceparent"`

	// SecretReveals is the audit trail of Service.RevealSecret: who was
	// shown the secrets and when, oldest first, the latest
	// MaxSecretReveals only (RecordSecretReveal). Nil when never
	// revealed. A reveal changes nothing else: Updated stays.
	SecretReveals []SecretReveal `json:"secret_reveals,omitempty"`
}

// SecretReveal records that an endpoint's secrets were shown again.
type SecretReveal struct {
	At time.Time `json:"at"`
	By string    `json:"by"` // who asked: "admin" or "token tok_…" (a tenant token or a portal session)
}

// Secret is one signing key of an endpoint.
type Secret struct {
	Key     string    // "whsec_" + base64 of 32 random bytes (NewSecret), or of 24 to 64 given ones (GivenSecret)
	Expires time.Time // zero: the current key; otherwise dropped after this time
}

// Subscribes reports whether ep receives events of type typ.
func (ep *Endpoint) Subscribes(typ string) bool {
	return slices.Contains(ep.EventTypes, AllEventTypes) || slices.Contains(ep.EventTypes, typ)
}

// Receives reports whether ep receives ev, by its type and its channels
// (Subscribes and ListensTo): the rule of ingest's fan-out
// (NewDeliveries, which makes the same two calls inline) and of a
// backfill's (BackfillStep.Wants).
func (ep *Endpoint) Receives(ev Event) bool {
	return ep.Subscribes(ev.Type) && ep.ListensTo(ev.Channels)
}

// ListensTo reports whether ep receives an event on channels: ep has no
// channel filter, or one of channels is in it. An event on no channel
// goes only to the endpoints without a filter. This is Svix's rule
// (svix-webhooks, server/svix-server/src/core/message_app.rs,
// filtered_endpoints), so that endpoints and events moved from Svix
// are matched as they were there.
func (ep *Endpoint) ListensTo(channels []string) bool {
	if len(ep.Channels) == 0 {
		return true
	}
	for _, ch := range channels {
		if slices.Contains(ep.Channels, ch) {
			return true
		}
	}
	return false
}

// SigningKeys returns the keys to sign with at now: the current key and any
// old key whose grace window has not ended.
func (ep *Endpoint) SigningKeys(now time.Time) []string {
	keys := make([]string, 0, len(ep.Secrets))
	for _, s := range ep.Secrets {
		if s.Expires.IsZero() || now.Before(s.Expires) {
			keys = append(keys, s.Key)
		}
	}
	return keys
}

// Event is one entry of the append-only event log. Body is the envelope
// {"id","type","created","sequence","ordering_key","api_version","data"}
// exactly as it is sent ("ordering_key" only when the event has one): it
// is stored once, verbatim, and every attempt and replay signs these
// bytes.
type Event struct {
	Seq uint64 `json:"-"` // position in the log: ingest order
	// Sequence is the event's number among its tenant's events: 1 for
	// the first, then one more for each event stored, assigned in the
	// commit that stores it, so the stored events of a tenant have every
	// number from 1 to the last, in the order they were stored (a
	// tenant deleted and made again goes on from its last number). Zero
	// for an event stored before webhookd numbered events: its envelope
	// has no "sequence" and keeps the bytes it was stored with.
	Sequence    uint64    `json:"sequence,omitempty"`
	ID          string    `json:"id"`
	TenantID    string    `json:"tenant"`
	Type        string    `json:"type"`
	Created     time.Time `json:"created"`
	APIVersion  string    `json:"api_version"`
	OrderingKey string    `json:"ordering_key,omitempty"` // see IngestInput.OrderingKey
	// Test marks an event sent by Service.SendTestEvent to one endpoint
	// only: its envelope is an ordinary one (the receiver's code path is
	// what it tests), the mark is in the API's answers, the
	// reconciliation feed and the console, so a reconciler knows that
	// the other endpoints were not meant to receive it.
	Test bool `json:"test,omitempty"`
	// Channels are the channels the event was sent on, as ingest took
	// them (IngestInput.Channels): which endpoints receive it beside its
	// type (Endpoint.ListensTo). Nil when none. They are not in the
	// envelope (Body): like Svix, which keeps a message's channels
	// beside its payload, webhookd shows them in the API's answers and
	// the console, and a receiver that needs them has its own.
	Channels []string `json:"channels,omitempty"`
	// DeliverAt is when the event was scheduled for (IngestInput.DeliverAt):
	// its deliveries' first attempt is not made before. Zero when it was
	// not scheduled (delivered at once). Not in the envelope.
	DeliverAt time.Time `json:"deliver_at,omitzero"`
	// IngestTrace is the span context of the ingest that stored the
	// event, as a W3C traceparent (ValidTraceParent), when a Tracer
	// traced it; "" otherwise. Each attempt's span links to it
	// (AttemptInput.IngestTrace), after a restart too. Not in the
	// envelope nor in the API's answers.
	IngestTrace string          `json:"-"`
	Body        json.RawMessage `json:"-"`
}

// Scheduled reports whether d is waiting for its event's deliver_at:
// pending in its first cycle with no attempt made, due at DeliverAt. The
// API and the console show it "scheduled for" that time.
func (d Delivery) Scheduled() bool {
	return !d.DeliverAt.IsZero() && d.State == StatePending && d.Cycle == 1 && d.CycleAttempts == 0 && d.NextAttemptAt.Equal(d.DeliverAt)
}

// State is where a delivery is in its life. The stored states are Pending,
// Succeeded, Dead, Paused and Waiting; Delivering is reported by the dispatcher for a pending
// delivery whose attempt is in flight and is never written to disk.
type State string

const (
	// Pending: an attempt is due at NextAttemptAt, and the delivery has an
	// entry in the retry index with that time. The dispatcher moves it out
	// by recording an attempt's outcome. After a crash it is still pending
	// and its index entry is still there, so the timer is rebuilt at start
	// and the attempt is made again (at-least-once).
	StatePending State = "pending"
	// Delivering: a pending delivery whose attempt is in flight in this
	// process. Not stored: a crash leaves it Pending (see above).
	StateDelivering State = "delivering"
	// Succeeded: an attempt got a 2xx. Final unless someone replays it.
	StateSucceeded State = "succeeded"
	// Dead: attempts or the deadline ran out, or the endpoint answered a
	// permanent error. It sits in the dead letters with Reason until a
	// replay moves it back to Pending.
	StateDead State = "dead"
	// Paused: its endpoint is disabled, so no attempt is made and none is
	// counted; the delivery waits (outside the retry index, in the paused
	// index of its endpoint) for the endpoint to be enabled again.
	// Enabling with "deliver held" moves it back to Pending in a new cycle
	// (recorded as a replay); enabling "from now on" moves it to Dead. A
	// replay moves it to Pending. Nothing moves it after a crash: it stays
	// paused on disk. The dispatcher that pauses a due delivery reads its
	// endpoint again once the pause is stored, and moves it back to
	// Pending, due at once, when an enabling came between its read and
	// its write (UnpauseDelivery): the delivery was pending when the
	// endpoint was enabled, so it is attempted, whichever the enabling
	// chose for the held ones.
	StatePaused State = "paused"
	// Waiting: an ordered delivery behind the head of its line (see
	// lines.go): not attempted, not in the retry index, not held by the
	// dispatcher (the store counts it: Log.Held; the pending bounds count
	// it too), in the line's waiting index by Sequence. The store moves it out, in the
	// transaction that ends its head, when it is the line's lowest
	// Sequence (PromoteDelivery: Pending, due at once); a replay starts a
	// new cycle and it waits again. Nothing moves it after a crash: the
	// promotion was committed with the end of the head, so the promoted
	// delivery is pending in the retry index.
	StateWaiting State = "waiting"
)

// Delivery is the sending of one event to one endpoint: its state, every
// attempt, and every replay.
type Delivery struct {
	ID         string `json:"id"`
	TenantID   string `json:"tenant"`
	EventID    string `json:"event_id"`
	EventType  string `json:"event_type"`
	EndpointID string `json:"endpoint_id"`
	State      State  `json:"state"`

	// Sequence is its event's Sequence (0 for a delivery made before
	// events were numbered). Line is the line it is ordered in among its
	// endpoint's deliveries, fixed when it is made (LineOf): "" when it
	// is not ordered.
	Sequence uint64 `json:"sequence,omitempty"`
	Line     string `json:"line,omitempty"`
	// PreviousSequence is, for a delivery of an event with an
	// OrderingKey, the Sequence of the event before it with the same key
	// that was made into a delivery to the same endpoint, fixed when the
	// delivery is made (whatever the endpoint's Ordering); 0 when there
	// is none, the event has no key, or that delivery is no longer
	// stored (retention, a purge). Each attempt sends it in the
	// webhook-previous-sequence header, so a receiver can refuse an event
	// whose predecessor it has not processed yet (verify.CheckOrder).
	PreviousSequence uint64 `json:"previous_sequence,omitempty"`
	// Test is its event's Test: the delivery of a test event
	// (Service.SendTestEvent).
	Test bool `json:"test,omitempty"`
	// Channels are its event's Channels, copied when it is made (so a
	// listing filters on them without reading the event); nil when the
	// event has none. Read only: deliveries of one event may share them.
	Channels []string `json:"channels,omitempty"`
	// RetryPolicy names the retry policy its current cycle follows,
	// fixed when the cycle started (CyclePolicy: its endpoint's, or its
	// tenant's): "" for StandardRetryPolicy. A name the node's
	// configuration no longer has follows the standard policy
	// (Dispatcher), and the record keeps the name.
	RetryPolicy RetryPolicyName `json:"retry_policy"`
	// DeliverAt is its event's (Event.DeliverAt): the first cycle starts
	// then, its first attempt is due then and not before, and a waiting
	// delivery promoted earlier waits for it. Zero when not scheduled.
	DeliverAt time.Time `json:"deliver_at,omitzero"`
	// WaitingBehind is the ID of its line's head while it is Waiting,
	// filled in by the store when it reads the delivery (the head
	// changes without the waiting deliveries being rewritten); "" in any
	// other state.
	WaitingBehind string `json:"waiting_behind,omitempty"`

	// Cycle counts delivery cycles: 1 at ingest, +1 per replay. Attempts
	// from an older cycle are kept in the log but no longer move the state.
	Cycle int `json:"cycle"`
	// CycleStart is when the current cycle began (ingest or replay); the
	// overall deadline runs from here.
	CycleStart time.Time `json:"cycle_start"`
	// CycleAttempts counts attempts made in the current cycle.
	CycleAttempts int `json:"cycle_attempts"`
	// NextAttemptAt is when the next attempt is due; zero unless Pending.
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`

	LastStatus int       `json:"last_status,omitempty"` // HTTP status of the last attempt, 0 if none or no response
	Reason     string    `json:"reason,omitempty"`      // why the last attempt failed, or why it is dead
	DeadAt     time.Time `json:"dead_at,omitzero"`
	Created    time.Time `json:"created"`
	Updated    time.Time `json:"updated"`

	Attempts []Attempt `json:"attempts"`
	Replays  []Replay  `json:"replays"`
	// Skips records each time the delivery, dead at the head of its
	// line, let the line go on without it (SkipDelivery, or its death
	// on a line whose endpoint's on_dead is skip). Nil when none.
	Skips []Skip `json:"skips,omitempty"`
	// Backfill, when set, records that a backfill made the delivery
	// (Service.StartBackfill) for an event stored before: who asked and when,
	// which is when its first cycle began. Nil for a delivery made at
	// ingest. Created is its event's Created either way.
	Backfill *Backfill `json:"backfill,omitempty"`
}

// Attempt is one HTTP request to the endpoint and what came of it.
type Attempt struct {
	Cycle      int           `json:"cycle"`
	Number     int           `json:"number"` // 1-based within its cycle
	Start      time.Time     `json:"start"`
	Duration   time.Duration `json:"duration_ns"`
	Status     int           `json:"status,omitempty"` // 0 when no response was read
	Error      string        `json:"error,omitempty"`  // transport error or classification reason
	Response   string        `json:"response,omitempty"`
	Outcome    Outcome       `json:"outcome"`
	RetryAfter time.Duration `json:"retry_after_ns,omitempty"` // from a 429/503 Retry-After header
	// ResponseHeaders are the response's headers as kept
	// (KeepResponseHeaders): sorted by name, bounded, credentials left
	// out. Nil when no response was read, none was kept, or the attempt
	// was recorded before webhookd kept them.
	ResponseHeaders []Header `json:"response_headers,omitempty"`
}

// Outcome is how one attempt is classified.
type Outcome string

const (
	OutcomeSuccess   Outcome = "success"   // 2xx
	OutcomeRetry     Outcome = "retry"     // 408/425/429/5xx, timeout, connection error, a status the policy retries
	OutcomePermanent Outcome = "permanent" // 3xx and other 4xx (the endpoint is misconfigured), or the receiver's abort
)

// Replay records one manual re-send of a delivery.
type Replay struct {
	At    time.Time `json:"at"`
	By    string    `json:"by"` // who asked: "admin" or a token name
	Cycle int       `json:"cycle"`
}

// Backfill records that a backfill made a delivery (Delivery.Backfill).
type Backfill struct {
	At time.Time `json:"at"`
	By string    `json:"by"` // who asked: "admin" or a token name
}

// Skip records that a dead ordered delivery stopped holding its line:
// the deliveries behind it went on without it.
type Skip struct {
	At    time.Time `json:"at"`
	By    string    `json:"by"` // who asked ("admin", a token name), or SkipByOnDead
	Cycle int       `json:"cycle"`
}

// MaxResponseExcerpt is how much of a response body an attempt keeps.
const MaxResponseExcerpt = 1024
