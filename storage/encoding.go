package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/webhookd/webhookd/engine"
)

// The leading byte of every stored record is the version of its encoding.
// formatV1 is JSON (or, for idempotency records, a fixed layout);
// formatV2 is the binary format of binary.go, which deliveries and event
// headers are written in since schema 3. A decoder reads the versions its
// kind was ever written in and refuses any other.
const (
	formatV1 = 1
	formatV2 = 2
	formatV3 = 3 // event records since schema 4, delivery records since schema 5: formatV2 with more fields at the end
	formatV4 = 4 // event records of test events since schema 7: formatV3 with flags before the body; delivery records since schema 6: formatV3 with PreviousSequence at the end
	formatV5 = 5 // delivery records of test events since schema 7: formatV4 with flags at the end
	formatV6 = 6 // delivery records with response headers since schema 10: formatV5 (flags even when none) with each attempt's headers at the end
	formatV7 = 7 // delivery records of a cycle that follows a retry policy other than the standard one: formatV6 (headers even when none) with the policy's name at the end
)

// Flags of an event or delivery record in formatV4 (events) or formatV5
// (deliveries), a uvarint. A reader refuses a flag it does not know.
const (
	flagTest = 1 << 0 // Event.Test, Delivery.Test
	// flagChannels: the record has channels (Event.Channels,
	// Delivery.Channels), a count and that many strings right after
	// the flags. A record without channels has no such field, and one
	// with them is refused by a webhookd that predates them.
	flagChannels = 1 << 1
	flagsKnow    = flagTest | flagChannels
	// flagBackfill: a delivery record made by a backfill
	// (Delivery.Backfill), at ‖ by right after the channels; only a
	// delivery has it, and a webhookd that predates backfills refuses
	// the record rather than forget who made it.
	flagBackfill = 1 << 2
	// flagScheduled: the record is of a scheduled event or its delivery
	// (Event.DeliverAt, Delivery.DeliverAt), the time right after the
	// channels (an event) or the backfill (a delivery). A record without
	// it has no such field, and a webhookd that predates deliver_at
	// refuses one with it rather than deliver it early.
	flagScheduled = 1 << 3
	// flagTraced: the record is of an event whose ingest was traced
	// (Event.IngestTrace), its W3C traceparent a string right after the
	// deliver_at. Only an event has it. A record without it has no such
	// field, and a webhookd that predates tracing refuses one with it
	// (it knows no flag of the kind it could skip).
	flagTraced         = 1 << 4
	eventFlagsKnown    = flagsKnow | flagScheduled | flagTraced
	deliveryFlagsKnown = flagsKnow | flagBackfill | flagScheduled
)

// recordFlags returns the flags of a record of an event or delivery
// marked test and on channels.
func recordFlags(test bool, channels []string) uint64 {
	var f uint64
	if test {
		f |= flagTest
	}
	if len(channels) > 0 {
		f |= flagChannels
	}
	return f
}

// appendChannels writes the channels field of a record with
// flagChannels.
func appendChannels(b []byte, channels []string) []byte {
	b = appendCount(b, len(channels), false)
	for _, ch := range channels {
		b = appendString(b, ch)
	}
	return b
}

// channels reads the channels field appendChannels wrote: nil when
// there are none, as an event without channels has.
func (r *reader) channels() []string {
	n := r.count(1)
	if n <= 0 {
		if r.err == nil {
			r.fail() // flagChannels without a channel is never written
		}
		return nil
	}
	chs := make([]string, n)
	for i := range chs {
		chs[i] = r.string()
	}
	return chs
}

func init() {
	// Schema 2 to 3: records already written stay in formatV1 and are read
	// as they are, so there is nothing to rewrite. The version is there so
	// that a webhookd which cannot read formatV2 refuses the file at Open
	// instead of failing on its records.
	migrations[2] = func(*bolt.Tx) error { return nil }
	// Schema 3 to 4: events are numbered per tenant (tenant_sequences)
	// and new event records are formatV3. Events already stored keep
	// their records and have no number; a tenant's first event after the
	// upgrade is its 1.
	migrations[3] = func(*bolt.Tx) error { return nil }
	// Schema 4 to 5: ordered lines (line_heads, line_waiting, which Open
	// creates) and delivery records in formatV3. No delivery stored
	// before is ordered, so there is nothing to rewrite.
	migrations[4] = func(*bolt.Tx) error { return nil }
	// Schema 5 to 6: key_tails (which Open creates) and delivery records
	// in formatV4. Deliveries stored before have no PreviousSequence; a
	// key's first delivery after the upgrade has none either.
	migrations[5] = func(*bolt.Tx) error { return nil }
	// Schema 6 to 7: test events (SendTestEvent), whose event records
	// are formatV4 and delivery records formatV5; event types' JSON
	// records may have an example. Nothing stored before is a test.
	migrations[6] = func(*bolt.Tx) error { return nil }
	// Schema 9 to 10: delivery records whose attempts kept response
	// headers are formatV6. Attempts recorded before have none, so
	// there is nothing to rewrite.
	migrations[9] = func(*bolt.Tx) error { return nil }
	// Schema 11 to 12: owed fan-outs (fanouts, which Open creates).
	// Every delivery stored before was stored with its event, so none
	// is owed.
	migrations[11] = func(*bolt.Tx) error { return nil }
	// Schema 7 to 8: event_deliveries goes. tenant_deliveries lists every
	// delivery under its event's tenant and place in the log, so an
	// event's deliveries are read from there (eventDeliveries), and each
	// delivery made costs a commit one index entry less.
	migrations[7] = func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketEventDeliveries); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return err
		}
		return nil
	}
}

