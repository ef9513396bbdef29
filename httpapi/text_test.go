package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// TestAPI_TextFieldsRefuseInvisibles: the characters of issue 29 (C1
// controls with CSI and NEL, the line separator, a bidi override, the
// BOM, tab, a noncharacter) in every text field a request can set are
// 422 invalid_field naming the field, whether the body escapes them or
// not, and change nothing; the Idempotency-Key header is held to the
// same rule.
func TestAPI_TextFieldsRefuseInvisibles(t *testing.T) {
	e := newAPIEnv(t)
	ep := e.fixture()
	epPath := "/v1/tenants/acme/endpoints/" + ep.ID
	chars := []string{"\u0080", "\u0085", "\u009b", "\u009f", "\u2028", "\u202e", "\ufeff", "\t", "\uffff"}
	fields := []struct {
		method, path, field string
		body                func(s string) map[string]any
	}{
		{"PUT", "/v1/tenants/acme", "name", func(s string) map[string]any { return map[string]any{"name": "Acme " + s + "Inc"} }},
		{"PUT", "/v1/event-types/payment.succeeded", "description", func(s string) map[string]any { return map[string]any{"description": "Paid " + s} }},
		{"POST", "/v1/tenants/acme/endpoints", "description", func(s string) map[string]any {
			return map[string]any{"url": "https://hooks.example.com/in", "event_types": []string{"*"}, "description": "ERP " + s}
		}},
		{"POST", "/v1/tenants/acme/endpoints", "url", func(s string) map[string]any {
			return map[string]any{"url": "https://hooks.example.com/in" + s, "event_types": []string{"*"}}
		}},
		{"PATCH", epPath, "description", func(s string) map[string]any { return map[string]any{"description": "ERP " + s} }},
		{"PATCH", epPath, "url", func(s string) map[string]any { return map[string]any{"url": "https://hooks.example.com/" + s} }},
		{"POST", "/v1/tenants/acme/portal-links", "return_url", func(s string) map[string]any {
			return map[string]any{"return_url": "https://app.example.com/" + s}
		}},
		{"POST", "/v1/tenants/acme/events", "ordering_key", func(s string) map[string]any {
			return map[string]any{"type": "payment.succeeded", "data": map[string]int{}, "ordering_key": "order" + s + "1"}
		}},
		{"POST", "/v1/tenants/acme/events", "api_version", func(s string) map[string]any {
			return map[string]any{"type": "payment.succeeded", "data": map[string]int{}, "api_version": "v1" + s}
		}},
	}
	state := func() string {
		r := e.do(req{method: "GET", path: "/v1/tenants/acme/access-tokens"})
		return e.snapshot() + string(r.body)
	}
	before := state()
	for _, f := range fields {
		t.Run(f.method+" "+f.field, func(t *testing.T) {
			for _, c := range chars {
				raw, err := json.Marshal(f.body(c))
				if err != nil {
					t.Fatal(err)
				}
				// The character raw in the body, and as a \u escape.
				escaped := strings.NewReplacer("\u0080", `\u0080`, "\u0085", `\u0085`, "\u009b", `\u009B`, "\u009f", `\u009f`,
					"\u202e", `\u202E`, "\ufeff", `\ufeff`, "\uffff", `\uFFFF`).Replace(string(raw))
				if f.field == "description" && c == "\t" {
					continue // free text takes it (engine's TestService_TextFields)
				}
				for _, body := range []string{string(raw), escaped} {
					p := checkProblem(t, e.do(req{method: f.method, path: f.path, body: body}), 422, engine.CodeInvalidField, f.field)
					if !strings.Contains(p.Detail, "byte offset") {
						t.Errorf("detail %q names no offset", p.Detail)
					}
				}
			}
		})
	}
	t.Run("Idempotency-Key", func(t *testing.T) {
		for _, c := range chars {
			r := e.do(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`,
				header: map[string]string{"Idempotency-Key": "key" + c + "1"}})
			checkProblem(t, r, 422, engine.CodeInvalidField, "Idempotency-Key")
		}
	})
	if after := state(); after != before {
		t.Errorf("refused text changed something:\n%s\nwas\n%s", after, before)
	}
}
