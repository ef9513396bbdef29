package verify

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Envelope is the JSON body webhookd sends:
// {"id","type","created","api_version","data"}.
type Envelope struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Created    time.Time       `json:"created"` // when the event was ingested, to the millisecond
	APIVersion string          `json:"api_version"`
	Data       json.RawMessage `json:"data"`
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