// The encoding types below are the on-disk form of the domain types. They
// are separate on purpose: renaming a JSON field of the API must not change
// the file format, and the file keeps what the API never shows (secrets).
// Times are stored in UTC.

type tenantRecord struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Environment string    `json:"environment,omitempty"` // "": live (written before environments)
	Created     time.Time `json:"created"`
	Updated     time.Time `json:"updated"`
	RetryPolicy string    `json:"retry_policy,omitempty"` // "": standard (and before retry policies)
}

type eventTypeRecord struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Example     json.RawMessage `json:"example,omitempty"`
	Created     time.Time       `json:"created"`
	Updated     time.Time       `json:"updated"`
	Status      string          `json:"status,omitempty"` // "": active (and before statuses)
	Schema      json.RawMessage `json:"schema,omitempty"` // none: no schema (and before schemas)
}

// Keys that only a record of an event type with a status or a schema
// holds (omitempty): ingest decodes the record of its type only when it
// has one of them (ingestType).
var (
	eventTypeStatusField = []byte(`"status":`)
	eventTypeSchemaField = []byte(`"schema":`)
)

type endpointRecord struct {
	ID          string         `json:"id"`
	TenantID    string         `json:"tenant"`
	URL         string         `json:"url"`
	EventTypes  []string       `json:"event_types"`
	Description string         `json:"description"`
	Disabled    bool           `json:"disabled"`
	Created     time.Time      `json:"created"`
	Updated     time.Time      `json:"updated"`
	Secrets     []secretRecord `json:"secrets"`

	VerificationRequired bool      `json:"verification_required,omitempty"`
	Verified             time.Time `json:"verified,omitzero"`

	DisabledReason string    `json:"disabled_reason,omitempty"`
	DisabledAt     time.Time `json:"disabled_at,omitzero"`
	FailingSince   time.Time `json:"failing_since,omitzero"`
	LastFailure    string    `json:"last_failure,omitempty"`
	LastFailureAt  time.Time `json:"last_failure_at,omitzero"`

	Ordering string `json:"ordering,omitempty"` // "": none (written before ordered lines)
	OnDead   string `json:"on_dead,omitempty"`  // "": skip

	Channels []string `json:"channels,omitempty"` // absent: no channel filter (and before channels)

	SecretReveals []secretRevealRecord `json:"secret_reveals,omitempty"` // absent: never revealed (and before reveals)

	RetryPolicy string `json:"retry_policy,omitempty"` // "": the tenant's (and before retry policies)

	Headers []headerRecord `json:"headers,omitempty"` // absent: none (and before custom headers)

	RateLimit *rateLimitRecord `json:"rate_limit,omitempty"` // absent: none (and before rate limits)

	Source string `json:"source,omitempty"` // an operational endpoint's; absent: a customer's (and before sources)

	SendTraceparent bool `json:"send_traceparent,omitempty"` // absent: false (and before tracing)
}

// headerRecord is one engine.CustomHeader: its value is under "sealed" when it
// is sealed (package sealing), under "value" when it is plain, never
// both: a value may be any text, so which it is is not read from it.
type headerRecord struct {
	Name   string `json:"name"`
	Value  string `json:"value,omitempty"`
	Sealed string `json:"sealed,omitempty"`
}

// rateLimitRecord is an engine.RateLimit that is not zero.
type rateLimitRecord struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst"`
}

type secretRecord struct {
	Key     string    `json:"key"` // "whsec_…", or sealed (package sealing)
	Expires time.Time `json:"expires,omitzero"`
}

// secretRevealRecord is one engine.SecretReveal: who was shown the
// secrets, and when. It holds no secret.
type secretRevealRecord struct {
	At time.Time `json:"at"`
	By string    `json:"by"`
}

// eventHeader is the JSON part of an event record; the body follows it
// verbatim and the sequence number is the key.
type eventHeader struct {
	ID         string    `json:"id"`
	TenantID   string    `json:"tenant"`
	Type       string    `json:"type"`
	Created    time.Time `json:"created"`
	APIVersion string    `json:"api_version"`
}

