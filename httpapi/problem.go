package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"

	"github.com/webhookd/webhookd/engine"
)

// problemTypePrefix starts the "type" member of every problem: the URN
// names the code, so a client can match on either.
const problemTypePrefix = "urn:webhookd:problem:"

// internalDetail is the only detail a 500 ever shows: the cause goes to the
// operator log, never to the client.
const internalDetail = "internal error"

// overloadedRetryAfter is the Retry-After, in seconds, of a 503 overloaded.
const overloadedRetryAfter = "5"

// statusEntry is what the API shows for one error code.
type statusEntry struct {
	status int
	title  string
}

// statusTable is the only table from engine.Code to HTTP status. A code
// missing here is answered as internal (500) and logged.
var statusTable = map[engine.Code]statusEntry{
	engine.CodeInvalidJSON:         {http.StatusBadRequest, "Malformed JSON body"},
	engine.CodeInvalidField:        {http.StatusUnprocessableEntity, "Invalid field"},
	engine.CodeUnknownParameter:    {http.StatusBadRequest, "Unknown query parameter"},
	engine.CodeUnknownEventType:    {http.StatusUnprocessableEntity, "Unknown event type"},
	engine.CodeBodyTooLarge:        {http.StatusRequestEntityTooLarge, "Request body too large"},
	engine.CodeHeadersTooLarge:     {http.StatusRequestHeaderFieldsTooLarge, "Request headers too large"},
	engine.CodeUnsupportedMedia:    {http.StatusUnsupportedMediaType, "Unsupported media type"},
	engine.CodeUnauthorized:        {http.StatusUnauthorized, "Unauthorized"},
	engine.CodeForbidden:           {http.StatusForbidden, "Forbidden"},
	engine.CodeNotFound:            {http.StatusNotFound, "Not found"},
	engine.CodeMethodNotAllowed:    {http.StatusMethodNotAllowed, "Method not allowed"},
	engine.CodeTenantNotFound:      {http.StatusNotFound, "Tenant not found"},
	engine.CodeEndpointNotFound:    {http.StatusNotFound, "Endpoint not found"},
	engine.CodeEventNotFound:       {http.StatusNotFound, "Event not found"},
	engine.CodeDeliveryNotFound:    {http.StatusNotFound, "Delivery not found"},
	engine.CodeTaskNotFound:        {http.StatusNotFound, "Task not found"},
	engine.CodeIdempotencyConflict: {http.StatusConflict, "Idempotency key reused"},
	engine.CodeUnavailable:         {http.StatusServiceUnavailable, "Service unavailable"},
	engine.CodeOverloaded:          {http.StatusServiceUnavailable, "Too many deliveries pending"},
	engine.CodeRateLimited:         {http.StatusTooManyRequests, "Rate limit exceeded"},
	engine.CodeTenantOverloaded:    {http.StatusTooManyRequests, "Too many deliveries pending for this tenant"},
	engine.CodeLimitReached:        {http.StatusConflict, "Limit reached"},
	engine.CodePendingDeliveries:   {http.StatusConflict, "Deliveries pending"},
	engine.CodeTenantDeleting:      {http.StatusConflict, "Tenant being deleted"},
	engine.CodeNotBlocking:         {http.StatusConflict, "Delivery not blocking its line"},
	engine.CodeEndpointDisabled:    {http.StatusConflict, "Endpoint disabled"},
	engine.CodeSchemaMismatch:      {http.StatusUnprocessableEntity, "Data does not match the event type's schema"},
	engine.CodeEventTypeArchived:   {http.StatusUnprocessableEntity, "Event type archived"},
	engine.CodeConfigManaged:       {http.StatusConflict, "Managed by the config file"},
	engine.CodeInternal:            {http.StatusInternalServerError, "Internal error"},
}

// problem is an RFC 9457 problem detail, extended with the stable code and
// the field at fault.
type problem struct {
	Type   string      `json:"type"`
	Title  string      `json:"title"`
	Status int         `json:"status"`
	Code   engine.Code `json:"code"`
	Detail string      `json:"detail"`
	Field  string      `json:"field,omitempty"`
}

// statusClientClosed is the status a request is counted with (metrics)
// when its client gave up before the answer: nginx's 499. It is never
// sent to anyone: the client is gone.
const statusClientClosed = 499

// writeError answers err as application/problem+json. An error without a
// code (or with a code the table does not know) becomes a 500 "internal
// error" and is logged at error level; its text never reaches the client.
//
// A request whose own context ended (its client gave up, or the server's
// shutdown cut it) and whose error is that ending is not an internal
// error, whatever store it reached: it is logged at debug level and
// counted as statusClientClosed, and nothing more is written.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		s.log.DebugContext(r.Context(), "httpapi: the client gave up before the answer",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("error", err.Error()))
		w.WriteHeader(statusClientClosed)
		return
	}
	code := engine.ErrorCode(err)
	if _, known := statusTable[code]; !known || code == engine.CodeInternal {
		msg := "<nil>" // a handler bug; still answer something
		if err != nil {
			msg = err.Error()
		}
		s.log.ErrorContext(r.Context(), "httpapi: internal error",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.String("code", string(code)), slog.String("error", msg))
		s.writeProblem(w, r, engine.CodeInternal, internalDetail, "")
		return
	}
	e, _ := errors.AsType[*engine.Error](err) // found: the code came from it
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(e.RetryAfter.Seconds())), 10))
	}
	s.writeProblem(w, r, code, e.Message, e.Field)
}

// writeProblem is the only writer of application/problem+json. code must be
// in statusTable; it sets the headers some codes call for.
func (s *server) writeProblem(w http.ResponseWriter, r *http.Request, code engine.Code, detail, field string) {
	entry := statusTable[code]
	p := problem{
		Type:   problemTypePrefix + string(code),
		Title:  entry.title,
		Status: entry.status,
		Code:   code,
		Detail: detail,
		Field:  field,
	}
	h := w.Header()
	retryAfter := ""
	switch code {
	case engine.CodeUnauthorized:
		h.Set("WWW-Authenticate", "Bearer")
	case engine.CodeUnavailable:
		retryAfter = "1"
	case engine.CodeOverloaded, engine.CodeTenantOverloaded:
		// A backlog drains at the endpoints' pace, not at once.
		retryAfter = overloadedRetryAfter
	}
	if retryAfter != "" && h.Get("Retry-After") == "" { // the error's own wait wins
		h.Set("Retry-After", retryAfter)
	}
	s.writeBody(w, r, "application/problem+json", p.Status, p)
}
