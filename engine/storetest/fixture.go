package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// The records the suite writes are made the way the service makes them.

// tenant creates live tenant id.
func (f *fixture) tenant(t *testing.T, id string) engine.Tenant {
	t.Helper()
	tn, _, err := f.s.PutTenant(t.Context(), engine.Tenant{ID: id, Name: "Tenant " + id, Environment: engine.EnvironmentLive, Created: t0, Updated: t0})
	if err != nil {
		t.Fatalf("PutTenant(%s): %v", id, err)
	}
	return tn
}

// eventType adds name to the catalogue.
func (f *fixture) eventType(t *testing.T, name string) {
	t.Helper()
	if _, _, err := f.s.PutEventType(t.Context(), engine.EventType{Name: name, Description: "about " + name, Created: t0, Updated: t0}); err != nil {
		t.Fatalf("PutEventType(%s): %v", name, err)
	}
}

// newEndpoint returns an endpoint of tenant subscribed to types, with a
// signing secret, not yet stored.
func newEndpoint(tenant string, types ...string) engine.Endpoint {
	return engine.Endpoint{
		ID: engine.NewID("ep"), TenantID: tenant, URL: "https://example.com/hook",
		EventTypes: types, Description: "test", Created: t0, Updated: t0,
		Secrets: []engine.Secret{{Key: engine.NewSecret()}},
	}
}

// endpoint creates an endpoint of tenant subscribed to types.
func (f *fixture) endpoint(t *testing.T, tenant string, types ...string) engine.Endpoint {
	t.Helper()
	ep := newEndpoint(tenant, types...)
	if err := f.s.CreateEndpoint(t.Context(), ep, 0); err != nil {
		t.Fatalf("CreateEndpoint: %v", err)
	}
	return ep
}

// setEnabled enables or disables ep as SetEndpointEnabled does (its
// held deliveries are left as they are).
func (f *fixture) setEnabled(t *testing.T, ep engine.Endpoint, enabled bool, at time.Time) engine.Endpoint {
	t.Helper()
	got, err := f.s.UpdateEndpoint(t.Context(), ep.TenantID, ep.ID, func(e *engine.Endpoint) error {
		e.Disabled, e.Updated = !enabled, at
		if enabled {
			e.DisabledReason, e.DisabledAt, e.FailingSince = "", time.Time{}, time.Time{}
		} else {
			e.DisabledReason, e.DisabledAt = "disabled by request (admin)", at
		}
		return nil
	})
	if err != nil {
		t.Fatalf("UpdateEndpoint(%s): %v", ep.ID, err)
	}
	return got
}

// laneN numbers lanes across the suite.
var laneN atomic.Int64

// lane creates an event type of its own and an endpoint of tenant that
// alone subscribes to it: every event of that type has one delivery, to
// that endpoint.
func (f *fixture) lane(t *testing.T, tenant string) (engine.Endpoint, string) {
	t.Helper()
	typ := fmt.Sprintf("lane%d.created", laneN.Add(1))
	f.eventType(t, typ)
	return f.endpoint(t, tenant, typ), typ
}

// clock numbers the events of a fixture, so that each is created a
// millisecond after the one before.
var eventClock atomic.Int64

// newEvent returns an ingest of typ for tenant with body, made as the
// service makes it, created a millisecond after the previous one.
func newEvent(tenant, typ, body string) engine.NewEvent {
	at := t0.Add(time.Duration(eventClock.Add(1)) * time.Millisecond)
	return newEventAt(tenant, typ, body, at)
}

// newEventAt is newEvent created at at.
func newEventAt(tenant, typ, body string, at time.Time) engine.NewEvent {
	ev := engine.Event{ID: engine.NewID("evt"), TenantID: tenant, Type: typ, Created: at, APIVersion: "2030-01-01", Body: []byte(body)}
	return engine.NewEvent{
		Event: ev,
		Deliveries: func(stored engine.Event, policy engine.RetryPolicyName, eps []engine.Endpoint) []engine.Delivery {
			return engine.NewDeliveries(stored, policy, eps, engine.NewID)
		},
	}
}

// ingest appends in and then stores its fan-out if the store left it
// owed, as the service does (Service: its fan-out), and fails t on an
// error. The result's deliveries are as AppendEvent answered them.
func (f *fixture) ingest(t *testing.T, in engine.NewEvent) engine.IngestResult {
	t.Helper()
	res, err := f.s.AppendEvent(t.Context(), in)
	if err != nil {
		t.Fatalf("AppendEvent: %v", err)
	}
	if res.Owed {
		f.fanOut(t)
	}
	return res
}

