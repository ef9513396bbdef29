package engine

import (
	"context"
	"time"
)

// Store is the durable state the engine needs, in domain words, split by
// role; a backend implements all of it (engine.Backend adds what the
// process asks of its database beside it):
//
//   - Log, the transactional core: ingest, every change of a delivery,
//     the lines, the retry index and the held counts. Each method is one
//     transaction, and the dispatcher's and the service's correctness
//     rests on it.
//   - Records, the plain records a sender configures: tenants, the
//     event catalogue, endpoints and tenant access tokens (TokenStore).
//     Create, read, update, delete.
//   - Listings, what the API's and the subscriber's views read: one
//     event or delivery, the dead letters, the delivery log, the
//     reconciliation feed and the report. Reads only.
//   - Maintenance (janitor.go), what the Janitor asks: retention and the
//     purge of deleted tenants, in small transactions.
//
// Every method is required: the engine finds no capability of a store by
// type assertion. storage.DB implements it on one bbolt file,
// postgres.Store in a PostgreSQL database shared by several processes,
// memstore.Store in memory (the template for a new one); the conformance
// suite in engine/storetest is the contract, for these stores and any
// other (engine/doc.go says how to write one).
//
// IMPORTANT: every method that writes returns only after its change is
// durable: a nil error means it survives a crash. Not-found and
// validation failures are *Error values with a Code; any other error
// means the write did not happen (or, for CodeUnavailable, may be retried
// later).
//
// Throughout: times come back as stored, in UTC; an empty list is empty,
// not nil; a not-found error names its field ("tenant" for a tenant, "id"
// for a thing named by its ID); a write whose context has ended writes
// nothing. engine/storetest holds these to every store.
//
// The store decides nothing about a delivery: the engine's transitions
// (transitions.go) do, and the store saves their result. It keeps one
// invariant that follows from a delivery's state alone: a Pending
// delivery is due at NextAttemptAt (RetryIndex lists it there), a Dead one
// is among its tenant's dead letters, a Paused one among its endpoint's
// paused deliveries, and no delivery is in any of these otherwise. It
// settles every ordered delivery it saves in its line (lines.go) in the
// same transaction: SettleLine on the transition with the line as it
// reads it, then PromoteDelivery of the lowest waiting member when the
// head left; a delivery it deletes (a purge, retention) leaves its line
// the same way. So a line has a head whenever it has a waiting member.
//
// That promotion is the one change a store makes to a delivery that no
// caller asked for, and the scheduler must hear of each one that can be
// sent: after a transition the caller asks LineHead
// (Dispatcher.FollowLine); retention reports what it promoted
// (PruneResult.Promoted); a purge promotes only deliveries of a deleted
// tenant, for which no request is ever made (see Maintenance).
// DeleteEndpoint changes no delivery: a pending head dies at its next
// attempt ("endpoint deleted") and its line goes on from that record.
type Store interface {
	Log
	Records
	Listings
	Maintenance
}

// Records are the plain records a sender configures: tenants, the event
// catalogue, endpoints, tenant access tokens (tokens.go) and background
// tasks (tasks.go): create, read, update, delete, each method one
// transaction. A delivery changes
// only through DeleteTenant, whose deliveries go with it (at once, or in
// Maintenance's purge).
type Records interface {
	// PutTenant creates or updates a tenant: an update sets its Name,
	// and its RetryPolicy when t names one ("" keeps it). It returns the
	// stored tenant and whether it was created. CodeTenantDeleting while
	// a deleted tenant of that ID is still being purged. A store that
	// keeps what an ingest's fan-out read (postgres: the endpoints and
	// the tenant's policy) must see a change of RetryPolicy as it sees a
	// change of the tenant's endpoints.
	PutTenant(ctx context.Context, t Tenant) (Tenant, bool, error)
	// Tenant returns CodeTenantNotFound when there is none.
	Tenant(ctx context.Context, id string) (Tenant, error)
	// Tenants lists every tenant by ID.
	Tenants(ctx context.Context) ([]Tenant, error)
	// DeleteTenant deletes a tenant with its endpoints and access tokens
	// at once, and its events, deliveries, idempotency keys and tasks
	// soon after (the store purges them in small steps); until that is
	// done, PutTenant of the id is CodeTenantDeleting. CodeTenantNotFound
	// when there is none.
	DeleteTenant(ctx context.Context, id string, at time.Time) error

	// PutEventType creates a catalogue entry or replaces its
	// Description and Example (Created stays).
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
	// UpdateEndpoint reads the endpoint, calls fn on it and stores the
	// result, all in one transaction (CodeEndpointNotFound). An error from
	// fn aborts the update and is returned as is. fn may run more than
	// once: it must only change the endpoint, never block or call the
	// Store.
	UpdateEndpoint(ctx context.Context, tenant, id string, fn func(*Endpoint) error) (Endpoint, error)
	// DeleteEndpoint removes it. Its deliveries stay; the dispatcher
	// dead-letters pending ones when it finds the endpoint gone.
	DeleteEndpoint(ctx context.Context, tenant, id string) error

	TokenStore // tenant access tokens (tokens.go)
	TaskStore  // background tasks (tasks.go)
}

