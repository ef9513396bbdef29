package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/webhookd/webhookd/engine"
)

// AppendEvent is ingest (see engine.Store): the tenant must exist
// (CodeTenantNotFound); a
// live idempotency record with the same request hash gives the first
// event and its deliveries as they are now (Duplicate), with another hash
// CodeIdempotencyConflict, whether or not the type is still in the
// catalogue; otherwise the type must be in it (CodeUnknownEventType)
// unless the tenant is engine.OperatorTenant. Then in.CheckType, when set, has its say on
// the type's entry (an operator event of a type not in the catalogue
// has none to be checked against). Otherwise the
// event gets the next place in the log, its tenant's next Sequence
// (NewEvent.Sequenced) and the deliveries in.Deliveries
// returns for the tenant's endpoints (in ID order) and retry policy,
// returned in ID order.
func (s *Store) AppendEvent(ctx context.Context, in engine.NewEvent) (engine.IngestResult, error) {
	ev := in.Event
	if ev.ID == "" || strings.ContainsRune(ev.ID, 0) {
		return engine.IngestResult{}, engine.InvalidEventID()
	}
	if ev.Type == "" {
		return engine.IngestResult{}, engine.EventTypeRequired()
	}
	if err := s.lock(ctx); err != nil {
		return engine.IngestResult{}, err
	}
	defer s.mu.Unlock()
	tenant, ok := s.tenants[ev.TenantID]
	if !ok {
		return engine.IngestResult{}, engine.TenantNotFound()
	}
	et, known := s.eventTypes[ev.Type]
	// The key before the type's absence, as before its status: a repeat
	// of an event taken before its type left the catalogue is answered
	// that event.
	key := idempotencyKey{ev.TenantID, in.IdempotencyKey}
	if rec, ok := s.idempotency[key]; ok && in.IdempotencyKey != "" && ev.Created.Before(rec.expires) {
		if rec.hash != in.RequestHash {
			return engine.IngestResult{}, engine.IdempotencyConflict()
		}
		first, ok := s.events[rec.eventID]
		if !ok {
			return engine.IngestResult{}, fmt.Errorf("memstore: append event %s: idempotency record points at event %s, not in the log", ev.ID, rec.eventID)
		}
		return engine.IngestResult{Event: copyEvent(first.ev), Deliveries: s.deliveriesOf(first), Duplicate: true}, nil
	}
	if !known && ev.TenantID != engine.OperatorTenant {
		return engine.IngestResult{}, engine.UnknownEventType(ev.Type)
	}
	if _, ok := s.events[ev.ID]; ok {
		return engine.IngestResult{}, fmt.Errorf("memstore: append event %s: event id exists", ev.ID)
	}
	if in.CheckType != nil && known {
		if err := in.CheckType(et); err != nil {
			return engine.IngestResult{}, err
		}
	}

	stored := copyEvent(in.Sequenced(s.sequences[ev.TenantID] + 1))
	stored.Seq = s.seq + 1
	eps := s.endpointsOf(ev.TenantID)
	var made []engine.Delivery
	if in.Deliveries != nil {
		made = in.Deliveries(copyEvent(stored), tenant.RetryPolicy, eps)
	} else {
		made = engine.NewDeliveries(stored, tenant.RetryPolicy, eps, engine.NewID)
	}
	ds := make([]engine.Delivery, len(made))
	seen := map[string]bool{}
	for i, d := range made {
		if err := checkNew(d, stored); err != nil {
			return engine.IngestResult{}, fmt.Errorf("memstore: append event %s: %w", ev.ID, err)
		}
		if _, ok := s.deliveries[d.ID]; ok || seen[d.ID] {
			return engine.IngestResult{}, fmt.Errorf("memstore: append event %s: delivery id %s exists", ev.ID, d.ID)
		}
		seen[d.ID] = true
		ds[i] = copyDelivery(d)
	}
	slices.SortFunc(ds, func(a, b engine.Delivery) int { return strings.Compare(a.ID, b.ID) })
	for i := range ds {
		ds[i].PreviousSequence = 0
		if stored.OrderingKey == "" {
			continue
		}
		k := keyTail{ds[i].EndpointID, stored.OrderingKey}
		if prev, ok := s.deliveries[s.keyTails[k]]; ok {
			ds[i].PreviousSequence = prev.Sequence
		}
		s.keyTails[k] = ds[i].ID
	}

	s.seq++
	s.sequences[ev.TenantID] = stored.Sequence
	e := &event{ev: stored, deliveries: make([]string, len(ds))}
	for i, d := range ds {
		e.deliveries[i] = d.ID
		ds[i] = copyDelivery(*s.save(nil, d))
	}
	s.events[ev.ID] = e
	s.log[ev.TenantID] = append(s.log[ev.TenantID], e)
	if in.IdempotencyKey != "" {
		s.idempotency[key] = idempotencyRecord{eventID: ev.ID, hash: in.RequestHash, expires: utc(in.IdempotencyExpires)}
	}
	return engine.IngestResult{Event: copyEvent(stored), Deliveries: ds}, nil
}

