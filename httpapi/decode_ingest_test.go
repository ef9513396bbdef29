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
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/webhookd/webhookd/engine"
)

// generalIngestInput is engine.IngestInput under another name: the same
// fields and tags, so that decodeBody decodes it the same way, but not
// through decodeIngest. It is the reference the fast path must match.
type generalIngestInput engine.IngestInput

// prefilled is what both decodings start from, so that a difference in
// which fields they set shows.
func prefilled() engine.IngestInput {
	return engine.IngestInput{Type: "pre.filled", APIVersion: "pre", Data: json.RawMessage(`"pre"`)}
}

// checkDecodeIngest fails unless decodeBody gives the same error and the
// same input for body through the fast path as through the general
// decoder alone; it reports whether decodeIngest took body.
func checkDecodeIngest(t *testing.T, contentType string, body []byte) bool {
	t.Helper()
	got, want := prefilled(), generalIngestInput(prefilled())
	err := decodeBody(contentType, body, &got, true)
	wantErr := decodeBody(contentType, body, &want, true)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("decodeBody(%.100q) error %v, the general decoder's %v", body, err, wantErr)
	}
	if got.Type != want.Type || got.APIVersion != want.APIVersion || !bytes.Equal(got.Data, want.Data) || got.IdempotencyKey != want.IdempotencyKey {
		t.Fatalf("decodeBody(%.100q) = %+v, the general decoder's %+v", body, got, want)
	}
	fast := prefilled()
	took := decodeIngest(body, &fast)
	if !took && (fast.Type != "pre.filled" || fast.APIVersion != "pre" || string(fast.Data) != `"pre"`) {
		t.Fatalf("decodeIngest(%.100q) refused the body but changed its input to %+v", body, fast)
	}
	if took && err != nil {
		t.Fatalf("decodeIngest took %.100q, which decodeBody refuses: %v", body, err)
	}
	return took
}

