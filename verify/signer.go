package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Signer signs with a fixed list of secrets, as SignHeader does, keeping
// each key's HMAC state from one signature to the next: a sender that
// signs many requests for one endpoint makes one Signer for its secrets
// and pays for the keys' HMAC set-up once rather than per request. Its
// headers are SignHeader's, byte for byte. A Signer is safe for
// concurrent use.
type Signer struct {
	secrets []string
	keys    [][]byte // StandardKey of each secret
	macs    sync.Pool
}

// signerMACs is one signature's HMAC states, one pair per secret, and
// its scratch buffers: what a Signer's pool keeps.
type signerMACs struct {
	standard, stripe []hash.Hash
	prefix, sum      []byte
}

// NewSigner returns a Signer for secrets (in the order SignHeader takes
// them), or ErrNoSecrets, or an error naming the index of a secret that
// is not a Standard Webhooks secret (never the secret).
func NewSigner(secrets []string) (*Signer, error) {
	if len(secrets) == 0 {
		return nil, ErrNoSecrets
	}
	s := &Signer{secrets: slices.Clone(secrets), keys: make([][]byte, len(secrets))}
	for i, sec := range secrets {
		key, err := StandardKey(sec)
		if err != nil {
			return nil, fmt.Errorf("verify: sign: secret %d: %w", i, err)
		}
		s.keys[i] = key
	}
	return s, nil
}

// Secrets reports whether s signs with exactly secrets, in that order.
func (s *Signer) Secrets(secrets []string) bool { return slices.Equal(s.secrets, secrets) }

// SignHeader is the package's SignHeader with s's secrets.
func (s *Signer) SignHeader(h http.Header, id string, timestamp time.Time, body []byte) error {
	if id == "" {
		return errEmptyID
	}
	m, _ := s.macs.Get().(*signerMACs)
	if m == nil {
		m = &signerMACs{standard: make([]hash.Hash, len(s.keys)), stripe: make([]hash.Hash, len(s.keys)), sum: make([]byte, 0, sha256.Size)}
		for i, key := range s.keys {
			m.standard[i] = hmac.New(sha256.New, key)
			m.stripe[i] = hmac.New(sha256.New, []byte(s.secrets[i]))
		}
	}
	defer s.macs.Put(m)
	ts := timestamp.Unix()
	x := make([]byte, 0, 2*20+len(s.keys)*len(",v1=")+len(s.keys)*hex.EncodedLen(sha256.Size))
	x = strconv.AppendInt(x, ts, 10)
	tsEnd := len(x)
	x = append(x, "t="...)
	x = append(x, x[:tsEnd]...)
	std := make([]byte, 0, len(s.keys)*(len("v1, ")+base64.StdEncoding.EncodedLen(sha256.Size)))
	// The signed content's prefixes: id.ts. for the standard signature,
	// its tail ts. for Stripe's.
	m.prefix = append(append(append(append(m.prefix[:0], id...), '.'), x[:tsEnd]...), '.')
	for i := range s.keys {
		if i > 0 {
			std = append(std, ' ')
		}
		mac := m.standard[i]
		mac.Reset()
		mac.Write(m.prefix)
		mac.Write(body)
		std = append(std, "v1,"...)
		std = base64.StdEncoding.AppendEncode(std, mac.Sum(m.sum[:0]))
		mac = m.stripe[i]
		mac.Reset()
		mac.Write(m.prefix[len(id)+1:])
		mac.Write(body)
		x = append(x, ",v1="...)
		x = hex.AppendEncode(x, mac.Sum(m.sum[:0]))
	}
	setSigned(h, id, string(x), tsEnd, std)
	return nil
}
