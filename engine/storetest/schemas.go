package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/jsonschema"
)

// An event type's status and schema (engine/schema.go): a store keeps
// them with the entry, and its append asks the event's
// NewEvent.CheckType with the entry as the append reads it, so that
// each ingest is held to the catalogue as it is then. The events are
// prepared as the service prepares them (engine.PrepareEvent with the
// service's Schemas, over the compiler main gives it), so what is
// refused or taken here is what the API refuses or takes.
var schemaTests = []test{
	{"PutEventType keeps the status and the schema", testPutEventTypeSchema},
	{"a schema refuses a mismatch and stores nothing", testSchemaRefuses},
	{"a changed schema holds the next ingest", testSchemaChanged},
	{"an archived type refuses, a deprecated one takes", testArchivedRefuses},
	{"a repeat is answered after the type is archived", testArchivedRepeat},
	{"a repeat is answered after the type is deleted", testDeletedTypeRepeat},
}

// orderSchema requires a positive integer amount and a three-letter
// currency, and nothing else.
const orderSchema = `{"type":"object","required":["amount","currency"],"properties":{"amount":{"type":"integer","minimum":1},"currency":{"type":"string","pattern":"^[A-Z]{3}$"}},"additionalProperties":false}`

// schemas is the compiled schemas of a fixture's service: one per
// subtest, as one per process.
func schemas() *engine.Schemas { return engine.NewSchemas(jsonschema.Compiler{}) }

// putType puts et into the catalogue and fails t on an error.
func (f *fixture) putType(t *testing.T, et engine.EventType) engine.EventType {
	t.Helper()
	if et.Created.IsZero() {
		et.Created, et.Updated = t0, t0
	}
	got, _, err := f.s.PutEventType(t.Context(), et)
	if err != nil {
		t.Fatalf("PutEventType(%s): %v", et.Name, err)
	}
	return got
}

// prepareWith returns an ingest of typ for tenant with data, prepared
// with sc as the service prepares it.
func prepareWith(t *testing.T, sc *engine.Schemas, tenant, typ, data, key string) engine.NewEvent {
	t.Helper()
	ne, err := engine.PrepareEvent(tenant, engine.IngestInput{Type: typ, Data: json.RawMessage(data), IdempotencyKey: key},
		engine.IngestOptions{Now: func() time.Time { return t0 }, Schemas: sc})
	if err != nil {
		t.Fatalf("PrepareEvent(%s): %v", data, err)
	}
	return ne
}

