package verify

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v82/webhook"
)

// vectorFile is testdata/signature-vectors.json, a copy of
// shared/testdata/signature-vectors.json kept in the repository for CI.
type vectorFile struct {
	ToleranceSeconds int `json:"tolerance_seconds"`
	Vectors          []struct {
		Name                    string            `json:"name"`
		Secret                  string            `json:"secret"`
		Secrets                 []string          `json:"secrets"`
		SecretRawUTF8           string            `json:"secret_raw_utf8"`
		KeyHex                  string            `json:"key_hex"`
		KeysHex                 []string          `json:"keys_hex"`
		MsgID                   string            `json:"msg_id"`
		Timestamp               int64             `json:"timestamp"`
		PayloadBase64           string            `json:"payload_base64"`
		ExpectedSignatureHeader string            `json:"expected_signature_header"`
		Headers                 map[string]string `json:"headers"`
		VerifyAt                int64             `json:"verify_at"`
	} `json:"vectors"`
	NegativeVectors []struct {
		Name             string            `json:"name"`
		SigningSecret    string            `json:"signing_secret"`
		VerifySecret     string            `json:"verify_secret"`
		MsgID            string            `json:"msg_id"`
		Timestamp        int64             `json:"timestamp"`
		SignedPayload    string            `json:"signed_payload"`
		SentPayload      string            `json:"sent_payload"`
		Headers          map[string]string `json:"headers"`
		VerifyAt         int64             `json:"verify_at"`
		GoCheck          string            `json:"go_check"`
		ExpectedSentinel string            `json:"expected_sentinel"`
		ValidIgnoringTS  bool              `json:"signature_valid_ignoring_timestamp"`
	} `json:"negative_vectors"`
	StripeVectors []struct {
		Name             string   `json:"name"`
		Secret           string   `json:"secret"`
		Secrets          []string `json:"secrets"`
		VerifySecret     string   `json:"verify_secret"`
		Timestamp        int64    `json:"timestamp"`
		Payload          string   `json:"payload"`
		SentPayload      string   `json:"sent_payload"`
		Header           string   `json:"stripe_signature_header"`
		VerifyAt         int64    `json:"verify_at"`
		GoCheck          string   `json:"go_check"`
		ExpectOK         bool     `json:"expect_ok"`
		ExpectedSentinel string   `json:"expected_sentinel"`
	} `json:"stripe_vectors"`
	EndpointVerificationVectors []struct {
		Name      string `json:"name"`
		Secret    string `json:"secret"`
		Challenge string `json:"webhook_challenge"`
		Response  string `json:"expected_webhook_challenge_response"`
	} `json:"endpoint_verification_vectors"`
}

func loadVectors(tb testing.TB) vectorFile {
	tb.Helper()
	b, err := os.ReadFile("testdata/signature-vectors.json")
	if err != nil {
		tb.Fatal(err)
	}
	var vf vectorFile
	if err := json.Unmarshal(b, &vf); err != nil {
		tb.Fatal(err)
	}
	if len(vf.Vectors) == 0 || len(vf.NegativeVectors) == 0 || len(vf.StripeVectors) == 0 {
		tb.Fatal("signature-vectors.json: a section is empty")
	}
	return vf
}

// headerOf builds a request header the way a server sees it (canonical
// keys).
func headerOf(m map[string]string) http.Header {
	h := make(http.Header, len(m))
	for k, v := range m {
		h.Set(k, v)
	}
	return h
}

func at(unix int64) func() time.Time { return func() time.Time { return time.Unix(unix, 0) } }

// ours maps each library sentinel named in the vectors to this package's
// error.
var ours = map[string]error{
	"ErrNoMatchingSignature": ErrBadSignature,
	"ErrMessageTooOld":       ErrTimestampTooOld,
	"ErrMessageTooNew":       ErrTimestampInFuture,
	"ErrRequiredHeaders":     ErrMalformedHeader,
	"ErrInvalidHeaders":      ErrMalformedHeader,
	"ErrNoValidSignature":    ErrBadSignature,
	"ErrTooOld":              ErrTimestampTooOld,
}

