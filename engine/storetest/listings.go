package storetest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// listingTests: dead letters, the delivery log, the reconciliation feed
// and the report's window.
var listingTests = []test{
	{"dead letters page oldest death first", testDeadLetters},
	{"a dead-letter page is neither repeated nor skipped across replays", testDeadLettersReplayBetweenPages},
	{"the delivery log pages newest first", testListDeliveries},
	{"the delivery log filters", testListDeliveriesFilter},
	{"the delivery log filters by the class of the last attempt's status", testListDeliveriesByStatus},
	{"the event feed pages in log order", testListEvents},
	{"listings refuse a cursor they did not make and a limit under 1", testListingsBadInput},
	{"a filtered listing has a next page only when a match follows", testListingsNextOnlyWhenMore},
	{"recent events are the last n, newest first", testRecentEvents},
	{"cursors hold while writes go on", testCursorsUnderWrites},
}

// killAt dead-letters a new delivery of ep at at.
func (f *fixture) killAt(t *testing.T, ep engine.Endpoint, typ string, at time.Time) engine.Delivery {
	t.Helper()
	return f.settle(t, f.deliver(t, ep, typ), engine.StateDead, at, time.Time{})
}

// deadPages pages through tenant's dead letters with limit and returns
// the IDs of each page.
func (f *fixture) deadPages(t *testing.T, tenant string, limit int) [][]string {
	t.Helper()
	return pageIDs(readPages(t, limit, func(cursor string) ([]engine.Delivery, string, error) {
		return f.s.DeadLetters(t.Context(), tenant, cursor, limit)
	}))
}

