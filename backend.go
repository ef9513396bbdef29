package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres"
	"github.com/webhookd/webhookd/storage"
	"github.com/webhookd/webhookd/tracing"
)

// databaseURLEnv names the environment variable that may hold [storage]
// url, so that a password stays out of the config file.
const databaseURLEnv = "WEBHOOKD_DATABASE_URL"

// backend is the database serve runs on (an engine.Backend: the store,
// readiness, the oldest due delivery, the sealing key's ID, the hot
// backup, Close), with what only some drivers give beside it: the bbolt
// file or the PostgreSQL database.
type backend struct {
	engine.Backend
	sched engine.Scheduler // nil: the dispatcher's LocalScheduler
	// claimAhead is the dispatcher's ClaimAhead: a node of a cluster
	// claims only what its workers can start soon.
	claimAhead int
	// taskLease is how long a node holds a background task without
	// renewing it, on a database shared by nodes (the deliveries'
	// [storage] lease); zero: the engine's default, of no use to a node
	// alone on its file.
	taskLease time.Duration
	size      func() int64 // the database file's size; nil: not measured here
	// disk is what the store's commits wrote to the file: pages, and the
	// time spent writing and syncing them; nil: not measured here.
	disk func() (pages int64, writing time.Duration)
	// stalls is what the database's bounds on stalled transactions did
	// to this node's writes; nil: not on this driver.
	stalls func() postgres.Stalls
	where  string // for the log: the file, or the database without its password
	// stop stops what the driver runs beside the database (PostgreSQL's
	// Scheduler), before the database closes; nil: nothing.
	stop func()
}

// close stops what runs beside the database, then closes it. It is safe
// to call twice.
func (be *backend) close() error {
	if be.stop != nil {
		be.stop()
	}
	return be.Close()
}

// openBackend opens the store cfg names.
// With tr (nil: [tracing] off), the bbolt file's commits are traced.
func openBackend(ctx context.Context, cfg Config, key []byte, getenv func(string) string, m *metrics, tr *tracing.Tracer, logger *slog.Logger) (*backend, error) {
	switch cfg.Storage.Driver {
	case "postgres":
		return openPostgres(ctx, cfg, key, getenv, logger)
	default:
		opts := storage.Options{LockTimeout: cfg.Storage.LockTimeout.Duration, OnCommit: m.observeCommit, SecretKey: key, OwedFanOutAbove: owedFanOutAbove(cfg.Storage.OwedFanOutAbove)}
		if tr != nil {
			opts.ObserveCommit = tr.ObserveCommit
		}
		db, err := storage.Open(cfg.Storage.Path, opts)
		if err != nil {
			return nil, err
		}
		return &backend{
			Backend: db,
			size:    db.FileSize,
			disk: func() (int64, time.Duration) {
				s := db.Stats()
				return s.PagesWritten, s.WriteTime
			},
			where: cfg.Storage.Path,
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
		Backend:    st,
		sched:      sched,
		claimAhead: 2 * cfg.Delivery.Workers,
		taskLease:  cfg.Storage.Lease.Duration,
		stalls:     st.Stalls,
		where:      redactURL(dsn) + " schema " + cfg.Storage.Schema,
		stop:       sched.Close,
	}, nil
}

// owedFanOutAbove is [storage] owed_fanout_above as storage.Options takes
// it (whose zero is its default): 0, every fan-out owed, is -1 there.
func owedFanOutAbove(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
