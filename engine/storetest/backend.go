package storetest

import (
	"bytes"
	"encoding/hex"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// backendTests hold what a process asks of its database beside the Store
// (engine.Backend) to its contract.
var backendTests = []test{
	{"OldestDue is the pending delivery due first; none when none is pending", testOldestDue},
	{"a store that has committed is writable", testWritable},
	{"the key ID is the same at every call: empty or hex", testSecretKeyID},
	{"a hot backup, when there is one, is written whole", testBackup},
	{"Close is safe twice", testCloseTwice},
}

func testOldestDue(t *testing.T, f *fixture) {
	wantOldest := func(what string, want time.Time, wantOK bool) {
		t.Helper()
		due, ok, err := f.s.OldestDue(t.Context())
		if err != nil {
			t.Fatalf("OldestDue %s: %v", what, err)
		}
		if ok != wantOK || !due.Equal(want) || due.Location() != time.UTC {
			t.Errorf("OldestDue %s = %v, %v; want %v, %v (in UTC)", what, due, ok, want.UTC(), wantOK)
		}
	}
	wantOldest("of an empty store", time.Time{}, false)

	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	later := f.ingest(t, newEventAt("acme", typ, `{"n":1}`, t0.Add(2*time.Second))).Deliveries[0]
	first := f.ingest(t, newEventAt("acme", typ, `{"n":2}`, t0.Add(time.Second))).Deliveries[0]
	if later.EndpointID != ep.ID || first.EndpointID != ep.ID {
		t.Fatalf("deliveries to %s and %s, want %s", later.EndpointID, first.EndpointID, ep.ID)
	}
	wantOldest("with two pending", first.NextAttemptAt, true)

	f.settle(t, first, engine.StateSucceeded, t0.Add(3*time.Second), time.Time{})
	wantOldest("after the first succeeded", later.NextAttemptAt, true)

	later = f.settle(t, later, engine.StatePending, t0.Add(3*time.Second), t0.Add(time.Hour))
	wantOldest("after a retry an hour on", t0.Add(time.Hour), true)

	f.settle(t, later, engine.StateDead, t0.Add(4*time.Second), time.Time{})
	wantOldest("when none is pending", time.Time{}, false)
}

func testWritable(t *testing.T, f *fixture) {
	if err := f.s.Writable(t.Context(), 1<<20); err != nil {
		t.Fatalf("Writable of a new store: %v", err)
	}
	f.tenant(t, "acme")
	_, typ := f.lane(t, "acme")
	f.ingest(t, newEvent("acme", typ, `{"n":1}`))
	if err := f.s.Writable(t.Context(), 1<<20); err != nil {
		t.Errorf("Writable after an ingest: %v", err)
	}
}

func testSecretKeyID(t *testing.T, f *fixture) {
	id := f.s.SecretKeyID()
	if _, err := hex.DecodeString(id); err != nil {
		t.Errorf("SecretKeyID() = %q, want hex or empty", id)
	}
	f.tenant(t, "acme")
	f.endpoint(t, "acme", "*")
	if again := f.s.SecretKeyID(); again != id {
		t.Errorf("SecretKeyID() = %q, then %q", id, again)
	}
}

func testBackup(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	_, typ := f.lane(t, "acme")
	f.ingest(t, newEvent("acme", typ, `{"n":1}`))
	b := f.s.Backup()
	if b == nil {
		return // the database has its own, or nothing to copy
	}
	var buf bytes.Buffer
	n, err := b.WriteTo(&buf)
	if err != nil {
		t.Fatalf("Backup().WriteTo: %v", err)
	}
	if n == 0 || n != int64(buf.Len()) {
		t.Errorf("Backup().WriteTo wrote %d bytes and said %d", buf.Len(), n)
	}
}

func testCloseTwice(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.check(t)
	f.closed = true
	if err := f.s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := f.s.Close(); err != nil {
		t.Errorf("Close again: %v", err)
	}
}