func testDeadLetters(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "acme.eu")
	ep, typ := f.lane(t, "acme")
	foreign, foreignTyp := f.lane(t, "acme.eu")
	// Killed out of creation order; two at the same instant (then by ID).
	var byDeath []engine.Delivery
	for _, m := range []int{3, 1, 4, 0, 2, 2} {
		byDeath = append(byDeath, f.killAt(t, ep, typ, t0.Add(time.Duration(m)*time.Minute)))
	}
	slices.SortStableFunc(byDeath, func(a, b engine.Delivery) int {
		if c := a.DeadAt.Compare(b.DeadAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	f.killAt(t, foreign, foreignTyp, t0)
	f.deliver(t, ep, typ) // pending: not a dead letter
	want := ids(byDeath)

	tests := []struct {
		limit int
		want  [][]string
	}{
		{1, [][]string{want[0:1], want[1:2], want[2:3], want[3:4], want[4:5], want[5:6]}},
		{2, [][]string{want[0:2], want[2:4], want[4:6]}},
		{4, [][]string{want[0:4], want[4:6]}},
		{6, [][]string{want}},
		{100, [][]string{want}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("limit %d", tt.limit), func(t *testing.T) {
			wantEqual(t, "pages", f.deadPages(t, "acme", tt.limit), tt.want)
		})
	}
	all, _, _ := f.s.DeadLetters(t.Context(), "acme", "", 100)
	wantEqual(t, "dead letters", all, byDeath)
	ds, next, err := f.s.DeadLetters(t.Context(), "nobody", "", 10)
	if err != nil || next != "" {
		t.Errorf("DeadLetters(nobody) = next %q, %v", next, err)
	}
	wantEmpty(t, "DeadLetters(nobody)", ds)
}

func testDeadLettersReplayBetweenPages(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	var byDeath []string
	for m := range 6 {
		byDeath = append(byDeath, f.killAt(t, ep, typ, t0.Add(time.Duration(m)*time.Minute)).ID)
	}
	page, next, err := f.s.DeadLetters(t.Context(), "acme", "", 2)
	if err != nil || next == "" {
		t.Fatalf("first page: next %q, %v", next, err)
	}
	wantEqual(t, "first page", ids(page), byDeath[0:2])
	// Replay the page's last (the one the cursor stands for) and the next
	// page's first.
	for _, id := range []string{byDeath[1], byDeath[2]} {
		if _, err := f.replay(t, "acme", id, engine.Replay{At: t0.Add(time.Hour), By: "admin"}); err != nil {
			t.Fatal(err)
		}
	}
	rest, end, err := f.s.DeadLetters(t.Context(), "acme", next, 10)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "next page", ids(rest), byDeath[3:6])
	wantEqual(t, "cursor after the last page", end, "")
}

// deliveryPages pages through tenant's delivery log with filter and
// returns the IDs of each page.
func (f *fixture) deliveryPages(t *testing.T, tenant string, filter engine.DeliveryFilter) [][]string {
	t.Helper()
	return pageIDs(readPages(t, filter.Limit, func(cursor string) ([]engine.Delivery, string, error) {
		filter.Cursor = cursor
		return f.s.ListDeliveries(t.Context(), tenant, filter)
	}))
}

// newestFirst is the delivery log's order of ds: by their event's place
// in the log, newest first, then by ID, highest first. events lists the
// events in log order.
func newestFirst(events []engine.IngestResult) []engine.Delivery {
	var out []engine.Delivery
	for _, res := range slices.Backward(events) {
		ds := slices.Clone(res.Deliveries)
		slices.SortFunc(ds, func(a, b engine.Delivery) int { return -byID(a, b) })
		out = append(out, ds...)
	}
	return out
}

func testListDeliveries(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "acme.eu")
	f.eventType(t, "order.created")
	f.endpoint(t, "acme", "*")
	f.endpoint(t, "acme", "order.created")
	f.endpoint(t, "acme.eu", "*")
	var events []engine.IngestResult
	for range 4 {
		events = append(events, f.ingest(t, newEvent("acme", "order.created", `{}`)))
		f.ingest(t, newEvent("acme.eu", "order.created", `{}`))
	}
	// A change of state does not move a delivery in the log.
	f.settle(t, events[1].Deliveries[0], engine.StateDead, t0.Add(time.Minute), time.Time{})
	for i := range events {
		_, events[i].Deliveries, _ = f.s.Event(t.Context(), "acme", events[i].Event.ID)
	}
	want := newestFirst(events) // 8
	all := ids(want)

	tests := []struct {
		limit int
		want  [][]string
	}{
		{3, [][]string{all[0:3], all[3:6], all[6:8]}},
		{4, [][]string{all[0:4], all[4:8]}},
		{8, [][]string{all}},
		{100, [][]string{all}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("limit %d", tt.limit), func(t *testing.T) {
			wantEqual(t, "pages", f.deliveryPages(t, "acme", engine.DeliveryFilter{Limit: tt.limit}), tt.want)
		})
	}
	got, _, err := f.s.ListDeliveries(t.Context(), "acme", engine.DeliveryFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "deliveries", got, want)
	got, next, err := f.s.ListDeliveries(t.Context(), "nobody", engine.DeliveryFilter{Limit: 100})
	if err != nil || next != "" {
		t.Errorf("ListDeliveries(nobody): next %q, %v", next, err)
	}
	wantEmpty(t, "ListDeliveries(nobody)", got)
}

