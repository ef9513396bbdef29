package verify

import (
	"strings"
	"testing"
	"time"
)

// Benchmarks of signing (every attempt signs its body afresh) and of
// verifying (what a receiver pays), with a 1 KiB body:
//
//	go test ./verify -run '^$' -bench . -benchmem

var (
	benchBody    = []byte(`{"id":"evt_01hx","type":"order.created","data":{"pad":"` + strings.Repeat("x", 1024-60) + `"}}`)
	benchSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	benchSecret2 = "whsec_2hTjWp0fPqRk1N9sXv3bZc8dLm4eYu6o"
	benchTime    = time.Unix(1_900_000_000, 0)
)

// BenchmarkSign is the signature headers of one attempt: one secret, and
// two during a rotation.
func BenchmarkSign(b *testing.B) {
	for _, tc := range []struct {
		name    string
		secrets []string
	}{
		{"secrets=1", []string{benchSecret}},
		{"secrets=2", []string{benchSecret, benchSecret2}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(benchBody)))
			for b.Loop() {
				if _, err := Sign(tc.secrets, "evt_01hx", benchTime, benchBody); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerifier_Verify checks a signed request, as a receiver does.
func BenchmarkVerifier_Verify(b *testing.B) {
	h, err := Sign([]string{benchSecret}, "evt_01hx", benchTime, benchBody)
	if err != nil {
		b.Fatal(err)
	}
	v := &Verifier{Secrets: []string{benchSecret}, Now: func() time.Time { return benchTime }}
	b.ReportAllocs()
	b.SetBytes(int64(len(benchBody)))
	for b.Loop() {
		if _, err := v.Verify(h, benchBody); err != nil {
			b.Fatal(err)
		}
	}
}
