package engine_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// TestGivenSecret: a secret a caller brings is taken in the Standard
// Webhooks form, padded or not, or as Svix's bare base64, and kept as
// "whsec_" + padded base64; any other value is refused naming the field,
// with none of it in the message.
func TestGivenSecret(t *testing.T) {
	key24 := []byte("0123456789abcdefghijklmn")
	key64 := []byte(strings.Repeat("k", 64))
	std24 := base64.StdEncoding.EncodeToString(key24)
	raw := base64.RawStdEncoding.EncodeToString([]byte(strings.Repeat("r", 32)))
	ok := []struct{ in, want string }{
		{"whsec_" + std24, "whsec_" + std24},
		{std24, "whsec_" + std24},
		{"whsec_" + raw, "whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("r", 32)))},
		{"whsec_" + base64.StdEncoding.EncodeToString(key64), "whsec_" + base64.StdEncoding.EncodeToString(key64)},
	}
	for _, tt := range ok {
		got, err := engine.GivenSecret("secret", tt.in)
		if err != nil || got != tt.want {
			t.Errorf("GivenSecret(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	bad := []string{
		"whsec_" + base64.StdEncoding.EncodeToString(key24[:23]),       // 23 bytes: too short
		"whsec_" + base64.StdEncoding.EncodeToString(append(key64, 1)), // 65 bytes
		"whsec_not base64 at all, not at all, not at all!!",
		"whsec_" + base64.URLEncoding.EncodeToString([]byte(strings.Repeat("\xff", 30))), // URL alphabet
		"whsec_",
		"whsec_test_" + std24, // an environment prefix is not Standard Webhooks
		" " + std24,
	}
	for _, in := range bad {
		_, err := engine.GivenSecret("secret", in)
		if engine.ErrorCode(err) != engine.CodeInvalidField || fieldOf(err) != "secret" {
			t.Errorf("GivenSecret(%q) = %v; want invalid_field naming secret", in, err)
			continue
		}
		if v := strings.TrimPrefix(in, "whsec_"); len(v) > 3 && strings.Contains(err.Error(), v) {
			t.Errorf("GivenSecret(%q): the message shows the value: %v", in, err)
		}
	}
}

// TestService_GivenSecret: an endpoint created with a secret of the
// caller's signs with it; a rotation to a given secret keeps the old one
// for its grace and refuses one the endpoint signs with already; a bad
// secret changes nothing.
func TestService_GivenSecret(t *testing.T) {
	ctx := context.Background()
	svc, clock := newSecretsService(t, "")
	svix := base64.StdEncoding.EncodeToString([]byte("a key Svix made for acme")) // 24 bytes, bare
	ep, secret, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/in", EventTypes: []string{"*"}, Secret: svix})
	if err != nil {
		t.Fatal(err)
	}
	if secret != "whsec_"+svix {
		t.Errorf("create answered secret %q, want whsec_ + the given base64", secret)
	}
	if keys := ep.SigningKeys(clock.Now()); len(keys) != 1 || keys[0] != "whsec_"+svix {
		t.Errorf("signing keys = %v, want the given secret", keys)
	}

	if _, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/other", EventTypes: []string{"*"}, Secret: "whsec_short"}); fieldOf(err) != "secret" {
		t.Errorf("create with a short secret: %v, want invalid_field secret", err)
	}
	if eps, _ := svc.Endpoints(ctx, "acme"); len(eps) != 1 {
		t.Errorf("%d endpoints after a refused create, want 1", len(eps))
	}

	next := "whsec_" + base64.StdEncoding.EncodeToString([]byte("the next key, 32 bytes long!!!!!"))
	rot, err := svc.RotateSecret(ctx, "acme", ep.ID, engine.RotateInput{Grace: "1h", Secret: next})
	if err != nil {
		t.Fatal(err)
	}
	if rot.Secret != next {
		t.Errorf("rotation answered %q, want the given secret", rot.Secret)
	}
	if keys := rot.Endpoint.SigningKeys(clock.Now()); len(keys) != 2 || keys[0] != next || keys[1] != "whsec_"+svix {
		t.Errorf("signing keys after the rotation = %v, want the given one then the old one", keys)
	}
	for _, again := range []string{next, svix} {
		_, err := svc.RotateSecret(ctx, "acme", ep.ID, engine.RotateInput{Secret: again})
		if engine.ErrorCode(err) != engine.CodeInvalidField || fieldOf(err) != "secret" {
			t.Errorf("rotation to a key the endpoint signs with: %v, want invalid_field secret", err)
		}
	}
	if _, err := svc.RotateSecret(ctx, "acme", ep.ID, engine.RotateInput{Secret: "whsec_!!"}); fieldOf(err) != "secret" {
		t.Errorf("rotation to a bad secret: %v, want invalid_field secret", err)
	}
	stored, _ := svc.Endpoint(ctx, "acme", ep.ID)
	if keys := stored.SigningKeys(clock.Now()); len(keys) != 2 || keys[0] != next {
		t.Errorf("after refused rotations the keys are %v, want those of the last rotation", keys)
	}
}

// fieldOf is the field of err's *engine.Error ("" when none).
func fieldOf(err error) string {
	var e *engine.Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}
