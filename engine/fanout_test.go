package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/storage"
)

// heldFanOut is a bbolt store whose FanOut waits until release is
// closed: the moment between an acknowledgement and its fan-out, held
// open.
type heldFanOut struct {
	*storage.DB
	release chan struct{}
}

func (h heldFanOut) FanOut(ctx context.Context, max int) ([]engine.FannedOut, error) {
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.DB.FanOut(ctx, max)
}

// TestService_OwedDeliveriesCountAsPending: the deliveries of an event
// whose fan-out is owed count toward max_pending and pending_per_tenant
// (and against deleting the tenant) as the pending ones they will be,
// and once written they are the dispatcher's, and count there.
func TestService_OwedDeliveriesCountAsPending(t *testing.T) {
	ctx := context.Background()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{OwedFanOutAbove: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := heldFanOut{DB: db, release: make(chan struct{})}
	open := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	disp := engine.NewDispatcher(store, engine.DispatcherOptions{Targets: open}) // not started: it holds nothing
	svc := engine.NewService(store, disp, engine.ServiceOptions{Targets: open, MaxPending: 5, MaxPendingPerTenant: 100})
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutEventType(ctx, "invoice.paid", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/x", EventTypes: []string{"*"}}); err != nil {
			t.Fatal(err)
		}
	}
	in := engine.IngestInput{Type: "invoice.paid", Data: json.RawMessage(`{}`)}
	for i := range 2 { // 3 owed, then 6
		res, err := svc.Ingest(ctx, "acme", in)
		if err != nil {
			t.Fatalf("ingest %d: %v", i, err)
		}
		if !res.Owed {
			t.Fatalf("ingest %d: fan-out not owed (the store was opened to owe every one)", i)
		}
	}
	if got := svc.OwedDeliveries(); got != 6 {
		t.Errorf("OwedDeliveries = %d, want 6", got)
	}
	_, err = svc.Ingest(ctx, "acme", in)
	if engine.ErrorCode(err) != engine.CodeOverloaded {
		t.Errorf("third ingest with 6 deliveries owed and max_pending 5: %v, want %s", err, engine.CodeOverloaded)
	}
	if _, err := svc.DeleteTenant(ctx, "acme", false, "admin"); engine.ErrorCode(err) != engine.CodePendingDeliveries {
		t.Errorf("DeleteTenant with 6 deliveries owed: %v, want %s", err, engine.CodePendingDeliveries)
	}
	close(store.release)
	if err := svc.WaitFanOut(ctx); err != nil {
		t.Fatal(err)
	}
	if got := svc.OwedDeliveries(); got != 0 {
		t.Errorf("OwedDeliveries after the fan-out = %d, want 0", got)
	}
}

// failingFanOut is a bbolt store whose FanOut fails its first fails
// calls, as on a full disk.
type failingFanOut struct {
	*storage.DB
	mu    sync.Mutex
	fails int
}

func (f *failingFanOut) FanOut(ctx context.Context, max int) ([]engine.FannedOut, error) {
	f.mu.Lock()
	failing := f.fails > 0
	f.fails--
	f.mu.Unlock()
	if failing {
		return nil, errors.New("disk full")
	}
	return f.DB.FanOut(ctx, max)
}

// TestService_FanOutOutlastsAFailingDisk: a fan-out that fails 40 times
// (a full disk, about 18 minutes of backing off on the test's clock) is
// stored once the disk takes writes again,
// without another ingest to start it: no later ingest of a light load
// leaves a fan-out owed, so nothing else would. Before, the loop gave
// up after 30 tries and the events stayed undelivered until a restart.
func TestService_FanOutOutlastsAFailingDisk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{OwedFanOutAbove: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		store := &failingFanOut{DB: db, fails: 40} // waits of 1, 2, 4, 8, 16, then 30 s: about 18 minutes
		open := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
		svc := engine.NewService(store, nil, engine.ServiceOptions{Targets: open})
		if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.PutEventType(ctx, "invoice.paid", engine.EventTypeInput{}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/x", EventTypes: []string{"*"}}); err != nil {
			t.Fatal(err)
		}
		res, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "invoice.paid", Data: json.RawMessage(`{}`)})
		if err != nil || !res.Owed {
			t.Fatalf("ingest: owed %v, %v", res.Owed, err)
		}
		wait, cancel := context.WithTimeout(ctx, 2*time.Hour)
		defer cancel()
		if err := svc.WaitFanOut(wait); err != nil {
			t.Fatalf("the owed fan-out was not stored within two hours of a disk that failed for 18 minutes: %v", err)
		}
		if _, err := db.Delivery(ctx, "acme", res.Deliveries[0].ID); err != nil {
			t.Errorf("the delivery the 202 named: %v", err)
		}
	})
}