// Log is the transactional core: the event log, the deliveries and every
// change of one, the lines, the retry index and the held counts. Each
// method is one transaction (a read: one consistent snapshot); the
// dispatcher and the service read through it what an attempt, a replay
// or an ingest's bounds need.
type Log interface {
	// AppendEvent is ingest, in one transaction: check the tenant exists
	// (CodeTenantNotFound); honour the idempotency key (see NewEvent),
	// whose repeat is answered its first event even when the type has
	// left the catalogue since; check the type is in the catalogue
	// (CodeUnknownEventType; not for OperatorTenant, whose operational
	// event types are in none);
	// append the event to the log at its next place, as
	// in.Sequenced(n) for n its tenant's next Sequence (one more than
	// the last event stored for the tenant, ever, deleted or not: no
	// gap, no repeat, committed with the event); and store the
	// deliveries in.Deliveries returns for the tenant's endpoints and
	// retry policy as they are in that transaction.
	//
	// A store may instead leave the deliveries' fan-out owed, so that
	// the commit a client's acknowledgement waits for carries the event
	// alone: it then keeps, in that transaction, a durable record that
	// the event's fan-out is owed with the plan of each delivery
	// (PlanOf: the ones NewDeliveries made; any other it stores at
	// once), and answers Owed with the deliveries as planned. The
	// endpoints at acknowledgement get the event: an endpoint created
	// after it gets nothing, one deleted or changed after it gets the
	// delivery planned (which dies at its attempt when the endpoint is
	// gone, as any delivery does). FanOut stores them later, exactly as
	// this method would have but that their line (SettleLine) and their
	// PreviousSequence are decided then, in log order, as they would
	// have been here. Until then the planned deliveries are the event's
	// where it is read whole (Event, a repeat of the ingest: Owed again),
	// and nowhere else: not by their ID, not in a listing, not in
	// RetryIndex or Held (the engine counts them while they are owed).
	// An owed fan-out survives a crash: the store finishes it before
	// anything claims work (storage: Open), and retention, a tenant's
	// purge and Check know of it.
	AppendEvent(ctx context.Context, in NewEvent) (IngestResult, error)
	// FanOut stores the deliveries of at most max events whose fan-out
	// AppendEvent left owed, oldest first, in one transaction, and
	// returns them per event as stored (an event whose tenant was
	// deleted meanwhile gets none). It returns none only when none is
	// owed: a caller that loops until then has stored every fan-out
	// acknowledged before its first call. A store that never leaves a
	// fan-out owed returns none.
	FanOut(ctx context.Context, max int) ([]FannedOut, error)
	// AttemptInput reads, in one read transaction, what an attempt needs:
	// the delivery, its event's stored body and IngestTrace, and its
	// endpoint. A deleted
	// endpoint is reported with EndpointFound false, not as an error.
	AttemptInput(ctx context.Context, deliveryID string) (AttemptInput, error)
	// UpdateDelivery reads delivery id (of any tenant;
	// CodeDeliveryNotFound), calls fn with it and stores what fn returns,
	// in one transaction; the delivery's place among the due, dead and
	// paused deliveries follows from its new state. An error from fn
	// aborts the update and is returned as is. fn may run more than once:
	// it must be a transition (transitions.go), with no other effect.
	//
	// A callback is for the rare changes that must apply to the delivery
	// as it is at the write, whatever it became since anyone read it: a
	// person's replay or skip (Service), the dispatcher's pause of a
	// delivery whose endpoint is disabled and its hold of one whose
	// endpoint is not verified (each decides nothing when the delivery
	// moved on). An attempt's outcome, made once per attempt, is
	// RecordOutcome, which takes the decision made rather than a function.
	UpdateDelivery(ctx context.Context, id string, fn func(Delivery) (Delivery, error)) (Delivery, error)
	// RecordOutcome applies u, the outcome of an attempt as the engine
	// decided it (outcome.go), in one transaction, if delivery
	// u.Delivery.ID (of any tenant) is still stored at the version u.Read
	// (VersionOf): it stores u.Delivery as UpdateDelivery stores a
	// transition (settled in its line, its indexes and held counts
	// following from its state) and, when u.Endpoint is set, merges that
	// health into the delivery's endpoint (MergeHealth), unless the
	// endpoint was deleted, which is not an error. The dispatcher records
	// an attempt's outcome and what it showed of the endpoint together, so
	// no reader sees one without the other: an ingest right after a 410
	// that killed a delivery finds its endpoint disabled.
	//
	// When the stored delivery is at another version it writes nothing
	// and returns ErrDeliveryChanged: the caller reads the delivery again
	// and decides again. CodeDeliveryNotFound when there is none. A store
	// whose Scheduler leases its claims also applies u only while the
	// lease this process claimed the delivery under is still its own,
	// and returns ErrClaimLost otherwise (checked before the version). It
	// returns the delivery as stored.
	RecordOutcome(ctx context.Context, u OutcomeUpdate) (Delivery, error)
	// UpdateDeliveries is UpdateDelivery, in one transaction, for at most
	// max of the deliveries sel selects; it returns them as stored. fn
	// must move each out of sel (a replay of a dead letter, a paused
	// delivery resumed): a caller that loops until none come back then
	// meets each once. It returns none only when none is selected.
	UpdateDeliveries(ctx context.Context, sel Selection, max int, fn func(Delivery) Delivery) ([]Delivery, error)
	// Backfill is one step of a backfill (Service.StartBackfill), in one
	// transaction: read endpoint step.EndpointID of step.Tenant
	// (CodeEndpointNotFound when it or its tenant is gone) and the
	// tenant's events in log order after step.After, at most step.Scan
	// of them, stopping early at the first one step.Past; of those
	// step.Wants, count in Existing each that has a delivery to the
	// endpoint, and for each that has none make step.Delivery, up to
	// step.Max (the others count in Missing), stored as ingest stores a
	// delivery (settled in its line, in log order; its indexes and held
	// counts) under its event. Next is the last event's place when it
	// stopped at step.Scan, else 0. Whether an event has a delivery to
	// the endpoint is read in the transaction that makes one, so that
	// no two steps, at once or not, make two: an event never has more
	// than one delivery to an endpoint. With Max 0 it writes nothing.
	Backfill(ctx context.Context, step BackfillStep) (BackfillResult, error)
	// LineHead returns the head of the line (endpointID, line) (see
	// lines.go) as stored, and whether the line has one. The dispatcher
	// asks it after a transition that may have ended a head, to take
	// the promoted delivery.
	LineHead(ctx context.Context, endpointID, line string) (Delivery, bool, error)
	// RetryIndex calls fn for every pending delivery, in due order then
	// by delivery ID. It is how a single process rebuilds its timer at
	// start (LocalScheduler.Recover). fn must not call the Store; its
	// error, or the end of ctx, stops the walk and is returned.
	RetryIndex(ctx context.Context, fn func(RetryEntry) error) error
	// Held counts the deliveries no scheduler has and that are not
	// final (Held, backlog.go: waiting, paused, dead and blocking), of
	// tenant ("": of none) and of every tenant, exactly, as of one
	// transaction. Unless its Scheduler is a SharedScheduler (which
	// counts them itself: HeldCounter), the engine asks at every ingest
	// (the pending bounds) and at a tenant's deletion: a store keeps
	// these counts in the transactions that move deliveries in and out
	// of these states, so that reading them is a few keys.
	Held(ctx context.Context, tenant string) (ofTenant, all Held, err error)
}