type deliveryRecord struct {
	ID            string          `json:"id"`
	TenantID      string          `json:"tenant"`
	EventID       string          `json:"event_id"`
	EventType     string          `json:"event_type"`
	EndpointID    string          `json:"endpoint_id"`
	State         string          `json:"state"`
	Cycle         int             `json:"cycle"`
	CycleStart    time.Time       `json:"cycle_start"`
	CycleAttempts int             `json:"cycle_attempts"`
	NextAttemptAt time.Time       `json:"next_attempt_at,omitzero"`
	LastStatus    int             `json:"last_status,omitempty"`
	Reason        string          `json:"reason,omitempty"`
	DeadAt        time.Time       `json:"dead_at,omitzero"`
	Created       time.Time       `json:"created"`
	Updated       time.Time       `json:"updated"`
	Attempts      []attemptRecord `json:"attempts"`
	Replays       []replayRecord  `json:"replays"`
}

type attemptRecord struct {
	Cycle      int       `json:"cycle"`
	Number     int       `json:"number"`
	Start      time.Time `json:"start"`
	DurationNS int64     `json:"duration_ns"`
	Status     int       `json:"status,omitempty"`
	Error      string    `json:"error,omitempty"`
	Response   string    `json:"response,omitempty"`
	Outcome    string    `json:"outcome"`
	RetryAfter int64     `json:"retry_after_ns,omitempty"`
}

type replayRecord struct {
	At    time.Time `json:"at"`
	By    string    `json:"by"`
	Cycle int       `json:"cycle"`
}

// idempotencyRecord is what an Idempotency-Key remembers. Its encoding is
// binary: version ‖ expires(8) ‖ request hash(32) ‖ event ID.
type idempotencyRecord struct {
	EventID     string
	RequestHash [32]byte
	Expires     time.Time
}

// utc returns t in UTC without a monotonic reading; the zero time stays
// zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// encodeJSON returns the version byte followed by v as JSON.
func encodeJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append([]byte{formatV1}, b...), nil
}

// decodeJSON checks the version byte of a record of kind and decodes the
// JSON after it into v.
func decodeJSON(kind string, data []byte, v any) error {
	if len(data) == 0 {
		return fmt.Errorf("decode %s: empty record", kind)
	}
	if data[0] != formatV1 {
		return fmt.Errorf("decode %s: unknown record format %d", kind, data[0])
	}
	if err := json.Unmarshal(data[1:], v); err != nil {
		return fmt.Errorf("decode %s: %w", kind, err)
	}
	return nil
}

func encodeTenant(t engine.Tenant) ([]byte, error) {
	return encodeJSON(tenantRecord{ID: t.ID, Name: t.Name, Environment: string(t.Environment), Created: utc(t.Created), Updated: utc(t.Updated), RetryPolicy: string(t.RetryPolicy)})
}

func decodeTenant(data []byte) (engine.Tenant, error) {
	var r tenantRecord
	if err := decodeJSON("tenant", data, &r); err != nil {
		return engine.Tenant{}, err
	}
	if r.ID == "" {
		return engine.Tenant{}, errors.New("decode tenant: no id")
	}
	env := engine.Environment(r.Environment)
	if env == "" {
		env = engine.EnvironmentLive
	}
	return engine.Tenant{ID: r.ID, Name: r.Name, Environment: env, Created: r.Created, Updated: r.Updated, RetryPolicy: engine.RetryPolicyName(r.RetryPolicy)}, nil
}

// tenantRetryPolicyField is how a tenant record that names a retry
// policy names it: one without it follows the standard policy.
var tenantRetryPolicyField = []byte(`"retry_policy"`)

// tenantRetryPolicy returns the RetryPolicy of tenant record data,
// decoding it only when it names one: ingest's fan-out reads it at every
// event, and most tenants follow the standard policy.
func tenantRetryPolicy(data []byte) (engine.RetryPolicyName, error) {
	if !bytes.Contains(data, tenantRetryPolicyField) {
		return "", nil
	}
	t, err := decodeTenant(data)
	return t.RetryPolicy, err
}

func encodeEventType(et engine.EventType) ([]byte, error) {
	return encodeJSON(eventTypeRecord{Name: et.Name, Description: et.Description, Example: et.Example, Created: utc(et.Created), Updated: utc(et.Updated),
		Status: string(et.Status), Schema: et.Schema})
}

func decodeEventType(data []byte) (engine.EventType, error) {
	var r eventTypeRecord
	if err := decodeJSON("event type", data, &r); err != nil {
		return engine.EventType{}, err
	}
	if r.Name == "" {
		return engine.EventType{}, errors.New("decode event type: no name")
	}
	return engine.EventType{Name: r.Name, Description: r.Description, Example: r.Example, Created: r.Created, Updated: r.Updated,
		Status: engine.EventTypeStatus(r.Status), Schema: r.Schema}, nil
}

