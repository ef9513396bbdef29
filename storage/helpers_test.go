package storage

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// t0 is the clock of the tests: every time is t0 plus something.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// MustOpenDB opens a new database in tb.TempDir(). At cleanup it runs Check
// (bbolt's page check and the index invariants) and Close, failing the test
// on an error. A test that closes the DB itself skips the check.
func MustOpenDB(tb testing.TB) *DB {
	tb.Helper()
	return mustOpenDBAt(tb, filepath.Join(tb.TempDir(), "webhookd.db"))
}

// mustOpenDBAt is MustOpenDB on a given path.
func mustOpenDBAt(tb testing.TB, path string) *DB {
	tb.Helper()
	// Every fan-out owed, so that the tests go through FanOut; the
	// sealed conformance run (openKeyed) keeps the default.
	db, err := Open(path, Options{OwedFanOutAbove: -1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		db.closeMu.RLock()
		closed := db.closed
		db.closeMu.RUnlock()
		if !closed {
			if err := db.Check(); err != nil {
				tb.Errorf("Check at cleanup: %v", err)
			}
		}
		if err := db.Close(); err != nil {
			tb.Errorf("Close at cleanup: %v", err)
		}
	})
	return db
}

// mustCheck fails the test unless db passes Check.
func mustCheck(tb testing.TB, db *DB) {
	tb.Helper()
	if err := db.Check(); err != nil {
		tb.Fatalf("Check: %v", err)
	}
}

