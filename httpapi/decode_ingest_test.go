package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/webhookd/webhookd/engine"
)

func TestDecodeBody_Ingest(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name string
		body string
		want string // the error; "": none
		in   engine.IngestInput
	}{
		{"valid", `{"type":"payment.succeeded","data":{"amount":4200,"currency":"eur"}}`, "",
			engine.IngestInput{Type: "payment.succeeded", Data: json.RawMessage(`{"amount":4200,"currency":"eur"}`)}},
		{"all three, any order", `{"data":[1,2],"api_version":"2026-12-01","type":"a.b"}`, "",
			engine.IngestInput{Type: "a.b", APIVersion: "2026-12-01", Data: json.RawMessage(`[1,2]`)}},
		{"whitespace everywhere, data kept as sent", " \r\n\t{ \"type\" : \"a.b\" ,\n \"data\" : { \"k\" : [ 1 , true , null ] } } \n", "",
			engine.IngestInput{Type: "a.b", Data: json.RawMessage(`{ "k" : [ 1 , true , null ] }`)}},
		{"ordering key", `{"type":"a.b","ordering_key":"order \u00e9","data":1}`, "",
			engine.IngestInput{Type: "a.b", OrderingKey: "order é", Data: json.RawMessage(`1`)}},
		{"empty object", `{}`, "", engine.IngestInput{}},
		{"data null", `{"type":"a.b","data":null}`, "", engine.IngestInput{Type: "a.b", Data: json.RawMessage(`null`)}},
		{"type null", `{"type":null,"data":1}`, "", engine.IngestInput{Data: json.RawMessage(`1`)}},
		{"escapes kept in data, decoded in type", `{"type":"a.\u0062","data":"\"\\\/\b\f\n\r\t\u00e9\u0000\ud83d\ude00"}`, "",
			engine.IngestInput{Type: "a.b", Data: json.RawMessage(`"\"\\\/\b\f\n\r\t\u00e9\u0000\ud83d\ude00"`)}},
		{"key with an escape", `{"typ\u0065":"a.b","data":1}`, "", engine.IngestInput{Type: "a.b", Data: json.RawMessage(`1`)}},
		{"UTF-8 of every length", `{"api_version":"v1 é ✓ 😀","data":"` + "\u2028<&>\U0010FFFF" + `"}`, "",
			engine.IngestInput{APIVersion: "v1 é ✓ 😀", Data: json.RawMessage(`"` + "\u2028<&>\U0010FFFF" + `"`)}},
		{"same name in sibling objects", `{"data":[{"a":1},{"a":2}],"type":"a.b"}`, "",
			engine.IngestInput{Type: "a.b", Data: json.RawMessage(`[{"a":1},{"a":2}]`)}},
		{"names that differ in case", `{"data":{"a":1,"A":2}}`, "", engine.IngestInput{Data: json.RawMessage(`{"a":1,"A":2}`)}},
		{"data at the depth limit", `{"data":` + deep(engine.MaxDataDepth) + `}`, "", engine.IngestInput{Data: json.RawMessage(deep(engine.MaxDataDepth))}},
		{"data over the depth limit (the engine refuses it)", `{"data":` + deep(engine.MaxDataDepth+1) + `}`, "", engine.IngestInput{Data: json.RawMessage(deep(engine.MaxDataDepth + 1))}},

		{"invalid UTF-8", "{\"type\":\"x.y\",\"data\":{\"s\":\"\xff\xfe\"}}", "invalid_json: data: invalid UTF-8 in /data/s at byte offset 27: JSON text must be UTF-8 (RFC 8259 §8.1)", engine.IngestInput{}},
		{"invalid UTF-8 in a top-level name", "{\"t\xffpe\":\"x.y\"}", "invalid_json: invalid UTF-8 at byte offset 3: JSON text must be UTF-8 (RFC 8259 §8.1)", engine.IngestInput{}},
		{"surrogate in UTF-8", "{\"type\":\"x.\xed\xa0\x80\"}", "invalid_json: type: invalid UTF-8 at byte offset 11: JSON text must be UTF-8 (RFC 8259 §8.1)", engine.IngestInput{}},
		{"lone surrogate", `{"type":"x.y","data":["\ud800"]}`, `invalid_json: data: lone surrogate \ud800 in /data/0 at byte offset 23: a \u escape of a UTF-16 surrogate must be a high one (\uD800-\uDBFF) followed by a low one (\uDC00-\uDFFF)`, engine.IngestInput{}},
		{"high surrogate then a letter", `{"data":"\uD83Dx"}`, `invalid_json: data: lone surrogate \uD83D at byte offset 9: a \u escape of a UTF-16 surrogate must be a high one (\uD800-\uDBFF) followed by a low one (\uDC00-\uDFFF)`, engine.IngestInput{}},
		{"duplicate type", `{"type":"a.b","type":"c.d","data":1}`, `invalid_json: type: duplicate name "type" at byte offset 14: a name may appear once in an object (RFC 7493 §2.3)`, engine.IngestInput{}},
		{"duplicate in data", `{"data":{"x":[{"k":1,"\u006b":2}]}}`, `invalid_json: data: duplicate name "k" in /data/x/0 at byte offset 21: a name may appear once in an object (RFC 7493 §2.3)`, engine.IngestInput{}},
		{"key in another case", `{"Type":"a.b","DATA":1}`, `invalid_field: Type: unknown field "Type" at byte offset 1: names are case-sensitive; did you mean "type"?`, engine.IngestInput{}},
		{"unknown field", `{"type":"a.b","data":{},"idempotency_key":"k"}`, `invalid_field: idempotency_key: unknown field "idempotency_key" at byte offset 24`, engine.IngestInput{}},
		{"json:\"-\" field", `{"type":"a.b","IdempotencyKey":"k"}`, `invalid_field: IdempotencyKey: unknown field "IdempotencyKey" at byte offset 14`, engine.IngestInput{}},
		{"type number", `{"type":1,"data":{}}`, "invalid_field: type: type must be a string, not a number (byte offset 8)", engine.IngestInput{}},
		{"version object", `{"api_version":{},"data":{}}`, "invalid_field: api_version: api_version must be a string, not an object (byte offset 15)", engine.IngestInput{}},
		{"version with a control character", "{\"api_version\":\"v\x01\",\"data\":1}", "invalid_json: malformed JSON at byte offset 17: invalid character '\\x01' in string (expecting non-control character)", engine.IngestInput{}},
		{"data far over the depth limit", `{"data":` + deep(20000) + `}`, "invalid_json: malformed JSON at byte offset 10007: exceeded max depth", engine.IngestInput{}},
		{"trailing object", `{"type":"a.b","data":{}} {}`, "invalid_json: unexpected data after the JSON object, which ends at byte offset 24", engine.IngestInput{}},
		{"trailing garbage", `{"data":1}x`, "invalid_json: unexpected data after the JSON object, which ends at byte offset 10", engine.IngestInput{}},
		{"syntax error in data", `{"type":"payment.succeeded","data":{"a":}}`, "invalid_json: malformed JSON at byte offset 40: invalid character '}' at start of value", engine.IngestInput{}},
		{"truncated", `{"type":"a.b","data":{`, "invalid_json: malformed JSON: the body ends at byte offset 22 in the middle of a value", engine.IngestInput{}},
		{"trailing comma", `{"type":"a.b","data":1,}`, "invalid_json: malformed JSON at byte offset 22: invalid character ',' at start of value", engine.IngestInput{}},
		{"bad number", `{"data":01}`, "invalid_json: malformed JSON at byte offset 9: invalid character '1' after object value (expecting ',' or '}')", engine.IngestInput{}},
		{"bad literal", `{"data":nul}`, "invalid_json: malformed JSON at byte offset 11: invalid character '}' in literal null (expecting 'l')", engine.IngestInput{}},
		{"array body", `[{"type":"a.b"}]`, "invalid_json: request body must be a JSON object", engine.IngestInput{}},
		{"invalid array body", "[\"\xff\"]", "invalid_json: invalid UTF-8 at byte offset 2: JSON text must be UTF-8 (RFC 8259 §8.1)", engine.IngestInput{}},
		{"BOM", "\ufeff{\"type\":\"a.b\",\"data\":{}}", "invalid_json: malformed JSON at byte offset 0: invalid character '\\ufeff' at start of value", engine.IngestInput{}},
		{"empty", ``, "invalid_json: request body is required: send a JSON object", engine.IngestInput{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in engine.IngestInput
			err := decodeBody("application/json", []byte(tt.body), &in, true)
			if got := fmt.Sprint(err); tt.want == "" && err != nil || tt.want != "" && got != tt.want {
				t.Fatalf("error\n%s\nwant\n%s", got, tt.want)
			}
			if err == nil && (in.Type != tt.in.Type || in.APIVersion != tt.in.APIVersion || !bytes.Equal(in.Data, tt.in.Data)) {
				t.Errorf("decoded %+v, want %+v", in, tt.in)
			}
		})
	}
}

