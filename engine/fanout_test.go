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
