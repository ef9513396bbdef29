// Package sealing seals endpoint secrets at rest, the same way for every
// store, so that a copy of a database (a backup, a stolen disk) does not
// give away the keys that sign webhooks, nor the values of the custom
// headers that authenticate them to receivers (engine.Endpoint.Headers).
// It imports only the standard library and engine: a store uses it
// without the others' drivers.
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
// A custom header's value is sealed the same way, with the additional
// data "webhookd endpoint header" ‖ 0x00 ‖ tenant ‖ 0x00 ‖ endpoint ID ‖
// 0x00 ‖ header name: a sealed value opens only as that header's value of
// that endpoint, never as a signing key (nor a key as a value), whose
// purpose differs. A value may be any text, so whether it is sealed is
// not read from it but marked beside it (engine.CustomHeader.Sealed, which a
// store keeps in its record).
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

// The purposes of the additional data: what a sealed string is.
const (
	purposeSecret = "webhookd endpoint secret"
	purposeHeader = "webhookd endpoint header"
)

// aad binds a sealed secret to its endpoint.
func aad(tenant, endpointID string) []byte {
	b := make([]byte, 0, len(purposeSecret)+2+len(tenant)+len(endpointID))
	b = append(b, purposeSecret...)
	b = append(b, 0)
	b = append(b, tenant...)
	b = append(b, 0)
	return append(b, endpointID...)
}

// headerAAD binds a sealed header value to its endpoint and name.
func headerAAD(tenant, endpointID, name string) []byte {
	b := make([]byte, 0, len(purposeHeader)+3+len(tenant)+len(endpointID)+len(name))
	b = append(b, purposeHeader...)
	b = append(b, 0)
	b = append(b, tenant...)
	b = append(b, 0)
	b = append(b, endpointID...)
	b = append(b, 0)
	return append(b, name...)
}

// Seal returns secret sealed for endpoint (tenant, endpointID), with a
// fresh random nonce: two seals of one secret differ.
func (s *Sealer) Seal(tenant, endpointID, secret string) string {
	return s.seal(secret, aad(tenant, endpointID))
}

// SealHeader returns value, the value of the custom header name
// (canonical) of endpoint (tenant, endpointID), sealed, with a fresh
// random nonce.
func (s *Sealer) SealHeader(tenant, endpointID, name, value string) string {
	return s.seal(value, headerAAD(tenant, endpointID, name))
}

func (s *Sealer) seal(plain string, ad []byte) string {
	out := make([]byte, 8, 8+s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	copy(out, s.id[:])
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce) // never returns an error: it crashes the program instead (Go 1.24)
	out = append(out, nonce...)
	out = s.aead.Seal(out, nonce, []byte(plain), ad)
	return prefix + base64.RawURLEncoding.EncodeToString(out)
}

// Open returns the secret sealed in v for endpoint (tenant, endpointID). It
// fails for a v that is malformed, sealed under another key, tampered with
// or sealed for another endpoint; its errors say which, never what the
// secret is.
func (s *Sealer) Open(tenant, endpointID, v string) (string, error) {
	return s.open(v, aad(tenant, endpointID), "secret", "another endpoint")
}

// OpenHeader returns the value of the custom header name sealed in v for
// endpoint (tenant, endpointID). It fails as Open does, and for a value
// sealed for another header.
func (s *Sealer) OpenHeader(tenant, endpointID, name, v string) (string, error) {
	return s.open(v, headerAAD(tenant, endpointID, name), "header value", "another endpoint or header")
}

func (s *Sealer) open(v string, ad []byte, what, elsewhere string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(v, prefix))
	ns := s.aead.NonceSize()
	if err != nil || !Sealed(v) || len(raw) < 8+ns+s.aead.Overhead() {
		return "", fmt.Errorf("malformed sealed %s", what)
	}
	if !bytes.Equal(raw[:8], s.id[:]) {
		return "", fmt.Errorf("%s sealed with key id %x, not the configured key %x", what, raw[:8], s.id)
	}
	plain, err := s.aead.Open(nil, raw[8:8+ns], raw[8+ns:], ad)
	if err != nil {
		return "", fmt.Errorf("sealed %s does not open: tampered with, or moved from %s", what, elsewhere)
	}
	return string(plain), nil
}

// Sealed reports whether a stored secret is sealed.
func Sealed(v string) bool { return strings.HasPrefix(v, prefix) }

// SealSecrets returns ep with its secrets sealed by s: its signing keys
// and its custom headers' values (new slices; ep's are not changed). A
// nil s, or a secret already sealed, leaves it as is.
func (s *Sealer) SealSecrets(ep engine.Endpoint) engine.Endpoint {
	if s == nil {
		return ep
	}
	if len(ep.Secrets) > 0 {
		out := make([]engine.Secret, len(ep.Secrets))
		for i, sec := range ep.Secrets {
			if !Sealed(sec.Key) {
				sec.Key = s.Seal(ep.TenantID, ep.ID, sec.Key)
			}
			out[i] = sec
		}
		ep.Secrets = out
	}
	if len(ep.Headers) > 0 {
		out := make(engine.CustomHeaders, len(ep.Headers))
		for i, h := range ep.Headers {
			if !h.Sealed {
				h.Value, h.Sealed = s.SealHeader(ep.TenantID, ep.ID, h.Name, h.Value), true
			}
			out[i] = h
		}
		ep.Headers = out
	}
	return ep
}

// OpenSecrets replaces the sealed secrets of ep, its signing keys and its
// custom headers' values, by their plain text, in place; plain ones stay
// as they are. A sealed secret with a nil s is ErrKeyRequired (wrapped);
// one that does not open is Open's (OpenHeader's) error, wrapped with the
// endpoint and the secret's index (the header's name).
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
	for i, h := range ep.Headers {
		if !h.Sealed {
			continue
		}
		if s == nil {
			return fmt.Errorf("endpoint %s: header %s: %w", ep.ID, h.Name, ErrKeyRequired)
		}
		plain, err := s.OpenHeader(ep.TenantID, ep.ID, h.Name, h.Value)
		if err != nil {
			return fmt.Errorf("endpoint %s: header %s: %w", ep.ID, h.Name, err)
		}
		ep.Headers[i].Value, ep.Headers[i].Sealed = plain, false
	}
	return nil
}
