package engine

import (
	"context"
	"time"
)

// Store is the durable state the engine needs, in domain words. storage.DB
// implements it on one bbolt file.
//
// IMPORTANT: every method that writes returns only after its transaction is
// committed and fsynced; a nil error means the change survives a crash.
// Writes may share a commit with other concurrent writes (group commit).
// Not-found and validation failures are *Error values with a Code; any
// other error means the write did not happen.
//
// The store keeps one invariant the engine relies on: a delivery is in the
// retry index if and only if its State is StatePending, under the key
// (NextAttemptAt, ID).
type Store interface {
	// PutTenant creates or updates a tenant (Name only). It returns the
	// stored tenant and whether it was created.
	PutTenant(ctx context.Context, t Tenant) (Tenant, bool, error)
	// Tenant returns CodeTenantNotFound when there is none.
	Tenant(ctx context.Context, id string) (Tenant, error)
	// DeleteTenant deletes a tenant with its endpoints and access tokens
	// at once, and its events, deliveries and idempotency keys soon after
	// (the store purges them in small steps); until that is done, PutTenant
	// of the id is CodeTenantDeleting. CodeTenantNotFound when there is
	// none.
	DeleteTenant(ctx context.Context, id string, at time.Time) error

	// PutEventType creates or updates a catalogue entry (Description only).
	PutEventType(ctx context.Context, et EventType) (EventType, bool, error)
	// DeleteEventType takes name out of the catalogue (CodeNotFound when
	// it is not in it). Endpoints that subscribe to it keep the name.
	DeleteEventType(ctx context.Context, name string) error
	// EventTypes lists the catalogue by name.
	EventTypes(ctx context.Context) ([]EventType, error)

	// CreateEndpoint stores a new endpoint; CodeTenantNotFound when its
	// tenant does not exist, CodeLimitReached when limit is not 0 and
	// the tenant has that many endpoints already (checked in the same
	// transaction, so concurrent creates cannot pass it).
	CreateEndpoint(ctx context.Context, ep Endpoint, limit int) error
	// Endpoint returns CodeEndpointNotFound unless tenant has endpoint id.
	Endpoint(ctx context.Context, tenant, id string) (Endpoint, error)
	// Endpoints lists a tenant's endpoints in creation order.
	Endpoints(ctx context.Context, tenant string) ([]Endpoint, error)
	// UpdateEndpoint loads the endpoint, calls fn on it and stores the
	// result, all in one transaction; an error from fn aborts the update
	// and is returned as is. fn runs inside the write transaction and may
	// run more than once (a shared commit is retried without a failed
	// write): it must only change the endpoint, never block or call the
	// Store.
	UpdateEndpoint(ctx context.Context, tenant, id string, fn func(*Endpoint) error) (Endpoint, error)
	// DeleteEndpoint removes it. Its deliveries stay; the dispatcher
	// dead-letters pending ones when it finds the endpoint gone.
	DeleteEndpoint(ctx context.Context, tenant, id string) error

	// AppendEvent is ingest, in one transaction: check the tenant exists
	// (CodeTenantNotFound) and the type is in the catalogue
	// (CodeUnknownEventType); honour the idempotency key (see NewEvent);
	// append the event to the log with the next sequence; create one
	// Pending delivery, due now, for every enabled endpoint of the tenant
	// that subscribes to the type, each with a retry index entry.
	AppendEvent(ctx context.Context, in NewEvent) (IngestResult, error)
	// Event returns the event and its deliveries (CodeEventNotFound).
	Event(ctx context.Context, tenant, id string) (Event, []Delivery, error)

	// Delivery returns CodeDeliveryNotFound unless tenant has delivery id.
	Delivery(ctx context.Context, tenant, id string) (Delivery, error)
	// AttemptInput reads, in one read transaction, what an attempt needs:
	// the delivery, its event's stored body and its endpoint. A deleted
	// endpoint is reported with EndpointFound false, not as an error.
	AttemptInput(ctx context.Context, deliveryID string) (AttemptInput, error)
	// RecordAttempt appends the attempt to the delivery's log and, when
	// rec.Cycle is still the delivery's current cycle and the delivery is
	// Pending, moves it to rec.State: the retry index entry moves to
	// rec.NextAttemptAt (Pending) or is removed (Succeeded, Dead; Dead also
	// adds the dead-letter entry). One transaction. A record with Held
	// set is not an attempt: nothing is appended and CycleAttempts is
	// unchanged; a current-cycle Pending delivery only gets rec.Reason and
	// its retry index entry moved to rec.NextAttemptAt.
	RecordAttempt(ctx context.Context, rec AttemptRecord) (Delivery, error)
	// Replay starts a new cycle of a delivery of tenant: Cycle+1, Pending,
	// due at r.At, CycleAttempts 0, the replay appended, the dead-letter
	// entry (if any) removed and the retry index entry moved. One
	// transaction. CodeDeliveryNotFound when there is none.
	Replay(ctx context.Context, tenant, id string, r Replay) (Delivery, error)
	// DeadLetters lists the tenant's dead deliveries, oldest death first,
	// starting after the cursor (empty: from the start), at most limit. It
	// returns the cursor for the next page, empty at the end.
	DeadLetters(ctx context.Context, tenant, cursor string, limit int) ([]Delivery, string, error)
	// RetryIndex calls fn for every entry of the retry index in due order.
	// It is how the timer is rebuilt at start. fn must not call the Store.
	RetryIndex(ctx context.Context, fn func(RetryEntry) error) error

	Lister
	TokenStore // tenant access tokens and the list of tenants (tokens.go)

	// ResumePaused takes, in one transaction, at most max paused
	// deliveries of endpoint endpointID of tenant out of the paused index:
	// with deliver, each starts a new cycle as Replay does, due at r.At;
	// without, each is dead ("held while the endpoint was disabled") and
	// in the dead letters. It returns them.
	ResumePaused(ctx context.Context, tenant, endpointID string, deliver bool, r Replay, max int) ([]Delivery, error)
}