func testListDeliveriesFilter(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	f.eventType(t, "order.shipped")
	a := f.endpoint(t, "acme", "*")
	b := f.endpoint(t, "acme", "order.created")
	var events []engine.IngestResult
	for i := range 6 {
		typ := []string{"order.created", "order.shipped"}[i%2]
		events = append(events, f.ingest(t, newEventAt("acme", typ, `{}`, t0.Add(time.Duration(i)*time.Minute))))
	}
	// Settle some: event 0's first dead, event 2's first succeeded,
	// event 4's all paused.
	f.settle(t, events[0].Deliveries[0], engine.StateDead, t0.Add(time.Hour), time.Time{})
	f.settle(t, events[2].Deliveries[0], engine.StateSucceeded, t0.Add(time.Hour), time.Time{})
	for _, d := range events[4].Deliveries {
		f.pause(t, d, t0.Add(time.Hour))
	}
	for i := range events {
		_, events[i].Deliveries, _ = f.s.Event(t.Context(), "acme", events[i].Event.ID)
	}
	everything := newestFirst(events)

	tests := []engine.DeliveryFilter{
		{State: engine.StatePending},
		{State: engine.StateDelivering},
		{State: engine.StateSucceeded},
		{State: engine.StateDead},
		{State: engine.StatePaused},
		{Type: "order.shipped"},
		{EndpointID: b.ID},
		{EndpointID: a.ID, State: engine.StatePending},
		{Since: t0.Add(2 * time.Minute)},
		{Until: t0.Add(3 * time.Minute)},
		{Since: t0.Add(time.Minute), Until: t0.Add(4 * time.Minute), Type: "order.created"},
		{Status: engine.Status2xx},
		{Status: engine.Status4xx, EndpointID: a.ID},
		{Status: engine.StatusNone},
	}
	for _, filter := range tests {
		t.Run(fmt.Sprintf("%+v", filter), func(t *testing.T) {
			var want []string
			for _, d := range everything {
				if filter.Matches(d) {
					want = append(want, d.ID)
				}
			}
			filter.Limit = 2
			got := slices.Concat(f.deliveryPages(t, "acme", filter)...)
			wantEqual(t, "deliveries", got, want)
		})
	}
}

