package verify

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// Header names of the two signature schemes. A server's http.Header holds
// them canonicalized ("Webhook-Id"); Verify finds them in either spelling.
const (
	HeaderID              = "webhook-id"
	HeaderTimestamp       = "webhook-timestamp"
	HeaderSignature       = "webhook-signature"
	HeaderStripeSignature = "X-Webhook-Signature"
	// HeaderSequence is the event's sequence (Envelope.Sequence), not
	// signed: read it from the envelope once the signature is checked.
	// An event stored before webhookd numbered events has none.
	HeaderSequence = "webhook-sequence"
)

// A receiver that answers a delivery with a failure (any status but 2xx)
// and the response header HeaderDelivery: DeliveryAbort asks webhookd to
// stop retrying it: the delivery is dead at once, "the receiver asked to
// stop retrying", and can still be replayed. For an event the receiver
// will never take (its account closed, a type it dropped), where every
// retry would only fail again:
//
//	w.Header().Set(verify.HeaderDelivery, verify.DeliveryAbort)
//	w.WriteHeader(http.StatusUnprocessableEntity)
//
// The value is read in any case. On a 2xx it means nothing: the event was
// received. Svix's name for it, DeliveryAbortMessage, is taken as the
// same, so that a receiver moved from Svix keeps its answers.
//
// HeaderDelivery: DeliveryDisable, on any answer (a 2xx included: that
// event is received), asks webhookd to disable the endpoint, as a 410
// Gone does: no more deliveries until its owner enables it, the ones
// that come meanwhile held as paused (Svix's delivery control names it
// so). Only the endpoint's owner or the operator enables it again.
const (
	HeaderDelivery       = "webhook-delivery"
	DeliveryAbort        = "abort"
	DeliveryAbortMessage = "abort-message"
	DeliveryDisable      = "disable"
)

// DefaultTolerance is how far a message's timestamp may be from the
// receiver's clock, in either direction, when Verifier.Tolerance is zero.
const DefaultTolerance = 5 * time.Minute

// Verification errors. Verify wraps exactly one of them (test with
// errors.Is); the text adds which header or how far off the clock, never a
// signature, expected or received, and never a secret.
var (
	// ErrNoSignature: neither webhook-signature nor X-Webhook-Signature
	// was sent.
	ErrNoSignature = errors.New("verify: no signature header")
	// ErrMalformedHeader: a signature header was sent but cannot be read:
	// webhook-id or webhook-timestamp missing or empty, a timestamp that is
	// not an integer, a header repeated, an entry without its separator.
	ErrMalformedHeader = errors.New("verify: malformed signature header")
	// ErrBadSignature: the headers are well formed but no v1 signature in
	// them matches any secret over these exact body bytes.
	ErrBadSignature = errors.New("verify: no signature matches")
	// ErrTimestampTooOld: the signature matches, but the timestamp is
	// further behind the clock than the tolerance (a replay, or a message
	// held up on the way).
	ErrTimestampTooOld = errors.New("verify: timestamp too old")
	// ErrTimestampInFuture: the signature matches, but the timestamp is
	// further ahead of the clock than the tolerance.
	ErrTimestampInFuture = errors.New("verify: timestamp in the future")
	// ErrNoSecrets: the Verifier has no secret. A configuration error of
	// the receiver, not of the message.
	ErrNoSecrets = errors.New("verify: no secrets configured")
)

// Scheme names the header set a message was verified with.
type Scheme uint8

const (
	// SchemeStandard is Standard Webhooks: webhook-id, webhook-timestamp
	// and webhook-signature; the signature covers id, timestamp and body.
	SchemeStandard Scheme = iota + 1
	// SchemeStripe is X-Webhook-Signature "t=<unix>,v1=<hex>", Stripe's
	// scheme; the signature covers timestamp and body, not an id.
	SchemeStripe
)

func (s Scheme) String() string {
	switch s {
	case SchemeStandard:
		return "standard-webhooks"
	case SchemeStripe:
		return "x-webhook-signature"
	}
	return "scheme(" + strconv.Itoa(int(s)) + ")"
}

// Message is what Verify vouches for.
type Message struct {
	// ID is the webhook-id under SchemeStandard, covered by the signature.
	// Under SchemeStripe it is "": that signature does not cover an id, so
	// take the id from the (signed) body; Handler does.
	ID        string
	Timestamp time.Time // the signed timestamp, whole seconds
	Scheme    Scheme
	Body      []byte // the body passed to Verify (not copied)

	// Filled in by Receiver, from the signed envelope and the
	// webhook-previous-sequence header; Verify leaves them zero.
	Sequence         uint64 // Envelope.Sequence
	OrderingKey      string // Envelope.OrderingKey
	PreviousSequence uint64 // HeaderPreviousSequence, 0 when absent
}

