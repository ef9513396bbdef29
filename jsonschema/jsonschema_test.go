package jsonschema_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/jsonschema"
)

func compile(t *testing.T, schema string) engine.CompiledSchema {
	t.Helper()
	c, err := jsonschema.Compiler{}.Compile([]byte(schema))
	if err != nil {
		t.Fatalf("Compile(%s): %v", schema, err)
	}
	return c
}

func TestCompiler_Compile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(file, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, schema string
		says         string // "": compiles
	}{
		{"empty object", `{}`, ""},
		{"true", `true`, ""},
		{"draft 2020-12 named", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`, ""},
		{"ref to $defs", `{"$ref":"#/$defs/a","$defs":{"a":{"type":"integer"}}}`, ""},
		{"ref to an anchor", `{"$ref":"#a","$defs":{"a":{"$anchor":"a","type":"integer"}}}`, ""},
		{"ref to an $id inside", `{"$ref":"https://example.com/a.json","$defs":{"a":{"$id":"https://example.com/a.json","type":"integer"}}}`, ""},
		{"recursive", `{"type":"object","properties":{"child":{"$ref":"#"}}}`, ""},
		{"bad keyword value", `{"type":12}`, "not a valid schema at /type"},
		{"bad minimum", `{"minimum":"one"}`, "at /minimum"},
		{"another dialect", `{"$schema":"http://json-schema.org/draft-07/schema#"}`, "draft 2020-12"},
		{"remote ref", `{"$ref":"https://example.com/order.json"}`, "refers to https://example.com/order.json, outside itself"},
		{"file ref", `{"$ref":"file://` + file + `"}`, "outside itself"},
		{"relative ref", `{"$ref":"other.json"}`, "refers to other.json, outside itself"},
		{"missing $defs entry", `{"$ref":"#/$defs/nope"}`, "nope"},
		{"regexp Go cannot compile", `{"pattern":"(?=a)"}`, "(?=a)"},
		{"not JSON", `{`, "not JSON"},
		// A chain of anyOf of two $ref to the next link evaluates a
		// value 2^n times: 1.4 KB held each ingest 15 s (n=22).
		{"anyOf chain, 2^22 paths", anyOfChain(22), "more than 1000 of its subschemas"},
		{"anyOf chain, 2^10 paths", anyOfChain(10), "more than 1000 of its subschemas"},
		{"anyOf chain, 2^6 paths", anyOfChain(6), ""},
		{"allOf chain down the items", `{"$ref":"#/$defs/a","$defs":{"a":{"allOf":[{"items":{"$ref":"#/$defs/a"}},{"items":{"$ref":"#/$defs/a"}}]}}}`, "more than 1000"},
		{"binary tree", `{"type":"object","properties":{"left":{"$ref":"#"},"right":{"$ref":"#"}}}`, ""},
		{"shared defs", `{"properties":{"a":{"$ref":"#/$defs/x"},"b":{"$ref":"#/$defs/x"},"c":{"items":{"$ref":"#/$defs/x"}}},"$defs":{"x":{"anyOf":[{"type":"string"},{"type":"object","properties":{"y":{"$ref":"#/$defs/x"}}}]}}}`, ""},
		{"dynamic ref", `{"$dynamicAnchor":"n","anyOf":[{"type":"string"},{"items":{"$dynamicRef":"#n"}}]}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := jsonschema.Compiler{}.Compile([]byte(c.schema))
			switch {
			case c.says == "" && err != nil:
				t.Errorf("Compile(%s) = %v; want it compiled", c.schema, err)
			case c.says != "" && (err == nil || !strings.Contains(err.Error(), c.says)):
				t.Errorf("Compile(%s) = %v; want an error saying %q", c.schema, err, c.says)
			case err != nil && strings.Contains(err.Error(), "webhookd.invalid"):
				t.Errorf("Compile(%s) = %v: names the schema's internal URL", c.schema, err)
			}
		})
	}
}

