package storetest

import (
	"encoding/json"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// testEventTests hold a store to what "Send test event" needs of it: an
// event type's example kept and replaced, and the Test mark of an event
// and of its deliveries kept wherever they are read.
var testEventTests = []test{
	{"an event type's example is kept and replaced by the next put", testEventTypeExample},
	{"a test event and its delivery keep their mark", testTestEventMark},
}

func testEventTypeExample(t *testing.T, f *fixture) {
	name := "example" + engine.NewID("t")[2:] + ".created"
	example := json.RawMessage(`{"order":"ord_example","amount":4200}`)
	put := func(et engine.EventType) engine.EventType {
		t.Helper()
		got, _, err := f.s.PutEventType(t.Context(), et)
		if err != nil {
			t.Fatalf("PutEventType: %v", err)
		}
		return got
	}
	find := func() engine.EventType {
		t.Helper()
		all, err := f.s.EventTypes(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, et := range all {
			if et.Name == name {
				return et
			}
		}
		t.Fatalf("%s is not in the catalogue", name)
		return engine.EventType{}
	}
	if got := put(engine.EventType{Name: name, Description: "d", Example: example, Created: t0, Updated: t0}); string(got.Example) != string(example) {
		t.Errorf("PutEventType answered example %s, want %s", got.Example, example)
	}
	if got := find(); string(got.Example) != string(example) {
		t.Errorf("stored example %s, want %s", got.Example, example)
	}
	other := json.RawMessage(`["a",1]`)
	put(engine.EventType{Name: name, Description: "d2", Example: other, Created: t0, Updated: t0})
	if got := find(); string(got.Example) != string(other) || got.Description != "d2" {
		t.Errorf("after a second put: %q, example %s; want d2, %s", got.Description, got.Example, other)
	}
	put(engine.EventType{Name: name, Description: "d3", Created: t0, Updated: t0})
	if got := find(); len(got.Example) != 0 {
		t.Errorf("a put without an example keeps %s", got.Example)
	}
}

func testTestEventMark(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	plain := f.ingest(t, newEvent("acme", typ, `{"n":1}`))
	in := newEvent("acme", typ, `{"n":2}`)
	in.Event.Test = true
	res := f.ingest(t, in)
	if !res.Event.Test || len(res.Deliveries) != 1 || !res.Deliveries[0].Test || res.Deliveries[0].EndpointID != ep.ID {
		t.Fatalf("AppendEvent of a test event answered %+v", res)
	}
	check := func(where string, id string, test bool) {
		t.Helper()
		want := plain.Event.ID
		if test {
			want = res.Event.ID
		}
		if id != want {
			t.Errorf("%s: the event marked test=%v is %s, want %s", where, test, id, want)
		}
	}
	for _, r := range []engine.IngestResult{plain, res} {
		ev, ds, err := f.s.Event(t.Context(), "acme", r.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		check("Event", ev.ID, ev.Test)
		if len(ds) != 1 || ds[0].Test != ev.Test {
			t.Errorf("Event %s (test=%v): deliveries %+v", ev.ID, ev.Test, ds)
		}
		if got := f.read(t, r.Deliveries[0]); got.Test != r.Event.Test {
			t.Errorf("Delivery %s: Test %v, want %v", got.ID, got.Test, r.Event.Test)
		}
	}
	evs, _, err := f.s.ListEvents(t.Context(), "acme", engine.EventFilter{Limit: 10})
	if err != nil || len(evs) != 2 {
		t.Fatalf("ListEvents: %d events, %v", len(evs), err)
	}
	for _, ev := range evs {
		check("ListEvents", ev.ID, ev.Test)
	}
	recent, err := f.s.RecentEvents(t.Context(), "acme", 10)
	if err != nil || len(recent) != 2 {
		t.Fatalf("RecentEvents: %d events, %v", len(recent), err)
	}
	for _, ed := range recent {
		check("RecentEvents", ed.Event.ID, ed.Event.Test)
		if len(ed.Deliveries) != 1 || ed.Deliveries[0].Test != ed.Event.Test {
			t.Errorf("RecentEvents %s: deliveries %+v", ed.Event.ID, ed.Deliveries)
		}
	}
	ds, _, err := f.s.ListDeliveries(t.Context(), "acme", engine.DeliveryFilter{Limit: 10})
	if err != nil || len(ds) != 2 {
		t.Fatalf("ListDeliveries: %d, %v", len(ds), err)
	}
	for _, d := range ds {
		check("ListDeliveries", d.EventID, d.Test)
	}
	// An attempt's outcome keeps the mark.
	after, err := f.s.UpdateDelivery(t.Context(), res.Deliveries[0].ID, func(d engine.Delivery) (engine.Delivery, error) {
		d.Reason = "changed"
		return d, nil
	})
	if err != nil || !after.Test || !f.read(t, after).Test {
		t.Errorf("after an update the test delivery is %+v (%v)", after, err)
	}
}
