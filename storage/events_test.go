package storage

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

func TestDB_AppendEvent(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustTenant(t, db, "b")
	mustEventType(t, db, "order.created")
	mustEventType(t, db, "order.shipped")
	all := mustEndpoint(t, db, "a", "*")
	created := mustEndpoint(t, db, "a", "order.created")
	shipped := mustEndpoint(t, db, "a", "order.shipped", "order.created.not")
	disabled := mustEndpoint(t, db, "a", "*")
	if _, err := db.UpdateEndpoint(ctx, "a", disabled.ID, func(ep *engine.Endpoint) error {
		ep.Disabled = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mustEndpoint(t, db, "b", "*")

	tests := []struct {
		typ  string
		want []string // endpoint IDs that get a delivery
	}{
		{"order.created", []string{all.ID, created.ID, disabled.ID}},
		{"order.shipped", []string{all.ID, shipped.ID, disabled.ID}},
	}
	var lastSeq uint64
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			in := newEvent("a", tt.typ, `{"x":1}`)
			res := mustAppend(t, db, in)
			if res.Duplicate {
				t.Error("Duplicate = true")
			}
			if res.Event.Seq <= lastSeq {
				t.Errorf("Seq = %d, want > %d", res.Event.Seq, lastSeq)
			}
			lastSeq = res.Event.Seq

			var got []string
			for _, d := range res.Deliveries {
				got = append(got, d.EndpointID)
				want := engine.Delivery{
					ID: d.ID, TenantID: "a", EventID: in.Event.ID, EventType: tt.typ,
					EndpointID: d.EndpointID, State: engine.StatePending, Sequence: res.Event.Sequence,
					Cycle: 1, CycleStart: t0, NextAttemptAt: t0, Created: t0, Updated: t0,
					Attempts: []engine.Attempt{}, Replays: []engine.Replay{},
				}
				if d.EndpointID == disabled.ID {
					// Held for the disabled endpoint, not dropped.
					want.State, want.NextAttemptAt, want.Reason = engine.StatePaused, time.Time{}, engine.ReasonPaused
				}
				if !reflect.DeepEqual(d, want) {
					t.Errorf("delivery = %+v\nwant %+v", d, want)
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.want))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("deliveries to %v, want %v", got, want)
			}

			ev, ds, err := db.Event(ctx, "a", in.Event.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ev, res.Event) || !reflect.DeepEqual(ds, res.Deliveries) {
				t.Errorf("Event = %+v, %+v\nwant %+v, %+v", ev, ds, res.Event, res.Deliveries)
			}
		})
	}

	t.Run("body verbatim", func(t *testing.T) {
		body := "{ \"a\" :  \"\\u00e9\\n\" ,\"b\":[1, 2.50] ,\"c\":\"\xc3\xa9\"}\n"
		in := newEvent("a", "order.created", body)
		res := mustAppend(t, db, in)
		if got := string(res.Event.Body); got != body {
			t.Errorf("AppendEvent body = %q, want %q", got, body)
		}
		ev, _, err := db.Event(ctx, "a", in.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ev.Body, []byte(body)) {
			t.Errorf("Event body = %q, want %q", ev.Body, body)
		}
		ai, err := db.AttemptInput(ctx, res.Deliveries[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ai.Body, []byte(body)) {
			t.Errorf("AttemptInput body = %q, want %q", ai.Body, body)
		}
	})
	t.Run("other tenant cannot read", func(t *testing.T) {
		res := mustAppend(t, db, newEvent("a", "order.created", `{}`))
		_, _, err := db.Event(ctx, "b", res.Event.ID)
		wantCode(t, err, engine.CodeEventNotFound, "id")
		_, err = db.Delivery(ctx, "b", res.Deliveries[0].ID)
		wantCode(t, err, engine.CodeDeliveryNotFound, "id")
		_, _, err = db.Event(ctx, "a", "evt_nope")
		wantCode(t, err, engine.CodeEventNotFound, "id")
	})
	t.Run("no subscriber", func(t *testing.T) {
		mustTenant(t, db, "lonely")
		res := mustAppend(t, db, newEvent("lonely", "order.created", `{}`))
		if res.Deliveries == nil || len(res.Deliveries) != 0 {
			t.Errorf("Deliveries = %#v, want empty", res.Deliveries)
		}
	})

	errTests := []struct {
		name  string
		in    engine.NewEvent
		code  engine.Code
		field string
		msg   []string
	}{
		{"missing tenant", newEvent("nobody", "order.created", `{}`), engine.CodeTenantNotFound, "tenant", nil},
		{"unknown type", newEvent("a", "order.refunded", `{}`), engine.CodeUnknownEventType, "type",
			[]string{`"order.refunded"`, "PUT /v1/event-types/order.refunded"}},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			before, commits := countKeys(t, db, bucketEvents), db.Stats().Commits
			_, err := db.AppendEvent(ctx, tt.in)
			e := wantCode(t, err, tt.code, tt.field)
			for _, m := range tt.msg {
				if !strings.Contains(e.Message, m) {
					t.Errorf("message %q does not name %s", e.Message, m)
				}
			}
			if got := countKeys(t, db, bucketEvents); got != before {
				t.Errorf("%d events after a failed ingest, want %d", got, before)
			}
			if got := db.Stats().Commits; got != commits {
				t.Errorf("a refused ingest went through the commit loop (%d commits, want %d)", got, commits)
			}
		})
	}
}

