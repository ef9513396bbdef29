package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/sealing"
)

// Options configure Open. The zero value of each field means the default
// named on it.
type Options struct {
	// LockTimeout is how long Open waits for the file lock that keeps a
	// second process off the file before it gives up with ErrInUse.
	// Zero (or negative) means 1s; there is no way to wait forever.
	LockTimeout time.Duration

	// MaxBatch is the most writes one commit carries. Zero means 1000.
	MaxBatch int

	// OnCommit, when set, is called after every successful commit with
	// the number of writes it carried and its duration, fsync included
	// (for metrics). It runs on the commit loop: it must be fast.
	OnCommit func(writes int, d time.Duration)

	// ObserveCommit, when set, is told of every transaction of the
	// commit loop, committed or failed, after its writers are answered
	// (main traces each as a span). It runs on the commit loop: it must
	// be fast and must not block, or every write waits for it.
	ObserveCommit func(Commit)
	// OwedFanOutAbove is how many ingests a commit acknowledges before it
	// leaves their fan-outs owed (fanout.go): a commit with more writes
	// each event and the plan of its deliveries, one with fewer the
	// deliveries too. Zero means 16; negative: every fan-out is owed.
	OwedFanOutAbove int

	// SecretKey, when set, is the AES-256 key (SecretKeySize bytes) that
	// endpoint secrets are encrypted with at rest (see crypt.go). Nil:
	// secrets are stored in plain, and a file whose secrets are encrypted
	// does not open (ErrSecretKeyRequired). Open never logs or returns it.
	SecretKey []byte
}

const (
	defaultLockTimeout = time.Second
	defaultMaxBatch    = 1000
)

// ErrInUse is returned (wrapped) by Open when another process holds the
// file. Two processes writing one bbolt file would corrupt it.
var ErrInUse = errors.New("the database is in use by another webhookd process")

// ErrClosed is the cause (wrapped in a CodeUnavailable *engine.Error) of a
// write made after Close.
var ErrClosed = errors.New("database closed")

// DB is webhookd's durable state in one bbolt file. It implements
// engine.Backend. All its methods are safe for concurrent use.
//
// Every write goes through one commit loop that runs concurrent writes in
// a shared transaction (group commit); every read is a bbolt read
// transaction of its own. See the package documentation.
type DB struct {
	path             string
	bolt             *bolt.DB
	maxBatch         int
	onCommit         func(int, time.Duration)
	observeCommit    func(Commit)
	secrets          *sealing.Sealer // Options.SecretKey; nil: secrets stored in plain
	attemptEndpoints endpointCache   // the endpoints AttemptInput decoded
	attemptBodies    bodyCache       // the event bodies AttemptInput read
	fanOut           fanOut          // ingest's: the endpoints it decoded, secrets as stored (not opened)
	batchAcks        int             // acknowledged writes (acks) in the batch being committed; the commit loop's alone
	owedAbove        int             // Options.OwedFanOutAbove, resolved

	// closeMu guards closed and the send on ops: Close closes ops only
	// when no writer is sending.
	closeMu sync.RWMutex
	closed  bool
	ops     chan op       // writes for the commit loop
	acks    chan op       // writes a client's acknowledgement waits for (ingest): committed first, see run
	fanOuts chan op       // FanOut's writes: each rides the next commit, behind no outcome (see run)
	done    chan struct{} // closed when the commit loop has returned

	commits     atomic.Uint64
	committed   atomic.Uint64
	failures    atomic.Uint64
	commitNanos atomic.Int64

	writeFailure atomic.Pointer[error] // the last failed commit's error, until a write probe succeeds (Writable)
	probe        writeProbe            // see Writable
}

var _ engine.Backend = (*DB)(nil)