func testListDeliveriesByStatus(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	// attempt records an attempt of d that got status (0: no response)
	// and moved it to state.
	attempt := func(d engine.Delivery, state engine.State, status int, at time.Time) engine.Delivery {
		t.Helper()
		rec := attemptRecord(d, state, at, at.Add(time.Minute))
		rec.Attempt.Status, rec.LastStatus = status, status
		if status == 0 {
			rec.Attempt.Response, rec.Attempt.ResponseHeaders = "", nil
		}
		return f.record(t, rec)
	}
	replay := func(d engine.Delivery, at time.Time) engine.Delivery {
		t.Helper()
		return f.update(t, d.ID, func(cur engine.Delivery) engine.Delivery {
			return engine.ReplayDelivery(cur, engine.Replay{At: at, By: "admin"}, "")
		})
	}
	at := t0.Add(time.Hour)
	never := f.deliver(t, ep, typ) // no attempt: in no class
	ok := attempt(f.deliver(t, ep, typ), engine.StateSucceeded, 204, at)
	moved := attempt(f.deliver(t, ep, typ), engine.StateDead, 301, at)
	gone := attempt(f.deliver(t, ep, typ), engine.StateDead, 410, at)
	busy := attempt(f.deliver(t, ep, typ), engine.StatePending, 503, at)
	refused := attempt(f.deliver(t, ep, typ), engine.StatePending, 0, at)
	// 503 then no response: the last attempt's counts.
	timedOut := attempt(attempt(f.deliver(t, ep, typ), engine.StatePending, 503, at), engine.StatePending, 0, at.Add(time.Minute))
	// No response then 599: 5xx.
	late := attempt(attempt(f.deliver(t, ep, typ), engine.StatePending, 0, at), engine.StatePending, 599, at.Add(time.Minute))
	// Dead on a 500, replayed: pending in a new cycle with no attempt in
	// it yet, still in its last attempt's class.
	replayed := replay(attempt(f.deliver(t, ep, typ), engine.StateDead, 500, at), at.Add(time.Minute))
	// Succeeded, replayed, and then the answer of an attempt of the
	// first cycle comes in: logged only, so its status is not the last.
	stale := f.deliver(t, ep, typ)
	read := stale
	stale = attempt(stale, engine.StateSucceeded, 200, at)
	stale = replay(stale, at.Add(time.Minute))
	rec := attemptRecord(read, engine.StatePending, at.Add(2*time.Minute), at.Add(time.Hour))
	rec.Attempt.Status, rec.LastStatus, rec.Attempt.Number = 0, 0, 2
	stale = f.record(t, rec)
	if stale.LastStatus != 200 || len(stale.Attempts) != 2 || stale.State != engine.StatePending {
		t.Fatalf("the stale attempt moved the delivery: %+v", stale)
	}
	// A 1xx or a status past 599 is in no class (the dispatcher never
	// records one: net/http reads past a 1xx, and refuses a status past 999).
	odd := attempt(f.deliver(t, ep, typ), engine.StatePending, 600, at)
	_ = never
	_ = odd

	ids := func(ds ...engine.Delivery) []string {
		out := make([]string, len(ds))
		for i, d := range ds {
			out[i] = d.ID
		}
		slices.Reverse(out) // the log is newest first; these were made oldest first
		return out
	}
	for _, tt := range []struct {
		class engine.StatusClass
		want  []string
	}{
		{engine.Status2xx, ids(ok, stale)},
		{engine.Status3xx, ids(moved)},
		{engine.Status4xx, ids(gone)},
		{engine.Status5xx, ids(busy, late, replayed)},
		{engine.StatusNone, ids(refused, timedOut)},
	} {
		t.Run(string(tt.class), func(t *testing.T) {
			for _, limit := range []int{1, 2, 100} {
				got := slices.Concat(f.deliveryPages(t, "acme", engine.DeliveryFilter{Status: tt.class, Limit: limit})...)
				if !slices.Equal(got, tt.want) {
					t.Errorf("status=%s, pages of %d = %v, want %v", tt.class, limit, got, tt.want)
				}
			}
			// With the other filters.
			got := slices.Concat(f.deliveryPages(t, "acme", engine.DeliveryFilter{Status: tt.class, State: engine.StatePending, EndpointID: ep.ID, Type: typ, Limit: 2})...)
			var want []string
			for _, id := range tt.want {
				if d := f.read(t, engine.Delivery{TenantID: "acme", ID: id}); d.State == engine.StatePending {
					want = append(want, id)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("status=%s, pending = %v, want %v", tt.class, got, want)
			}
		})
	}
}

// eventPages pages through tenant's event feed with filter and returns
// the IDs of each page.
func (f *fixture) eventPages(t *testing.T, tenant string, filter engine.EventFilter) [][]string {
	t.Helper()
	return eventPageIDs(readPages(t, filter.Limit, func(cursor string) ([]engine.Event, string, error) {
		filter.After = cursor
		return f.s.ListEvents(t.Context(), tenant, filter)
	}))
}

// eventPageIDs returns the IDs of the events on each page.
func eventPageIDs(pages [][]engine.Event) [][]string {
	out := make([][]string, len(pages))
	for i, p := range pages {
		out[i] = eventIDs(p)
	}
	return out
}

func testListEvents(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "acme.eu")
	f.eventType(t, "order.created")
	f.eventType(t, "order.shipped")
	var events []engine.Event
	for i := range 6 {
		typ := []string{"order.created", "order.shipped"}[i%2]
		events = append(events, f.ingest(t, newEventAt("acme", typ, fmt.Sprintf(`{"i":%d}`, i), t0.Add(time.Duration(i)*time.Minute))).Event)
		f.ingest(t, newEvent("acme.eu", typ, `{}`))
	}
	all := eventIDs(events)
	got, next, err := f.s.ListEvents(t.Context(), "acme", engine.EventFilter{Limit: 100})
	if err != nil || next != "" {
		t.Fatalf("ListEvents: next %q, %v", next, err)
	}
	wantEqual(t, "events", got, events)

	tests := []struct {
		name   string
		filter engine.EventFilter
		want   [][]string
	}{
		{"limit 4", engine.EventFilter{Limit: 4}, [][]string{all[0:4], all[4:6]}},
		{"limit 6", engine.EventFilter{Limit: 6}, [][]string{all}},
		{"type", engine.EventFilter{Limit: 2, Type: "order.shipped"}, nil},
		{"since", engine.EventFilter{Limit: 2, Since: t0.Add(3 * time.Minute)}, nil},
		{"type and since", engine.EventFilter{Limit: 1, Type: "order.created", Since: t0.Add(time.Minute)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pages := f.eventPages(t, "acme", tt.filter)
			if tt.want != nil {
				wantEqual(t, "pages", pages, tt.want)
				return
			}
			var want []string
			for _, ev := range events {
				if (tt.filter.Type == "" || ev.Type == tt.filter.Type) && !ev.Created.Before(tt.filter.Since) {
					want = append(want, ev.ID)
				}
			}
			wantEqual(t, "events", slices.Concat(pages...), want)
		})
	}
	evs, next, err := f.s.ListEvents(t.Context(), "nobody", engine.EventFilter{Limit: 10})
	if err != nil || next != "" {
		t.Errorf("ListEvents(nobody): next %q, %v", next, err)
	}
	wantEmpty(t, "ListEvents(nobody)", evs)
}

