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
			err := checkDataDepth([]byte(tt.data))
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
		if got := checkDataDepth([]byte(s)) == nil; got != want {
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