// Open opens (creating if need be) the database file at path. It creates
// the parent directory (0700) and the file (0600) if they are missing, and
// every bucket in one transaction. Every commit is fsynced.
//
// Only one process may have the file open: when another holds it, Open
// fails after opts.LockTimeout with an error wrapping ErrInUse. A file
// written by a newer webhookd (a higher schema version) is refused.
func Open(path string, opts Options) (*DB, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = defaultLockTimeout
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = defaultMaxBatch
	}
	switch {
	case opts.OwedFanOutAbove == 0:
		opts.OwedFanOutAbove = defaultOwedFanOutAbove
	case opts.OwedFanOutAbove < 0:
		opts.OwedFanOutAbove = 0
	}
	secrets, err := sealing.New(opts.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	bdb, err := openBolt(path, &bolt.Options{ // see offline.go: the file may be replaced while Open waits for its lock
		Timeout: opts.LockTimeout,
		NoSync:  false, // IMPORTANT: a nil error from a write means it is on disk
		// The array freelist: every commit writes the whole freelist
		// (its sync is on, so that open need not scan the file), which
		// the map freelist first sorts, O(n log n) in the free pages and
		// about 2% of dispatch's CPU; the array keeps its ids sorted and
		// merges, O(n). Its one linear step the map avoids, finding a
		// run of pages for a value over a page, costs no more than the
		// write every commit already pays.
		FreelistType: bolt.FreelistArrayType,
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("storage: open %s: %w (lock not acquired within %s)", path, ErrInUse, opts.LockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		if err := initSchema(tx); err != nil {
			return err
		}
		return initSecrets(tx, secrets)
	}); err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	if err := finishFanOuts(bdb); err != nil { // recovery: see fanout.go
		_ = bdb.Close()
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	db := &DB{
		path:          path,
		bolt:          bdb,
		maxBatch:      opts.MaxBatch,
		owedAbove:     opts.OwedFanOutAbove,
		onCommit:      opts.OnCommit,
		observeCommit: opts.ObserveCommit,
		secrets:       secrets,
		ops:           make(chan op, opts.MaxBatch),
		acks:          make(chan op, opts.MaxBatch),
		fanOuts:       make(chan op, 1),
		done:          make(chan struct{}),
	}
	go db.run()
	return db, nil
}

// initSchema checks the schema version of the file, refusing a newer one,
// creates every bucket that is missing, and migrates an older file forward:
// all in Open's one transaction, so a failed migration leaves the file as
// it was.
func initSchema(tx *bolt.Tx) error {
	current := uint64(schemaVersion) // a new file is written at the current version
	if meta := tx.Bucket(bucketMeta); meta != nil {
		if v := meta.Get(keySchema); v != nil {
			if len(v) != 8 {
				return fmt.Errorf("malformed schema version (%d bytes); is this a webhookd database?", len(v))
			}
			current = binary.BigEndian.Uint64(v)
			if current > schemaVersion {
				return fmt.Errorf("schema version %d is newer than this webhookd understands (%d); run a newer webhookd or restore a backup", current, schemaVersion)
			}
		}
	}
	for _, name := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	for v := current; v < schemaVersion; v++ {
		m := migrations[v]
		if m == nil {
			return fmt.Errorf("no migration from schema version %d", v)
		}
		if err := m(tx); err != nil {
			return fmt.Errorf("migrate schema %d to %d: %w", v, v+1, err)
		}
	}
	return tx.Bucket(bucketMeta).Put(keySchema, u64(schemaVersion))
}

// migrations[v] moves a file from schema version v to v+1. It runs inside
// Open's transaction after the missing buckets are created. A change of
// layout bumps schemaVersion and adds its migration here; a file is never
// read in an older layout.
var migrations = map[uint64]func(*bolt.Tx) error{}

// Path returns the path of the database file, as given to Open.
func (db *DB) Path() string { return db.path }

// Close waits for the writes already queued to commit, stops the commit
// loop and closes the file. Writes after Close fail with ErrClosed. Close
// is safe to call more than once; later calls return nil.
func (db *DB) Close() error {
	db.closeMu.Lock()
	if db.closed {
		db.closeMu.Unlock()
		return nil
	}
	db.closed = true
	close(db.ops)
	close(db.acks)
	close(db.fanOuts)
	db.closeMu.Unlock()

	<-db.done
	if err := db.bolt.Close(); err != nil {
		return fmt.Errorf("storage: close %s: %w", db.path, err)
	}
	return nil
}

// Stats are counters of the commit loop, for benchmarks and metrics.
type Stats struct {
	Commits    uint64        // transactions committed
	Ops        uint64        // writes committed; Ops/Commits is the mean batch size
	Failures   uint64        // commits that failed (their writes got CodeUnavailable)
	CommitTime time.Duration // total time of committed transactions, fsync included

	// Of every write transaction bbolt ran (the commit loop's, failed ones
	// and Open's included): the pages written, and the time spent writing
	// them and syncing the file, part of CommitTime. The rest of a commit
	// is CPU: the writes' own work and bbolt's rebalance and spill.
	PagesWritten int64
	WriteTime    time.Duration
}

// Stats returns the commit loop's counters since Open.
func (db *DB) Stats() Stats {
	s := Stats{
		Commits:    db.commits.Load(),
		Ops:        db.committed.Load(),
		Failures:   db.failures.Load(),
		CommitTime: time.Duration(db.commitNanos.Load()),
	}
	tx := db.bolt.Stats().TxStats
	s.PagesWritten, s.WriteTime = tx.GetWrite(), tx.GetWriteTime()
	return s
}

// Commit is one transaction of the commit loop, as Options.ObserveCommit
// is told of it.
type Commit struct {
	Start    time.Time     // when its first run began
	Duration time.Duration // from Start to its end, every run and the fsync included
	Writes   int           // the writes it committed (or, failed, that it tried to)
	Refused  int           // writes that failed on their own and were left out of it (each was answered its error)
	Runs     int           // times the transaction ran: one, and one more for each write left out
	// WriteSync is the time its last run spent writing pages and
	// fsyncing the file (bbolt's write and sync; part of Duration).
	WriteSync time.Duration
	Pages     int   // pages its last run wrote
	Err       error // nil, or why it failed (every write was answered CodeUnavailable)
}

// op is one write waiting for the commit loop.
//
// IMPORTANT: fn may run more than once, in transactions that are rolled
// back, before the one that commits: when another write in its batch fails,
// the batch is run again without that write. fn must therefore assign its
// results rather than accumulate them, and must not block, do I/O or call
// the DB.
type op struct {
	ctx    context.Context
	fn     func(*bolt.Tx) error
	result chan error // buffered; receives exactly one value
}

// update runs fn in a write transaction shared with other concurrent
// writes and returns once that transaction is committed and fsynced (nil),
// or fn failed (fn's error; nothing of fn is written), or the commit
// failed (a CodeUnavailable *engine.Error).
//
// ctx is respected until the write's transaction begins; after that the
// write's outcome is returned even if ctx has ended.
func (db *DB) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	return db.enqueue(ctx, db.ops, fn)
}

// updateAck is update for a write that a client's acknowledgement waits
// for (an ingest): the commit loop takes these first (see run).
func (db *DB) updateAck(ctx context.Context, fn func(*bolt.Tx) error) error {
	return db.enqueue(ctx, db.acks, fn)
}

// enqueue is update on the queue q.
func (db *DB) enqueue(ctx context.Context, q chan<- op, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := op{ctx: ctx, fn: fn, result: make(chan error, 1)}
	db.closeMu.RLock()
	if db.closed {
		db.closeMu.RUnlock()
		return engine.StorageClosed(ErrClosed)
	}
	select {
	case q <- o:
		db.closeMu.RUnlock()
	case <-ctx.Done():
		db.closeMu.RUnlock()
		return ctx.Err()
	}
	return <-o.result
}

// run is the commit loop. It takes the first queued write, drains what
// else is queued right now (up to maxBatch), commits them all in one
// transaction and answers each. It returns when Close has closed the
// queues and everything queued is answered.
//
// Writes that a client's acknowledgement waits for (acks: ingest) go
// first: a batch takes every one queued, and while there are any, at most
// besideAcks other writes (attempt outcomes, mostly) ride with them. An
// outcome can wait a few milliseconds; an application's request cannot,
// and the fewer writes its commit carries, the sooner it is answered. The
// outcomes that wait hold their workers back (the dispatcher's
// backpressure), which leaves the CPU to ingest while it is busy.
//
// A FanOut's write (fanOuts) rides the next commit whatever is queued:
// the deliveries of acknowledged events must not wait behind the
// outcomes queued before them (in `sustained` they waited for seconds);
// FanOut sizes itself by the acknowledgements it rides with.
func (db *DB) run() {
	defer close(db.done)
	batch := make([]op, 0, db.maxBatch)
	ops, acks, fanOuts := db.ops, db.acks, db.fanOuts // nil once closed and drained
	for ops != nil || acks != nil || fanOuts != nil {
		// Wait for the first write of any queue; whichever it is, the
		// acks and the fan-out queued are drained next.
		nacks := 0
		select {
		case o, ok := <-acks:
			if !ok {
				acks = nil
				continue
			}
			batch, nacks = append(batch[:0], o), 1
		case o, ok := <-fanOuts:
			if !ok {
				fanOuts = nil
				continue
			}
			batch = append(batch[:0], o)
		case o, ok := <-ops:
			if !ok {
				ops = nil
				continue
			}
			batch = append(batch[:0], o)
		}
		n := len(batch)
		batch = drainQueue(batch, &acks, db.maxBatch)
		nacks += len(batch) - n
		batch = drainQueue(batch, &fanOuts, db.maxBatch)
		limit := db.maxBatch
		if nacks > 0 {
			limit = min(db.maxBatch, nacks+besideAcks)
		}
		batch = drainQueue(batch, &ops, limit)
		db.batchAcks = nacks
		db.commit(batch)
		clear(batch) // let the answered ops' closures be collected
		// The writers just answered are runnable on this goroutine's P.
		// Yield it to them before the next commit blocks this thread in
		// fsync: otherwise they wait for the scheduler to take the P back
		// from the syscall (about 2ms each in the bench's trace), and
		// fewer of them are back in time to share the next commit.
		runtime.Gosched()
	}
}

// drainQueue appends to batch the writes *q holds right now, until batch
// has limit; once *q is closed and empty it sets *q to nil.
func drainQueue(batch []op, q *chan op, limit int) []op {
	for *q != nil && len(batch) < limit {
		select {
		case o, ok := <-*q:
			if !ok {
				*q = nil
				return batch
			}
			batch = append(batch, o)
		default:
			return batch
		}
	}
	return batch
}

// besideAcks is how many other writes a commit carrying acknowledged
// writes (ingest) takes along; see run.
const besideAcks = 16

// commit runs batch in one write transaction and answers every op. An op
// whose ctx has ended is answered with ctx's error without running. An op
// that fails is taken out and the transaction is run again without it, so
// one bad write does not fail the others. A failed commit fails every op
// with CodeUnavailable.
func (db *DB) commit(batch []op) {
	live := make([]op, 0, len(batch))
	for _, o := range batch {
		if err := o.ctx.Err(); err != nil {
			o.result <- err
			continue
		}
		live = append(live, o)
	}
	var failed []op
	var failedErrs []error
	var observed Commit // for observeCommit
	for len(live) > 0 {
		failIdx := -1
		var failErr error
		start := time.Now()
		if observed.Runs == 0 {
			observed.Start = start
		}
		observed.Runs++
		var ran *bolt.Tx
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			ran = tx
			fillPages(tx)
			for i, o := range live {
				if err := safeCall(o.fn, tx); err != nil {
					failIdx, failErr = i, err
					return err
				}
			}
			return nil
		})
		if failIdx >= 0 {
			failed = append(failed, live[failIdx])
			failedErrs = append(failedErrs, failErr)
			live = append(live[:failIdx], live[failIdx+1:]...)
			continue
		}
		if ran != nil {
			st := ran.Stats() // kept by the transaction after it ends
			observed.WriteSync, observed.Pages = st.GetWriteTime(), int(st.GetWrite())
		}
		observed.Writes, observed.Err, observed.Duration = len(live), err, time.Since(observed.Start)
		if err != nil {
			db.failures.Add(1)
			var uerr error = engine.CommitFailed(fmt.Errorf("storage: commit: %w", err))
			db.writeFailure.Store(&uerr)
			for _, o := range live {
				o.result <- uerr
			}
			// The failed ops' errors were decided against writes that were
			// never committed: they too may succeed when retried.
			for _, o := range failed {
				o.result <- uerr
			}
			db.observe(&observed, len(failed))
			return
		}
		db.commits.Add(1)
		db.committed.Add(uint64(len(live)))
		took := time.Since(start)
		db.commitNanos.Add(int64(took))
		if db.onCommit != nil {
			db.onCommit(len(live), took)
		}
		for _, o := range live {
			o.result <- nil
		}
		break
	}
	for i, o := range failed {
		o.result <- failedErrs[i]
	}
	db.observe(&observed, len(failed))
}

