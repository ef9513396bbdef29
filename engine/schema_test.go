package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/jsonschema"
	"github.com/webhookd/webhookd/storage"
)

// orderSchema is a typical event type's schema: an object with a
// required positive integer amount and a three-letter currency.
const orderSchema = `{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type": "object",
	"required": ["amount", "currency"],
	"properties": {
		"amount": {"type": "integer", "minimum": 1},
		"currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
		"lines": {"type": "array", "items": {"$ref": "#/$defs/line"}}
	},
	"$defs": {"line": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string"}}}}
}`

// countingCompiler is jsonschema's compiler that counts its compiles and
// its compiled schemas' validations.
type countingCompiler struct {
	compiles, validations atomic.Int64
}

func (c *countingCompiler) Compile(schema []byte) (engine.CompiledSchema, error) {
	c.compiles.Add(1)
	s, err := jsonschema.Compiler{}.Compile(schema)
	if err != nil {
		return nil, err
	}
	return countingSchema{s, &c.validations}, nil
}

type countingSchema struct {
	engine.CompiledSchema
	n *atomic.Int64
}

func (s countingSchema) Validate(data []byte) error {
	s.n.Add(1)
	return s.CompiledSchema.Validate(data)
}

// schemaService is a Service over a bbolt file in t's directory with
// tenant acme, an endpoint for every type and opts.
func schemaService(t *testing.T, db *storage.DB, opts engine.ServiceOptions) *engine.Service {
	t.Helper()
	if db == nil {
		var err error
		if db, err = storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
	}
	opts.Targets = engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	svc := engine.NewService(db, nil, opts)
	ctx := context.Background()
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
		t.Fatal(err)
	}
	if eps, _ := svc.Endpoints(ctx, "acme"); len(eps) == 0 {
		if _, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/x", EventTypes: []string{"*"}}); err != nil {
			t.Fatal(err)
		}
	}
	return svc
}

// wantCode fails t unless err is an *engine.Error with code and field,
// and returns it.
func wantCode(t *testing.T, err error, code engine.Code, field string) *engine.Error {
	t.Helper()
	var e *engine.Error
	if !errors.As(err, &e) || e.Code != code || e.Field != field {
		t.Fatalf("error = %v; want %s at %q", err, code, field)
	}
	return e
}

func TestService_PutEventType_Schema(t *testing.T) {
	ctx := context.Background()
	svc := schemaService(t, nil, engine.ServiceOptions{Schemas: jsonschema.Compiler{}})

	et, created, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{
		Description: "an order", Status: "deprecated", Schema: json.RawMessage(orderSchema), Example: json.RawMessage(`{"amount": 1, "currency": "EUR"}`),
	})
	if err != nil || !created {
		t.Fatalf("PutEventType = %v, %v", created, err)
	}
	if et.Status != engine.EventTypeDeprecated || strings.ContainsAny(string(et.Schema), " \n\t") || !strings.HasPrefix(string(et.Schema), `{"$schema":`) {
		t.Errorf("the entry has status %q and schema %s; want deprecated, compacted", et.Status, et.Schema)
	}
	// Active is stored as the zero value and shown "active".
	et, _, err = svc.PutEventType(ctx, "order.created", engine.EventTypeInput{Status: "active"})
	if err != nil || et.Status != "" || et.Schema != nil {
		t.Fatalf("a put with status active and no schema = %+v, %v; want status \"\", no schema", et, err)
	}
	if b, _ := json.Marshal(et); !strings.Contains(string(b), `"status":"active"`) || strings.Contains(string(b), `"schema"`) {
		t.Errorf("the entry's JSON is %s; want status active, no schema", b)
	}

	for _, c := range []struct {
		name  string
		in    engine.EventTypeInput
		code  engine.Code
		field string
		says  string
	}{
		{"unknown status", engine.EventTypeInput{Status: "retired"}, engine.CodeInvalidField, "status", "active, deprecated or archived"},
		{"schema not an object", engine.EventTypeInput{Schema: json.RawMessage(`[{}]`)}, engine.CodeInvalidField, "schema", "object"},
		{"schema a string", engine.EventTypeInput{Schema: json.RawMessage(`"x"`)}, engine.CodeInvalidField, "schema", "object"},
		{"schema not JSON", engine.EventTypeInput{Schema: json.RawMessage(`{"a":}`)}, engine.CodeInvalidJSON, "schema", ""},
		{"schema too large", engine.EventTypeInput{Schema: json.RawMessage(`{"description":"` + strings.Repeat("x", engine.MaxSchemaLen) + `"}`)}, engine.CodeInvalidField, "schema", "at most 65536"},
		{"schema does not compile", engine.EventTypeInput{Schema: json.RawMessage(`{"type":"integr"}`)}, engine.CodeInvalidField, "schema", "/type"},
		{"schema refers outside", engine.EventTypeInput{Schema: json.RawMessage(`{"$ref":"https://example.com/s.json"}`)}, engine.CodeInvalidField, "schema", "outside itself"},
		{"example does not match", engine.EventTypeInput{Schema: json.RawMessage(orderSchema), Example: json.RawMessage(`{"amount":1,"currency":"EUR","lines":[{}]}`)}, engine.CodeSchemaMismatch, "example/lines/0", "sku"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := svc.PutEventType(ctx, "order.created", c.in)
			e := wantCode(t, err, c.code, c.field)
			if !strings.Contains(e.Message, c.says) {
				t.Errorf("message %q; want it to say %q", e.Message, c.says)
			}
		})
	}
	types, _ := svc.EventTypes(ctx)
	if len(types) != 1 || types[0].Schema != nil || types[0].Status != "" {
		t.Errorf("after the refused puts the catalogue is %+v; want the entry as it was", types)
	}

	// A node without a compiler takes no schema, and says why.
	bare := schemaService(t, nil, engine.ServiceOptions{})
	_, _, err = bare.PutEventType(ctx, "order.created", engine.EventTypeInput{Schema: json.RawMessage(`{}`)})
	if e := wantCode(t, err, engine.CodeInvalidField, "schema"); !strings.Contains(e.Message, "no JSON Schema compiler") {
		t.Errorf("message %q", e.Message)
	}
}

