package storage

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

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

// TestDB_PruneEvents_gaps: retention keeps an event with a pending
// delivery and one with a dead letter still inside retention, and
// deletes the finished events between and after them, so the tenant's
// Sequences have gaps. The file is sound: Check passes, and so do a
// compacted copy and a hot backup (WriteTo), which are checked before
// they are put in place.
func TestDB_PruneEvents_gaps(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "webhookd.db")
	db := mustOpenDBAt(t, path)
	mustTenant(t, db, "acme")
	finish := func(d engine.Delivery, state engine.State, at time.Time) {
		t.Helper()
		outcome := engine.OutcomeSuccess
		if state == engine.StateDead {
			outcome = engine.OutcomePermanent
		}
		if _, err := recordAttempt(ctx, db, engine.AttemptRecord{
			DeliveryID: d.ID, Cycle: d.Cycle, State: state, At: at, Reason: "x",
			Attempt: engine.Attempt{Cycle: d.Cycle, Number: 1, Start: at, Outcome: outcome},
		}); err != nil {
			t.Fatal(err)
		}
	}
	old, recent := t0.Add(time.Hour), t0.Add(48*time.Hour)
	kept := []engine.Delivery{mustDelivery(t, db, "acme")} // Sequence 1: pending
	finish(mustDelivery(t, db, "acme"), engine.StateSucceeded, old)
	dead := mustDelivery(t, db, "acme") // Sequence 3: its dead letter inside retention
	finish(dead, engine.StateDead, recent)
	kept = append(kept, dead)
	finish(mustDelivery(t, db, "acme"), engine.StateSucceeded, old)

	res, err := db.PruneEvents(ctx, 0, engine.Retention{SucceededBefore: t0.Add(24 * time.Hour), DeadBefore: t0.Add(24 * time.Hour)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != 2 {
		t.Fatalf("pruned %d events, want 2", res.Events)
	}
	for _, d := range kept {
		if _, err := db.Delivery(ctx, "acme", d.ID); err != nil {
			t.Fatalf("delivery %s kept by retention: %v", d.ID, err)
		}
	}
	if err := db.Check(); err != nil {
		t.Errorf("Check of the pruned file: %v", err)
	}

	t.Run("hot backup", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "backup.db")
		r, err := NewReplacement(out, ".partial")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, err := db.WriteTo(r); err != nil {
			t.Fatal(err)
		}
		if err := r.Commit(); err != nil {
			t.Errorf("backup of the pruned file: %v", err)
		}
	})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	t.Run("compaction", func(t *testing.T) {
		if _, err := CompactTo(filepath.Join(t.TempDir(), "compact.db"), path, time.Second); err != nil {
			t.Errorf("compaction of the pruned file: %v", err)
		}
	})
}

// TestDB_Check_sequences: a gap is sound, but a tenant's Sequence that
// does not rise in log order, or rises above the tenant's last, is not.
func TestDB_Check_sequences(t *testing.T) {
	db := MustOpenDB(t)
	mustTenant(t, db, "acme")
	first, second := mustDelivery(t, db, "acme"), mustDelivery(t, db, "acme")
	mustCheck(t, db)
	setSequence := func(d engine.Delivery, sequence uint64) {
		t.Helper()
		seq := mustSeq(t, db, d.EventID)
		err := db.update(context.Background(), func(tx *bolt.Tx) error {
			ev, err := decodeEvent(tx.Bucket(bucketEvents).Get(u64(seq)))
			if err != nil {
				return err
			}
			ev.Sequence = sequence
			v, err := encodeEvent(ev)
			if err != nil {
				return err
			}
			return tx.Bucket(bucketEvents).Put(u64(seq), v)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		sequence uint64
		want     string // "": sound
	}{
		{1, "Sequence 1 after 1, not above it"},
		{0, ""}, // stored before Sequences: not numbered
		{2, ""},
		{3, "Sequence 3 above the tenant's last, 2"},
	} {
		setSequence(second, tc.sequence)
		err := db.Check()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("second event's Sequence %d: Check = %v, want %q", tc.sequence, err, tc.want)
		}
	}
	setSequence(first, 0) // the first unnumbered, the second 2: a gap from nothing
	setSequence(second, 2)
	mustCheck(t, db)
}
