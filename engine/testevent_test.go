package engine_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
)

// TestTestEventType: which catalogue type "Send test event" sends, and
// the refusals that name the field at fault.
func TestTestEventType(t *testing.T) {
	catalogue := []engine.EventType{
		{Name: "invoice.paid"},
		{Name: "order.archived", Status: engine.EventTypeArchived, Example: json.RawMessage(`{"order":"ord_example"}`)},
		{Name: "order.created", Example: json.RawMessage(`{"order":"ord_example"}`)},
		{Name: "order.shipped", Example: json.RawMessage(`{"order":"ord_example","carrier":"x"}`)},
		{Name: "user.deleted"},
	}
	ep := func(types ...string) engine.Endpoint { return engine.Endpoint{ID: "ep_1", EventTypes: types} }
	for _, c := range []struct {
		name  string
		ep    engine.Endpoint
		typ   string
		want  string
		code  engine.Code
		field string
	}{
		{"all: the first with an example", ep("*"), "", "order.created", "", ""},
		{"no example among its types: the first", ep("user.deleted", "invoice.paid"), "", "invoice.paid", "", ""},
		{"its one type with an example", ep("invoice.paid", "order.shipped"), "", "order.shipped", "", ""},
		{"asked for", ep("*"), "user.deleted", "user.deleted", "", ""},
		{"asked for one it does not take", ep("invoice.paid"), "order.created", "", engine.CodeInvalidField, "type"},
		{"asked for one not in the catalogue", ep("*"), "order.creatd", "", engine.CodeUnknownEventType, "type"},
		{"asked for a malformed one", ep("*"), "Order", "", engine.CodeInvalidField, "type"},
		{"none of its types in the catalogue", ep("gone.away"), "", "", engine.CodeInvalidField, "type"},
		// An archived type is refused at ingest: never the default.
		{"only archived types", ep("order.archived"), "", "", engine.CodeInvalidField, "type"},
		{"an archived type asked for", ep("*"), "order.archived", "order.archived", "", ""},
	} {
		got, err := engine.TestEventType(c.ep, catalogue, c.typ)
		if c.code != "" {
			var e *engine.Error
			if engine.ErrorCode(err) != c.code || !errors.As(err, &e) || e.Field != c.field {
				t.Errorf("%s: %+v, %v; want %s on %s", c.name, got, err, c.code, c.field)
			}
			continue
		}
		if err != nil || got.Name != c.want {
			t.Errorf("%s: %s, %v; want %s", c.name, got.Name, err, c.want)
		}
	}
}

// TestPutEventType_ExampleRefused: an example the catalogue cannot hold is
// refused with the field "example" named in its code's field and message
// (the checks are ingest's, made for "example"), and the type is not
// stored.
func TestPutEventType_ExampleRefused(t *testing.T) {
	svc := engine.NewService(memstore.New(), nil, engine.ServiceOptions{})
	tests := []struct {
		name, example string
		code          engine.Code
		message       string
	}{
		{"invalid JSON", `{"a":}`, engine.CodeInvalidJSON, "example is not valid JSON"},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", engine.CodeInvalidJSON, "example is not valid UTF-8"},
		{"too deep", strings.Repeat("[", engine.MaxDataDepth+1) + strings.Repeat("]", engine.MaxDataDepth+1), engine.CodeInvalidField, "example nests objects and arrays more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := svc.PutEventType(t.Context(), "order.created", engine.EventTypeInput{Example: json.RawMessage(tt.example)})
			var e *engine.Error
			if !errors.As(err, &e) || e.Code != tt.code || e.Field != "example" || !strings.HasPrefix(e.Message, tt.message) {
				t.Fatalf("PutEventType with %s example: %v, want %s on example, %q", tt.name, err, tt.code, tt.message)
			}
			if types, err := svc.EventTypes(t.Context()); err != nil || len(types) != 0 {
				t.Fatalf("catalogue after the refusal: %v, %v", types, err)
			}
		})
	}
}
