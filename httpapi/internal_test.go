package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newTestServer(logs *syncBuffer) *server {
	return &server{maxBody: DefaultMaxBody, log: slog.New(slog.NewTextHandler(logs, nil))}
}

// TestStatusTable_EveryCode keeps the table complete: a code missing from
// it would be answered as a 500.
func TestStatusTable_EveryCode(t *testing.T) {
	want := map[engine.Code]int{
		engine.CodeInvalidJSON:         400,
		engine.CodeInvalidField:        422,
		engine.CodeUnknownParameter:    400,
		engine.CodeUnknownEventType:    422,
		engine.CodeBodyTooLarge:        413,
		engine.CodeHeadersTooLarge:     431,
		engine.CodeUnsupportedMedia:    415,
		engine.CodeUnauthorized:        401,
		engine.CodeForbidden:           403,
		engine.CodeNotFound:            404,
		engine.CodeMethodNotAllowed:    405,
		engine.CodeTenantNotFound:      404,
		engine.CodeEndpointNotFound:    404,
		engine.CodeEventNotFound:       404,
		engine.CodeTaskNotFound:        404,
		engine.CodeDeliveryNotFound:    404,
		engine.CodeIdempotencyConflict: 409,
		engine.CodeUnavailable:         503,
		engine.CodeOverloaded:          503,
		engine.CodeRateLimited:         429,
		engine.CodeTenantOverloaded:    429,
		engine.CodeLimitReached:        409,
		engine.CodePendingDeliveries:   409,
		engine.CodeTenantDeleting:      409,
		engine.CodeNotBlocking:         409,
		engine.CodeEndpointDisabled:    409,
		engine.CodeSchemaMismatch:      422,
		engine.CodeEventTypeArchived:   422,
		engine.CodeConfigManaged:       409,
		engine.CodeInternal:            500,
	}
	if got, want := len(statusTable), len(want); got != want {
		t.Errorf("len(statusTable) = %d, want %d", got, want)
	}
	for code, status := range want {
		t.Run(string(code), func(t *testing.T) {
			e, ok := statusTable[code]
			if !ok {
				t.Fatalf("code %q missing", code)
			}
			if got := e.status; got != status {
				t.Errorf("status = %d, want %d", got, status)
			}
			if e.title == "" {
				t.Error("empty title")
			}
		})
	}
}

