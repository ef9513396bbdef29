package engine

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// An event type of the catalogue may carry a JSON Schema (draft 2020-12)
// of its events' data, and has a status: active, deprecated or archived.
// Both are checked at ingest, in the store's append (NewEvent.CheckType),
// against the catalogue entry as the append reads it, so that a change
// of either applies to the next ingest on every node of a cluster.
//
// The engine compiles no schema itself: it imports nothing beyond the
// standard library (STYLE.md), so a SchemaCompiler is given to it
// (ServiceOptions.Schemas; package jsonschema is webhookd's, over a
// well-kept validator). Each schema is compiled once per type and
// schema (Schemas) and reused by every ingest after it; a type without a
// schema costs an ingest nothing but a look at its status.

// MaxSchemaLen bounds an event type's schema, compacted: 64 KiB holds a
// schema of a few hundred properties with their descriptions, and a
// larger one is more likely a mistake (a whole OpenAPI document) than a
// schema of one event's data. Every entry of the catalogue is in every
// catalogue answer, so the bound keeps those answers small too.
const MaxSchemaLen = 64 << 10

// EventTypeStatus is where an event type is in its life. Its zero value
// is EventTypeActive, stored as "" and shown "active".
type EventTypeStatus string

// The statuses of an event type.
const (
	// EventTypeActive: events of the type are taken. The zero value.
	EventTypeActive EventTypeStatus = "active"
	// EventTypeDeprecated: events of the type are still taken and
	// delivered, and counted (ServiceOptions.DeprecatedEvent), so that
	// the operator sees who still sends them; the catalogue and the
	// portal show the type as deprecated.
	EventTypeDeprecated EventTypeStatus = "deprecated"
	// EventTypeArchived: ingest of the type is refused
	// (CodeEventTypeArchived); events already stored are delivered as
	// usual, and endpoints keep their subscriptions to it.
	EventTypeArchived EventTypeStatus = "archived"
)

// MarshalText returns "active" for "", st itself otherwise.
func (st EventTypeStatus) MarshalText() ([]byte, error) {
	if st == "" {
		return []byte(EventTypeActive), nil
	}
	return []byte(st), nil
}

// Active reports whether st is active ("" or "active").
func (st EventTypeStatus) Active() bool { return st == "" || st == EventTypeActive }

// ValidateEventTypeStatus returns st as stored ("" for active) when it
// is one of the statuses ("" is active), else CodeInvalidField naming
// field.
func ValidateEventTypeStatus(field string, st EventTypeStatus) (EventTypeStatus, error) {
	switch st {
	case "", EventTypeActive:
		return "", nil
	case EventTypeDeprecated, EventTypeArchived:
		return st, nil
	}
	return "", Errorf(CodeInvalidField, field, "%s must be active, deprecated or archived", field)
}

// SchemaCompiler compiles event types' JSON Schemas (ServiceOptions.Schemas).
type SchemaCompiler interface {
	// Compile compiles schema, a JSON Schema of draft 2020-12 (compacted
	// I-JSON, at most MaxSchemaLen bytes). The error says why it does not
	// compile, in words for the operator who wrote it; it must not reach
	// beyond schema (no network, no file): a reference outside the
	// document is an error.
	Compile(schema []byte) (CompiledSchema, error)
}

// CompiledSchema is a compiled JSON Schema. It is safe for concurrent
// use: one is reused by every ingest of its type.
type CompiledSchema interface {
	// Validate returns nil when data, one JSON value (compacted I-JSON),
	// matches the schema, and otherwise a *SchemaMismatch.
	Validate(data []byte) error
}

// SchemaMismatch is why a JSON value does not match a schema.
type SchemaMismatch struct {
	// Pointer is the JSON Pointer (RFC 6901) of the value at fault
	// within the one validated: "" for the whole, "/lines/1/sku".
	Pointer string
	// Message is what the validator says of it: "got string, want
	// integer", "missing property 'currency'".
	Message string
	// More is how many other values are at fault beside it.
	More int
}

func (m *SchemaMismatch) Error() string {
	at := m.Pointer
	if at == "" {
		at = "the root"
	}
	s := fmt.Sprintf("at %s: %s", at, m.Message)
	switch m.More {
	case 0:
	case 1:
		s += " (and 1 more error)"
	default:
		s += fmt.Sprintf(" (and %d more errors)", m.More)
	}
	return s
}

// schemaMismatch is the CodeSchemaMismatch error for value (field
// "data" or "example") of event type name, which err (from Validate)
// says does not match its schema: its Field is value followed by the
// pointer at fault ("data/lines/1").
func schemaMismatch(value, name string, err error) *Error {
	var m *SchemaMismatch
	if !errors.As(err, &m) {
		m = &SchemaMismatch{Message: err.Error()}
	}
	return &Error{Code: CodeSchemaMismatch, Field: value + m.Pointer, Err: err,
		Message: fmt.Sprintf("%s does not match the schema of event type %s %s", value, name, m)}
}

// ArchivedEventType is the error for an ingest of archived event type
// name.
func ArchivedEventType(name string) *Error {
	return Errorf(CodeEventTypeArchived, "type", "event type %s is archived: events of it are refused (a PUT /v1/event-types/%s with status active or deprecated takes them again)", name, name)
}

// Schemas holds the event types' schemas compiled, one per type: an
// entry is reused while the schema it was compiled from is, byte for
// byte, the one the catalogue holds (the type's "version"), and replaced
// when it is not. It is safe for concurrent use; its zero value and nil
// compile nothing (see Check).
type Schemas struct {
	compiler SchemaCompiler

	mu     sync.RWMutex
	byType map[string]*compiledSchema
}

