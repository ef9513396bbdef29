package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// TestAPI_EndpointSendTraceparent: every endpoint answer says whether it
// sends its attempts' traceparent (false unless asked for); create and
// PATCH take it, a PATCH without it leaves it, and a value that is not a
// boolean is 422 invalid_field naming it, changing nothing.
func TestAPI_EndpointSendTraceparent(t *testing.T) {
	e := newAPIEnv(t)
	ep := e.fixture()
	read := func(path string) map[string]json.RawMessage {
		t.Helper()
		var m map[string]json.RawMessage
		e.must(req{method: "GET", path: path}, 200, &m)
		return m
	}
	if got := string(read("/v1/tenants/acme/endpoints/" + ep.ID)["send_traceparent"]); got != "false" {
		t.Errorf("an endpoint created without it answers send_traceparent %s, want false", got)
	}
	var got struct {
		ID              string `json:"id"`
		SendTraceparent bool   `json:"send_traceparent"`
	}
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/traced","event_types":["*"],"send_traceparent":true}`}, 201, &got)
	if !got.SendTraceparent {
		t.Fatalf("created with send_traceparent true: answers %+v", got)
	}
	path := "/v1/tenants/acme/endpoints/" + got.ID
	for _, tc := range []struct {
		body string
		want string
	}{
		{`{"description":"orders"}`, "true"},
		{`{"send_traceparent":false}`, "false"},
		{`{"description":"again"}`, "false"},
		{`{"send_traceparent":true}`, "true"},
	} {
		e.must(req{method: "PATCH", path: path, body: tc.body}, 200, nil)
		if got := string(read(path)["send_traceparent"]); got != tc.want {
			t.Errorf("after PATCH %s: send_traceparent %s, want %s", tc.body, got, tc.want)
		}
	}
	before := e.snapshot()
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/tenants/acme/endpoints", `{"url":"https://hooks.example.com/bad","event_types":["*"],"send_traceparent":"yes"}`},
		{"PATCH", path, `{"send_traceparent":1}`},
	} {
		checkProblem(t, e.do(req{method: tc.method, path: tc.path, body: tc.body}), 422, engine.CodeInvalidField, "send_traceparent")
	}
	if after := e.snapshot(); after != before {
		t.Errorf("a refused change changed the state:\n%s\nwant\n%s", after, before)
	}
}