// observe tells Options.ObserveCommit of c, a transaction that ran (not
// one whose writes all ended before it began) and left refused writes
// out.
func (db *DB) observe(c *Commit, refused int) {
	if db.observeCommit == nil || c.Runs == 0 {
		return
	}
	if c.Writes == 0 { // every write failed on its own: nothing committed
		c.Duration = time.Since(c.Start)
	}
	c.Refused = refused
	db.observeCommit(*c)
}

// fillPercents are how full bbolt fills a page of these buckets when it
// splits a node (its default, 0.5, suits keys inserted anywhere). Their
// keys grow with time: an ID made by engine.NewID, a log position, a due
// or expiry time, each after a tenant or an endpoint. New keys land at the
// end, or at a tenant's end, so a half-full page stays half full. Filled
// pages cut the pages a commit writes and the file's size by a quarter to
// two fifths in the benches (docs/performance.md, "filled pages"). Where a key is also written in
// the middle (a delivery's record grows with
// each attempt; a retry is due later than the deliveries made since) a
// tenth is left free, so one insert does not split a full page.
var fillPercents = []struct {
	bucket []byte
	fill   float64
}{
	{bucketEvents, 1}, {bucketEventIDs, 1}, {bucketFanOuts, 1}, // one sequence over all tenants
	{bucketTenantEvents, 0.9}, {bucketTenantDeliveries, 0.9}, {bucketIdempotencyIndex, 0.9},
	{bucketDeliveries, 0.9}, {bucketRetryIndex, 0.9},
}

