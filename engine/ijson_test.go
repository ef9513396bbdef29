package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// dataReference is what appendData must make of data, read another way:
// jsontext (the tokenizer of encoding/json/v2, which the request decoder
// uses) for the JSON, UTF-8, lone surrogates and repeated names,
// json.Compact for the compacted bytes, and a walk of encoding/json's
// reading for the noncharacters and the numbers. It returns the
// compacted data, or the code of appendData's error; either is "" when
// data has more than one fault that comes first depends on where.
func dataReference(data []byte) (compacted []byte, code Code, either bool) {
	deep := tooDeep(data)
	if !jsontext.Value(bytes.Trim(data, " \t\r\n")).IsValid() {
		return nil, CodeInvalidJSON, deep
	}
	if deep {
		return nil, CodeInvalidField, !iJSON(data)
	}
	if !iJSON(data) {
		return nil, CodeInvalidJSON, false
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		panic(err)
	}
	return buf.Bytes(), "", false
}

// tooDeep reports whether data nests deeper than MaxDataDepth before
// its first syntax error.
func tooDeep(data []byte) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	for {
		if _, err := dec.ReadToken(); err != nil {
			return false
		}
		if dec.StackDepth() > MaxDataDepth {
			return true
		}
	}
}

// iJSON reports whether the valid JSON data has no noncharacter in a
// string or name and no number beyond a float64.
func iJSON(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return true // too deep for encoding/json: the depth decides
	}
	return iJSONValue(x)
}

func iJSONValue(x any) bool {
	text := func(s string) bool {
		for _, r := range s {
			if 0xFDD0 <= r && r <= 0xFDEF || r%0x10000 >= 0xFFFE {
				return false
			}
		}
		return true
	}
	switch x := x.(type) {
	case string:
		return text(x)
	case json.Number:
		f, _ := strconv.ParseFloat(string(x), 64)
		return !math.IsInf(f, 0)
	case []any:
		for _, e := range x {
			if !iJSONValue(e) {
				return false
			}
		}
	case map[string]any:
		for k, e := range x {
			if !text(k) || !iJSONValue(e) {
				return false
			}
		}
	}
	return true
}

// checkAppendData fails unless appendData(prefix, data) appends what
// dataReference makes of data, or fails with its code, naming the field
// and a byte offset within data, and leaving dst as it was.
func checkAppendData(t *testing.T, data []byte) {
	t.Helper()
	prefix := []byte("type\x00v1\x00")
	got, err := appendData(bytes.Clone(prefix), data, "data")
	want, code, either := dataReference(data)
	switch {
	case code == "" && err != nil:
		t.Fatalf("appendData(%.80q) error %v, want %.80q", data, err, want)
	case code == "":
		if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
			t.Fatalf("appendData(%.80q) = %.80q, want %.80q", data, got, want)
		}
		return
	case err == nil:
		t.Fatalf("appendData(%.80q) took it, want code %s", data, code)
	case ErrorCode(err) != code && !either:
		t.Fatalf("appendData(%.80q) error %v, want code %s", data, err, code)
	}
	if !bytes.Equal(got, prefix) {
		t.Fatalf("appendData(%.80q) failed but changed dst to %.80q", data, got)
	}
	e := err.(*Error)
	if e.Field != "data" {
		t.Fatalf("appendData(%.80q) error %v names field %q, want data", data, err, e.Field)
	}
	var off int
	if i := strings.Index(e.Message, "byte offset "); i < 0 {
		t.Fatalf("appendData(%.80q) error %q names no byte offset", data, e.Message)
	} else if _, err := fmt.Sscanf(e.Message[i:], "byte offset %d", &off); err != nil || off < 0 || off > len(data) {
		t.Fatalf("appendData(%.80q) error %q: offset %d outside data", data, e.Message, off)
	}
}

