package postgres

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/jsonschema"
)

// TestAppendEvent_TypeChangedOnAnotherNode: a node checks an ingest
// against the type's entry it read at an earlier ingest (appendCached)
// only while it is still the catalogue's; a schema, a status or no
// schema put on another node holds this node's next ingest, and once
// this node has read the new entry its ingests take the one round trip
// again.
func TestAppendEvent_TypeChangedOnAnotherNode(t *testing.T) {
	clock := &manualClock{t: time.Now()}
	ss := nodes(t, 2, clock)
	a, b := ss[0], ss[1]
	ctx := t.Context()
	now := clock.now()
	acme(t, a, now, 1)
	schemas := engine.NewSchemas(jsonschema.Compiler{})
	ingest := func(data string) (engine.IngestResult, error) {
		t.Helper()
		ne, err := engine.PrepareEvent("acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(data)}, engine.IngestOptions{Schemas: schemas})
		if err != nil {
			t.Fatal(err)
		}
		return a.AppendEvent(ctx, ne)
	}
	mustIngest := func(what, data string) {
		t.Helper()
		if _, err := ingest(data); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	refused := func(what, data string, code engine.Code) {
		t.Helper()
		if _, err := ingest(data); engine.ErrorCode(err) != code {
			t.Fatalf("%s: %v; want %s", what, err, code)
		}
	}
	put := func(et engine.EventType) {
		t.Helper()
		et.Name, et.Created, et.Updated = "order.created", now, now
		if _, _, err := b.PutEventType(ctx, et); err != nil {
			t.Fatal(err)
		}
	}
	cached := func(what string, do func()) {
		t.Helper()
		before := a.cachedIngests.Load()
		do()
		if a.cachedIngests.Load() != before+1 {
			t.Fatalf("%s: did not take the one-round-trip path", what)
		}
	}

	mustIngest("first ingest", `{"amount":"ten"}`)
	cached("second ingest", func() { mustIngest("second ingest", `{"amount":"ten"}`) })

	put(engine.EventType{Schema: json.RawMessage(`{"properties":{"amount":{"type":"integer"}}}`)})
	refused("after another node put a schema", `{"amount":"ten"}`, engine.CodeSchemaMismatch)
	cached("a match, the new entry read", func() { mustIngest("a match", `{"amount":10}`) })
	refused("a mismatch again", `{"amount":"ten"}`, engine.CodeSchemaMismatch)

	put(engine.EventType{Status: engine.EventTypeArchived})
	refused("after another node archived it", `{"amount":10}`, engine.CodeEventTypeArchived)
	refused("and again", `{"amount":10}`, engine.CodeEventTypeArchived)

	put(engine.EventType{Status: engine.EventTypeDeprecated})
	mustIngest("after another node deprecated it, without a schema", `{"amount":"ten"}`)
	cached("and again", func() { mustIngest("and again", `{"amount":"ten"}`) })

	if err := b.DeleteEventType(ctx, "order.created"); err != nil {
		t.Fatal(err)
	}
	put(engine.EventType{Schema: json.RawMessage(`false`)})
	refused("after another node deleted it and put it back", `{}`, engine.CodeSchemaMismatch)
	if n := countEvents(t, b, "acme"); n != 5 {
		t.Errorf("%d events stored, want the 5 taken", n)
	}
}

// countEvents returns how many events tenant has in s.
func countEvents(t *testing.T, s *Store, tenant string) int {
	t.Helper()
	evs, _, err := s.ListEvents(t.Context(), tenant, engine.EventFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// TestImport_EventTypeSchema: an event type's status and schema come
// through the import as they were; one the API would refuse
// (engine.CheckStoredEventType) is refused, naming it, and the import
// cannot finish.
func TestImport_EventTypeSchema(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Options{})
	im, _, err := s.Import(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	feedImport(t, im, 1, false)
	good := engine.EventType{Name: "order.shipped", Status: engine.EventTypeArchived, Schema: json.RawMessage(`{"required":["id"]}`), Created: importT0, Updated: importT0}
	if err := im.EventType(good); err != nil {
		t.Fatal(err)
	}
	err = im.EventType(engine.EventType{Name: "order.lost", Status: "retired", Created: importT0, Updated: importT0})
	if err == nil || !strings.Contains(err.Error(), "order.lost") || !strings.Contains(err.Error(), "retired") {
		t.Errorf("Import.EventType = %v, want it to name order.lost and its status", err)
	}
	if _, err := im.Finish(Counts{Tenants: 1, EventTypes: 3}); err == nil {
		t.Error("Finish after a refused event type succeeded")
	}
}