// Selection names some of a tenant's deliveries by where their state puts
// them.
type Selection struct {
	Tenant string
	// State is StatePaused (the paused deliveries of EndpointID) or
	// StateDead (the dead letters that died in [Since, Until), of
	// EndpointID when it is set).
	State        State
	EndpointID   string
	Since, Until time.Time
}

// Listings are what the API's and the subscriber's views read: one event
// or delivery, the dead letters, the delivery log, the reconciliation feed
// and the report (listing.go). Reads only: no method writes.
//
// A listing returns the cursor of its next page only when an item the
// filter matches follows the page, so that has_more is true only when
// there is more and no listing ends on an empty page; the entries after
// the page that the filter leaves out do not count. A store that bounds
// what one page reads (storage reads at most 20 000 entries) may return,
// where it stopped, a short page (empty, even) with the cursor to read on
// from: it cannot know whether more match.
type Listings interface {
	// Event returns the event and its deliveries (CodeEventNotFound).
	Event(ctx context.Context, tenant, id string) (Event, []Delivery, error)
	// Delivery returns CodeDeliveryNotFound unless tenant has delivery id.
	Delivery(ctx context.Context, tenant, id string) (Delivery, error)
	// DeadLetters lists the tenant's dead deliveries, oldest death first,
	// starting after the cursor (empty: from the start), at most limit. It
	// returns the cursor for the next page, empty at the end.
	DeadLetters(ctx context.Context, tenant, cursor string, limit int) ([]Delivery, string, error)
	// ListDeliveries pages through tenant's deliveries newest first.
	// StateDelivering is not a stored state: f.State is never it.
	ListDeliveries(ctx context.Context, tenant string, f DeliveryFilter) ([]Delivery, string, error)
	// ListEvents pages through tenant's events in log order.
	ListEvents(ctx context.Context, tenant string, f EventFilter) ([]Event, string, error)
	// RecentEvents returns tenant's last n events with their deliveries,
	// newest first (bodies left out).
	RecentEvents(ctx context.Context, tenant string, n int) ([]EventDeliveries, error)
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

	// Deliveries returns the deliveries of ev, the event as it is
	// stored (Sequenced, with its Sequence and Seq), among its tenant's
	// endpoints, as the store reads them inside the append's transaction,
	// in creation order and perhaps with their secrets still sealed, for
	// a tenant whose Tenant.RetryPolicy is tenantPolicy, read in the same
	// transaction (NewDeliveries). Nil: NewDeliveries with NewID. The
	// store:
	//
	//   - must neither change nor keep endpoints, which are its to reuse
	//     once Deliveries returns (a copy it may keep);
	//   - may call it more than once, and stores the last call's result,
	//     each delivery settled in its line (SettleLine); each must be of
	//     this event and tenant;
	//   - may call it with ev before its Sequence is known, if it numbers
	//     the event in the statement that writes the deliveries, and then
	//     stores each delivery with the event's Sequence; but not when a
	//     delivery is ordered (has a Line): that one is settled in its line
	//     with the Sequence known, so the store takes a path that numbers
	//     the event first.
	//
	// When ev has an OrderingKey the store sets each delivery's
	// PreviousSequence, in the same transaction, to the Sequence of the
	// last delivery it made for that key to that endpoint that it still
	// stores (0: none), and remembers this one as the last.
	Deliveries func(ev Event, tenantPolicy RetryPolicyName, endpoints []Endpoint) []Delivery

	// CheckType, when set, is the catalogue's say on the event (its
	// type's status and schema, schema.go): the store calls it with the
	// entry of the event's type as the append reads it, once it knows
	// the tenant and the type exist and the append is no duplicate,
	// before it writes anything, and a non-nil error refuses the append
	// (nothing written) and is returned as it is. The store may call it
	// more than once, each time with the entry as read then, and must
	// give it an entry as current as the append: one read in the
	// append's transaction, or one the write is conditional on. It must
	// neither change nor keep et. Nil: no check. PrepareEvent sets it.
	CheckType func(et EventType) error

	// checked is what CheckType saw, for the Service (set with it).
	checked *typeCheck
}

