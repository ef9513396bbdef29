package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/webhookd/webhookd/engine"
)

// Backfill is one step of a backfill (see engine.Log), under the one
// mutex: it reads the endpoint and, from the tenant's log, the events
// after step.After, and makes the deliveries the step wants of those
// without one to the endpoint, in log order, each saved as ingest saves
// one (settled in its line) and listed under its event in ID order.
func (s *Store) Backfill(ctx context.Context, step engine.BackfillStep) (engine.BackfillResult, error) {
	if err := s.lock(ctx); err != nil {
		return engine.BackfillResult{}, err
	}
	defer s.mu.Unlock()
	stored, ok := s.endpoints[step.Tenant][step.EndpointID]
	if !ok {
		return engine.BackfillResult{}, engine.EndpointNotFound()
	}
	ep := copyEndpoint(stored)
	res := engine.BackfillResult{Created: []engine.Delivery{}}
	type made struct {
		e *event
		d engine.Delivery
	}
	var todo []made
	log := s.log[step.Tenant]
	i, _ := slices.BinarySearchFunc(log, step.After+1, func(e *event, seq uint64) int { return cmp.Compare(e.ev.Seq, seq) })
	for read := 0; i < len(log); i, read = i+1, read+1 {
		e := log[i]
		if read == max(step.Scan, 1) {
			res.Next = log[i-1].ev.Seq
			break
		}
		if step.Past(e.ev) {
			break
		}
		if !step.Wants(e.ev, ep) {
			continue
		}
		if s.delivered(e, ep.ID) {
			res.Existing++
			continue
		}
		if len(todo) >= step.Max {
			res.Missing++
			continue
		}
		d, _ := step.Delivery(copyEvent(e.ev), ep)
		if err := checkNew(d, e.ev); err != nil {
			return engine.BackfillResult{}, fmt.Errorf("memstore: backfill %s: %w", step.EndpointID, err)
		}
		if _, ok := s.deliveries[d.ID]; ok {
			return engine.BackfillResult{}, fmt.Errorf("memstore: backfill %s: delivery id %s exists", step.EndpointID, d.ID)
		}
		todo = append(todo, made{e, d})
	}
	for _, m := range todo {
		m.e.deliveries = append(m.e.deliveries, m.d.ID)
		slices.Sort(m.e.deliveries)
		res.Created = append(res.Created, copyDelivery(*s.save(nil, m.d)))
	}
	return res, nil
}

// delivered reports whether event e has a delivery to endpoint id.
func (s *Store) delivered(e *event, id string) bool {
	return slices.ContainsFunc(e.deliveries, func(did string) bool { return s.deliveries[did].EndpointID == id })
}
