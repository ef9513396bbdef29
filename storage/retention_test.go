package storage

import (
	"context"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

func TestDB_PruneEvents(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	mustTenant(t, db, "acme")

	finish := func(d engine.Delivery, state engine.State, at time.Time) {
		t.Helper()
		_, err := recordAttempt(ctx, db, engine.AttemptRecord{
			DeliveryID: d.ID, Cycle: d.Cycle, State: state, At: at, Reason: "x",
			Attempt: engine.Attempt{Cycle: d.Cycle, Number: 1, Start: at, Outcome: engine.OutcomeSuccess},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	old := t0.Add(time.Hour)
	recent := t0.Add(48 * time.Hour)
	succeededOld := mustDelivery(t, db, "acme")
	finish(succeededOld, engine.StateSucceeded, old)
	deadOld := mustDelivery(t, db, "acme")
	finish(deadOld, engine.StateDead, old)
	pending := mustDelivery(t, db, "acme")
	succeededRecent := mustDelivery(t, db, "acme")
	finish(succeededRecent, engine.StateSucceeded, recent)

	r := engine.Retention{SucceededBefore: t0.Add(24 * time.Hour), DeadBefore: t0.Add(2 * time.Hour)}
	var total engine.PruneResult
	cursor := uint64(0)
	for calls := 0; ; calls++ {
		res, err := db.PruneEvents(ctx, cursor, r, 1) // one event per call: the cursor must carry on
		if err != nil {
			t.Fatal(err)
		}
		total.Events += res.Events
		total.Deliveries += res.Deliveries
		if res.Next == 0 {
			break
		}
		if calls > 10 {
			t.Fatal("PruneEvents does not move on")
		}
		cursor = res.Next
	}
	if total.Events != 2 || total.Deliveries != 2 {
		t.Errorf("pruned %d events, %d deliveries; want 2 and 2", total.Events, total.Deliveries)
	}
	for _, d := range []engine.Delivery{succeededOld, deadOld} {
		if _, err := db.Delivery(ctx, "acme", d.ID); engine.ErrorCode(err) != engine.CodeDeliveryNotFound {
			t.Errorf("delivery %s still there: %v", d.ID, err)
		}
		if _, _, err := db.Event(ctx, "acme", d.EventID); engine.ErrorCode(err) != engine.CodeEventNotFound {
			t.Errorf("event %s still there: %v", d.EventID, err)
		}
	}
	for _, d := range []engine.Delivery{pending, succeededRecent} {
		if _, err := db.Delivery(ctx, "acme", d.ID); err != nil {
			t.Errorf("delivery %s inside retention was pruned: %v", d.ID, err)
		}
	}
	if dl, _, err := db.DeadLetters(ctx, "acme", "", 10); err != nil || len(dl) != 0 {
		t.Errorf("dead letters %v %v, want none left", dl, err)
	}
	mustCheck(t, db)
}
