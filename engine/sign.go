package engine

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/webhookd/webhookd/verify"
)

// Signature headers set on every attempt.
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
	HeaderXSignature       = "X-Webhook-Signature"
)

// signRequest sets the signature headers of one attempt: Standard Webhooks
// (webhook-id, webhook-timestamp, webhook-signature with one "v1,<base64>"
// entry per key) and X-Webhook-Signature "t=<unix>,v1=<hex>[,v1=<hex>…]",
// Stripe's scheme keyed with the whole secret string. Every attempt signs
// the same stored body with the time of sending. A key that does not
// decode is skipped; it cannot be stored that way.
func signRequest(h http.Header, id string, at time.Time, body []byte, secrets []string) {
	ts := at.Unix()
	var std, x strings.Builder
	x.WriteString("t=")
	x.WriteString(strconv.FormatInt(ts, 10))
	for _, s := range secrets {
		key, err := verify.StandardKey(s)
		if err != nil {
			continue
		}
		if std.Len() > 0 {
			std.WriteByte(' ')
		}
		std.WriteString(verify.StandardSignature(key, id, ts, body))
		x.WriteString(",v1=")
		x.WriteString(verify.StripeSignature(s, ts, body))
	}
	h.Set(HeaderWebhookID, id)
	h.Set(HeaderWebhookTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderWebhookSignature, std.String())
	h.Set(HeaderXSignature, x.String())
}