func testListingsNextOnlyWhenMore(t *testing.T, f *fixture) {
	// The log: shipped, created ×3, shipped; created goes to both
	// endpoints, shipped to all only. Two of a's die. Every filter below
	// leaves out entries after its last match, which must not make a
	// cursor of their own: a listing never ends on an empty page.
	f.tenant(t, "acme")
	f.eventType(t, "order.created")
	f.eventType(t, "order.shipped")
	a := f.endpoint(t, "acme", "order.created")
	f.endpoint(t, "acme", "*")
	var events []engine.IngestResult
	for i, typ := range []string{"order.shipped", "order.created", "order.created", "order.created", "order.shipped"} {
		events = append(events, f.ingest(t, newEventAt("acme", typ, `{}`, t0.Add(time.Duration(i)*time.Minute))))
	}
	for _, res := range events[1:3] {
		for _, d := range res.Deliveries {
			if d.EndpointID == a.ID {
				f.settle(t, d, engine.StateDead, t0.Add(time.Hour), time.Time{})
			}
		}
	}
	// wantPages fails t unless a listing of n matches answers them in
	// one page of n with no cursor, and in pages of n-1 with a cursor
	// and then one with the last and none.
	wantPages := func(t *testing.T, n int, list func(limit int, cursor string) (int, string, error)) {
		t.Helper()
		if got, next, err := list(n, ""); err != nil || got != n || next != "" {
			t.Fatalf("limit %d: %d, next %q, %v; want %d and no next page", n, got, next, err, n)
		}
		if n < 2 {
			return
		}
		got, next, err := list(n-1, "")
		if err != nil || got != n-1 || next == "" {
			t.Fatalf("limit %d: %d, next %q, %v; want %d and a next page", n-1, got, next, err, n-1)
		}
		if got, next, err = list(n-1, next); err != nil || got != 1 || next != "" {
			t.Errorf("limit %d, the next page: %d, next %q, %v; want the last one and no next page", n-1, got, next, err)
		}
	}
	for _, tt := range []struct {
		name   string
		filter engine.DeliveryFilter
		n      int
	}{
		{"dead", engine.DeliveryFilter{State: engine.StateDead}, 2},
		{"pending of an endpoint", engine.DeliveryFilter{State: engine.StatePending, EndpointID: a.ID}, 1},
		{"endpoint", engine.DeliveryFilter{EndpointID: a.ID}, 3},
		{"type", engine.DeliveryFilter{Type: "order.created"}, 6},
		{"since", engine.DeliveryFilter{Since: t0.Add(time.Minute)}, 7},
		{"status 4xx", engine.DeliveryFilter{Status: engine.Status4xx}, 2},
	} {
		t.Run("deliveries, "+tt.name, func(t *testing.T) {
			wantPages(t, tt.n, func(limit int, cursor string) (int, string, error) {
				filter := tt.filter
				filter.Limit, filter.Cursor = limit, cursor
				ds, next, err := f.s.ListDeliveries(t.Context(), "acme", filter)
				return len(ds), next, err
			})
		})
	}
	for _, tt := range []struct {
		name   string
		filter engine.EventFilter
		n      int
	}{
		{"type", engine.EventFilter{Type: "order.created"}, 3},
		{"type and since", engine.EventFilter{Type: "order.created", Since: t0.Add(2 * time.Minute)}, 2},
	} {
		t.Run("events, "+tt.name, func(t *testing.T) {
			wantPages(t, tt.n, func(limit int, cursor string) (int, string, error) {
				filter := tt.filter
				filter.Limit, filter.After = limit, cursor
				evs, next, err := f.s.ListEvents(t.Context(), "acme", filter)
				return len(evs), next, err
			})
		})
	}
}