// theirs maps the same names to the libraries' values.
var theirs = map[string]error{
	"ErrNoMatchingSignature": standardwebhooks.ErrNoMatchingSignature,
	"ErrMessageTooOld":       standardwebhooks.ErrMessageTooOld,
	"ErrMessageTooNew":       standardwebhooks.ErrMessageTooNew,
	"ErrRequiredHeaders":     standardwebhooks.ErrRequiredHeaders,
	"ErrInvalidHeaders":      standardwebhooks.ErrInvalidHeaders,
	"ErrNoValidSignature":    webhook.ErrNoValidSignature,
	"ErrTooOld":              webhook.ErrTooOld,
}

func TestVerifier_Verify_vectors(t *testing.T) {
	vf := loadVectors(t)
	if got, want := time.Duration(vf.ToleranceSeconds)*time.Second, DefaultTolerance; got != want {
		t.Errorf("vectors' tolerance %s, DefaultTolerance %s", got, want)
	}
	for _, v := range vf.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			body, err := base64.StdEncoding.DecodeString(v.PayloadBase64)
			if err != nil {
				t.Fatal(err)
			}
			secrets := v.Secrets
			if v.Secret != "" {
				secrets = []string{v.Secret}
			}
			keys := v.KeysHex
			if v.KeyHex != "" {
				keys = []string{v.KeyHex}
			}
			var entries []string
			for i, s := range secrets {
				key, err := StandardKey(s)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := hex.EncodeToString(key), keys[i]; got != want {
					t.Errorf("StandardKey(secret %d) = %s, want %s", i, got, want)
				}
				entries = append(entries, StandardSignature(key, v.MsgID, v.Timestamp, body))
			}
			if got, want := strings.Join(entries, " "), v.ExpectedSignatureHeader; got != want {
				t.Errorf("signature header = %q, want %q", got, want)
			}

			h := headerOf(v.Headers)
			// Any one of the secrets verifies (rotation), and all together.
			cases := [][]string{secrets}
			if len(secrets) > 1 {
				for _, s := range secrets {
					cases = append(cases, []string{s})
				}
			}
			for _, ss := range cases {
				vr := Verifier{Secrets: ss, Now: at(v.VerifyAt)}
				m, err := vr.Verify(h, body)
				if err != nil {
					t.Fatalf("Verify with %d secret(s): %v", len(ss), err)
				}
				if m.ID != v.MsgID || m.Timestamp.Unix() != v.Timestamp || m.Scheme != SchemeStandard {
					t.Errorf("Verify = %+v, want id %s, timestamp %d, standard", m, v.MsgID, v.Timestamp)
				}
			}
			// The official library agrees.
			for _, s := range secrets {
				wh, err := standardwebhooks.NewWebhook(s)
				if err != nil {
					t.Fatal(err)
				}
				if err := wh.VerifyIgnoringTimestamp(body, h); err != nil {
					t.Errorf("official VerifyIgnoringTimestamp: %v", err)
				}
			}
			if v.SecretRawUTF8 != "" {
				key, _ := StandardKey(v.Secret)
				if string(key) != v.SecretRawUTF8 {
					t.Errorf("raw key = %q, want %q", key, v.SecretRawUTF8)
				}
			}
			// A minute later than the tolerance it is stale.
			vr := Verifier{Secrets: secrets, Now: at(v.Timestamp + 360)}
			if _, err := vr.Verify(h, body); !errors.Is(err, ErrTimestampTooOld) {
				t.Errorf("Verify 6 minutes later: %v, want ErrTimestampTooOld", err)
			}
		})
	}
}

