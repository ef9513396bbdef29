package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// nested returns depth levels of alternating arrays and objects around 1.
func nested(depth int) string {
	var open, close strings.Builder
	for i := range depth {
		if i%2 == 0 {
			open.WriteString(`[`)
			close.WriteString(`]`)
		} else {
			open.WriteString(`{"k":`)
			close.WriteString(`}`)
		}
	}
	c := []byte(close.String())
	for i, j := 0, len(c)-1; i < j; i, j = i+1, j-1 {
		c[i], c[j] = c[j], c[i]
	}
	return open.String() + "1" + string(c)
}

func TestCheckDataDepth(t *testing.T) {
	tests := []struct {
		name string
		data string
		ok   bool
	}{
		{"scalar", `42`, true},
		{"flat", `{"a":1,"b":[1,2,3]}`, true},
		{"at the limit", nested(MaxDataDepth), true},
		{"one over", nested(MaxDataDepth + 1), false},
		{"far over", nested(5000), false},
		{"brackets in strings do not count", `{"s":"` + strings.Repeat("[{", 500) + `"}`, true},
		{"escaped quotes in strings", `{"s":"\"[[[[\\"}`, true},
		{"wide, not deep", `[` + strings.Repeat(`[1],`, 1000) + `[1]]`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !json.Valid([]byte(tt.data)) {
				t.Fatalf("test data is not JSON: %.60s", tt.data)
			}
			err := checkDataDepth([]byte(tt.data), "data")
			if tt.ok != (err == nil) {
				t.Fatalf("checkDataDepth = %v, want ok %v", err, tt.ok)
			}
			if err != nil && (ErrorCode(err) != CodeInvalidField || err.(*Error).Field != "data") {
				t.Errorf("error %v, want invalid_field data", err)
			}
		})
	}
}

// FuzzCheckDataDepth compares the scanner with a real parse: valid JSON
// passes exactly when its nesting is at most MaxDataDepth.
func FuzzCheckDataDepth(f *testing.F) {
	for _, s := range []string{`1`, `"x"`, `{"a":[1,{"b":"]"}]}`, `"\\\""`, nested(MaxDataDepth), nested(MaxDataDepth + 1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return
		}
		want := depthOf(v) <= MaxDataDepth
		if got := checkDataDepth([]byte(s), "data") == nil; got != want {
			t.Fatalf("checkDataDepth(%.80q) ok = %v, depth %d", s, got, depthOf(v))
		}
	})
}

func depthOf(v any) int {
	d := 0
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			d = max(d, depthOf(e))
		}
		return d + 1
	case map[string]any:
		for _, e := range v {
			d = max(d, depthOf(e))
		}
		return d + 1
	}
	return 0
}

// compactReference is json.Compact with the depth limit and the UTF-8
// check: the result and error appendData must reproduce.
func compactReference(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, Errorf(CodeInvalidJSON, "data", "data is not valid JSON")
	}
	if !utf8.Valid(data) {
		return nil, Errorf(CodeInvalidJSON, "data", "data is not valid UTF-8")
	}
	if err := checkDataDepth(buf.Bytes(), "data"); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkAppendData fails unless appendData(prefix, data) appends what
// compactReference returns, or returns its error.
func checkAppendData(t *testing.T, data []byte) {
	t.Helper()
	prefix := []byte("type\x00v1\x00")
	got, err := appendData(bytes.Clone(prefix), data, "data")
	want, wantErr := compactReference(data)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("appendData(%.80q) error %v, want %v", data, err, wantErr)
	}
	if err == nil && (!bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want)) {
		t.Fatalf("appendData(%.80q) = %.80q, want %.80q", data, got, want)
	}
	if err != nil && !bytes.Equal(got, prefix) {
		t.Fatalf("appendData(%.80q) failed but changed dst to %.80q", data, got)
	}
}

func TestAppendData(t *testing.T) {
	tests := []struct {
		name string
		data string
	}{
		{"object", `{"amount":4200,"currency":"eur"}`},
		{"spaces everywhere", " \t\r\n{ \"a\" : [ 1 , 2 , { } , [ ] ] , \"b\" : \"x y\" } \n"},
		{"scalars", `[true,false,null,0,-0,1.5,-2e10,3E+2,4e-3,"",12345678901234567890]`},
		{"number", `42`},
		{"string", `"just a string"`},
		{"escapes", `"\" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00"`},
		{"long strings", `{"pad":"` + strings.Repeat("abcdefgh", 200) + `","k":"` + strings.Repeat(`x\"`, 50) + `"}`},
		{"html and separators kept as sent", `{"note":"<b>&</b> \u2028","raw":"` + "\u2028\u2029" + `"}`},
		{"not UTF-8", "\"\xff\xfe\""},
		{"overlong", "\"\xc0\xaf\""},
		{"a surrogate in UTF-8", "\"\xed\xa0\x80\""},
		{"a truncated sequence", "[\"\xe2\x82\"]"},
		{"every length of UTF-8", `"é € 😀 \u2028 ` + "\u2028\U0010FFFF\uFFFE" + `"`},
		{"empty object and array", `{"a":{},"b":[]}`},
		{"at the depth limit", nested(MaxDataDepth)},
		{"one over the depth limit", nested(MaxDataDepth + 1)},
		{"far over the depth limit", nested(20000)},
		{"too deep and then invalid: invalid wins", nested(MaxDataDepth+1) + `,`},
		{"empty", ``},
		{"only spaces", ` `},
		{"two values", `1 2`},
		{"trailing comma in object", `{"a":1,}`},
		{"trailing comma in array", `[1,]`},
		{"missing colon", `{"a" 1}`},
		{"unquoted key", `{a:1}`},
		{"mismatched close", `[1}`},
		{"unclosed", `{"a":[1,2]`},
		{"unterminated string", `"abc`},
		{"control character in string", "\"a\tb\""},
		{"bad escape", `"\x"`},
		{"short unicode escape", `"\u12"`},
		{"leading zero", `01`},
		{"bare minus", `-`},
		{"no fraction digits", `1.`},
		{"no exponent digits", `1e+`},
		{"plus sign", `+1`},
		{"partial literal", `tru`},
		{"literal with tail", `nullx`},
		{"capital literal", `True`},
		{"NUL", "\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkAppendData(t, []byte(tt.data))
		})
	}
}

// BenchmarkAppendData compacts and checks the data of a 1 KiB event, as
// ingest does, for a long string and for a typical object.
func BenchmarkAppendData(b *testing.B) {
	for _, bm := range []struct {
		name string
		data []byte
	}{
		{"pad", benchData},
		{"object", benchObject},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bm.data)))
			buf := make([]byte, 0, len(bm.data))
			for b.Loop() {
				if _, err := appendData(buf, bm.data, "data"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
