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
	return "v1," + base64.StdEncoding.EncodeToString(standardMAC(key, id, timestamp, body))
}

// standardMAC is the raw HMAC behind StandardSignature.
func standardMAC(key []byte, id string, timestamp int64, body []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write(strconv.AppendInt(nil, timestamp, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// StripeSignature returns the hex HMAC-SHA256 of timestamp + "." + body
// keyed with the whole secret string, as Stripe's libraries compute the
// v1 entry of a "t=<unix>,v1=<hex>" header.
func StripeSignature(secret string, timestamp int64, body []byte) string {
	return hex.EncodeToString(stripeMAC(secret, timestamp, body))
}

// stripeMAC is the raw HMAC behind StripeSignature.
func stripeMAC(secret string, timestamp int64, body []byte) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(strconv.AppendInt(nil, timestamp, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// Sign returns the signature headers webhookd sends with body: webhook-id,
// webhook-timestamp, webhook-signature with one "v1,<base64>" entry per
// secret, and X-Webhook-Signature "t=<unix>,v1=<hex>[,v1=<hex>…]" with one
// v1 entry per secret, in the order given. List two secrets to sign as a
// sender does during a rotation. Sign is meant for a receiver's tests and
// for tools; the error never contains a secret.
func Sign(secrets []string, id string, timestamp time.Time, body []byte) (http.Header, error) {
	if len(secrets) == 0 {
		return nil, ErrNoSecrets
	}
	if id == "" {
		return nil, errors.New("verify: sign: empty id")
	}
	ts := timestamp.Unix()
	std := make([]string, 0, len(secrets))
	x := []string{"t=" + strconv.FormatInt(ts, 10)}
	for i, s := range secrets {
		key, err := StandardKey(s)
		if err != nil {
			return nil, fmt.Errorf("verify: sign: secret %d: %w", i, err)
		}
		std = append(std, StandardSignature(key, id, ts, body))
		x = append(x, "v1="+StripeSignature(s, ts, body))
	}
	h := make(http.Header, 4)
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, strings.Join(std, " "))
	h.Set(HeaderStripeSignature, strings.Join(x, ","))
	return h, nil
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