// FuzzDecodeStrict checks the request decoder against an independent
// reading of the body (encoding/json's tokenizer, utf8.Valid and a scan of
// the \u escapes), for every body and for every body as the data of an
// ingest:
//   - it accepts exactly the bodies that are one JSON object of valid
//     UTF-8, with no lone surrogate escape, no name twice in any object,
//     only the exact names of engine.IngestInput at the top, type and
//     api_version and ordering_key strings (or null);
//   - what it accepts it decodes as the independent reading does: data
//     byte for byte as sent, type, api_version and ordering_key unescaped;
//   - what it refuses gets a coded client error, and one about the JSON
//     names the byte offset, within the body.
//
// It is seeded from FuzzDecodeIngest's corpus.
func FuzzDecodeStrict(f *testing.F) {
	f.Add([]byte(`{"type":"payment.succeeded","api_version":"v1","data":{"amount":4200,"currency":"eur"}}`))
	f.Add([]byte(`{"type":"a.b","ordering_key":"order \u00e9 1","data":{}}`))
	f.Add([]byte(`{"data":[1,{"a":"\u00e9\""}],"type":"a.b"} `))
	f.Add([]byte(`{"type":"a.b","data":{},"x":1}`))
	f.Add([]byte(`{"data":{"a":1,"\u0061":2}}`))
	f.Add([]byte(`{"data":"\ud83d\ude00\ud800\\ud800"}`))
	f.Add([]byte("{\"data\":\"\xed\xa0\x80\xc0\xaf\"}"))
	f.Add([]byte(`{"Type":"a.b","DATA":1}`))
	files, _ := filepath.Glob("testdata/fuzz/FuzzDecodeIngest/*")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		// go test fuzz v1, then string(content type), then []byte(body).
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 3 {
			continue
		}
		var body string
		if _, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimPrefix(lines[2], "[]byte("), ")"), "%q", &body); err == nil {
			f.Add([]byte(body))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecodeBody(t, body)
		// The same bytes as the data of a plain body, where most of the
		// decoder's work is.
		checkDecodeBody(t, append(append([]byte(`{"type":"a.b","data":`), body...), '}'))
	})
}

