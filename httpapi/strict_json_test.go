package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// hostileBodies are the ingest bodies the request decoder refuses, each
// with what the refusal must say: marker is the text the problem's byte
// offset must point at (its first occurrence in body).
var hostileBodies = []struct {
	name   string
	body   string
	status int
	code   engine.Code
	field  string
	marker string
	detail string // a part of the detail
}{
	{"invalid UTF-8 (the issue's)", "{\"type\":\"payment.succeeded\",\"data\":{\"s\":\"\xff\xfe\"}}", 400, engine.CodeInvalidJSON, "data", "\xff", "invalid UTF-8"},
	{"overlong slash", "{\"type\":\"payment.succeeded\",\"data\":{\"s\":\"a\xc0\xafb\"}}", 400, engine.CodeInvalidJSON, "data", "\xc0", "invalid UTF-8"},
	{"overlong three bytes", "{\"type\":\"payment.succeeded\",\"data\":{\"s\":\"\xe0\x80\xaf\"}}", 400, engine.CodeInvalidJSON, "data", "\xe0", "invalid UTF-8"},
	{"surrogate encoded in UTF-8", "{\"type\":\"payment.succeeded\",\"data\":{\"s\":\"\xed\xa0\x80\"}}", 400, engine.CodeInvalidJSON, "data", "\xed", "invalid UTF-8"},
	{"truncated sequence", "{\"type\":\"payment.succeeded\",\"data\":[\"\xe2\x82\"]}", 400, engine.CodeInvalidJSON, "data", "\xe2", "invalid UTF-8"},
	{"beyond U+10FFFF", "{\"type\":\"payment.succeeded\",\"data\":\"\xf4\x90\x80\x80\"}", 400, engine.CodeInvalidJSON, "data", "\xf4", "invalid UTF-8"},
	{"invalid UTF-8 in a name", "{\"type\":\"payment.succeeded\",\"data\":{\"k\xff\":1}}", 400, engine.CodeInvalidJSON, "data", "\xff", "invalid UTF-8"},
	{"invalid UTF-8 in type", "{\"type\":\"payment.succeeded\xff\",\"data\":{}}", 400, engine.CodeInvalidJSON, "type", "\xff", "invalid UTF-8"},
	{"invalid UTF-8 in api_version", "{\"type\":\"payment.succeeded\",\"api_version\":\"v\xff\",\"data\":{}}", 400, engine.CodeInvalidJSON, "api_version", "\xff", "invalid UTF-8"},
	{"lone high surrogate", `{"type":"payment.succeeded","data":{"s":"x\ud800"}}`, 400, engine.CodeInvalidJSON, "data", `\ud800`, `lone surrogate \ud800`},
	{"high surrogate, then not a low one", `{"type":"payment.succeeded","data":{"s":"\ud800\u0041"}}`, 400, engine.CodeInvalidJSON, "data", `\ud800`, "lone surrogate"},
	{"two high surrogates", `{"type":"payment.succeeded","data":{"s":"\ud83d\ud83d"}}`, 400, engine.CodeInvalidJSON, "data", `\ud83d`, "lone surrogate"},
	{"lone low surrogate", `{"type":"payment.succeeded","data":{"s":"\udc00"}}`, 400, engine.CodeInvalidJSON, "data", `\udc00`, "lone surrogate"},
	{"lone surrogate in a name, upper case", `{"type":"payment.succeeded","data":{"k\uD800":1}}`, 400, engine.CodeInvalidJSON, "data", `\uD800`, "lone surrogate"},
	{"lone surrogate in type", `{"type":"a.\ud800","data":1}`, 400, engine.CodeInvalidJSON, "type", `\ud800`, "lone surrogate"},
	{"names in another case (the issue's)", `{"Type":"payment.succeeded","DATA":{}}`, 422, engine.CodeInvalidField, "Type", `"Type"`, `did you mean "type"`},
	{"data in another case beside data", `{"type":"payment.succeeded","data":{},"Data":{}}`, 422, engine.CodeInvalidField, "Data", `"Data"`, `did you mean "data"`},
	{"duplicate type", `{"type":"invoice.paid","type":"payment.succeeded","data":{}}`, 400, engine.CodeInvalidJSON, "type", `"type":"payment`, `duplicate name "type"`},
	{"duplicate data", `{"type":"payment.succeeded","data":{"a":1},"data":{"b":2}}`, 400, engine.CodeInvalidJSON, "data", `"data":{"b"`, `duplicate name "data"`},
	{"duplicate name in data", `{"type":"payment.succeeded","data":{"a":{"b":1,"b":2}}}`, 400, engine.CodeInvalidJSON, "data", `"b":2`, `duplicate name "b" in /data/a`},
	{"duplicate name spelled with an escape", `{"type":"payment.succeeded","data":{"b":1,"\u0062":2}}`, 400, engine.CodeInvalidJSON, "data", `"\u0062"`, `duplicate name "b"`},
	{"duplicate name deep in an array", `{"type":"payment.succeeded","data":{"list":[{"id":1},{"id":2,"x":[{"k":1,"k":1}]}]}}`, 400, engine.CodeInvalidJSON, "data", `"k":1}`, `in /data/list/1/x/0`},
}