// Verifier checks signed requests against the secrets a receiver holds.
// The zero Tolerance and a nil Now mean the defaults named on them. A
// Verifier is safe for concurrent use once its fields are set.
type Verifier struct {
	// Secrets are the receiver's active secrets, "whsec_" + base64(key)
	// (bare base64 works too). A message verifies if any of its signatures
	// matches any secret: during a rotation list both the new and the old.
	Secrets []string
	// Tolerance is the largest accepted distance between the message's
	// timestamp and Now, in either direction; zero or negative means
	// DefaultTolerance.
	Tolerance time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Verify checks the signature headers h against body, the exact raw bytes
// received (before any JSON decoding), and returns the verified message.
//
// When webhook-signature is present Verify uses Standard Webhooks and
// ignores X-Webhook-Signature; otherwise it uses X-Webhook-Signature.
// It never falls back from one scheme to the other. The signature is
// checked before the timestamp, so ErrTimestampTooOld and
// ErrTimestampInFuture are reported only for genuinely signed messages.
// Signatures are compared in constant time. An error wraps one of the
// Err* values of this package (ErrNoSecrets and ErrBadSecret when the
// Verifier itself is misconfigured).
func (v *Verifier) Verify(h http.Header, body []byte) (Message, error) {
	if sigs := headerValues(h, HeaderSignature); len(sigs) > 0 {
		return v.verifyStandard(h, sigs, body)
	}
	if xs := headerValues(h, HeaderStripeSignature); len(xs) > 0 {
		return v.verifyStripe(xs, body)
	}
	return Message{}, ErrNoSignature
}

func (v *Verifier) verifyStandard(h http.Header, sigs []string, body []byte) (Message, error) {
	ids := headerValues(h, HeaderID)
	tss := headerValues(h, HeaderTimestamp)
	switch {
	case len(sigs) > 1:
		return Message{}, fmt.Errorf("%w: webhook-signature repeated", ErrMalformedHeader)
	case len(ids) > 1:
		return Message{}, fmt.Errorf("%w: webhook-id repeated", ErrMalformedHeader)
	case len(tss) > 1:
		return Message{}, fmt.Errorf("%w: webhook-timestamp repeated", ErrMalformedHeader)
	case len(ids) == 0 || ids[0] == "":
		return Message{}, fmt.Errorf("%w: webhook-id missing", ErrMalformedHeader)
	case len(tss) == 0 || tss[0] == "":
		return Message{}, fmt.Errorf("%w: webhook-timestamp missing", ErrMalformedHeader)
	}
	id := ids[0]
	ts, ok := parseUnix(tss[0])
	if !ok {
		return Message{}, fmt.Errorf("%w: webhook-timestamp is not an integer", ErrMalformedHeader)
	}
	entries, err := parseStandardSignature(sigs[0])
	if err != nil {
		return Message{}, err
	}
	if err := v.checkSecrets(); err != nil {
		return Message{}, err
	}
	matched := false
	for _, s := range v.Secrets {
		key, _ := StandardKey(s) // checked above
		want := []byte(base64.StdEncoding.EncodeToString(standardMAC(nil, key, id, ts, body)))
		for _, e := range entries {
			if e.version == "v1" && hmac.Equal([]byte(e.signature), want) {
				matched = true
			}
		}
	}
	if !matched {
		return Message{}, fmt.Errorf("%w (webhook-signature)", ErrBadSignature)
	}
	if err := v.checkTime(ts); err != nil {
		return Message{}, err
	}
	return Message{ID: id, Timestamp: time.Unix(ts, 0), Scheme: SchemeStandard, Body: body}, nil
}

func (v *Verifier) verifyStripe(xs []string, body []byte) (Message, error) {
	if len(xs) > 1 {
		return Message{}, fmt.Errorf("%w: X-Webhook-Signature repeated", ErrMalformedHeader)
	}
	ts, sigs, err := parseStripeHeader(xs[0])
	if err != nil {
		return Message{}, err
	}
	if err := v.checkSecrets(); err != nil {
		return Message{}, err
	}
	matched := false
	for _, s := range v.Secrets {
		want := stripeMAC(nil, s, ts, body)
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				matched = true
			}
		}
	}
	if !matched {
		return Message{}, fmt.Errorf("%w (X-Webhook-Signature)", ErrBadSignature)
	}
	if err := v.checkTime(ts); err != nil {
		return Message{}, err
	}
	return Message{Timestamp: time.Unix(ts, 0), Scheme: SchemeStripe, Body: body}, nil
}

