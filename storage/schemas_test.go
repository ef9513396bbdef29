package storage

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// TestDB_Check_eventType: the integrity check holds a catalogue entry's
// status, schema and example to the API's bounds
// (engine.CheckStoredEventType), naming the type; an entry the API
// gives is fine.
func TestDB_Check_eventType(t *testing.T) {
	db := MustOpenDB(t)
	put := func(et engine.EventType) {
		t.Helper()
		et.Name = "order.created"
		if _, _, err := db.PutEventType(context.Background(), et); err != nil {
			t.Fatal(err)
		}
	}
	for _, et := range []engine.EventType{
		{Status: engine.EventTypeDeprecated, Schema: json.RawMessage(`{"type":"object"}`), Example: json.RawMessage(`{}`)},
		{Status: engine.EventTypeArchived, Schema: json.RawMessage(`true`)},
		{},
	} {
		put(et)
		mustCheck(t, db)
	}
	for _, c := range []struct {
		et   engine.EventType
		says string
	}{
		{engine.EventType{Status: "retired"}, `status "retired"`},
		{engine.EventType{Schema: json.RawMessage(`"` + strings.Repeat("x", engine.MaxSchemaLen) + `"`)}, "schema is"},
		{engine.EventType{Schema: json.RawMessage(`[1]`)}, "not a JSON object or boolean"},
	} {
		put(c.et)
		if err := db.Check(); err == nil || !strings.Contains(err.Error(), "order.created") || !strings.Contains(err.Error(), c.says) {
			t.Errorf("entry %+v: Check = %v, want it to name the type and say %q", c.et, err, c.says)
		}
	}
	put(engine.EventType{})
	mustCheck(t, db)
}