// TestIngest_RefusesBadBytes: the hostile bodies of issue 13 (item 5),
// which encoding/json took after the fast path refused them, are each
// refused with the problem, its byte offset and the field, and change
// nothing: no event in the feed, no delivery.
func TestIngest_RefusesBadBytes(t *testing.T) {
	e := newAPIEnv(t)
	e.fixture()
	before := e.snapshot()
	for _, tt := range hostileBodies {
		t.Run(tt.name, func(t *testing.T) {
			p := checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/acme/events", body: tt.body}), tt.status, tt.code, tt.field)
			off := strings.Index(tt.body, tt.marker)
			if off < 0 {
				t.Fatalf("marker %q not in the body", tt.marker)
			}
			if want := fmt.Sprintf("byte offset %d", off); !strings.Contains(p.Detail, want) {
				t.Errorf("detail %q does not say %q", p.Detail, want)
			}
			if !strings.Contains(p.Detail, tt.detail) {
				t.Errorf("detail %q does not say %q", p.Detail, tt.detail)
			}
		})
	}
	if after := e.snapshot(); after != before {
		t.Errorf("refused bodies changed something:\n%s\nwas\n%s", after, before)
	}
	var feed struct{ Data []json.RawMessage }
	e.must(req{method: "GET", path: "/v1/tenants/acme/events"}, 200, &feed)
	if len(feed.Data) != 0 {
		t.Errorf("the feed holds %d events after refused ingests, want none", len(feed.Data))
	}
}

// TestAPI_StrictJSONOnEveryBody: every request body goes through the same
// decoder as an ingest: names in their exact case, each once, valid UTF-8.
func TestAPI_StrictJSONOnEveryBody(t *testing.T) {
	e := newAPIEnv(t)
	ep := e.fixture()
	epPath := "/v1/tenants/acme/endpoints/" + ep.ID
	before := e.snapshot()
	tests := []struct {
		name   string
		rq     req
		status int
		code   engine.Code
		field  string
	}{
		{"tenant name in another case", req{method: "PUT", path: "/v1/tenants/acme", body: `{"Name":"Evil"}`}, 422, engine.CodeInvalidField, "Name"},
		{"tenant name twice", req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme","name":"Evil"}`}, 400, engine.CodeInvalidJSON, "name"},
		{"tenant name not UTF-8", req{method: "PUT", path: "/v1/tenants/acme", body: "{\"name\":\"\xff\"}"}, 400, engine.CodeInvalidJSON, "name"},
		{"description with a lone surrogate", req{method: "PUT", path: "/v1/event-types/payment.succeeded", body: `{"description":"\udfff"}`}, 400, engine.CodeInvalidJSON, "description"},
		{"endpoint event_types twice", req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://x.example/h","event_types":["payment.succeeded"],"event_types":["*"]}`}, 400, engine.CodeInvalidJSON, "event_types"},
		{"endpoint URL in another case", req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"URL":"https://x.example/h","event_types":["*"]}`}, 422, engine.CodeInvalidField, "URL"},
		{"patch in another case", req{method: "PATCH", path: epPath, body: `{"DISABLED":true}`}, 422, engine.CodeInvalidField, "DISABLED"},
		{"patch URL not UTF-8", req{method: "PATCH", path: epPath, body: "{\"url\":\"https://x.example/\xc3\"}"}, 400, engine.CodeInvalidJSON, "url"},
		{"rotate grace twice", req{method: "POST", path: epPath + "/secret/rotate", body: `{"grace":"1h","grace":"0s"}`}, 400, engine.CodeInvalidJSON, "grace"},
		{"replay range in another case", req{method: "POST", path: "/v1/tenants/acme/dead-letters/replay", body: `{"Since":"2026-01-01T00:00:00Z"}`}, 422, engine.CodeInvalidField, "Since"},
		{"replay range not a time", req{method: "POST", path: "/v1/tenants/acme/dead-letters/replay", body: `{"since":"yesterday"}`}, 422, engine.CodeInvalidField, "since"},
		{"access token ttl twice", req{method: "POST", path: "/v1/tenants/acme/access-tokens", body: `{"ttl":"1h","ttl":"720h"}`}, 400, engine.CodeInvalidJSON, "ttl"},
		{"verify body with a member", req{method: "POST", path: epPath + "/verify", body: `{"x":1}`}, 422, engine.CodeInvalidField, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := checkProblem(t, e.do(tt.rq), tt.status, tt.code, tt.field)
			if !strings.Contains(p.Detail, "byte offset ") {
				t.Errorf("detail %q names no byte offset", p.Detail)
			}
		})
	}
	if after := e.snapshot(); after != before {
		t.Errorf("refused bodies changed something:\n%s\nwas\n%s", after, before)
	}
}
