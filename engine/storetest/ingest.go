package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// ingestTests: AppendEvent, the event log and idempotency.
var ingestTests = []test{
	{"an event fans out to the subscribed endpoints of its tenant", testFanOut},
	{"fan-out reads the endpoints as they are in the append", testFanOutAtomic},
	{"with no Deliveries func, the deliveries are NewDeliveries'", testFanOutDefault},
	{"an event with no subscriber has no delivery", testNoSubscriber},
	{"the body is stored verbatim", testBodyVerbatim},
	{"the log sequence grows in append order", testSequence},
	{"each tenant numbers its events 1, 2, 3… with no gap", testTenantSequence},
	{"a refused ingest appends nothing", testIngestRefused},
	{"an event belongs to its tenant only", testEventIsolation},
	{"idempotency keys within and at the end of their window", testIdempotency},
	{"concurrent ingests with one key append one event", testIdempotencyConcurrent},
	{"concurrent ingests all land", testIngestConcurrent},
}

func testFanOut(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	f.eventType(t, "order.created")
	f.eventType(t, "order.shipped")
	all := f.endpoint(t, "acme", "*")
	created := f.endpoint(t, "acme", "order.created")
	f.endpoint(t, "acme", "order.shipped", "order.created.v2")
	disabled := f.setEnabled(t, f.endpoint(t, "acme", "order.created"), false, t0)
	f.endpoint(t, "globex", "*")
	eps, err := f.s.Endpoints(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}

	in := newEvent("acme", "order.created", `{"id":1}`)
	var seen []engine.Endpoint
	var mu sync.Mutex
	in.Deliveries = func(stored engine.Event, policy engine.RetryPolicyName, got []engine.Endpoint) []engine.Delivery {
		mu.Lock()
		seen = slices.Clone(got)
		mu.Unlock()
		return engine.NewDeliveries(stored, policy, got, engine.NewID)
	}
	res := f.ingest(t, in)
	if res.Duplicate {
		t.Error("Duplicate = true for a first ingest")
	}
	mu.Lock()
	wantEqual(t, "endpoints the Deliveries func was given", endpointViews(seen), endpointViews(eps))
	mu.Unlock()

	want := engine.NewDeliveries(res.Event, "", []engine.Endpoint{all, created, disabled}, engine.NewID)
	if len(res.Deliveries) != len(want) {
		t.Fatalf("deliveries = %+v, want to %s, %s, %s", res.Deliveries, all.ID, created.ID, disabled.ID)
	}
	if !slices.IsSortedFunc(res.Deliveries, byID) {
		t.Errorf("deliveries are not in ID order: %v", ids(res.Deliveries))
	}
	madeFor := map[string]string{} // endpoint ID → delivery ID made inside the append
	for _, d := range res.Deliveries {
		madeFor[d.EndpointID] = d.ID
	}
	for i := range want {
		want[i].ID = madeFor[want[i].EndpointID]
	}
	slices.SortFunc(want, byID)
	wantEqual(t, "deliveries", res.Deliveries, want)

	stored := in.Sequenced(1) // the tenant's first event
	stored.Seq = res.Event.Seq
	wantEqual(t, "the appended event", res.Event, stored)
	ev, ds, err := f.s.Event(t.Context(), "acme", in.Event.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "Event", ev, res.Event)
	wantEqual(t, "Event's deliveries", ds, res.Deliveries)
	for _, d := range ds {
		wantEqual(t, "Delivery", f.read(t, d), d)
	}
	f.wantPlace(t, ds...)
	paused := f.takePaused(t, disabled, t0.Add(time.Hour))
	if len(paused) != 1 || paused[0].EventID != in.Event.ID {
		t.Errorf("paused deliveries of the disabled endpoint = %v, want the new one", ids(paused))
	}
}

// endpointView is what fan-out decides by.
type endpointView struct {
	ID, TenantID string
	EventTypes   []string
	Disabled     bool
}

func endpointViews(eps []engine.Endpoint) []endpointView {
	out := make([]endpointView, len(eps))
	for i, ep := range eps {
		out[i] = endpointView{ep.ID, ep.TenantID, ep.EventTypes, ep.Disabled}
	}
	return out
}

