package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// dueOf returns where delivery id is in the retry index.
func dueOf(tb testing.TB, db *DB, id string) (time.Time, bool) {
	tb.Helper()
	for _, e := range retryEntries(tb, db) {
		if e.DeliveryID == id {
			return e.Due, true
		}
	}
	return time.Time{}, false
}

// isDeadLetter reports whether delivery id is in tenant's dead letters.
func isDeadLetter(tb testing.TB, db *DB, tenant, id string) bool {
	tb.Helper()
	ds, _, err := db.DeadLetters(context.Background(), tenant, "", 1000)
	if err != nil {
		tb.Fatal(err)
	}
	for _, d := range ds {
		if d.ID == id {
			return true
		}
	}
	return false
}

func attempt(cycle, n int, status int, outcome engine.Outcome) engine.Attempt {
	return engine.Attempt{
		Cycle: cycle, Number: n, Start: t0.Add(time.Duration(n) * time.Second),
		Duration: 150 * time.Millisecond, Status: status, Outcome: outcome,
		Response: "body", RetryAfter: 2 * time.Second,
	}
}

func TestDB_RecordAttempt(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")

	t.Run("pending to pending", func(t *testing.T) {
		d := mustDelivery(t, db, "a")
		rec := engine.AttemptRecord{
			DeliveryID: d.ID, Cycle: 1, Attempt: attempt(1, 1, 503, engine.OutcomeRetry),
			State: engine.StatePending, NextAttemptAt: t0.Add(30 * time.Second),
			Reason: "HTTP 503", LastStatus: 503, At: t0.Add(time.Second),
		}
		got, err := recordAttempt(ctx, db, rec)
		if err != nil {
			t.Fatal(err)
		}
		want := d
		want.Attempts = []engine.Attempt{rec.Attempt}
		want.Updated = rec.At
		want.CycleAttempts = 1
		want.NextAttemptAt = rec.NextAttemptAt
		want.LastStatus, want.Reason = 503, "HTTP 503"
		if !reflect.DeepEqual(got, want) {
			t.Errorf("RecordAttempt = %+v\nwant %+v", got, want)
		}
		if read, _ := db.Delivery(ctx, "a", d.ID); !reflect.DeepEqual(read, want) {
			t.Errorf("Delivery = %+v\nwant %+v", read, want)
		}
		if due, ok := dueOf(t, db, d.ID); !ok || !due.Equal(rec.NextAttemptAt) {
			t.Errorf("retry index due = %v, %v; want %v", due, ok, rec.NextAttemptAt)
		}
		mustCheck(t, db)
	})
	t.Run("pending to succeeded", func(t *testing.T) {
		d := mustDelivery(t, db, "a")
		got, err := recordAttempt(ctx, db, engine.AttemptRecord{
			DeliveryID: d.ID, Cycle: 1, Attempt: attempt(1, 1, 200, engine.OutcomeSuccess),
			State: engine.StateSucceeded, Reason: "stale reason", LastStatus: 200, At: t0.Add(time.Second),
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != engine.StateSucceeded || !got.NextAttemptAt.IsZero() || got.Reason != "" ||
			got.LastStatus != 200 || got.CycleAttempts != 1 || len(got.Attempts) != 1 {
			t.Errorf("RecordAttempt = %+v", got)
		}
		if _, ok := dueOf(t, db, d.ID); ok {
			t.Error("succeeded delivery is in the retry index")
		}
		mustCheck(t, db)
	})
	t.Run("pending to dead", func(t *testing.T) {
		d := mustDelivery(t, db, "a")
		at := t0.Add(time.Minute)
		got, err := recordAttempt(ctx, db, engine.AttemptRecord{
			DeliveryID: d.ID, Cycle: 1, Attempt: attempt(1, 1, 410, engine.OutcomePermanent),
			State: engine.StateDead, Reason: "HTTP 410", LastStatus: 410, At: at,
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != engine.StateDead || !got.DeadAt.Equal(at) || !got.NextAttemptAt.IsZero() || got.Reason != "HTTP 410" {
			t.Errorf("RecordAttempt = %+v", got)
		}
		if _, ok := dueOf(t, db, d.ID); ok {
			t.Error("dead delivery is in the retry index")
		}
		if !isDeadLetter(t, db, "a", d.ID) {
			t.Error("dead delivery is not in the dead letters")
		}
		mustCheck(t, db)
	})
	t.Run("stale cycle is only logged", func(t *testing.T) {
		d := mustDelivery(t, db, "a")
		replayAt := t0.Add(time.Hour)
		replayed, err := replay(ctx, db, "a", d.ID, engine.Replay{At: replayAt, By: "admin"})
		if err != nil {
			t.Fatal(err)
		}
		rec := engine.AttemptRecord{
			DeliveryID: d.ID, Cycle: 1, Attempt: attempt(1, 1, 500, engine.OutcomeRetry),
			State: engine.StateDead, Reason: "too late", LastStatus: 500, At: replayAt.Add(time.Second),
		}
		got, err := recordAttempt(ctx, db, rec)
		if err != nil {
			t.Fatal(err)
		}
		want := replayed
		want.Attempts = []engine.Attempt{rec.Attempt}
		want.Updated = rec.At
		if !reflect.DeepEqual(got, want) {
			t.Errorf("RecordAttempt = %+v\nwant %+v", got, want)
		}
		if due, ok := dueOf(t, db, d.ID); !ok || !due.Equal(replayAt) {
			t.Errorf("retry index due = %v, %v; want %v", due, ok, replayAt)
		}
		if isDeadLetter(t, db, "a", d.ID) {
			t.Error("stale attempt dead-lettered the delivery")
		}
		mustCheck(t, db)
	})
	t.Run("final state is only logged", func(t *testing.T) {
		d := mustDelivery(t, db, "a")
		ok := engine.AttemptRecord{DeliveryID: d.ID, Cycle: 1, State: engine.StateSucceeded, LastStatus: 200, At: t0}
		if _, err := recordAttempt(ctx, db, ok); err != nil {
			t.Fatal(err)
		}
		late := engine.AttemptRecord{
			DeliveryID: d.ID, Cycle: 1, State: engine.StatePending, NextAttemptAt: t0.Add(time.Hour),
			LastStatus: 500, At: t0.Add(time.Second),
		}
		got, err := recordAttempt(ctx, db, late)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != engine.StateSucceeded || got.LastStatus != 200 || len(got.Attempts) != 2 || got.CycleAttempts != 1 {
			t.Errorf("RecordAttempt = %+v", got)
		}
		mustCheck(t, db)
	})
	t.Run("not found", func(t *testing.T) {
		_, err := recordAttempt(ctx, db, engine.AttemptRecord{DeliveryID: "dlv_nope", Cycle: 1, State: engine.StateSucceeded})
		wantCode(t, err, engine.CodeDeliveryNotFound, "id")
	})
}

// TestDB_UpdateDelivery_refusesStatesItCannotStore: a transition's result
// that breaks the store's invariant is refused and changes nothing.
func TestDB_UpdateDelivery_refusesStatesItCannotStore(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	d := mustDelivery(t, db, "a")
	for _, bad := range []func(*engine.Delivery){
		func(d *engine.Delivery) { d.State = engine.StateDelivering },
		func(d *engine.Delivery) { d.NextAttemptAt = time.Time{} }, // pending, due never
		func(d *engine.Delivery) { d.TenantID = "b" },
	} {
		_, err := db.UpdateDelivery(ctx, d.ID, func(d engine.Delivery) (engine.Delivery, error) {
			bad(&d)
			return d, nil
		})
		if err == nil {
			t.Error("UpdateDelivery stored a delivery its invariant forbids")
		}
	}
	if got, err := db.Delivery(ctx, "a", d.ID); err != nil || !reflect.DeepEqual(got, d) {
		t.Errorf("after the refusals: %+v, %v; want it unchanged", got, err)
	}
	mustCheck(t, db)
}

func TestDB_Replay(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustTenant(t, db, "b")
	at := t0.Add(2 * time.Hour)

	t.Run("dead", func(t *testing.T) {
		d := mustDelivery(t, db, "a")
		dead, err := recordAttempt(ctx, db, engine.AttemptRecord{
			DeliveryID: d.ID, Cycle: 1, Attempt: attempt(1, 1, 404, engine.OutcomePermanent),
			State: engine.StateDead, Reason: "HTTP 404", LastStatus: 404, At: t0.Add(time.Minute),
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := replay(ctx, db, "a", d.ID, engine.Replay{At: at, By: "admin", Cycle: 99})
		if err != nil {
			t.Fatal(err)
		}
		want := dead
		want.Cycle = 2
		want.State = engine.StatePending
		want.CycleStart, want.NextAttemptAt, want.Updated = at, at, at
		want.CycleAttempts = 0
		want.DeadAt = time.Time{}
		want.Replays = []engine.Replay{{At: at, By: "admin", Cycle: 2}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Replay = %+v\nwant %+v", got, want)
		}
		if isDeadLetter(t, db, "a", d.ID) {
			t.Error("replayed delivery is still a dead letter")
		}
		if due, ok := dueOf(t, db, d.ID); !ok || !due.Equal(at) {
			t.Errorf("retry index due = %v, %v; want %v", due, ok, at)
		}
		mustCheck(t, db)
	})
	t.Run("pending", func(t *testing.T) {
		d := mustDelivery(t, db, "a")
		got, err := replay(ctx, db, "a", d.ID, engine.Replay{At: at, By: "tok"})
		if err != nil {
			t.Fatal(err)
		}
		if got.Cycle != 2 || !got.NextAttemptAt.Equal(at) {
			t.Errorf("Replay = %+v", got)
		}
		if due, ok := dueOf(t, db, d.ID); !ok || !due.Equal(at) {
			t.Errorf("retry index due = %v, %v; want %v", due, ok, at)
		}
		mustCheck(t, db)
	})
	t.Run("succeeded, twice", func(t *testing.T) {
		d := mustDelivery(t, db, "a")
		if _, err := recordAttempt(ctx, db, engine.AttemptRecord{DeliveryID: d.ID, Cycle: 1, State: engine.StateSucceeded, At: t0}); err != nil {
			t.Fatal(err)
		}
		if _, err := replay(ctx, db, "a", d.ID, engine.Replay{At: at, By: "admin"}); err != nil {
			t.Fatal(err)
		}
		got, err := replay(ctx, db, "a", d.ID, engine.Replay{At: at.Add(time.Second), By: "admin"})
		if err != nil {
			t.Fatal(err)
		}
		if got.Cycle != 3 || len(got.Replays) != 2 || got.Replays[1].Cycle != 3 {
			t.Errorf("Replay = %+v", got)
		}
		mustCheck(t, db)
	})
	t.Run("other tenant", func(t *testing.T) {
		d := mustDelivery(t, db, "a")
		_, err := replay(ctx, db, "b", d.ID, engine.Replay{At: at})
		wantCode(t, err, engine.CodeDeliveryNotFound, "id")
		_, err = replay(ctx, db, "a", "dlv_nope", engine.Replay{At: at})
		wantCode(t, err, engine.CodeDeliveryNotFound, "id")
	})
}

func TestDB_DeadLetters(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustTenant(t, db, "b")

	// Five dead letters of a, killed out of creation order; one of b.
	kill := func(d engine.Delivery, at time.Time) {
		t.Helper()
		if _, err := recordAttempt(ctx, db, engine.AttemptRecord{DeliveryID: d.ID, Cycle: d.Cycle, State: engine.StateDead, Reason: "x", At: at}); err != nil {
			t.Fatal(err)
		}
	}
	var byDeath [5]string
	for _, minute := range []int{3, 1, 4, 0, 2} {
		d := mustDelivery(t, db, "a")
		kill(d, t0.Add(time.Duration(minute)*time.Minute))
		byDeath[minute] = d.ID
	}
	kill(mustDelivery(t, db, "b"), t0)
	mustDelivery(t, db, "a") // pending: not a dead letter

	pages := func(limit int) ([][]string, []string) {
		t.Helper()
		var got [][]string
		var cursors []string
		cursor := ""
		for range 10 {
			ds, next, err := db.DeadLetters(ctx, "a", cursor, limit)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, d := range ds {
				ids = append(ids, d.ID)
			}
			got = append(got, ids)
			cursors = append(cursors, next)
			if next == "" {
				break
			}
			cursor = next
		}
		return got, cursors
	}
	tests := []struct {
		limit int
		want  [][]string
	}{
		{2, [][]string{byDeath[0:2], byDeath[2:4], byDeath[4:5]}},
		{5, [][]string{byDeath[0:5]}},
		{4, [][]string{byDeath[0:4], byDeath[4:5]}},
		{100, [][]string{byDeath[0:5]}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("limit %d", tt.limit), func(t *testing.T) {
			got, cursors := pages(tt.limit)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("pages = %v\nwant %v (cursors %q)", got, tt.want, cursors)
			}
		})
	}

	t.Run("replay between pages", func(t *testing.T) {
		page, next, err := db.DeadLetters(ctx, "a", "", 2)
		if err != nil {
			t.Fatal(err)
		}
		// Replay the last of the page (the cursor's own entry goes) and
		// the first of the next page.
		for _, id := range []string{page[1].ID, byDeath[2]} {
			if _, err := replay(ctx, db, "a", id, engine.Replay{At: t0.Add(time.Hour), By: "admin"}); err != nil {
				t.Fatal(err)
			}
		}
		rest, end, err := db.DeadLetters(ctx, "a", next, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range rest {
			got = append(got, d.ID)
		}
		if want := byDeath[3:5]; !reflect.DeepEqual(got, want) || end != "" {
			t.Errorf("next page = %v, %q; want %v, \"\"", got, end, want)
		}
	})
	t.Run("other tenant", func(t *testing.T) {
		ds, _, err := db.DeadLetters(ctx, "b", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 1 || ds[0].TenantID != "b" {
			t.Errorf("b's dead letters = %+v", ds)
		}
		ds, next, err := db.DeadLetters(ctx, "nobody", "", 10)
		if err != nil || len(ds) != 0 || ds == nil || next != "" {
			t.Errorf("DeadLetters(nobody) = %#v, %q, %v; want empty", ds, next, err)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		_, _, err := db.DeadLetters(ctx, "a", "!!", 10)
		wantCode(t, err, engine.CodeInvalidField, "cursor")
		_, _, err = db.DeadLetters(ctx, "a", encodeCursor([]byte{1, 2}), 10)
		wantCode(t, err, engine.CodeInvalidField, "cursor")
		_, _, err = db.DeadLetters(ctx, "a", "", 0)
		wantCode(t, err, engine.CodeInvalidField, "limit")
	})
}

func TestDB_RetryIndex(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")

	var want []engine.RetryEntry
	for _, minutes := range []int{3, 1, 2, 1} {
		d := mustDelivery(t, db, "a")
		due := t0.Add(time.Duration(minutes) * time.Minute)
		if _, err := recordAttempt(ctx, db, engine.AttemptRecord{DeliveryID: d.ID, Cycle: 1, State: engine.StatePending, NextAttemptAt: due, At: t0}); err != nil {
			t.Fatal(err)
		}
		want = append(want, engine.RetryEntry{Due: due, DeliveryID: d.ID, EndpointID: d.EndpointID, TenantID: "a"})
	}
	done := mustDelivery(t, db, "a")
	if _, err := recordAttempt(ctx, db, engine.AttemptRecord{DeliveryID: done.ID, Cycle: 1, State: engine.StateSucceeded, At: t0}); err != nil {
		t.Fatal(err)
	}
	// Due order, then delivery ID order.
	slices.SortFunc(want, func(a, b engine.RetryEntry) int {
		if c := a.Due.Compare(b.Due); c != 0 {
			return c
		}
		return strings.Compare(a.DeliveryID, b.DeliveryID)
	})

	if got := retryEntries(t, db); !reflect.DeepEqual(got, want) {
		t.Errorf("RetryIndex =\n%+v\nwant\n%+v", got, want)
	}

	t.Run("fn error stops the walk", func(t *testing.T) {
		stop := errors.New("stop")
		n := 0
		err := db.RetryIndex(ctx, func(engine.RetryEntry) error {
			n++
			return stop
		})
		if err != stop || n != 1 {
			t.Errorf("RetryIndex = %v after %d calls, want the fn's error after 1", err, n)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := db.RetryIndex(cctx, func(engine.RetryEntry) error { return nil }); !errors.Is(err, context.Canceled) {
			t.Errorf("RetryIndex = %v, want context.Canceled", err)
		}
	})
}

func TestDB_AttemptInput(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	d := mustDelivery(t, db, "a")

	got, err := db.AttemptInput(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	ep, _ := db.Endpoint(ctx, "a", d.EndpointID)
	want := engine.AttemptInput{Delivery: d, Body: []byte(`{"n":1}`), Endpoint: ep, EndpointFound: true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("AttemptInput = %+v\nwant %+v", got, want)
	}
	_, err = db.AttemptInput(ctx, "dlv_nope")
	wantCode(t, err, engine.CodeDeliveryNotFound, "id")
}

// TestDB_AttemptInput_endpointCache checks that the decoded endpoints
// AttemptInput keeps are never stale and never shared with a caller.
func TestDB_AttemptInput_endpointCache(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	d := mustDelivery(t, db, "a")

	if _, err := db.AttemptInput(ctx, d.ID); err != nil { // decoded and cached
		t.Fatal(err)
	}
	first, err := db.AttemptInput(ctx, d.ID) // from the cache
	if err != nil {
		t.Fatal(err)
	}
	want := first.Endpoint
	want.EventTypes = slices.Clone(want.EventTypes)
	want.Secrets = slices.Clone(want.Secrets)
	first.Endpoint.EventTypes[0] = "changed.by_caller"
	first.Endpoint.Secrets[0].Key = "whsec_changed"
	again, err := db.AttemptInput(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Endpoint, want) {
		t.Errorf("second read = %+v\nwant %+v (a caller's change leaked into the cache)", again.Endpoint, want)
	}

	updated, err := db.UpdateEndpoint(ctx, "a", d.EndpointID, func(ep *engine.Endpoint) error {
		ep.URL = "https://example.com/moved"
		ep.Secrets = append([]engine.Secret{{Key: "whsec_bmV3bmV3bmV3bmV3bmV3bmV3bmV3bmV3bmV3"}}, ep.Secrets...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	after, err := db.AttemptInput(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after.Endpoint, updated) {
		t.Errorf("after an update = %+v\nwant %+v", after.Endpoint, updated)
	}
}

// TestDB_AttemptInput_bodyCache: every attempt gets its event's stored
// body byte for byte, from the cache after the first, and the cache keeps
// to its bounds, oldest out first.
func TestDB_AttemptInput_bodyCache(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	d := mustDelivery(t, db, "a")
	ev, _, err := db.Event(ctx, "a", d.EventID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.AttemptInput(ctx, d.ID); err != nil { // read from the log, cached
		t.Fatal(err)
	}
	if _, _, ok := db.attemptBodies.get(d.EventID); !ok {
		t.Fatal("the body read by an attempt is not cached")
	}
	for range 2 {
		in, err := db.AttemptInput(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(in.Body, ev.Body) {
			t.Fatalf("attempt body = %q, want the stored %q", in.Body, ev.Body)
		}
	}

	var c bodyCache
	body := bytes.Repeat([]byte("x"), maxCachedBodyBytes/64)
	n := maxCachedBodyBytes / len(body)
	for i := range n + 3 {
		c.put(fmt.Sprint("evt_", i), bytes.Clone(body), "")
	}
	if c.bytes > maxCachedBodyBytes || len(c.m) != n {
		t.Errorf("cache holds %d bodies, %d bytes; want %d, at most %d", len(c.m), c.bytes, n, maxCachedBodyBytes)
	}
	for i, want := range map[int]bool{0: false, 2: false, 3: true, n + 2: true} {
		if _, _, ok := c.get(fmt.Sprint("evt_", i)); ok != want {
			t.Errorf("evt_%d cached = %v, want %v (oldest out first)", i, ok, want)
		}
	}
	c.put("evt_big", make([]byte, maxCachedBodyBytes/64+1), "")
	if _, _, ok := c.get("evt_big"); ok {
		t.Error("a body over the per-entry limit was cached")
	}
	var small bodyCache
	for i := range maxCachedBodies + 10 {
		small.put(fmt.Sprint("evt_", i), []byte("{}"), "")
	}
	if len(small.m) != maxCachedBodies || len(small.order)-small.head != maxCachedBodies {
		t.Errorf("cache of small bodies holds %d (order %d), want %d", len(small.m), len(small.order)-small.head, maxCachedBodies)
	}
}