// TestAppendData_IJSON: data must be I-JSON (RFC 7493): on top of valid
// UTF-8 JSON, no name twice in an object, no lone surrogate escape, no
// noncharacter raw or escaped, no number a double cannot hold. Each
// refusal says what and where, counted in bytes of data as sent.
func TestAppendData_IJSON(t *testing.T) {
	digits := strings.Repeat("9", 10000)
	tests := []struct {
		name string
		data string
		want string // "" when taken; else the code, the field and a part of the message
	}{
		{"name twice", `{"a":1,"a":2}`, `invalid_json: data: duplicate name "a" at byte offset 7 of data`},
		{"name twice, deep", `{"x":[{"k":1},{"k":1,"k":2}]}`, `duplicate name "k" at byte offset 21 of data`},
		{"name twice, once escaped", `{"b":1,"\u0062":2}`, `duplicate name "b" at byte offset 7 of data`},
		{"name twice, both escaped differently", `{"\u00e9":1,"\u00E9":2}`, `duplicate name "é" at byte offset 12 of data`},
		{"name twice in a large object", `{` + manyNames(40) + `,"n7":0}`, `duplicate name "n7" at byte offset`},
		{"name twice after the large object's names", `{` + manyNames(40) + `,"z":0,"z":1}`, `duplicate name "z"`},
		{"names again in a sibling and a child", `[{"a":{"a":1}},{"a":2,"A":3}]`, ``},
		{"a large object without repeats", `{` + manyNames(300) + `}`, ``},
		{"lone high surrogate", `"x\ud800"`, `invalid_json: data: lone surrogate \ud800 at byte offset 2 of data`},
		{"lone low surrogate", `["\uDC00"]`, `lone surrogate \uDC00 at byte offset 2 of data`},
		{"high then not low", `"\ud83d\u0041"`, `lone surrogate \ud83d at byte offset 1`},
		{"two highs", `"\ud83d\ud83d"`, `lone surrogate \ud83d at byte offset 1`},
		{"high at the end", `"\ud83d"`, `lone surrogate`},
		{"high then a short escape", `"\ud83d\n"`, `lone surrogate`},
		{"noncharacter U+FFFF raw", "{\"s\":\"a\uffff\"}", `invalid_json: data: noncharacter U+FFFF at byte offset 7 of data`},
		{"noncharacter U+FFFE raw", "\"\ufffe\"", `noncharacter U+FFFE at byte offset 1`},
		{"noncharacter U+FDD0 raw", "\"\ufdd0\"", `noncharacter U+FDD0`},
		{"noncharacter U+FDEF raw", "\"\ufdef\"", `noncharacter U+FDEF`},
		{"noncharacter U+1FFFE raw", "\"\U0001fffe\"", `noncharacter U+1FFFE`},
		{"noncharacter U+10FFFF raw", "\"\U0010ffff\"", `noncharacter U+10FFFF`},
		{"noncharacter in a name", "{\"\uffff\":1}", `noncharacter U+FFFF at byte offset 2`},
		{"noncharacter escaped", `{"s":"\uFFFF"}`, `noncharacter U+FFFF at byte offset 6 of data`},
		{"noncharacter escaped, lower case", `"\ufffe"`, `noncharacter U+FFFE`},
		{"noncharacter U+FDD0 escaped", `"\uFDD0"`, `noncharacter U+FDD0`},
		{"noncharacter U+1FFFE as a surrogate pair", `"\ud83f\udffe"`, `noncharacter U+1FFFE at byte offset 1`},
		{"noncharacter U+10FFFF as a surrogate pair", `"\uDBFF\uDFFF"`, `noncharacter U+10FFFF`},
		{"characters beside the noncharacters", "\"\ufdcf\ufdf0\ufffd\ufffc\U0001fffd\U0010fffd\\ufdcf\\ufffd\\ud83f\\udffd\\ud83d\\ude00\"", ``},
		{"1e400", `{"n":1e400}`, `invalid_json: data: number 1e400 at byte offset 5 of data`},
		{"-1e400", `[-1e400]`, `number -1e400 at byte offset 1`},
		{"1e999999999", `1e999999999`, `number 1e999999999 at byte offset 0`},
		{"1E+309", `1E+309`, `number 1E+309`},
		{"10e308", `10e308`, `number 10e308`},
		{"0.001e312", `0.001e312`, `number 0.001e312`},
		{"just over the largest double", `1.7976931348623159e308`, `number 1.7976931348623159e308`},
		{"10 000 digits", digits, `number 9999999999999999999999999999999999999999…`},
		{"10 000 digits, negative", `[-` + digits + `]`, `at byte offset 1 of data`},
		{"an exponent of many digits", `1e` + strings.Repeat("9", 400), `number 1e999`},
		{"the largest double", `1.7976931348623157e308`, ``},
		{"rounds to the largest double", `1.7976931348623158e308`, ``},
		{"1e308", `[1e308,-1E+308,0.0001e312,100e306]`, ``},
		{"precision lost: 2^53+1", `9007199254740993`, ``},
		{"precision lost: 30 digits", `123456789012345678901234567890`, ``},
		{"underflow to zero", `[1e-400,-1e-999999999,0.` + strings.Repeat("0", 400) + `1]`, ``},
		{"zero with a huge exponent", `[0e999999999,0.000e400,-0,-0.0E+1000]`, ``},
		{"too deep", nested(MaxDataDepth + 1), `invalid_field: data: data nests objects and arrays more than 64 levels deep (byte offset`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkAppendData(t, []byte(tt.data))
			_, err := appendData(nil, []byte(tt.data), "data")
			if got := fmt.Sprint(err); tt.want == "" && err != nil || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("appendData(%.60q) = %v, want %q", tt.data, err, tt.want)
			}
		})
	}
}