// checkDecodeBody fails unless decodeBody into an engine.IngestInput
// accepts body exactly when ingestReading does, with the same input, and
// refuses it with a coded error that names a byte offset within it.
func checkDecodeBody(t *testing.T, body []byte) {
	t.Helper()
	var in engine.IngestInput
	err := decodeBody("application/json", body, &in, true)
	want, ok := ingestReading(body)
	if ok != (err == nil) {
		t.Fatalf("decodeBody(%.200q) error %v; the independent reading accepts: %v", body, err, ok)
	}
	if err == nil {
		if in.Type != want.Type || in.APIVersion != want.APIVersion || in.OrderingKey != want.OrderingKey || !bytes.Equal(in.Data, want.Data) {
			t.Fatalf("decodeBody(%.200q) = %+v, the independent reading %+v", body, in, want)
		}
		return
	}
	e, isCoded := errors.AsType[*engine.Error](err)
	if !isCoded || e.Code != engine.CodeInvalidJSON && e.Code != engine.CodeInvalidField {
		t.Fatalf("decodeBody(%.200q) error %v, want invalid_json or invalid_field", body, err)
	}
	if strings.HasPrefix(e.Message, "request body ") {
		return // is required, or must be a JSON object
	}
	var off int
	if i := strings.Index(e.Message, "byte offset "); i < 0 {
		t.Fatalf("decodeBody(%.200q) error %q names no byte offset", body, e.Message)
	} else if _, err := fmt.Sscanf(e.Message[i:], "byte offset %d", &off); err != nil || off < 0 || off > len(body) {
		t.Fatalf("decodeBody(%.200q) error %q: offset %d outside the body", body, e.Message, off)
	}
}

// ingestReading is what decodeBody must make of body as an ingest, read
// with encoding/json (v1), utf8.Valid and a scan of the \u escapes instead
// of jsontext; ok is false when decodeBody must refuse body.
func ingestReading(body []byte) (in engine.IngestInput, ok bool) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(body) || !utf8.Valid(body) || hasLoneSurrogate(body) {
		return in, false
	}
	top, dup := objectNames(body)
	if dup {
		return in, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		panic(err) // valid JSON, an object
	}
	for _, name := range top {
		switch name {
		case "type", "api_version", "ordering_key":
			if v := m[name]; v[0] != '"' && v[0] != 'n' {
				return in, false
			}
		case "data":
		default:
			return in, false
		}
	}
	json.Unmarshal(m["type"], &in.Type)
	json.Unmarshal(m["api_version"], &in.APIVersion)
	json.Unmarshal(m["ordering_key"], &in.OrderingKey)
	in.Data = m["data"]
	return in, true
}

