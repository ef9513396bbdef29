package verify

import (
	"encoding/base64"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"
)

// TestSigner_SignHeader: a Signer's headers are SignHeader's, byte for
// byte, for every signing vector (one secret and several), signature
// after signature and from goroutines at once (its HMAC states are
// reused), and its webhook-signature is the vector's.
func TestSigner_SignHeader(t *testing.T) {
	vf := loadVectors(t)
	for _, v := range vf.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			body, err := base64.StdEncoding.DecodeString(v.PayloadBase64)
			if err != nil {
				t.Fatal(err)
			}
			secrets := v.Secrets
			if v.Secret != "" {
				secrets = []string{v.Secret}
			}
			ts := time.Unix(v.Timestamp, 0)
			want := http.Header{}
			if err := SignHeader(want, secrets, v.MsgID, ts, body); err != nil {
				t.Fatal(err)
			}
			if got := want.Get(HeaderSignature); got != v.ExpectedSignatureHeader {
				t.Fatalf("SignHeader's signature %q, want the vector's %q", got, v.ExpectedSignatureHeader)
			}
			s, err := NewSigner(secrets)
			if err != nil {
				t.Fatal(err)
			}
			if !s.Secrets(secrets) || s.Secrets(append(secrets[:len(secrets):len(secrets)], "whsec_x")) {
				t.Error("Secrets does not report the signer's secrets")
			}
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for range 3 {
						got := http.Header{}
						if err := s.SignHeader(got, v.MsgID, ts, body); err != nil {
							t.Error(err)
							return
						}
						if !reflect.DeepEqual(got, want) {
							t.Errorf("Signer.SignHeader = %v, want SignHeader's %v", got, want)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
	if _, err := NewSigner(nil); err != ErrNoSecrets {
		t.Errorf("NewSigner(nil) = %v, want ErrNoSecrets", err)
	}
	if _, err := NewSigner([]string{"whsec_!!"}); err == nil {
		t.Error("NewSigner of a secret that is not base64 succeeded")
	}
	s, _ := NewSigner([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	if err := s.SignHeader(http.Header{}, "", time.Now(), nil); err == nil {
		t.Error("a signature of an empty id succeeded")
	}
}

func BenchmarkSigner_SignHeader(b *testing.B) {
	s, err := NewSigner([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	h := http.Header{}
	ts := time.Unix(1700000000, 0)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.SignHeader(h, "msg_1", ts, body); err != nil {
			b.Fatal(err)
		}
	}
}
