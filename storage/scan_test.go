package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

func TestDB_ForEachEvent(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "a")
	mustTenant(t, db, "b")
	mustEventType(t, db, "order.created")
	mustEventType(t, db, "order.paid")
	mustEndpoint(t, db, "a", "*")
	mustEndpoint(t, db, "a", "order.paid")
	mustEndpoint(t, db, "b", "order.created")

	type want struct {
		id         string
		body       []byte
		deliveries []string
	}
	var wants []want
	for i, in := range []engine.NewEvent{
		newEvent("a", "order.created", `{"n":0}`),
		newEvent("b", "order.created", `{"n":1}`),
		newEvent("a", "order.paid", `{"n":2}`),
		newEvent("b", "order.paid", `{"n":3}`), // no subscriber: no deliveries
	} {
		res := mustAppend(t, db, in)
		w := want{id: res.Event.ID, body: []byte(fmt.Sprintf(`{"n":%d}`, i))}
		for _, d := range res.Deliveries {
			w.deliveries = append(w.deliveries, d.ID)
		}
		wants = append(wants, w)
	}
	// A recorded attempt shows in the walk.
	rec := engine.AttemptRecord{
		DeliveryID: wants[0].deliveries[0], Cycle: 1,
		Attempt: engine.Attempt{Cycle: 1, Number: 1, Start: t0, Status: 200, Outcome: engine.OutcomeSuccess},
		State:   engine.StateSucceeded, LastStatus: 200, At: t0,
	}
	if _, err := recordAttempt(ctx, db, rec); err != nil {
		t.Fatal(err)
	}

	var bodies [][]byte
	i := 0
	err := db.ForEachEvent(ctx, func(ev engine.Event, ds []engine.Delivery) error {
		if i >= len(wants) {
			t.Fatalf("event %d (%s) beyond the %d appended", i, ev.ID, len(wants))
		}
		w := wants[i]
		if ev.ID != w.id || ev.Seq != uint64(i+1) || !bytes.Equal(ev.Body, w.body) {
			t.Errorf("event %d: %s seq %d body %s, want %s seq %d body %s", i, ev.ID, ev.Seq, ev.Body, w.id, i+1, w.body)
		}
		var got []string
		for _, d := range ds {
			got = append(got, d.ID)
			if d.EventID != ev.ID {
				t.Errorf("delivery %s of event %s names event %s", d.ID, ev.ID, d.EventID)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(w.deliveries) {
			t.Errorf("event %d: deliveries %v, want %v", i, got, w.deliveries)
		}
		if ds == nil {
			t.Errorf("event %d: nil deliveries, want an empty slice", i)
		}
		bodies = append(bodies, ev.Body)
		i++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if i != len(wants) {
		t.Fatalf("walked %d events, want %d", i, len(wants))
	}
	// The bodies were copied out of the transaction: still intact after it,
	// and after more writes reuse pages.
	for range 50 {
		mustAppend(t, db, newEvent("a", "order.created", `{"filler":true}`))
	}
	for i, b := range bodies {
		if !bytes.Equal(b, wants[i].body) {
			t.Errorf("body %d changed after the walk: %q", i, b)
		}
	}

	t.Run("state of a recorded attempt", func(t *testing.T) {
		err := db.ForEachEvent(ctx, func(ev engine.Event, ds []engine.Delivery) error {
			if ev.ID == wants[0].id {
				for _, d := range ds {
					if d.ID == rec.DeliveryID && (d.State != engine.StateSucceeded || len(d.Attempts) != 1) {
						t.Errorf("delivery %s: %s with %d attempts, want succeeded with 1", d.ID, d.State, len(d.Attempts))
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("fn error stops the walk", func(t *testing.T) {
		stop := errors.New("stop")
		n := 0
		err := db.ForEachEvent(ctx, func(engine.Event, []engine.Delivery) error {
			n++
			return stop
		})
		if err != stop || n != 1 {
			t.Errorf("err %v after %d calls, want stop after 1", err, n)
		}
	})
	t.Run("ended context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := db.ForEachEvent(cctx, func(engine.Event, []engine.Delivery) error { return nil })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
	})
	t.Run("empty database", func(t *testing.T) {
		empty := MustOpenDB(t)
		err := empty.ForEachEvent(ctx, func(engine.Event, []engine.Delivery) error {
			t.Error("fn called on an empty log")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
