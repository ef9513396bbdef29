package sealing

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

func newKey(tb testing.TB) []byte {
	tb.Helper()
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		tb.Fatal(err)
	}
	return k
}

func TestSealer(t *testing.T) {
	s, err := New(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	secret := engine.NewSecret()
	v := s.Seal("acme", "ep_1", secret)
	if !Sealed(v) || strings.Contains(v, strings.TrimPrefix(secret, "whsec_")) {
		t.Fatalf("sealed form %q", v)
	}
	if v2 := s.Seal("acme", "ep_1", secret); v2 == v {
		t.Error("two seals of one secret are equal: the nonce is not random")
	}
	got, err := s.Open("acme", "ep_1", v)
	if err != nil || got != secret {
		t.Fatalf("open = %v; want the secret back", err)
	}
	t.Run("moved to another endpoint", func(t *testing.T) {
		if _, err := s.Open("acme", "ep_2", v); err == nil {
			t.Error("a secret sealed for ep_1 opened for ep_2")
		}
		if _, err := s.Open("evil", "ep_1", v); err == nil {
			t.Error("a secret sealed for acme opened for another tenant")
		}
	})
	t.Run("tampered", func(t *testing.T) {
		raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(v, prefix))
		raw[len(raw)-1] ^= 1
		if _, err := s.Open("acme", "ep_1", prefix+base64.RawURLEncoding.EncodeToString(raw)); err == nil {
			t.Error("a tampered secret opened")
		}
		if _, err := s.Open("acme", "ep_1", prefix+"!!"); err == nil {
			t.Error("garbage opened")
		}
	})
	t.Run("other key", func(t *testing.T) {
		other, _ := New(newKey(t))
		_, err := other.Open("acme", "ep_1", v)
		if err == nil || !strings.Contains(err.Error(), "key id") {
			t.Errorf("open with another key: %v, want a key id mismatch", err)
		}
		if strings.Contains(err.Error(), secret) {
			t.Error("the error shows the secret")
		}
	})
	if _, err := New(make([]byte, 16)); err == nil {
		t.Error("a 16-byte key was accepted")
	}
}