// appendEvent is AppendEvent followed, when it succeeded with the
// fan-out owed, by fanOut.
func (f *fixture) appendEvent(t *testing.T, in engine.NewEvent) (engine.IngestResult, error) {
	t.Helper()
	res, err := f.s.AppendEvent(t.Context(), in)
	if err == nil && res.Owed {
		f.fanOut(t)
	}
	return res, err
}

// fanOut stores every owed fan-out (FanOut until none) and returns what
// it stored.
func (f *fixture) fanOut(t *testing.T) []engine.FannedOut {
	t.Helper()
	var all []engine.FannedOut
	for {
		done, err := f.s.FanOut(t.Context(), 100)
		if err != nil {
			t.Fatalf("FanOut: %v", err)
		}
		if len(done) == 0 {
			return all
		}
		all = append(all, done...)
	}
}

// deliver ingests an event of typ for ep's tenant and returns its one
// delivery, to ep (see lane).
func (f *fixture) deliver(t *testing.T, ep engine.Endpoint, typ string) engine.Delivery {
	t.Helper()
	res := f.ingest(t, newEvent(ep.TenantID, typ, `{"n":1}`))
	if len(res.Deliveries) != 1 || res.Deliveries[0].EndpointID != ep.ID {
		t.Fatalf("ingest of %s made deliveries %+v, want one to %s", typ, res.Deliveries, ep.ID)
	}
	return res.Deliveries[0]
}

// The transitions, applied as the dispatcher and the service apply them.

// outcomeOf is the attempt outcome and status that lead to state.
func outcomeOf(state engine.State) (engine.Outcome, int, string) {
	switch state {
	case engine.StateSucceeded:
		return engine.OutcomeSuccess, 200, ""
	case engine.StateDead:
		return engine.OutcomePermanent, 410, "HTTP 410 Gone"
	}
	return engine.OutcomeRetry, 503, "HTTP 503"
}

// attemptRecord is the record of an attempt of d, as the dispatcher read
// it before the attempt, that ended at at and moves d to state (due
// again at next when Pending).
func attemptRecord(d engine.Delivery, state engine.State, at, next time.Time) engine.AttemptRecord {
	outcome, status, reason := outcomeOf(state)
	rec := engine.AttemptRecord{
		DeliveryID: d.ID, Cycle: d.Cycle, State: state, Reason: reason, LastStatus: status, At: at,
		Attempt: engine.Attempt{
			Cycle: d.Cycle, Number: d.CycleAttempts + 1, Start: at.Add(-150 * time.Millisecond),
			Duration: 150 * time.Millisecond, Status: status, Outcome: outcome, Response: "ok",
			ResponseHeaders: []engine.Header{{Name: "Content-Type", Value: "text/plain; charset=utf-8"}, {Name: "X-Request-Id", Value: "req_" + d.ID}},
		},
	}
	if state == engine.StatePending {
		rec.NextAttemptAt = next
		rec.Attempt.RetryAfter = next.Sub(at)
	}
	return rec
}

// update applies transition step to delivery id through UpdateDelivery.
func (f *fixture) update(t *testing.T, id string, step func(engine.Delivery) engine.Delivery) engine.Delivery {
	t.Helper()
	d, err := f.s.UpdateDelivery(t.Context(), id, func(d engine.Delivery) (engine.Delivery, error) { return step(d), nil })
	if err != nil {
		t.Fatalf("UpdateDelivery(%s): %v", id, err)
	}
	return d
}

// record records rec as the dispatcher does: it reads the delivery for
// the attempt (AttemptInput) and records RecordAttempt of what it read,
// with rec's health, through RecordOutcome.
func (f *fixture) record(t *testing.T, rec engine.AttemptRecord) engine.Delivery {
	t.Helper()
	in, err := f.s.AttemptInput(t.Context(), rec.DeliveryID)
	if err != nil {
		t.Fatalf("AttemptInput(%s): %v", rec.DeliveryID, err)
	}
	d, err := f.s.RecordOutcome(t.Context(), engine.NewOutcomeUpdate(in.Delivery, rec))
	if err != nil {
		t.Fatalf("RecordOutcome(%s): %v", rec.DeliveryID, err)
	}
	return d
}