func TestServer_WriteError(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   engine.Code
		wantDetail string
		wantField  string
		wantHeader [2]string
		wantLogged bool
	}{
		{"coded", engine.Errorf(engine.CodeInvalidField, "url", "url is required"), 422, engine.CodeInvalidField, "url is required", "url", [2]string{}, false},
		{"wrapped coded", fmt.Errorf("ctx: %w", engine.Errorf(engine.CodeTenantNotFound, "tenant", "no such tenant")), 404, engine.CodeTenantNotFound, "no such tenant", "tenant", [2]string{}, false},
		{"uncoded", errors.New("storage: open bucket: disk on fire"), 500, engine.CodeInternal, "internal error", "", [2]string{}, true},
		{"coded internal", &engine.Error{Code: engine.CodeInternal, Message: "disk on fire"}, 500, engine.CodeInternal, "internal error", "", [2]string{}, true},
		{"unknown code", &engine.Error{Code: "disk_on_fire", Message: "disk on fire"}, 500, engine.CodeInternal, "internal error", "", [2]string{}, true},
		{"nil", nil, 500, engine.CodeInternal, "internal error", "", [2]string{}, true},
		{"unauthorized", engine.Errorf(engine.CodeUnauthorized, "", "missing or invalid bearer token"), 401, engine.CodeUnauthorized, "missing or invalid bearer token", "", [2]string{"WWW-Authenticate", "Bearer"}, false},
		{"unavailable", engine.Errorf(engine.CodeUnavailable, "", "try later"), 503, engine.CodeUnavailable, "try later", "", [2]string{"Retry-After", "1"}, false},
		{"overloaded", engine.Errorf(engine.CodeOverloaded, "", "too many pending"), 503, engine.CodeOverloaded, "too many pending", "", [2]string{"Retry-After", "5"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs syncBuffer
			s := newTestServer(&logs)
			rec := httptest.NewRecorder()
			s.writeError(rec, httptest.NewRequest("GET", "/v1/x", nil), tt.err)

			if got := rec.Code; got != tt.wantStatus {
				t.Errorf("status = %d, want %d", got, tt.wantStatus)
			}
			if got, want := rec.Header().Get("Content-Type"), "application/problem+json"; got != want {
				t.Errorf("Content-Type = %q, want %q", got, want)
			}
			var p map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			want := map[string]any{
				"type":   "urn:webhookd:problem:" + string(tt.wantCode),
				"title":  statusTable[tt.wantCode].title,
				"status": float64(tt.wantStatus),
				"code":   string(tt.wantCode),
				"detail": tt.wantDetail,
			}
			if tt.wantField != "" {
				want["field"] = tt.wantField
			}
			if got, want := fmt.Sprint(p), fmt.Sprint(want); got != want {
				t.Errorf("body = %s, want %s", got, want)
			}
			if h := tt.wantHeader; h[0] != "" {
				if got := rec.Header().Get(h[0]); got != h[1] {
					t.Errorf("%s = %q, want %q", h[0], got, h[1])
				}
			}
			logged := strings.Contains(logs.String(), "level=ERROR")
			if logged != tt.wantLogged {
				t.Errorf("logged = %v, want %v; log: %s", logged, tt.wantLogged, logs.String())
			}
			if tt.wantLogged && tt.err != nil && !strings.Contains(logs.String(), "disk on fire") {
				t.Errorf("log lacks the cause: %s", logs.String())
			}
			if strings.Contains(rec.Body.String(), "disk on fire") {
				t.Errorf("response shows the cause: %s", rec.Body)
			}
		})
	}
}