// checkNew refuses a new delivery of ev that the store cannot keep.
func checkNew(d engine.Delivery, ev engine.Event) error {
	if d.ID == "" || d.TenantID != ev.TenantID || d.EventID != ev.ID {
		return fmt.Errorf("delivery %q is not one of event %s of tenant %s", d.ID, ev.ID, ev.TenantID)
	}
	return engine.CheckStorable(d)
}

// deliveriesOf returns copies of e's deliveries, in ID order.
func (s *Store) deliveriesOf(e *event) []engine.Delivery {
	out := make([]engine.Delivery, 0, len(e.deliveries))
	for _, id := range e.deliveries {
		out = append(out, copyDelivery(*s.deliveries[id]))
	}
	return out
}

// Event returns event id of tenant and its deliveries in ID order, or
// CodeEventNotFound (also when it is another tenant's).
func (s *Store) Event(ctx context.Context, tenant, id string) (engine.Event, []engine.Delivery, error) {
	if err := s.lock(ctx); err != nil {
		return engine.Event{}, nil, err
	}
	defer s.mu.Unlock()
	e, ok := s.events[id]
	if !ok || e.ev.TenantID != tenant {
		return engine.Event{}, nil, engine.EventNotFound()
	}
	return copyEvent(e.ev), s.deliveriesOf(e), nil
}

// Delivery returns delivery id of tenant, or CodeDeliveryNotFound (also
// when it is another tenant's).
func (s *Store) Delivery(ctx context.Context, tenant, id string) (engine.Delivery, error) {
	if err := s.lock(ctx); err != nil {
		return engine.Delivery{}, err
	}
	defer s.mu.Unlock()
	d, ok := s.deliveries[id]
	if !ok || d.TenantID != tenant {
		return engine.Delivery{}, engine.DeliveryNotFound()
	}
	return copyDelivery(*d), nil
}

// AttemptInput returns delivery id (of any tenant; CodeDeliveryNotFound),
// its event's body and IngestTrace, and its endpoint (EndpointFound false
// when deleted).
func (s *Store) AttemptInput(ctx context.Context, deliveryID string) (engine.AttemptInput, error) {
	if err := s.lock(ctx); err != nil {
		return engine.AttemptInput{}, err
	}
	defer s.mu.Unlock()
	d, ok := s.deliveries[deliveryID]
	if !ok {
		return engine.AttemptInput{}, engine.DeliveryNotFound()
	}
	e, ok := s.events[d.EventID]
	if !ok {
		return engine.AttemptInput{}, fmt.Errorf("memstore: attempt input of delivery %s: event %s of the delivery is not in the log", deliveryID, d.EventID)
	}
	in := engine.AttemptInput{Delivery: copyDelivery(*d), Body: copyEvent(e.ev).Body, IngestTrace: e.ev.IngestTrace}
	if ep, ok := s.endpoints[d.TenantID][d.EndpointID]; ok {
		in.Endpoint, in.EndpointFound = copyEndpoint(ep), true
	}
	return in, nil
}

