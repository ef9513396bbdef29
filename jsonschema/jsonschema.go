// Package jsonschema compiles and checks the JSON Schemas of webhookd's
// event types (engine.SchemaCompiler) with
// github.com/santhosh-tekuri/jsonschema/v6: a maintained validator that
// implements draft 2020-12 in full (it passes the official JSON Schema
// test suite) and compiles a schema once into a value that validates
// concurrently, which is what ingest needs. It is the one package that
// imports it, as storage is the one that imports bbolt.
//
// Dialect: draft 2020-12. A schema may say so in "$schema"; naming any
// other dialect is refused. "format" is an annotation, not checked, as
// 2020-12 has it by default.
//
// References: only within the schema. "$ref" to "#/$defs/…", to an
// anchor, or to an "$id" of a subschema resolve; every other reference
// ("https://…", a relative one, "file:…") is refused when the schema is
// compiled: webhookd fetches nothing, from the network or the disk, on
// behalf of a schema (the library's default loader would read files).
package jsonschema

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/webhookd/webhookd/engine"
)

// Dialect is the meta-schema of every event type's schema: JSON Schema
// draft 2020-12.
const Dialect = "https://json-schema.org/draft/2020-12/schema"

// base is the URL a schema is compiled at, against which its relative
// references resolve. It is never fetched (the schema is given to the
// compiler, and no loader fetches anything), and could not be: .invalid
// is a reserved top-level domain (RFC 2606).
const (
	baseDir = "https://webhookd.invalid/"
	base    = baseDir + "schema.json"
)

// Compiler compiles event types' schemas. Its zero value is ready.
type Compiler struct{}

var _ engine.SchemaCompiler = Compiler{}

// Compile compiles schema, a JSON Schema of draft 2020-12 (one JSON
// value). Its error says why it does not compile.
func (Compiler) Compile(schema []byte) (engine.CompiledSchema, error) {
	doc, err := sjs.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if obj, ok := doc.(map[string]any); ok {
		if d, ok := obj["$schema"]; ok && d != Dialect && d != Dialect+"#" {
			return nil, fmt.Errorf("$schema names %v: the schema must be of draft 2020-12 (%s, or no $schema)", d, Dialect)
		}
	}
	c := sjs.NewCompiler()
	c.DefaultDraft(sjs.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(base, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(base)
	if err != nil {
		return nil, compileError(err)
	}
	if cost(s) > MaxEvaluations {
		return nil, costError()
	}
	return compiled{s}, nil
}

// noLoader refuses every reference the schema does not hold itself.
type noLoader struct{}

// errOutside is why noLoader refuses a reference.
var errOutside = errors.New("outside the schema")

func (noLoader) Load(url string) (any, error) { return nil, errOutside }

// compileError is err, from compiling a schema, in words for its author.
func compileError(err error) error {
	var load *sjs.LoadURLError
	if errors.As(err, &load) {
		return fmt.Errorf("it refers to %s, outside itself: references must resolve within the schema (#/$defs/…, an anchor, or the $id of a subschema); webhookd fetches nothing", strings.TrimPrefix(load.URL, baseDir))
	}
	var meta *sjs.SchemaValidationError
	if errors.As(err, &meta) {
		var v *sjs.ValidationError
		if errors.As(meta.Err, &v) {
			return fmt.Errorf("it is not a valid schema %s", mismatch(v))
		}
	}
	return errors.New(strings.ReplaceAll(strings.ReplaceAll(err.Error(), base, ""), baseDir, ""))
}

// compiled is one compiled schema.
type compiled struct{ s *sjs.Schema }

// Validate returns nil when data matches, else an *engine.SchemaMismatch
// naming the first value at fault (by JSON Pointer) and how many more
// there are.
func (c compiled) Validate(data []byte) error {
	v, ok, done := decode(data)
	defer done() // after the error is worded: it holds pieces of v
	if !ok {
		var err error
		if v, err = sjs.UnmarshalJSON(bytes.NewReader(data)); err != nil {
			return &engine.SchemaMismatch{Message: "not JSON: " + err.Error()}
		}
	}
	err := c.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *sjs.ValidationError
	if !errors.As(err, &ve) {
		return &engine.SchemaMismatch{Message: err.Error()}
	}
	return mismatch(ve)
}

// printer words the validator's messages in English.
var printer = message.NewPrinter(language.English)

// mismatch is the SchemaMismatch of a validation error: of the
// innermost errors (the causes of the others), the one at the first
// pointer (then the first message), so that the answer is the same on
// every run whatever order the validator met them in. An error of
// anyOf or oneOf counts as one, its alternatives' reasons in its
// message.
func mismatch(ve *sjs.ValidationError) *engine.SchemaMismatch {
	ls := leaves(ve, nil)
	first := slices.MinFunc(ls, func(a, b leaf) int { return cmp.Compare(a.at, b.at) }).at
	var at []*engine.SchemaMismatch // worded: only those at the first pointer
	for _, l := range ls {
		if l.at == first {
			at = append(at, word(l))
		}
	}
	m := slices.MinFunc(at, compareMismatch)
	m.More = len(ls) - 1
	return m
}

// maxAlternatives bounds the alternatives' reasons an anyOf or oneOf
// error lists.
const maxAlternatives = 3

// leaf is one innermost error (see mismatch) and the pointer of its
// value.
type leaf struct {
	at string
	e  *sjs.ValidationError
}

// leaves appends the innermost errors of e to out, in no particular
// order and not worded yet: an array of 20 000 values at fault has
// 20 000 of them, and wording (or sorting at each append) them all took
// seconds where one is shown.
func leaves(e *sjs.ValidationError, out []leaf) []leaf {
	switch e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
	default:
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				out = leaves(c, out)
			}
			return out
		}
	}
	return append(out, leaf{pointer(e.InstanceLocation), e})
}

// word is the SchemaMismatch of l: what the validator says; for an
// anyOf or oneOf, followed by its alternatives' reasons.
func word(l leaf) *engine.SchemaMismatch {
	e := l.e
	msg := e.ErrorKind.LocalizedString(printer)
	switch e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
		var why []string
		for _, c := range e.Causes {
			var worded []*engine.SchemaMismatch
			for _, cl := range leaves(c, nil) {
				worded = append(worded, word(cl))
			}
			for _, w := range sorted(worded) {
				r := w.Message
				if w.Pointer != l.at {
					r = "at " + w.Pointer + ": " + r
				}
				if !slices.Contains(why, r) {
					why = append(why, r)
				}
			}
		}
		if len(why) > maxAlternatives {
			why = append(why[:maxAlternatives], "…")
		}
		if len(why) > 0 {
			msg += ": " + strings.Join(why, "; ")
		}
	}
	return &engine.SchemaMismatch{Pointer: l.at, Message: msg}
}

// compareMismatch orders mismatches by pointer, then message.
func compareMismatch(a, b *engine.SchemaMismatch) int {
	return cmp.Or(cmp.Compare(a.Pointer, b.Pointer), cmp.Compare(a.Message, b.Message))
}

func sorted(ms []*engine.SchemaMismatch) []*engine.SchemaMismatch {
	slices.SortFunc(ms, compareMismatch)
	return ms
}

// pointer is the JSON Pointer (RFC 6901) of the path tokens.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}
