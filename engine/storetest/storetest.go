// Package storetest is the conformance suite of engine.Backend (the
// engine.Store and what a process asks of its database beside it): every
// behaviour of the contract, one subtest each, in domain words. It is the
// specification a store is written to: a store implementation runs it
// from a test of its own package,
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			Open: func(t *testing.T) engine.Backend { return memstore.New() },
//		})
//	}
//
// and every method of every interface engine.Backend is made of (Log,
// Records, Listings, Maintenance and its own) is called by some subtest.
//
// Every write the suite makes goes through the engine's transitions the
// way the dispatcher and the service make it (NewDeliveries at ingest,
// an attempt's outcome with its health through RecordOutcome,
// RecordAttempt, PauseDelivery, HoldDelivery, ReplayDelivery and
// DropHeldDelivery through UpdateDelivery and UpdateDeliveries,
// MergeHealth through UpdateEndpoint), so what it asserts is what the
// engine relies on, and nothing a store happens to do besides. Times go
// in in UTC with nanoseconds and must come back equal (reflect.DeepEqual),
// and lists that are empty must be empty, not nil (the API shows [] for
// them).
//
// The Maintenance group prunes and purges as the janitor does and checks
// the store after every call.
//
// Each subtest opens a store of its own and runs in parallel with the
// others. Nothing in it waits for time to pass: concurrency is bounded
// in count, and every time is the suite's clock (t0 and after).
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// Harness is the store under test.
type Harness struct {
	// Open returns a new, empty store for one subtest. It registers with
	// t.Cleanup whatever closing the store needs (Close, which the suite
	// may have called already).
	Open func(t *testing.T) engine.Backend

	// Check, when set, verifies a store's own consistency (the bbolt
	// store's DB.Check). The suite calls it after each subtest, and
	// within some after each step, failing the test on what it reports.
	// Nil: the store keeps nothing beside what the Store shows (memstore,
	// which keeps no index); the Maintenance group still reads every
	// store through the Store after each step and holds what it shows
	// to the contract.
	Check func(t *testing.T, s engine.Store)

	// Purge, when set, finishes what DeleteTenant leaves for later: after
	// it returns nil, no deleted tenant's data is left and every deleted
	// tenant's id is free again. Nil: DeleteTenant purges before it
	// returns, so an id is free again at once.
	Purge func(ctx context.Context, s engine.Store) error

	// Reopen, when set, closes s as a crash would leave it (what is
	// committed stays, nothing else runs) and opens the same store
	// again, for the recovery cases. Nil: a store that cannot outlive
	// its process (memstore); those cases are skipped.
	Reopen func(t *testing.T, s engine.Backend) engine.Backend

	// Scheduler, when set, returns a new scheduler over s: one process's
	// (see SchedulerTests). Nil: engine.NewLocalScheduler(s).
	Scheduler func(s engine.Store) engine.Scheduler
	// EndLeases, when set, ends every lease sched holds, as the time
	// passing (or its process dying) would. Nil: a scheduler's leases end
	// when it is dropped, as LocalScheduler's end with their process.
	EndLeases func(sched engine.Scheduler)
}

// Run runs the whole suite against h.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	groups := []struct {
		name  string
		tests []test
	}{
		{"Records", recordTests},
		{"EventTypeChecks", schemaTests},
		{"AccessTokens", tokenTests},
		{"Tasks", taskTests},
		{"Ingest", ingestTests},
		{"FanOut", fanOutTests},
		{"Deliveries", deliveryTests},
		{"Listings", listingTests},
		{"DeleteTenant", deleteTenantTests},
		{"RecordOutcome", outcomeTests},
		{"Scheduler", schedulerTests},
		{"Lines", lineTests},
		{"PreviousSequence", previousTests},
		{"TestEvents", testEventTests},
		{"Channels", channelTests},
		{"RetryPolicies", retryPolicyTests},
		{"Backfill", backfillTests},
		{"Scheduled", scheduledTests},
		{"Traces", traceTests},
		{"Maintenance", maintenanceTests},
		{"Held", heldTests},
		{"Operational", operationalTests},
		{"Backend", backendTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tt := range g.tests {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					f := &fixture{h: h, s: h.Open(t)}
					t.Cleanup(func() { f.check(t) })
					tt.run(t, f)
				})
			}
		})
	}
}

// test is one behaviour of the contract.
type test struct {
	name string
	run  func(t *testing.T, f *fixture)
}

// t0 is the suite's clock: every time is t0 plus something. It has
// nanoseconds and is in UTC, which is how a store must return it.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)

// fixture is one subtest's store with the helpers that write to it as
// the engine does.
type fixture struct {
	h      Harness
	s      engine.Backend
	closed bool // the subtest closed s: there is nothing left to check
}

// check runs the harness's Check, if any, unless the store is closed.
func (f *fixture) check(t *testing.T) {
	t.Helper()
	if f.h.Check != nil && !f.closed {
		f.h.Check(t, f.s)
	}
}