// TestSealer_format pins the on-disk form: a secret sealed before this
// package existed (by storage, key 0x00 0x01 … 0x1f) still opens, and a new
// seal has the layout the package doc gives.
func TestSealer_format(t *testing.T) {
	key := make([]byte, KeySize)
	for i := range key {
		key[i] = byte(i)
	}
	s, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		stored = "sealed:v1:6x28g9FGpn8Ckhn4gQBsgCXvRdb7o6yKH8aH87_o8BENXyDyRok1v2BE_iy4m46c4F3KgFybiNC56zN6Iij2Fjq_L9A7ds4HJ_Q"
		wantID = "\xeb\x1d\xbc\x83\xd1\x46\xa6\x7f"
	)
	if id := s.ID(); string(id[:]) != wantID || id != KeyID(key) {
		t.Errorf("ID = %x, KeyID = %x; want %x", id, KeyID(key), wantID)
	}
	if got, err := s.Open("acme", "ep_1", stored); err != nil || got != secret {
		t.Errorf("Open of a stored secret = %v; want it back", err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s.Seal("acme", "ep_1", secret), "sealed:v1:"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(raw), 8+12+len(secret)+16; got != want || string(raw[:8]) != wantID {
		t.Errorf("sealed %d bytes under key ID %x, want key ID(8) ‖ nonce(12) ‖ ciphertext(%d) ‖ tag(16) = %d bytes under %x", got, raw[:8], len(secret), want, wantID)
	}
}

func TestSealer_secrets(t *testing.T) {
	s, err := New(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	plain := []engine.Secret{{Key: engine.NewSecret()}, {Key: engine.NewSecret()}}
	ep := engine.Endpoint{ID: "ep_1", TenantID: "acme", Secrets: plain}
	sealed := s.SealSecrets(ep)
	for i, sec := range sealed.Secrets {
		if !Sealed(sec.Key) {
			t.Errorf("secret %d not sealed: %q", i, sec.Key)
		}
		if ep.Secrets[i].Key != plain[i].Key || Sealed(ep.Secrets[i].Key) {
			t.Errorf("SealSecrets changed its argument's secret %d", i)
		}
	}
	if again := s.SealSecrets(sealed); again.Secrets[0].Key != sealed.Secrets[0].Key {
		t.Error("SealSecrets sealed a sealed secret again")
	}
	if got := (*Sealer)(nil).SealSecrets(ep); got.Secrets[0].Key != plain[0].Key {
		t.Error("a nil Sealer sealed a secret")
	}

	t.Run("open", func(t *testing.T) {
		got := sealed
		got.Secrets = append([]engine.Secret(nil), sealed.Secrets...)
		if err := s.OpenSecrets(&got); err != nil {
			t.Fatal(err)
		}
		for i := range plain {
			if got.Secrets[i].Key != plain[i].Key {
				t.Errorf("secret %d opened to another secret", i)
			}
		}
	})
	t.Run("plain with no key", func(t *testing.T) {
		got := ep
		got.Secrets = append([]engine.Secret(nil), plain...)
		if err := (*Sealer)(nil).OpenSecrets(&got); err != nil || got.Secrets[0].Key != plain[0].Key {
			t.Errorf("OpenSecrets of plain secrets with a nil Sealer = %v", err)
		}
	})
	t.Run("sealed with no key", func(t *testing.T) {
		got := sealed
		got.Secrets = append([]engine.Secret(nil), sealed.Secrets...)
		if err := (*Sealer)(nil).OpenSecrets(&got); !errors.Is(err, ErrKeyRequired) {
			t.Errorf("OpenSecrets with a nil Sealer = %v, want ErrKeyRequired", err)
		}
	})
	t.Run("moved to another endpoint", func(t *testing.T) {
		got := sealed
		got.ID = "ep_2"
		got.Secrets = append([]engine.Secret(nil), sealed.Secrets...)
		err := s.OpenSecrets(&got)
		if err == nil || !strings.Contains(err.Error(), "ep_2") {
			t.Errorf("OpenSecrets of secrets sealed for another endpoint = %v, want an error naming it", err)
		}
	})
	if s, err := New(nil); s != nil || err != nil {
		t.Errorf("New(nil) = %v, %v; want nil, nil", s, err)
	}
}

// TestSealer_headers: custom header values are sealed with the signing
// keys, bound to their endpoint and name, under an additional data of
// their own, so that a sealed value cannot pass for a signing key (nor a
// key for a value), nor one header's value for another's.
func TestSealer_headers(t *testing.T) {
	s, err := New(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	plain := engine.CustomHeaders{{Name: "Authorization", Value: "Bearer sekrit-token-1234567890"}, {Name: "X-Tenant", Value: "acme-eu"}}
	ep := engine.Endpoint{ID: "ep_1", TenantID: "acme", Secrets: []engine.Secret{{Key: engine.NewSecret()}}, Headers: plain}
	sealed := s.SealSecrets(ep)
	for i, h := range sealed.Headers {
		if !h.Sealed || !Sealed(h.Value) || h.Name != plain[i].Name || strings.Contains(h.Value, plain[i].Value) {
			t.Errorf("header %d sealed as %+v", i, h)
		}
		if ep.Headers[i] != plain[i] {
			t.Errorf("SealSecrets changed its argument's header %d", i)
		}
	}
	if again := s.SealSecrets(sealed); again.Headers[0].Value != sealed.Headers[0].Value {
		t.Error("SealSecrets sealed a sealed value again")
	}
	if got := (*Sealer)(nil).SealSecrets(ep); got.Headers[0] != plain[0] {
		t.Error("a nil Sealer sealed a value")
	}
	// A plain value that looks sealed is a value: Sealed is the mark.
	odd := engine.Endpoint{ID: "ep_1", TenantID: "acme", Headers: engine.CustomHeaders{{Name: "X-Odd", Value: "sealed:v1:AAAA"}}}
	if got := s.SealSecrets(odd); !got.Headers[0].Sealed || got.Headers[0].Value == "sealed:v1:AAAA" {
		t.Errorf("a plain value that starts like a sealed one was not sealed: %+v", got.Headers[0])
	} else if err := s.OpenSecrets(&got); err != nil || got.Headers[0].Value != "sealed:v1:AAAA" {
		t.Errorf("it opened to %+v, %v", got.Headers[0], err)
	}
	if err := (*Sealer)(nil).OpenSecrets(&odd); err != nil || odd.Headers[0].Value != "sealed:v1:AAAA" {
		t.Errorf("OpenSecrets with no key of a plain value that looks sealed = %v", err)
	}

	clone := func(ep engine.Endpoint) engine.Endpoint {
		ep.Secrets = append([]engine.Secret(nil), ep.Secrets...)
		ep.Headers = append(engine.CustomHeaders(nil), ep.Headers...)
		return ep
	}
	t.Run("open", func(t *testing.T) {
		got := clone(sealed)
		if err := s.OpenSecrets(&got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Headers, plain) || got.Secrets[0] != ep.Secrets[0] {
			t.Errorf("opened to %+v, %+v", got.Headers, got.Secrets)
		}
	})
	t.Run("sealed with no key", func(t *testing.T) {
		got := clone(sealed)
		got.Secrets = nil
		if err := (*Sealer)(nil).OpenSecrets(&got); !errors.Is(err, ErrKeyRequired) {
			t.Errorf("OpenSecrets with a nil Sealer = %v, want ErrKeyRequired", err)
		}
	})
	t.Run("a value moved to another header", func(t *testing.T) {
		got := clone(sealed)
		got.Headers[1].Value = got.Headers[0].Value
		err := s.OpenSecrets(&got)
		if err == nil || !strings.Contains(err.Error(), "X-Tenant") || strings.Contains(err.Error(), plain[0].Value) {
			t.Errorf("OpenSecrets of a value moved to another name = %v, want an error naming the header and not the value", err)
		}
	})
	t.Run("a value moved to another endpoint", func(t *testing.T) {
		got := clone(sealed)
		got.ID = "ep_2"
		got.Secrets = nil
		if err := s.OpenSecrets(&got); err == nil {
			t.Error("a value sealed for another endpoint opened")
		}
	})
	t.Run("a value in a signing key's place", func(t *testing.T) {
		got := clone(sealed)
		got.Secrets[0].Key = sealed.Headers[0].Value
		if err := s.OpenSecrets(&got); err == nil {
			t.Error("a sealed header value opened as a signing key")
		}
	})
	t.Run("a signing key in a value's place", func(t *testing.T) {
		got := clone(sealed)
		got.Headers[0].Value = sealed.Secrets[0].Key
		if err := s.OpenSecrets(&got); err == nil {
			t.Error("a sealed signing key opened as a header value")
		}
	})
}