// TestNew_Panic checks a handler panic becomes a logged 500 problem: with a
// nil Service every /v1 handler panics.
func TestNew_Panic(t *testing.T) {
	var logs syncBuffer
	const token = "panic-test-token-81f3"
	h := New(nil, Options{Tokens: []string{token}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/event-types", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	h.ServeHTTP(rec, req)

	if got, want := rec.Code, http.StatusInternalServerError; got != want {
		t.Errorf("status = %d, want %d", got, want)
	}
	if got, want := rec.Header().Get("Content-Type"), "application/problem+json"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	var p problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if p.Code != engine.CodeInternal || p.Detail != internalDetail {
		t.Errorf("problem = %+v", p)
	}
	if l := logs.String(); !strings.Contains(l, "panic in handler") || !strings.Contains(l, "stack=") {
		t.Errorf("panic not logged with a stack: %s", l)
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("token logged: %s", logs.String())
	}
}

func TestDecodeBody(t *testing.T) {
	const ct = "application/json"
	tests := []struct {
		name        string
		contentType string
		body        string
		required    bool
		wantCode    engine.Code // "": no error
		wantField   string
		wantDetail  string // substring
	}{
		{"ok", ct, `{"url":"https://x.example","event_types":["*"]}`, true, "", "", ""},
		{"ok charset", "application/json; charset=utf-8", `{"url":"u"}`, true, "", "", ""},
		{"ok trailing whitespace", ct, "{\"url\":\"u\"}\n\t ", true, "", "", ""},
		{"empty optional", "", "", false, "", "", ""},
		{"whitespace optional", "text/plain", " \n", false, "", "", ""},
		{"empty required", "", "", true, engine.CodeInvalidJSON, "", "required"},
		{"no content type", "", `{"url":"u"}`, false, engine.CodeUnsupportedMedia, "Content-Type", ""},
		{"text/plain", "text/plain", `{"url":"u"}`, true, engine.CodeUnsupportedMedia, "Content-Type", ""},
		{"bad media type", "application/json;;", `{"url":"u"}`, true, engine.CodeUnsupportedMedia, "Content-Type", ""},
		{"json suffix is not json", "application/vnd.x+json", `{"url":"u"}`, true, engine.CodeUnsupportedMedia, "Content-Type", ""},
		{"syntax", ct, `{"url": }`, true, engine.CodeInvalidJSON, "", "byte offset 8"},
		{"truncated", ct, `{"url": "u"`, true, engine.CodeInvalidJSON, "", "byte offset 11"},
		{"not json", ct, `url=u`, true, engine.CodeInvalidJSON, "", "byte offset"},
		{"array", ct, `[{"url":"u"}]`, true, engine.CodeInvalidJSON, "", "JSON object"},
		{"null", ct, `null`, true, engine.CodeInvalidJSON, "", "JSON object"},
		{"trailing object", ct, `{"url":"u"}{}`, true, engine.CodeInvalidJSON, "", "after the JSON object"},
		{"trailing garbage", ct, `{"url":"u"} x`, true, engine.CodeInvalidJSON, "", "after the JSON object"},
		{"unknown field", ct, `{"url":"u","signing_key":"whsec_x"}`, true, engine.CodeInvalidField, "signing_key", `unknown field "signing_key"`},
		{"wrong type string", ct, `{"url":5}`, true, engine.CodeInvalidField, "url", "url must be a string, not a number"},
		{"wrong type array", ct, `{"event_types":"a.b"}`, true, engine.CodeInvalidField, "event_types", "must be an array, not a string"},
		{"wrong element type", ct, `{"event_types":[1]}`, true, engine.CodeInvalidField, "event_types", "a string, not a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in engine.EndpointInput
			err := decodeBody(tt.contentType, []byte(tt.body), &in, tt.required)
			if got := engine.ErrorCode(err); got != tt.wantCode {
				t.Fatalf("code = %q, want %q (err: %v)", got, tt.wantCode, err)
			}
			if err == nil {
				return
			}
			e, _ := errors.AsType[*engine.Error](err)
			if got := e.Field; got != tt.wantField {
				t.Errorf("field = %q, want %q", got, tt.wantField)
			}
			if !strings.Contains(e.Message, tt.wantDetail) {
				t.Errorf("message = %q, want it to contain %q", e.Message, tt.wantDetail)
			}
		})
	}
}

func TestDecodeJSON_TooLarge(t *testing.T) {
	body := `{"url":"` + strings.Repeat("a", 100) + `"}`
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	var in engine.EndpointInput
	err := decodeJSON(rec, req, 64, &in, true)
	if got, want := engine.ErrorCode(err), engine.CodeBodyTooLarge; got != want {
		t.Errorf("code = %q, want %q (err: %v)", got, want, err)
	}
	if in.URL != "" {
		t.Errorf("dst changed: %+v", in)
	}
}

// FuzzDecodeBody checks that the decoder never panics, that every error it
// returns is coded (a client error, never a 500) and that it accepts only
// valid JSON.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		`{"type":"payment.succeeded","data":{"amount":100},"api_version":"v1"}`,
		`{"type":"a.b","data":null}`,
		`{"type":5}`,
		`{"data":[1,2,3]} `,
		`{"x":1}`,
		`{"IdempotencyKey":"k"}`,
		`{"type":"a.b"`,
		`[1]`,
		`"s"`,
		``,
		`{}{}`,
		"\ufeff{}",
	} {
		f.Add("application/json", []byte(s))
	}
	f.Add("text/plain", []byte(`{}`))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		var in engine.IngestInput
		err := decodeBody(contentType, body, &in, true)
		if err == nil {
			if !json.Valid(body) {
				t.Fatalf("accepted invalid JSON %q", body)
			}
			if _, err := json.Marshal(in); err != nil {
				t.Fatalf("decoded value does not re-encode: %v", err)
			}
			return
		}
		code := engine.ErrorCode(err)
		if _, ok := statusTable[code]; !ok || code == engine.CodeInternal {
			t.Fatalf("uncoded error for %q: %v", body, err)
		}
		var p engine.EndpointPatch
		if err := decodeBody(contentType, body, &p, false); err != nil && engine.ErrorCode(err) == engine.CodeInternal {
			t.Fatalf("uncoded error for %q: %v", body, err)
		}
	})
}
