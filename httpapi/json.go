package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/webhookd/webhookd/engine"
)

// decodeJSON reads r's body into dst, which must be a pointer to a struct.
// It is the only request decoder (an ingest's body takes a faster path
// through it, decodeIngest, with the same results). The body is read through
// http.MaxBytesReader with limit max; it must be one JSON object with no
// unknown fields and nothing after it, sent as application/json. An empty
// (or all-whitespace) body leaves dst untouched: it is an error only when
// required is true, and needs no Content-Type.
//
// Every error a client can cause is an *engine.Error naming the field at
// fault where there is one: body_too_large, unsupported_media_type,
// invalid_json (with the byte offset) or invalid_field (with the JSON field
// name). Only a bad dst (a bug here) gives an uncoded error, hence a 500.
func decodeJSON(w http.ResponseWriter, r *http.Request, max int64, dst any, required bool) error {
	var body []byte
	if r.Body != nil {
		var err error
		body, err = readBody(http.MaxBytesReader(w, r.Body, max), min(r.ContentLength, max))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				return engine.Errorf(engine.CodeBodyTooLarge, "", "request body is larger than %d bytes", max)
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

// decodeBody is decodeJSON after the body has been read. What it decodes
// into dst may share body's memory (an ingest's data does).
func decodeBody(contentType string, body []byte, dst any, required bool) error {
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
		if !json.Valid(body) {
			return syntaxError(body)
		}
		return engine.Errorf(engine.CodeInvalidJSON, "", "request body must be a JSON object")
	}

	if in, ok := dst.(*engine.IngestInput); ok && decodeIngest(body, in) {
		return nil
	}
	return decodeObject(body, dst)
}

// decodeObject is decodeBody's general decoder, for a body that starts
// (after whitespace) with '{'.
func decodeObject(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(body, err)
	}
	// Exactly one value: anything but whitespace after it is an error.
	if _, err := dec.Token(); err != io.EOF {
		return engine.Errorf(engine.CodeInvalidJSON, "", "unexpected data after the JSON object, which ends at byte offset %d", dec.InputOffset())
	}
	return nil
}

// decodeIngest is decodeBody's fast path for an ingest, the one request
// sent at volume: one pass over body with jsontext (the tokenizer of
// encoding/json/v2, from github.com/go-json-experiment/json), no
// reflection, and data taken as a slice of body rather than copied (the
// engine compacts it). It takes only the plain case: one object holding
// "type" and "api_version" as strings and "data" as any value, each at
// most once, in any order, then only whitespace, all valid UTF-8. For that
// case it sets in exactly as the general decoder would and reports true.
// For anything else (other or repeated keys, a key in another case,
// null or non-string type, invalid UTF-8, invalid JSON, trailing data)
// it reports false, leaving in untouched, and decodeObject decides: bad
// input gets the general decoder's errors.
func decodeIngest(body []byte, in *engine.IngestInput) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	var (
		typ, version string
		data         []byte
		seen         [3]bool // type, api_version, data
	)
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return false
		}
		name := tok.String() // tok is valid only until the next read
		var field int        // index into seen
		switch name {
		case "type", "api_version":
			v, err := dec.ReadToken()
			if err != nil || v.Kind() != '"' {
				return false
			}
			if name == "type" {
				typ, field = v.String(), 0
			} else {
				version, field = v.String(), 1
			}
		case "data":
			v, err := dec.ReadValue()
			if err != nil {
				return false
			}
			end := int(dec.InputOffset()) // just past the value, which is body's bytes as sent
			data, field = body[end-len(v):end:end], 2
		default:
			return false
		}
		if seen[field] {
			return false
		}
		seen[field] = true
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '}' {
		return false
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return false // more after the object, or not JSON
	}
	if seen[0] {
		in.Type = typ
	}
	if seen[1] {
		in.APIVersion = version
	}
	if seen[2] {
		in.Data = data
	}
	return true
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

// decodeError turns an error from json.Decoder.Decode into an *engine.Error.
func decodeError(body []byte, err error) error {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return syntaxErrorAt(se, len(body))
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return engine.Errorf(engine.CodeInvalidJSON, "", "malformed JSON: the body ends at byte offset %d in the middle of a value", len(body))
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		if te.Field == "" {
			return engine.Errorf(engine.CodeInvalidJSON, "", "request body must be a JSON object")
		}
		return engine.Errorf(engine.CodeInvalidField, te.Field, "%s must be %s, not %s", te.Field, jsonKind(te.Type), article(te.Value))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if f, uerr := strconv.Unquote(name); uerr == nil {
			name = f
		}
		return engine.Errorf(engine.CodeInvalidField, name, "unknown field %q", name)
	}
	// Anything else (an *json.InvalidUnmarshalError, say) is a bug here,
	// not the client's: leave it uncoded so it is logged as internal.
	return err
}

// syntaxError reports where body, which is not valid JSON, stops being JSON.
func syntaxError(body []byte) error {
	var v any
	err := json.Unmarshal(body, &v)
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return syntaxErrorAt(se, len(body))
	}
	return engine.Errorf(engine.CodeInvalidJSON, "", "malformed JSON: the body ends at byte offset %d in the middle of a value", len(body))
}

// syntaxErrorAt is the invalid_json error for se in a body of n bytes. The
// offset it reports is 0-based: the offending byte, or n when the body ends
// too soon. (se.Offset counts the bytes read, the offending one included.)
func syntaxErrorAt(se *json.SyntaxError, n int) error {
	msg := strings.TrimPrefix(se.Error(), "json: ")
	off := se.Offset
	if off > 0 && !strings.Contains(msg, "unexpected end") {
		off--
	}
	if off > int64(n) {
		off = int64(n)
	}
	return engine.Errorf(engine.CodeInvalidJSON, "", "malformed JSON at byte offset %d: %s", off, msg)
}

// jsonKind names the JSON type that decodes into t, with an article.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[json.RawMessage]() {
		return "any JSON value"
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

// article prefixes a JSON value kind from *json.UnmarshalTypeError.Value
// ("string", "number 5", "array", ...) with "a" or "an".
func article(v string) string {
	if v == "" {
		return "this value"
	}
	switch v[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an " + v
	}
	return "a " + v
}

// writeJSON answers v as application/json with status. It is the only
// encoder of success responses.
func (s *server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	s.writeBody(w, r, "application/json", status, v)
}

// writeBody encodes v before writing anything, so that an encoding failure
// can still be answered with a clean 500.
func (s *server) writeBody(w http.ResponseWriter, r *http.Request, contentType string, status int, v any) {
	b, err := json.Marshal(v)
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
