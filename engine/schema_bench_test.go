package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
	"github.com/webhookd/webhookd/jsonschema"
)

// benchOrder is the data of a typical event (about 400 bytes) that
// orderSchema takes.
var benchOrder = json.RawMessage(`{"amount":4200,"currency":"EUR","lines":[{"sku":"A-100","qty":2,"name":"Blue mug"},{"sku":"B-200","qty":1,"name":"Teapot, large"},{"sku":"C-300","qty":6,"name":"Saucer"}],"customer":{"id":"cus_01JH0000000000000000000001","email":"jane@example.com"},"note":"leave at the door","created":"2030-01-02T03:04:05.123Z"}`)

// BenchmarkSchemas_Check is what a schema costs an ingest: the
// validation of a typical event's data against a typical schema,
// compiled once (the cache's look included).
func BenchmarkSchemas_Check(b *testing.B) {
	sc := engine.NewSchemas(jsonschema.Compiler{})
	et := engine.EventType{Name: "order.created", Schema: json.RawMessage(orderSchema)}
	b.ReportAllocs()
	b.SetBytes(int64(len(benchOrder)))
	for b.Loop() {
		if err := sc.Check(et, benchOrder); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkService_Ingest is the service's ingest of a typical event on
// memstore (no disk: the CPU of an ingest alone), of a type with no
// schema and of one with a typical schema: the difference is the
// validation's share of an ingest, which on a disk's store is smaller
// still (bench/'s ingest-only -schema measures that).
func BenchmarkService_Ingest(b *testing.B) {
	for _, c := range []struct {
		name   string
		schema json.RawMessage
	}{
		{"no schema", nil},
		{"schema", json.RawMessage(orderSchema)},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			svc := engine.NewService(memstore.New(), nil, engine.ServiceOptions{Schemas: jsonschema.Compiler{}, Targets: engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}})
			if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
				b.Fatal(err)
			}
			if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{Schema: c.schema}); err != nil {
				b.Fatal(err)
			}
			if _, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/x", EventTypes: []string{"*"}}); err != nil {
				b.Fatal(err)
			}
			in := engine.IngestInput{Type: "order.created", Data: benchOrder}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := svc.Ingest(ctx, "acme", in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
