package engine

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/webhookd/webhookd/verify"
)

// TestSigners_sign: an endpoint's kept signer signs as verify.SignHeader
// does, and once the endpoint's secrets change (a rotation) with the new
// ones, never the ones it kept.
func TestSigners_sign(t *testing.T) {
	var s signers
	old, rotated := []string{NewSecret()}, []string{NewSecret(), "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
	at := time.Unix(1700000000, 0)
	body := []byte(`{"id":"evt_1"}`)
	for i, secrets := range [][]string{old, old, rotated, rotated, old} {
		got, want := http.Header{}, http.Header{}
		if err := s.sign(got, "ep_1", secrets, "evt_1", at, body); err != nil {
			t.Fatal(err)
		}
		if err := verify.SignHeader(want, secrets, "evt_1", at, body); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("signature %d = %v, want %v", i, got, want)
		}
	}
	if err := s.sign(http.Header{}, "ep_2", nil, "evt_1", at, body); err == nil {
		t.Error("an endpoint with no secret was signed for")
	}
}