// TestService_OwedFanOutMeetsLaterWrites: what a client does to a
// delivery right after the 202 that named it, while its fan-out is still
// owed, finds it as a read does (settled): enabling the endpoint it was
// paused for resumes it, deleting that endpoint dead-letters it, a
// replay starts its new cycle. Before, each of them acted on the
// deliveries stored so far and missed the owed one: it stayed paused for
// an enabled endpoint with nothing to resume it, stayed paused for a
// deleted one until the janitor came, and the replay answered 404.
func TestService_OwedFanOutMeetsLaterWrites(t *testing.T) {
	type fixture struct {
		db       *storage.DB
		svc      *engine.Service
		endpoint string
		delivery string
	}
	// setup ingests an event to one endpoint, disabled first when
	// disabled, and leaves its fan-out owed; the fan-out is stored 100 ms
	// later, while the test's call waits for it.
	setup := func(t *testing.T, disabled bool) fixture {
		ctx := context.Background()
		db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{OwedFanOutAbove: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := db.Check(); err != nil {
				t.Errorf("Check: %v", err)
			}
			db.Close()
		})
		store := heldFanOut{DB: db, release: make(chan struct{})}
		open := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
		disp := engine.NewDispatcher(store, engine.DispatcherOptions{Targets: open}) // not started
		svc := engine.NewService(store, disp, engine.ServiceOptions{Targets: open})
		if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.PutEventType(ctx, "invoice.paid", engine.EventTypeInput{}); err != nil {
			t.Fatal(err)
		}
		ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/x", EventTypes: []string{"*"}})
		if err != nil {
			t.Fatal(err)
		}
		if disabled {
			if _, _, err := svc.SetEndpointEnabled(ctx, "acme", ep.ID, false, false, "test"); err != nil {
				t.Fatal(err)
			}
		}
		res, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "invoice.paid", Data: json.RawMessage(`{}`)})
		if err != nil || !res.Owed || len(res.Deliveries) != 1 {
			t.Fatalf("ingest: owed %v, %d deliveries, %v", res.Owed, len(res.Deliveries), err)
		}
		time.AfterFunc(100*time.Millisecond, func() { close(store.release) })
		t.Cleanup(func() { _ = svc.WaitFanOut(ctx) })
		return fixture{db: db, svc: svc, endpoint: ep.ID, delivery: res.Deliveries[0].ID}
	}
	stored := func(t *testing.T, f fixture) engine.Delivery {
		t.Helper()
		if err := f.svc.WaitFanOut(context.Background()); err != nil {
			t.Fatal(err)
		}
		d, err := f.db.Delivery(context.Background(), "acme", f.delivery)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	ctx := context.Background()

	t.Run("enable, deliver held", func(t *testing.T) {
		f := setup(t, true)
		_, n, err := f.svc.SetEndpointEnabled(ctx, "acme", f.endpoint, true, true, "test")
		if err != nil {
			t.Fatal(err)
		}
		if d := stored(t, f); n != 1 || d.State != engine.StatePending {
			t.Errorf("enabled with its held deliveries: %d resumed, the delivery is %s (%s); want 1, pending", n, d.State, d.Reason)
		}
	})
	t.Run("enable, drop held", func(t *testing.T) {
		f := setup(t, true)
		_, n, err := f.svc.SetEndpointEnabled(ctx, "acme", f.endpoint, true, false, "test")
		if err != nil {
			t.Fatal(err)
		}
		if d := stored(t, f); n != 1 || d.State != engine.StateDead || d.Reason != engine.ReasonHeldNotSent {
			t.Errorf("enabled dropping its held deliveries: %d dropped, the delivery is %s (%s); want 1, dead (%s)", n, d.State, d.Reason, engine.ReasonHeldNotSent)
		}
	})
	t.Run("delete the disabled endpoint", func(t *testing.T) {
		f := setup(t, true)
		if err := f.svc.DeleteEndpoint(ctx, "acme", f.endpoint); err != nil {
			t.Fatal(err)
		}
		if d := stored(t, f); d.State != engine.StateDead || d.Reason != engine.ReasonEndpointDeleted {
			t.Errorf("the delivery is %s (%s); want dead (%s)", d.State, d.Reason, engine.ReasonEndpointDeleted)
		}
	})
	t.Run("replay", func(t *testing.T) {
		f := setup(t, false)
		d, err := f.svc.Replay(ctx, "acme", f.delivery, "test")
		if err != nil {
			t.Fatalf("replay of the delivery the 202 named: %v", err)
		}
		if len(d.Replays) != 1 || stored(t, f).State != engine.StatePending {
			t.Errorf("replayed: %d replays, want 1", len(d.Replays))
		}
	})
}

