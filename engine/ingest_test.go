package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/storage"
)

// TestService_DuplicateIngestHandsOverLostDeliveries: when an ingest's
// commit reached the disk but its client saw a failure and retried with the
// same Idempotency-Key, the duplicate answer hands the still-pending
// deliveries to a dispatcher that does not hold them.
func TestService_DuplicateIngestHandsOverLostDeliveries(t *testing.T) {
	ctx := context.Background()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	open := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	// The first ingest goes through a service without a dispatcher: as if
	// its hand-over was lost.
	first := engine.NewService(db, nil, engine.ServiceOptions{Targets: open})
	if _, _, err := first.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := first.PutEventType(ctx, "invoice.paid", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := first.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/x", EventTypes: []string{"*"}}); err != nil {
		t.Fatal(err)
	}
	in := engine.IngestInput{Type: "invoice.paid", Data: json.RawMessage(`{}`), IdempotencyKey: "k1"}
	res, err := first.Ingest(ctx, "acme", in)
	if err != nil {
		t.Fatal(err)
	}

	disp := engine.NewDispatcher(db, engine.DispatcherOptions{Targets: open}) // not started: it only holds
	svc := engine.NewService(db, disp, engine.ServiceOptions{Targets: open})
	id := res.Deliveries[0].ID
	if disp.Holds(id) {
		t.Fatal("the new dispatcher holds the delivery before the retry")
	}
	dup, err := svc.Ingest(ctx, "acme", in)
	if err != nil || !dup.Duplicate {
		t.Fatalf("retry: %+v %v, want a duplicate", dup, err)
	}
	if !disp.Holds(id) {
		t.Error("the duplicate answer did not hand the pending delivery over")
	}
}