// encodeEndpoint encodes ep with its secrets.
func encodeEndpoint(ep engine.Endpoint) ([]byte, error) {
	r := endpointRecord{
		ID: ep.ID, TenantID: ep.TenantID, URL: ep.URL, EventTypes: ep.EventTypes,
		Description: ep.Description, Disabled: ep.Disabled,
		Created: utc(ep.Created), Updated: utc(ep.Updated),
		VerificationRequired: ep.VerificationRequired, Verified: utc(ep.Verified),
		DisabledReason: ep.DisabledReason, DisabledAt: utc(ep.DisabledAt),
		FailingSince: utc(ep.FailingSince), LastFailure: ep.LastFailure, LastFailureAt: utc(ep.LastFailureAt),
		Ordering: string(ep.Ordering), OnDead: string(ep.OnDead),
		Channels:        ep.Channels,
		RetryPolicy:     string(ep.RetryPolicy),
		Source:          string(ep.Source),
		SendTraceparent: ep.SendTraceparent,
	}
	if !ep.RateLimit.IsZero() {
		r.RateLimit = &rateLimitRecord{PerSecond: ep.RateLimit.PerSecond, Burst: ep.RateLimit.Burst}
	}
	if ep.Secrets != nil {
		r.Secrets = make([]secretRecord, len(ep.Secrets))
		for i, s := range ep.Secrets {
			r.Secrets[i] = secretRecord{Key: s.Key, Expires: utc(s.Expires)}
		}
	}
	if len(ep.SecretReveals) > 0 {
		r.SecretReveals = make([]secretRevealRecord, len(ep.SecretReveals))
		for i, rv := range ep.SecretReveals {
			r.SecretReveals[i] = secretRevealRecord{At: utc(rv.At), By: rv.By}
		}
	}
	if len(ep.Headers) > 0 {
		r.Headers = make([]headerRecord, len(ep.Headers))
		for i, h := range ep.Headers {
			if h.Sealed {
				r.Headers[i] = headerRecord{Name: h.Name, Sealed: h.Value}
			} else {
				r.Headers[i] = headerRecord{Name: h.Name, Value: h.Value}
			}
		}
	}
	return encodeJSON(r)
}

func decodeEndpoint(data []byte) (engine.Endpoint, error) {
	var r endpointRecord
	if err := decodeJSON("endpoint", data, &r); err != nil {
		return engine.Endpoint{}, err
	}
	if r.ID == "" || r.TenantID == "" {
		return engine.Endpoint{}, errors.New("decode endpoint: no id or tenant")
	}
	ep := engine.Endpoint{
		ID: r.ID, TenantID: r.TenantID, URL: r.URL, EventTypes: r.EventTypes,
		Description: r.Description, Disabled: r.Disabled, Created: r.Created, Updated: r.Updated,
		VerificationRequired: r.VerificationRequired, Verified: r.Verified,
		DisabledReason: r.DisabledReason, DisabledAt: r.DisabledAt,
		FailingSince: r.FailingSince, LastFailure: r.LastFailure, LastFailureAt: r.LastFailureAt,
		Ordering: engine.Ordering(r.Ordering), OnDead: engine.OnDead(r.OnDead),
		RetryPolicy:     engine.RetryPolicyName(r.RetryPolicy),
		Source:          engine.EndpointSource(r.Source),
		SendTraceparent: r.SendTraceparent,
	}
	if len(r.Channels) > 0 {
		ep.Channels = r.Channels
	}
	if r.RateLimit != nil {
		ep.RateLimit = engine.RateLimit{PerSecond: r.RateLimit.PerSecond, Burst: r.RateLimit.Burst}
	}
	if r.Secrets != nil {
		ep.Secrets = make([]engine.Secret, len(r.Secrets))
		for i, s := range r.Secrets {
			ep.Secrets[i] = engine.Secret{Key: s.Key, Expires: s.Expires}
		}
	}
	if len(r.SecretReveals) > 0 {
		ep.SecretReveals = make([]engine.SecretReveal, len(r.SecretReveals))
		for i, rv := range r.SecretReveals {
			ep.SecretReveals[i] = engine.SecretReveal{At: rv.At, By: rv.By}
		}
	}
	if len(r.Headers) > 0 {
		ep.Headers = make(engine.CustomHeaders, len(r.Headers))
		for i, h := range r.Headers {
			if (h.Value == "") == (h.Sealed == "") {
				return engine.Endpoint{}, fmt.Errorf("decode endpoint: header %q has no value, or two", h.Name)
			}
			ep.Headers[i] = engine.CustomHeader{Name: h.Name, Value: h.Value + h.Sealed, Sealed: h.Sealed != ""}
		}
	}
	return ep, nil
}

// maxEventHeader bounds the header of an event record (formatV1).
const maxEventHeader = 1 << 16