// manyNames is n members "n0":0, "n1":1, … of an object.
func manyNames(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"n%d":%d`, i, i)
	}
	return b.String()
}

// TestPutEventType_Example: the catalogue's example is held to the rules
// of an event's data, naming "example".
func TestPutEventType_Example(t *testing.T) {
	for _, tt := range []struct {
		example string
		code    Code
	}{
		{`{"a":1,"a":2}`, CodeInvalidJSON},
		{`{"s":"\ud800"}`, CodeInvalidJSON},
		{`{"s":"\uffff"}`, CodeInvalidJSON},
		{"{\"s\":\"\ufdd0\"}", CodeInvalidJSON},
		{`{"n":1e400}`, CodeInvalidJSON},
		{`{"n":` + strings.Repeat("1", 400) + `}`, CodeInvalidJSON},
		{nested(MaxDataDepth + 1), CodeInvalidField},
		{`{"n":9007199254740993,"s":"é"}`, ""},
	} {
		t.Run(tt.example[:min(len(tt.example), 30)], func(t *testing.T) {
			svc := NewService(catalogueStore{}, nil, ServiceOptions{})
			_, _, err := svc.PutEventType(t.Context(), "order.created", EventTypeInput{Example: json.RawMessage(tt.example)})
			if tt.code == "" {
				if e, ok := err.(*Error); ok && e.Field == "example" {
					t.Fatalf("PutEventType: %v, want the example taken", err)
				}
				return
			}
			e, ok := err.(*Error)
			if !ok || e.Code != tt.code || e.Field != "example" || !strings.Contains(e.Message, "byte offset") {
				t.Fatalf("PutEventType: %v, want %s naming example and an offset", err, tt.code)
			}
		})
	}
}

// catalogueStore takes any event type; any other call panics.
type catalogueStore struct{ Store }

func (catalogueStore) PutEventType(_ context.Context, et EventType) (EventType, bool, error) {
	return et, true, nil
}

// FuzzAppendData holds appendData to dataReference: it takes exactly
// the I-JSON data no deeper than MaxDataDepth and compacts it as
// json.Compact does; it refuses the rest with the reference's code,
// naming the field and an offset within data, and leaves dst as it was.
func FuzzAppendData(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":[true,false,null,-0.5e-3]}`, ` { "a" : "x\"y" } `, `{"a":1,"\u0061":2}`, `"\ud83d\ude00\ud800"`,
		"\"\uffff\ufdd0\U0010ffff\"", `"\uDBFF\uDFFF\ud83f\udffe"`, `[1e400,1e308,1e-400,9007199254740993]`,
		strings.Repeat("9", 400), nested(MaxDataDepth), nested(MaxDataDepth + 1), "\"\xff\"", `{` + manyNames(20) + `,"n3":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAppendData(t, data)
	})
}