func TestDecodeIngest(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name string
		body string
		fast bool   // taken by decodeIngest
		want string // the error, when there is one
	}{
		{"valid", `{"type":"payment.succeeded","data":{"amount":4200,"currency":"eur"}}`, true, ""},
		{"all three, any order", `{"data":[1,2],"api_version":"2026-12-01","type":"a.b"}`, true, ""},
		{"whitespace everywhere", " \r\n\t{ \"type\" : \"a.b\" ,\n \"data\" : { \"k\" : [ 1 , true , null ] } } \n", true, ""},
		{"empty object", `{}`, true, ""},
		{"type only", `{"type":"a.b"}`, true, ""},
		{"data of each kind", `{"data":[{},[],"s",-1.5e3,0,true,false,null]}`, true, ""},
		{"data null", `{"type":"a.b","data":null}`, true, ""},
		{"data string with escapes", `{"type":"a.b","data":"\"\\\/\b\f\n\r\t\u00e9"}`, true, ""},
		{"version UTF-8", `{"type":"a.b","api_version":"v1 é ✓","data":1}`, true, ""},
		{"empty strings", `{"type":"","api_version":"","data":""}`, true, ""},
		{"data at the depth limit", `{"data":` + deep(engine.MaxDataDepth) + `}`, true, ""},

		// The general decoder decides these, with its own errors.
		{"data over the depth limit (the engine refuses it)", `{"data":` + deep(engine.MaxDataDepth+1) + `}`, true, ""},
		{"key with an escape", `{"typ\u0065":"a.b","data":1}`, true, ""},
		{"type with an escape", `{"type":"a.\u0062","data":1}`, true, ""},
		{"data far over the depth limit", `{"data":` + deep(20000) + `}`, false, "invalid_json: malformed JSON at byte offset 10007: invalid character '[' exceeded max depth"},
		{"unknown field", `{"type":"a.b","data":{},"idempotency_key":"k"}`, false, `invalid_field: idempotency_key: unknown field "idempotency_key"`},
		{"json:\"-\" field", `{"type":"a.b","IdempotencyKey":"k"}`, false, `invalid_field: IdempotencyKey: unknown field "IdempotencyKey"`},
		{"key in other case", `{"Type":"a.b","DATA":1}`, false, ""},
		{"duplicate key", `{"type":"a.b","type":"c.d","data":1}`, false, ""},
		{"duplicate data", `{"data":[[[[1]]]],"data":2}`, false, ""},
		{"type number", `{"type":1,"data":{}}`, false, "invalid_field: type: type must be a string, not a number"},
		{"type null", `{"type":null,"data":{}}`, false, ""},
		{"version object", `{"api_version":{},"data":{}}`, false, "invalid_field: api_version: api_version must be a string, not an object"},
		{"data not UTF-8", "{\"type\":\"a.b\",\"data\":\"\xff\"}", false, ""},
		{"lone surrogate in type", `{"type":"a.\ud800","data":1}`, false, ""},
		{"version not UTF-8", "{\"api_version\":\"v\xff\",\"data\":1}", false, ""},
		{"version with a control character", "{\"api_version\":\"v\x01\",\"data\":1}", false, "invalid_json: malformed JSON at byte offset 17: invalid character '\\x01' in string literal"},
		{"trailing object", `{"type":"a.b","data":{}} {}`, false, "invalid_json: unexpected data after the JSON object, which ends at byte offset 26"},
		{"trailing garbage", `{"data":1}x`, false, "invalid_json: unexpected data after the JSON object, which ends at byte offset 10"},
		{"syntax error in data", `{"type":"payment.succeeded","data":{"a":}}`, false, "invalid_json: malformed JSON at byte offset 40: invalid character '}' looking for beginning of value"},
		{"truncated", `{"type":"a.b","data":{`, false, "invalid_json: malformed JSON: the body ends at byte offset 22 in the middle of a value"},
		{"trailing comma", `{"type":"a.b","data":1,}`, false, "invalid_json: malformed JSON at byte offset 23: invalid character '}' looking for beginning of object key string"},
		{"missing data value", `{"data":}`, false, "invalid_json: malformed JSON at byte offset 8: invalid character '}' looking for beginning of value"},
		{"bad number", `{"data":01}`, false, "invalid_json: malformed JSON at byte offset 9: invalid character '1' after object key:value pair"},
		{"bad literal", `{"data":nul}`, false, "invalid_json: malformed JSON at byte offset 11: invalid character '}' in literal null (expecting 'l')"},
		{"array body", `[{"type":"a.b"}]`, false, "invalid_json: request body must be a JSON object"},
		{"BOM", "\ufeff{\"type\":\"a.b\",\"data\":{}}", false, "invalid_json: malformed JSON at byte offset 0: invalid character 'ï' looking for beginning of value"},
		{"empty", ``, false, "invalid_json: request body is required: send a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			if fast := checkDecodeIngest(t, "application/json", body); fast != tt.fast {
				t.Errorf("taken by decodeIngest = %v, want %v", fast, tt.fast)
			}
			var in engine.IngestInput
			err := decodeBody("application/json", body, &in, true)
			if got := fmt.Sprint(err); tt.want != "" && got != tt.want || tt.want == "" && err != nil && tt.fast {
				t.Errorf("error %q, want %q", got, tt.want)
			}
		})
	}
}

// FuzzIngestFastPath checks decodeBody's ingest fast path against the
// general decoder: the same input or the same error for every body, and
// for every body as the data of an ingest, which the fast path must take
// when it is valid JSON within the depth limit. It is seeded from
// FuzzDecodeIngest's corpus. (Its name does not match -fuzz=FuzzDecodeIngest.)
func FuzzIngestFastPath(f *testing.F) {
	f.Add([]byte(`{"type":"payment.succeeded","api_version":"v1","data":{"amount":4200,"currency":"eur"}}`))
	f.Add([]byte(`{"data":[1,{"a":"\u00e9\""}],"type":"a.b"} `))
	f.Add([]byte(`{"type":"a.b","data":{},"x":1}`))
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
		checkDecodeIngest(t, "application/json", body)
		// The same bytes as the data of a plain body, where most of the
		// fast path's work is.
		wrapped := append(append([]byte(`{"type":"a.b","data":`), body...), '}')
		if took := checkDecodeIngest(t, "application/json", wrapped); !took && json.Valid(body) && utf8.Valid(body) && jsonDepth(body) <= engine.MaxDataDepth {
			t.Fatalf("decodeIngest refused valid data %.100q", body)
		}
	})
}

// jsonDepth is how deeply the valid JSON b nests objects and arrays.
func jsonDepth(b []byte) int {
	dec := json.NewDecoder(bytes.NewReader(b))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
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
