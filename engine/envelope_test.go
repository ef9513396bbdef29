package engine

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestEncodeEnvelope checks the hand-written envelope byte for byte
// against encoding/json (HTML escaping off: data is kept as sent).
func TestEncodeEnvelope(t *testing.T) {
	created := time.Date(2026, 12, 2, 14, 35, 10, 123000000, time.UTC)
	tests := []struct {
		name, apiVersion, data string
	}{
		{"plain", "v1", `{"amount":4200,"currency":"eur"}`},
		{"quotes and unicode in api_version", `2026-12 "beta" \ é ✓`, `[1,2,3]`},
		{"html-ish data kept as sent", "v1", `{"note":"<b>&</b>","n":null}`},
		{"scalar data", "v1", `"just a string"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := encodeEnvelope("evt_x", "payment.succeeded", created, tt.apiVersion, []byte(tt.data))
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			err := enc.Encode(struct {
				ID         string          `json:"id"`
				Type       string          `json:"type"`
				Created    time.Time       `json:"created"`
				APIVersion string          `json:"api_version"`
				Data       json.RawMessage `json:"data"`
			}{"evt_x", "payment.succeeded", created, tt.apiVersion, json.RawMessage(tt.data)})
			if err != nil {
				t.Fatal(err)
			}
			if w := bytes.TrimSuffix(want.Bytes(), []byte("\n")); !bytes.Equal(got, w) {
				t.Errorf("got  %s\nwant %s", got, w)
			}
			if !json.Valid(got) {
				t.Error("not valid JSON")
			}
		})
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{
		"", "v1", "evt_01jdzq8m2y6n3v4w5x6y7z8a9b", "payment.succeeded", "2026-12 beta ~ DEL\x7f",
		`"quoted"`, `back\slash`, "<b>&amp;</b>", "tab\there", "nul\x00", "é ✓", "\u2028\u2029", "bad \xff utf-8",
	} {
		t.Run(s, func(t *testing.T) {
			want, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := appendJSONString([]byte("x"), s); !bytes.Equal(got, append([]byte("x"), want...)) {
				t.Errorf("appendJSONString(%q) = %s, want x%s", s, got, want)
			}
		})
	}
}

// FuzzAppendJSONString checks appendJSONString against json.Marshal.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"v1", "<>&", "\x7f", "é", "\xff", `"\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	})
}
