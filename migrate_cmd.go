package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres"
	"github.com/webhookd/webhookd/storage"
)

// runMigrate copies a stopped single node's bbolt file into an empty
// PostgreSQL schema (postgres.Import; storage.Export), pending deliveries
// included, checks that every table has as many rows as the file has
// records, and only then marks the schema's migration complete. It prints
// what it copied and the counts, and fails on any difference. A run cut
// short leaves the schema marked running: run the same command again,
// which empties it and starts over. An event that ingest would refuse
// today stops it, unless -keep-refused copies such events as they are
// stored (an older webhookd acknowledged them: dropping one would lose
// it). The URL's password is never printed.
func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("webhookd migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the stopped single node's database, as bbolt:`PATH` (required)")
	to := fs.String("to", getenv(databaseURLEnv), "PostgreSQL `URL` to copy into (default: env "+databaseURLEnv+")")
	schema := fs.String("schema", postgres.DefaultSchema, "the PostgreSQL `schema` of webhookd's tables; must be empty")
	configPath := fs.String("config", getenv("WEBHOOKD_CONFIG"), "TOML config `file` (for the secret key and [storage] lock_timeout)")
	keepRefused := fs.Bool("keep-refused", false, "copy, unchanged, the events that ingest would refuse today (an older webhookd accepted them), listing each; without it the first one stops the migration")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("migrate: unexpected argument %q", fs.Arg(0))
	}
	path, ok := strings.CutPrefix(*from, "bbolt:")
	if !ok || path == "" {
		return usagef("migrate: -from bbolt:PATH is required (the database file of a stopped webhookd)")
	}
	if *to == "" {
		return usagef("migrate: -to URL (or " + databaseURLEnv + ") is required")
	}
	target, err := describeURL(*to)
	if err != nil {
		return fmt.Errorf("migrate: -to: %w", err)
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	key, err := secretKey(cfg.Storage, getenv)
	if err != nil {
		return err
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}

	// The file first: one that cannot be copied (in use, owed fan-outs,
	// another key) is refused before the target is connected to, so the
	// schema is left as it was.
	fileOpts := storage.Options{LockTimeout: cfg.Storage.LockTimeout.Duration, SecretKey: key}
	if err := storage.CheckExportable(path, fileOpts); err != nil {
		return migrateFileError(err, path, *configPath)
	}
	start := time.Now()
	fmt.Fprintf(stdout, "migrating bbolt:%s to %s, schema %s\n", path, target, *schema)
	store, err := postgres.Open(ctx, *to, postgres.Options{Schema: *schema, SecretKey: key, MaxConns: 2, Importing: true})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer store.Close()
	imp, restarted, err := store.Import(ctx, "bbolt:"+path)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer imp.Close()
	if restarted {
		fmt.Fprintf(stdout, "schema %s held an interrupted migration: emptied, starting over\n", *schema)
	}
	kept := 0
	if *keepRefused {
		imp.KeepRefused = func(ev engine.Event, err error) {
			kept++
			fmt.Fprintf(stdout, "kept event %s of tenant %s as stored, though ingest would refuse it now: %v\n", ev.ID, ev.TenantID, err)
		}
	}
	src, err := storage.Export(path, fileOpts, imp)
	if err != nil {
		return migrateFileError(err, path, *configPath) // started since the check
	}
	got, finishErr := imp.Finish(postgres.Counts(src))
	if finishErr != nil && !errors.Is(finishErr, postgres.ErrCountMismatch) {
		return fmt.Errorf("migrate: %w", finishErr)
	}
	took := time.Since(start)
	fmt.Fprintf(stdout, "copied %d events in %s; records of the file = rows of the schema:\n", src.Events, took.Round(time.Millisecond))
	if kept > 0 {
		fmt.Fprintf(stdout, "%d of them kept as stored though ingest would refuse them now (-keep-refused)\n", kept)
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	mismatches := 0
	for _, r := range []struct {
		name     string
		src, got int
	}{
		{"tenants", src.Tenants, got.Tenants},
		{"deleted tenants (still being purged)", src.DeletedTenants, got.DeletedTenants},
		{"event types", src.EventTypes, got.EventTypes},
		{"endpoints", src.Endpoints, got.Endpoints},
		{"access tokens", src.AccessTokens, got.AccessTokens},
		{"events", src.Events, got.Events},
		{"deliveries", src.Deliveries, got.Deliveries},
		{"idempotency keys", src.IdempotencyKeys, got.IdempotencyKeys},
		{"tasks", src.Tasks, got.Tasks},
	} {
		eq := "="
		if r.src != r.got {
			eq, mismatches = "≠", mismatches+1
		}
		fmt.Fprintf(w, "  %s\t%d\t%s\t%d\n", r.name, r.src, eq, r.got)
	}
	w.Flush()
	if finishErr != nil {
		return fmt.Errorf("migrate: the counts differ (%d tables); the schema is not marked complete, and the same migrate run again starts over: %w", mismatches, finishErr)
	}
	if id := store.SecretKeyID(); id != "" {
		fmt.Fprintf(stdout, "endpoint secrets are sealed with key id %s\n", id)
	}
	fmt.Fprintf(stdout, "migration complete. Reconciliation feed cursors from the bbolt node are not valid on PostgreSQL: readers start the feed again (from the beginning or since a time).\n")
	return nil
}

// describeURL returns the PostgreSQL connection url names, as
// postgres://user@host:port/database: without its password or options.
func describeURL(url string) (string, error) {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database), nil
}

// migrateFileError words an error of reading the bbolt file at path
// (storage.CheckExportable, storage.Export) with what the operator does
// about it; configPath is the -config the command was given.
func migrateFileError(err error, path, configPath string) error {
	switch {
	case errors.Is(err, storage.ErrInUse):
		return fmt.Errorf("migrate: %w; stop webhookd first (a migration copies a stopped node)", err)
	case errors.Is(err, storage.ErrFanOutsOwed):
		start := "webhookd -db " + path
		if configPath != "" {
			start = "webhookd -config " + configPath + " -db " + path
		}
		return fmt.Errorf("migrate: %w: start webhookd on the file once (%s; it writes them before it serves), stop it once it listens (SIGTERM or Ctrl-C), then run webhookd migrate -from bbolt:%s again with the same -to and -schema", err, start, path)
	}
	return fmt.Errorf("migrate: %w", err)
}