// IngestResult is the outcome of AppendEvent.
type IngestResult struct {
	Event      Event
	Deliveries []Delivery
	Duplicate  bool // an earlier ingest with the same idempotency key
	// Owed: the event's fan-out is owed (see AppendEvent): Deliveries
	// are as planned, not yet stored, and FanOut stores them.
	Owed bool
}

// FannedOut is an event whose owed fan-out FanOut stored, with its
// deliveries as stored (none when its tenant was deleted meanwhile).
type FannedOut struct {
	EventID    string
	TenantID   string
	Deliveries []Delivery
}

// AttemptInput is what one attempt needs, read in one transaction.
type AttemptInput struct {
	Delivery      Delivery
	Body          []byte // the event's stored envelope, verbatim; shared with other attempts, read only
	Endpoint      Endpoint
	EndpointFound bool
	// IngestTrace is the event's Event.IngestTrace: the span the
	// attempt's span links to.
	IngestTrace string
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

	// Endpoint, when set, is the endpoint's health after the attempt
	// (FailingSince, LastFailure, LastFailureAt, Disabled, DisabledReason,
	// DisabledAt), merged into the stored endpoint (MergeHealth) in the
	// transaction that records the outcome (OutcomeUpdate.Endpoint). Nil:
	// the endpoint is not touched.
	Endpoint *Endpoint

	// disableAsked is the dispatcher's own, from its attempt to its
	// record: the answer asked for the endpoint to be disabled
	// (receiverDisables); record makes Endpoint say so. No store sees it.
	disableAsked bool
}

// RetryEntry is one entry of the retry index.
type RetryEntry struct {
	Due        time.Time
	DeliveryID string
	EndpointID string
	TenantID   string // the endpoint's tenant; "" when the endpoint is deleted
}