func TestService_Ingest_Schema(t *testing.T) {
	ctx := context.Background()
	var deprecated []string
	var mu sync.Mutex
	svc := schemaService(t, nil, engine.ServiceOptions{Schemas: jsonschema.Compiler{}, DeprecatedEvent: func(typ string) {
		mu.Lock()
		defer mu.Unlock()
		deprecated = append(deprecated, typ)
	}})
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{Schema: json.RawMessage(orderSchema)}); err != nil {
		t.Fatal(err)
	}
	ingest := func(typ, data, key string) (engine.IngestResult, error) {
		return svc.Ingest(ctx, "acme", engine.IngestInput{Type: typ, Data: json.RawMessage(data), IdempotencyKey: key})
	}

	_, err := ingest("order.created", `{"amount": "ten", "currency": "EUR"}`, "k1")
	e := wantCode(t, err, engine.CodeSchemaMismatch, "data/amount")
	if !strings.Contains(e.Message, "order.created") || !strings.Contains(e.Message, "want integer") {
		t.Errorf("message %q; want the type and what is wrong", e.Message)
	}
	_, err = ingest("order.created", `{"amount": 1, "currency": "EUR", "lines": [{"sku": "a"}, {"sku": 2}]}`, "")
	wantCode(t, err, engine.CodeSchemaMismatch, "data/lines/1/sku")
	res, err := ingest("order.created", `{"amount": 1, "currency": "EUR"}`, "k1")
	if err != nil || res.Duplicate || len(res.Deliveries) != 1 {
		t.Fatalf("the matching event (the refused one's key again) = %+v, %v; want new, one delivery", res, err)
	}

	// Deprecated: taken, counted once per stored event, not per repeat.
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{Status: "deprecated", Schema: json.RawMessage(orderSchema)}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := ingest("order.created", `{"amount": 2, "currency": "EUR"}`, "k2"); err != nil {
			t.Fatal(err)
		}
	}
	_, err = ingest("order.created", `{"amount": 0, "currency": "EUR"}`, "")
	wantCode(t, err, engine.CodeSchemaMismatch, "data/amount")
	if len(deprecated) != 1 || deprecated[0] != "order.created" {
		t.Errorf("DeprecatedEvent was told %v; want order.created once", deprecated)
	}

	// Archived: refused, even data that matches; a repeat of a request
	// taken before is still answered.
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{Status: "archived"}); err != nil {
		t.Fatal(err)
	}
	_, err = ingest("order.created", `{"amount": 2, "currency": "EUR"}`, "")
	if e := wantCode(t, err, engine.CodeEventTypeArchived, "type"); !strings.Contains(e.Message, "archived") {
		t.Errorf("message %q", e.Message)
	}
	if dup, err := ingest("order.created", `{"amount": 2, "currency": "EUR"}`, "k2"); err != nil || !dup.Duplicate {
		t.Errorf("a repeat after the archive = %+v, %v; want the duplicate", dup, err)
	}
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ingest("order.created", `"anything"`, ""); err != nil {
		t.Errorf("active again, without a schema: %v", err)
	}
}

// TestService_SchemaCompiledOnce: a type's schema is compiled once per
// type and schema, at the PUT, and every ingest after it reuses it; a
// restarted node compiles it at its first ingest; a new schema is
// compiled once more; a type without a schema is never validated.
func TestService_SchemaCompiledOnce(t *testing.T) {
	ctx := context.Background()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cc := &countingCompiler{}
	svc := schemaService(t, db, engine.ServiceOptions{Schemas: cc})
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{Schema: json.RawMessage(orderSchema)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutEventType(ctx, "order.shipped", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	ingest := func(svc *engine.Service, typ string, n int) {
		t.Helper()
		for range n {
			if _, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: typ, Data: json.RawMessage(`{"amount":1,"currency":"EUR"}`)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ingest(svc, "order.created", 50)
	if n := cc.compiles.Load(); n != 1 {
		t.Errorf("%d compiles for a PUT and 50 ingests; want 1", n)
	}
	if n := cc.validations.Load(); n != 50 {
		t.Errorf("%d validations for 50 ingests; want 50 (the store's second look reuses the first's)", n)
	}
	before := cc.validations.Load()
	ingest(svc, "order.shipped", 20)
	if n := cc.validations.Load() - before; n != 0 {
		t.Errorf("a type without a schema was validated %d times", n)
	}

	again := schemaService(t, db, engine.ServiceOptions{Schemas: cc}) // a restart
	ingest(again, "order.created", 10)
	if n := cc.compiles.Load(); n != 2 {
		t.Errorf("%d compiles after a restart's 10 ingests; want 2", n)
	}
	if _, _, err := again.PutEventType(ctx, "order.created", engine.EventTypeInput{Schema: json.RawMessage(`{"required":["amount"]}`)}); err != nil {
		t.Fatal(err)
	}
	ingest(again, "order.created", 10)
	if n := cc.compiles.Load(); n != 3 {
		t.Errorf("%d compiles after a new schema and 10 ingests; want 3", n)
	}
}