// encodeEvent encodes an event as
//
//	version(3) ‖ id ‖ tenant ‖ type ‖ created ‖ api version ‖
//	sequence (uvarint) ‖ ordering key ‖ body
//
// or, for a test event, a scheduled one, one on channels or one whose
// ingest was traced, as
//
//	version(4) ‖ … ‖ ordering key ‖ flags (uvarint) ‖ [channels] ‖
//	[deliver at] ‖ [ingest trace] ‖ body
//
// with the channels (a count, then each a string) when flagChannels is
// set, the deliver_at when flagScheduled is and the ingest's traceparent
// (a string) when flagTraced is;
// in the binary format of binary.go, the body last and as is: it is what
// gets signed and sent, byte for byte. Seq is not encoded: it is the
// record's key. Records written before schema 4 are formatV2, the same
// without sequence and ordering key, and before schema 3
//
//	version(1) ‖ header length(4, big-endian) ‖ header JSON ‖ body
//
// and decodeEvent reads all three.
func encodeEvent(ev engine.Event) ([]byte, error) {
	n := 41 + len(ev.ID) + len(ev.TenantID) + len(ev.Type) + len(ev.APIVersion) + len(ev.OrderingKey) + len(ev.Body) + 12 + len(ev.IngestTrace)
	for _, ch := range ev.Channels {
		n += 2 + len(ch)
	}
	b := make([]byte, 0, n)
	flags := recordFlags(ev.Test, ev.Channels)
	if !ev.DeliverAt.IsZero() {
		flags |= flagScheduled
	}
	if ev.IngestTrace != "" {
		flags |= flagTraced
	}
	if flags != 0 {
		b = append(b, formatV4)
	} else {
		b = append(b, formatV3)
	}
	b = appendString(b, ev.ID)
	b = appendString(b, ev.TenantID)
	b = appendString(b, ev.Type)
	b = appendTime(b, ev.Created)
	b = appendString(b, ev.APIVersion)
	b = binary.AppendUvarint(b, ev.Sequence)
	b = appendString(b, ev.OrderingKey)
	if flags != 0 {
		b = binary.AppendUvarint(b, flags)
	}
	if flags&flagChannels != 0 {
		b = appendChannels(b, ev.Channels)
	}
	if flags&flagScheduled != 0 {
		b = appendTime(b, ev.DeliverAt)
	}
	if flags&flagTraced != 0 {
		b = appendString(b, ev.IngestTrace)
	}
	return append(b, ev.Body...), nil
}

// decodeEvent decodes an event record; the caller sets Seq from the key.
// The body is copied, so the result outlives the transaction.
func decodeEvent(data []byte) (engine.Event, error) {
	ev, body, err := decodeEventHeader(data)
	if err != nil {
		return engine.Event{}, err
	}
	ev.Body = bytes.Clone(body)
	if ev.Body == nil {
		ev.Body = []byte{}
	}
	return ev, nil
}

// decodeEventHeader decodes an event record but for its body, which it
// returns as a slice of data (not copied).
func decodeEventHeader(data []byte) (engine.Event, []byte, error) {
	if len(data) == 0 {
		return engine.Event{}, nil, errors.New("decode event: empty record")
	}
	var ev engine.Event
	var body []byte
	switch data[0] {
	case formatV2, formatV3, formatV4:
		r := reader{b: data[1:]}
		ev = engine.Event{ID: r.string(), TenantID: r.string(), Type: r.string(), Created: r.time(), APIVersion: r.string()}
		if data[0] >= formatV3 {
			ev.Sequence, ev.OrderingKey = r.uvarint(), r.string()
		}
		if data[0] >= formatV4 {
			flags := r.uvarint()
			if flags&^eventFlagsKnown != 0 && r.err == nil {
				return engine.Event{}, nil, fmt.Errorf("decode event: unknown flags %#x", flags)
			}
			ev.Test = flags&flagTest != 0
			if flags&flagChannels != 0 {
				ev.Channels = r.channels()
			}
			if flags&flagScheduled != 0 {
				ev.DeliverAt = r.time()
			}
			if flags&flagTraced != 0 {
				ev.IngestTrace = r.string()
			}
		}
		if r.err != nil {
			return engine.Event{}, nil, fmt.Errorf("decode event: %w", r.err)
		}
		body = r.b
	case formatV1:
		if len(data) < 5 {
			return engine.Event{}, nil, errors.New("decode event: short record")
		}
		n := binary.BigEndian.Uint32(data[1:5])
		if n > maxEventHeader || uint64(n) > uint64(len(data)-5) {
			return engine.Event{}, nil, fmt.Errorf("decode event: header length %d out of range", n)
		}
		var h eventHeader
		if err := json.Unmarshal(data[5:5+n], &h); err != nil {
			return engine.Event{}, nil, fmt.Errorf("decode event: %w", err)
		}
		ev = engine.Event{ID: h.ID, TenantID: h.TenantID, Type: h.Type, Created: h.Created, APIVersion: h.APIVersion}
		body = data[5+n:]
	default:
		return engine.Event{}, nil, fmt.Errorf("decode event: unknown record format %d", data[0])
	}
	if ev.ID == "" || ev.TenantID == "" {
		return engine.Event{}, nil, errors.New("decode event: no id or tenant")
	}
	return ev, body, nil
}

