//go:build !race

package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// driveOperationalEndpoints drives every documented answer of
// /v1/operational-endpoints for TestOpenAPI_EveryAnswerValidates; tok is
// a tenant token (which may not).
func driveOperationalEndpoints(t *testing.T, e *contractEnv, tok string) {
	t.Helper()
	const base = "/v1/operational-endpoints"
	noAuth := map[string]string{"Authorization": "-"}
	body := `{"url":"https://ops.example.com/hooks","event_types":["delivery.dead","endpoint.failing"],"description":"pager"}`
	r := e.check(call{method: "POST", path: base, body: body, status: 201})
	var made struct{ ID string }
	if err := json.Unmarshal(r.body, &made); err != nil {
		t.Fatal(err)
	}
	one := base + "/" + made.ID
	e.check(call{method: "POST", path: base, body: `{"url":"https://ops.example.com/all","event_types":["*"],"disabled":true}`, status: 201})
	e.check(call{method: "POST", path: base, body: `{"url":"https://ops.example.com","event_types":["nope"]}`, invalid: true, status: 422, code: engine.CodeUnknownEventType})
	e.check(call{method: "POST", path: base, body: `{"url":"https://ops.example.com","event_types":["*"],"ordering":"key"}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: base, body: `{"url":`, invalid: true, status: 400, code: engine.CodeInvalidJSON})
	e.check(call{method: "POST", path: base, body: body, header: map[string]string{"Content-Type": "text/plain"}, invalid: true, status: 415, code: engine.CodeUnsupportedMedia})
	e.check(call{method: "POST", path: base, body: `{"url":"` + strings.Repeat("x", maxBody) + `"}`, invalid: true, status: 413, code: engine.CodeBodyTooLarge})
	e.check(call{method: "POST", path: base, body: body, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "POST", path: base, body: body, header: bearer(tok), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "POST", path: base + "?x=1", body: body, invalid: true, status: 400, code: engine.CodeUnknownParameter})

	e.check(call{method: "GET", path: base, status: 200})
	e.check(call{method: "GET", path: base + "?limit=1", status: 200})
	e.check(call{method: "GET", path: base + "?limit=0", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "GET", path: base + "?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: base, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: base, header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})

	e.check(call{method: "GET", path: one, status: 200})
	e.check(call{method: "GET", path: base + "/ep_nope", status: 404, code: engine.CodeEndpointNotFound})
	e.check(call{method: "GET", path: one + "?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: one, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: one, header: bearer(tok), status: 403, code: engine.CodeForbidden})

	e.check(call{method: "PATCH", path: one, body: `{"event_types":["*"],"disabled":true}`, status: 200})
	e.check(call{method: "PATCH", path: one, body: `{"disabled":false,"deliver_held":true}`, status: 200})
	e.check(call{method: "PATCH", path: one, body: `{"description":"` + strings.Repeat("x", 1025) + `"}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PATCH", path: one, body: `[]`, invalid: true, status: 400, code: engine.CodeInvalidJSON})
	e.check(call{method: "PATCH", path: one, body: `{}`, header: map[string]string{"Content-Type": "text/plain"}, invalid: true, status: 415, code: engine.CodeUnsupportedMedia})
	e.check(call{method: "PATCH", path: one, body: `{"description":"` + strings.Repeat("x", maxBody) + `"}`, invalid: true, status: 413, code: engine.CodeBodyTooLarge})
	e.check(call{method: "PATCH", path: base + "/ep_nope", body: `{}`, status: 404, code: engine.CodeEndpointNotFound})
	e.check(call{method: "PATCH", path: one, body: `{}`, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "PATCH", path: one, body: `{}`, header: bearer(tok), status: 403, code: engine.CodeForbidden})

	e.check(call{method: "POST", path: one + "/secret/rotate", status: 200})
	e.check(call{method: "POST", path: one + "/secret/rotate", body: `{"grace":"1h"}`, status: 200})
	e.check(call{method: "POST", path: one + "/secret/rotate", body: `{"grace":"1y"}`, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: one + "/secret/rotate", body: `{"grace":`, invalid: true, status: 400, code: engine.CodeInvalidJSON})
	e.check(call{method: "POST", path: one + "/secret/rotate", body: `{}`, header: map[string]string{"Content-Type": "text/plain"}, invalid: true, status: 415, code: engine.CodeUnsupportedMedia})
	e.check(call{method: "POST", path: one + "/secret/rotate", body: `{"grace":"` + strings.Repeat("1", maxBody) + `"}`, status: 413, code: engine.CodeBodyTooLarge})
	e.check(call{method: "POST", path: base + "/ep_nope/secret/rotate", status: 404, code: engine.CodeEndpointNotFound})
	e.check(call{method: "POST", path: one + "/secret/rotate", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "POST", path: one + "/secret/rotate", header: bearer(tok), status: 403, code: engine.CodeForbidden})

	// The [alerts] endpoint: what the file sets is refused.
	ops := engine.NewService(e.db, nil, engine.ServiceOptions{LookupHost: publicLookup})
	if err := ops.EnsureOperatorEndpoint(t.Context(), "https://ops.example.com/alerts", engine.NewSecret()); err != nil {
		t.Fatal(err)
	}
	eps, err := ops.OperationalEndpoints(t.Context())
	if err != nil || len(eps) != 3 || eps[2].Source != engine.SourceConfig {
		t.Fatalf("operational endpoints %+v (%v), want the [alerts] one last", eps, err)
	}
	config := base + "/" + eps[2].ID
	e.check(call{method: "PATCH", path: config, body: `{"url":"https://evil.example.com"}`, status: 409, code: engine.CodeConfigManaged})
	e.check(call{method: "POST", path: config + "/secret/rotate", status: 409, code: engine.CodeConfigManaged})
	e.check(call{method: "DELETE", path: config, status: 409, code: engine.CodeConfigManaged})

	// The bound, then the deletes.
	for range engine.MaxOperationalEndpoints - 2 {
		e.check(call{method: "POST", path: base, body: body, status: 201})
	}
	e.check(call{method: "POST", path: base, body: body, status: 409, code: engine.CodeLimitReached})
	e.check(call{method: "DELETE", path: one + "?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "DELETE", path: one, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "DELETE", path: one, header: bearer(tok), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "DELETE", path: one, status: 204})
	e.check(call{method: "DELETE", path: one, status: 404, code: engine.CodeEndpointNotFound})
}
