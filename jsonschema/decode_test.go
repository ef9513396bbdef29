package jsonschema

import (
	"bytes"
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
		got, ok := decode(data)
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
	if _, ok := decode(benchOrder); !ok {
		t.Error("decode leaves a typical order to UnmarshalJSON")
	}
}

var benchOrder = []byte(`{"amount":4200,"currency":"EUR","customer":{"id":"cus_01JH0000000000000000000001","email":"jane@example.com"},"lines":[{"sku":"A-100","qty":2,"name":"Blue mug"}],"note":"\u00e9 x"}`)