// eventAttempt returns what an attempt reads of an event record: its
// body, as eventBody does, and its IngestTrace.
func eventAttempt(data []byte) (body []byte, trace string, err error) {
	if len(data) > 0 && data[0] == formatV4 {
		ev, body, err := decodeEventHeader(data)
		return body, ev.IngestTrace, err
	}
	body, err = eventBody(data)
	return body, "", err
}

// eventBody returns the body of an event record, as decodeEventHeader
// does, without copying the header's strings: each attempt reads it.
func eventBody(data []byte) ([]byte, error) {
	if len(data) == 0 || data[0] != formatV3 && data[0] != formatV2 {
		_, body, err := decodeEventHeader(data)
		return body, err
	}
	r := reader{b: data[1:]}
	r.skipString() // id
	r.skipString() // tenant
	r.skipString() // type
	r.time()       // created
	r.skipString() // api version
	if data[0] == formatV3 {
		r.uvarint()    // sequence
		r.skipString() // ordering key
	}
	if r.err != nil {
		return nil, fmt.Errorf("decode event: %w", r.err)
	}
	return r.b, nil
}

// encodeDelivery encodes d in the binary format (binary.go), in the
// oldest format that holds all it has:
//
//	version(2..6) ‖ id ‖ tenant ‖ event id ‖ event type ‖ endpoint id ‖ state ‖
//	cycle ‖ cycle start ‖ cycle attempts ‖ next attempt at ‖ last status ‖
//	reason ‖ dead at ‖ created ‖ updated ‖
//	count ‖ attempts (cycle ‖ number ‖ start ‖ duration ‖ status ‖ error ‖
//	response ‖ outcome ‖ retry after) ‖ count ‖ replays (at ‖ by ‖ cycle) ‖
//	sequence (uvarint) ‖ line ‖ count ‖ skips (at ‖ by ‖ cycle) ‖   formatV3 on
//	previous sequence (uvarint) ‖                                  formatV4 on
//	flags (uvarint) ‖ [channels] ‖ [backfill (at ‖ by)] ‖
//	[deliver at] ‖                                                 formatV5 on
//	for each attempt: count ‖ response headers (name ‖ value)      formatV6 on
//	retry policy                                                   formatV7
//
// with, in formatV5 on, the channels (a count, then each a string) when
// the flags have flagChannels, and the backfill that made it when they
// have flagBackfill. A delivery with no sequence, line or
// skips is written in formatV2, as before schema 5; one whose attempts
// kept no response header in at most formatV5; one whose cycle follows
// the standard retry policy in at most formatV6. WaitingBehind is not encoded: a read fills it in
// (getDelivery). Records written before schema 3 are JSON (formatV1);
// decodeDelivery reads them all.
func encodeDelivery(d engine.Delivery) ([]byte, error) {
	n := 64 + len(d.ID) + len(d.TenantID) + len(d.EventID) + len(d.EventType) + len(d.EndpointID) + len(d.Reason)
	v6 := false
	for _, a := range d.Attempts {
		n += 40 + len(a.Error) + len(a.Response) + len(a.Outcome)
		for _, h := range a.ResponseHeaders {
			n += 4 + len(h.Name) + len(h.Value)
		}
		v6 = v6 || a.ResponseHeaders != nil
	}
	for _, rp := range d.Replays {
		n += 16 + len(rp.By)
	}
	n += 22 + len(d.Line)
	for _, ch := range d.Channels {
		n += 2 + len(ch)
	}
	for _, sk := range d.Skips {
		n += 16 + len(sk.By)
	}
	v7 := d.RetryPolicy != ""
	v6 = v6 || v7
	if v6 {
		n += len(d.Attempts) + 1 + len(d.RetryPolicy)
	}
	flags := recordFlags(d.Test, d.Channels)
	if d.Backfill != nil {
		flags |= flagBackfill
		n += 16 + len(d.Backfill.By)
	}
	if !d.DeliverAt.IsZero() {
		flags |= flagScheduled
		n += 12
	}
	v5 := v6 || flags != 0
	v4 := v5 || d.PreviousSequence != 0
	v3 := v4 || d.Sequence != 0 || d.Line != "" || d.Skips != nil
	b := make([]byte, 0, n)
	switch {
	case v7:
		b = append(b, formatV7)
	case v6:
		b = append(b, formatV6)
	case v5:
		b = append(b, formatV5)
	case v4:
		b = append(b, formatV4)
	case v3:
		b = append(b, formatV3)
	default:
		b = append(b, formatV2)
	}
	for _, s := range [...]string{d.ID, d.TenantID, d.EventID, d.EventType, d.EndpointID, string(d.State)} {
		b = appendString(b, s)
	}
	b = appendInt(b, int64(d.Cycle))
	b = appendTime(b, d.CycleStart)
	b = appendInt(b, int64(d.CycleAttempts))
	b = appendTime(b, d.NextAttemptAt)
	b = appendInt(b, int64(d.LastStatus))
	b = appendString(b, d.Reason)
	b = appendTime(b, d.DeadAt)
	b = appendTime(b, d.Created)
	b = appendTime(b, d.Updated)
	b = appendCount(b, len(d.Attempts), d.Attempts == nil)
	for _, a := range d.Attempts {
		b = appendInt(b, int64(a.Cycle))
		b = appendInt(b, int64(a.Number))
		b = appendTime(b, a.Start)
		b = appendInt(b, int64(a.Duration))
		b = appendInt(b, int64(a.Status))
		b = appendString(b, a.Error)
		b = appendString(b, a.Response)
		b = appendString(b, string(a.Outcome))
		b = appendInt(b, int64(a.RetryAfter))
	}
	b = appendCount(b, len(d.Replays), d.Replays == nil)
	for _, rp := range d.Replays {
		b = appendTime(b, rp.At)
		b = appendString(b, rp.By)
		b = appendInt(b, int64(rp.Cycle))
	}
	if !v3 {
		return b, nil
	}
	b = binary.AppendUvarint(b, d.Sequence)
	b = appendString(b, d.Line)
	b = appendCount(b, len(d.Skips), d.Skips == nil)
	for _, sk := range d.Skips {
		b = appendTime(b, sk.At)
		b = appendString(b, sk.By)
		b = appendInt(b, int64(sk.Cycle))
	}
	if v4 {
		b = binary.AppendUvarint(b, d.PreviousSequence)
	}
	if v5 {
		b = binary.AppendUvarint(b, flags)
	}
	if flags&flagChannels != 0 {
		b = appendChannels(b, d.Channels)
	}
	if flags&flagBackfill != 0 {
		b = appendTime(b, d.Backfill.At)
		b = appendString(b, d.Backfill.By)
	}
	if flags&flagScheduled != 0 {
		b = appendTime(b, d.DeliverAt)
	}
	if v6 {
		for _, a := range d.Attempts {
			b = appendCount(b, len(a.ResponseHeaders), a.ResponseHeaders == nil)
			for _, h := range a.ResponseHeaders {
				b = appendString(b, h.Name)
				b = appendString(b, h.Value)
			}
		}
	}
	if v7 {
		b = appendString(b, string(d.RetryPolicy))
	}
	return b, nil
}

