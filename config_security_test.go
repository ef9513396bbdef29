package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
)

// TestConfig_SafeDefaults: the built-in defaults are the strict ones; only
// a config key or -dev loosens them.
func TestConfig_SafeDefaults(t *testing.T) {
	d := defaultConfig()
	if got := d.Delivery.targetPolicy(false); got != (engine.TargetPolicy{}) {
		t.Errorf("default target policy %+v, want the strict zero value", got)
	}
	if got := d.Delivery.targetPolicy(true); !got.AllowHTTP || !got.AllowPrivate {
		t.Errorf("-dev target policy %+v, want both allowed", got)
	}
	if d.API.DefaultEnvironment != "live" || d.Delivery.RequireEndpointVerification || d.Storage.SecretKeyFile != "" {
		t.Errorf("defaults %+v %+v", d.API, d.Delivery)
	}
}

func TestLoadConfig_SecurityKeys(t *testing.T) {
	good := "whk_test_0123456789abcdef"
	tests := []struct {
		name, toml, want string // want: part of the error; "" for none
	}{
		{"test token", `[api]` + "\n" + `test_tokens = ["` + good + `"]`, ""},
		{"hashed tokens", "[api]\ntokens = [\"sha256:" + strings.Repeat("ab", 32) + "\"]\ntest_tokens = [\"sha256:" + strings.Repeat("cd", 32) + "\"]", ""},
		{"test token without prefix", "[api]\ntest_tokens = [\"0123456789abcdef0123\"]", `api.test_tokens[0]: must be "whk_test_" followed by at least 16`},
		{"test token short", "[api]\ntest_tokens = [\"whk_test_short\"]", `api.test_tokens[0]: must be "whk_test_"`},
		{"live token with test prefix", "[api]\ntokens = [\"" + good + "\"]", `api.tokens[0]: starts with "whk_test_"`},
		{"token in both lists", "[api]\ntokens = [\"sha256:" + hashHex("whk_test_0123456789abcdef") + "\"]\ntest_tokens = [\"" + good + "\"]", `api.test_tokens[0]: is also api.tokens[0]`},
		{"environment", "[api]\ndefault_environment = \"test\"", ""},
		{"bad environment", "[api]\ndefault_environment = \"prod\"", `api.default_environment = "prod": must be "live" or "test"`},
		{"rate", "[api]\ningest_rate = 12.5\ningest_burst = 100", ""},
		{"negative rate", "[api]\ningest_rate = -1", `api.ingest_rate = -1: must be a finite number`},
		{"infinite rate", "[api]\ningest_rate = inf", `api.ingest_rate = +Inf`},
		{"negative burst", "[api]\ningest_burst = -1", `api.ingest_burst = -1: must be 0 to 1000000`},
		{"delivery switches", "[delivery]\nallow_http = true\nallow_private_targets = true\nrequire_endpoint_verification = true", ""},
		{"key file", "[storage]\nsecret_key_file = \"/run/secrets/webhookd\"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(writeConfig(t, tt.toml))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("error %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "0123456789abcdef") {
				t.Errorf("the error shows a token: %v", err)
			}
		})
	}
}

// hashHex is the hex SHA-256 a configuration may give tok as.
func hashHex(tok string) string {
	sum := httpapi.TokenHash(tok)
	return hex.EncodeToString(sum[:])
}

func TestSecretKey(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	std := base64.StdEncoding.EncodeToString(key)
	dir := t.TempDir()
	file := func(content string) string {
		p := filepath.Join(dir, strings.NewReplacer("/", "_", "=", "_").Replace(content)+".key")
		os.WriteFile(p, []byte(content), 0o600)
		return p
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == secretKeyEnv {
				return v
			}
			return ""
		}
	}
	none := env("")
	tests := []struct {
		name   string
		cfg    StorageConfig
		getenv func(string) string
		want   []byte
		err    string
	}{
		{"none", StorageConfig{}, none, nil, ""},
		{"env", StorageConfig{}, env(std), key, ""},
		{"env unpadded url alphabet", StorageConfig{}, env(base64.RawURLEncoding.EncodeToString(key)), key, ""},
		{"file with newline", StorageConfig{SecretKeyFile: file(std + "\n")}, none, key, ""},
		{"both", StorageConfig{SecretKeyFile: file(std)}, env(std), nil, "set one"},
		{"short", StorageConfig{}, env(base64.StdEncoding.EncodeToString(key[:16])), nil, "16 bytes, want 32"},
		{"not base64", StorageConfig{}, env("not a key!"), nil, "not base64"},
		{"missing file", StorageConfig{SecretKeyFile: filepath.Join(dir, "nope")}, none, nil, "secret_key_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := secretKey(tt.cfg, tt.getenv)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				if strings.Contains(err.Error(), std) || strings.Contains(err.Error(), "not a key") {
					t.Errorf("the error shows the key: %v", err)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tt.want) {
				t.Errorf("secretKey = %x, %v; want %x", got, err, tt.want)
			}
		})
	}
}

func TestNewToken(t *testing.T) {
	for _, env := range []string{"live", "test"} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), []string{"new-token", "-env", env}, func(string) string { return "" }, &out, &errOut); err != nil {
			t.Fatal(err)
		}
		tok := strings.TrimSpace(out.String())
		if !strings.HasPrefix(tok, "whk_"+env+"_") || len(tok) < 40 {
			t.Errorf("-env %s: token %q", env, tok)
		}
		sum := httpapi.TokenHash(tok)
		if !strings.Contains(errOut.String(), hashHex(tok)) || sum != httpapi.TokenHash("sha256:"+hashHex(tok)) {
			t.Errorf("-env %s: the hash form is not printed or does not stand for the token", env)
		}
		cfg := "[api]\n" + map[string]string{"live": "tokens", "test": "test_tokens"}[env] + ` = ["` + tok + `"]`
		if _, err := loadConfig(writeConfig(t, cfg)); err != nil {
			t.Errorf("-env %s: the token is refused by the config: %v", env, err)
		}
	}
	if err := run(context.Background(), []string{"new-token", "-env", "prod"}, func(string) string { return "" }, io.Discard, io.Discard); err == nil {
		t.Error("-env prod accepted")
	}
}

// TestConsoleSecret: every node given the same config derives the same
// console secret, whatever the order of its admin tokens; the secret key
// decides when there is one; other tokens, another secret.
func TestConsoleSecret(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	a := consoleSecret(nil, []string{"sha256:aa", "sha256:bb"})
	if got := consoleSecret(nil, []string{"sha256:bb", "sha256:aa"}); !bytes.Equal(got, a) {
		t.Error("the order of the admin tokens changed the console secret")
	}
	if got := consoleSecret(nil, []string{"sha256:aa"}); bytes.Equal(got, a) {
		t.Error("other admin tokens gave the same console secret")
	}
	if got := consoleSecret(key, []string{"sha256:aa"}); !bytes.Equal(got, key) || !bytes.Equal(consoleSecret(key, nil), key) {
		t.Error("with a secret key, the console secret is not the key")
	}
}
