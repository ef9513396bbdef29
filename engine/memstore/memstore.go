// Package memstore is an engine.Backend that keeps everything in memory,
// for tests: the engine's and httpapi's unit tests can run a Service on it
// without a file, and the conformance suite (engine/storetest) holds it to
// the same contract as the bbolt store, error codes included. It is the
// template for a new store: the whole contract, with nothing of a
// database in the way (see engine/doc.go).
//
// It is safe for concurrent use: one mutex guards everything, and every
// method holds it for the whole of its work, so each method is one
// transaction and a function passed in (UpdateEndpoint's, UpdateDelivery's,
// AppendEvent's Deliveries) runs exactly once, under the mutex: it must
// not call the Store. Records are copied in and out, so a caller never
// shares memory with the store. Times are kept in UTC without a monotonic
// reading, as a stored and reread time would be.
//
// Nothing is durable: a Store is gone with the process. DeleteTenant
// purges the tenant's data before it returns, so its id is free at once.
// Its Maintenance (maintenance.go) prunes what retention no longer keeps
// as the other stores do.
//
// The store keeps no index: where a delivery is (due, dead, paused)
// follows from its state alone, read when asked. The retry index is in
// due order, then delivery ID order; the dead letters in death order, then
// delivery ID order; the paused deliveries of an endpoint in delivery ID
// order; the delivery log newest first by event, then by delivery ID,
// highest first: the bbolt store's orders.
package memstore

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// Store is an in-memory engine.Backend. The zero value is not usable: call
// New.
type Store struct {
	mu         sync.Mutex
	tenants    map[string]engine.Tenant
	eventTypes map[string]engine.EventType
	endpoints  map[string]map[string]engine.Endpoint // tenant → endpoint ID → endpoint
	tokens     map[[32]byte]engine.AccessToken       // by the token's SHA-256

	seq         uint64              // the last event's place in the log
	sequences   map[string]uint64   // tenant → its last event's Sequence, kept when it is deleted
	events      map[string]*event   // by event ID
	log         map[string][]*event // tenant → its events in log order
	deliveries  map[string]*engine.Delivery
	idempotency map[idempotencyKey]idempotencyRecord
	// keyTails: (endpoint ID, ordering key) → the ID of the last delivery
	// made for that key to that endpoint; its PreviousSequence source
	// while the delivery is stored.
	keyTails map[keyTail]string
	tasks    map[string]engine.Task // by ID
}

type keyTail struct{ endpointID, orderingKey string }

var _ engine.Backend = (*Store)(nil)

// event is an event of the log with the IDs of its deliveries, in ID
// order.
type event struct {
	ev         engine.Event // Seq set
	deliveries []string
}

type idempotencyKey struct{ tenant, key string }

type idempotencyRecord struct {
	eventID string
	hash    [32]byte
	expires time.Time
}

// New returns an empty Store.
func New() *Store {
	return &Store{
		tenants:     map[string]engine.Tenant{},
		eventTypes:  map[string]engine.EventType{},
		endpoints:   map[string]map[string]engine.Endpoint{},
		tokens:      map[[32]byte]engine.AccessToken{},
		events:      map[string]*event{},
		log:         map[string][]*event{},
		deliveries:  map[string]*engine.Delivery{},
		idempotency: map[idempotencyKey]idempotencyRecord{},
		keyTails:    map[keyTail]string{},
		sequences:   map[string]uint64{},
		tasks:       map[string]engine.Task{},
	}
}

// lock takes the mutex unless ctx has ended. The caller unlocks.
func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	return nil
}

// validTenantID reports whether id can name a tenant in any store: not
// empty and without a NUL byte (the bbolt store's key separator).
func validTenantID(id string) bool {
	return id != "" && !strings.ContainsRune(id, 0)
}

// Copies. Every record goes in and out through one of these, so the
// caller and the store never share a slice, and every time is in UTC.

// utc returns t in UTC without a monotonic reading; the zero time stays
// zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func copyTenant(t engine.Tenant) engine.Tenant {
	t.Created, t.Updated = utc(t.Created), utc(t.Updated)
	return t
}

func copyEventType(et engine.EventType) engine.EventType {
	et.Created, et.Updated = utc(et.Created), utc(et.Updated)
	et.Example, et.Schema = slices.Clone(et.Example), slices.Clone(et.Schema)
	return et
}

func copyEndpoint(ep engine.Endpoint) engine.Endpoint {
	ep.EventTypes = slices.Clone(ep.EventTypes)
	ep.Channels = slices.Clone(ep.Channels)
	ep.Secrets = slices.Clone(ep.Secrets)
	for i := range ep.Secrets {
		ep.Secrets[i].Expires = utc(ep.Secrets[i].Expires)
	}
	ep.Headers = slices.Clone(ep.Headers)
	ep.SecretReveals = slices.Clone(ep.SecretReveals)
	for i := range ep.SecretReveals {
		ep.SecretReveals[i].At = utc(ep.SecretReveals[i].At)
	}
	ep.DisabledAt, ep.FailingSince, ep.LastFailureAt = utc(ep.DisabledAt), utc(ep.FailingSince), utc(ep.LastFailureAt)
	ep.Created, ep.Updated, ep.Verified = utc(ep.Created), utc(ep.Updated), utc(ep.Verified)
	ep.EffectiveRetryPolicy = "" // not stored: the Service fills it in
	return ep
}

func copyEvent(ev engine.Event) engine.Event {
	ev.Created = utc(ev.Created)
	ev.Channels = slices.Clone(ev.Channels)
	ev.Body = append([]byte{}, ev.Body...)
	return ev
}

func copyDelivery(d engine.Delivery) engine.Delivery {
	d.CycleStart, d.NextAttemptAt, d.DeadAt = utc(d.CycleStart), utc(d.NextAttemptAt), utc(d.DeadAt)
	d.Created, d.Updated = utc(d.Created), utc(d.Updated)
	d.Channels = slices.Clone(d.Channels)
	d.Attempts = slices.Clone(d.Attempts)
	for i := range d.Attempts {
		d.Attempts[i].Start = utc(d.Attempts[i].Start)
		d.Attempts[i].ResponseHeaders = slices.Clone(d.Attempts[i].ResponseHeaders)
	}
	d.Replays = slices.Clone(d.Replays)
	for i := range d.Replays {
		d.Replays[i].At = utc(d.Replays[i].At)
	}
	d.Skips = slices.Clone(d.Skips)
	for i := range d.Skips {
		d.Skips[i].At = utc(d.Skips[i].At)
	}
	if d.Backfill != nil {
		b := *d.Backfill
		b.At = utc(b.At)
		d.Backfill = &b
	}
	return d
}

func copyAccessToken(t engine.AccessToken) engine.AccessToken {
	if t.Environment == "" {
		t.Environment = engine.EnvironmentLive
	}
	t.Created, t.Expires, t.Revoked = utc(t.Created), utc(t.Expires), utc(t.Revoked)
	return t
}

// sortedValues returns m's values ordered by cmp, copied by cp.
func sortedValues[K comparable, V any](m map[K]V, cmp func(a, b V) int, cp func(V) V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, cp(v))
	}
	slices.SortFunc(out, cmp)
	return out
}
