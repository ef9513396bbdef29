package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/webhookd/webhookd/engine"
)

// decodeJSON reads r's body into dst, which must be a pointer to a struct.
// It is the only request decoder. The body is read through
// http.MaxBytesReader with limit max; it must be one JSON object, sent as
// application/json, that is I-JSON (RFC 7493): valid UTF-8 with no lone
// surrogate, raw or escaped as \uD800-\uDFFF; no name twice in any object,
// at any depth; names in their exact case; no unknown names; nothing after
// the object. The rest of I-JSON is checked where the values are read, by
// the engine: no noncharacter and no number a double cannot hold in an
// event's data or a catalogue example (which the engine checks whole, with
// these rules again, whichever way the event came in), no noncharacter in
// a text field (engine.ValidateText); a number decoded into a Go field is
// held to the field's type. An empty (or all-whitespace) body leaves dst
// untouched: it is an error only when required is true, and needs no
// Content-Type.
//
// Every error a client can cause is an *engine.Error naming the field at
// fault where there is one: body_too_large, unsupported_media_type,
// invalid_json (the body is not such JSON: the problem and its byte
// offset) or invalid_field (an unknown name or a value of the wrong kind,
// with its byte offset). Only a bad dst (a bug here) gives an uncoded
// error, hence a 500. On an error dst may be partly set.
func decodeJSON(w http.ResponseWriter, r *http.Request, max int64, dst any, required bool) error {
	var body []byte
	if r.Body != nil {
		var err error
		body, err = readBody(http.MaxBytesReader(w, r.Body, max), min(r.ContentLength, max))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				return engine.Errorf(engine.CodeBodyTooLarge, "", "request body is larger than %d bytes, the bound set by [ingest] max_body", max)
			}
			return &engine.Error{Code: engine.CodeInvalidJSON, Message: "could not read the request body", Err: err}
		}
	}
	return decodeBody(r.Header.Get("Content-Type"), body, dst, required)
}

// readBody is io.ReadAll for a body that announces size bytes
// (Content-Length, -1 when unknown): a body of that size is read into one
// buffer (bytes.Buffer.ReadFrom needs MinRead bytes of room to see the
// end), at most maxBodyBuffer of it allocated before the bytes arrive.
func readBody(r io.Reader, size int64) ([]byte, error) {
	var buf bytes.Buffer
	if size > 0 {
		buf.Grow(int(min(size, maxBodyBuffer)) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// maxBodyBuffer bounds what readBody allocates on the word of a
// Content-Length header alone.
const maxBodyBuffer = 64 << 10

// decodeBody is decodeJSON after the body has been read.
func decodeBody(contentType string, body []byte, dst any, required bool) error {
	if v := reflect.ValueOf(dst); v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("httpapi: decode into %T, not a pointer", dst)
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		if required {
			return engine.Errorf(engine.CodeInvalidJSON, "", "request body is required: send a JSON object")
		}
		return nil
	}
	if !isJSONMediaType(contentType) {
		return engine.Errorf(engine.CodeUnsupportedMedia, "Content-Type", "request body must be sent as Content-Type: application/json")
	}
	if trimmed[0] != '{' {
		// Say where it stops being JSON, if it does. No field is at fault:
		// there are none.
		if err := jsonv2.Unmarshal(body, new(jsontext.Value)); err != nil {
			err = decodeError(body, dst, err)
			if e, ok := errors.AsType[*engine.Error](err); ok {
				e.Field = ""
			}
			return err
		}
		return engine.Errorf(engine.CodeInvalidJSON, "", "request body must be a JSON object")
	}
	opts := decodeOptions
	if _, ok := dst.(*engine.EndpointPatch); ok {
		opts = patchDecodeOptions
	}
	if err := jsonv2.Unmarshal(body, dst, opts); err != nil {
		return decodeError(body, dst, err)
	}
	switch dst.(type) {
	case *engine.EndpointPatch, *engine.OperationalEndpointPatch:
		return refuseNulls(body, "headers", "rate_limit")
	}
	return nil
}

// refuseNulls reports an invalid_field error naming the first member of
// the JSON object body (which decoded without error) whose value is null,
// unless its name is one of nullable. A patch leaves a member it is not
// given as it is, and null would otherwise decode as not given: a client
// that sends "description": null to clear it (RFC 7396's merge) would get
// 200 and the old value.
func refuseNulls(body []byte, nullable ...string) error {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if _, err := dec.ReadToken(); err != nil { // {
		return nil // decoded already: cannot happen
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil
		}
		name := tok.String() // before the next call voids tok
		if dec.PeekKind() == 'n' && !slices.Contains(nullable, name) {
			clear := ""
			if name == "description" {
				clear = ` (send "" to clear it)`
			}
			return engine.Errorf(engine.CodeInvalidField, name,
				"%s is null at byte offset %d: leave it out to keep it as it is, or send a value%s", name, dec.InputOffset(), clear)
		}
		if err := dec.SkipValue(); err != nil {
			return nil
		}
	}
	return nil
}

// decodeOptions are encoding/json/v2's defaults, which are the strictness
// decodeJSON promises (UTF-8 without lone surrogates, each name once per
// object, names matched in their exact case, one value and nothing after
// it), plus unknown names refused. Every request body, an ingest's
// included, is decoded by this one call, in one pass of jsontext: there is
// no second decoder whose rules could differ.
var decodeOptions = jsonv2.RejectUnknownMembers(true)

// patchDecodeOptions are decodeOptions for an endpoint update, which has
// the one field whose null differs from its absence
// (decodeRateLimitPatch). Only that body pays for the lookup of an
// unmarshaler of its own that every value then costs (a third of an
// ingest's decode, BenchmarkDecodeBody_Ingest).
var patchDecodeOptions = jsonv2.JoinOptions(
	decodeOptions,
	jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(decodeRateLimitPatch)),
)

