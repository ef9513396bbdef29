package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// FuzzLoadConfig feeds arbitrary files to the config loader. It never
// panics; every error starts with "config" and shows no token of the file;
// and a configuration it accepts is valid and encodes to a file that loads
// back to the same configuration. Its seed corpus is in
// testdata/fuzz/FuzzLoadConfig (e2e_test_config is the end-to-end tests'
// configuration, e2e's testConfig), with config.example.toml added here.
func FuzzLoadConfig(f *testing.F) {
	if example, err := os.ReadFile("config.example.toml"); err == nil {
		f.Add(string(example))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text string) {
		path := filepath.Join(dir, "fuzz.toml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig(path)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "config") {
				t.Fatalf("error does not start with config: %q", msg)
			}
			for _, tok := range fileTokens(text) {
				if len(tok) >= 8 && strings.Contains(msg, tok) {
					t.Fatalf("error shows the token %q: %s", tok, msg)
				}
			}
			return
		}
		if err := cfg.validate("again"); err != nil {
			t.Fatalf("accepted an invalid configuration: %v", err)
		}
		var buf bytes.Buffer
		if err := toml.NewEncoder(&buf).Encode(cfg); err != nil {
			t.Fatalf("accepted configuration does not encode: %v", err)
		}
		again := filepath.Join(dir, "again.toml")
		if err := os.WriteFile(again, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := loadConfig(again)
		if err != nil {
			t.Fatalf("encoded configuration does not load: %v\n%s", err, buf.String())
		}
		if !reflect.DeepEqual(got, cfg) {
			t.Fatalf("round trip changed the configuration:\n%+v\n%+v", got, cfg)
		}
	})
}

// fileTokens returns the strings in [api] tokens and test_tokens of a TOML
// text, when it parses that far.
func fileTokens(text string) []string {
	var raw struct {
		API struct {
			Tokens     []any `toml:"tokens"`
			TestTokens []any `toml:"test_tokens"`
		} `toml:"api"`
	}
	if _, err := toml.Decode(text, &raw); err != nil {
		return nil
	}
	var out []string
	for _, v := range append(raw.API.Tokens, raw.API.TestTokens...) {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