func TestDB_AppendEvent_idempotency(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustTenant(t, db, "b")
	mustEventType(t, db, "order.created")
	mustEndpoint(t, db, "a", "*")
	mustEndpoint(t, db, "a", "*")
	mustEndpoint(t, db, "b", "*")

	keyed := func(tenant, key string, hash byte, at time.Time) engine.NewEvent {
		in := newEvent(tenant, "order.created", `{"k":1}`)
		in.Event.Created = at
		in.IdempotencyKey = key
		in.RequestHash = [32]byte{hash}
		in.IdempotencyExpires = at.Add(time.Hour)
		return in
	}
	first := mustAppend(t, db, keyed("a", "k1", 1, t0))
	if first.Duplicate || len(first.Deliveries) != 2 {
		t.Fatalf("first ingest = %+v", first)
	}

	t.Run("same key and hash", func(t *testing.T) {
		events, deliveries := countKeys(t, db, bucketEvents), countKeys(t, db, bucketDeliveries)
		got := mustAppend(t, db, keyed("a", "k1", 1, t0.Add(time.Minute)))
		want := first
		want.Duplicate, want.Owed = true, false // its fan-out is stored now
		if !reflect.DeepEqual(got, want) {
			t.Errorf("duplicate = %+v\nwant %+v", got, want)
		}
		if e, d := countKeys(t, db, bucketEvents), countKeys(t, db, bucketDeliveries); e != events || d != deliveries {
			t.Errorf("%d events, %d deliveries after a duplicate; want %d, %d", e, d, events, deliveries)
		}
	})
	t.Run("same key other hash", func(t *testing.T) {
		_, err := db.AppendEvent(ctx, keyed("a", "k1", 2, t0.Add(time.Minute)))
		wantCode(t, err, engine.CodeIdempotencyConflict, "Idempotency-Key")
	})
	t.Run("same key other tenant", func(t *testing.T) {
		got := mustAppend(t, db, keyed("b", "k1", 1, t0))
		if got.Duplicate || got.Event.ID == first.Event.ID {
			t.Errorf("tenant b's ingest = %+v, want a new event", got)
		}
	})
	t.Run("expired", func(t *testing.T) {
		in := keyed("a", "k1", 2, t0.Add(time.Hour))
		got := mustAppend(t, db, in)
		if got.Duplicate || got.Event.ID != in.Event.ID {
			t.Fatalf("ingest after expiry = %+v, want a new event", got)
		}
		// The new record holds now: the same request again is its duplicate.
		again := mustAppend(t, db, keyed("a", "k1", 2, t0.Add(90*time.Minute)))
		if !again.Duplicate || again.Event.ID != in.Event.ID {
			t.Errorf("repeat = %+v, want a duplicate of %s", again, in.Event.ID)
		}
		if n := countKeys(t, db, bucketIdempotencyIndex); n != 2 {
			t.Errorf("%d expiry entries, want 2 (a/k1, b/k1)", n)
		}
	})
}

func TestDB_AppendEvent_idempotencyConcurrent(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustEventType(t, db, "order.created")
	mustEndpoint(t, db, "a", "*")

	const n = 50
	results := make([]engine.IngestResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			in := newEvent("a", "order.created", `{}`)
			in.IdempotencyKey = "same"
			in.RequestHash = [32]byte{7}
			in.IdempotencyExpires = t0.Add(time.Hour)
			results[i], errs[i] = db.AppendEvent(ctx, in)
		})
	}
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !results[i].Duplicate {
			fresh++
		}
		if results[i].Event.ID != results[0].Event.ID {
			t.Errorf("ingest %d got event %s, ingest 0 got %s", i, results[i].Event.ID, results[0].Event.ID)
		}
	}
	if fresh != 1 {
		t.Errorf("%d ingests appended an event, want 1", fresh)
	}
	if got := countKeys(t, db, bucketEvents); got != 1 {
		t.Errorf("%d events stored, want 1", got)
	}
}

