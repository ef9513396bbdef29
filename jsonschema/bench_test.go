package jsonschema_test

import (
	"strings"
	"testing"

	"github.com/webhookd/webhookd/jsonschema"
)

// benchOrderSchema and benchOrderData are bench/'s typical schema and
// 1 KiB order (webhookd bench -schema).
const benchOrderSchema = `{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type": "object",
	"required": ["amount", "currency", "customer", "lines"],
	"properties": {
		"amount": {"type": "integer", "minimum": 1},
		"currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
		"customer": {
			"type": "object",
			"required": ["id", "email"],
			"properties": {
				"id": {"type": "string", "pattern": "^cus_[0-9A-Z]{26}$"},
				"email": {"type": "string", "format": "email", "maxLength": 254}
			}
		},
		"lines": {"type": "array", "minItems": 1, "maxItems": 100, "items": {"$ref": "#/$defs/line"}},
		"note": {"type": "string", "maxLength": 65536},
		"created": {"type": "string"}
	},
	"additionalProperties": false,
	"$defs": {
		"line": {
			"type": "object",
			"required": ["sku", "qty"],
			"properties": {
				"sku": {"type": "string", "pattern": "^[A-Z]-[0-9]+$"},
				"qty": {"type": "integer", "minimum": 1},
				"name": {"type": "string"}
			}
		}
	}
}`

var benchOrderData = []byte(`{"amount":4200,"currency":"EUR","customer":{"id":"cus_01JH0000000000000000000001","email":"jane@example.com"},` +
	`"lines":[{"sku":"A-100","qty":2,"name":"Blue mug"},{"sku":"B-200","qty":1,"name":"Teapot, large"},{"sku":"C-300","qty":6,"name":"Saucer"}],` +
	`"created":"2030-01-02T03:04:05.123Z","note":"` + strings.Repeat("x", 600) + `"}`)

// BenchmarkCompiledSchema_Validate is what a typical schema costs an
// ingest of a typical 1 KiB event: the decode of its data and the
// validation.
func BenchmarkCompiledSchema_Validate(b *testing.B) {
	s, err := jsonschema.Compiler{}.Compile([]byte(benchOrderSchema))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(benchOrderData)))
	for b.Loop() {
		if err := s.Validate(benchOrderData); err != nil {
			b.Fatal(err)
		}
	}
}