// eventCount returns how many events tenant has.
func (f *fixture) eventCount(t *testing.T, tenant string) int {
	t.Helper()
	evs, _, err := f.s.ListEvents(t.Context(), tenant, engine.EventFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

func testPutEventTypeSchema(t *testing.T, f *fixture) {
	in := engine.EventType{Name: "order.created", Description: "d", Status: engine.EventTypeDeprecated,
		Schema: json.RawMessage(orderSchema), Example: json.RawMessage(`{"amount":1,"currency":"EUR"}`), Created: t0, Updated: t0}
	wantEqual(t, "created event type", f.putType(t, in), in)
	list, err := f.s.EventTypes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "EventTypes", list, []engine.EventType{in})

	// A put replaces them: without a schema, active again.
	later := t0.Add(time.Minute)
	got := f.putType(t, engine.EventType{Name: "order.created", Description: "d", Created: later, Updated: later})
	wantEqual(t, "updated event type", got, engine.EventType{Name: "order.created", Description: "d", Created: t0, Updated: later})
	archived := f.putType(t, engine.EventType{Name: "order.created", Status: engine.EventTypeArchived, Schema: json.RawMessage(`true`), Created: later, Updated: later})
	list, _ = f.s.EventTypes(t.Context())
	wantEqual(t, "EventTypes after the puts", list, []engine.EventType{archived})
	wantEqual(t, "archived status", archived.Status, engine.EventTypeArchived)
	wantEqual(t, "schema true", string(archived.Schema), "true")
}

func testSchemaRefuses(t *testing.T, f *fixture) {
	sc := schemas()
	f.tenant(t, "acme")
	f.putType(t, engine.EventType{Name: "order.created", Schema: json.RawMessage(orderSchema)})
	f.endpoint(t, "acme", "order.created")

	for _, c := range []struct{ data, field string }{
		{`{"amount":"ten","currency":"EUR"}`, "data/amount"},
		{`{"amount":1}`, "data"},
		{`{"amount":1,"currency":"euro"}`, "data/currency"},
	} {
		_, err := f.appendEvent(t, prepareWith(t, sc, "acme", "order.created", c.data, "k1"))
		wantCode(t, err, engine.CodeSchemaMismatch, c.field)
	}
	if n := f.eventCount(t, "acme"); n != 0 {
		t.Fatalf("refused ingests stored %d events", n)
	}
	wantEmpty(t, "retry index after refusals", f.retryIndex(t))

	// The refusals claimed no Idempotency-Key: the same key with data
	// that matches is a new event, not a conflict.
	res := f.ingest(t, prepareWith(t, sc, "acme", "order.created", `{"amount":1,"currency":"EUR"}`, "k1"))
	if res.Duplicate || len(res.Deliveries) != 1 {
		t.Fatalf("the matching event: duplicate %v, %d deliveries; want new, 1", res.Duplicate, len(res.Deliveries))
	}
	// Again, on whatever path the store takes for a tenant it has seen.
	for range 3 {
		f.ingest(t, prepareWith(t, sc, "acme", "order.created", `{"amount":2,"currency":"USD"}`, ""))
		_, err := f.appendEvent(t, prepareWith(t, sc, "acme", "order.created", `{"amount":0,"currency":"USD"}`, ""))
		wantCode(t, err, engine.CodeSchemaMismatch, "data/amount")
	}
	wantEqual(t, "events stored", f.eventCount(t, "acme"), 4)
	// Types without a schema take anything, beside it.
	f.eventType(t, "order.shipped")
	f.ingest(t, prepareWith(t, sc, "acme", "order.shipped", `"anything"`, ""))
}

func testSchemaChanged(t *testing.T, f *fixture) {
	sc := schemas()
	f.tenant(t, "acme")
	f.putType(t, engine.EventType{Name: "order.created"})
	f.endpoint(t, "acme", "order.created")
	loose := `{"amount":"ten"}`
	for range 3 { // the tenant and the type as the store may keep them
		f.ingest(t, prepareWith(t, sc, "acme", "order.created", loose, ""))
	}
	f.putType(t, engine.EventType{Name: "order.created", Schema: json.RawMessage(orderSchema), Updated: t0.Add(time.Second)})
	_, err := f.appendEvent(t, prepareWith(t, sc, "acme", "order.created", loose, ""))
	wantCode(t, err, engine.CodeSchemaMismatch, "data")
	f.ingest(t, prepareWith(t, sc, "acme", "order.created", `{"amount":1,"currency":"EUR"}`, ""))

	// A stricter schema, then none.
	f.putType(t, engine.EventType{Name: "order.created", Schema: json.RawMessage(`{"properties":{"amount":{"maximum":0}}}`), Updated: t0.Add(2 * time.Second)})
	_, err = f.appendEvent(t, prepareWith(t, sc, "acme", "order.created", `{"amount":1,"currency":"EUR"}`, ""))
	wantCode(t, err, engine.CodeSchemaMismatch, "data/amount")
	f.putType(t, engine.EventType{Name: "order.created", Updated: t0.Add(3 * time.Second)})
	f.ingest(t, prepareWith(t, sc, "acme", "order.created", loose, ""))
	wantEqual(t, "events stored", f.eventCount(t, "acme"), 5)
}

func testArchivedRefuses(t *testing.T, f *fixture) {
	sc := schemas()
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	f.endpoint(t, "acme", "order.created")
	f.ingest(t, prepareWith(t, sc, "acme", "order.created", `{}`, ""))

	f.putType(t, engine.EventType{Name: "order.created", Status: engine.EventTypeArchived})
	for range 2 {
		_, err := f.appendEvent(t, prepareWith(t, sc, "acme", "order.created", `{}`, "k2"))
		wantError(t, err, engine.ArchivedEventType("order.created"))
	}
	wantEqual(t, "events stored", f.eventCount(t, "acme"), 1)

	// Deprecated: taken, and CheckType saw it so.
	f.putType(t, engine.EventType{Name: "order.created", Status: engine.EventTypeDeprecated})
	ne := prepareWith(t, sc, "acme", "order.created", `{}`, "k2")
	var seen []engine.EventTypeStatus
	check := ne.CheckType
	ne.CheckType = func(et engine.EventType) error {
		seen = append(seen, et.Status)
		return check(et)
	}
	if res := f.ingest(t, ne); res.Duplicate || len(res.Deliveries) != 1 {
		t.Fatalf("an event of a deprecated type: duplicate %v, %d deliveries; want new, 1", res.Duplicate, len(res.Deliveries))
	}
	if len(seen) == 0 || seen[len(seen)-1] != engine.EventTypeDeprecated {
		t.Errorf("CheckType saw statuses %v; want deprecated last", seen)
	}
}

func testArchivedRepeat(t *testing.T, f *fixture) {
	sc := schemas()
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	f.endpoint(t, "acme", "order.created")
	first := f.ingest(t, prepareWith(t, sc, "acme", "order.created", `{"n":1}`, "k1"))
	f.putType(t, engine.EventType{Name: "order.created", Status: engine.EventTypeArchived})

	// The client's retry of the request it was answered for gets that
	// answer: the event was taken before the type was archived.
	again := prepareWith(t, sc, "acme", "order.created", `{"n":1}`, "k1")
	res, err := f.appendEvent(t, again)
	if err != nil || !res.Duplicate || res.Event.ID != first.Event.ID {
		t.Fatalf("the repeat = %v, duplicate %v, event %s; want the first, %s", err, res.Duplicate, res.Event.ID, first.Event.ID)
	}
}

// testDeletedTypeRepeat: an event type taken out of the catalogue
// (DeleteEventType) refuses new events of it, but a retry with the
// Idempotency-Key of an event taken before still gets that event, as
// after an archive: a client that lost the first answer (an outbox relay
// that crashed before marking its row sent) must not be told the event
// it sent was refused, when it is stored and delivered.
func testDeletedTypeRepeat(t *testing.T, f *fixture) {
	sc := schemas()
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	f.endpoint(t, "acme", "order.created")
	first := f.ingest(t, prepareWith(t, sc, "acme", "order.created", `{"n":1}`, "k1"))
	if err := f.s.DeleteEventType(t.Context(), "order.created"); err != nil {
		t.Fatal(err)
	}
	res, err := f.appendEvent(t, prepareWith(t, sc, "acme", "order.created", `{"n":1}`, "k1"))
	if err != nil || !res.Duplicate || res.Event.ID != first.Event.ID || len(res.Deliveries) != 1 {
		t.Fatalf("the repeat after the type was deleted = %v, duplicate %v, event %s, %d deliveries; want the first, %s, with its delivery",
			err, res.Duplicate, res.Event.ID, len(res.Deliveries), first.Event.ID)
	}
	if _, err := f.appendEvent(t, prepareWith(t, sc, "acme", "order.created", `{"n":1}`, "k2")); engine.ErrorCode(err) != engine.CodeUnknownEventType {
		t.Errorf("a new event of the deleted type: %v, want %s", err, engine.CodeUnknownEventType)
	}
	if _, err := f.appendEvent(t, prepareWith(t, sc, "acme", "order.created", `{"n":2}`, "k1")); engine.ErrorCode(err) != engine.CodeIdempotencyConflict &&
		engine.ErrorCode(err) != engine.CodeUnknownEventType {
		t.Errorf("another body with the same key: %v, want %s or %s", err, engine.CodeIdempotencyConflict, engine.CodeUnknownEventType)
	}
}