// decodeRateLimitPatch decodes rate_limit of an endpoint update: present,
// it is Set; null removes the limit (Limit nil); an object is decoded
// into Limit by the same decoder, with the same rules.
func decodeRateLimitPatch(dec *jsontext.Decoder, p *engine.RateLimitPatch) error {
	p.Set = true
	if dec.PeekKind() == 'n' {
		p.Limit = nil
		_, err := dec.ReadToken()
		return err
	}
	p.Limit = new(engine.RateLimitInput)
	return jsonv2.UnmarshalDecode(dec, p.Limit)
}

// isJSONMediaType reports whether a Content-Type header names
// application/json (parameters such as charset are ignored).
func isJSONMediaType(contentType string) bool {
	switch contentType {
	case "":
		return false
	case "application/json": // what nearly every client sends
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// decodeError turns an error of jsonv2.Unmarshal of body into dst into an
// *engine.Error. Byte offsets are 0-based: the offending byte, or the
// length of body when it ends too soon.
func decodeError(body []byte, dst any, err error) error {
	if se, ok := errors.AsType[*jsontext.SyntacticError](err); ok {
		return syntacticError(body, se)
	}
	if se, ok := errors.AsType[*jsonv2.SemanticError](err); ok {
		return semanticError(dst, se)
	}
	// Anything else is a bug here, not the client's: leave it uncoded so
	// it is logged as internal.
	return err
}

// syntacticError is the invalid_json error for se. Errors about a name or
// a string (duplicate names, invalid UTF-8, lone surrogates) name the
// top-level field they are in; a plain syntax error names none, since where
// the JSON breaks says little about which field the client meant.
func syntacticError(body []byte, se *jsontext.SyntacticError) error {
	off, ptr := se.ByteOffset, se.JSONPointer
	at := body[min(off, int64(len(body))):]
	switch {
	case errors.Is(se.Err, io.ErrUnexpectedEOF):
		return engine.Errorf(engine.CodeInvalidJSON, "", "malformed JSON: the body ends at byte offset %d in the middle of a value", len(body))
	case errors.Is(se.Err, jsontext.ErrDuplicateName):
		return engine.Errorf(engine.CodeInvalidJSON, topField(ptr), "duplicate name %q%s at byte offset %d: a name may appear once in an object (RFC 7493 §2.3)",
			clip(ptr.LastToken()), within(ptr.Parent()), off)
	case off > 0 && ptr == "" && off >= firstValueEnd(body):
		return engine.Errorf(engine.CodeInvalidJSON, "", "unexpected data after the JSON object, which ends at byte offset %d", firstValueEnd(body))
	case isSurrogateEscape(at):
		return engine.Errorf(engine.CodeInvalidJSON, topField(ptr), "lone surrogate %s%s at byte offset %d: a \\u escape of a UTF-16 surrogate must be a high one (\\uD800-\\uDBFF) followed by a low one (\\uDC00-\\uDFFF)",
			at[:6], within(ptr), off)
	case len(at) > 0 && at[0] >= utf8.RuneSelf && !startsWithRune(at):
		return engine.Errorf(engine.CodeInvalidJSON, topField(ptr), "invalid UTF-8%s at byte offset %d: JSON text must be UTF-8 (RFC 8259 §8.1)", within(ptr), off)
	}
	return engine.Errorf(engine.CodeInvalidJSON, "", "malformed JSON at byte offset %d: %s", off, se.Err)
}

// semanticError is the invalid_field error for se: an unknown name, or a
// value of the wrong kind for dst's field.
func semanticError(dst any, se *jsonv2.SemanticError) error {
	off, ptr := se.ByteOffset, se.JSONPointer
	field := topField(ptr)
	if errors.Is(se.Err, jsonv2.ErrUnknownName) {
		name := clip(ptr.LastToken())
		if known := caseVariant(reflect.TypeOf(dst), name); known != "" && ptr.Parent() == "" {
			return engine.Errorf(engine.CodeInvalidField, field, "unknown field %q at byte offset %d: names are case-sensitive; did you mean %q?", name, off, known)
		}
		return engine.Errorf(engine.CodeInvalidField, field, "unknown field %q at byte offset %d", name, off)
	}
	if field == "" {
		return engine.Errorf(engine.CodeInvalidJSON, "", "request body must be a JSON object")
	}
	name := field
	if ptr.Parent() != "" {
		name = clip(string(ptr))
	}
	if se.GoType == reflect.TypeFor[time.Time]() {
		return engine.Errorf(engine.CodeInvalidField, field, "%s must be an RFC 3339 time, like 2026-12-02T14:00:00Z (byte offset %d)", name, off)
	}
	want, got := jsonKind(se.GoType), kindName(se.JSONKind)
	if got == "" || strings.HasSuffix(want, got) {
		return engine.Errorf(engine.CodeInvalidField, field, "%s has a value out of range for %s (byte offset %d)", name, want, off)
	}
	return engine.Errorf(engine.CodeInvalidField, field, "%s must be %s, not %s (byte offset %d)", name, want, got, off)
}

// firstValueEnd is the offset just past the JSON value body starts with,
// or len(body)+1 when it does not start with one.
func firstValueEnd(body []byte) int64 {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if err := dec.SkipValue(); err != nil {
		return int64(len(body)) + 1
	}
	return dec.InputOffset()
}

// topField is the top-level member a JSON pointer is in ("" for none),
// clipped.
func topField(p jsontext.Pointer) string {
	for tok := range p.Tokens() {
		return clip(tok)
	}
	return ""
}

// within says where a pointer below the top level points: " in /data/a".
func within(p jsontext.Pointer) string {
	if p.Parent() == "" {
		return ""
	}
	return " in " + clip(string(p))
}

// maxNameInError bounds how much of a client's name or JSON pointer an
// error repeats, so that a problem stays small whatever the body.
const maxNameInError = 128

// clip returns s, or its first maxNameInError bytes (whole characters)
// and "…".
func clip(s string) string {
	if len(s) <= maxNameInError {
		return s
	}
	n := maxNameInError
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// isSurrogateEscape reports whether b starts with a \u escape of a UTF-16
// surrogate (U+D800-U+DFFF).
func isSurrogateEscape(b []byte) bool {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' || b[2]|0x20 != 'd' {
		return false
	}
	c := b[3] | 0x20 // lower case
	return '8' <= c && c <= '9' || 'a' <= c && c <= 'f'
}

// startsWithRune reports whether b starts with a valid UTF-8 sequence.
func startsWithRune(b []byte) bool {
	r, n := utf8.DecodeRune(b)
	return r != utf8.RuneError || n > 1
}

// caseVariant returns the JSON name of a field of the struct t (or of
// what t points to) that equals name but for case, or "".
func caseVariant(t reflect.Type, name string) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return ""
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-" || !f.IsExported() && !f.Anonymous:
		case f.Anonymous && tag == "":
			if v := caseVariant(f.Type, name); v != "" {
				return v
			}
		default:
			if tag == "" {
				tag = f.Name
			}
			if strings.EqualFold(tag, name) {
				return tag
			}
		}
	}
	return ""
}