func testFanOutAtomic(t *testing.T, f *fixture) {
	// One goroutine, in turn, creates an endpoint, flips the tenant's
	// first endpoint on or off and appends a marker event; meanwhile the
	// test appends events. Every append stores exactly the deliveries its
	// Deliveries func returned, for endpoints as they were at one instant
	// (the creates in order, the first enabled as the flips left it), and
	// that instant is where the append is in the log: after the markers
	// before it, before the markers after it.
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	first := f.endpoint(t, "acme", "*")
	const rounds, events = 8, 24
	// disabledAfter is the first endpoint's Disabled after round i's flip
	// (round -1: before any).
	disabledAfter := func(i int) bool { return i >= 0 && i%2 == 0 }

	type sight struct {
		seq      uint64
		seen     []string // the endpoints created after the first, as the Deliveries func was given them
		disabled bool     // the first endpoint's Disabled as it was given
		marker   int      // the round whose marker it is; -1: not a marker
	}
	var mu sync.Mutex
	var sights []sight
	created := make([]string, rounds)
	// appendWatched appends an event, recording what its Deliveries func
	// saw, and checks that the deliveries stored are what it returned.
	appendWatched := func(marker int) error {
		in := newEvent("acme", "order.created", `{}`)
		var a sight
		var made []engine.Delivery
		var cmu sync.Mutex
		in.Deliveries = func(stored engine.Event, policy engine.RetryPolicyName, eps []engine.Endpoint) []engine.Delivery {
			ds := engine.NewDeliveries(stored, policy, eps, engine.NewID)
			cmu.Lock()
			defer cmu.Unlock()
			a, made = sight{marker: marker}, slices.Clone(ds)
			for _, ep := range eps {
				if ep.ID == first.ID {
					a.disabled = ep.Disabled
				} else {
					a.seen = append(a.seen, ep.ID)
				}
			}
			if len(eps) == 0 || eps[0].ID != first.ID {
				t.Errorf("an append did not see the first endpoint first: %v", endpointViews(eps))
			}
			return ds
		}
		res, err := f.s.AppendEvent(t.Context(), in)
		if err != nil {
			return err
		}
		cmu.Lock()
		a.seq = res.Event.Seq
		for i := range made { // a store may number the event after it (see NewEvent.Deliveries)
			made[i].Sequence = res.Event.Sequence
		}
		if !reflect.DeepEqual(res.Deliveries, made) {
			t.Errorf("deliveries stored =\n\t%+v\nwant what the Deliveries func returned\n\t%+v", res.Deliveries, made)
		}
		cmu.Unlock()
		mu.Lock()
		sights = append(sights, a)
		mu.Unlock()
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range rounds {
			ep := newEndpoint("acme", "*")
			if err := f.s.CreateEndpoint(t.Context(), ep, 0); err != nil {
				t.Errorf("CreateEndpoint: %v", err)
				return
			}
			created[i] = ep.ID
			if _, err := f.s.UpdateEndpoint(t.Context(), "acme", first.ID, func(e *engine.Endpoint) error {
				e.Disabled = disabledAfter(i)
				return nil
			}); err != nil {
				t.Errorf("UpdateEndpoint: %v", err)
				return
			}
			if err := appendWatched(i); err != nil {
				t.Errorf("AppendEvent (marker): %v", err)
				return
			}
		}
	}()
	for range events {
		if err := appendWatched(-1); err != nil {
			t.Fatalf("AppendEvent: %v", err)
		}
	}
	<-done
	f.fanOut(t)
	markers := make([]uint64, rounds) // the log position of each round's marker
	for _, a := range sights {
		if a.marker >= 0 {
			markers[a.marker] = a.seq
		}
	}
	for _, a := range sights {
		c := len(a.seen)
		j := 0 // the markers before it in the log
		for _, m := range markers {
			if m < a.seq {
				j++
			}
		}
		switch {
		case !slices.Equal(a.seen, created[:min(c, rounds)]):
			t.Errorf("append at %d saw endpoints %v, not a prefix of the creates %v", a.seq, a.seen, created)
		case a.disabled != disabledAfter(c-1) && a.disabled != disabledAfter(c-2):
			t.Errorf("append at %d saw %d creates and the first endpoint disabled %v: never so at once", a.seq, c, a.disabled)
		case c < j || c > j+1:
			t.Errorf("append at %d, after %d markers, saw %d creates: not the endpoints as they were where it is in the log", a.seq, j, c)
		case a.marker >= 0 && (c != a.marker+1 || a.disabled != disabledAfter(a.marker)):
			t.Errorf("marker %d saw %d creates and disabled %v, want what its round had done", a.marker, c, a.disabled)
		}
	}
}

