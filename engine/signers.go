package engine

import (
	"net/http"
	"sync"
	"time"

	"github.com/webhookd/webhookd/verify"
)

// signers keeps a verify.Signer per endpoint, for the secrets it signs
// with now (Endpoint.SigningKeys), so that an attempt does not set up
// the keys' HMAC states again: two HMAC-SHA256 set-ups per secret and
// about twenty allocations per attempt (BenchmarkSign against
// BenchmarkSigner_SignHeader). A signer whose secrets changed (a
// rotation, a revoke, a grace that ended) is made again.
type signers struct {
	mu sync.Mutex
	m  map[string]*verify.Signer // by endpoint ID
}

// maxSigners bounds the signers kept: past it they are all dropped and
// made again as attempts need them.
const maxSigners = 4096

// sign signs h for endpoint endpointID with secrets, as
// verify.SignHeader does.
func (s *signers) sign(h http.Header, endpointID string, secrets []string, id string, at time.Time, body []byte) error {
	s.mu.Lock()
	sg := s.m[endpointID]
	s.mu.Unlock()
	if sg == nil || !sg.Secrets(secrets) {
		var err error
		if sg, err = verify.NewSigner(secrets); err != nil {
			return err
		}
		s.mu.Lock()
		if s.m == nil || len(s.m) >= maxSigners {
			s.m = make(map[string]*verify.Signer)
		}
		s.m[endpointID] = sg
		s.mu.Unlock()
	}
	return sg.SignHeader(h, id, at, body)
}