// UpdateDelivery calls fn with a copy of delivery id (of any tenant;
// CodeDeliveryNotFound) and stores what it returns; an error from fn is
// returned as is and stores nothing. A result that changes whose delivery
// it is, or that cannot be stored (engine.CheckStorable), is refused.
func (s *Store) UpdateDelivery(ctx context.Context, id string, fn func(engine.Delivery) (engine.Delivery, error)) (engine.Delivery, error) {
	if err := s.lock(ctx); err != nil {
		return engine.Delivery{}, err
	}
	defer s.mu.Unlock()
	d, ok := s.deliveries[id]
	if !ok {
		return engine.Delivery{}, engine.DeliveryNotFound()
	}
	after, err := fn(copyDelivery(*d))
	if err != nil {
		return engine.Delivery{}, err
	}
	if err := engine.CheckTransition(*d, after); err != nil {
		return engine.Delivery{}, fmt.Errorf("memstore: update delivery %s: %w", id, err)
	}
	s.save(d, after)
	return copyDelivery(*d), nil
}

// RecordOutcome stores u.Delivery over the delivery it is, if that is
// still at version u.Read (engine.ErrDeliveryChanged otherwise), and
// merges u.Endpoint into its endpoint if it still exists, under the one
// lock, telling u.OnHealth once it is released. It holds no leases, so
// it never answers engine.ErrClaimLost.
func (s *Store) RecordOutcome(ctx context.Context, u engine.OutcomeUpdate) (engine.Delivery, error) {
	out, health, err := s.recordOutcome(ctx, u)
	if health != nil {
		u.Merged(health[0], health[1])
	}
	return out, err
}

// recordOutcome is RecordOutcome under the lock; health is the endpoint
// before and after the merge, nil when none was merged.
func (s *Store) recordOutcome(ctx context.Context, u engine.OutcomeUpdate) (engine.Delivery, *[2]engine.Endpoint, error) {
	if err := s.lock(ctx); err != nil {
		return engine.Delivery{}, nil, err
	}
	defer s.mu.Unlock()
	id := u.Delivery.ID
	d, ok := s.deliveries[id]
	if !ok {
		return engine.Delivery{}, nil, engine.DeliveryNotFound()
	}
	if engine.VersionOf(*d) != u.Read {
		return engine.Delivery{}, nil, engine.ErrDeliveryChanged
	}
	if err := engine.CheckTransition(*d, u.Delivery); err != nil {
		return engine.Delivery{}, nil, fmt.Errorf("memstore: update delivery %s: %w", id, err)
	}
	s.save(d, u.Delivery)
	var health *[2]engine.Endpoint
	if old, ok := s.endpoints[d.TenantID][d.EndpointID]; ok && u.Endpoint != nil {
		merged := u.Merge(old)
		s.endpoints[d.TenantID][d.EndpointID] = copyEndpoint(merged)
		health = &[2]engine.Endpoint{copyEndpoint(old), copyEndpoint(merged)}
	}
	return copyDelivery(*d), health, nil
}