// NewEvent is what ingest appends.
type NewEvent struct {
	Event Event // ID, TenantID, Type, Created, APIVersion and Body set; Seq is assigned

	// IdempotencyKey, when not empty, makes the append conditional: if the
	// tenant used the same key before and its record has not expired, no
	// event is appended. With the same RequestHash the result is the first
	// event and its deliveries with Duplicate true; with another hash the
	// error is CodeIdempotencyConflict. A record is live while
	// Event.Created is before its IdempotencyExpires; an expired one is
	// replaced.
	IdempotencyKey     string
	RequestHash        [32]byte
	IdempotencyExpires time.Time

	// NewID makes delivery IDs (NewID("dlv")).
	NewID func(prefix string) string
}

// IngestResult is the outcome of AppendEvent.
type IngestResult struct {
	Event      Event
	Deliveries []Delivery
	Duplicate  bool // an earlier ingest with the same idempotency key
}

// AttemptInput is what one attempt needs, read in one transaction.
type AttemptInput struct {
	Delivery      Delivery
	Body          []byte // the event's stored envelope, verbatim; shared with other attempts, read only
	Endpoint      Endpoint
	EndpointFound bool
}

// AttemptRecord is the outcome of one attempt, to be recorded.
type AttemptRecord struct {
	DeliveryID    string
	Cycle         int // the cycle the attempt belongs to
	Attempt       Attempt
	State         State     // StatePending (retry), StateSucceeded or StateDead
	NextAttemptAt time.Time // when State is StatePending
	Reason        string    // why it failed or is dead; "" on success
	LastStatus    int
	At            time.Time // when the outcome was decided (Updated, DeadAt)

	// Held marks a delivery held back without an attempt (its endpoint is
	// not verified): State must be StatePending, Attempt is ignored and
	// the delivery keeps its attempt count; only NextAttemptAt, Reason
	// and Updated change.
	Held bool

	// StatePaused (its endpoint is disabled) is, like Held, no attempt:
	// a current-cycle Pending delivery leaves the retry index for the
	// paused index with Reason; nothing is appended.

	// Endpoint, when set, is the endpoint's health after the attempt
	// (FailingSince, LastFailure, LastFailureAt, Disabled, DisabledReason,
	// DisabledAt): the same transaction stores those fields on the
	// endpoint, if it still exists. Nil: the endpoint is not touched.
	Endpoint *Endpoint
}

// RetryEntry is one entry of the retry index.
type RetryEntry struct {
	Due        time.Time
	DeliveryID string
	EndpointID string
	TenantID   string // the endpoint's tenant; "" when the endpoint is deleted
}