// storedState reports whether s is a state a delivery record may hold
// (StateDelivering never is).
func storedState(s engine.State) bool {
	switch s {
	case engine.StatePending, engine.StateSucceeded, engine.StateDead, engine.StatePaused, engine.StateWaiting:
		return true
	}
	return false
}

// decodeDelivery decodes a delivery record of either format.
func decodeDelivery(data []byte) (engine.Delivery, error) {
	var d engine.Delivery
	var err error
	if len(data) > 0 && data[0] >= formatV2 && data[0] <= formatV7 {
		d, err = decodeDeliveryV2(data[1:], data[0])
	} else {
		d, err = decodeDeliveryV1(data)
	}
	if err != nil {
		return engine.Delivery{}, err
	}
	if d.ID == "" || d.TenantID == "" {
		return engine.Delivery{}, errors.New("decode delivery: no id or tenant")
	}
	if !storedState(d.State) {
		return engine.Delivery{}, fmt.Errorf("decode delivery %s: unknown state %q", d.ID, d.State)
	}
	return d, nil
}

// minAttemptBytes, minReplayBytes and minHeaderBytes are the fewest
// bytes an encoded attempt, replay and response header take (every field
// at its shortest).
const (
	minAttemptBytes = 10
	minReplayBytes  = 4
	minHeaderBytes  = 2
)

