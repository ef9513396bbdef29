package engine

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// Rotation grace windows.
const (
	// DefaultRotationGrace is the grace of a rotation that names none.
	DefaultRotationGrace = 24 * time.Hour
	// MaxRotationGrace is the longest grace a rotation may ask for: an old
	// key is never kept longer than a week.
	MaxRotationGrace = 7 * 24 * time.Hour
	// MaxOldSecrets is how many old keys an endpoint keeps in their grace
	// windows at once; a rotation beyond that drops the oldest at once.
	MaxOldSecrets = 2
)

// RotateInput is the body of POST .../endpoints/{id}/secret/rotate.
type RotateInput struct {
	// Grace is how long the current secret keeps signing beside the new
	// one, in Go's duration syntax ("24h", "90m"); "0s" drops it at once.
	// "": DefaultRotationGrace. At most MaxRotationGrace.
	Grace string `json:"grace"`
	// GraceSeconds is Grace as a whole number of seconds; give one or
	// the other.
	GraceSeconds *int64 `json:"grace_seconds,omitempty"`
	// Secret, optional, is the new secret, the caller's own (GivenSecret);
	// absent: webhookd makes one (NewSecret).
	Secret string `json:"secret,omitempty"`
}

// The key of a secret the caller brings (GivenSecret) is from 24 to 64
// bytes, as the Standard Webhooks specification advises and Svix takes.
const (
	MinSecretBytes = 24
	MaxSecretBytes = 64
)

