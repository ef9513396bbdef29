// Package postgres is webhookd's PostgreSQL driver: an engine.Store kept
// in a PostgreSQL database (through pgx), shared by any number of
// webhookd nodes, and a Scheduler whose claims are leases in that
// database, so that every node takes due work from the same retry index
// and a dead node's work comes back to the others when its leases end.
//
// The bbolt file (package storage) stays the single-node default; this
// store is cluster mode (docs/cluster.md).
// Both pass the same conformance suite, engine/storetest.
//
// Durability: a write returns after PostgreSQL's COMMIT, which with the
// server's default synchronous_commit=on (and a synchronous standby, if
// the operator runs one) is on disk. webhookd never lowers it.
package postgres

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/sealing"
)

// DefaultSchema is the schema webhookd's tables live in unless
// Options.Schema names another.
const DefaultSchema = "webhookd"

// Options configure Open.
type Options struct {
	// Schema is the PostgreSQL schema of webhookd's tables, made when
	// missing; "": DefaultSchema.
	Schema string
	// SecretKey, when set, seals endpoint secrets at rest (package
	// sealing), as [storage] secret_key does for the bbolt file.
	SecretKey []byte
	// MaxConns bounds the connection pool; zero: pgxpool's default (the
	// larger of 4 and the number of CPUs) unless the URL sets
	// pool_max_conns.
	MaxConns int32
	// Lease is how long a claim lasts without renewal (Scheduler); zero:
	// DefaultLease.
	Lease time.Duration
	// Now is the clock of due times and leases; nil: time.Now. Every
	// node's clock must agree (NTP): a node whose clock runs ahead sees
	// deliveries due early and other nodes' leases end early.
	Now    func() time.Time
	Logger *slog.Logger // nil: discard
	// Importing opens the store to import into it (webhookd migrate):
	// an import that did not finish does not stop Open, as it does for a
	// node (which must not start on half of a migrated database).
	Importing bool
}

// The bounds on what one node's transaction makes the others wait for,
// set on every session of the pool (docs/cluster.md, "Failure and
// recovery"). Every lock webhookd takes is transaction-scoped and its
// transactions last milliseconds, with no network I/O of their own in
// them; but a node frozen mid-transaction (SIGSTOP, a VM paused, a
// stalled process) holds what it locked, a tenant's sequence lock
// among it, and every node's ingest of that tenant would wait for the
// whole freeze. So:
//
//   - IdleInTransactionTimeout: the server ends a session idle inside a
//     transaction for longer (idle_in_transaction_session_timeout): its
//     transaction rolls back and its locks go. The frozen node loses
//     that transaction (an ingest not yet acknowledged, a record it
//     writes again or a lease's end), nothing committed.
//   - LockTimeout: a statement waits no longer for a lock
//     (lock_timeout): the store answers engine.CodeUnavailable (503
//     with Retry-After to an ingest), so that a client retries, and a
//     node's connections, and its ingests of other tenants, are not all
//     held by waits.
//
// Both are far below [storage] lease (30 s by default; at least
// [delivery] attempt_timeout, 10 s by default): a stalled transaction
// holds up the others for seconds, where a stalled node's claims hold up
// its deliveries for a lease. A URL that sets lock_timeout or
// idle_in_transaction_session_timeout itself (as a parameter, e.g.
// ?lock_timeout=5s) keeps its own.
const (
	IdleInTransactionTimeout = 2 * time.Second
	LockTimeout              = time.Second
)