// decodeDeliveryV2 decodes a record of format (formatV2 to formatV7)
// after its version byte.
func decodeDeliveryV2(data []byte, format byte) (engine.Delivery, error) {
	r := sharedReader(data) // one allocation for its strings, not one each
	d := engine.Delivery{
		ID: r.string(), TenantID: r.string(), EventID: r.string(), EventType: r.string(),
		EndpointID: r.string(), State: engine.State(r.string()),
		Cycle: int(r.int()), CycleStart: r.time(), CycleAttempts: int(r.int()),
		NextAttemptAt: r.time(), LastStatus: int(r.int()), Reason: r.string(),
		DeadAt: r.time(), Created: r.time(), Updated: r.time(),
	}
	if n := r.count(minAttemptBytes); n >= 0 {
		d.Attempts = make([]engine.Attempt, n)
		for i := range d.Attempts {
			d.Attempts[i] = engine.Attempt{
				Cycle: int(r.int()), Number: int(r.int()), Start: r.time(), Duration: time.Duration(r.int()),
				Status: int(r.int()), Error: r.string(), Response: r.string(), Outcome: engine.Outcome(r.string()),
				RetryAfter: time.Duration(r.int()),
			}
		}
	}
	if n := r.count(minReplayBytes); n >= 0 {
		d.Replays = make([]engine.Replay, n)
		for i := range d.Replays {
			d.Replays[i] = engine.Replay{At: r.time(), By: r.string(), Cycle: int(r.int())}
		}
	}
	if format >= formatV3 {
		d.Sequence, d.Line = r.uvarint(), r.string()
		if n := r.count(minReplayBytes); n >= 0 {
			d.Skips = make([]engine.Skip, n)
			for i := range d.Skips {
				d.Skips[i] = engine.Skip{At: r.time(), By: r.string(), Cycle: int(r.int())}
			}
		}
	}
	if format >= formatV4 {
		d.PreviousSequence = r.uvarint()
	}
	if format >= formatV5 {
		flags := r.uvarint()
		if flags&^deliveryFlagsKnown != 0 && r.err == nil {
			return engine.Delivery{}, fmt.Errorf("decode delivery: unknown flags %#x", flags)
		}
		d.Test = flags&flagTest != 0
		if flags&flagChannels != 0 {
			d.Channels = r.channels()
		}
		if flags&flagBackfill != 0 {
			d.Backfill = &engine.Backfill{At: r.time(), By: r.string()}
		}
		if flags&flagScheduled != 0 {
			d.DeliverAt = r.time()
		}
	}
	if format >= formatV6 {
		for i := range d.Attempts {
			if n := r.count(minHeaderBytes); n >= 0 {
				hs := make([]engine.Header, n)
				for j := range hs {
					hs[j] = engine.Header{Name: r.string(), Value: r.string()}
				}
				d.Attempts[i].ResponseHeaders = hs
			}
		}
	}
	if format >= formatV7 {
		d.RetryPolicy = engine.RetryPolicyName(r.string())
	}
	if err := r.end(); err != nil {
		return engine.Delivery{}, fmt.Errorf("decode delivery: %w", err)
	}
	return d, nil
}

// decodeDeliveryV1 decodes a delivery record written as JSON, before
// formatV2.
func decodeDeliveryV1(data []byte) (engine.Delivery, error) {
	var r deliveryRecord
	if err := decodeJSON("delivery", data, &r); err != nil {
		return engine.Delivery{}, err
	}
	d := engine.Delivery{
		ID: r.ID, TenantID: r.TenantID, EventID: r.EventID, EventType: r.EventType,
		EndpointID: r.EndpointID, State: engine.State(r.State),
		Cycle: r.Cycle, CycleStart: r.CycleStart, CycleAttempts: r.CycleAttempts,
		NextAttemptAt: r.NextAttemptAt, LastStatus: r.LastStatus, Reason: r.Reason,
		DeadAt: r.DeadAt, Created: r.Created, Updated: r.Updated,
	}
	if r.Attempts != nil {
		d.Attempts = make([]engine.Attempt, len(r.Attempts))
		for i, a := range r.Attempts {
			d.Attempts[i] = engine.Attempt{
				Cycle: a.Cycle, Number: a.Number, Start: a.Start, Duration: time.Duration(a.DurationNS),
				Status: a.Status, Error: a.Error, Response: a.Response, Outcome: engine.Outcome(a.Outcome),
				RetryAfter: time.Duration(a.RetryAfter),
			}
		}
	}
	if r.Replays != nil {
		d.Replays = make([]engine.Replay, len(r.Replays))
		for i, rp := range r.Replays {
			d.Replays[i] = engine.Replay{At: rp.At, By: rp.By, Cycle: rp.Cycle}
		}
	}
	return d, nil
}

// encodeIdempotency encodes version(1) ‖ expires(8) ‖ hash(32) ‖ event ID.
func encodeIdempotency(r idempotencyRecord) []byte {
	b := make([]byte, 0, 1+8+32+len(r.EventID))
	b = append(b, formatV1)
	b = binary.BigEndian.AppendUint64(b, unixNano(r.Expires))
	b = append(b, r.RequestHash[:]...)
	return append(b, r.EventID...)
}

func decodeIdempotency(data []byte) (idempotencyRecord, error) {
	if len(data) == 0 {
		return idempotencyRecord{}, errors.New("decode idempotency record: empty record")
	}
	if data[0] != formatV1 {
		return idempotencyRecord{}, fmt.Errorf("decode idempotency record: unknown record format %d", data[0])
	}
	if len(data) <= 1+8+32 {
		return idempotencyRecord{}, errors.New("decode idempotency record: short record")
	}
	r := idempotencyRecord{
		Expires: keyTime(binary.BigEndian.Uint64(data[1:9])),
		EventID: string(data[41:]),
	}
	copy(r.RequestHash[:], data[9:41])
	return r, nil
}

// decodeSeq decodes an event_ids value: the event's sequence number.
func decodeSeq(v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("malformed event sequence (%d bytes)", len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