// GivenSecret returns secret, one the caller brings to an endpoint's
// create or rotation, as webhookd keeps it: "whsec_" + padded base64 of
// its key. It is for a team moving its endpoints from another service
// (Svix, Convoy), whose receivers verify with a secret they have: it
// takes the Standard Webhooks form, "whsec_" + base64 (padded or not) of
// MinSecretBytes to MaxSecretBytes bytes, or that base64 alone, as Svix
// does. Anything else is CodeInvalidField naming field; the message never
// shows any of the value. webhookd cannot tell how random a given key
// is: one it makes is 32 random bytes (NewSecret), and leaving the
// secret out is the advice (docs/security.md).
func GivenSecret(field, secret string) (string, error) {
	b64 := strings.TrimPrefix(secret, SecretPrefix)
	key, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil {
		key, err = base64.RawStdEncoding.Strict().DecodeString(b64)
	}
	if err != nil || len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return "", Errorf(CodeInvalidField, field, "%s must be %q followed by the base64 of %d to %d bytes (a Standard Webhooks secret), or that base64 alone; leave it out to have one made", field, SecretPrefix, MinSecretBytes, MaxSecretBytes)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// newKey returns the secret a rotation gives: in.Secret, as GivenSecret
// takes it, or a new one.
func (in RotateInput) newKey() (string, error) {
	if in.Secret == "" {
		return NewSecret(), nil
	}
	return GivenSecret("secret", in.Secret)
}

// checkNewKey refuses, as a rotation's new secret, one of the keys the
// endpoint signs with: a rotation that kept the key would say the old
// one stops signing when it goes on.
func checkNewKey(keys []Secret, secret string) error {
	for _, k := range keys {
		if subtle.ConstantTimeCompare([]byte(k.Key), []byte(secret)) == 1 {
			return Errorf(CodeInvalidField, "secret", "secret is one the endpoint signs with already; a rotation needs a new one")
		}
	}
	return nil
}

// SecretResult is what a rotation or revocation returns: the endpoint and
// its new secret, which no later read shows again (RevealSecret does, and
// records it).
type SecretResult struct {
	Endpoint Endpoint
	Secret   string
	// Environment is the tenant's: secrets carry no environment prefix
	// (see NewSecret), so the answer that shows one names it.
	Environment Environment
	// PreviousExpires is when the previous secret stops signing; zero when
	// it was dropped at once.
	PreviousExpires time.Time
}

// RotateSecret gives an endpoint of tenant a new current secret. The
// previous one keeps signing for the grace window: every attempt meanwhile
// carries a signature with each key (Standard Webhooks: two space-separated
// "v1," entries; X-Webhook-Signature: two "v1=" entries), so the receiver
// can switch keys without dropping a webhook. After the window only the new
// key signs. A grace of zero drops the previous key, and every older one, at
// once: use it when a key leaked.
func (s *Service) RotateSecret(ctx context.Context, tenant, id string, in RotateInput) (SecretResult, error) {
	grace, err := in.grace()
	if err != nil {
		return SecretResult{}, err
	}
	secret, err := in.newKey()
	if err != nil {
		return SecretResult{}, err
	}
	return s.rotate(ctx, tenant, id, grace, secret)
}

// grace returns the grace window in asks for: DefaultRotationGrace when
// it names none, CodeInvalidField beyond 0 to MaxRotationGrace.
func (in RotateInput) grace() (time.Duration, error) {
	grace := DefaultRotationGrace
	d, field, given, err := durationInput("grace", in.Grace, in.GraceSeconds, `"24h", "90m" or "0s"`)
	if err != nil {
		return 0, err
	}
	if given {
		grace = d
	}
	if grace < 0 || grace > MaxRotationGrace {
		return 0, Errorf(CodeInvalidField, field, "grace must be from 0s to %s (604800 seconds)", "168h")
	}
	return grace, nil
}

// RevokeSecret is RotateSecret with no grace: the endpoint gets a new
// secret and every key it had stops signing at once. A leaked key is never
// kept for compatibility.
func (s *Service) RevokeSecret(ctx context.Context, tenant, id string) (SecretResult, error) {
	return s.rotate(ctx, tenant, id, 0, NewSecret())
}

func (s *Service) rotate(ctx context.Context, tenant, id string, grace time.Duration, secret string) (SecretResult, error) {
	if !validID(id) {
		return SecretResult{}, EndpointNotFound()
	}
	t, err := s.Tenant(ctx, tenant)
	if err != nil {
		return SecretResult{}, err
	}
	now := s.now()
	ep, err := s.store.UpdateEndpoint(ctx, tenant, id, func(ep *Endpoint) error {
		if err := checkNewKey(ep.Secrets, secret); err != nil {
			return err
		}
		ep.Secrets = rotateSecrets(ep.Secrets, secret, now, grace)
		ep.Updated = now
		return nil
	})
	if err != nil {
		return SecretResult{}, err
	}
	res := SecretResult{Endpoint: ep, Secret: secret, Environment: t.Environment}
	if grace > 0 {
		res.PreviousExpires = now.Add(grace)
	}
	return res, nil
}

// rotateSecrets returns the keys after a rotation at now to newKey: newKey
// current; the previous current key expiring at now+grace; older keys still
// in their window kept, at most MaxOldSecrets old keys in all, newest
// first. Expired keys are dropped, and with grace 0 every old key is.
func rotateSecrets(old []Secret, newKey string, now time.Time, grace time.Duration) []Secret {
	out := []Secret{{Key: newKey}}
	if grace <= 0 {
		return out
	}
	until := now.Add(grace)
	for _, s := range old {
		if len(out) > MaxOldSecrets {
			break
		}
		switch {
		case s.Expires.IsZero():
			s.Expires = until
		case !now.Before(s.Expires):
			continue // expired
		case s.Expires.After(until):
			s.Expires = until // never outlive the newer key's window
		}
		out = append(out, s)
	}
	return out
}

// MaxSecretReveals is how many reveals an endpoint's audit trail keeps
// (Endpoint.SecretReveals): the latest; an older one is dropped when a
// new one is recorded, so the trail is bounded like the old keys are.
const MaxSecretReveals = 20

// RecordSecretReveal returns ep with r appended to its SecretReveals,
// only the latest MaxSecretReveals kept. It is the transition of a
// reveal: ep is not changed (its reveals are copied), and nothing else
// of it changes.
func RecordSecretReveal(ep Endpoint, r SecretReveal) Endpoint {
	keep := ep.SecretReveals[max(0, len(ep.SecretReveals)-(MaxSecretReveals-1)):]
	out := make([]SecretReveal, 0, len(keep)+1)
	ep.SecretReveals = append(append(out, keep...), r)
	return ep
}

// RevealedSecret is what RevealSecret shows: the keys an endpoint signs
// with now.
type RevealedSecret struct {
	// Endpoint is as stored after the reveal was recorded.
	Endpoint Endpoint
	// Secret is the current key.
	Secret string
	// Previous are the old keys still in their rotation grace window
	// (each with its Expires), newest first; empty when there are none.
	Previous []Secret
	// Headers are the endpoint's custom headers with their values in
	// plain (every answer but a reveal masks them); nil when it has none.
	Headers CustomHeaders
	// Environment is the tenant's (see SecretResult).
	Environment Environment
}

// RevealSecret shows the signing keys of an endpoint of tenant again: the
// current one and the old ones that still sign, and the values of its
// custom headers, which every other answer masks. A receiver that lost its
// key can get it back without a rotation, which would break it if it
// cannot take the new key within the grace window. The reveal is recorded
// on the endpoint, with by ("admin", "token tok_…"; "": "admin") and the
// time, in the same transaction that reads the keys (UpdateEndpoint), so
// no key is shown without its record; the endpoint keeps the latest
// MaxSecretReveals. Nothing else changes: not Updated, not the keys.
//
// The caller must show the keys and header values only to whoever asked,
// never store, cache or log them.
func (s *Service) RevealSecret(ctx context.Context, tenant, id, by string) (RevealedSecret, error) {
	if !validID(id) {
		return RevealedSecret{}, EndpointNotFound()
	}
	t, err := s.Tenant(ctx, tenant)
	if err != nil {
		return RevealedSecret{}, err
	}
	if by == "" {
		by = "admin"
	}
	now := s.now()
	ep, err := s.store.UpdateEndpoint(ctx, tenant, id, func(ep *Endpoint) error {
		*ep = RecordSecretReveal(*ep, SecretReveal{At: now, By: by})
		return nil
	})
	if err != nil {
		return RevealedSecret{}, err
	}
	res := RevealedSecret{Endpoint: ep, Environment: t.Environment, Previous: []Secret{}, Headers: ep.Headers}
	for _, sec := range ep.Secrets {
		switch {
		case sec.Expires.IsZero():
			if res.Secret == "" {
				res.Secret = sec.Key
			}
		case now.Before(sec.Expires):
			res.Previous = append(res.Previous, sec)
		}
	}
	if res.Secret == "" {
		return RevealedSecret{}, fmt.Errorf("engine: endpoint %s of %s has no current secret", id, tenant)
	}
	return res, nil
}