// Store is an engine.Backend in PostgreSQL. It is safe for concurrent use,
// by any number of processes at once.
type Store struct {
	pool   *pgxpool.Pool
	schema string
	sealer *sealing.Sealer
	lease  time.Duration
	clock  func() time.Time
	log    *slog.Logger

	claims    *claims                  // the leases this process holds (Scheduler)
	records   groupQueue[*heldRecord]  // holders' records (records_batch.go)
	ingests   groupQueue[*cachedWrite] // appendCached's writes (ingest_batch.go)
	importing bool
	// endpoints holds, per tenant, the endpoints the last full ingest
	// read (*endpointsSeen), for appendCached.
	endpoints sync.Map
	// types holds, per event type, its catalogue entry as the last full
	// ingest read it (*typeSeen), for appendCached.
	types         sync.Map
	cachedIngests atomic.Int64 // ingests appendCached took, for tests
	groupSplits   atomic.Int64 // ingest groups that failed and ran alone, for tests
	// recordFallbacks counts holders' records whose compare-and-set
	// found the row changed and took the row-locked path, for tests.
	recordFallbacks atomic.Int64
	// preclaimer is the running Scheduler whose node an ingest claims
	// its new deliveries for (SchedulerOptions.PreClaim); nil: none.
	preclaimer atomic.Pointer[Scheduler]
	// counter is the Scheduler that counts the backlog (from its
	// Recover to its Close), which an ingest here tells what it added
	// (backlog.go); nil: none.
	counter atomic.Pointer[Scheduler]

	lockTimeouts atomic.Int64 // writes whose lock wait LockTimeout cut (Stalls)
	stalledTx    atomic.Int64 // transactions IdleInTransactionTimeout ended (Stalls)
	// blockedSince is when a write here first had its lock wait cut
	// with no write committed since (Unix nanoseconds); 0: not blocked.
	// lastLockTimeout is the latest such cut.
	blockedSince, lastLockTimeout atomic.Int64
}

var _ engine.Backend = (*Store)(nil)

// Open connects to the database at url (a libpq URL or key/value string;
// a multi-host URL with target_session_attrs=read-write follows a
// failover), brings the schema up to date and checks the secret key
// against the one the stored secrets are sealed with.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.Schema == "" {
		opts.Schema = DefaultSchema
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: database url: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	cfg.ConnConfig.RuntimeParams["application_name"] = "webhookd"
	for param, d := range map[string]time.Duration{"idle_in_transaction_session_timeout": IdleInTransactionTimeout, "lock_timeout": LockTimeout} {
		if _, set := cfg.ConnConfig.RuntimeParams[param]; !set {
			cfg.ConnConfig.RuntimeParams[param] = strconv.FormatInt(d.Milliseconds(), 10)
		}
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	sealer, err := sealing.New(opts.SecretKey)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	s := &Store{importing: opts.Importing, pool: pool, schema: opts.Schema, sealer: sealer, lease: opts.Lease, clock: opts.Now, log: opts.Logger, claims: newClaims(),
		records: groupQueue[*heldRecord]{parallel: maxRecordBatches, size: maxRecordBatch},
		ingests: groupQueue[*cachedWrite]{parallel: maxIngestBatches, size: maxIngestBatch}}
	if err := s.init(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// init migrates the schema and settles the secret key.
func (s *Store) init(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: connect: %w", err)
	}
	defer conn.Release()
	if _, err := migrate(ctx, conn.Conn(), s.schema); err != nil {
		return err
	}
	var mark []byte
	err = conn.QueryRow(ctx, "SELECT value FROM meta WHERE key = $1", metaMigration).Scan(&mark)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: read the migration mark: %w", err)
	}
	var m migrationMark
	if derr := json.Unmarshal(mark, &m); err == nil && derr == nil && m.State != "complete" && !s.importing {
		return fmt.Errorf("postgres: schema %s holds a webhookd migrate that did not finish (from %s, started %s): run the same migrate command again before starting webhookd on it", s.schema, m.Source, m.Started.Format(time.RFC3339))
	}
	return s.initSecrets(ctx)
}

// Close closes the pool. Claims still held end with their leases.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Schema returns the schema the store's tables are in.
func (s *Store) Schema() string { return s.schema }

// SecretKeyID is the hex ID of the key endpoint secrets are sealed with,
// "" when they are stored in plain.
func (s *Store) SecretKeyID() string {
	if s.sealer == nil {
		return ""
	}
	id := s.sealer.ID()
	return hex.EncodeToString(id[:])
}

