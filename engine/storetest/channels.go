package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// channelTests hold a store to what channels need of it: an endpoint's
// channel filter kept and changed, an event's channels kept with it and
// copied onto its deliveries, the fan-out by channel (NewDeliveries
// decides, against the endpoints as the append reads them), and the
// listings filtered by channel.
var channelTests = []test{
	{"an endpoint keeps its channels, and a change replaces them", testEndpointChannels},
	{"an event fans out by type and channel, and keeps its channels", testChannelFanOut},
	{"the delivery log and the event feed filter by channel", testChannelListings},
	{"a duplicate ingest answers the first event's channels", testChannelIdempotency},
}

func testEndpointChannels(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep := newEndpoint("acme", "*")
	ep.Channels = []string{"project_1", "Org-2.eu"}
	if err := f.s.CreateEndpoint(t.Context(), ep, 0); err != nil {
		t.Fatal(err)
	}
	plain := f.endpoint(t, "acme", "*")
	got, err := f.s.Endpoint(t.Context(), "acme", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "channels as stored", got.Channels, ep.Channels)
	if got, _ := f.s.Endpoint(t.Context(), "acme", plain.ID); got.Channels != nil {
		t.Errorf("an endpoint without channels reads back %q, want nil", got.Channels)
	}
	up, err := f.s.UpdateEndpoint(t.Context(), "acme", ep.ID, func(e *engine.Endpoint) error {
		e.Channels = []string{"other"}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "channels after an update", up.Channels, []string{"other"})
	eps, err := f.s.Endpoints(t.Context(), "acme")
	if err != nil || len(eps) != 2 {
		t.Fatalf("Endpoints: %d, %v", len(eps), err)
	}
	wantEqual(t, "channels listed", eps[0].Channels, []string{"other"})
	if _, err := f.s.UpdateEndpoint(t.Context(), "acme", ep.ID, func(e *engine.Endpoint) error { e.Channels = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.s.Endpoint(t.Context(), "acme", ep.ID); got.Channels != nil {
		t.Errorf("channels removed read back as %q, want nil", got.Channels)
	}
}

// channelMix makes the suite's mix: endpoints filtering on [a], on [b]
// and on none, all of type typ, and ingests events of typ on [a],
// [a b] and no channel. It returns the endpoints and the ingests.
func (f *fixture) channelMix(t *testing.T, tenant string) (a, b, none engine.Endpoint, typ string, events []engine.IngestResult) {
	t.Helper()
	typ = fmt.Sprintf("chan%d.created", laneN.Add(1))
	f.eventType(t, typ)
	mk := func(chs ...string) engine.Endpoint {
		ep := newEndpoint(tenant, typ)
		ep.Channels = chs
		if err := f.s.CreateEndpoint(t.Context(), ep, 0); err != nil {
			t.Fatal(err)
		}
		return ep
	}
	a, b, none = mk("a"), mk("b"), mk()
	for _, chs := range [][]string{{"a"}, {"a", "b"}, nil} {
		in := newEvent(tenant, typ, `{}`)
		in.Event.Channels = chs
		events = append(events, f.ingest(t, in))
	}
	return a, b, none, typ, events
}

func testChannelFanOut(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	a, b, none, _, events := f.channelMix(t, "acme")
	want := [][]string{
		{a.ID, none.ID},       // on [a]
		{a.ID, b.ID, none.ID}, // on [a b]
		{none.ID},             // on no channel: only the endpoint without a filter
	}
	for i, res := range events {
		var got []string
		for _, d := range res.Deliveries {
			got = append(got, d.EndpointID)
			wantEqual(t, fmt.Sprintf("event %d: delivery %s's channels", i, d.ID), d.Channels, res.Event.Channels)
		}
		slices.Sort(got)
		w := slices.Sorted(slices.Values(want[i]))
		wantEqual(t, fmt.Sprintf("event %d on %q: endpoints delivered to", i, res.Event.Channels), got, w)

		ev, ds, err := f.s.Event(t.Context(), "acme", res.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "Event", ev, res.Event)
		wantEqual(t, "Event's deliveries", ds, res.Deliveries)
		for _, d := range ds {
			wantEqual(t, "Delivery", f.read(t, d), d)
		}
	}
	if events[2].Event.Channels != nil {
		t.Errorf("an event on no channel reads back channels %q, want nil", events[2].Event.Channels)
	}
	evs, _, err := f.s.ListEvents(t.Context(), "acme", engine.EventFilter{Limit: 10})
	if err != nil || len(evs) != 3 {
		t.Fatalf("ListEvents: %d, %v", len(evs), err)
	}
	for i, ev := range evs {
		wantEqual(t, "ListEvents' channels", ev.Channels, events[i].Event.Channels)
	}
	recent, err := f.s.RecentEvents(t.Context(), "acme", 10)
	if err != nil || len(recent) != 3 {
		t.Fatalf("RecentEvents: %d, %v", len(recent), err)
	}
	for i, ed := range recent {
		wantEqual(t, "RecentEvents' channels", ed.Event.Channels, events[2-i].Event.Channels)
	}
}

func testChannelListings(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	_, _, _, typ, events := f.channelMix(t, "acme")
	for i := range events {
		_, events[i].Deliveries, _ = f.s.Event(t.Context(), "acme", events[i].Event.ID)
	}
	everything := newestFirst(events) // 6 deliveries
	for _, filter := range []engine.DeliveryFilter{
		{Channel: "a"}, {Channel: "b"}, {Channel: "z"}, {Channel: "A"},
		{Channel: "a", Type: typ}, {Channel: "b", State: engine.StatePending},
	} {
		t.Run(fmt.Sprintf("deliveries channel=%s type=%s state=%s", filter.Channel, filter.Type, filter.State), func(t *testing.T) {
			var want []string
			for _, d := range everything {
				if filter.Matches(d) {
					want = append(want, d.ID)
				}
			}
			if filter.Channel == "a" && len(want) != 5 {
				t.Fatalf("the mix has %d deliveries on channel a, want 5", len(want))
			}
			filter.Limit = 2
			wantEqual(t, "deliveries", slices.Concat(f.deliveryPages(t, "acme", filter)...), want)
		})
	}
	for _, filter := range []engine.EventFilter{{Channel: "a"}, {Channel: "b"}, {Channel: "z"}, {Channel: "b", Type: typ}} {
		t.Run(fmt.Sprintf("events channel=%s type=%s", filter.Channel, filter.Type), func(t *testing.T) {
			var want []string
			for _, res := range events {
				if filter.Matches(res.Event) {
					want = append(want, res.Event.ID)
				}
			}
			filter.Limit = 1
			wantEqual(t, "events", slices.Concat(f.eventPages(t, "acme", filter)...), want)
		})
	}
}

func testChannelIdempotency(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	_, typ := f.lane(t, "acme")
	in := newEvent("acme", typ, `{}`)
	in.Event.Channels = []string{"a"}
	in.IdempotencyKey, in.RequestHash, in.IdempotencyExpires = "k", [32]byte{1}, in.Event.Created.Add(1<<40)
	first := f.ingest(t, in)
	again := newEvent("acme", typ, `{}`)
	again.IdempotencyKey, again.RequestHash, again.IdempotencyExpires = in.IdempotencyKey, in.RequestHash, in.IdempotencyExpires
	dup := f.ingest(t, again)
	if !dup.Duplicate || dup.Event.ID != first.Event.ID {
		t.Fatalf("the repeat: %+v, want the first event, a duplicate", dup)
	}
	wantEqual(t, "the duplicate's channels", dup.Event.Channels, []string{"a"})
	wantEqual(t, "the duplicate's deliveries", dup.Deliveries, first.Deliveries)
}
