package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/storetest"
	"github.com/webhookd/webhookd/postgres/pgtest"
)

// suiteEpoch is storetest's clock (its t0) plus an hour: the store under
// the suite reads its clock as this at the start of each subtest, so
// that the suite's deliveries (due at t0 and just after) are due, as
// they are for LocalScheduler through Recover's dueAt.
var suiteEpoch = time.Date(2030, 1, 2, 4, 4, 5, 123456789, time.UTC)

// openTest opens a store on a schema of t's own, closed when t ends.
func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	url := pgtest.URL(t)
	opts.Schema = pgtest.Schema(t)
	if opts.MaxConns == 0 {
		opts.MaxConns = 4
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, url, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformance runs engine.Backend's conformance suite on a schema per
// subtest, with the leased Scheduler, once with secrets in plain and once
// sealed with a key.
func TestConformance(t *testing.T) {
	pgtest.URL(t)
	for _, tc := range []struct {
		name string
		key  []byte
	}{
		{"plain", nil},
		{"sealed", make([]byte, 32)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			scheds := map[*Store][]*Scheduler{}
			storetest.Run(t, storetest.Harness{
				Check: func(t *testing.T, s engine.Store) { checkLines(t, s.(*Store)) },
				Open: func(t *testing.T) engine.Backend {
					start := time.Now()
					s := openTest(t, Options{SecretKey: tc.key, Now: func() time.Time { return suiteEpoch.Add(time.Since(start)) }})
					t.Cleanup(func() {
						mu.Lock()
						defer mu.Unlock()
						for _, c := range scheds[s] {
							c.Close()
						}
					})
					return s
				},
				Purge: func(ctx context.Context, s engine.Store) error {
					for {
						res, err := s.PurgeDeletedTenants(ctx, "", 0)
						if err != nil || res.Tenant == "" {
							return err
						}
					}
				},
				Scheduler: func(s engine.Store) engine.Scheduler {
					c := s.(*Store).Scheduler(SchedulerOptions{Poll: 50 * time.Millisecond})
					mu.Lock()
					scheds[s.(*Store)] = append(scheds[s.(*Store)], c)
					mu.Unlock()
					return c
				},
				EndLeases: func(sched engine.Scheduler) {
					c := sched.(*Scheduler)
					if _, err := c.s.pool.Exec(context.Background(), `UPDATE deliveries SET lease_until = $1, due_at = next_attempt_at
						WHERE lease_token IS NOT NULL AND state = 'pending'`, c.s.now().UnixNano()); err != nil {
						panic(err)
					}
				},
			})
		})
	}
}

// checkLines fails t unless the rows of s's deliveries agree with their
// documents (state, line, sequence, blocking; no waiting_behind stored)
// and every line with a waiting member has a head: what the store keeps
// by construction (lines.go), checked from the rows.
func checkLines(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	rows, err := s.pool.Query(ctx, `SELECT d.id, d.state, d.line, d.sequence, d.blocking, d.due_at IS NOT NULL, d.doc,
		d.state = 'waiting' AND NOT EXISTS (SELECT 1 FROM deliveries h WHERE h.endpoint_id = d.endpoint_id AND h.line = d.line AND `+isHeadSQL("h")+`)
		FROM deliveries d`)
	if err != nil {
		t.Errorf("check lines: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var id, state, line string
		var sequence int64
		var blocking, due, headless bool
		var doc []byte
		if err := rows.Scan(&id, &state, &line, &sequence, &blocking, &due, &doc, &headless); err != nil {
			t.Errorf("check lines: %v", err)
			return
		}
		d, err := decodeDelivery(doc)
		if err != nil {
			t.Errorf("delivery %s: %v", id, err)
			continue
		}
		if string(d.State) != state || d.Line != line || lineSequence(d) != sequence || d.Blocking() != blocking || d.WaitingBehind != "" {
			t.Errorf("delivery %s: row (%s, line %q, sequence %d, blocking %v) is not its document's (%s, %q, %d, %v, waiting behind %q)",
				id, state, line, sequence, blocking, d.State, d.Line, d.Sequence, d.Blocking(), d.WaitingBehind)
		}
		if headless || state == string(engine.StateWaiting) && (due || line == "") {
			t.Errorf("delivery %s: waiting in line %q (due %v) of a line without a head (%v)", id, line, due, headless)
		}
	}
	if err := rows.Err(); err != nil {
		t.Errorf("check lines: %v", err)
	}
}