func testFanOutDefault(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	ep := f.endpoint(t, "acme", "order.created")
	f.endpoint(t, "acme", "order.shipped")
	in := newEvent("acme", "order.created", `{}`)
	in.Deliveries = nil
	res := f.ingest(t, in)
	if len(res.Deliveries) != 1 {
		t.Fatalf("deliveries = %+v, want one to %s", res.Deliveries, ep.ID)
	}
	want := engine.NewDeliveries(res.Event, "", []engine.Endpoint{ep}, func(string) string { return res.Deliveries[0].ID })
	wantEqual(t, "delivery", res.Deliveries, want)
	if !strings.HasPrefix(res.Deliveries[0].ID, "dlv_") {
		t.Errorf("delivery ID %q, want one made by NewID(\"dlv\")", res.Deliveries[0].ID)
	}
	f.wantPlace(t, res.Deliveries...)
}

func testNoSubscriber(t *testing.T, f *fixture) {
	f.tenant(t, "lonely")
	f.eventType(t, "order.created")
	res := f.ingest(t, newEvent("lonely", "order.created", `{}`))
	wantEmpty(t, "deliveries", res.Deliveries)
	_, ds, err := f.s.Event(t.Context(), "lonely", res.Event.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEmpty(t, "Event's deliveries", ds)
}

func testBodyVerbatim(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	bodies := []string{
		"{ \"a\" :  \"\\u00e9\\n\" ,\"b\":[1, 2.50, 1e3] ,\"c\":\"\xc3\xa9\"}\n",
		`{"id":"evt_1","data":{}}`,
		"{}",
	}
	for _, body := range bodies {
		res := f.ingest(t, newEvent("acme", typ, body))
		wantEqual(t, "appended body", string(res.Event.Body), body)
		ev, _, err := f.s.Event(t.Context(), "acme", res.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "Event's body", string(ev.Body), body)
		in, err := f.s.AttemptInput(t.Context(), res.Deliveries[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(in.Body, []byte(body)) {
			t.Errorf("AttemptInput body = %q, want %q", in.Body, body)
		}
		stored, _ := f.s.Endpoint(t.Context(), "acme", ep.ID)
		wantEqual(t, "AttemptInput", in, engine.AttemptInput{Delivery: res.Deliveries[0], Body: in.Body, Endpoint: stored, EndpointFound: true})
	}
	evs, _, err := f.s.ListEvents(t.Context(), "acme", engine.EventFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		wantEqual(t, "ListEvents body", string(ev.Body), bodies[i])
	}
	_, err = f.s.AttemptInput(t.Context(), "dlv_nope")
	wantError(t, err, engine.DeliveryNotFound())
}

func testSequence(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	f.eventType(t, "order.created")
	var last uint64
	for i := range 6 {
		tenant := []string{"acme", "globex"}[i%2]
		res := f.ingest(t, newEvent(tenant, "order.created", `{}`))
		if res.Event.Seq <= last {
			t.Errorf("append %d: Seq = %d, want more than %d", i, res.Event.Seq, last)
		}
		last = res.Event.Seq
		ev, _, _ := f.s.Event(t.Context(), tenant, res.Event.ID)
		wantEqual(t, "Event's Seq", ev.Seq, res.Event.Seq)
	}
}

func testTenantSequence(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	f.eventType(t, "order.created")
	f.endpoint(t, "acme", "*")
	prepared := func(tenant string, in engine.IngestInput) engine.NewEvent {
		t.Helper()
		ne, err := engine.PrepareEvent(tenant, in, engine.IngestOptions{Now: func() time.Time { return t0 }})
		if err != nil {
			t.Fatal(err)
		}
		return ne
	}
	want := map[string]uint64{}
	for i := range 6 {
		tenant := []string{"acme", "globex", "acme"}[i%3]
		want[tenant]++
		ne := prepared(tenant, engine.IngestInput{Type: "order.created", Data: []byte(`{"i":1}`), OrderingKey: "order_1"})
		res := f.ingest(t, ne)
		wantEqual(t, "Sequence of "+tenant+"'s event", res.Event.Sequence, want[tenant])
		wantEqual(t, "OrderingKey", res.Event.OrderingKey, "order_1")
		wantEqual(t, "the envelope's sequence", engine.EnvelopeSequence(res.Event.Body), want[tenant])
		wantEqual(t, "the stored body", string(res.Event.Body), string(ne.Sequenced(want[tenant]).Body))
		ev, _, err := f.s.Event(t.Context(), tenant, res.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "Event", ev, res.Event)
		if tenant == "acme" {
			in, err := f.s.AttemptInput(t.Context(), res.Deliveries[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "AttemptInput's body", string(in.Body), string(res.Event.Body))
		}
	}
	// A refused ingest and a repeat take no number.
	_, err := f.appendEvent(t, prepared("acme", engine.IngestInput{Type: "order.nope", Data: []byte(`{}`)}))
	wantError(t, err, engine.UnknownEventType("order.nope"))
	keyed := prepared("acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`), IdempotencyKey: "k1"})
	first := f.ingest(t, keyed)
	again := keyed
	again.Event.ID = engine.NewID("evt")
	if dup := f.ingest(t, again); !dup.Duplicate || dup.Event.Sequence != first.Event.Sequence {
		t.Errorf("a repeat = Sequence %d, duplicate %v; want the first's %d", dup.Event.Sequence, dup.Duplicate, first.Event.Sequence)
	}
	wantEqual(t, "Sequence after a refusal", first.Event.Sequence, want["acme"]+1)
	next := f.ingest(t, prepared("acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)}))
	wantEqual(t, "Sequence after a repeat", next.Event.Sequence, want["acme"]+2)
	if bytes.Contains(next.Event.Body, []byte("ordering_key")) {
		t.Errorf("an event with no ordering key has one in its envelope: %s", next.Event.Body)
	}

	evs, _, err := f.s.ListEvents(t.Context(), "acme", engine.EventFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		wantEqual(t, "ListEvents' Sequence", ev.Sequence, uint64(i+1))
	}
	recent, err := f.s.RecentEvents(t.Context(), "acme", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, ed := range recent {
		if ed.Event.Sequence == 0 {
			t.Errorf("RecentEvents' %s has no Sequence", ed.Event.ID)
		}
	}
}

func testIngestRefused(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	f.endpoint(t, "acme", "*")
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		in   engine.NewEvent
		want *engine.Error // nil: context.Canceled
	}{
		{"missing tenant", t.Context(), newEvent("nobody", "order.created", `{}`), engine.TenantNotFound()},
		{"type not in the catalogue", t.Context(), newEvent("acme", "order.refunded", `{}`), engine.UnknownEventType("order.refunded")},
		{"context ended", canceled, newEvent("acme", "order.created", `{}`), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.IdempotencyKey, tt.in.RequestHash, tt.in.IdempotencyExpires = "key-"+tt.name, [32]byte{1}, t0.Add(time.Hour)
			_, err := f.s.AppendEvent(tt.ctx, tt.in)
			if tt.want == nil {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("error = %v, want context.Canceled", err)
				}
			} else {
				wantError(t, err, tt.want)
			}
			if _, _, err := f.s.Event(t.Context(), tt.in.Event.TenantID, tt.in.Event.ID); engine.ErrorCode(err) != engine.CodeEventNotFound {
				t.Errorf("the refused event: %v, want CodeEventNotFound", err)
			}
			// It left no idempotency record: the key is free.
			again := newEvent("acme", "order.created", `{}`)
			again.IdempotencyKey, again.RequestHash, again.IdempotencyExpires = tt.in.IdempotencyKey, [32]byte{2}, t0.Add(time.Hour)
			if res := f.ingest(t, again); res.Duplicate {
				t.Error("the refused ingest's key holds an event")
			}
		})
	}
	evs, _, _ := f.s.ListEvents(t.Context(), "acme", engine.EventFilter{Limit: 100})
	if len(evs) != len(tests) {
		t.Errorf("%d events in the log, want the %d accepted ones", len(evs), len(tests))
	}
	if n := len(f.retryIndex(t)); n != len(tests) {
		t.Errorf("%d retry entries, want the %d accepted ones'", n, len(tests))
	}
}

func testEventIsolation(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	ep, typ := f.lane(t, "acme")
	d := f.deliver(t, ep, typ)
	_, _, err := f.s.Event(t.Context(), "globex", d.EventID)
	wantError(t, err, engine.EventNotFound())
	_, _, err = f.s.Event(t.Context(), "acme", "evt_nope")
	wantError(t, err, engine.EventNotFound())
	_, err = f.s.Delivery(t.Context(), "globex", d.ID)
	wantError(t, err, engine.DeliveryNotFound())
	_, err = f.s.Delivery(t.Context(), "acme", "dlv_nope")
	wantError(t, err, engine.DeliveryNotFound())
	_, err = f.replay(t, "globex", d.ID, engine.Replay{At: t0.Add(time.Hour), By: "admin"})
	wantError(t, err, engine.DeliveryNotFound())
	wantEqual(t, "the delivery after another tenant's replay", f.read(t, d), d)
}

func testIdempotency(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	f.eventType(t, "order.created")
	f.endpoint(t, "acme", "*")
	f.endpoint(t, "acme", "*")
	f.endpoint(t, "globex", "*")
	const window = time.Hour
	keyed := func(tenant, key string, hash byte, at time.Time) engine.NewEvent {
		in := newEventAt(tenant, "order.created", fmt.Sprintf(`{"hash":%d}`, hash), at)
		in.IdempotencyKey, in.RequestHash, in.IdempotencyExpires = key, [32]byte{hash}, at.Add(window)
		return in
	}
	first := f.ingest(t, keyed("acme", "k1", 1, t0))
	if first.Duplicate || len(first.Deliveries) != 2 {
		t.Fatalf("first ingest = %+v", first)
	}
	// Its deliveries move on: a duplicate shows them as they are now.
	done := f.settle(t, first.Deliveries[0], engine.StateSucceeded, t0.Add(time.Second), time.Time{})
	firstNow := first
	firstNow.Deliveries = []engine.Delivery{done, first.Deliveries[1]}
	firstNow.Duplicate, firstNow.Owed = true, false // its fan-out is stored now

	tests := []struct {
		name string
		in   engine.NewEvent
		want engine.IngestResult // Event.ID "" : a new event
		code engine.Code
	}{
		{"same key and request: the first event", keyed("acme", "k1", 1, t0.Add(time.Minute)), firstNow, ""},
		{"same key and request at the window's last instant", keyed("acme", "k1", 1, t0.Add(window-time.Nanosecond)), firstNow, ""},
		{"same key, another request: a conflict", keyed("acme", "k1", 2, t0.Add(time.Minute)), engine.IngestResult{}, engine.CodeIdempotencyConflict},
		{"same key, another tenant: a new event", keyed("globex", "k1", 1, t0), engine.IngestResult{}, ""},
		{"no key: a new event", newEventAt("acme", "order.created", `{"hash":1}`, t0.Add(time.Minute)), engine.IngestResult{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _, _ := f.s.ListEvents(t.Context(), tt.in.Event.TenantID, engine.EventFilter{Limit: 100})
			got, err := f.appendEvent(t, tt.in)
			after, _, _ := f.s.ListEvents(t.Context(), tt.in.Event.TenantID, engine.EventFilter{Limit: 100})
			switch {
			case tt.code != "":
				wantError(t, err, engine.IdempotencyConflict())
				if len(after) != len(before) {
					t.Errorf("a conflict appended an event")
				}
			case err != nil:
				t.Fatal(err)
			case tt.want.Event.ID != "":
				wantEqual(t, "duplicate", got, tt.want)
				if len(after) != len(before) {
					t.Errorf("a duplicate appended an event")
				}
			default:
				if got.Duplicate || got.Event.ID != tt.in.Event.ID || len(after) != len(before)+1 {
					t.Errorf("ingest = %+v, want the new event %s appended", got, tt.in.Event.ID)
				}
			}
		})
	}

	t.Run("at the window's end the record is replaced", func(t *testing.T) {
		end := t0.Add(window) // Created == IdempotencyExpires: expired
		in := keyed("acme", "k1", 2, end)
		got := f.ingest(t, in)
		if got.Duplicate || got.Event.ID != in.Event.ID {
			t.Fatalf("ingest at the window's end = %+v, want the new event %s", got, in.Event.ID)
		}
		again := f.ingest(t, keyed("acme", "k1", 2, end.Add(window/2)))
		if !again.Duplicate || again.Event.ID != in.Event.ID {
			t.Errorf("the same request in the new window = %+v, want a duplicate of %s", again, in.Event.ID)
		}
		_, err := f.appendEvent(t, keyed("acme", "k1", 1, end.Add(window/2)))
		wantError(t, err, engine.IdempotencyConflict())
	})
}

func testIdempotencyConcurrent(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	f.endpoint(t, "acme", "*")
	const n = 24
	results := make([]engine.IngestResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			in := newEventAt("acme", "order.created", `{}`, t0)
			in.IdempotencyKey, in.RequestHash, in.IdempotencyExpires = "same", [32]byte{7}, t0.Add(time.Hour)
			results[i], errs[i] = f.s.AppendEvent(t.Context(), in)
		})
	}
	wg.Wait()
	f.fanOut(t)
	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !results[i].Duplicate {
			fresh++
		}
		if results[i].Event.ID != results[0].Event.ID || !slices.Equal(ids(results[i].Deliveries), ids(results[0].Deliveries)) {
			t.Errorf("ingest %d got event %s %v, ingest 0 got %s %v", i, results[i].Event.ID, ids(results[i].Deliveries), results[0].Event.ID, ids(results[0].Deliveries))
		}
	}
	if fresh != 1 {
		t.Errorf("%d ingests appended an event, want 1", fresh)
	}
	evs, _, _ := f.s.ListEvents(t.Context(), "acme", engine.EventFilter{Limit: 100})
	if len(evs) != 1 {
		t.Errorf("%d events in the log, want 1", len(evs))
	}
	if n := len(f.retryIndex(t)); n != 1 {
		t.Errorf("%d retry entries, want 1", n)
	}
}

func testIngestConcurrent(t *testing.T, f *fixture) {
	tenants := []string{"acme", "globex", "initech"}
	f.eventType(t, "order.created")
	for _, tn := range tenants {
		f.tenant(t, tn)
		f.endpoint(t, tn, "*")
		f.endpoint(t, tn, "order.created")
	}
	const writers, each = 6, 8
	var mu sync.Mutex
	appended := map[string][]string{} // tenant → event IDs
	seqs := map[uint64]bool{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			tenant := tenants[w%len(tenants)]
			for range each {
				res, err := f.s.AppendEvent(t.Context(), newEvent(tenant, "order.created", `{}`))
				if err != nil {
					t.Errorf("AppendEvent: %v", err)
					return
				}
				mu.Lock()
				appended[tenant] = append(appended[tenant], res.Event.ID)
				if seqs[res.Event.Seq] {
					t.Errorf("Seq %d given twice", res.Event.Seq)
				}
				seqs[res.Event.Seq] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	f.fanOut(t)
	for _, tn := range tenants {
		evs, next, err := f.s.ListEvents(t.Context(), tn, engine.EventFilter{Limit: 1000})
		if err != nil || next != "" {
			t.Fatalf("ListEvents(%s): next %q, %v", tn, next, err)
		}
		wantEqual(t, "events of "+tn, sorted(eventIDs(evs)), sorted(appended[tn]))
		// In log order, the tenant's numbers are 1 to n: none twice,
		// none missing, whatever ran at once.
		for i, ev := range evs {
			if ev.Sequence != uint64(i+1) {
				t.Errorf("%s's event %d in log order has Sequence %d", tn, i+1, ev.Sequence)
			}
		}
	}
	if n := len(f.retryIndex(t)); n != writers*each*2 {
		t.Errorf("%d retry entries, want %d", n, writers*each*2)
	}
}
