package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres"
	"github.com/webhookd/webhookd/storage"
)

// databaseURLEnv names the environment variable that may hold [storage]
// url, so that a password stays out of the config file.
const databaseURLEnv = "WEBHOOKD_DATABASE_URL"

// backend is the store serve runs on, with what each driver gives beside
// the engine.Store: the bbolt file or the PostgreSQL database.
type backend struct {
	store engine.Store
	sched engine.Scheduler // nil: the dispatcher's LocalScheduler
	// claimAhead is the dispatcher's ClaimAhead: a node of a cluster
	// claims only what its workers can start soon.
	claimAhead int
	// backup is the hot backup of GET /v1/admin/backup; nil where the
	// database has its own (pg_dump).
	backup io.WriterTo
	// ready says whether ingest can be acknowledged now.
	ready func(ctx context.Context) error
	// oldestDue is the due time of the most overdue pending delivery.
	oldestDue func(ctx context.Context) (time.Time, bool, error)
	size      func() int64 // the database file's size; nil: not measured here
	// keyID is the ID of the key endpoint secrets are sealed with at
	// rest ("": not sealed); nil: the driver does not say (sealedWith).
	keyID func() string
	// disk is what the store's commits wrote to the file: pages, and the
	// time spent writing and syncing them; nil: not measured here.
	disk func() (pages int64, writing time.Duration)
	// stalls is what the database's bounds on stalled transactions did
	// to this node's writes; nil: not on this driver.
	stalls func() postgres.Stalls
	where  string // for the log: the file, or the database without its password
	close  func() error
}

// sealedWith returns the ID of the key the store seals endpoint secrets
// with: "" when they are not sealed, or the driver does not say.
func (be *backend) sealedWith() string {
	if be.keyID == nil {
		return ""
	}
	return be.keyID()
}

// openBackend opens the store cfg names.
func openBackend(ctx context.Context, cfg Config, key []byte, getenv func(string) string, m *metrics, logger *slog.Logger) (*backend, error) {
	switch cfg.Storage.Driver {
	case "postgres":
		return openPostgres(ctx, cfg, key, getenv, logger)
	default:
		db, err := storage.Open(cfg.Storage.Path, storage.Options{LockTimeout: cfg.Storage.LockTimeout.Duration, OnCommit: m.observeCommit, SecretKey: key})
		if err != nil {
			return nil, err
		}
		return &backend{
			store:  db,
			backup: db,
			ready: func(ctx context.Context) error {
				// Not ready while ingest would answer 503 for the disk.
				if err := db.Writable(ctx, int(cfg.Ingest.MaxBody)); err != nil {
					return errors.New("storage cannot write now (the last commit failed: disk full or I/O error; see the log)")
				}
				return nil
			},
			oldestDue: db.OldestDue,
			size:      db.FileSize,
			keyID:     db.SecretKeyID,
			disk: func() (int64, time.Duration) {
				s := db.Stats()
				return s.PagesWritten, s.WriteTime
			},
			where: cfg.Storage.Path,
			close: db.Close,
		}, nil
	}
}

// databaseURL returns [storage] url or WEBHOOKD_DATABASE_URL (one of
// them, not both).
func databaseURL(c StorageConfig, getenv func(string) string) (string, error) {
	env := strings.TrimSpace(getenv(databaseURLEnv))
	switch {
	case env != "" && c.URL != "":
		return "", fmt.Errorf("the database URL is set twice, in %s and in [storage] url: set one", databaseURLEnv)
	case env != "":
		return env, nil
	case c.URL != "":
		return c.URL, nil
	}
	return "", fmt.Errorf("[storage] driver = \"postgres\" needs a database URL: set [storage] url or %s", databaseURLEnv)
}

// redactURL returns a database URL fit for a log: without its password.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "(a key/value connection string)"
	}
	return u.Redacted()
}

func openPostgres(ctx context.Context, cfg Config, key []byte, getenv func(string) string, logger *slog.Logger) (*backend, error) {
	dsn, err := databaseURL(cfg.Storage, getenv)
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := postgres.Open(octx, dsn, postgres.Options{
		Schema:    cfg.Storage.Schema,
		SecretKey: key,
		Lease:     cfg.Storage.Lease.Duration,
		MaxConns:  int32(cfg.Storage.MaxConnections),
		Logger:    logger,
	})
	if err != nil {
		return nil, err
	}
	// An ingest claims its new deliveries while fewer than twice what
	// the claim loop claims ahead wait here for a worker: its own
	// deliveries cost no claim, and the claim loop stops while they fill
	// what it would claim.
	sched := st.Scheduler(postgres.SchedulerOptions{EndpointConcurrency: cfg.Delivery.EndpointConcurrency, PreClaim: 4 * cfg.Delivery.Workers,
		JoinWait: cfg.Storage.Lease.Duration / 10})
	return &backend{
		store:      st,
		sched:      sched,
		claimAhead: 2 * cfg.Delivery.Workers,
		ready: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			return st.Writable(ctx)
		},
		oldestDue: st.OldestDue,
		stalls:    st.Stalls,
		keyID:     st.SecretKeyID,
		where:     redactURL(dsn) + " schema " + cfg.Storage.Schema,
		close: func() error {
			sched.Close()
			return st.Close()
		},
	}, nil
}
