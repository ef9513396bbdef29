package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// maintenanceTests hold a store's engine.Maintenance to the Store
// contract over time: what retention and the
// purge of a deleted tenant leave behind is as consistent as a fresh
// store, after every call. Each call is followed by the store's own
// check (Harness.Check) and by the suite's reading of the store through
// the Store itself (consistent), which holds for every store whatever
// it keeps besides.
var maintenanceTests = []test{
	{"retention leaves gaps in a tenant's sequences; numbering goes on", testPruneGaps},
	{"retention deletes a blocking head: the next is promoted, pending, due, and reported", testPruneBlockingHead},
	{"a tenant's purge in small batches cuts its lines anywhere and leaves nothing", testPurgeAcrossLines},
	{"a deleted tenant's waiting, paused and blocking deliveries go in its purge", testPurgeWaiting},
	{"expired idempotency keys and access tokens are pruned, max a call", testPruneKeysAndTokens},
	{"a purge of one deleted tenant purges that tenant only", testPurgeOneTenant},
	{"a deleted endpoint's paused deliveries are found until they are dropped", testOrphanedPaused},
}

// testOrphanedPaused: the endpoints deleted with paused deliveries left
// (a process that died between DeleteEndpoint and the drop of its paused
// deliveries) are listed, in order and max a call, and no longer once
// those are dropped; a live endpoint's paused deliveries and a deleted
// tenant's are never listed.
func testOrphanedPaused(t *testing.T, f *fixture) {
	orphans := func(max int) []engine.EndpointRef {
		t.Helper()
		refs, err := f.s.OrphanedPaused(t.Context(), max)
		if err != nil {
			t.Fatalf("OrphanedPaused: %v", err)
		}
		return refs
	}
	if got := orphans(0); len(got) != 0 {
		t.Fatalf("OrphanedPaused of an empty store = %v", got)
	}
	paused := func(tenant string) (engine.Endpoint, []engine.Delivery) {
		t.Helper()
		ep, typ := f.lane(t, tenant)
		ep = f.setEnabled(t, ep, false, t0)
		return ep, []engine.Delivery{f.deliver(t, ep, typ), f.deliver(t, ep, typ)}
	}
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	f.tenant(t, "initech")
	_, liveHeld := paused("acme")
	gone1, _ := paused("acme")
	gone2, _ := paused("globex")
	goneTenant, _ := paused("initech")
	for _, ep := range []engine.Endpoint{gone1, gone2, goneTenant} {
		if err := f.s.DeleteEndpoint(t.Context(), ep.TenantID, ep.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.s.DeleteTenant(t.Context(), "initech", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	want := []engine.EndpointRef{{TenantID: "acme", EndpointID: gone1.ID}, {TenantID: "globex", EndpointID: gone2.ID}}
	wantEqual(t, "OrphanedPaused", orphans(0), want)
	wantEqual(t, "OrphanedPaused, max 1", orphans(1), want[:1])
	at := t0.Add(2 * time.Minute)
	dropped := f.selectAll(t, engine.Selection{Tenant: "acme", State: engine.StatePaused, EndpointID: gone1.ID}, 1, func(d engine.Delivery) engine.Delivery {
		return engine.DropDeletedEndpointDelivery(d, at)
	})
	if len(dropped) != 2 {
		t.Fatalf("dropped %d paused deliveries of the deleted endpoint, want 2", len(dropped))
	}
	wantEqual(t, "OrphanedPaused after acme's are dropped", orphans(0), want[1:])
	for _, d := range liveHeld {
		wantEqual(t, "a live endpoint's paused delivery", f.read(t, d).State, engine.StatePaused)
	}
}

// prune runs retention r over the whole log, max events a call, as the
// janitor does, checking the store after each call, and returns the
// calls' results added up, their Promoted in the order reported.
func (f *fixture) prune(t *testing.T, r engine.Retention, max int) engine.PruneResult {
	t.Helper()
	var total engine.PruneResult
	for cursor, calls := uint64(0), 0; ; calls++ {
		if calls > 1000 {
			t.Fatalf("PruneEvents still goes on after %d calls", calls)
		}
		res, err := f.s.PruneEvents(t.Context(), cursor, r, max)
		if err != nil {
			t.Fatalf("PruneEvents(after %d): %v", cursor, err)
		}
		if res.Scanned > max {
			t.Fatalf("PruneEvents(max %d) looked at %d events", max, res.Scanned)
		}
		total.Scanned += res.Scanned
		total.Events += res.Events
		total.Deliveries += res.Deliveries
		total.Promoted = append(total.Promoted, res.Promoted...)
		f.check(t)
		f.consistent(t, false)
		if res.Next == 0 {
			return total
		}
		if res.Next <= cursor {
			t.Fatalf("PruneEvents(after %d) returned Next %d: it does not move on", cursor, res.Next)
		}
		cursor = res.Next
	}
}

// purge purges what deleted tenants left, max events a call, as the
// janitor does, checking the store after each call; a store whose
// DeleteTenant purges at once (Harness.Purge nil) has nothing left.
func (f *fixture) purge(t *testing.T, max int) {
	t.Helper()
	for calls := 0; ; calls++ {
		if calls > 1000 {
			t.Fatalf("PurgeDeletedTenants still goes on after %d calls", calls)
		}
		res, err := f.s.PurgeDeletedTenants(t.Context(), "", max)
		if err != nil {
			t.Fatalf("PurgeDeletedTenants: %v", err)
		}
		if max > 0 && (res.Events > max || res.Keys > max) {
			t.Fatalf("PurgeDeletedTenants(max %d) deleted %d events, %d keys", max, res.Events, res.Keys)
		}
		f.check(t)
		f.consistent(t, res.Tenant != "")
		if res.Tenant == "" {
			if f.h.Purge != nil && calls == 0 {
				t.Fatal("PurgeDeletedTenants found no deleted tenant, but this store purges after DeleteTenant")
			}
			return
		}
	}
}

// consistent fails t unless what the store shows of its live tenants
// through the Store agrees with itself:
//
//   - a tenant's numbered events have Sequences that rise in log order
//     (with gaps where retention deleted some);
//   - a delivery is in the retry index once, due at its NextAttemptAt, if
//     and only if it is Pending, and among its tenant's dead letters if
//     and only if it is Dead;
//   - an ordered delivery that holds its line is its line's head
//     (LineHead), and a waiting one waits behind its line's head, another
//     delivery that holds the line.
//
// Unless purging (a deleted tenant not yet purged), every retry index
// entry is a live tenant's pending delivery.
func (f *fixture) consistent(t *testing.T, purging bool) {
	t.Helper()
	ctx := t.Context()
	tenants, err := f.s.Tenants(ctx)
	if err != nil {
		t.Fatalf("Tenants: %v", err)
	}
	indexed := map[string][]engine.RetryEntry{}
	for _, e := range f.retryIndex(t) {
		indexed[e.DeliveryID] = append(indexed[e.DeliveryID], e)
	}
	listed := map[string]bool{}
	for _, tn := range tenants {
		var last uint64
		for _, page := range readPages(t, 50, func(cursor string) ([]engine.Event, string, error) {
			return f.s.ListEvents(ctx, tn.ID, engine.EventFilter{After: cursor, Limit: 50})
		}) {
			for _, ev := range page {
				if ev.Sequence != 0 && ev.Sequence <= last {
					t.Errorf("event %s of %s: Sequence %d after %d in the log", ev.ID, tn.ID, ev.Sequence, last)
				}
				last = max(last, ev.Sequence)
			}
		}
		dead := map[string]int{}
		for _, d := range f.deadLetters(t, tn.ID) {
			dead[d.ID]++
		}
		for _, page := range readPages(t, 50, func(cursor string) ([]engine.Delivery, string, error) {
			return f.s.ListDeliveries(ctx, tn.ID, engine.DeliveryFilter{Cursor: cursor, Limit: 50})
		}) {
			for _, d := range page {
				listed[d.ID] = true
				f.consistentDelivery(t, d, indexed[d.ID], dead[d.ID])
			}
		}
	}
	if purging {
		return
	}
	for id, es := range indexed {
		if !listed[id] {
			t.Errorf("the retry index has %+v, a delivery no tenant has", es)
		}
	}
}

// consistentDelivery fails t unless d, as listed, is where its state puts
// it: due as entries say, among the dead letters deadN times, in its line
// as its state says.
func (f *fixture) consistentDelivery(t *testing.T, d engine.Delivery, entries []engine.RetryEntry, deadN int) {
	t.Helper()
	if d.State == engine.StatePending {
		if d.NextAttemptAt.IsZero() || len(entries) != 1 || !entries[0].Due.Equal(d.NextAttemptAt) || entries[0].EndpointID != d.EndpointID {
			t.Errorf("pending delivery %s due %v: retry index has %+v", d.ID, d.NextAttemptAt, entries)
		}
	} else if len(entries) != 0 {
		t.Errorf("%s delivery %s: retry index has %+v", d.State, d.ID, entries)
	}
	if want := b2i(d.State == engine.StateDead); deadN != want {
		t.Errorf("%s delivery %s is %d times among the dead letters, want %d", d.State, d.ID, deadN, want)
	}
	if d.Line == "" {
		return
	}
	head, ok, err := f.s.LineHead(t.Context(), d.EndpointID, d.Line)
	if err != nil {
		t.Fatalf("LineHead: %v", err)
	}
	switch {
	case engine.HoldsLine(d) && (!ok || head.ID != d.ID):
		t.Errorf("%s delivery %s holds line %q, whose head is %q (%v)", d.State, d.ID, d.Line, head.ID, ok)
	case d.State == engine.StateWaiting && (!ok || head.ID == d.ID || !engine.HoldsLine(head) || d.WaitingBehind != head.ID):
		t.Errorf("delivery %s waits behind %q in line %q, whose head is %q (%s, %v)", d.ID, d.WaitingBehind, d.Line, head.ID, head.State, ok)
	}
}

func testPruneGaps(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	ds := make([]engine.Delivery, 4)
	for i := range ds {
		ds[i] = f.deliver(t, ep, typ)
	}
	old, recent := t0.Add(time.Hour), t0.Add(48*time.Hour)
	// Sequence 1 stays pending and 3 is a dead letter inside retention:
	// both kept; 2 and 4 succeeded long ago.
	ds[1] = f.settle(t, ds[1], engine.StateSucceeded, old, time.Time{})
	ds[2] = f.settle(t, ds[2], engine.StateDead, recent, time.Time{})
	ds[3] = f.settle(t, ds[3], engine.StateSucceeded, old, time.Time{})
	cut := t0.Add(24 * time.Hour)
	res := f.prune(t, engine.Retention{SucceededBefore: cut, DeadBefore: cut}, 1) // one event a call: the cursor carries on
	if res.Events != 2 || res.Deliveries != 2 || len(res.Promoted) != 0 {
		t.Errorf("pruned %d events, %d deliveries, promoted %+v; want 2, 2 and none", res.Events, res.Deliveries, res.Promoted)
	}
	evs, _, err := f.s.ListEvents(t.Context(), "acme", engine.EventFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "events kept", eventIDs(evs), []string{ds[0].EventID, ds[2].EventID})
	if len(evs) == 2 {
		wantEqual(t, "their Sequences", []uint64{evs[0].Sequence, evs[1].Sequence}, []uint64{1, 3})
	}
	for _, d := range []engine.Delivery{ds[1], ds[3]} {
		_, err := f.s.Delivery(t.Context(), "acme", d.ID)
		wantError(t, err, engine.DeliveryNotFound())
	}
	f.wantPlace(t, ds[0], ds[2])
	if next := f.ingest(t, newEvent("acme", typ, `{"n":5}`)); next.Event.Sequence != 5 {
		t.Errorf("the next event's Sequence = %d, want 5: a deleted event's number is never given again", next.Event.Sequence)
	}
}

func testPruneBlockingHead(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	whole, wtyp := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadBlock)
	keyed, ktyp := f.orderedLane(t, "acme", engine.OrderingKey, engine.OnDeadBlock)
	skipping, styp := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadSkip)
	late, ltyp := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadBlock)
	w := f.line(t, whole, wtyp, 3)
	k := []engine.Delivery{f.deliverKeyed(t, keyed, ktyp, "a"), f.deliverKeyed(t, keyed, ktyp, "a"), f.deliverKeyed(t, keyed, ktyp, "b")}
	s := f.line(t, skipping, styp, 2)
	l := f.line(t, late, ltyp, 2)

	died := t0.Add(time.Hour)
	for _, d := range []engine.Delivery{w[0], k[0], k[2], s[0]} {
		f.settle(t, d, engine.StateDead, died, time.Time{})
	}
	f.settle(t, l[0], engine.StateDead, died.Add(time.Hour), time.Time{}) // inside retention
	f.wantPending(t, s[1], died)                                          // the skip line went on when its head died

	cut := died.Add(time.Minute)
	res := f.prune(t, engine.Retention{SucceededBefore: cut, DeadBefore: cut}, 2)
	if res.Events != 4 {
		t.Errorf("pruned %d events, want the 4 dead heads' past retention", res.Events)
	}
	byDelivery := func(a, b engine.Work) int { return strings.Compare(a.DeliveryID, b.DeliveryID) }
	want := []engine.Work{
		{DeliveryID: w[1].ID, TenantID: "acme", EndpointID: whole.ID},
		{DeliveryID: k[1].ID, TenantID: "acme", EndpointID: keyed.ID},
	}
	slices.SortFunc(want, byDelivery)
	slices.SortFunc(res.Promoted, byDelivery)
	wantEqual(t, "Promoted", res.Promoted, want)
	for _, p := range []engine.Delivery{w[1], k[1]} {
		got := f.read(t, p)
		if got.State != engine.StatePending || got.NextAttemptAt.IsZero() || !got.CycleStart.Equal(got.NextAttemptAt) || got.WaitingBehind != "" {
			t.Errorf("promoted %s = %s due %v, cycle start %v, behind %q; want pending, due when its cycle started",
				p.ID, got.State, got.NextAttemptAt, got.CycleStart, got.WaitingBehind)
		}
		f.wantPlace(t, got)
	}
	f.wantHead(t, whole, engine.LineEndpoint, w[1].ID)
	f.wantWaiting(t, w[1].ID, w[2])
	f.wantHead(t, keyed, engine.LineKeyPrefix+"a", k[1].ID)
	f.wantHead(t, keyed, engine.LineKeyPrefix+"b", "")
	f.wantHead(t, skipping, engine.LineEndpoint, s[1].ID)
	f.wantHead(t, late, engine.LineEndpoint, l[0].ID)
	f.wantWaiting(t, l[0].ID, l[1])
}