// UpdateDeliveries applies fn to at most n of the deliveries sel
// selects, all or none, and returns them as stored. It selects the
// paused deliveries of sel.EndpointID in ID order, or the dead letters
// that died in [sel.Since, sel.Until) (no upper bound when Until is zero),
// of sel.EndpointID when set, in death order.
func (s *Store) UpdateDeliveries(ctx context.Context, sel engine.Selection, n int, fn func(engine.Delivery) engine.Delivery) ([]engine.Delivery, error) {
	if sel.State != engine.StatePaused && sel.State != engine.StateDead {
		return nil, fmt.Errorf("memstore: update deliveries: cannot select by state %q", sel.State)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var selected []*engine.Delivery
	if sel.State == engine.StatePaused {
		selected = s.tenantDeliveries(sel.Tenant, func(d *engine.Delivery) bool {
			return d.State == engine.StatePaused && d.EndpointID == sel.EndpointID
		}, byID)
	} else {
		selected = s.tenantDeliveries(sel.Tenant, func(d *engine.Delivery) bool {
			return d.State == engine.StateDead && !d.DeadAt.Before(sel.Since) &&
				(sel.Until.IsZero() || d.DeadAt.Before(sel.Until)) &&
				(sel.EndpointID == "" || d.EndpointID == sel.EndpointID)
		}, byDeath)
	}
	selected = selected[:min(len(selected), max(n, 0))]
	afters := make([]engine.Delivery, len(selected))
	for i, d := range selected {
		after := fn(copyDelivery(*d))
		if err := engine.CheckTransition(*d, after); err != nil {
			return nil, fmt.Errorf("memstore: update %s deliveries of %s: %w", sel.State, sel.Tenant, err)
		}
		afters[i] = after
	}
	// Saved in line order (a range replay makes the lowest Sequence of a
	// line its head), returned in the selection's.
	order := make([]int, len(selected))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return engine.CompareLineOrder(*selected[a], *selected[b]) })
	for _, i := range order {
		s.save(selected[i], afters[i])
	}
	out := make([]engine.Delivery, len(selected))
	for i, d := range selected {
		out[i] = copyDelivery(*d)
	}
	return out, nil
}

// tenantDeliveries returns the stored deliveries of tenant that keep
// passes, ordered by cmp.
func (s *Store) tenantDeliveries(tenant string, keep func(*engine.Delivery) bool, cmp func(a, b *engine.Delivery) int) []*engine.Delivery {
	var out []*engine.Delivery
	for _, e := range s.log[tenant] {
		for _, id := range e.deliveries {
			if d := s.deliveries[id]; keep(d) {
				out = append(out, d)
			}
		}
	}
	slices.SortFunc(out, cmp)
	return out
}

func byID(a, b *engine.Delivery) int { return strings.Compare(a.ID, b.ID) }

// byDeath is the dead letters' order: by DeadAt, then by ID.
func byDeath(a, b *engine.Delivery) int {
	if c := a.DeadAt.Compare(b.DeadAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// RetryIndex calls fn for every pending delivery, in due order, then
// delivery ID order, from a snapshot taken at the call: fn runs without
// the store's mutex and may call the Store. An error from fn (or the end
// of ctx) stops the walk and is returned as is.
func (s *Store) RetryIndex(ctx context.Context, fn func(engine.RetryEntry) error) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	var entries []engine.RetryEntry
	for _, d := range s.deliveries {
		if d.State != engine.StatePending {
			continue
		}
		e := engine.RetryEntry{Due: d.NextAttemptAt, DeliveryID: d.ID, EndpointID: d.EndpointID}
		if _, ok := s.endpoints[d.TenantID][d.EndpointID]; ok {
			e.TenantID = d.TenantID
		}
		entries = append(entries, e)
	}
	s.mu.Unlock()
	slices.SortFunc(entries, func(a, b engine.RetryEntry) int {
		if c := a.Due.Compare(b.Due); c != 0 {
			return c
		}
		return strings.Compare(a.DeliveryID, b.DeliveryID)
	})
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// Held counts the held deliveries of tenant and of every tenant by
// walking them all: the store keeps no index (see the package doc).
func (s *Store) Held(ctx context.Context, tenant string) (ofTenant, all engine.Held, err error) {
	if err := s.lock(ctx); err != nil {
		return engine.Held{}, engine.Held{}, err
	}
	defer s.mu.Unlock()
	for _, d := range s.deliveries {
		h := engine.HeldOf(*d)
		all = all.Plus(h)
		if tenant != "" && d.TenantID == tenant {
			ofTenant = ofTenant.Plus(h)
		}
	}
	return ofTenant, all, nil
}

// FanOut returns none: AppendEvent stores an event's deliveries with it
// and leaves no fan-out owed.
func (s *Store) FanOut(ctx context.Context, max int) ([]engine.FannedOut, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return []engine.FannedOut{}, nil
}
