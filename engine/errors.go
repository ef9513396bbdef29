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
	CodeHeadersTooLarge     Code = "headers_too_large"      // request line and headers over the bound (httpapi.MaxHeaderBytes)
	CodeUnauthorized        Code = "unauthorized"           // missing or wrong bearer token
	CodeForbidden           Code = "forbidden"              // token valid, but not for this resource
	CodeUnsupportedMedia    Code = "unsupported_media_type" // request body is not application/json
	CodeNotFound            Code = "not_found"              // no such route
	CodeMethodNotAllowed    Code = "method_not_allowed"     // route exists, method does not
	CodeTenantNotFound      Code = "tenant_not_found"       // no such tenant
	CodeEndpointNotFound    Code = "endpoint_not_found"     // no such endpoint in this tenant
	CodeEventNotFound       Code = "event_not_found"        // no such event in this tenant
	CodeDeliveryNotFound    Code = "delivery_not_found"     // no such delivery in this tenant
	CodeTaskNotFound        Code = "task_not_found"         // no such task (of this tenant)
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
	CodeSchemaMismatch      Code = "schema_mismatch"        // the data (or a catalogue example) does not match its event type's schema; Field is "data" or "example" and the JSON Pointer at fault
	CodeEventTypeArchived   Code = "event_type_archived"    // an event of an archived type: ingest of it is refused
	CodeConfigManaged       Code = "config_managed"         // a change through the API of what the config file sets (the [alerts] endpoint's URL, secret, existence)
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

// The errors a Store gives for a request it refuses, one constructor per
// condition: a store picks one and never words an error itself, so every
// store answers the same code, field and words (engine/storetest holds
// them to it). The HTTP API shows them as they are here.

// TenantDeleting is the error for a tenant id whose deleted tenant's data
// is still being purged.
func TenantDeleting(id string) *Error {
	return Errorf(CodeTenantDeleting, "tenant", "tenant %s was deleted and its data is still being purged; its id can be used again once that is done", id)
}

// InvalidTenantID is the error for a tenant id a store cannot key: empty,
// or holding a NUL byte.
func InvalidTenantID() *Error {
	return Errorf(CodeInvalidField, "tenant", "tenant id must not be empty or contain a NUL byte")
}

// EnvironmentNeverChanges is the error for an update of tenant id, which
// is in environment env, that names another environment.
func EnvironmentNeverChanges(id string, env Environment) *Error {
	return Errorf(CodeInvalidField, "environment", "tenant %s is %s; a tenant's environment never changes (make a new tenant instead)", id, env)
}

// EmptyEventTypeName is the error for an event type entry without a name.
func EmptyEventTypeName() *Error {
	return Errorf(CodeInvalidField, "type", "event type must not be empty")
}

// EventTypeNotFound is the error for an event type name not in the
// catalogue, where one is looked up (not where an event names it: that
// is UnknownEventType).
func EventTypeNotFound(name string) *Error {
	return Errorf(CodeNotFound, "type", "no event type %s in the catalogue", name)
}

// EmptyEndpointID is the error for an endpoint without an id.
func EmptyEndpointID() *Error {
	return Errorf(CodeInvalidField, "id", "endpoint id must not be empty")
}

// EndpointLimitReached is the error for a new endpoint of a tenant that has
// limit endpoints already. The Service answers its own, which names the
// setting.
func EndpointLimitReached(limit int) *Error {
	return Errorf(CodeLimitReached, "", "the tenant has %d endpoints, the most it may have", limit)
}

// AccessTokenNotFound is the error for an access token the tenant does not
// have.
func AccessTokenNotFound() *Error { return Errorf(CodeNotFound, "id", "no such access token") }

// InvalidEventID is the error for an event id a store cannot key: empty,
// or holding a NUL byte.
func InvalidEventID() *Error {
	return Errorf(CodeInvalidField, "id", "event id must not be empty or contain a NUL byte")
}

// EventTypeRequired is the error for an event without a type.
func EventTypeRequired() *Error { return Errorf(CodeInvalidField, "type", "type is required") }

// UnknownEventType is the error for an event of type name, which is not in
// the catalogue.
func UnknownEventType(name string) *Error {
	return Errorf(CodeUnknownEventType, "type", "event type %q is not in the catalogue; add it with PUT /v1/event-types/%s", name, name)
}

// IdempotencyConflict is the error for an Idempotency-Key sent again, within
// its window, with another request.
func IdempotencyConflict() *Error {
	return Errorf(CodeIdempotencyConflict, "Idempotency-Key", "this Idempotency-Key was used with a different request; send a new key for a new event")
}

// InvalidLimit is the error for a page limit below 1.
func InvalidLimit() *Error { return Errorf(CodeInvalidField, "limit", "limit must be at least 1") }

// InvalidCursor is the error for a page cursor (field "cursor") that the
// listing did not return: of the delivery log or the dead letters.
func InvalidCursor() *Error {
	return Errorf(CodeInvalidField, "cursor", "cursor is not one this listing returned")
}

// InvalidFeedCursor is the error for an EventFilter.After that the event
// feed did not return.
func InvalidFeedCursor() *Error {
	return Errorf(CodeInvalidField, "after", "after is not a cursor this feed returned")
}

// The CodeUnavailable errors of a store: the write was not made and may be
// made if sent again later. cause is wrapped for the operator's log, never
// shown to the client.

// StorageClosed is the error of a write sent to a store that is closed.
func StorageClosed(cause error) *Error {
	return &Error{Code: CodeUnavailable, Message: "storage is closed", Err: fmt.Errorf("%w: %w", ErrStorageClosed, cause)}
}

// ErrStorageClosed is in the chain of every StorageClosed error: a
// write after the store was closed, which no retry makes succeed.
var ErrStorageClosed = errors.New("storage closed")

// CommitFailed is the error of a write whose commit failed (a full disk,
// an I/O error).
func CommitFailed(cause error) *Error {
	return &Error{Code: CodeUnavailable, Message: "storage cannot write now; retry later", Err: cause}
}

// DatabaseUnavailable is the error of a write to a database that is not
// there or does not take writes now (unreachable, shutting down,
// read-only).
func DatabaseUnavailable(cause error) *Error {
	return &Error{Code: CodeUnavailable, Message: "the database cannot take writes now; retry later", Err: cause}
}

// LockUnavailable is the error of a write that waited past its bound for a
// lock another transaction holds.
func LockUnavailable(cause error) *Error {
	return &Error{Code: CodeUnavailable, Message: "a lock this write needs is held by another transaction (a node stalled in one?); retry later", Err: cause}
}

// NoSpaceForBackup is the error of a backup that needs need bytes free
// beside the database, free are, of which headroom are to be left for
// ingest.
func NoSpaceForBackup(free, need, headroom uint64) *Error {
	return Errorf(CodeUnavailable, "", "not enough free space beside the database for the backup's temporary copy: %d MiB free, %d MiB needed (the file and %d MiB left for ingest)", free>>20, need>>20, headroom>>20)
}
