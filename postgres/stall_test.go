package postgres

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres/pgtest"
)

// TestStore_LockHeldByAStalledTransaction: an ingest that waits for a
// lock another transaction holds (here the test's, on the tenant's
// sequence lock, as a node frozen mid-ingest would) gives up after
// LockTimeout with CodeUnavailable, is counted, and makes Writable
// (/readyz) say so until a write commits again, or both bounds pass
// with no wait cut.
func TestStore_LockHeldByAStalledTransaction(t *testing.T) {
	clock := &manualClock{t: time.Now()}
	s := nodes(t, 1, clock)[0]
	ctx := t.Context()
	const tenant = "stall"
	now := clock.now()
	if _, _, err := s.PutTenant(ctx, engine.Tenant{ID: tenant, Created: now, Updated: now}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutEventType(ctx, engine.EventType{Name: "order.created", Created: now, Updated: now}); err != nil {
		t.Fatal(err)
	}
	ingest := func() error {
		ev := engine.Event{ID: engine.NewID("evt"), TenantID: tenant, Type: "order.created", Created: clock.now(), APIVersion: "1", Body: []byte(`{}`)}
		_, err := s.AppendEvent(ctx, engine.NewEvent{Event: ev})
		return err
	}

	holder, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.Background())
	// The test's stand-in for a frozen node: not ended by the bound
	// itself while the ingest waits (a loaded machine may take seconds).
	if _, err := holder.Exec(ctx, "SET LOCAL idle_in_transaction_session_timeout = 0"); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, lockSequenceSQL, tenant); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = ingest()
	if engine.ErrorCode(err) != engine.CodeUnavailable {
		t.Fatalf("an ingest behind a held sequence lock: %v, want %s", err, engine.CodeUnavailable)
	}
	if waited := time.Since(start); waited < LockTimeout {
		t.Errorf("it gave up after %s, before LockTimeout (%s)", waited, LockTimeout)
	}
	if got := s.Stalls().LockTimeouts; got == 0 {
		t.Error("the lock wait cut short was not counted")
	}
	if err := s.Writable(ctx, 0); err == nil {
		t.Error("Writable is nil while every write waits past lock_timeout")
	}
	// A node that tries no write after it (idle, or out of its balancer
	// for saying so) is not held not ready once any stall behind the cut
	// has ended: both bounds later.
	last := s.lastLockTimeout.Load()
	s.lastLockTimeout.Store(time.Unix(0, last).Add(-(IdleInTransactionTimeout + LockTimeout)).UnixNano())
	if err := s.Writable(ctx, 0); err != nil {
		t.Errorf("Writable both bounds after the last cut, with no write tried since: %v", err)
	}
	s.lastLockTimeout.Store(last)

	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ingest(); err != nil {
		t.Fatalf("an ingest after the lock went: %v", err)
	}
	if err := s.Writable(ctx, 0); err != nil {
		t.Errorf("Writable after a write committed again: %v", err)
	}
}

// TestStore_TransactionIdleTooLong: a transaction of the store's that
// sits idle past IdleInTransactionTimeout (its process frozen between
// two statements) is ended by the server, which frees its locks for the
// others at once; the store counts it and answers CodeUnavailable.
func TestStore_TransactionIdleTooLong(t *testing.T) {
	clock := &manualClock{t: time.Now()}
	s := nodes(t, 1, clock)[0]
	ctx := t.Context()
	waiter, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close(context.Background())
	if _, err := waiter.Exec(ctx, "SELECT set_config('search_path', $1, false)", pgx.Identifier{s.Schema()}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	const tenant = "stall"

	err = s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockSequenceSQL, tenant); err != nil {
			return err
		}
		// Frozen: another session waits for the lock meanwhile, and gets
		// it once the server ends this one.
		start := time.Now()
		if _, err := waiter.Exec(ctx, "SET lock_timeout = '30s'"); err != nil {
			return err
		}
		if _, err := waiter.Exec(ctx, lockSequenceSQL, tenant); err != nil {
			t.Errorf("the other session's wait: %v", err)
		}
		if waited := time.Since(start); waited > IdleInTransactionTimeout+5*time.Second {
			t.Errorf("the other session waited %s for the lock", waited)
		}
		_, err := tx.Exec(ctx, "SELECT 1")
		return err
	})
	if engine.ErrorCode(err) != engine.CodeUnavailable {
		t.Errorf("a transaction ended as idle: %v, want %s", err, engine.CodeUnavailable)
	}
	if got := s.Stalls().EndedIdle; got != 1 {
		t.Errorf("%d transactions counted as ended idle, want 1", got)
	}
}

// TestOpen_URLKeepsItsOwnBounds: a lock_timeout given in the URL is the
// one the sessions get.
func TestOpen_URLKeepsItsOwnBounds(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("lock_timeout", "5s")
	u.RawQuery = q.Encode()
	s, err := Open(t.Context(), u.String(), Options{Schema: pgtest.Schema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var lock, idle string
	if err := s.pool.QueryRow(t.Context(), "SELECT current_setting('lock_timeout'), current_setting('idle_in_transaction_session_timeout')").Scan(&lock, &idle); err != nil {
		t.Fatal(err)
	}
	if lock != "5s" || idle != "2s" {
		t.Errorf("lock_timeout %s, idle_in_transaction_session_timeout %s; want 5s (the URL's) and 2s", lock, idle)
	}
}
