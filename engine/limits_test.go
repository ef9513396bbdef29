package engine

import (
	"encoding/json"
	"strings"
	"testing"
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

// TestAppendData_Depth: data nests at most MaxDataDepth objects and
// arrays; what is in strings does not count.
func TestAppendData_Depth(t *testing.T) {
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
		{"empty containers count", strings.Repeat(`[`, MaxDataDepth) + `{}` + strings.Repeat(`]`, MaxDataDepth), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !json.Valid([]byte(tt.data)) {
				t.Fatalf("test data is not JSON: %.60s", tt.data)
			}
			_, err := appendData(nil, []byte(tt.data), "data")
			if tt.ok != (err == nil) {
				t.Fatalf("appendData = %v, want ok %v", err, tt.ok)
			}
			if err != nil && (ErrorCode(err) != CodeInvalidField || err.(*Error).Field != "data") {
				t.Errorf("error %v, want invalid_field data", err)
			}
		})
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
		{"every length of UTF-8", `"é € 😀 \u2028 ` + "\u2028\U0010FFFD\uFFFD" + `"`},
		{"noncharacters", `"` + "\U0010FFFF\uFFFE" + `"`},
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