// anyOfChain is a schema of n links, each an anyOf of two $ref to the
// next: 2^n paths for a value that fails them all.
func anyOfChain(n int) string {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := range n {
		fmt.Fprintf(&b, `"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"d%d":{"type":"string"}}}`, n)
	return b.String()
}

const order = `{
	"type": "object",
	"required": ["amount", "currency"],
	"properties": {
		"amount": {"type": "integer", "minimum": 1},
		"currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
		"lines": {"type": "array", "items": {"$ref": "#/$defs/line"}},
		"a/b~c": {"type": "boolean"},
		"kind": {"anyOf": [{"const": "a"}, {"const": "b"}]}
	},
	"additionalProperties": false,
	"$defs": {"line": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string"}}}}
}`

func TestCompiledSchema_Validate(t *testing.T) {
	t.Parallel()
	s := compile(t, order)
	for _, c := range []struct {
		name, data     string
		pointer, says  string // pointer "" and says "": matches
		more           int
		wantsNoMatches bool
	}{
		{name: "matches", data: `{"amount":1,"currency":"EUR","lines":[{"sku":"a"}],"kind":"b"}`},
		{name: "wrong type", data: `{"amount":"1","currency":"EUR"}`, pointer: "/amount", says: "want integer"},
		{name: "below minimum", data: `{"amount":0,"currency":"EUR"}`, pointer: "/amount", says: "minimum"},
		{name: "big integer keeps its precision", data: `{"amount":9007199254740993,"currency":"EUR"}`},
		{name: "missing property", data: `{"amount":1}`, pointer: "", says: "currency"},
		{name: "not an object", data: `[]`, pointer: "", says: "want object"},
		{name: "through a ref", data: `{"amount":1,"currency":"EUR","lines":[{"sku":"a"},{"sku":1}]}`, pointer: "/lines/1/sku", says: "want string"},
		{name: "pattern", data: `{"amount":1,"currency":"euro"}`, pointer: "/currency", says: "^[A-Z]{3}$"},
		{name: "additional property", data: `{"amount":1,"currency":"EUR","x":1}`, pointer: "", says: "'x'"},
		{name: "escaped pointer", data: `{"amount":1,"currency":"EUR","a/b~c":1}`, pointer: "/a~1b~0c", says: "want boolean"},
		{name: "anyOf as one", data: `{"amount":1,"currency":"EUR","kind":"c"}`, pointer: "/kind", says: "anyOf"},
		{name: "first of several", data: `{"amount":"x","currency":1}`, pointer: "/amount", says: "want integer", more: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := s.Validate([]byte(c.data))
			if c.says == "" {
				if err != nil {
					t.Fatalf("Validate(%s) = %v; want a match", c.data, err)
				}
				return
			}
			var m *engine.SchemaMismatch
			if !errors.As(err, &m) {
				t.Fatalf("Validate(%s) = %v; want a *SchemaMismatch", c.data, err)
			}
			if m.Pointer != c.pointer || !strings.Contains(m.Message, c.says) || m.More != c.more {
				t.Errorf("Validate(%s) = %+v; want at %q saying %q, %d more", c.data, m, c.pointer, c.says, c.more)
			}
		})
	}
}

// TestCompiledSchema_Validate_Deterministic: of several values at
// fault, the one named is the same every time, whatever order the
// validator meets an object's members in.
func TestCompiledSchema_Validate_Deterministic(t *testing.T) {
	t.Parallel()
	s := compile(t, `{"properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"},"d":{"type":"string"}}}`)
	for range 50 {
		var m *engine.SchemaMismatch
		if err := s.Validate([]byte(`{"d":1,"c":1,"b":1,"a":1}`)); !errors.As(err, &m) || m.Pointer != "/a" || m.More != 3 {
			t.Fatalf("Validate = %v; want /a first, 3 more", err)
		}
	}
}

// TestCompiledSchema_Validate_Concurrent: one compiled schema serves
// every ingest at once (run with -race).
func TestCompiledSchema_Validate_Concurrent(t *testing.T) {
	t.Parallel()
	s := compile(t, order)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 200 {
				good := s.Validate([]byte(`{"amount":1,"currency":"EUR"}`))
				bad := s.Validate([]byte(`{"amount":0,"currency":"EUR"}`))
				if good != nil || bad == nil {
					t.Errorf("goroutine %d: %v, %v", i, good, bad)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestCompiledSchema_ValidateManyAtFault: data of 20 000 values each at
// fault is answered within a bound, naming the first and counting the
// others: the errors were sorted at each one added (4.4 s here), where
// the validator itself takes 20 ms.
func TestCompiledSchema_ValidateManyAtFault(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, schema, says string }{
		{"items", `{"items":{"type":"string"}}`, "got number, want string"},
		{"items through anyOf", `{"items":{"anyOf":[{"type":"string"},{"type":"boolean"}]}}`, "'anyOf' failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := compile(t, c.schema)
			data := "[" + strings.Repeat("1,", 19999) + "1]"
			start := time.Now()
			err := s.Validate([]byte(data))
			took := time.Since(start)
			var m *engine.SchemaMismatch
			if !errors.As(err, &m) || m.Pointer != "/0" || m.More != 19999 || !strings.Contains(m.Message, c.says) {
				t.Errorf("Validate = %v; want at /0 saying %q and 19999 more", err, c.says)
			}
			if took > time.Second {
				t.Errorf("Validate took %v; want well within 1s", took)
			}
		})
	}
}