// settle records an attempt of d that moves it to state at at (due again
// at next when Pending).
func (f *fixture) settle(t *testing.T, d engine.Delivery, state engine.State, at, next time.Time) engine.Delivery {
	t.Helper()
	return f.record(t, attemptRecord(d, state, at, next))
}

// pause pauses d, as read before, at at, as the dispatcher does when it
// finds d's endpoint disabled.
func (f *fixture) pause(t *testing.T, d engine.Delivery, at time.Time) engine.Delivery {
	t.Helper()
	return f.update(t, d.ID, func(cur engine.Delivery) engine.Delivery { return engine.PauseDelivery(cur, d.Cycle, at) })
}

// replay replays delivery id of tenant as the service's Replay does.
func (f *fixture) replay(t *testing.T, tenant, id string, r engine.Replay) (engine.Delivery, error) {
	t.Helper()
	return f.s.UpdateDelivery(t.Context(), id, func(d engine.Delivery) (engine.Delivery, error) {
		if d.TenantID != tenant {
			return engine.Delivery{}, engine.DeliveryNotFound()
		}
		return engine.ReplayDelivery(d, r, ""), nil
	})
}

// selectAll applies step to every delivery sel selects, at most max per
// call, calling until fewer than max come back, as the service's loops
// do, and returns them all.
func (f *fixture) selectAll(t *testing.T, sel engine.Selection, max int, step func(engine.Delivery) engine.Delivery) []engine.Delivery {
	t.Helper()
	all := []engine.Delivery{}
	for calls := 0; ; calls++ {
		if calls > 1000 {
			t.Fatalf("UpdateDeliveries(%+v) still returns %d after %d calls", sel, max, calls)
		}
		ds, err := f.s.UpdateDeliveries(t.Context(), sel, max, step)
		if err != nil {
			t.Fatalf("UpdateDeliveries(%+v): %v", sel, err)
		}
		if len(ds) > max {
			t.Fatalf("UpdateDeliveries(max %d) returned %d", max, len(ds))
		}
		all = append(all, ds...)
		if len(ds) < max {
			return all
		}
	}
}

// resume resumes ep's paused deliveries as enabling it does: replayed
// with r when deliver, dead-lettered at r.At otherwise.
func (f *fixture) resume(t *testing.T, ep engine.Endpoint, deliver bool, r engine.Replay, max int) []engine.Delivery {
	t.Helper()
	sel := engine.Selection{Tenant: ep.TenantID, State: engine.StatePaused, EndpointID: ep.ID}
	return f.selectAll(t, sel, max, func(d engine.Delivery) engine.Delivery {
		if deliver {
			return engine.ReplayDelivery(d, r, "")
		}
		return engine.DropHeldDelivery(d, r.At)
	})
}

// Reads.

// read returns d as stored now.
func (f *fixture) read(t *testing.T, d engine.Delivery) engine.Delivery {
	t.Helper()
	got, err := f.s.Delivery(t.Context(), d.TenantID, d.ID)
	if err != nil {
		t.Fatalf("Delivery(%s): %v", d.ID, err)
	}
	return got
}

// retryIndex returns the whole retry index.
func (f *fixture) retryIndex(t *testing.T) []engine.RetryEntry {
	t.Helper()
	out := []engine.RetryEntry{}
	if err := f.s.RetryIndex(t.Context(), func(e engine.RetryEntry) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("RetryIndex: %v", err)
	}
	return out
}

// readPages calls page with the cursor of the page before it ("" for the
// first) until it returns no cursor, and returns the pages. It fails t on
// an error, on a page longer than limit and on a listing that does not
// end.
func readPages[T any](t *testing.T, limit int, page func(cursor string) ([]T, string, error)) [][]T {
	t.Helper()
	var pages [][]T
	cursor := ""
	for range 1000 {
		rows, next, err := page(cursor)
		if err != nil {
			t.Fatalf("page after %q: %v", cursor, err)
		}
		if len(rows) > limit {
			t.Fatalf("a page of %d with limit %d", len(rows), limit)
		}
		pages = append(pages, rows)
		if next == "" {
			return pages
		}
		cursor = next
	}
	t.Fatal("paging does not end")
	return nil
}

