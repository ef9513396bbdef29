package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
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
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write(strconv.AppendInt(nil, timestamp, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// StripeSignature returns the hex HMAC-SHA256 of timestamp + "." + body
// keyed with the whole secret string, as Stripe's libraries compute the
// v1 entry of a "t=<unix>,v1=<hex>" header.
func StripeSignature(secret string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(strconv.AppendInt(nil, timestamp, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}
