package memstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// defaultPruneMax is how much one maintenance call deletes when its
// caller says 0, as in the other stores.
const defaultPruneMax = 500

func orDefault(max int) int {
	if max <= 0 {
		return defaultPruneMax
	}
	return max
}

// PruneIdempotency deletes at most max idempotency records expired at
// now; fewer than max means no more.
func (s *Store) PruneIdempotency(ctx context.Context, now time.Time, max int) (int, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return deleteSome(s.idempotency, max, func(rec idempotencyRecord) bool { return !now.Before(rec.expires) }), nil
}

// PruneAccessTokens deletes at most max access tokens that expired
// before before, revoked or not; fewer than max means no more.
func (s *Store) PruneAccessTokens(ctx context.Context, before time.Time, max int) (int, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return deleteSome(s.tokens, max, func(t engine.AccessToken) bool { return t.Expires.Before(before) }), nil
}

// deleteSome deletes from m at most max (0: defaultPruneMax) of the
// entries doomed says go, and returns how many it deleted.
func deleteSome[K comparable, V any](m map[K]V, max int, doomed func(V) bool) int {
	n, max := 0, orDefault(max)
	for k, v := range m {
		if n == max {
			break
		}
		if doomed(v) {
			delete(m, k)
			n++
		}
	}
	return n
}

// PruneEvents deletes, among at most max events after log position
// cursor (0: from the start), those whose every delivery is finished
// and past r, each with its deliveries; it stops at the first event
// created after both cutoffs. A deleted dead head that blocked its line
// promotes the line's lowest waiting member, due now, reported in
// Promoted. Idempotency records are PruneIdempotency's.
func (s *Store) PruneEvents(ctx context.Context, cursor uint64, r engine.Retention, max int) (engine.PruneResult, error) {
	if err := s.lock(ctx); err != nil {
		return engine.PruneResult{}, err
	}
	defer s.mu.Unlock()
	max = orDefault(max)
	newest := r.SucceededBefore
	if r.DeadBefore.After(newest) {
		newest = r.DeadBefore
	}
	var after []*event
	for _, e := range s.events {
		if e.ev.Seq > cursor {
			after = append(after, e)
		}
	}
	slices.SortFunc(after, func(a, b *event) int { return cmp.Compare(a.ev.Seq, b.ev.Seq) })
	var res engine.PruneResult
	at := utc(time.Now())
	for i, e := range after {
		if i == max {
			res.Next = after[i-1].ev.Seq
			break
		}
		if !e.ev.Created.Before(newest) {
			break // every later event is newer still
		}
		res.Scanned++
		if !r.Prunable(e.ev, s.deliveriesOf(e)) {
			continue
		}
		for _, id := range e.deliveries {
			if p := s.deleteDelivery(id, e.ev.OrderingKey, at); p != nil {
				res.Promoted = append(res.Promoted, engine.Work{DeliveryID: p.ID, TenantID: p.TenantID, EndpointID: p.EndpointID})
			}
			res.Deliveries++
		}
		s.deleteEvent(e)
		res.Events++
	}
	return res, nil
}

// PurgeDeletedTenants finds nothing to purge: DeleteTenant purges before
// it returns.
func (s *Store) PurgeDeletedTenants(ctx context.Context, tenant string, max int) (engine.PurgeResult, error) {
	return engine.PurgeResult{}, ctx.Err()
}

// deleteDelivery deletes delivery id, of an event whose ordering key is
// orderingKey, with its key tail when it is its key's last; a head
// leaves its line, whose lowest waiting member is promoted at at and
// returned. The caller holds the mutex.
func (s *Store) deleteDelivery(id, orderingKey string, at time.Time) *engine.Delivery {
	d := s.deliveries[id]
	if d == nil {
		return nil
	}
	delete(s.deliveries, id)
	if k := (keyTail{d.EndpointID, orderingKey}); orderingKey != "" && s.keyTails[k] == id {
		delete(s.keyTails, k)
	}
	if engine.HoldsLine(*d) {
		return s.advance(d.EndpointID, d.Line, at)
	}
	return nil
}

// deleteEvent takes e out of the log. Its deliveries are gone already.
// The caller holds the mutex.
func (s *Store) deleteEvent(e *event) {
	delete(s.events, e.ev.ID)
	log := s.log[e.ev.TenantID]
	s.log[e.ev.TenantID] = slices.DeleteFunc(log, func(x *event) bool { return x == e })
	if len(s.log[e.ev.TenantID]) == 0 {
		delete(s.log, e.ev.TenantID)
	}
}

// OrphanedPaused returns at most max of the deleted endpoints that still
// have paused deliveries, of tenants that are not deleted (see
// engine.Maintenance), in (tenant, endpoint) order.
func (s *Store) OrphanedPaused(ctx context.Context, max int) ([]engine.EndpointRef, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	seen := map[engine.EndpointRef]bool{}
	for _, d := range s.deliveries {
		if d.State != engine.StatePaused {
			continue
		}
		if _, ok := s.tenants[d.TenantID]; !ok {
			continue
		}
		if _, ok := s.endpoints[d.TenantID][d.EndpointID]; ok {
			continue
		}
		seen[engine.EndpointRef{TenantID: d.TenantID, EndpointID: d.EndpointID}] = true
	}
	refs := slices.SortedFunc(func(yield func(engine.EndpointRef) bool) {
		for r := range seen {
			if !yield(r) {
				return
			}
		}
	}, func(a, b engine.EndpointRef) int {
		return cmp.Or(cmp.Compare(a.TenantID, b.TenantID), cmp.Compare(a.EndpointID, b.EndpointID))
	})
	return refs[:min(len(refs), orDefault(max))], nil
}
