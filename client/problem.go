package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"
)

// Code is the stable, machine-readable kind of a Problem: the "code"
// member of the server's problem+json answer. Match on it, not on Detail,
// whose wording may change.
type Code string

// The codes the API answers with, and the HTTP status of each.
const (
	CodeInvalidJSON         Code = "invalid_json"           // 400: the body is not the JSON object expected
	CodeInvalidField        Code = "invalid_field"          // 422: a field or query parameter has a bad value; Field names it
	CodeUnknownParameter    Code = "unknown_parameter"      // 400: a query parameter the route does not take; Field names it
	CodeUnknownEventType    Code = "unknown_event_type"     // 422: the event type is not in the catalogue
	CodeBodyTooLarge        Code = "body_too_large"         // 413: the body is over the server's [ingest] max_body
	CodeHeadersTooLarge     Code = "headers_too_large"      // 431: the request line and headers are over 64 KiB
	CodeUnsupportedMedia    Code = "unsupported_media_type" // 415: the body is not application/json
	CodeUnauthorized        Code = "unauthorized"           // 401: missing, wrong, expired or revoked bearer token
	CodeForbidden           Code = "forbidden"              // 403: the token is valid but not for this route or tenant
	CodeNotFound            Code = "not_found"              // 404: no such route (or no such access token)
	CodeMethodNotAllowed    Code = "method_not_allowed"     // 405
	CodeTenantNotFound      Code = "tenant_not_found"       // 404
	CodeEndpointNotFound    Code = "endpoint_not_found"     // 404
	CodeEventNotFound       Code = "event_not_found"        // 404
	CodeDeliveryNotFound    Code = "delivery_not_found"     // 404
	CodeTaskNotFound        Code = "task_not_found"         // 404: no such task (of this tenant)
	CodeIdempotencyConflict Code = "idempotency_conflict"   // 409: the Idempotency-Key was used with another body
	CodeUnavailable         Code = "unavailable"            // 503: storage cannot take writes now; retry after Retry-After
	CodeOverloaded          Code = "overloaded"             // 503: too many deliveries pending; retry after Retry-After
	CodeRateLimited         Code = "rate_limited"           // 429: over the ingest rate; retry after Retry-After
	CodeTenantOverloaded    Code = "tenant_overloaded"      // 429: too many deliveries pending for this tenant
	CodeLimitReached        Code = "limit_reached"          // 409: the tenant has as many of something as it may
	CodePendingDeliveries   Code = "pending_deliveries"     // 409: the tenant still has deliveries pending (delete with force)
	CodeTenantDeleting      Code = "tenant_deleting"        // 409: the tenant id belongs to a deleted tenant still being purged
	CodeNotBlocking         Code = "not_blocking"           // 409: Skip of a delivery that is not a dead head blocking its line
	CodeEndpointDisabled    Code = "endpoint_disabled"      // 409: SendTestEvent to a disabled endpoint: enable it first
	CodeSchemaMismatch      Code = "schema_mismatch"        // 422: the data (or a catalogue example) does not match its type's schema; Field is "data" (or "example") and the JSON Pointer at fault
	CodeEventTypeArchived   Code = "event_type_archived"    // 422: the event type is archived: ingest of it is refused
	CodeConfigManaged       Code = "config_managed"         // 409: a change of what the server's config file sets (the [alerts] endpoint's URL, secret, existence)
	CodeInternal            Code = "internal"               // 500: the server failed; its operator log says why
)

// Problem is an error answer of the API (RFC 9457 problem details, with
// webhookd's stable Code and the Field at fault). Every method returns one,
// as an error, for every answer outside 2xx: use errors.As to get it.
//
// An error answer that is not problem+json (from a proxy in front of the
// server, say) is a Problem too, with an empty Code, the HTTP status text
// as Title and the start of the body as Detail.
type Problem struct {
	// Status is the HTTP status of the answer.
	Status int `json:"status"`
	// Code is the kind of problem; "" when the answer was not problem+json.
	Code Code `json:"code"`
	// Title is a short summary of the Code, the same for every problem
	// with that Code.
	Title string `json:"title"`
	// Detail says what went wrong with this request, for a person.
	Detail string `json:"detail"`
	// Field names the request field, query parameter or header at fault,
	// when there is one ("" otherwise).
	Field string `json:"field,omitempty"`
	// Type is the problem's URI: "urn:webhookd:problem:" + Code.
	Type string `json:"type"`
	// RetryAfter is the answer's Retry-After header (429 and 503): how
	// long to wait before trying again. Zero when it had none.
	RetryAfter time.Duration `json:"-"`
}

// Error returns the status, code and detail, like
// "webhookd: 422 unknown_event_type: event type ... (field type)".
func (p *Problem) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "webhookd: %d", p.Status)
	if p.Code != "" {
		fmt.Fprintf(&b, " %s", p.Code)
	}
	switch {
	case p.Detail != "":
		fmt.Fprintf(&b, ": %s", p.Detail)
	case p.Title != "":
		fmt.Fprintf(&b, ": %s", p.Title)
	}
	if p.Field != "" {
		fmt.Fprintf(&b, " (field %s)", p.Field)
	}
	return b.String()
}

// CodeOf returns the Code of the *Problem in err's chain, or "" when
// there is none (a transport error, say).
func CodeOf(err error) Code {
	if p, ok := errors.AsType[*Problem](err); ok {
		return p.Code
	}
	return ""
}

// maxProblemBody bounds how much of an error answer is read.
const maxProblemBody = 64 << 10

// maxDetailExcerpt bounds the Detail made from a body that is not
// problem+json.
const maxDetailExcerpt = 512

// problemOf reads the error answer resp (status outside 2xx) into a
// Problem. It does not close resp.Body.
func problemOf(resp *http.Response, body []byte) *Problem {
	p := &Problem{}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/problem+json" || json.Unmarshal(body, p) != nil {
		p = &Problem{Title: http.StatusText(resp.StatusCode), Detail: strings.TrimSpace(string(body[:min(len(body), maxDetailExcerpt)]))}
	}
	p.Status = resp.StatusCode // the answer's, whatever the body says
	p.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	return p
}