// fillPages sets the fillPercents of write transaction tx's buckets; a
// bucket's FillPercent lasts for its transaction only.
func fillPages(tx *bolt.Tx) {
	for _, f := range fillPercents {
		if b := tx.Bucket(f.bucket); b != nil {
			b.FillPercent = f.fill
		}
	}
}

// safeCall calls fn, turning a panic into an error so that one bad write
// neither kills the commit loop nor fails the other writes of its batch.
func safeCall(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("storage: write panicked: %v", p)
		}
	}()
	return fn(tx)
}

// view runs fn in a read transaction.
func (db *DB) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return db.bolt.View(fn)
}

// wrap adds context to err unless it is (or wraps) an *engine.Error, which
// is returned as is so that callers see the domain error directly.
func wrap(what string, err error) error {
	var e *engine.Error
	if errors.As(err, &e) {
		return err
	}
	return fmt.Errorf("storage: %s: %w", what, err)
}

// Backup returns db: its hot backup is WriteTo.
func (db *DB) Backup() io.WriterTo { return db }

// WriteTo writes a consistent copy of the whole database to w while writes
// go on. The copy is a bbolt file that Open accepts.
//
// The copy is first taken into a temporary file in the database's
// directory, from one read transaction, at the speed of the disk; only
// then is that file written to w. IMPORTANT: a read transaction must never
// last as long as a client takes to read: bbolt remaps the file when it
// grows past its memory map, and the remap waits for every read
// transaction, with every commit (so every ingest) waiting behind it.
//
// The temporary file needs free space for one more copy of the database
// while WriteTo runs: with less free than the file's size plus
// backupHeadroom, WriteTo writes nothing and fails with CodeUnavailable. It
// is unlinked as soon as it is created (where the system allows that of an
// open file), so it never outlives WriteTo, not even a crash.
func (db *DB) WriteTo(w io.Writer) (int64, error) {
	dir := filepath.Dir(db.path)
	if fi, err := os.Stat(db.path); err == nil {
		need := uint64(fi.Size()) + backupHeadroom
		if free, ok := freeSpace(dir); ok && free < need {
			return 0, engine.NoSpaceForBackup(free, need, backupHeadroom)
		}
	}
	f, err := os.CreateTemp(dir, ".webhookd-backup-*")
	if err != nil {
		return 0, fmt.Errorf("storage: backup: %w", err)
	}
	unlinked := os.Remove(f.Name()) == nil
	defer func() {
		f.Close()
		if !unlinked {
			os.Remove(f.Name())
		}
	}()
	err = db.bolt.View(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(f)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("storage: backup: copy: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("storage: backup: %w", err)
	}
	n, err := io.Copy(w, f)
	if err != nil {
		return n, fmt.Errorf("storage: backup: %w", err)
	}
	return n, nil
}

// backupHeadroom is the free space WriteTo leaves beside the database for
// the writes that go on while it copies.
const backupHeadroom = 64 << 20

// maxCheckErrors bounds the errors Check reports.
const maxCheckErrors = 100

// Check reports whether the file is sound: bbolt's page check (tx.Check)
// and webhookd's own invariants (a delivery is in the retry index iff it is
// pending, under its NextAttemptAt; in the dead letters iff it is dead;
// every index entry points at a matching record). It returns nil or the
// problems found, joined (at most 100). It reads the whole file in one read
// transaction.
func (db *DB) Check() error {
	var errs []error
	err := db.bolt.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			if len(errs) < maxCheckErrors {
				errs = append(errs, fmt.Errorf("storage: check: %w", err))
			}
		}
		if len(errs) == 0 {
			errs = checkInvariants(tx)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: check: %w", err)
	}
	return errors.Join(errs...)
}
