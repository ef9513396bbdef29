package engine

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// TestEventInput is the body of POST
// /v1/tenants/{tenant}/endpoints/{id}/test-events.
type TestEventInput struct {
	// Type is the catalogue type to send, one the endpoint subscribes
	// to. "": the first (by name) of those with an example, else the
	// first of those.
	Type string `json:"type"`
}

// SendTestEvent sends a test event to one endpoint of tenant: an event
// of a catalogue type the endpoint subscribes to whose data is the
// type's example ({} when it has none), ingested and delivered through
// the normal path (stored, numbered, signed, retried, dead-lettered)
// but to that endpoint only, and marked Test on the event and its
// delivery. It is on no channel and reaches the endpoint whatever its
// channel filter. The receiver gets an ordinary envelope: nothing in the
// request says "test", so its real code path is what the test shows;
// a catalogue's examples should name things that do not exist.
//
// Errors: CodeEndpointNotFound; CodeEndpointDisabled for a disabled
// endpoint (its delivery would only be held); CodeInvalidField "type"
// for a type the endpoint does not subscribe to, or when it subscribes
// to none in the catalogue; CodeUnknownEventType for a type not in the
// catalogue; CodeRateLimited, with RetryAfter, past the endpoint's bound
// of test events (TestEventBurst); and ingest's own (CodeOverloaded,
// the tenant's limits).
func (s *Service) SendTestEvent(ctx context.Context, tenant, endpointID string, in TestEventInput) (IngestResult, error) {
	ep, err := s.Endpoint(ctx, tenant, endpointID)
	if err != nil {
		return IngestResult{}, err
	}
	if ep.Disabled {
		return IngestResult{}, Errorf(CodeEndpointDisabled, "", "endpoint %s is disabled: enable it to send it a test event", ep.ID)
	}
	catalogue, err := s.store.EventTypes(ctx)
	if err != nil {
		return IngestResult{}, err
	}
	et, err := TestEventType(ep, catalogue, in.Type)
	if err != nil {
		return IngestResult{}, err
	}
	data := et.Example
	if len(data) == 0 {
		data = []byte("{}")
	}
	ne, err := s.prepare(tenant, IngestInput{Type: et.Name, Data: data, Test: true})
	if err != nil {
		return IngestResult{}, err
	}
	ne.Deliveries = func(stored Event, policy RetryPolicyName, eps []Endpoint) []Delivery {
		only := slices.DeleteFunc(slices.Clone(eps), func(e Endpoint) bool { return e.ID != ep.ID })
		for i := range only {
			// A test event is on no channel, and goes to its endpoint
			// whatever the endpoint's channels (as Svix's manual sends do).
			only[i].Channels = nil
		}
		return NewDeliveries(stored, policy, only, NewID)
	}
	res, err := s.appendEvent(ctx, tenant, ne, func() error {
		if wait := s.testEventRates.take(ep.ID); wait > 0 {
			return &Error{Code: CodeRateLimited, RetryAfter: wait, Message: fmt.Sprintf(
				"endpoint %s was sent its %d test events, and gets one more every %d seconds; the test event was not stored: send it again after Retry-After",
				ep.ID, TestEventBurst, int(TestEventInterval.Seconds()))}
		}
		return nil
	})
	if err == nil && res.Owed {
		// Whoever sent it looks at its delivery next (the console
		// shows it): answer once it is stored.
		if err := s.waitFannedOut(ctx, res.Event.ID); err != nil {
			return IngestResult{}, err
		}
	}
	return res, err
}

// The bound of test events, per endpoint and per node: TestEventBurst at
// once, then one more each TestEventInterval. Only test events make
// events with a tenant access token (or a customer's portal session), so
// this is what bounds the events such a token can store; they count
// toward the tenant's pending bound too, like any event.
const (
	TestEventBurst    = 10
	TestEventInterval = time.Minute
)

// TestEventType returns the catalogue entry SendTestEvent sends to ep
// when asked for typ (see TestEventInput.Type), or why there is none.
// An archived type is never the one chosen for "": its events are
// refused (asked for, it is returned, and ingest refuses it).
func TestEventType(ep Endpoint, catalogue []EventType, typ string) (EventType, error) {
	if typ != "" {
		if err := ValidateEventType("type", typ); err != nil {
			return EventType{}, err
		}
		if !ep.Subscribes(typ) {
			return EventType{}, Errorf(CodeInvalidField, "type", "endpoint %s does not subscribe to %s", ep.ID, typ)
		}
		for _, et := range catalogue {
			if et.Name == typ {
				return et, nil
			}
		}
		return EventType{}, unknownEventType("type", typ, catalogue)
	}
	var first *EventType
	for i, et := range catalogue {
		if !ep.Subscribes(et.Name) || et.Status == EventTypeArchived {
			continue // an archived type's events are refused
		}
		if len(et.Example) > 0 {
			return et, nil
		}
		if first == nil {
			first = &catalogue[i]
		}
	}
	if first == nil {
		return EventType{}, Errorf(CodeInvalidField, "type", "endpoint %s subscribes to no type in the catalogue that is not archived", ep.ID)
	}
	return *first, nil
}
