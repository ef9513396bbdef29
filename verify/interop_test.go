package verify

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v82/webhook"
)

// The official library's Verify reads time.Now, so these tests sign at the
// real current time.

func newOfficial(tb testing.TB, secret string) *standardwebhooks.Webhook {
	tb.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		tb.Fatal(err)
	}
	return wh
}

var interopBodies = map[string][]byte{
	"envelope": []byte(`{"id":"msg_interop","type":"invoice.paid","created":"2025-01-02T03:04:05Z","data":{"amount":4200}}`),
	"empty":    {},
	"binary":   {0x00, 0xff, 0x80, '.', '\n', 0xc3, 0x28},
	"unicode":  []byte(`{"name":"Zoë 東京 👋🏽"}`),
}

// TestOfficialSigns_weVerify: what the Standard Webhooks library signs,
// Verifier accepts, with one secret and with two during a rotation.
func TestOfficialSigns_weVerify(t *testing.T) {
	secrets := []string{testSecret2, testSecret} // new, old
	for name, body := range interopBodies {
		t.Run(name, func(t *testing.T) {
			now := time.Now()
			var entries []string
			for _, s := range secrets {
				sig, err := newOfficial(t, s).Sign("msg_interop", now, body)
				if err != nil {
					t.Fatal(err)
				}
				entries = append(entries, sig)
			}
			h := http.Header{}
			h.Set(HeaderID, "msg_interop")
			h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))

			for _, tc := range []struct {
				name    string
				header  string
				secrets []string
				want    error
			}{
				{"one signature", entries[1], []string{testSecret}, nil},
				{"rotation, old secret", strings.Join(entries, " "), []string{testSecret}, nil},
				{"rotation, new secret", strings.Join(entries, " "), []string{testSecret2}, nil},
				{"rotation, both secrets", strings.Join(entries, " "), secrets, nil},
				{"rotation, other secret", strings.Join(entries, " "), []string{otherSecret}, ErrBadSignature},
				{"old signature, new secret", entries[1], []string{testSecret2}, ErrBadSignature},
			} {
				h.Set(HeaderSignature, tc.header)
				v := Verifier{Secrets: tc.secrets}
				m, err := v.Verify(h, body)
				if !errors.Is(err, tc.want) {
					t.Errorf("%s: Verify: %v, want %v", tc.name, err, tc.want)
				}
				if err == nil && (m.ID != "msg_interop" || m.Timestamp.Unix() != now.Unix()) {
					t.Errorf("%s: Verify = %+v", tc.name, m)
				}
			}
		})
	}
}

// TestWeSign_officialVerifies: what Sign produces, the Standard Webhooks
// library accepts with either secret of a rotation, and rejects tampered.
func TestWeSign_officialVerifies(t *testing.T) {
	for name, body := range interopBodies {
		t.Run(name, func(t *testing.T) {
			h, err := Sign([]string{testSecret2, testSecret}, "msg_interop", time.Now(), body)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{testSecret2, testSecret} {
				if err := newOfficial(t, s).Verify(body, h); err != nil {
					t.Errorf("official Verify: %v", err)
				}
			}
			if err := newOfficial(t, otherSecret).Verify(body, h); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
				t.Errorf("official Verify, other secret: %v", err)
			}
			tampered := append([]byte("x"), body...)
			if err := newOfficial(t, testSecret).Verify(tampered, h); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
				t.Errorf("official Verify, tampered: %v", err)
			}
			// NewWebhookRaw with the decoded key agrees.
			key, _ := StandardKey(testSecret)
			raw, err := standardwebhooks.NewWebhookRaw(key)
			if err != nil {
				t.Fatal(err)
			}
			if err := raw.Verify(body, h); err != nil {
				t.Errorf("official raw-key Verify: %v", err)
			}
		})
	}
}

// TestStripe_interop: stripe-go verifies our X-Webhook-Signature with the
// same secret (each secret of a rotation), and we verify what stripe-go
// generates.
func TestStripe_interop(t *testing.T) {
	for name, body := range interopBodies {
		t.Run(name, func(t *testing.T) {
			now := time.Now()
			h, err := Sign([]string{testSecret2, testSecret}, "msg_interop", now, body)
			if err != nil {
				t.Fatal(err)
			}
			x := h.Get(HeaderStripeSignature)
			for _, s := range []string{testSecret2, testSecret} {
				if err := webhook.ValidatePayloadWithTolerance(body, x, s, DefaultTolerance); err != nil {
					t.Errorf("stripe-go ValidatePayloadWithTolerance: %v", err)
				}
			}
			if err := webhook.ValidatePayload(body, x, otherSecret); !errors.Is(err, webhook.ErrNoValidSignature) {
				t.Errorf("stripe-go, other secret: %v", err)
			}

			sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: testSecret, Timestamp: now})
			hx := http.Header{}
			hx.Set(HeaderStripeSignature, sp.Header)
			v := Verifier{Secrets: []string{testSecret}}
			m, err := v.Verify(hx, body)
			if err != nil {
				t.Fatalf("Verify stripe-go's header: %v", err)
			}
			if m.Scheme != SchemeStripe || m.Timestamp.Unix() != now.Unix() {
				t.Errorf("Verify = %+v", m)
			}
			v.Secrets = []string{otherSecret}
			if _, err := v.Verify(hx, body); !errors.Is(err, ErrBadSignature) {
				t.Errorf("Verify stripe-go's header, other secret: %v", err)
			}
		})
	}
}
