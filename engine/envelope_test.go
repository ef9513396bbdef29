package engine

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestEncodeEnvelope checks the hand-written envelope, with the
// sequence written in (NewEvent.Sequenced), byte for byte against
// encoding/json (HTML escaping off: data is kept as sent), with created
// in TimeFormat, and EnvelopeSequence reading the sequence back.
func TestEncodeEnvelope(t *testing.T) {
	created := time.Date(2026, 12, 2, 14, 35, 10, 123000000, time.UTC)
	tests := []struct {
		name, apiVersion, orderingKey, data string
		seq                                 uint64
	}{
		{"plain", "v1", "", `{"amount":4200,"currency":"eur"}`, 1},
		{"quotes and unicode in api_version", `2026-12 "beta" \ é ✓`, "", `[1,2,3]`, 42},
		{"html-ish data kept as sent", "v1", "", `{"note":"<b>&</b>","n":null}`, 7},
		{"scalar data", "v1", "", `"just a string"`, 1<<64 - 1},
		{"ordering key", "v1", "order_1001", `{}`, 1042},
		{"ordering key to escape", "v1", `cust "7" \\ é`, `{}`, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := Event{ID: "evt_x", Type: "payment.succeeded", Created: created, APIVersion: tt.apiVersion, OrderingKey: tt.orderingKey}
			ev.Body = encodeEnvelope(ev, []byte(tt.data))
			got := NewEvent{Event: ev}.Sequenced(tt.seq)
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			err := enc.Encode(struct {
				ID          string          `json:"id"`
				Type        string          `json:"type"`
				Created     string          `json:"created"`
				Sequence    uint64          `json:"sequence"`
				OrderingKey string          `json:"ordering_key,omitempty"`
				APIVersion  string          `json:"api_version"`
				Data        json.RawMessage `json:"data"`
			}{"evt_x", "payment.succeeded", "2026-12-02T14:35:10.123Z", tt.seq, tt.orderingKey, tt.apiVersion, json.RawMessage(tt.data)})
			if err != nil {
				t.Fatal(err)
			}
			if w := bytes.TrimSuffix(want.Bytes(), []byte("\n")); !bytes.Equal(got.Body, w) {
				t.Errorf("got  %s\nwant %s", got.Body, w)
			}
			if !json.Valid(got.Body) {
				t.Error("not valid JSON")
			}
			if got.Sequence != tt.seq {
				t.Errorf("Sequence = %d, want %d", got.Sequence, tt.seq)
			}
			if n := EnvelopeSequence(got.Body); n != tt.seq {
				t.Errorf("EnvelopeSequence = %d, want %d", n, tt.seq)
			}
			if n := EnvelopeSequence(ev.Body); n != 0 {
				t.Errorf("EnvelopeSequence of an envelope with none = %d", n)
			}
		})
	}
}

// TestSequenced_ForeignBody: a body PrepareEvent did not build (a
// test's, an import's) is stored as it is, with only Sequence set.
func TestSequenced_ForeignBody(t *testing.T) {
	ev := Event{ID: "evt_x", Type: "a.b", Created: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), Body: []byte(`{"id":"evt_x","type":"a.b"}`)}
	got := NewEvent{Event: ev}.Sequenced(9)
	if string(got.Body) != string(ev.Body) || got.Sequence != 9 {
		t.Errorf("Sequenced(9) of a foreign body = %s, %d", got.Body, got.Sequence)
	}
}

// TestEncodeEnvelope_Created: created always has exactly three fraction
// digits, in UTC, whatever the milliseconds and the zone of the time.
func TestEncodeEnvelope_Created(t *testing.T) {
	east := time.FixedZone("UTC+1", 3600)
	tests := []struct {
		created time.Time
		want    string
	}{
		{time.Date(2026, 12, 2, 14, 35, 10, 0, time.UTC), "2026-12-02T14:35:10.000Z"},
		{time.Date(2026, 12, 2, 14, 35, 10, 100e6, time.UTC), "2026-12-02T14:35:10.100Z"},
		{time.Date(2026, 12, 2, 14, 35, 10, 120e6, time.UTC), "2026-12-02T14:35:10.120Z"},
		{time.Date(2026, 12, 2, 14, 35, 10, 123e6, time.UTC), "2026-12-02T14:35:10.123Z"},
		{time.Date(2026, 12, 2, 14, 35, 10, 1e6, time.UTC), "2026-12-02T14:35:10.001Z"},
		{time.Date(2026, 12, 2, 15, 35, 10, 120e6, east), "2026-12-02T14:35:10.120Z"},
		{time.Date(2026, 12, 2, 14, 35, 10, 999999999, time.UTC), "2026-12-02T14:35:10.999Z"}, // truncated, never rounded up
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			body := encodeEnvelope(Event{ID: "evt_x", Type: "a.b", Created: tt.created, APIVersion: "v1"}, []byte(`1`))
			var env struct{ Created string }
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatal(err)
			}
			if env.Created != tt.want {
				t.Errorf("created %q, want %q", env.Created, tt.want)
			}
			if got := tt.created.Format(TimeFormat); tt.created.Location() == time.UTC && got != tt.want {
				t.Errorf("Format(TimeFormat) = %q, want %q", got, tt.want)
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
