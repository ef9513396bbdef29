package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// formatV1 is the leading byte of every stored record: the version of its
// encoding. A decoder refuses any other version.
const formatV1 = 1

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
}

type eventTypeRecord struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Created     time.Time `json:"created"`
	Updated     time.Time `json:"updated"`
}

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
}

type secretRecord struct {
	Key     string    `json:"key"` // "whsec_…", or sealed (crypt.go)
	Expires time.Time `json:"expires,omitzero"`
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
	return encodeJSON(tenantRecord{ID: t.ID, Name: t.Name, Environment: string(t.Environment), Created: utc(t.Created), Updated: utc(t.Updated)})
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
	return engine.Tenant{ID: r.ID, Name: r.Name, Environment: env, Created: r.Created, Updated: r.Updated}, nil
}

func encodeEventType(et engine.EventType) ([]byte, error) {
	return encodeJSON(eventTypeRecord{Name: et.Name, Description: et.Description, Created: utc(et.Created), Updated: utc(et.Updated)})
}

func decodeEventType(data []byte) (engine.EventType, error) {
	var r eventTypeRecord
	if err := decodeJSON("event type", data, &r); err != nil {
		return engine.EventType{}, err
	}
	if r.Name == "" {
		return engine.EventType{}, errors.New("decode event type: no name")
	}
	return engine.EventType{Name: r.Name, Description: r.Description, Created: r.Created, Updated: r.Updated}, nil
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
	}
	if ep.Secrets != nil {
		r.Secrets = make([]secretRecord, len(ep.Secrets))
		for i, s := range ep.Secrets {
			r.Secrets[i] = secretRecord{Key: s.Key, Expires: utc(s.Expires)}
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
	}
	if r.Secrets != nil {
		ep.Secrets = make([]engine.Secret, len(r.Secrets))
		for i, s := range r.Secrets {
			ep.Secrets[i] = engine.Secret{Key: s.Key, Expires: s.Expires}
		}
	}
	return ep, nil
}

// maxEventHeader bounds the JSON header of an event record.
const maxEventHeader = 1 << 16

// encodeEvent encodes an event as
//
//	version(1) ‖ header length(4, big-endian) ‖ header JSON ‖ body
//
// The body is kept byte for byte: it is what gets signed and sent. Seq is
// not encoded: it is the record's key.
func encodeEvent(ev engine.Event) ([]byte, error) {
	h, err := json.Marshal(eventHeader{
		ID: ev.ID, TenantID: ev.TenantID, Type: ev.Type,
		Created: utc(ev.Created), APIVersion: ev.APIVersion,
	})
	if err != nil {
		return nil, err
	}
	if len(h) > maxEventHeader {
		return nil, fmt.Errorf("event header is %d bytes, over %d", len(h), maxEventHeader)
	}
	b := make([]byte, 0, 1+4+len(h)+len(ev.Body))
	b = append(b, formatV1)
	b = binary.BigEndian.AppendUint32(b, uint32(len(h)))
	b = append(b, h...)
	return append(b, ev.Body...), nil
}

// decodeEvent decodes an event record; the caller sets Seq from the key.
// The body is copied, so the result outlives the transaction.
func decodeEvent(data []byte) (engine.Event, error) {
	if len(data) == 0 {
		return engine.Event{}, errors.New("decode event: empty record")
	}
	if data[0] != formatV1 {
		return engine.Event{}, fmt.Errorf("decode event: unknown record format %d", data[0])
	}
	if len(data) < 5 {
		return engine.Event{}, errors.New("decode event: short record")
	}
	n := binary.BigEndian.Uint32(data[1:5])
	if n > maxEventHeader || uint64(n) > uint64(len(data)-5) {
		return engine.Event{}, fmt.Errorf("decode event: header length %d out of range", n)
	}
	var h eventHeader
	if err := json.Unmarshal(data[5:5+n], &h); err != nil {
		return engine.Event{}, fmt.Errorf("decode event: %w", err)
	}
	if h.ID == "" || h.TenantID == "" {
		return engine.Event{}, errors.New("decode event: no id or tenant")
	}
	return engine.Event{
		ID: h.ID, TenantID: h.TenantID, Type: h.Type, Created: h.Created, APIVersion: h.APIVersion,
		Body: bytes.Clone(data[5+n:]),
	}, nil
}

func encodeDelivery(d engine.Delivery) ([]byte, error) {
	r := deliveryRecord{
		ID: d.ID, TenantID: d.TenantID, EventID: d.EventID, EventType: d.EventType,
		EndpointID: d.EndpointID, State: string(d.State),
		Cycle: d.Cycle, CycleStart: utc(d.CycleStart), CycleAttempts: d.CycleAttempts,
		NextAttemptAt: utc(d.NextAttemptAt), LastStatus: d.LastStatus, Reason: d.Reason,
		DeadAt: utc(d.DeadAt), Created: utc(d.Created), Updated: utc(d.Updated),
	}
	if d.Attempts != nil {
		r.Attempts = make([]attemptRecord, len(d.Attempts))
		for i, a := range d.Attempts {
			r.Attempts[i] = attemptRecord{
				Cycle: a.Cycle, Number: a.Number, Start: utc(a.Start), DurationNS: int64(a.Duration),
				Status: a.Status, Error: a.Error, Response: a.Response, Outcome: string(a.Outcome),
				RetryAfter: int64(a.RetryAfter),
			}
		}
	}
	if d.Replays != nil {
		r.Replays = make([]replayRecord, len(d.Replays))
		for i, rp := range d.Replays {
			r.Replays[i] = replayRecord{At: utc(rp.At), By: rp.By, Cycle: rp.Cycle}
		}
	}
	return encodeJSON(r)
}

// storedState reports whether s is a state a delivery record may hold
// (StateDelivering never is).
func storedState(s engine.State) bool {
	switch s {
	case engine.StatePending, engine.StateSucceeded, engine.StateDead, engine.StatePaused:
		return true
	}
	return false
}

func decodeDelivery(data []byte) (engine.Delivery, error) {
	var r deliveryRecord
	if err := decodeJSON("delivery", data, &r); err != nil {
		return engine.Delivery{}, err
	}
	if r.ID == "" || r.TenantID == "" {
		return engine.Delivery{}, errors.New("decode delivery: no id or tenant")
	}
	if !storedState(engine.State(r.State)) {
		return engine.Delivery{}, fmt.Errorf("decode delivery %s: unknown state %q", r.ID, r.State)
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