func testListingsBadInput(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	for m := range 3 {
		f.killAt(t, ep, typ, t0.Add(time.Duration(m)*time.Minute))
	}
	tests := []struct {
		name string
		list func() error
		want *engine.Error
	}{
		{"dead letters, cursor", func() error {
			_, _, err := f.s.DeadLetters(t.Context(), "acme", "!!", 10)
			return err
		}, engine.InvalidCursor()},
		{"dead letters, limit", func() error {
			_, _, err := f.s.DeadLetters(t.Context(), "acme", "", 0)
			return err
		}, engine.InvalidLimit()},
		{"delivery log, cursor", func() error {
			_, _, err := f.s.ListDeliveries(t.Context(), "acme", engine.DeliveryFilter{Limit: 1, Cursor: "!!"})
			return err
		}, engine.InvalidCursor()},
		{"delivery log, limit", func() error {
			_, _, err := f.s.ListDeliveries(t.Context(), "acme", engine.DeliveryFilter{Limit: 0})
			return err
		}, engine.InvalidLimit()},
		{"event feed, cursor", func() error {
			_, _, err := f.s.ListEvents(t.Context(), "acme", engine.EventFilter{Limit: 1, After: "!!"})
			return err
		}, engine.InvalidFeedCursor()},
		{"event feed, limit", func() error {
			_, _, err := f.s.ListEvents(t.Context(), "acme", engine.EventFilter{Limit: 0})
			return err
		}, engine.InvalidLimit()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, tt.list(), tt.want)
		})
	}
}

func testRecentEvents(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "acme.eu")
	f.eventType(t, "order.created")
	f.endpoint(t, "acme", "*")
	f.endpoint(t, "acme", "*")
	f.endpoint(t, "acme.eu", "*")
	var want []engine.EventDeliveries
	for i := range 5 {
		res := f.ingest(t, newEvent("acme", "order.created", `{"big":"body"}`))
		f.ingest(t, newEvent("acme.eu", "order.created", `{}`))
		if i == 3 {
			res.Deliveries[1] = f.settle(t, res.Deliveries[1], engine.StateSucceeded, t0.Add(time.Minute), time.Time{})
		}
		ev := res.Event
		ev.Body = nil
		want = append(want, engine.EventDeliveries{Event: ev, Deliveries: res.Deliveries})
	}
	slices.Reverse(want)
	for _, n := range []int{1, 3, 5, 10} {
		got, err := f.s.RecentEvents(t.Context(), "acme", n)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if len(got[i].Event.Body) == 0 {
				got[i].Event.Body = nil
			}
		}
		wantEqual(t, fmt.Sprintf("RecentEvents(%d)", n), got, want[:min(n, len(want))])
	}
	got, err := f.s.RecentEvents(t.Context(), "nobody", 10)
	if err != nil {
		t.Fatal(err)
	}
	wantEmpty(t, "RecentEvents(nobody)", got)
}

