package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// TestIngest_RefusesOutsideIJSON: data that is valid JSON but not
// I-JSON (RFC 7493), which encoding/json and JavaScript receivers cannot
// read as sent (a noncharacter, raw or escaped; a number no double
// holds), is 400 invalid_json naming data and the offset within it, at
// ingest and as a catalogue example, and changes nothing. Precision lost
// to a double (2^53+1, 1e-400) is taken and kept byte for byte.
func TestIngest_RefusesOutsideIJSON(t *testing.T) {
	e := newAPIEnv(t)
	e.fixture()
	before := e.snapshot()
	big := strings.Repeat("7", 4000)
	for _, tt := range []struct {
		name, data, detail string
	}{
		{"U+FFFF raw", "{\"s\":\"\uffff\"}", "noncharacter U+FFFF at byte offset 6 of data"},
		{"U+FFFE raw", "[\"ab\ufffe\"]", "noncharacter U+FFFE at byte offset 4 of data"},
		{"U+FFFF escaped", `{"s":"\uFFFF"}`, "noncharacter U+FFFF at byte offset 6 of data"},
		{"U+FDD0 escaped in a name", `{"\ufdd0":1}`, "noncharacter U+FDD0 at byte offset 2 of data"},
		{"U+1FFFE as a surrogate pair", `{"s":"x\ud83f\udffe"}`, "noncharacter U+1FFFE at byte offset 7 of data"},
		{"1e400", `{"n":1e400}`, "number 1e400 at byte offset 5 of data"},
		{"-1e999999999", `[0,-1e999999999]`, "number -1e999999999 at byte offset 3 of data"},
		{"4000 digits", `{"n":` + big + `}`, "at byte offset 5 of data"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":` + tt.data + `}`}),
				400, engine.CodeInvalidJSON, "data")
			if !strings.Contains(p.Detail, tt.detail) {
				t.Errorf("detail %q does not say %q", p.Detail, tt.detail)
			}
			body, _ := json.Marshal(map[string]json.RawMessage{"description": json.RawMessage(`"x"`), "example": json.RawMessage(tt.data)})
			p = checkProblem(t, e.do(req{method: "PUT", path: "/v1/event-types/payment.succeeded", body: string(body)}), 400, engine.CodeInvalidJSON, "example")
			if want := strings.Replace(tt.detail, "of data", "of example", 1); !strings.Contains(p.Detail, want) {
				t.Errorf("detail %q does not say %q", p.Detail, want)
			}
		})
	}
	if after := e.snapshot(); after != before {
		t.Errorf("refused data changed something:\n%s\nwas\n%s", after, before)
	}

	data := `{"id":9007199254740993,"tiny":1e-400,"big":1.7976931348623157e308,"s":"\ufffd\ud83d\ude00"}`
	var ing ingestJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":` + data + `}`}, 202, &ing)
	var ev struct {
		Event struct {
			Data json.RawMessage `json:"data"`
		} `json:"event"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/events/" + ing.ID}, 200, &ev)
	if string(ev.Event.Data) != data {
		t.Errorf("stored data %s, want %s as sent", ev.Event.Data, data)
	}
}
