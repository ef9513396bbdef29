package boltinbox

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/verify"
)

// apply runs Receive for eventID and, inside it, Advance on object at
// version, writing the object's state only when Advance allows it. failAfter
// makes fn fail after Advance, so that everything rolls back.
func apply(tb testing.TB, in *Inbox, sender, eventID, object string, version int64, failAfter bool) (applied bool, err error) {
	tb.Helper()
	_, err = in.Receive(context.Background(), sender, eventID, []byte(eventID), func(tx verify.Tx) error {
		btx := tx.(*Tx)
		ok, err := btx.Advance(object, version)
		if err != nil {
			return err
		}
		applied = ok
		if ok {
			b, err := btx.Bolt().CreateBucketIfNotExists([]byte("state"))
			if err != nil {
				return err
			}
			if err := b.Put([]byte(sender+"/"+object), []byte(eventID)); err != nil {
				return err
			}
		}
		if failAfter {
			return errBoom
		}
		return nil
	})
	return applied, err
}

var errBoom = errors.New("boom")

func stateOf(tb testing.TB, in *Inbox, key string) string {
	tb.Helper()
	var v string
	in.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("state")); b != nil {
			v = string(b.Get([]byte(key)))
		}
		return nil
	})
	return v
}

func TestTx_Advance(t *testing.T) {
	in := MustOpenInbox(t)
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	in.Now = clock.Now
	ctx := context.Background()

	steps := []struct {
		name          string
		sender, event string
		object        string
		version       int64
		fail          bool
		wantApplied   bool
		wantErr       error
		wantState     string // of sender/object after the step
	}{
		{"first event of an object", "", "evt_1", "order:1", 10, false, true, nil, "evt_1"},
		{"newer", "", "evt_2", "order:1", 20, false, true, nil, "evt_2"},
		{"older arrives late", "", "evt_3", "order:1", 15, false, false, nil, "evt_2"},
		{"same version, other event", "", "evt_4", "order:1", 20, false, false, nil, "evt_2"},
		{"newer, but fn fails: rolled back", "", "evt_5", "order:1", 30, true, true, errBoom, "evt_2"},
		{"after the rollback, 25 is newest", "", "evt_6", "order:1", 25, false, true, nil, "evt_6"},
		{"another object is independent", "", "evt_7", "order:2", 1, false, true, nil, "evt_7"},
		{"another sender is independent", "billing", "evt_8", "order:1", 1, false, true, nil, "evt_8"},
		{"negative versions order too", "", "evt_9", "order:3", -5, false, true, nil, "evt_9"},
		{"older negative", "", "evt_10", "order:3", -6, false, false, nil, "evt_9"},
	}
	for _, s := range steps {
		clock.Add(time.Second)
		applied, err := apply(t, in, s.sender, s.event, s.object, s.version, s.fail)
		if applied != s.wantApplied || !errors.Is(err, s.wantErr) {
			t.Errorf("%s: applied %v, err %v; want %v, %v", s.name, applied, err, s.wantApplied, s.wantErr)
		}
		if got := stateOf(t, in, s.sender+"/"+s.object); got != s.wantState {
			t.Errorf("%s: state %q, want %q", s.name, got, s.wantState)
		}
	}

	got, err := in.Conflicts(ctx, "", "order:1")
	if err != nil {
		t.Fatal(err)
	}
	base := time.Unix(1_700_000_000, 0)
	want := []Conflict{
		{Object: "order:1", EventID: "evt_3", Version: 15, CurrentEventID: "evt_2", CurrentVersion: 20, At: base.Add(3 * time.Second)},
		{Object: "order:1", EventID: "evt_4", Version: 20, CurrentEventID: "evt_2", CurrentVersion: 20, At: base.Add(4 * time.Second)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("conflicts of order:1\n got %+v\nwant %+v", got, want)
	}
	all, err := in.Conflicts(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[2].Object != "order:3" || all[2].EventID != "evt_10" {
		t.Errorf("all conflicts of sender \"\": %+v, want order:1's two and order:3's one", all)
	}
	if c, _ := in.Conflicts(ctx, "billing", ""); len(c) != 0 {
		t.Errorf("billing has conflicts %+v", c)
	}
	if c, _ := in.Conflicts(ctx, "", "order:"); len(c) != 0 {
		t.Errorf("object \"order:\" matched another object's conflicts: %+v", c)
	}
}

func TestTx_Advance_misuse(t *testing.T) {
	in := MustOpenInbox(t)
	ctx := context.Background()
	var kept *Tx
	_, err := in.Receive(ctx, "", "evt_1", nil, func(tx verify.Tx) error {
		kept = tx.(*Tx)
		if _, err := kept.Advance("", 1); !errors.Is(err, verify.ErrInvalidKey) {
			t.Errorf("empty object: %v, want verify.ErrInvalidKey", err)
		}
		if _, err := kept.Advance(string(make([]byte, verify.MaxKeyLen+1)), 1); !errors.Is(err, verify.ErrInvalidKey) {
			t.Errorf("long object: %v, want verify.ErrInvalidKey", err)
		}
		for i := range 2 {
			if ok, err := kept.Advance("order:1", 5); !ok || err != nil {
				t.Errorf("Advance #%d in one event: %v, %v; want true", i+1, ok, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kept.Advance("order:1", 9); err == nil {
		t.Error("Advance after fn returned: no error")
	}
	if c, err := in.Conflicts(ctx, "", ""); err != nil || len(c) != 0 {
		t.Errorf("conflicts %+v, %v; want none", c, err)
	}
}

func FuzzDecodeVersionRecord(f *testing.F) {
	f.Add(versionRecord{version: 42, updated: time.Unix(1_700_000_000, 5), eventID: "evt_1"}.encode())
	f.Add(versionRecord{version: -1}.encode())
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeVersionRecord(b)
		if err != nil {
			return
		}
		again, err := decodeVersionRecord(r.encode())
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, r)
		}
	})
}

func FuzzDecodeConflictRecord(f *testing.F) {
	f.Add(conflictRecord{at: time.Unix(1_700_000_000, 0), version: 1, currentVersion: 2, eventID: "evt_1", currentEventID: "evt_2"}.encode())
	f.Add(conflictRecord{}.encode())
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeConflictRecord(b)
		if err != nil {
			return
		}
		again, err := decodeConflictRecord(r.encode())
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, r)
		}
	})
}

func FuzzParseConflictKey(f *testing.F) {
	f.Add(append(verify.AppendEventKey(nil, "s", "order:1"), 0, 0, 0, 0, 0, 0, 0, 1))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, k []byte) {
		s, o, ok := parseConflictKey(k)
		if !ok {
			return
		}
		if got := verify.AppendEventKey(nil, s, o); string(got) != string(k[:len(k)-8]) {
			t.Fatalf("parse %x: %q, %q re-encode to %x", k, s, o, got)
		}
	})
}