func testCursorsUnderWrites(t *testing.T, f *fixture) {
	// Every listing pages while another goroutine appends events and
	// kills deliveries, and the test writes between pages too: no page
	// repeats a row, and every row that existed before the first page
	// (and stayed where it was) is on one page.
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	const before = 12
	var existing []engine.Delivery
	for m := range before {
		d := f.deliver(t, ep, typ)
		if m%2 == 0 {
			d = f.settle(t, d, engine.StateDead, t0.Add(time.Duration(m)*time.Minute), time.Time{})
		}
		existing = append(existing, d)
	}
	existingEvents, _, err := f.s.ListEvents(t.Context(), "acme", engine.EventFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}

	// write makes one more event, and dead-letters its delivery at a time
	// later than any before: new dead letters die after the old ones.
	var mu sync.Mutex
	deaths := before
	var appended []string // events whose append has returned, in that order
	write := func() error {
		res, err := f.appendEvent(t, newEvent("acme", typ, `{}`))
		if err != nil {
			return err
		}
		mu.Lock()
		appended = append(appended, res.Event.ID)
		deaths++
		at := t0.Add(time.Duration(deaths) * time.Minute)
		mu.Unlock()
		rec := attemptRecord(res.Deliveries[0], engine.StateDead, at, time.Time{})
		_, err = f.s.UpdateDelivery(t.Context(), res.Deliveries[0].ID, func(d engine.Delivery) (engine.Delivery, error) {
			return engine.RecordAttempt(d, rec), nil
		})
		return err
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			select {
			case <-stop:
				return
			default:
			}
			if err := write(); err != nil {
				t.Errorf("write: %v", err)
				return
			}
		}
	}()
	defer func() { close(stop); <-done }()

	// between writes before every page but the first.
	between := func(t *testing.T, cursor string) {
		if cursor == "" {
			return
		}
		if err := write(); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("delivery log", func(t *testing.T) {
		filter := engine.DeliveryFilter{Limit: 3}
		pages := readPages(t, filter.Limit, func(cursor string) ([]engine.Delivery, string, error) {
			between(t, cursor)
			filter.Cursor = cursor
			return f.s.ListDeliveries(t.Context(), "acme", filter)
		})
		wantSeenOnce(t, pageIDs(pages), ids(existing), "before the first page")
	})
	t.Run("event feed", func(t *testing.T) {
		// The feed is read to its end, so it also shows every event
		// appended before the last page was asked for: the log order is
		// the order appends take effect in, and a reader polling the feed
		// misses none.
		filter := engine.EventFilter{Limit: 3}
		var done []string
		pages := readPages(t, filter.Limit, func(cursor string) ([]engine.Event, string, error) {
			between(t, cursor)
			mu.Lock()
			done = slices.Clone(appended)
			mu.Unlock()
			filter.After = cursor
			return f.s.ListEvents(t.Context(), "acme", filter)
		})
		wantSeenOnce(t, eventPageIDs(pages), append(eventIDs(existingEvents), done...), "before the last page was asked for")
	})
	t.Run("dead letters", func(t *testing.T) {
		var dead []string
		for _, d := range existing {
			if d.State == engine.StateDead {
				dead = append(dead, d.ID)
			}
		}
		pages := readPages(t, 2, func(cursor string) ([]engine.Delivery, string, error) {
			between(t, cursor)
			return f.s.DeadLetters(t.Context(), "acme", cursor, 2)
		})
		wantSeenOnce(t, pageIDs(pages), dead, "before the first page")
	})
}

// wantSeenOnce fails t if a row is on more than one of pages, or one of
// want (there since when) on none.
func wantSeenOnce(t *testing.T, pages [][]string, want []string, since string) {
	t.Helper()
	seen := map[string]int{}
	for _, page := range pages {
		for _, id := range page {
			seen[id]++
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("%s on %d pages", id, n)
		}
	}
	for _, id := range want {
		if seen[id] == 0 {
			t.Errorf("%s, there %s, is on no page", id, since)
		}
	}
}