// initSecrets makes the stored secrets agree with the configured key,
// as the bbolt store's Open does: meta's secret_key_id names the key the
// secrets are sealed with; without it they are plain. Plain secrets with
// a key configured are sealed, in one transaction with writing the ID.
func (s *Store) initSecrets(ctx context.Context) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		// Another node starting at once may be sealing every endpoint:
		// wait for it, however long.
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = 0"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "LOCK TABLE meta IN EXCLUSIVE MODE"); err != nil {
			return err
		}
		var stored string
		err := tx.QueryRow(ctx, "SELECT value FROM meta WHERE key = 'secret_key_id'").Scan(&stored)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		switch {
		case stored != "" && s.sealer == nil:
			return fmt.Errorf("postgres: %w (key id %s)", sealing.ErrKeyRequired, stored)
		case stored != "" && stored != s.SecretKeyID():
			return fmt.Errorf("postgres: %w (the database's key id is %s, the configured one %s)", sealing.ErrKeyMismatch, stored, s.SecretKeyID())
		case stored != "" || s.sealer == nil:
			return nil
		}
		rows, err := tx.Query(ctx, "SELECT doc, secrets FROM endpoints FOR UPDATE")
		if err != nil {
			return err
		}
		eps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (engine.Endpoint, error) { return scanEndpoint(r, nil) })
		if err != nil {
			return err
		}
		for _, ep := range eps {
			sec, err := s.secretsDoc(ep)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "UPDATE endpoints SET secrets = $3 WHERE tenant_id = $1 AND id = $2", ep.TenantID, ep.ID, sec); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, "INSERT INTO meta (key, value) VALUES ('secret_key_id', $1)", s.SecretKeyID())
		return err
	})
}

// maxTxAttempts bounds how often tx runs a transaction that failed on a
// deadlock or a serialization failure.
const maxTxAttempts = 5

// tx runs fn in a read-committed transaction and commits it, again from
// the start when PostgreSQL aborted it for a deadlock or a serialization
// failure. Errors come back as storeError makes them.
func (s *Store) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, s.pool, fn)
		s.noteWrite(err)
		if err == nil {
			return nil
		}
		if retryable(err) && attempt < maxTxAttempts && ctx.Err() == nil {
			continue
		}
		return storeError(err)
	}
}

// retryable reports whether err is a deadlock or a serialization
// failure: the transaction was rolled back, and running it again may
// well succeed.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// noteWrite notes what the outcome of a write (a transaction, a batch
// of ingests or records) says of the bounds above: a lock wait cut by
// lock_timeout, or a transaction the server ended as idle, is counted;
// the former blocks the node (Writable) until a write commits, or
// until no wait has been cut for longer than both bounds.
func (s *Store) noteWrite(err error) {
	if err == nil {
		if s.blockedSince.Load() != 0 {
			s.blockedSince.Store(0)
		}
		return
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return
	}
	switch pe.Code {
	case codeLockNotAvailable:
		now := time.Now().UnixNano()
		s.lockTimeouts.Add(1)
		s.lastLockTimeout.Store(now)
		s.blockedSince.CompareAndSwap(0, now)
	case codeIdleInTransactionTimeout:
		s.stalledTx.Add(1)
	}
}

// The SQLSTATEs of the bounds: a lock wait cut by lock_timeout, and a
// session ended by idle_in_transaction_session_timeout.
const (
	codeLockNotAvailable         = "55P03"
	codeIdleInTransactionTimeout = "25P03"
)

// Stalls counts what the bounds on stalled transactions did to this
// process's writes (IdleInTransactionTimeout, LockTimeout).
type Stalls struct {
	// LockTimeouts: writes that waited LockTimeout for a lock another
	// transaction held, and were given up (answered 503, or retried).
	LockTimeouts int64
	// EndedIdle: transactions of this process's that the server ended
	// because they sat idle for IdleInTransactionTimeout: this process
	// was stalled mid-transaction (a pause, a VM freeze).
	EndedIdle int64
}

// Stalls returns the counts since Open.
func (s *Store) Stalls() Stalls {
	return Stalls{LockTimeouts: s.lockTimeouts.Load(), EndedIdle: s.stalledTx.Load()}
}

// callerError carries an error of a function the caller passed in (an
// UpdateEndpoint's fn) out of a transaction, to be returned as is.
type callerError struct{ err error }

func (e *callerError) Error() string { return e.err.Error() }

