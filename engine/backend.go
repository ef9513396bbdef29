package engine

import (
	"context"
	"io"
	"time"
)

// Backend is a Store as a process runs it: the Store, and what the
// process asks of its database beside the engine's work (readiness, the
// overdue gauge, the key its secrets are sealed with, the hot backup,
// closing it). storage.DB, postgres.Store and memstore.Store implement
// it; main opens one (by [storage] driver) and wires it, asking nothing
// of it by type assertion. What only one driver has (the bbolt file's
// size and disk time, PostgreSQL's lease-based Scheduler and its stall
// counters) main takes from the driver's own type, where it opens it.
//
// Every method is safe for concurrent use and for calls while the engine
// works; none may be called after Close, but Close itself.
type Backend interface {
	Store

	// Writable reports whether the database takes a write of size bytes
	// now (main passes the largest ingest): nil, or why not, in words for
	// the operator (the readiness probe, /readyz, shows them). It may
	// write to find out (the bbolt file, after a failed commit, probes
	// with one of its own), and must answer within a few seconds even
	// when the database does not (unreachable is not writable).
	Writable(ctx context.Context, size int) error

	// OldestDue returns the due time of the pending delivery due first,
	// and whether any delivery is pending (ok false: none, and due is
	// zero). In a store shared by several processes a claimed delivery is
	// due when its claim's lease ends. It is one short read: a gauge asks
	// at every scrape.
	OldestDue(ctx context.Context) (due time.Time, ok bool, err error)

	// SecretKeyID returns the ID (hex) of the key endpoint secrets are
	// sealed with at rest; "": they are stored in plain, or not at rest at
	// all (memstore).
	SecretKeyID() string

	// Backup returns the hot backup of the database, which GET
	// /v1/admin/backup streams: a consistent copy, taken while ingest and
	// delivery go on, that opens as the database itself. Nil: the
	// database has its own (PostgreSQL: pg_dump), or nothing to copy
	// (memstore): the route answers 404.
	Backup() io.WriterTo

	// Close releases the database: every write it acknowledged is
	// durable, and no method may be called after it. It is safe to call
	// twice (serve defers it, then closes in its shutdown order).
	Close() error
}