// hasLoneSurrogate reports whether the valid JSON b has a \u escape of a
// UTF-16 surrogate that is not a high one followed by a low one.
func hasLoneSurrogate(b []byte) bool {
	hex4 := func(h []byte) uint64 {
		n, _ := strconv.ParseUint(string(h), 16, 16)
		return n
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		i++ // the escaped character: in valid JSON there is one
		if b[i] != 'u' {
			continue
		}
		r := hex4(b[i+1 : i+5])
		i += 4
		switch {
		case 0xD800 <= r && r < 0xDC00:
			if i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
				if low := hex4(b[i+3 : i+7]); 0xDC00 <= low && low < 0xE000 {
					i += 6
					continue
				}
			}
			return true
		case 0xDC00 <= r && r < 0xE000:
			return true
		}
	}
	return false
}

// objectNames returns the top-level names of the valid JSON object b, and
// whether any object in b has a name twice.
func objectNames(b []byte) (top []string, dup bool) {
	type frame struct {
		names map[string]bool // nil in an array
		key   bool            // an object's next token is a name
	}
	var stack []frame
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err != nil {
			return top, dup
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{names: map[string]bool{}, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		default:
			if f := &stack[len(stack)-1]; f.names != nil && f.key {
				name := tok.(string)
				dup = dup || f.names[name]
				f.names[name], f.key = true, false
				if len(stack) == 1 {
					top = append(top, name)
				}
				continue
			}
		}
		if len(stack) > 0 && stack[len(stack)-1].names != nil {
			stack[len(stack)-1].key = true // a value ended: a name comes next
		}
	}
}

func TestReadBody(t *testing.T) {
	body := strings.Repeat("0123456789", 300)
	tests := []struct {
		name       string
		sent       string
		announced  int64 // Content-Length; -1: none
		max        int64
		wantTooBig bool
	}{
		{"announced", body, int64(len(body)), 4096, false},
		{"none announced", body, -1, 4096, false},
		{"announced more", body, 4000, 4096, false},
		{"announced less", body, 10, 4096, false},
		{"empty", "", 0, 4096, false},
		{"over the limit, announced", body, int64(len(body)), 100, true},
		{"over the limit, not announced", body, -1, 100, true},
		{"at the limit", body, int64(len(body)), int64(len(body)), false},
		{"one over the limit", body, int64(len(body)), int64(len(body)) - 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, wrap := range []func(io.Reader) io.Reader{
				func(r io.Reader) io.Reader { return r },
				iotest.OneByteReader,
				iotest.DataErrReader,
			} {
				rec := httptest.NewRecorder()
				r := http.MaxBytesReader(rec, io.NopCloser(wrap(strings.NewReader(tt.sent))), tt.max)
				got, err := readBody(r, min(tt.announced, tt.max))
				_, tooBig := errors.AsType[*http.MaxBytesError](err)
				if tooBig != tt.wantTooBig || !tooBig && err != nil {
					t.Fatalf("readBody error %v, want too big %v", err, tt.wantTooBig)
				}
				if !tooBig && string(got) != tt.sent {
					t.Errorf("readBody read %d bytes, want %d", len(got), len(tt.sent))
				}
			}
		})
	}
	t.Run("a read error", func(t *testing.T) {
		boom := errors.New("boom")
		if _, err := readBody(iotest.ErrReader(boom), 100); err != boom {
			t.Errorf("error %v, want %v", err, boom)
		}
	})
}

// BenchmarkDecodeBody_Ingest is the request decoder alone on the 1 KiB
// ingest body of BenchmarkIngest (ingest_bench_test.go).
func BenchmarkDecodeBody_Ingest(b *testing.B) {
	body := []byte(`{"type":"order.created","data":{"pad":"` + strings.Repeat("x", 1024-48) + `"}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var in engine.IngestInput
		if err := decodeBody("application/json", body, &in, true); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeBody_LongNames: an error repeats at most maxNameInError bytes
// of a client's name, cut between characters.
func TestDecodeBody_LongNames(t *testing.T) {
	long := strings.Repeat("é", 200)
	for _, body := range []string{
		`{"` + long + `":1}`,
		`{"data":{"` + long + `":1,"` + long + `":2}}`,
		`{"data":{"` + long + `":{"a":1,"a":2}}}`,
	} {
		err := decodeBody("application/json", []byte(body), new(engine.IngestInput), true)
		e, ok := errors.AsType[*engine.Error](err)
		if !ok || !utf8.ValidString(e.Message) || len(e.Message) > 2*maxNameInError+200 || !strings.Contains(e.Message, "é…") || len(e.Field) > maxNameInError+len("…") {
			t.Errorf("decodeBody(%.40q…) error %q", body, err)
		}
	}
}