func testPurgeAcrossLines(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "kept")
	whole, wtyp := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadBlock)
	keyed, ktyp := f.orderedLane(t, "acme", engine.OrderingKey, engine.OnDeadSkip)
	var gone []engine.Delivery
	for i := range 5 { // the lines' members interleave in the log
		gone = append(gone, f.deliverKeyed(t, whole, wtyp, ""), f.deliverKeyed(t, keyed, ktyp, []string{"a", "b"}[i%2]))
	}
	gone[0] = f.settle(t, gone[0], engine.StateDead, t0.Add(time.Hour), time.Time{}) // blocks its line
	other, otyp := f.orderedLane(t, "kept", engine.OrderingEndpoint, engine.OnDeadBlock)
	kept := f.line(t, other, otyp, 2)

	if err := f.s.DeleteTenant(t.Context(), "acme", t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	f.purge(t, 3) // three events a call: every line is cut between calls
	for _, d := range gone {
		_, err := f.s.Delivery(t.Context(), "acme", d.ID)
		wantError(t, err, engine.DeliveryNotFound())
	}
	f.wantHead(t, whole, engine.LineEndpoint, "")
	f.wantHead(t, keyed, engine.LineKeyPrefix+"a", "")
	f.wantHead(t, keyed, engine.LineKeyPrefix+"b", "")
	f.wantHead(t, other, engine.LineEndpoint, kept[0].ID)
	f.wantWaiting(t, kept[0].ID, kept[1])
	f.wantPlace(t, kept...)
}

