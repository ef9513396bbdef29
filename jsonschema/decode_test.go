package jsonschema

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	sjs "github.com/santhosh-tekuri/jsonschema/v6"
)

// FuzzDecode holds decode to the library's UnmarshalJSON: on every input
// it gives the same value, or leaves the input to UnmarshalJSON (ok
// false), and it never takes an input UnmarshalJSON refuses.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"amount":4200,"currency":"EUR","lines":[{"sku":"A-1","qty":2}],"ok":true,"none":null,"f":false}`,
		`[]`, `{}`, `""`, `0`, `-0.5e+10`, `1E3`, `9007199254740993`, `"é\u00e9\n\"\\"`, `{"a":{"b":[1,[2,[3]]]}}`,
		` { "a" : [ 1 , 2 ] } `, `{"a":1,"a":2}`, `01`, `1.`, `-`, `.5`, `"\ud800"`, "\"\xff\"", "\"a\x01\"", `[1,]`, `{"a"}`, `tru`, `nul`,
		`[` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok, done := decode(data)
		defer done()
		want, err := sjs.UnmarshalJSON(bytes.NewReader(data))
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("decode(%q) = %#v; UnmarshalJSON refuses it: %v", data, got, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decode(%q) =\n\t%#v\nUnmarshalJSON gives\n\t%#v", data, got, want)
		}
	})
}

func TestDecode_CommonCaseRead(t *testing.T) {
	_, ok, done := decode(benchOrder)
	done()
	if !ok {
		t.Error("decode leaves a typical order to UnmarshalJSON")
	}
}

var benchOrder = []byte(`{"amount":4200,"currency":"EUR","customer":{"id":"cus_01JH0000000000000000000001","email":"jane@example.com"},"lines":[{"sku":"A-100","qty":2,"name":"Blue mug"}],"note":"\u00e9 x"}`)

// TestDecode_ReusedValuesStartEmpty: the maps and slices a decode
// reuses from the one before it hold nothing of that one's value, the
// large ones left out as well.
func TestDecode_ReusedValuesStartEmpty(t *testing.T) {
	big := `{` + strings.Repeat(`"k":1,`, 0)
	for i := range 100 {
		big += fmt.Sprintf(`"m%d":[%d,"x"],`, i, i)
	}
	big += `"end":{"a":[1,2,3],"b":{"c":"d"}}}`
	for i, data := range []string{big, `{"a":[],"b":{}}`, `[{"x":1},{"y":[true]}]`, big, `{"m1":{}}`, `[[],[[]]]`, `{}`} {
		got, ok, done := decode([]byte(data))
		want, err := sjs.UnmarshalJSON(strings.NewReader(data))
		if !ok || err != nil {
			t.Fatalf("%d: decode ok %v, UnmarshalJSON %v", i, ok, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%d: decode after the one before =\n\t%#v\nUnmarshalJSON gives\n\t%#v", i, got, want)
		}
		done()
	}
}