// deadLetters returns all of tenant's dead letters, page by page.
func (f *fixture) deadLetters(t *testing.T, tenant string) []engine.Delivery {
	t.Helper()
	return slices.Concat(readPages(t, 7, func(cursor string) ([]engine.Delivery, string, error) {
		return f.s.DeadLetters(t.Context(), tenant, cursor, 7)
	})...)
}

// wantPlace fails t unless each of ds, as stored now, is where its state
// puts it: in the retry index once, due at NextAttemptAt, if and only if
// it is Pending; among its tenant's dead letters once if and only if it
// is Dead. Where a Paused delivery is, only selecting it shows (see
// takePaused).
func (f *fixture) wantPlace(t *testing.T, ds ...engine.Delivery) {
	t.Helper()
	index := f.retryIndex(t)
	dead := map[string][]engine.Delivery{}
	for _, d := range ds {
		d = f.read(t, d)
		var due []engine.RetryEntry
		for _, e := range index {
			if e.DeliveryID == d.ID {
				due = append(due, e)
			}
		}
		if d.State == engine.StatePending {
			want := []engine.RetryEntry{{Due: d.NextAttemptAt, DeliveryID: d.ID, EndpointID: d.EndpointID, TenantID: d.TenantID}}
			if !reflect.DeepEqual(due, want) {
				t.Errorf("pending delivery %s: retry index has %+v, want %+v", d.ID, due, want)
			}
		} else if len(due) != 0 {
			t.Errorf("%s delivery %s is in the retry index: %+v", d.State, d.ID, due)
		}
		if _, ok := dead[d.TenantID]; !ok {
			dead[d.TenantID] = f.deadLetters(t, d.TenantID)
		}
		n := 0
		for _, dl := range dead[d.TenantID] {
			if dl.ID == d.ID {
				n++
				if !reflect.DeepEqual(dl, d) {
					t.Errorf("dead letter %s = %+v\nwant it as stored %+v", d.ID, dl, d)
				}
			}
		}
		if want := b2i(d.State == engine.StateDead); n != want {
			t.Errorf("%s delivery %s is %d times among the dead letters, want %d", d.State, d.ID, n, want)
		}
	}
}

// takePaused returns the paused deliveries of ep, selecting them as
// enabling ep "from now on" does: each moves to Dead. It is how the suite
// sees the paused deliveries of an endpoint, so it changes them.
func (f *fixture) takePaused(t *testing.T, ep engine.Endpoint, at time.Time) []engine.Delivery {
	t.Helper()
	return f.resume(t, ep, false, engine.Replay{At: at, By: "storetest"}, 1000)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Assertions.

// wantCode fails t unless err is an *engine.Error with code and field.
func wantCode(t *testing.T, err error, code engine.Code, field string) *engine.Error {
	t.Helper()
	var e *engine.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v, want an *engine.Error with code %s", err, code)
	}
	if e.Code != code || e.Field != field {
		t.Fatalf("error = %v (code %q, field %q), want code %q, field %q", err, e.Code, e.Field, code, field)
	}
	return e
}

// wantError fails t unless err is an *engine.Error with want's code,
// field and message: a store words no error itself, it gives the
// engine's (engine.TenantNotFound and the like).
func wantError(t *testing.T, err error, want *engine.Error) {
	t.Helper()
	e := wantCode(t, err, want.Code, want.Field)
	if e.Message != want.Message {
		t.Errorf("error message %q, want the engine's %q", e.Message, want.Message)
	}
}

// wantEqual fails t unless got and want are deeply equal.
func wantEqual[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s =\n\t%+v\nwant\n\t%+v", what, got, want)
	}
}

// wantEmpty fails t unless list is empty and not nil.
func wantEmpty[T any](t *testing.T, what string, list []T) {
	t.Helper()
	if list == nil || len(list) != 0 {
		t.Errorf("%s = %#v, want empty, not nil", what, list)
	}
}

// pageIDs returns the IDs of the deliveries on each page.
func pageIDs(pages [][]engine.Delivery) [][]string {
	out := make([][]string, len(pages))
	for i, p := range pages {
		out[i] = ids(p)
	}
	return out
}

// ids returns the IDs of ds in their order.
func ids(ds []engine.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// eventIDs returns the IDs of evs in their order.
func eventIDs(evs []engine.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// sorted returns a sorted copy of ids.
func sorted(ids []string) []string {
	return slices.Sorted(slices.Values(ids))
}

// byID orders deliveries by ID.
func byID(a, b engine.Delivery) int { return strings.Compare(a.ID, b.ID) }