func testPurgeWaiting(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	pending, ptyp := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadBlock)
	blocked, btyp := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadBlock)
	held, htyp := f.orderedLane(t, "acme", engine.OrderingKey, engine.OnDeadSkip)
	at := t0.Add(time.Hour)
	gone := f.line(t, pending, ptyp, 3) // a pending head, two waiting
	b := f.line(t, blocked, btyp, 3)
	b[0] = f.settle(t, b[0], engine.StateDead, at, time.Time{}) // a blocking head, two waiting
	h := []engine.Delivery{f.deliverKeyed(t, held, htyp, "k"), f.deliverKeyed(t, held, htyp, "k")}
	f.setEnabled(t, held, false, at)
	h[0] = f.pause(t, h[0], at) // a held head, one waiting
	gone = append(slices.Concat(gone, b, h), f.deliverKeyed(t, held, htyp, "k"))
	for _, d := range gone[1:3] {
		if got := f.read(t, d); got.State != engine.StateWaiting {
			t.Fatalf("delivery %s is %s, want waiting", d.ID, got.State)
		}
	}

	if err := f.s.DeleteTenant(t.Context(), "acme", at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	f.check(t)
	f.purge(t, 0)
	for _, d := range gone {
		_, err := f.s.Delivery(t.Context(), "acme", d.ID)
		wantError(t, err, engine.DeliveryNotFound())
		_, _, err = f.s.Event(t.Context(), "acme", d.EventID)
		wantError(t, err, engine.EventNotFound())
	}
	wantEmpty(t, "the retry index", f.retryIndex(t))
	for _, l := range []struct {
		ep   engine.Endpoint
		line string
	}{{pending, engine.LineEndpoint}, {blocked, engine.LineEndpoint}, {held, engine.LineKeyPrefix + "k"}} {
		f.wantHead(t, l.ep, l.line, "")
	}
	// The id is free again, and the tenant made anew has nothing of the
	// old one.
	f.tenant(t, "acme")
	evs, _, err := f.s.ListEvents(t.Context(), "acme", engine.EventFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	wantEmpty(t, "the new tenant's events", evs)
	dead, _, err := f.s.DeadLetters(t.Context(), "acme", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	wantEmpty(t, "the new tenant's dead letters", dead)
}

func testPruneKeysAndTokens(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	_, typ := f.lane(t, "acme")
	for i, expires := range []time.Duration{time.Hour, time.Hour, 3 * time.Hour} {
		in := newEvent("acme", typ, `{"n":1}`)
		in.IdempotencyKey, in.RequestHash, in.IdempotencyExpires = fmt.Sprintf("key-%d", i), [32]byte{byte(i)}, t0.Add(expires)
		f.ingest(t, in)
	}
	var hashes [][32]byte
	for _, expires := range []time.Duration{time.Hour, time.Hour, 3 * time.Hour} {
		tok, hash := accessToken("acme", t0.Add(expires))
		if err := f.s.CreateAccessToken(t.Context(), hash, tok); err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, hash)
	}
	now := t0.Add(2 * time.Hour)
	for _, p := range []struct {
		what  string
		prune func(max int) (int, error)
	}{
		{"PruneIdempotency", func(max int) (int, error) { return f.s.PruneIdempotency(t.Context(), now, max) }},
		{"PruneAccessTokens", func(max int) (int, error) { return f.s.PruneAccessTokens(t.Context(), now, max) }},
	} {
		var got []int
		for range 4 {
			n, err := p.prune(1)
			if err != nil {
				t.Fatalf("%s: %v", p.what, err)
			}
			if got = append(got, n); n == 0 {
				break
			}
		}
		wantEqual(t, p.what+" with max 1, until none", got, []int{1, 1, 0})
		f.check(t)
	}
	for i, hash := range hashes {
		if _, ok, err := f.s.AccessTokenByHash(t.Context(), hash); err != nil || ok != (i == 2) {
			t.Errorf("token %d after the prune: found %v, %v; want found %v", i, ok, err, i == 2)
		}
	}
	// The live key still answers with its event.
	in := newEventAt("acme", typ, `{"n":1}`, now)
	in.IdempotencyKey, in.RequestHash, in.IdempotencyExpires = "key-2", [32]byte{2}, now.Add(time.Hour)
	if res := f.ingest(t, in); !res.Duplicate {
		t.Error("a live idempotency key was pruned")
	}
}

func testPurgeOneTenant(t *testing.T, f *fixture) {
	for _, id := range []string{"acme", "globex", "initech"} {
		f.tenant(t, id)
		_, typ := f.lane(t, id)
		for range 5 {
			f.ingest(t, newEvent(id, typ, `{"n":1}`))
		}
	}
	for _, id := range []string{"acme", "globex"} {
		if err := f.s.DeleteTenant(t.Context(), id, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	// A live tenant, or one never made, has nothing to purge.
	for _, id := range []string{"initech", "nobody"} {
		if res, err := f.s.PurgeDeletedTenants(t.Context(), id, 0); err != nil || res != (engine.PurgeResult{}) {
			t.Errorf("PurgeDeletedTenants(%s) = %+v, %v; want nothing done", id, res, err)
		}
	}
	events := 0
	for calls := 0; ; calls++ {
		if calls > 100 {
			t.Fatal("the purge of globex does not end")
		}
		res, err := f.s.PurgeDeletedTenants(t.Context(), "globex", 2)
		if err != nil {
			t.Fatal(err)
		}
		f.check(t)
		if res.Tenant == "" {
			break
		}
		if res.Tenant != "globex" {
			t.Fatalf("PurgeDeletedTenants(globex) purged %s", res.Tenant)
		}
		events += res.Events
	}
	if f.h.Purge == nil {
		return // DeleteTenant purged both at once
	}
	if events != 5 {
		t.Errorf("the purge of globex deleted %d events, want its 5", events)
	}
	f.tenant(t, "globex") // its id is free again
	_, _, err := f.s.PutTenant(t.Context(), engine.Tenant{ID: "acme", Name: "again", Environment: engine.EnvironmentLive, Created: t0, Updated: t0})
	wantError(t, err, engine.TenantDeleting("acme"))
	res, err := f.s.PurgeDeletedTenants(t.Context(), "", 0)
	if err != nil || res.Tenant != "acme" || res.Events != 5 {
		t.Errorf("the next purge of any tenant = %+v, %v; want acme's 5 events", res, err)
	}
}