// checkSecrets reports a misconfigured Verifier: no secret, or one that
// does not decode (which Standard Webhooks needs; webhookd's secrets all
// do, so both schemes require it).
func (v *Verifier) checkSecrets() error {
	if len(v.Secrets) == 0 {
		return ErrNoSecrets
	}
	for i, s := range v.Secrets {
		if _, err := StandardKey(s); err != nil {
			return fmt.Errorf("verify: secret %d: %w", i, err)
		}
	}
	return nil
}

// checkTime applies the tolerance, in both directions, to a verified
// timestamp.
func (v *Verifier) checkTime(ts int64) error {
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	tol := v.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	t := time.Unix(ts, 0)
	if d := now.Sub(t); d > tol {
		return fmt.Errorf("%w: %s behind the clock, tolerance %s", ErrTimestampTooOld, d.Truncate(time.Second), tol)
	}
	if d := t.Sub(now); d > tol {
		return fmt.Errorf("%w: %s ahead of the clock, tolerance %s", ErrTimestampInFuture, d.Truncate(time.Second), tol)
	}
	return nil
}

// headerValues returns every value of the header name, whether the map
// holds it canonicalized (as a server's does) or in lower case (as a map
// literal or a client's request may).
func headerValues(h http.Header, name string) []string {
	ck := textproto.CanonicalMIMEHeaderKey(name)
	vs := h[ck]
	if lk := strings.ToLower(name); lk != ck {
		if more := h[lk]; len(more) > 0 {
			vs = append(vs[:len(vs):len(vs)], more...)
		}
	}
	return vs
}

// parseUnix parses a timestamp header: a base-10 integer in canonical form
// (no sign, no leading zero), as every signer formats it.
func parseUnix(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != s {
		return 0, false
	}
	return n, true
}

// standardEntry is one space-separated entry of webhook-signature.
type standardEntry struct {
	version   string // "v1" is the only one verified; others are skipped
	signature string // base64, as sent
}

// parseStandardSignature splits a webhook-signature value into its
// "<version>,<signature>" entries. Runs of spaces are allowed. It fails
// with ErrMalformedHeader when there is no entry or an entry has no comma
// or no version; it does not judge the signatures themselves.
func parseStandardSignature(header string) ([]standardEntry, error) {
	var entries []standardEntry
	for f := range strings.SplitSeq(header, " ") {
		if f == "" {
			continue
		}
		version, sig, ok := strings.Cut(f, ",")
		if !ok || version == "" {
			return nil, fmt.Errorf("%w: webhook-signature entry is not <version>,<signature>", ErrMalformedHeader)
		}
		entries = append(entries, standardEntry{version: version, signature: sig})
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%w: webhook-signature is empty", ErrMalformedHeader)
	}
	return entries, nil
}

// parseStripeHeader reads "t=<unix>,v1=<hex>[,v1=<hex>…]" as stripe-go
// does: comma-separated key=value pairs with no spaces, unknown keys (v0,
// " v1") ignored, v1 values that are not hex ignored. It fails with
// ErrMalformedHeader for a pair that is not key=value, a missing, repeated
// or non-integer t; with ErrBadSignature when no usable v1 remains.
func parseStripeHeader(header string) (ts int64, sigs [][]byte, err error) {
	seenT := false
	for pair := range strings.SplitSeq(header, ",") {
		k, val, ok := strings.Cut(pair, "=")
		if !ok || strings.Contains(val, "=") {
			return 0, nil, fmt.Errorf("%w: X-Webhook-Signature pair is not key=value", ErrMalformedHeader)
		}
		switch k {
		case "t":
			if seenT {
				return 0, nil, fmt.Errorf("%w: X-Webhook-Signature t repeated", ErrMalformedHeader)
			}
			seenT = true
			if ts, ok = parseUnix(val); !ok {
				return 0, nil, fmt.Errorf("%w: X-Webhook-Signature t is not an integer", ErrMalformedHeader)
			}
		case "v1":
			if sig, err := hex.DecodeString(val); err == nil {
				sigs = append(sigs, sig)
			}
		}
	}
	if !seenT {
		return 0, nil, fmt.Errorf("%w: X-Webhook-Signature t missing", ErrMalformedHeader)
	}
	if len(sigs) == 0 {
		return 0, nil, fmt.Errorf("%w: X-Webhook-Signature has no v1 entry", ErrBadSignature)
	}
	return ts, sigs, nil
}
