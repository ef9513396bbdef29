// Package sealing seals endpoint secrets at rest, the same way for every
// store, so that a copy of a database (a backup, a stolen disk) does not
// give away the keys that sign webhooks. It imports only the standard
// library and engine: a store uses it without the others' drivers.
//
// A sealed secret is the string
//
//	"sealed:v1:" ‖ base64url(key ID(8) ‖ nonce(12) ‖ ciphertext ‖ tag(16))
//
// stored in the secret's place in the endpoint record, sealed with
// AES-256-GCM. The nonce is random; the additional data is
// "webhookd endpoint secret" ‖ 0x00 ‖ tenant ‖ 0x00 ‖ endpoint ID, so a
// sealed secret copied into another endpoint's record does not open. The
// key ID is the first 8 bytes of HMAC-SHA256(key, "webhookd secret key id"):
// it names a key without revealing it. A plain secret starts with "whsec_",
// so a stored secret is one or the other (Sealed).
//
// IMPORTANT: this format is on disk; changing it makes existing databases
// unreadable. Nothing here ever logs or returns a key or a secret, and no
// error names one.
package sealing

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/webhookd/webhookd/engine"
)

// KeySize is the size of a key: AES-256.
const KeySize = 32

// prefix starts a sealed secret.
const prefix = "sealed:v1:"

// ErrKeyRequired is returned (wrapped) by OpenSecrets for a sealed secret
// when there is no key (a nil *Sealer); a store returns it (wrapped) at open
// for a database whose secrets are sealed when no key is configured.
var ErrKeyRequired = errors.New("the endpoint secrets in this database are encrypted and no secret key is configured")

// ErrKeyMismatch is returned (wrapped) by a store at open when the
// configured key is not the one its secrets are sealed with.
var ErrKeyMismatch = errors.New("the configured secret key is not the one this database's endpoint secrets are encrypted with")

// Sealer seals and opens endpoint secrets under one key. A nil *Sealer
// stands for no key: it seals nothing and opens only plain secrets. A
// Sealer is safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
	id   [8]byte
}

// New returns a Sealer for key, which must be KeySize bytes, or nil (and no
// error) for an empty key.
func New(key []byte) (*Sealer, error) {
	if len(key) == 0 {
		return nil, nil
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("secret key is %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead, id: KeyID(key)}, nil
}

// KeyID returns the 8-byte ID of key, as a store records it and errors show
// it (in hex): it tells keys apart without revealing them.
func KeyID(key []byte) [8]byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("webhookd secret key id"))
	var id [8]byte
	copy(id[:], mac.Sum(nil))
	return id
}

// ID returns the ID of s's key (KeyID). s must not be nil.
func (s *Sealer) ID() [8]byte { return s.id }

// aad binds a sealed secret to its endpoint.
func aad(tenant, endpointID string) []byte {
	b := make([]byte, 0, 26+len(tenant)+len(endpointID))
	b = append(b, "webhookd endpoint secret"...)
	b = append(b, 0)
	b = append(b, tenant...)
	b = append(b, 0)
	return append(b, endpointID...)
}

// Seal returns secret sealed for endpoint (tenant, endpointID), with a
// fresh random nonce: two seals of one secret differ.
func (s *Sealer) Seal(tenant, endpointID, secret string) string {
	out := make([]byte, 8, 8+s.aead.NonceSize()+len(secret)+s.aead.Overhead())
	copy(out, s.id[:])
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce) // never returns an error: it crashes the program instead (Go 1.24)
	out = append(out, nonce...)
	out = s.aead.Seal(out, nonce, []byte(secret), aad(tenant, endpointID))
	return prefix + base64.RawURLEncoding.EncodeToString(out)
}

// Open returns the secret sealed in v for endpoint (tenant, endpointID). It
// fails for a v that is malformed, sealed under another key, tampered with
// or sealed for another endpoint; its errors say which, never what the
// secret is.
func (s *Sealer) Open(tenant, endpointID, v string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(v, prefix))
	ns := s.aead.NonceSize()
	if err != nil || len(raw) < 8+ns+s.aead.Overhead() {
		return "", errors.New("malformed sealed secret")
	}
	if !bytes.Equal(raw[:8], s.id[:]) {
		return "", fmt.Errorf("secret sealed with key id %x, not the configured key %x", raw[:8], s.id)
	}
	plain, err := s.aead.Open(nil, raw[8:8+ns], raw[8+ns:], aad(tenant, endpointID))
	if err != nil {
		return "", errors.New("sealed secret does not open: tampered with, or moved from another endpoint")
	}
	return string(plain), nil
}

// Sealed reports whether a stored secret is sealed.
func Sealed(v string) bool { return strings.HasPrefix(v, prefix) }

// SealSecrets returns ep with its secrets sealed by s (a new slice; ep's is
// not changed). A nil s, or a secret already sealed, leaves it as is.
func (s *Sealer) SealSecrets(ep engine.Endpoint) engine.Endpoint {
	if s == nil || len(ep.Secrets) == 0 {
		return ep
	}
	out := make([]engine.Secret, len(ep.Secrets))
	for i, sec := range ep.Secrets {
		if !Sealed(sec.Key) {
			sec.Key = s.Seal(ep.TenantID, ep.ID, sec.Key)
		}
		out[i] = sec
	}
	ep.Secrets = out
	return ep
}

// OpenSecrets replaces the sealed secrets of ep by their plain text, in
// place; plain ones stay as they are. A sealed secret with a nil s is
// ErrKeyRequired (wrapped); one that does not open is Open's error, wrapped
// with the endpoint and the secret's index.
func (s *Sealer) OpenSecrets(ep *engine.Endpoint) error {
	for i, sec := range ep.Secrets {
		if !Sealed(sec.Key) {
			continue
		}
		if s == nil {
			return fmt.Errorf("endpoint %s: %w", ep.ID, ErrKeyRequired)
		}
		plain, err := s.Open(ep.TenantID, ep.ID, sec.Key)
		if err != nil {
			return fmt.Errorf("endpoint %s: secret %d: %w", ep.ID, i, err)
		}
		ep.Secrets[i].Key = plain
	}
	return nil
}
