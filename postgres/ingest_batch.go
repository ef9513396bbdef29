package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Ingests of several clients, many in one round trip and commit.
//
// appendCached's write is two statements (the tenant's lock, the
// insert) in one implicit transaction. Under load many wait at once;
// as the holders' records do (records_batch.go), they queue, and
// whoever finds fewer than maxIngestBatches writes running takes all
// that wait into one batch: one implicit transaction, one lock per
// tenant, one insert per event, one round trip, one commit. If any
// statement of it fails, all of it rolls back and each of its writes
// runs again alone, so that the one that failed fails alone (an
// ingest_fallback, a key in use) and the others are written.

// maxIngestBatches bounds the ingest writes one node runs at once. One:
// the more a write carries, the fewer commits the server makes for the
// same events, and with several nodes each node's share of the load is
// smaller (docs/performance.md, "Cluster: the CPU"). What a write waits
// for (a tenant's deletion, a key another transaction holds), every
// ingest of this node behind it waits for too.
const maxIngestBatches = 1

// maxIngestBatch bounds the events of one write.
const maxIngestBatch = 64

// groupTimeout bounds one group's round trip: it is no one caller's,
// so no caller's context cuts it.
const groupTimeout = 30 * time.Second

// cachedWrite is one appendCached write: sql with args, whose one row
// is the event's seq and sequence.
type cachedWrite struct {
	tenant string
	sql    string
	args   []any

	alone bool // its group failed: it is to run again by itself
	at    written
	err   error
}

// written is where a write put its event: its place in the log and its
// tenant's sequence.
type written struct{ seq, sequence int64 }

// writeCached runs w with the writes waiting beside it (the store's
// ingests queue) and returns its seq and sequence.
func (s *Store) writeCached(ctx context.Context, w *cachedWrite) (int64, int64, error) {
	s.ingests.do(w, func(group []*cachedWrite) {
		at, err := s.writeGroup(ctx, group)
		s.noteWrite(err)
		if err != nil && len(group) > 1 {
			s.groupSplits.Add(1)
		}
		for i, g := range group {
			switch {
			case err == nil:
				g.at = at[i]
			case len(group) == 1:
				g.err = err
			default:
				g.alone = true
			}
		}
	})
	if w.alone {
		at, err := s.writeGroup(ctx, []*cachedWrite{w})
		s.noteWrite(err)
		if err != nil {
			return 0, 0, err
		}
		w.at = at[0]
	}
	return w.at.seq, w.at.sequence, w.err
}

// writeGroup runs the writes of group in one implicit transaction and
// returns where each put its event. A group of one is its caller's (cut
// by its ctx); a larger one is no one's. The tenants' locks come first,
// in tenant order, so two groups do not wait for each other's (but
// where two tenants' lock keys collide (locks.go): PostgreSQL's deadlock
// check then fails one group, whose writes run again one by one).
func (s *Store) writeGroup(ctx context.Context, group []*cachedWrite) ([]written, error) {
	if len(group) > 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), groupTimeout)
		defer cancel()
	}
	tenants := make([]string, 0, 1)
	for _, w := range group {
		if !slices.Contains(tenants, w.tenant) {
			tenants = append(tenants, w.tenant)
		}
	}
	slices.Sort(tenants)
	b := &pgx.Batch{}
	for _, t := range tenants {
		b.Queue(lockIngestSQL, t)
	}
	for _, w := range group {
		b.Queue(w.sql, w.args...)
	}
	at := make([]written, len(group))
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	for range tenants {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	for i := range group {
		if err := br.QueryRow().Scan(&at[i].seq, &at[i].sequence); err != nil {
			return nil, err
		}
	}
	return at, br.Close()
}
