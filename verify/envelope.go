package verify

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Envelope is the JSON body webhookd sends:
// {"id","type","created","sequence","ordering_key","api_version","data"}.
type Envelope struct {
	ID      string    `json:"id"`
	Type    string    `json:"type"`
	Created time.Time `json:"created"` // when the event was ingested, to the millisecond
	// Sequence numbers the sender's events per tenant: 1, 2, 3… in the
	// order they were stored, with no gap among stored events. Zero for
	// an event stored before webhookd numbered events.
	Sequence uint64 `json:"sequence,omitempty"`
	// OrderingKey is what the event is about, as the sender named it
	// (an order, a customer), or "".
	OrderingKey string          `json:"ordering_key,omitempty"`
	APIVersion  string          `json:"api_version"`
	Data        json.RawMessage `json:"data"`
}

// ParseEnvelope decodes a delivery's body, which must be a JSON object
// with a non-empty "id". Decode only a body Verify accepted.
func ParseEnvelope(body []byte) (Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return Envelope{}, fmt.Errorf("verify: envelope: %w", err)
	}
	if env.ID == "" {
		return Envelope{}, errors.New(`verify: envelope: no "id"`)
	}
	return env, nil
}
