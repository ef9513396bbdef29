package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// save stores after, the next state of the delivery *cur (nil: after is
// new), settled in its line (engine.SettleLine) with the line as it is,
// and promotes the line's lowest waiting member when the head left. It
// returns the stored delivery. The caller holds the mutex and checked
// after (engine.CheckTransition, checkNew).
func (s *Store) save(cur *engine.Delivery, after engine.Delivery) *engine.Delivery {
	var before engine.Delivery
	if cur != nil {
		before = *cur
	}
	advance := false
	if after.Line != "" {
		after, advance = engine.SettleLine(before, after, s.lineView(after))
	}
	if cur == nil {
		cur = new(engine.Delivery)
		s.deliveries[after.ID] = cur
	}
	*cur = copyDelivery(after)
	if advance {
		s.advance(after.EndpointID, after.Line, after.Updated)
	}
	return cur
}

// lineView reads d's line as SettleLine needs it.
func (s *Store) lineView(d engine.Delivery) engine.LineView {
	v := engine.LineView{OnDead: engine.OnDeadSkip}
	if h := s.lineHead(d.EndpointID, d.Line); h != nil {
		v.Head = h.ID
	}
	if ep, ok := s.endpoints[d.TenantID][d.EndpointID]; ok && ep.OnDead == engine.OnDeadBlock {
		v.OnDead = engine.OnDeadBlock
	}
	return v
}

// lineHead returns the head of the line (endpointID, line), or nil.
func (s *Store) lineHead(endpointID, line string) *engine.Delivery {
	for _, d := range s.deliveries {
		if d.EndpointID == endpointID && d.Line == line && engine.HoldsLine(*d) {
			return d
		}
	}
	return nil
}

// waiting returns the waiting members of the line (endpointID, line) in
// line order.
func (s *Store) waiting(endpointID, line string) []*engine.Delivery {
	var out []*engine.Delivery
	for _, d := range s.deliveries {
		if d.EndpointID == endpointID && d.Line == line && d.State == engine.StateWaiting {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b *engine.Delivery) int { return engine.CompareLineOrder(*a, *b) })
	return out
}

// advance promotes the lowest waiting member of the line (endpointID,
// line), which has no head now, at at, points the others at it, and
// returns it (nil: the line had none waiting).
func (s *Store) advance(endpointID, line string, at time.Time) *engine.Delivery {
	w := s.waiting(endpointID, line)
	if len(w) == 0 {
		return nil
	}
	head := s.save(w[0], engine.PromoteDelivery(*w[0], at))
	for _, d := range w[1:] {
		d.WaitingBehind = head.ID
	}
	return head
}

// LineHead returns the head of the line (endpointID, line) and whether
// it has one.
func (s *Store) LineHead(ctx context.Context, endpointID, line string) (engine.Delivery, bool, error) {
	if err := s.lock(ctx); err != nil {
		return engine.Delivery{}, false, err
	}
	defer s.mu.Unlock()
	if line == "" {
		return engine.Delivery{}, false, nil
	}
	if h := s.lineHead(endpointID, line); h != nil {
		return copyDelivery(*h), true, nil
	}
	return engine.Delivery{}, false, nil
}