// compiledSchema is one type's schema as compiled, and what it was
// compiled from (a copy: the catalogue entry's bytes are the store's).
type compiledSchema struct {
	schema   []byte
	compiled CompiledSchema
	err      error
}

// NewSchemas returns a Schemas that compiles with c; nil c compiles
// nothing.
func NewSchemas(c SchemaCompiler) *Schemas {
	return &Schemas{compiler: c, byType: map[string]*compiledSchema{}}
}

// errNoCompiler is the error for a schema where no SchemaCompiler is set.
var errNoCompiler = errors.New("this node has no JSON Schema compiler (engine.ServiceOptions.Schemas, IngestOptions.Schemas)")

// compiled returns the schema of event type name compiled, from the
// cache when it holds the same schema, else compiled now and cached.
func (s *Schemas) compiled(name string, schema []byte) (CompiledSchema, error) {
	if s == nil || s.compiler == nil {
		return nil, errNoCompiler
	}
	s.mu.RLock()
	c := s.byType[name]
	s.mu.RUnlock()
	if c != nil && bytes.Equal(c.schema, schema) {
		return c.compiled, c.err
	}
	c = &compiledSchema{schema: bytes.Clone(schema)}
	c.compiled, c.err = s.compiler.Compile(c.schema)
	s.mu.Lock()
	if s.byType == nil {
		s.byType = map[string]*compiledSchema{}
	}
	s.byType[name] = c
	s.mu.Unlock()
	return c.compiled, c.err
}

// put caches compiled as the schema of event type name.
func (s *Schemas) put(name string, schema []byte, compiled CompiledSchema) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byType == nil {
		s.byType = map[string]*compiledSchema{}
	}
	s.byType[name] = &compiledSchema{schema: bytes.Clone(schema), compiled: compiled}
}

// forget drops event type name's compiled schema.
func (s *Schemas) forget(name string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byType, name)
}

// compile compiles schema for a PUT of event type name: the error is
// CodeInvalidField "schema" saying why.
func (s *Schemas) compile(schema []byte) (CompiledSchema, error) {
	if s == nil || s.compiler == nil {
		return nil, Errorf(CodeInvalidField, "schema", "%v: it takes no schema", errNoCompiler)
	}
	c, err := s.compiler.Compile(schema)
	if err != nil {
		return nil, &Error{Code: CodeInvalidField, Field: "schema", Err: err, Message: "schema does not compile as a JSON Schema (draft 2020-12): " + oneLine(err.Error())}
	}
	return c, nil
}

// oneLine joins the lines of s with "; ", so that a validator's
// indented listing reads as one message.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimLeft(strings.TrimSpace(l), "- ")
	}
	return strings.Join(slices.DeleteFunc(lines, func(l string) bool { return l == "" }), "; ")
}

// Check returns why the catalogue entry et refuses an event of its type
// whose data is data (compacted I-JSON), or nil: ArchivedEventType, or
// CodeSchemaMismatch naming the pointer at fault in data. An entry with
// a schema where s compiles nothing, or whose stored schema no longer
// compiles, is an uncoded error (an internal error: the event is
// refused, the operator told).
func (s *Schemas) Check(et EventType, data []byte) error {
	_, err := s.check(et, data, nil)
	return err
}

// check is Check; it skips the validation when et's schema compiles to
// passed (data matched it already) and returns the compiled schema
// data matched.
func (s *Schemas) check(et EventType, data []byte, passed CompiledSchema) (CompiledSchema, error) {
	if et.Status == EventTypeArchived {
		return nil, ArchivedEventType(et.Name)
	}
	if len(et.Schema) == 0 {
		return nil, nil
	}
	c, err := s.compiled(et.Name, et.Schema)
	if err != nil {
		return nil, fmt.Errorf("engine: the schema of event type %s: %w", et.Name, err)
	}
	if c == passed {
		return c, nil
	}
	if err := c.Validate(data); err != nil {
		return nil, schemaMismatch("data", et.Name, err)
	}
	return c, nil
}

// typeCheck is what an append's NewEvent.CheckType saw of its type, for
// the Service once the append returns.
type typeCheck struct {
	status EventTypeStatus
	passed CompiledSchema // the schema the data matched; nil: none
}

// checkType returns the NewEvent.CheckType of an event whose data is
// data, checking with schemas, and what it saw: the status of the entry
// it was last called with.
func checkType(schemas *Schemas, data []byte) (func(EventType) error, *typeCheck) {
	seen := &typeCheck{}
	return func(et EventType) error {
		seen.status = et.Status
		passed, err := schemas.check(et, data, seen.passed)
		seen.passed = passed
		return err
	}, seen
}

// CheckStoredEventType reports what is wrong with et as a stored
// catalogue entry that PutEventType would refuse, but for whether its
// schema compiles (the store knows no compiler): a status that is none
// of the three, a schema over MaxSchemaLen or not an object or boolean,
// an example over MaxExampleLen. The integrity check and the migration
// to PostgreSQL hold stored entries to it.
func CheckStoredEventType(et EventType) error {
	if _, err := ValidateEventTypeStatus("status", et.Status); err != nil {
		return fmt.Errorf("event type %s: status %q is none of active, deprecated, archived", et.Name, et.Status)
	}
	if len(et.Schema) > MaxSchemaLen {
		return fmt.Errorf("event type %s: schema is %d bytes; at most %d", et.Name, len(et.Schema), MaxSchemaLen)
	}
	if len(et.Schema) > 0 && et.Schema[0] != '{' && string(et.Schema) != "true" && string(et.Schema) != "false" {
		return fmt.Errorf("event type %s: schema is not a JSON object or boolean", et.Name)
	}
	if len(et.Example) > MaxExampleLen {
		return fmt.Errorf("event type %s: example is %d bytes; at most %d", et.Name, len(et.Example), MaxExampleLen)
	}
	return nil
}
