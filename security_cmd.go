package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/storage"
)

// runRotateKey re-encrypts the endpoint secrets of a stopped database
// under a new master key:
//
//	webhookd rotate-key [-config FILE] [-db PATH] -new-key-file FILE
//
// The current key is the one webhookd would start with (WEBHOOKD_SECRET_KEY
// or [storage] secret_key_file; none for a database whose secrets are in
// plain, which this encrypts). The re-encryption is one transaction; then
// the file is rewritten so that no page keeps a secret under the old key
// (a new file beside it, renamed over it once complete and checked).
// Afterwards webhookd must be started with the new key. A run that was
// interrupted is finished by running the same command again (see
// storage.RotateSecretKey).
func runRotateKey(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("webhookd rotate-key", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", getenv("WEBHOOKD_CONFIG"), "TOML config `file` of the service (its database and current key)")
	dbPath := fs.String("db", "", "database `path`, overriding [storage] path")
	newKeyFile := fs.String("new-key-file", "", "`file` holding the new key: base64 of 32 random bytes (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("rotate-key: unexpected argument %q", fs.Arg(0))
	}
	if *newKeyFile == "" {
		return usagef("rotate-key: -new-key-file FILE is required (make a key with: head -c 32 /dev/urandom | base64 > FILE)")
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	if err := bboltOnly(cfg, "rotate-key", false); err != nil {
		return err
	}
	if *dbPath != "" {
		cfg.Storage.Path = *dbPath
	}
	oldKey, err := secretKey(cfg.Storage, getenv)
	if err != nil {
		return fmt.Errorf("rotate-key: current key: %w", err)
	}
	newKey, err := secretKey(StorageConfig{SecretKeyFile: *newKeyFile}, func(string) string { return "" })
	if err != nil {
		return fmt.Errorf("rotate-key: new key: %w", err)
	}
	res, err := storage.RotateSecretKey(cfg.Storage.Path, oldKey, newKey, storage.Options{LockTimeout: cfg.Storage.LockTimeout.Duration})
	if errors.Is(err, storage.ErrInUse) {
		return fmt.Errorf("rotate-key: %w; stop webhookd first", err)
	}
	if err != nil {
		return fmt.Errorf("rotate-key: %w", err)
	}
	keyID := storage.SecretKeyID(newKey)
	id := hex.EncodeToString(keyID[:])
	staleNote(stdout, res.Stale, cfg.Storage.Path+".rotate")
	if res.AlreadyRotated {
		fmt.Fprintf(stdout, "the secrets in %s were under the key with id %s already (an earlier rotate-key stopped before its rewrite); rewrote the file, so no page keeps them under the old key\n", cfg.Storage.Path, id)
	} else {
		fmt.Fprintf(stdout, "re-encrypted the secrets of %d endpoints in %s under the key with id %s, and rewrote the file\n", res.Endpoints, cfg.Storage.Path, id)
	}
	fmt.Fprintf(stdout, "start webhookd with the new key: [storage] secret_key_file = %q, or %s\n", *newKeyFile, secretKeyEnv)
	return nil
}

// runNewToken prints a new random API token for an environment, and the
// form of it a configuration file may hold instead of the token:
//
//	webhookd new-token [-env live|test]
func runNewToken(_ context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("webhookd new-token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := fs.String("env", "live", "the token's `environment`: live ([api] tokens) or test ([api] test_tokens)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	prefix := liveTokenPrefix
	switch *env {
	case "live":
	case "test":
		prefix = testTokenPrefix
	default:
		return usagef("new-token: -env %q: must be live or test", *env)
	}
	var raw [32]byte
	rand.Read(raw[:]) // never returns an error: it crashes the program instead (Go 1.24)
	tok := prefix + base64.RawURLEncoding.EncodeToString(raw[:])
	sum := httpapi.TokenHash(tok)
	list := "tokens"
	if *env == "test" {
		list = "test_tokens"
	}
	fmt.Fprintf(stdout, "%s\n", tok)
	fmt.Fprintf(stderr, "give the token above to its user; in [api] %s list it, or only its hash:\n  %q\n", list, httpapi.TokenHashPrefix+hex.EncodeToString(sum[:]))
	return nil
}
