package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/storage"
)

// Token prefixes: a token shows its environment. Generated admin tokens
// are live; test tokens must carry testTokenPrefix.
const (
	liveTokenPrefix = "whk_live_"
	testTokenPrefix = "whk_test_"
)

// secretKeyEnv names the environment variable that may hold the master key
// of endpoint secrets, as [storage] secret_key_file may.
const secretKeyEnv = "WEBHOOKD_SECRET_KEY"

// validateSecurity checks the keys of the security settings; it never
// shows a token.
func (c Config) validateSecurity(v *configProblems) {
	seen := make(map[[32]byte]string)
	for i, tok := range c.API.Tokens {
		if strings.HasPrefix(tok, testTokenPrefix) && len(tok) > len(testTokenPrefix) { // the bare prefix is the token itself: the length check names it
			v.addf("config %s: api.tokens[%d]: starts with %q, which marks a test token: list it in api.test_tokens", v.name, i, testTokenPrefix)
		}
		seen[httpapi.TokenHash(tok)] = fmt.Sprintf("api.tokens[%d]", i)
	}
	for i, tok := range c.API.TestTokens {
		hashed := strings.HasPrefix(tok, httpapi.TokenHashPrefix)
		if !hashed && (!strings.HasPrefix(tok, testTokenPrefix) || len(tok) < len(testTokenPrefix)+16 || !printableASCII(tok)) {
			v.addf("config %s: api.test_tokens[%d]: must be %q followed by at least 16 characters of printable ASCII with no whitespace (or %q + its hex SHA-256)", v.name, i, testTokenPrefix, httpapi.TokenHashPrefix)
		}
		if other, ok := seen[httpapi.TokenHash(tok)]; ok {
			v.addf("config %s: api.test_tokens[%d]: is also %s: a token has one environment", v.name, i, other)
		}
	}
	switch c.API.DefaultEnvironment {
	case "live", "test":
	default:
		v.add("api.default_environment", c.API.DefaultEnvironment, `must be "live" or "test"`)
	}
	if !(c.API.IngestRate >= 0) || math.IsInf(c.API.IngestRate, 0) {
		v.add("api.ingest_rate", c.API.IngestRate, "must be a finite number, at least 0 (0: unlimited)")
	}
	if c.API.IngestBurst < 0 || c.API.IngestBurst > 1_000_000 {
		v.add("api.ingest_burst", c.API.IngestBurst, "must be 0 to 1000000 (0: the rate rounded up)")
	}
}

// targetPolicy is where attempts may go: [delivery] allow_http and
// allow_private_targets, both forced on by -dev; and through which
// proxy, [delivery] proxy (validated).
func (c DeliveryConfig) targetPolicy(dev bool) engine.TargetPolicy {
	proxy, _ := parseProxy(c.Proxy)
	return engine.TargetPolicy{AllowHTTP: c.AllowHTTP || dev, AllowPrivate: c.AllowPrivateTargets || dev, Proxy: proxy}
}

// parseProxy returns [delivery] proxy as a URL, nil for "". The error
// says what is wrong without the value, which may hold credentials.
func parseProxy(s string) (*url.URL, error) {
	if s == "" {
		return nil, nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, errors.New("must be a URL such as http://proxy.internal:3128 (it does not parse)")
	case u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5":
		return nil, errors.New("must be an http://, https:// or socks5:// URL")
	case u.Host == "" || u.Port() == "":
		return nil, errors.New("must name the proxy's host and port, like http://proxy.internal:3128")
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
		return nil, errors.New("must be the proxy's scheme, user info, host and port alone: no path, query or fragment")
	}
	return u, nil
}

// secretKey returns the master key of endpoint secrets, from
// WEBHOOKD_SECRET_KEY or the file [storage] secret_key_file, or nil when
// neither is set. The key is base64 (standard or URL alphabet, padded or
// not) of exactly 32 bytes. Errors say where the key is wrong, never what
// it is.
func secretKey(c StorageConfig, getenv func(string) string) ([]byte, error) {
	env := strings.TrimSpace(getenv(secretKeyEnv))
	switch {
	case env != "" && c.SecretKeyFile != "":
		return nil, fmt.Errorf("the secret key is set twice, in %s and in [storage] secret_key_file: set one", secretKeyEnv)
	case env != "":
		return decodeSecretKey(env, secretKeyEnv)
	case c.SecretKeyFile != "":
		b, err := os.ReadFile(c.SecretKeyFile)
		if err != nil {
			return nil, fmt.Errorf("storage.secret_key_file: %w", err)
		}
		return decodeSecretKey(strings.TrimSpace(string(b)), "storage.secret_key_file "+c.SecretKeyFile)
	}
	return nil, nil
}

// decodeSecretKey decodes a base64 key of storage.SecretKeySize bytes.
func decodeSecretKey(s, where string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != storage.SecretKeySize {
				return nil, fmt.Errorf("%s: the secret key is %d bytes, want %d (make one with: head -c 32 /dev/urandom | base64)", where, len(k), storage.SecretKeySize)
			}
			return k, nil
		}
	}
	return nil, errors.New(where + ": the secret key is not base64 (make one with: head -c 32 /dev/urandom | base64)")
}

// consoleSecret is what the console's CSRF key is derived from
// (httpapi.ConsoleOptions.Secret): the same on every node given the same
// config, so that a node behind a load balancer takes the forms another
// served. It is the secret key when one is set, else the admin tokens
// (as the config or the token file gives them: a token or its hash),
// whose order does not count. Both are secrets of the config alone.
func consoleSecret(key []byte, adminTokens []string) []byte {
	if len(key) > 0 {
		return key
	}
	tokens := slices.Sorted(slices.Values(adminTokens))
	return []byte("admin tokens\x00" + strings.Join(tokens, "\x00"))
}