// TestDB_AppendEvent_sameKeyOneBatch puts two ingests with one key in one
// commit: the second must see the first.
func TestDB_AppendEvent_sameKeyOneBatch(t *testing.T) {
	synctest.Test(t, testDB_AppendEvent_sameKeyOneBatch) // waitQueued needs a bubble
}

func testDB_AppendEvent_sameKeyOneBatch(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustEventType(t, db, "order.created")
	mustEndpoint(t, db, "a", "*")

	release := blockCommits(t, db)
	before := db.Stats()
	type result struct {
		res engine.IngestResult
		err error
	}
	out := make(chan result, 2)
	for i := range 2 {
		go func() {
			in := newEvent("a", "order.created", fmt.Sprintf(`{"i":%d}`, i))
			in.IdempotencyKey = "k"
			in.RequestHash = [32]byte{1}
			in.IdempotencyExpires = t0.Add(time.Hour)
			res, err := db.AppendEvent(ctx, in)
			out <- result{res, err}
		}()
	}
	waitQueued(t, db, 2)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	a, b := <-out, <-out
	if a.err != nil || b.err != nil {
		t.Fatal(a.err, b.err)
	}
	if a.res.Duplicate == b.res.Duplicate || a.res.Event.ID != b.res.Event.ID {
		t.Errorf("results %+v and %+v: want one event and one duplicate of it", a.res, b.res)
	}
	if got := countKeys(t, db, bucketEvents); got != 1 {
		t.Errorf("%d events, want 1", got)
	}
	// The blocking write's commit and one for both ingests.
	if got := db.Stats().Commits - before.Commits; got != 2 {
		t.Errorf("%d commits, want 2", got)
	}
}

func TestDB_PruneIdempotency(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustEventType(t, db, "order.created")

	for i := range 5 {
		in := newEvent("a", "order.created", `{}`)
		in.IdempotencyKey = fmt.Sprintf("k%d", i)
		in.IdempotencyExpires = t0.Add(time.Duration(i+1) * time.Minute)
		mustAppend(t, db, in)
	}
	tests := []struct {
		now       time.Time
		max       int
		want      int
		remaining int
	}{
		{now: t0, max: 10, want: 0, remaining: 5},
		{now: t0.Add(3 * time.Minute), max: 2, want: 2, remaining: 3}, // k0, k1
		{now: t0.Add(3 * time.Minute), max: 2, want: 1, remaining: 2}, // k2 (expiry == now)
		{now: t0.Add(3 * time.Minute), max: 2, want: 0, remaining: 2},
		{now: t0.Add(time.Hour), max: 0, want: 2, remaining: 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s max %d", tt.now.Sub(t0), tt.max), func(t *testing.T) {
			got, err := db.PruneIdempotency(ctx, tt.now, tt.max)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("PruneIdempotency = %d, want %d", got, tt.want)
			}
			if n := countKeys(t, db, bucketIdempotency); n != tt.remaining {
				t.Errorf("%d records left, want %d", n, tt.remaining)
			}
			mustCheck(t, db)
		})
	}
	t.Run("pruned key makes a new event", func(t *testing.T) {
		in := newEvent("a", "order.created", `{}`)
		in.Event.Created = t0 // before the old expiry: still new, as the record is gone
		in.IdempotencyKey = "k0"
		in.IdempotencyExpires = t0.Add(time.Hour)
		if res := mustAppend(t, db, in); res.Duplicate {
			t.Error("Duplicate = true after the record was pruned")
		}
	})
}

