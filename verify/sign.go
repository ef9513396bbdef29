package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts a Standard Webhooks secret: "whsec_" + base64(key).
const SecretPrefix = "whsec_"

// ErrBadSecret is returned for a secret that is not "whsec_" + base64 (or
// bare base64) of a non-empty key.
var ErrBadSecret = errors.New("verify: secret is not whsec_ + base64")

// StandardKey returns the HMAC key of a Standard Webhooks secret: the
// base64-decoded bytes after an optional "whsec_" prefix.
func StandardKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(key) == 0 {
		return nil, ErrBadSecret
	}
	return key, nil
}

// StandardSignature returns the Standard Webhooks signature entry
// "v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>".
func StandardSignature(key []byte, id string, timestamp int64, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(standardMAC(nil, key, id, timestamp, body))
}

// standardMAC appends to dst the raw HMAC behind StandardSignature.
func standardMAC(dst, key []byte, id string, timestamp int64, body []byte) []byte {
	mac := hmac.New(sha256.New, key)
	prefix := make([]byte, 0, len(id)+22)
	prefix = append(prefix, id...)
	prefix = append(prefix, '.')
	prefix = strconv.AppendInt(prefix, timestamp, 10)
	mac.Write(append(prefix, '.'))
	mac.Write(body)
	return mac.Sum(dst)
}

// StripeSignature returns the hex HMAC-SHA256 of timestamp + "." + body
// keyed with the whole secret string, as Stripe's libraries compute the
// v1 entry of a "t=<unix>,v1=<hex>" header.
func StripeSignature(secret string, timestamp int64, body []byte) string {
	return hex.EncodeToString(stripeMAC(nil, secret, timestamp, body))
}

// stripeMAC appends to dst the raw HMAC behind StripeSignature.
func stripeMAC(dst []byte, secret string, timestamp int64, body []byte) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(append(strconv.AppendInt(make([]byte, 0, 21), timestamp, 10), '.'))
	mac.Write(body)
	return mac.Sum(dst)
}

// Sign returns the signature headers webhookd sends with body: webhook-id,
// webhook-timestamp, webhook-signature with one "v1,<base64>" entry per
// secret, and X-Webhook-Signature "t=<unix>,v1=<hex>[,v1=<hex>…]" with one
// v1 entry per secret, in the order given. List two secrets to sign as a
// sender does during a rotation. Sign is meant for a receiver's tests and
// for tools; the error never contains a secret.
func Sign(secrets []string, id string, timestamp time.Time, body []byte) (http.Header, error) {
	h := make(http.Header, 4)
	if err := SignHeader(h, secrets, id, timestamp, body); err != nil {
		return nil, err
	}
	return h, nil
}

// Canonical forms of the header names, as http.Header.Set stores them.
var (
	canonicalID        = http.CanonicalHeaderKey(HeaderID)
	canonicalTimestamp = http.CanonicalHeaderKey(HeaderTimestamp)
	canonicalSignature = http.CanonicalHeaderKey(HeaderSignature)
	canonicalStripe    = http.CanonicalHeaderKey(HeaderStripeSignature)
)

// errEmptyID is the error of a signature asked for no message ID.
var errEmptyID = errors.New("verify: sign: empty id")

// SignHeader sets the headers Sign returns on h, replacing any there, and
// is what a sender calls on each request: it builds each value in one
// buffer and sets it without the copies Sign's own header costs. On error
// h is unchanged.
func SignHeader(h http.Header, secrets []string, id string, timestamp time.Time, body []byte) error {
	if len(secrets) == 0 {
		return ErrNoSecrets
	}
	if id == "" {
		return errEmptyID
	}
	ts := timestamp.Unix()
	sum := make([]byte, 0, sha256.Size)
	// x holds the timestamp, then the X-Webhook-Signature value; both
	// strings are cut from one copy of it.
	x := make([]byte, 0, 2*20+len(secrets)*len(",v1=")+len(secrets)*hex.EncodedLen(sha256.Size))
	x = strconv.AppendInt(x, ts, 10)
	tsEnd := len(x)
	x = append(x, "t="...)
	x = append(x, x[:tsEnd]...)
	std := make([]byte, 0, len(secrets)*(len("v1, ")+base64.StdEncoding.EncodedLen(sha256.Size)))
	for i, s := range secrets {
		key, err := StandardKey(s)
		if err != nil {
			return fmt.Errorf("verify: sign: secret %d: %w", i, err)
		}
		if i > 0 {
			std = append(std, ' ')
		}
		std = append(std, "v1,"...)
		std = base64.StdEncoding.AppendEncode(std, standardMAC(sum[:0], key, id, ts, body))
		x = append(x, ",v1="...)
		x = hex.AppendEncode(x, stripeMAC(sum[:0], s, ts, body))
	}
	setSigned(h, id, string(x), tsEnd, std)
	return nil
}

// setSigned sets the four headers of a signed request in h: webhook-id
// id; from x, which holds the Unix timestamp (x[:tsEnd]) and then the
// X-Webhook-Signature value (x[tsEnd:], "t=<ts>,v1=…"), webhook-timestamp
// and X-Webhook-Signature; and webhook-signature std. The four values
// share one array, each header a one-value slice of it.
func setSigned(h http.Header, id, x string, tsEnd int, std []byte) {
	v := []string{id, x[:tsEnd], string(std), x[tsEnd:]}
	h[canonicalID] = v[0:1:1]
	h[canonicalTimestamp] = v[1:2:2]
	h[canonicalSignature] = v[2:3:3]
	h[canonicalStripe] = v[3:4:4]
}

// ChallengeResponse returns the Standard Webhooks endpoint-verification
// answer to a webhook-challenge value:
// "v1," + base64(HMAC-SHA256(HMAC-SHA256(key, "wev-v1"), challenge)).
func ChallengeResponse(secret, challenge string) (string, error) {
	key, err := StandardKey(secret)
	if err != nil {
		return "", err
	}
	vk := hmac.New(sha256.New, key)
	vk.Write([]byte("wev-v1"))
	mac := hmac.New(sha256.New, vk.Sum(nil))
	mac.Write([]byte(challenge))
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}
