package engine

import (
	"errors"
	"fmt"
	"time"
)

// Code is a stable, machine-readable error code. Codes are part of the API:
// clients match on them, so a code is never renamed once published.
// httpapi holds the only table from Code to HTTP status.
type Code string

// The error vocabulary of webhookd.
const (
	CodeInvalidJSON         Code = "invalid_json"           // request body is not the JSON we expect
	CodeInvalidField        Code = "invalid_field"          // a field has a bad value; Field names it
	CodeUnknownParameter    Code = "unknown_parameter"      // a query parameter the route does not take; Field names it
	CodeBodyTooLarge        Code = "body_too_large"         // request body over the configured limit
	CodeUnauthorized        Code = "unauthorized"           // missing or wrong bearer token
	CodeForbidden           Code = "forbidden"              // token valid, but not for this resource
	CodeUnsupportedMedia    Code = "unsupported_media_type" // request body is not application/json
	CodeNotFound            Code = "not_found"              // no such route
	CodeMethodNotAllowed    Code = "method_not_allowed"     // route exists, method does not
	CodeTenantNotFound      Code = "tenant_not_found"       // no such tenant
	CodeEndpointNotFound    Code = "endpoint_not_found"     // no such endpoint in this tenant
	CodeEventNotFound       Code = "event_not_found"        // no such event in this tenant
	CodeDeliveryNotFound    Code = "delivery_not_found"     // no such delivery in this tenant
	CodeUnknownEventType    Code = "unknown_event_type"     // event type not in the catalogue
	CodeIdempotencyConflict Code = "idempotency_conflict"   // Idempotency-Key reused with another body
	CodeUnavailable         Code = "unavailable"            // storage cannot take writes now; retry later
	CodeOverloaded          Code = "overloaded"             // too many deliveries not final (ServiceOptions.MaxPending); retry later
	CodeRateLimited         Code = "rate_limited"           // the token or the tenant is over its ingest rate, or the endpoint over its test events; retry after Retry-After
	CodeTenantOverloaded    Code = "tenant_overloaded"      // too many deliveries not final for this tenant (ServiceOptions.MaxPendingPerTenant); retry later
	CodeLimitReached        Code = "limit_reached"          // the tenant has as many of something as it may (ServiceOptions.MaxEndpointsPerTenant)
	CodePendingDeliveries   Code = "pending_deliveries"     // the tenant still has deliveries not final: deleting it would drop them (unless forced)
	CodeTenantDeleting      Code = "tenant_deleting"        // the tenant id belongs to a deleted tenant whose data is still being purged
	CodeNotBlocking         Code = "not_blocking"           // a skip of a delivery that is not a dead head blocking its line
	CodeEndpointDisabled    Code = "endpoint_disabled"      // a test event for a disabled endpoint: enable it first
	CodeInternal            Code = "internal"               // anything uncoded; details go to the operator log only
)

// Error is a domain error: a stable Code, the request field at fault (if
// any) and a human message. Messages never contain secrets or signatures.
type Error struct {
	Code    Code
	Field   string // JSON field, header or path parameter at fault; "" when none
	Message string
	Err     error // optional wrapped cause, for errors.Is/As; never shown to clients
	// RetryAfter, for a code that asks the client to come back
	// (rate_limited, tenant_overloaded), is how long to wait; zero: the
	// code's usual wait.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and field.
func Errorf(code Code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// CodeInternal when there is none (and "" for a nil err).
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// The not-found errors, one per kind, as every Store and the Service give
// them: the code, the field at fault, the same words.

// TenantNotFound is the error for a tenant that does not exist.
func TenantNotFound() *Error { return Errorf(CodeTenantNotFound, "tenant", "no such tenant") }

// EndpointNotFound is the error for an endpoint the tenant does not have.
func EndpointNotFound() *Error { return Errorf(CodeEndpointNotFound, "id", "no such endpoint") }

// EventNotFound is the error for an event the tenant does not have.
func EventNotFound() *Error { return Errorf(CodeEventNotFound, "id", "no such event") }

// DeliveryNotFound is the error for a delivery the tenant does not have.
func DeliveryNotFound() *Error { return Errorf(CodeDeliveryNotFound, "id", "no such delivery") }