func TestVerifier_Verify_negativeVectors(t *testing.T) {
	vf := loadVectors(t)
	for _, v := range vf.NegativeVectors {
		t.Run(v.Name, func(t *testing.T) {
			want, ok := ours[v.ExpectedSentinel]
			if !ok {
				t.Fatalf("no mapping for sentinel %s", v.ExpectedSentinel)
			}
			h := headerOf(v.Headers)
			body := []byte(v.SentPayload)
			vr := Verifier{Secrets: []string{v.VerifySecret}, Now: at(v.VerifyAt)}
			_, err := vr.Verify(h, body)
			if !errors.Is(err, want) {
				t.Fatalf("Verify: %v, want %v", err, want)
			}
			assertNoLeak(t, err, v.Headers[HeaderSignature],
				expectedSignatures(v.VerifySecret, v.MsgID, v.Timestamp, body),
				expectedSignatures(v.SigningSecret, v.MsgID, v.Timestamp, body))

			// The signature alone is valid exactly when the vector says so.
			vr.Tolerance = 1 << 62
			_, err = vr.Verify(h, body)
			if got := err == nil; got != v.ValidIgnoringTS {
				t.Errorf("Verify ignoring the clock: %v, vector says valid=%v", err, v.ValidIgnoringTS)
			}

			// The official library says what the vector says.
			wh, err := standardwebhooks.NewWebhook(v.VerifySecret)
			if err != nil {
				t.Fatal(err)
			}
			check := wh.VerifyIgnoringTimestamp
			if v.GoCheck == "Verify" {
				check = wh.Verify
			}
			if err := check(body, h); !errors.Is(err, theirs[v.ExpectedSentinel]) {
				t.Errorf("official %s: %v, want %s", v.GoCheck, err, v.ExpectedSentinel)
			}
		})
	}
}

func TestVerifier_Verify_stripeVectors(t *testing.T) {
	vf := loadVectors(t)
	// Where this package deliberately differs from stripe-go.
	override := map[string]error{
		// stripe-go accepts any future timestamp; we apply the tolerance
		// in both directions.
		"stripe_future_timestamp_accepted": ErrTimestampInFuture,
	}
	for _, v := range vf.StripeVectors {
		t.Run(v.Name, func(t *testing.T) {
			var want error
			if !v.ExpectOK {
				want = ours[v.ExpectedSentinel]
				if want == nil {
					t.Fatalf("no mapping for sentinel %s", v.ExpectedSentinel)
				}
			}
			if o, ok := override[v.Name]; ok {
				want = o
			}
			body := []byte(v.SentPayload)
			h := http.Header{}
			h.Set(HeaderStripeSignature, v.Header)
			vr := Verifier{Secrets: []string{v.VerifySecret}, Now: at(v.VerifyAt)}
			m, err := vr.Verify(h, body)
			switch {
			case want == nil && err != nil:
				t.Fatalf("Verify: %v", err)
			case want == nil:
				if m.Scheme != SchemeStripe || m.Timestamp.Unix() != v.Timestamp || m.ID != "" {
					t.Errorf("Verify = %+v", m)
				}
			case !errors.Is(err, want):
				t.Fatalf("Verify: %v, want %v", err, want)
			default:
				assertNoLeak(t, err, v.Header,
					expectedSignatures(v.VerifySecret, "", v.Timestamp, body),
					expectedSignatures(v.Secret, "", v.Timestamp, body))
			}
			if v.Secret != "" && v.Payload != "" {
				if got := StripeSignature(v.Secret, v.Timestamp, []byte(v.Payload)); !strings.Contains(v.Header, "v1="+got) {
					t.Errorf("StripeSignature = %s, not in %s", got, v.Header)
				}
			}

			// stripe-go says what the vector says.
			check := webhook.ValidatePayloadIgnoringTolerance
			if v.GoCheck == "ValidatePayload" {
				check = webhook.ValidatePayload
			}
			err = check(body, v.Header, v.VerifySecret)
			if v.ExpectOK && err != nil || !v.ExpectOK && !errors.Is(err, theirs[v.ExpectedSentinel]) {
				t.Errorf("stripe-go %s: %v, vector says ok=%v %s", v.GoCheck, err, v.ExpectOK, v.ExpectedSentinel)
			}
		})
	}
}

func TestChallengeResponse_vectors(t *testing.T) {
	vf := loadVectors(t)
	for _, v := range vf.EndpointVerificationVectors {
		t.Run(v.Name, func(t *testing.T) {
			got, err := ChallengeResponse(v.Secret, v.Challenge)
			if err != nil {
				t.Fatal(err)
			}
			if got != v.Response {
				t.Errorf("ChallengeResponse = %s, want %s", got, v.Response)
			}
		})
	}
	if _, err := ChallengeResponse("whsec_!!!", "x"); !errors.Is(err, ErrBadSecret) {
		t.Errorf("bad secret: %v, want ErrBadSecret", err)
	}
}