// TestDB_AppendEvent_EndpointChangesSeen: ingest reads the tenant's
// endpoints through a cache of their decoded form (forEachEndpoint); every
// change to an endpoint between two ingests is seen by the second: types,
// disabling, deletion, a new endpoint, ordering.
func TestDB_AppendEvent_EndpointChangesSeen(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "acme")
	mustEventType(t, db, "a.created")
	mustEventType(t, db, "b.created")
	a := mustEndpoint(t, db, "acme", "a.created")
	b := mustEndpoint(t, db, "acme", "a.created")
	to := func(want ...string) {
		t.Helper()
		res := mustAppend(t, db, newEvent("acme", "a.created", `{}`))
		var got []string
		for _, d := range res.Deliveries {
			got = append(got, d.EndpointID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("deliveries to %v, want %v", got, want)
		}
	}
	update := func(id string, fn func(*engine.Endpoint)) {
		t.Helper()
		if _, err := db.UpdateEndpoint(ctx, "acme", id, func(ep *engine.Endpoint) error { fn(ep); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	to(a.ID, b.ID)
	to(a.ID, b.ID) // from the cache
	update(b.ID, func(ep *engine.Endpoint) { ep.EventTypes = []string{"b.created"} })
	to(a.ID)
	update(b.ID, func(ep *engine.Endpoint) { ep.EventTypes = []string{engine.AllEventTypes} })
	to(a.ID, b.ID)
	update(a.ID, func(ep *engine.Endpoint) { ep.Disabled = true })
	res := mustAppend(t, db, newEvent("acme", "a.created", `{}`))
	if len(res.Deliveries) != 2 || res.Deliveries[0].State != engine.StatePaused || res.Deliveries[1].State != engine.StatePending {
		t.Fatalf("with %s disabled: %+v", a.ID, res.Deliveries)
	}
	if err := db.DeleteEndpoint(ctx, "acme", a.ID); err != nil {
		t.Fatal(err)
	}
	to(b.ID)
	c := mustEndpoint(t, db, "acme", "a.created")
	to(b.ID, c.ID)
	update(c.ID, func(ep *engine.Endpoint) { ep.Ordering = engine.OrderingEndpoint })
	res = mustAppend(t, db, newEvent("acme", "a.created", `{}`))
	if len(res.Deliveries) != 2 || res.Deliveries[0].Line != "" || res.Deliveries[1].Line == "" {
		t.Fatalf("with %s ordered: lines %q, %q", c.ID, res.Deliveries[0].Line, res.Deliveries[1].Line)
	}
}

// TestDB_PagesFilled: the buckets whose keys grow with time fill their
// pages (fillPercents) instead of leaving each half empty, so a commit
// writes fewer pages and the file stays smaller.
func TestDB_PagesFilled(t *testing.T) {
	db := MustOpenDB(t)
	mustEventType(t, db, "order.created")
	for _, tenant := range []string{"a", "b"} {
		mustTenant(t, db, tenant)
		for range 3 {
			mustEndpoint(t, db, tenant, "*")
		}
	}
	// Concurrent writers, so that commits carry several ingests; the two
	// tenants' keys grow side by side in the per-tenant buckets.
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 150 {
				in := newEvent([]string{"a", "b"}[(w+i)%2], "order.created", `{"n":1}`)
				in.IdempotencyKey, in.IdempotencyExpires = in.Event.ID, t0.Add(time.Hour)
				if _, err := db.AppendEvent(context.Background(), in); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	mustFanOut(t, db)
	// Each bucket's leaf pages are used 55% or more (with bbolt's default,
	// about 50%), and all of them together 80% or more. A bucket whose
	// keys grow at several places (one per tenant) fills less than one
	// with a single sequence: an insert in the middle of a filled page
	// splits it. How often that happens depends on how the writers' ingests
	// fall into commits: tenant_events, 12 or 13 pages here, is 64% used
	// on a quiet machine and 59% under CI's load, one split apart.
	var inuse, alloc int
	err := db.bolt.View(func(tx *bolt.Tx) error {
		for _, f := range fillPercents {
			if bytes.Equal(f.bucket, bucketFanOuts) {
				continue // emptied by the fan-outs: nothing to tell
			}
			s := tx.Bucket(f.bucket).Stats()
			if s.LeafPageN < 8 {
				t.Errorf("%s: %d leaf pages; too few to tell", f.bucket, s.LeafPageN)
				continue
			}
			inuse, alloc = inuse+s.LeafInuse, alloc+s.LeafAlloc
			fill := float64(s.LeafInuse) / float64(s.LeafAlloc)
			t.Logf("%s: %d leaf pages, %.0f%% used", f.bucket, s.LeafPageN, 100*fill)
			if fill < 0.55 {
				t.Errorf("%s: leaf pages %.0f%% used, want >= 55%%", f.bucket, 100*fill)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fill := float64(inuse) / float64(alloc); fill < 0.8 {
		t.Errorf("leaf pages %.0f%% used in all, want >= 80%%", 100*fill)
	}
	mustCheck(t, db)
}
