package engine

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// vectors are the signature vectors computed with the official Standard
// Webhooks and Stripe libraries (a copy of shared/testdata's, kept in the
// verify package).
type vectors struct {
	Vectors []struct {
		Name            string `json:"name"`
		Secret          string `json:"secret"`
		MsgID           string `json:"msg_id"`
		Timestamp       int64  `json:"timestamp"`
		PayloadBase64   string `json:"payload_base64"`
		ExpectedSigHead string `json:"expected_signature_header"`
	} `json:"vectors"`
	Stripe []struct {
		Name      string   `json:"name"`
		Secret    string   `json:"secret"`
		Secrets   []string `json:"secrets"`
		Timestamp int64    `json:"timestamp"`
		Payload   string   `json:"payload"`
		Sent      string   `json:"sent_payload"`
		Header    string   `json:"stripe_signature_header"`
		ExpectOK  bool     `json:"expect_ok"`
	} `json:"stripe_vectors"`
}

func loadVectors(t *testing.T) vectors {
	t.Helper()
	b, err := os.ReadFile("../verify/testdata/signature-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSignRequest_StandardWebhooksVectors(t *testing.T) {
	v := loadVectors(t)
	if len(v.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for _, vec := range v.Vectors {
		t.Run(vec.Name, func(t *testing.T) {
			if !strings.HasPrefix(vec.Secret, SecretPrefix) {
				t.Skip("webhookd secrets always carry the whsec_ prefix")
			}
			body, err := base64.StdEncoding.DecodeString(vec.PayloadBase64)
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			signRequest(h, vec.MsgID, time.Unix(vec.Timestamp, 0), body, []string{vec.Secret})
			if got := h.Get(HeaderWebhookSignature); got != vec.ExpectedSigHead {
				t.Errorf("webhook-signature %q, want %q", got, vec.ExpectedSigHead)
			}
			if got := h.Get(HeaderWebhookID); got != vec.MsgID {
				t.Errorf("webhook-id %q, want %q", got, vec.MsgID)
			}
		})
	}
}

func TestSignRequest_StripeVectors(t *testing.T) {
	v := loadVectors(t)
	n := 0
	for _, vec := range v.Stripe {
		secrets := vec.Secrets
		if len(secrets) == 0 {
			secrets = []string{vec.Secret}
		}
		// Only the vectors that are exactly what a sender makes: valid, the
		// body unchanged, v1 entries only.
		if !vec.ExpectOK || vec.Sent != vec.Payload || strings.Contains(vec.Header, "v0=") || strings.Count(vec.Header, "v1=") != len(secrets) {
			continue
		}
		n++
		t.Run(vec.Name, func(t *testing.T) {
			h := http.Header{}
			signRequest(h, "evt_x", time.Unix(vec.Timestamp, 0), []byte(vec.Payload), secrets)
			if got := h.Get(HeaderXSignature); got != vec.Header {
				t.Errorf("X-Webhook-Signature %q, want %q", got, vec.Header)
			}
		})
	}
	if n == 0 {
		t.Fatal("no stripe vector was usable")
	}
}

func TestSignRequest_Rotation(t *testing.T) {
	oldKey, newKey := NewSecret(), NewSecret()
	h := http.Header{}
	signRequest(h, "evt_1", time.Unix(1700000000, 0), []byte(`{}`), []string{newKey, oldKey})
	if got := strings.Count(h.Get(HeaderWebhookSignature), "v1,"); got != 2 {
		t.Errorf("webhook-signature has %d entries, want 2: %q", got, h.Get(HeaderWebhookSignature))
	}
	if got := strings.Count(h.Get(HeaderXSignature), "v1="); got != 2 {
		t.Errorf("X-Webhook-Signature has %d v1 entries, want 2", got)
	}
	if strings.Contains(h.Get(HeaderWebhookSignature), "  ") {
		t.Error("entries must be separated by one space")
	}
}

func TestEndpoint_SigningKeys(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	ep := Endpoint{Secrets: []Secret{{Key: "new"}, {Key: "old", Expires: now.Add(time.Hour)}, {Key: "gone", Expires: now}}}
	got := ep.SigningKeys(now)
	if strings.Join(got, ",") != "new,old" {
		t.Errorf("SigningKeys = %v, want [new old]", got)
	}
}
