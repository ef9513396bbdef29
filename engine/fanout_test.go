package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

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