// storeError returns err as the Store contract wants it: a caller's
// error or an *engine.Error as is; a database that cannot take writes
// now (unreachable, shutting down, read-only after a failover, in
// recovery) as CodeUnavailable with the cause wrapped; anything else
// wrapped with the package's name.
func storeError(err error) error {
	var ce *callerError
	if errors.As(err, &ce) {
		return ce.err
	}
	var ee *engine.Error
	if errors.As(err, &ee) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var de *dbError
	if errors.As(err, &de) {
		return err // made here already (a helper's error, out of a transaction)
	}
	if unavailable(err) {
		if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == codeLockNotAvailable {
			return engine.LockUnavailable(err)
		}
		return engine.DatabaseUnavailable(err)
	}
	return &dbError{err}
}

// dbError is an error of the database that is not the caller's: it
// names the package once, however many layers pass it on.
type dbError struct{ err error }

func (e *dbError) Error() string { return "postgres: " + e.err.Error() }
func (e *dbError) Unwrap() error { return e.err }

// unavailable reports whether err says the database is not there or not
// writable now, as opposed to a fault of the statement.
func unavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "25006", // read_only_sql_transaction: a standby, or a demoted primary
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // shutting down, starting up
			pe.Code == "53300", // too_many_connections
			// A lock another transaction held past LockTimeout, or this
			// session ended by IdleInTransactionTimeout: a stall, which
			// ends within the bound.
			pe.Code == codeLockNotAvailable, pe.Code == codeIdleInTransactionTimeout,
			len(pe.Code) == 5 && pe.Code[:2] == "08": // connection exceptions
			return true
		}
		return false
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.As(err, &ne) || errors.As(err, &ce) || pgconn.SafeToRetry(err) || errors.Is(err, net.ErrClosed) ||
		// The connection ended without a word from the server (it
		// crashed, or a failover left it behind): mid-answer, or before
		// a statement on a connection pgx closed for that.
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed)
}

// ns is t in Unix nanoseconds, or nil (NULL) for the zero time.
func ns(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	n := t.UnixNano()
	return &n
}

// fromNS is the time of n Unix nanoseconds in UTC; NULL is the zero time.
func fromNS(n *int64) time.Time {
	if n == nil {
		return time.Time{}
	}
	return time.Unix(0, *n).UTC()
}

// writableWait bounds how long Writable waits for the database.
const writableWait = 2 * time.Second

// Writable reports whether the database takes writes now: reachable
// within writableWait, and a primary (not a standby in recovery, not
// read-only). It is /readyz's probe in cluster mode. size is not used: a
// row's size does not decide whether PostgreSQL takes it.
func (s *Store) Writable(ctx context.Context, size int) error {
	ctx, cancel := context.WithTimeout(ctx, writableWait)
	defer cancel()
	var readOnly bool
	err := s.pool.QueryRow(ctx, "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::bool").Scan(&readOnly)
	if err != nil {
		return fmt.Errorf("the database is unreachable: %w", storeError(err))
	}
	if readOnly {
		return errors.New("the database is read-only (a standby, or a primary demoted by a failover)")
	}
	// Blocked: since a write's lock wait was cut, none committed, and
	// the last cut is recent: a stall older than both bounds has ended
	// (a node idle now, with no write to try, is not held blocked by it).
	if b := s.blockedSince.Load(); b != 0 && time.Since(time.Unix(0, s.lastLockTimeout.Load())) < IdleInTransactionTimeout+LockTimeout {
		return fmt.Errorf("writes here have waited past lock_timeout (%s) for a lock another transaction holds, with none committed since %s: a node stalled in a transaction, or an application's long EnqueueTx",
			LockTimeout, time.Unix(0, b).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	}
	return nil
}

// Backup returns nil: PostgreSQL has its own (pg_dump), so GET
// /v1/admin/backup answers 404 in cluster mode.
func (s *Store) Backup() io.WriterTo { return nil }

// OldestDue returns the due time of the pending delivery due first (a
// delivery a node holds is due when its lease ends), and whether there is
// one.
func (s *Store) OldestDue(ctx context.Context) (time.Time, bool, error) {
	var due *int64
	if err := s.pool.QueryRow(ctx, "SELECT min(due_at) FROM deliveries WHERE state = 'pending'").Scan(&due); err != nil {
		return time.Time{}, false, storeError(err)
	}
	return fromNS(due), due != nil, nil
}