// TestService_ForcedTenantDeletionForgetsItsOwedFanOuts: a tenant deleted
// with force while fan-outs of its events are owed, and purged before the
// fan-out comes, leaves nothing counted as owed: not in the bounds, not
// for the id used again, whose reads do not wait for them. Before, the
// purge deleted the plans with the events, the fan-out never reported
// them, and the service counted those deliveries as owed for good.
func TestService_ForcedTenantDeletionForgetsItsOwedFanOuts(t *testing.T) {
	ctx := context.Background()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{OwedFanOutAbove: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := heldFanOut{DB: db, release: make(chan struct{})}
	open := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	disp := engine.NewDispatcher(store, engine.DispatcherOptions{Targets: open}) // not started
	svc := engine.NewService(store, disp, engine.ServiceOptions{Targets: open})
	if _, _, err := svc.PutEventType(ctx, "invoice.paid", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	tenant := func() {
		t.Helper()
		if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/x", EventTypes: []string{"*"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tenant()
	if res, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "invoice.paid", Data: json.RawMessage(`{}`)}); err != nil || !res.Owed {
		t.Fatalf("ingest: owed %v, %v", res.Owed, err)
	}
	task, err := svc.DeleteTenant(ctx, "acme", true, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if task = pollTask(t, svc, task.ID); task.State != engine.TaskSucceeded {
		t.Fatalf("the purge: %+v", task)
	}
	close(store.release)
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := svc.WaitFanOut(wait); err != nil {
		t.Errorf("WaitFanOut after the tenant's purge: %v", err)
	}
	if got := svc.OwedDeliveries(); got != 0 {
		t.Errorf("OwedDeliveries after the tenant's deletion and purge = %d, want 0", got)
	}
	tenant()
	start := time.Now()
	if _, _, err := svc.ListDeliveries(ctx, "acme", engine.DeliveryFilter{}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a listing of the tenant made again took %v: it waited for its old owed fan-outs", took)
	}
	if err := db.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// TestService_EnableWaitsForASlowFanOut: an endpoint enabled with its
// held deliveries while the fan-out of an event acknowledged when it
// was disabled is owed longer than a read waits for it (a slow disk):
// the enabling waits for it, and resumes the delivery it plans, rather
// than returning before it is stored, which left it paused for good
// under an enabled endpoint. A context that ends first ends the wait
// with unavailable (the same request again resumes it).
func TestService_EnableWaitsForASlowFanOut(t *testing.T) {
	for _, cut := range []bool{false, true} {
		name := "waits"
		if cut {
			name = "context ends first"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{OwedFanOutAbove: -1})
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				store := heldFanOut{DB: db, release: make(chan struct{})}
				open := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
				disp := engine.NewDispatcher(store, engine.DispatcherOptions{Targets: open}) // not started
				svc := engine.NewService(store, disp, engine.ServiceOptions{Targets: open})
				if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
					t.Fatal(err)
				}
				if _, _, err := svc.PutEventType(ctx, "invoice.paid", engine.EventTypeInput{}); err != nil {
					t.Fatal(err)
				}
				ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/x", EventTypes: []string{"*"}})
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := svc.SetEndpointEnabled(ctx, "acme", ep.ID, false, false, "test"); err != nil {
					t.Fatal(err)
				}
				res, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "invoice.paid", Data: json.RawMessage(`{}`)})
				if err != nil || !res.Owed || len(res.Deliveries) != 1 {
					t.Fatalf("ingest: owed %v, %d deliveries, %v", res.Owed, len(res.Deliveries), err)
				}
				time.AfterFunc(5*time.Second, func() { close(store.release) }) // past settleBound (2 s)
				defer svc.WaitFanOut(context.Background())
				enableCtx := ctx
				if cut {
					var cancel context.CancelFunc
					enableCtx, cancel = context.WithTimeout(ctx, 3*time.Second)
					defer cancel()
				}
				_, n, err := svc.SetEndpointEnabled(enableCtx, "acme", ep.ID, true, true, "test")
				if cut {
					if engine.ErrorCode(err) != engine.CodeUnavailable {
						t.Fatalf("enabling whose context ends before the fan-out: %d resumed, %v; want unavailable", n, err)
					}
					if err := svc.WaitFanOut(ctx); err != nil {
						t.Fatal(err)
					}
					_, n, err = svc.SetEndpointEnabled(ctx, "acme", ep.ID, true, true, "test") // the same request again
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := svc.WaitFanOut(ctx); err != nil {
					t.Fatal(err)
				}
				d, err := db.Delivery(ctx, "acme", res.Deliveries[0].ID)
				if err != nil {
					t.Fatal(err)
				}
				if n != 1 || d.State != engine.StatePending {
					t.Errorf("enabled with its held deliveries: %d resumed, the delivery is %s (%s); want 1, pending", n, d.State, d.Reason)
				}
			})
		})
	}
}