// jsonKind names the JSON type that decodes into t, with an article.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another type"
}

// kindName names a JSON value kind, with an article ("" for none).
func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return ""
}

// writeJSON answers v as application/json with status. It is the only
// encoder of success responses.
func (s *server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	s.writeBody(w, r, "application/json", status, v)
}

// encodeOptions are those of every JSON answer: encoding/json's (v1)
// semantics, which the answers' shapes were written for (omitempty, nil
// slices as null, durations in nanoseconds, sorted map keys, invalid UTF-8
// in a string replaced by U+FFFD), except that
//   - nothing is escaped for HTML or JavaScript: a stored envelope is shown
//     byte for byte as it was delivered (a json.RawMessage is copied as it
//     is, whitespace aside), and answers are application/json with nosniff,
//     never HTML;
//   - every time.Time is written in engine.TimeFormat (UTC, exactly three
//     fraction digits), like the envelope's created.
var encodeOptions = jsonv2.JoinOptions(
	jsonv1.DefaultOptionsV1(),
	jsontext.EscapeForHTML(false),
	jsontext.EscapeForJS(false),
	jsonv2.WithMarshalers(jsonv2.MarshalToFunc(func(enc *jsontext.Encoder, t time.Time) error {
		b := enc.AvailableBuffer()
		return enc.WriteValue(append(t.UTC().AppendFormat(append(b, '"'), engine.TimeFormat), '"'))
	})),
)

// writeBody encodes v before writing anything, so that an encoding failure
// can still be answered with a clean 500.
func (s *server) writeBody(w http.ResponseWriter, r *http.Request, contentType string, status int, v any) {
	b, err := jsonv2.Marshal(v, encodeOptions)
	if err != nil {
		s.log.ErrorContext(r.Context(), "httpapi: encode response",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("error", err.Error()))
		if contentType == "application/problem+json" {
			// Encoding a problem cannot fail; if it did, do not recurse.
			http.Error(w, internalDetail, http.StatusInternalServerError)
			return
		}
		s.writeError(w, r, err)
		return
	}
	b = append(b, '\n')
	h := w.Header() // the keys are canonical: set without Set's canonicalizing
	h["Content-Type"] = []string{contentType}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	w.Write(b) // the status is sent; a write error means the client went away
}
