package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

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
	// A dispatcher started (its recovery done) before that ingest: it
	// learns of the delivery only if someone hands it over.
	disp := engine.NewDispatcher(db, engine.DispatcherOptions{Targets: open})
	if err := disp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer disp.Stop(ctx)
	svc := engine.NewService(db, disp, engine.ServiceOptions{Targets: open})
	in := engine.IngestInput{Type: "invoice.paid", Data: json.RawMessage(`{}`), IdempotencyKey: "k1"}
	res, err := first.Ingest(ctx, "acme", in)
	if err != nil {
		t.Fatal(err)
	}
	id := res.Deliveries[0].ID
	// Its fan-out, owed at the answer, is stored by first's service.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := db.Delivery(ctx, "acme", id); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("delivery %s not stored: %v", id, err)
		}
	}
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

// TestService_IngestEnvelopeAndIdempotency pins what ingest stores: the
// envelope around the compacted data, byte for byte; and what its
// idempotency hash covers: type, api_version as sent and the compacted
// data, so the same request sent with other whitespace is a duplicate and
// one with another api_version or data is a conflict.
func TestService_IngestEnvelopeAndIdempotency(t *testing.T) {
	ctx := context.Background()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	created := time.Date(2026, 12, 2, 14, 35, 10, 123456789, time.UTC)
	svc := engine.NewService(db, nil, engine.ServiceOptions{Now: func() time.Time { return created }})
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"order.created", "a.b"} {
		if _, _, err := svc.PutEventType(ctx, typ, engine.EventTypeInput{}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, key string
		in        engine.IngestInput
		envelope  string // with the event's id for %s
	}{
		{"default version", "k1", engine.IngestInput{Type: "order.created", Data: json.RawMessage(" { \"a\" : [1, 2] ,\n \"b\" : \"x y\" } ")},
			`{"id":"%s","type":"order.created","created":"2026-12-02T14:35:10.123Z","sequence":1,"api_version":"v1","data":{"a":[1,2],"b":"x y"}}`},
		{"version sent", "k2", engine.IngestInput{Type: "order.created", APIVersion: "2026-12-01", Data: json.RawMessage(`"s"`)},
			`{"id":"%s","type":"order.created","created":"2026-12-02T14:35:10.123Z","sequence":2,"api_version":"2026-12-01","data":"s"}`},
		{"html kept in data, escaped in the envelope", "k3", engine.IngestInput{Type: "a.b", APIVersion: "<v&1>", Data: json.RawMessage(`{"h":"<&>"}`)},
			`{"id":"%s","type":"a.b","created":"2026-12-02T14:35:10.123Z","sequence":3,"api_version":"\u003cv\u00261\u003e","data":{"h":"<&>"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.IdempotencyKey = tt.key
			res, err := svc.Ingest(ctx, "acme", in)
			if err != nil {
				t.Fatal(err)
			}
			ev, _, err := db.Event(ctx, "acme", res.Event.ID)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf(tt.envelope, res.Event.ID); string(ev.Body) != want {
				t.Errorf("stored body\n%s\nwant\n%s", ev.Body, want)
			}

			again := in
			again.Data = json.RawMessage("\n\t " + string(in.Data) + "\r\n")
			dup, err := svc.Ingest(ctx, "acme", again)
			if err != nil || !dup.Duplicate || dup.Event.ID != res.Event.ID {
				t.Errorf("the same request with other whitespace: %+v, %v; want the duplicate", dup.Event, err)
			}
			other := in
			other.APIVersion = "v2"
			_, err = svc.Ingest(ctx, "acme", other)
			if engine.ErrorCode(err) != engine.CodeIdempotencyConflict {
				t.Errorf("another api_version with the same key: %v, want %s", err, engine.CodeIdempotencyConflict)
			}
		})
	}
}
