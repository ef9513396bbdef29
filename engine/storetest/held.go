package storetest

import (
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// heldTests hold a store to Log.Held: the deliveries that are not final
// and that no scheduler has (waiting behind their line's head, paused,
// dead and blocking their line) are counted per tenant and in all, as
// every transition, ingest and purge moves them, exactly.
var heldTests = []test{
	{"a line's waiting deliveries and its blocking head are held until the line moves", testHeldLine},
	{"a replay behind the head waits and is held again", testHeldReplay},
	{"deliveries for a disabled endpoint are held until it is enabled", testHeldPaused},
	{"each tenant has its own count; all is every tenant's", testHeldTenants},
	{"a deleted tenant's held deliveries leave the counts", testHeldTenantDeleted},
}

// deleteTenant deletes tenant id at at and finishes its purge (Harness.
// Purge), then checks the store.
func (f *fixture) deleteTenant(t *testing.T, id string, at time.Time) {
	t.Helper()
	if err := f.s.DeleteTenant(t.Context(), id, at); err != nil {
		t.Fatal(err)
	}
	if f.h.Purge != nil {
		if err := f.h.Purge(t.Context(), f.s); err != nil {
			t.Fatal(err)
		}
	}
	f.check(t)
}

// wantHeld fails t unless Held(tenant) counts want for tenant and all in
// every tenant.
func (f *fixture) wantHeld(t *testing.T, tenant string, want, all engine.Held) {
	t.Helper()
	got, gotAll, err := f.s.Held(t.Context(), tenant)
	if err != nil {
		t.Fatalf("Held(%q): %v", tenant, err)
	}
	if got != want || gotAll != all {
		t.Errorf("Held(%q) = %+v, all %+v; want %+v, all %+v", tenant, got, gotAll, want, all)
	}
}

func testHeldLine(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.wantHeld(t, "acme", engine.Held{}, engine.Held{})
	ep, typ := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadBlock)
	ds := f.line(t, ep, typ, 3)
	f.wantHeld(t, "acme", engine.Held{Waiting: 2}, engine.Held{Waiting: 2})

	at := t0.Add(time.Hour)
	f.settle(t, ds[0], engine.StatePending, at, at.Add(time.Minute)) // a retry: nothing moves
	f.wantHeld(t, "acme", engine.Held{Waiting: 2}, engine.Held{Waiting: 2})
	f.settle(t, f.read(t, ds[0]), engine.StateDead, at.Add(time.Minute), time.Time{})
	f.wantHeld(t, "acme", engine.Held{Waiting: 2, Blocking: 1}, engine.Held{Waiting: 2, Blocking: 1})

	if _, err := f.s.UpdateDelivery(t.Context(), ds[0].ID, func(d engine.Delivery) (engine.Delivery, error) {
		return engine.SkipDelivery(d, engine.Skip{At: at.Add(2 * time.Minute), By: "admin"})
	}); err != nil {
		t.Fatalf("skip: %v", err)
	}
	f.wantHeld(t, "acme", engine.Held{Waiting: 1}, engine.Held{Waiting: 1}) // ds[1] heads, pending
	f.settle(t, f.read(t, ds[1]), engine.StateSucceeded, at.Add(3*time.Minute), time.Time{})
	f.wantHeld(t, "acme", engine.Held{}, engine.Held{})
	f.settle(t, f.read(t, ds[2]), engine.StateSucceeded, at.Add(4*time.Minute), time.Time{})
	f.wantHeld(t, "acme", engine.Held{}, engine.Held{})
}

func testHeldReplay(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadSkip)
	ds := f.line(t, ep, typ, 2)
	at := t0.Add(time.Hour)
	f.settle(t, ds[0], engine.StateSucceeded, at, time.Time{}) // ds[1] heads
	f.wantHeld(t, "acme", engine.Held{}, engine.Held{})
	if _, err := f.replay(t, "acme", ds[0].ID, engine.Replay{At: at.Add(time.Minute), By: "admin"}); err != nil {
		t.Fatal(err)
	}
	f.wantHeld(t, "acme", engine.Held{Waiting: 1}, engine.Held{Waiting: 1})
	f.settle(t, f.read(t, ds[1]), engine.StateDead, at.Add(2*time.Minute), time.Time{}) // on_dead skip: final
	f.wantHeld(t, "acme", engine.Held{}, engine.Held{})
}

func testHeldPaused(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	ep, typ := f.lane(t, "acme")
	at := t0.Add(time.Hour)
	ep = f.setEnabled(t, ep, false, at)
	f.deliver(t, ep, typ) // paused at ingest
	f.deliver(t, ep, typ)
	f.wantHeld(t, "acme", engine.Held{Paused: 2}, engine.Held{Paused: 2})

	f.setEnabled(t, ep, true, at.Add(time.Minute))
	f.resume(t, ep, true, engine.Replay{At: at.Add(time.Minute), By: "admin"}, 1)
	f.wantHeld(t, "acme", engine.Held{}, engine.Held{}) // pending again: the scheduler's
}

func testHeldTenants(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	ep, typ := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadBlock)
	f.line(t, ep, typ, 3)
	gep, gtyp := f.lane(t, "globex")
	gep = f.setEnabled(t, gep, false, t0)
	f.deliver(t, gep, gtyp)
	all := engine.Held{Waiting: 2, Paused: 1}
	f.wantHeld(t, "acme", engine.Held{Waiting: 2}, all)
	f.wantHeld(t, "globex", engine.Held{Paused: 1}, all)
	f.wantHeld(t, "initech", engine.Held{}, all) // no such tenant
	f.wantHeld(t, "", engine.Held{}, all)
}

func testHeldTenantDeleted(t *testing.T, f *fixture) {
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	ep, typ := f.orderedLane(t, "acme", engine.OrderingEndpoint, engine.OnDeadBlock)
	ds := f.line(t, ep, typ, 3)
	f.settle(t, ds[0], engine.StateDead, t0.Add(time.Hour), time.Time{}) // blocking
	gep, gtyp := f.orderedLane(t, "globex", engine.OrderingEndpoint, engine.OnDeadBlock)
	f.line(t, gep, gtyp, 2)
	f.deleteTenant(t, "acme", t0.Add(2*time.Hour))
	f.wantHeld(t, "acme", engine.Held{}, engine.Held{Waiting: 1})
	f.wantHeld(t, "globex", engine.Held{Waiting: 1}, engine.Held{Waiting: 1})
}