func mustTenant(tb testing.TB, db *DB, id string) engine.Tenant {
	tb.Helper()
	t, _, err := db.PutTenant(context.Background(), engine.Tenant{ID: id, Name: "Tenant " + id, Created: t0, Updated: t0})
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func mustEventType(tb testing.TB, db *DB, name string) {
	tb.Helper()
	if _, _, err := db.PutEventType(context.Background(), engine.EventType{Name: name, Created: t0, Updated: t0}); err != nil {
		tb.Fatal(err)
	}
}

// newEndpoint returns an endpoint of tenant subscribed to types, with a
// secret, not yet stored.
func newEndpoint(tenant string, types ...string) engine.Endpoint {
	return engine.Endpoint{
		ID: engine.NewID("ep"), TenantID: tenant, URL: "https://example.com/hook",
		EventTypes: types, Description: "test", Created: t0, Updated: t0,
		Secrets: []engine.Secret{{Key: engine.NewSecret()}},
	}
}

func mustEndpoint(tb testing.TB, db *DB, tenant string, types ...string) engine.Endpoint {
	tb.Helper()
	ep := newEndpoint(tenant, types...)
	if err := db.CreateEndpoint(context.Background(), ep, 0); err != nil {
		tb.Fatal(err)
	}
	return ep // NewID sorts in creation order: so does an endpoint listing
}

// newEvent returns an ingest of typ for tenant at t0 with body.
func newEvent(tenant, typ, body string) engine.NewEvent {
	return engine.NewEvent{
		Event: engine.Event{
			ID: engine.NewID("evt"), TenantID: tenant, Type: typ,
			Created: t0, APIVersion: "v1", Body: []byte(body),
		},
	}
}

func mustAppend(tb testing.TB, db *DB, in engine.NewEvent) engine.IngestResult {
	tb.Helper()
	res, err := db.AppendEvent(context.Background(), in)
	if err != nil {
		tb.Fatal(err)
	}
	if res.Owed {
		mustFanOut(tb, db)
	}
	return res
}

// mustFanOut stores every owed fan-out, as the service does after an
// ingest.
func mustFanOut(tb testing.TB, db *DB) []engine.FannedOut {
	tb.Helper()
	var all []engine.FannedOut
	for {
		done, err := db.FanOut(context.Background(), 100)
		if err != nil {
			tb.Fatal(err)
		}
		if len(done) == 0 {
			return all
		}
		all = append(all, done...)
	}
}

// mustDelivery ingests one order.created event for tenant and returns its
// one delivery. The tenant gets one endpoint (subscribed to the type) on
// first use and must have no other.
func mustDelivery(tb testing.TB, db *DB, tenant string) engine.Delivery {
	tb.Helper()
	mustEventType(tb, db, "order.created")
	eps, err := db.Endpoints(context.Background(), tenant)
	if err != nil {
		tb.Fatal(err)
	}
	if len(eps) == 0 {
		mustEndpoint(tb, db, tenant, "order.created")
	}
	res := mustAppend(tb, db, newEvent(tenant, "order.created", `{"n":1}`))
	if len(res.Deliveries) != 1 {
		tb.Fatalf("ingest made %d deliveries, want 1", len(res.Deliveries))
	}
	return res.Deliveries[0]
}

// countKeys returns the number of keys in bucket.
func countKeys(tb testing.TB, db *DB, bucket []byte) int {
	tb.Helper()
	n := 0
	err := db.bolt.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucket).Stats().KeyN
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// retryEntries returns the whole retry index.
func retryEntries(tb testing.TB, db *DB) []engine.RetryEntry {
	tb.Helper()
	var out []engine.RetryEntry
	err := db.RetryIndex(context.Background(), func(e engine.RetryEntry) error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// wantCode fails the test unless err is an *engine.Error with code and
// field.
func wantCode(tb testing.TB, err error, code engine.Code, field string) *engine.Error {
	tb.Helper()
	var e *engine.Error
	if !errors.As(err, &e) {
		tb.Fatalf("error = %v, want an *engine.Error with code %s", err, code)
	}
	if e.Code != code || e.Field != field {
		tb.Fatalf("error = %v (code %q, field %q), want code %q, field %q", err, e.Code, e.Field, code, field)
	}
	return e
}

// blockCommits holds the commit loop inside a transaction of its own until
// release is called, so that the writes queued meanwhile form one batch.
// release returns the blocking write's error.
func blockCommits(tb testing.TB, db *DB) (release func() error) {
	tb.Helper()
	started := make(chan struct{})
	unblock := make(chan struct{})
	done := make(chan error, 1)
	var once sync.Once
	go func() {
		done <- db.update(context.Background(), func(*bolt.Tx) error {
			once.Do(func() { close(started) })
			<-unblock
			return nil
		})
	}()
	<-started
	var rel sync.Once
	var err error
	return func() error {
		rel.Do(func() {
			close(unblock)
			err = <-done
		})
		return err
	}
}

// waitQueued waits, in a synctest bubble, until every goroutine is
// blocked, and then requires at least n writes queued for the commit loop:
// the writers the test started have queued all they will.
func waitQueued(tb testing.TB, db *DB, n int) {
	tb.Helper()
	synctest.Wait()
	if got := len(db.ops) + len(db.acks); got < n {
		tb.Fatalf("%d writes queued once every goroutine waits, want %d", got, n)
	}
}

// recordAttempt stores rec as the dispatcher does: the engine's transition
// for it (PauseDelivery for a StatePaused record, RecordAttempt otherwise)
// through UpdateDelivery, then rec.Endpoint's health merged into the
// endpoint.
func recordAttempt(ctx context.Context, db *DB, rec engine.AttemptRecord) (engine.Delivery, error) {
	d, err := db.UpdateDelivery(ctx, rec.DeliveryID, func(d engine.Delivery) (engine.Delivery, error) {
		if rec.State == engine.StatePaused {
			return engine.PauseDelivery(d, rec.Cycle, rec.At), nil
		}
		return engine.RecordAttempt(d, rec), nil
	})
	if err != nil || rec.Endpoint == nil {
		return d, err
	}
	h := *rec.Endpoint
	_, err = db.UpdateEndpoint(ctx, h.TenantID, h.ID, func(ep *engine.Endpoint) error {
		*ep = engine.MergeHealth(*ep, h)
		return nil
	})
	if engine.ErrorCode(err) == engine.CodeEndpointNotFound {
		err = nil
	}
	return d, err
}

// replay stores delivery id of tenant replayed, as the service does.
func replay(ctx context.Context, db *DB, tenant, id string, r engine.Replay) (engine.Delivery, error) {
	return db.UpdateDelivery(ctx, id, func(d engine.Delivery) (engine.Delivery, error) {
		if d.TenantID != tenant {
			return engine.Delivery{}, engine.Errorf(engine.CodeDeliveryNotFound, "id", "no such delivery")
		}
		return engine.ReplayDelivery(d, r, ""), nil
	})
}

// resumePaused resumes at most max paused deliveries of an endpoint, as
// enabling it does: replayed with deliver, dead without.
func resumePaused(ctx context.Context, db *DB, tenant, endpointID string, deliver bool, r engine.Replay, max int) ([]engine.Delivery, error) {
	sel := engine.Selection{Tenant: tenant, State: engine.StatePaused, EndpointID: endpointID}
	return db.UpdateDeliveries(ctx, sel, max, func(d engine.Delivery) engine.Delivery {
		if deliver {
			return engine.ReplayDelivery(d, r, "")
		}
		return engine.DropHeldDelivery(d, r.At)
	})
}

// replayDeadLetters replays at most max dead letters that died in
// [since, until), as a range replay does.
func replayDeadLetters(ctx context.Context, db *DB, tenant string, since, until time.Time, endpointID string, r engine.Replay, max int) ([]engine.Delivery, error) {
	sel := engine.Selection{Tenant: tenant, State: engine.StateDead, EndpointID: endpointID, Since: since, Until: until}
	return db.UpdateDeliveries(ctx, sel, max, func(d engine.Delivery) engine.Delivery { return engine.ReplayDelivery(d, r, "") })
}
