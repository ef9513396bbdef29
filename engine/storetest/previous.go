package storetest

import (
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// previousTests hold a store to NewEvent's contract on PreviousSequence:
// each delivery of a keyed event names the Sequence of the last delivery
// made for that key to that endpoint, whatever the endpoint's ordering.
var previousTests = []test{
	{"each keyed delivery names its key's previous sequence at its endpoint", testPreviousSequence},
	{"a key's previous delivery deleted by retention is forgotten", testPreviousSequencePruned},
}

func testPreviousSequence(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	a := "prev" + engine.NewID("t")[2:] + ".created"
	b := "prev" + engine.NewID("t")[2:] + ".updated"
	f.eventType(t, a)
	f.eventType(t, b)
	all := f.endpoint(t, "acme", a, b)
	onlyA := f.endpoint(t, "acme", a)
	// An endpoint ordered by key gets the same.
	ordered := f.endpoint(t, "acme", a, b)
	ordered, err := f.s.UpdateEndpoint(t.Context(), "acme", ordered.ID, func(e *engine.Endpoint) error { e.Ordering = engine.OrderingKey; return nil })
	if err != nil {
		t.Fatal(err)
	}

	ingest := func(typ, key string) (uint64, map[string]uint64) {
		t.Helper()
		in := newEvent("acme", typ, `{"n":1}`)
		in.Event.OrderingKey = key
		res := f.ingest(t, in)
		prev := map[string]uint64{}
		for _, d := range res.Deliveries {
			prev[d.EndpointID] = d.PreviousSequence
			if got := f.read(t, d).PreviousSequence; got != d.PreviousSequence {
				t.Errorf("delivery %s: stored PreviousSequence %d, ingest answered %d", d.ID, got, d.PreviousSequence)
			}
		}
		return res.Event.Sequence, prev
	}
	want := func(step string, got map[string]uint64, want map[string]uint64) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: deliveries to %v, want to %v", step, got, want)
		}
		for ep, w := range want {
			if g, ok := got[ep]; !ok || g != w {
				t.Errorf("%s: PreviousSequence at %s = %d (made: %v), want %d", step, ep, g, ok, w)
			}
		}
	}

	s1, p := ingest(a, "k1")
	want("first of k1", p, map[string]uint64{all.ID: 0, onlyA.ID: 0, ordered.ID: 0})
	s2, p := ingest(b, "k1")
	want("k1 again, a type onlyA does not take", p, map[string]uint64{all.ID: s1, ordered.ID: s1})
	_, p = ingest(a, "k2")
	want("first of k2", p, map[string]uint64{all.ID: 0, onlyA.ID: 0, ordered.ID: 0})
	_, p = ingest(a, "k1")
	want("k1 a third time", p, map[string]uint64{all.ID: s2, onlyA.ID: s1, ordered.ID: s2})
	_, p = ingest(a, "")
	want("no key", p, map[string]uint64{all.ID: 0, onlyA.ID: 0, ordered.ID: 0})
}

func testPreviousSequencePruned(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	keyed := func() engine.Delivery {
		t.Helper()
		in := newEvent("acme", typ, `{"n":1}`)
		in.Event.OrderingKey = "k"
		res := f.ingest(t, in)
		if len(res.Deliveries) != 1 || res.Deliveries[0].EndpointID != ep.ID {
			t.Fatalf("ingest made %+v, want one delivery to %s", res.Deliveries, ep.ID)
		}
		return res.Deliveries[0]
	}
	first := keyed()
	f.settle(t, first, engine.StateSucceeded, t0.Add(time.Hour), time.Time{})
	if second := keyed(); second.PreviousSequence != first.Sequence {
		t.Fatalf("second PreviousSequence = %d, want %d", second.PreviousSequence, first.Sequence)
	} else {
		f.settle(t, second, engine.StateSucceeded, t0.Add(time.Hour), time.Time{})
	}
	far := t0.Add(1000 * time.Hour)
	for cursor := uint64(0); ; {
		res, err := f.s.PruneEvents(t.Context(), cursor, engine.Retention{SucceededBefore: far, DeadBefore: far}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if cursor = res.Next; cursor == 0 {
			break
		}
	}
	if third := keyed(); third.PreviousSequence != 0 {
		t.Fatalf("after its key's deliveries were pruned, PreviousSequence = %d, want 0", third.PreviousSequence)
	}
}
