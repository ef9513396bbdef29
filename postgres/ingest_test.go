package postgres

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres/pgtest"
)

// TestAppendEvent_EndpointsChangedOnAnotherNode: a node makes an
// ingest's deliveries from the endpoints it read at an earlier ingest
// (appendCached) only while they are still the tenant's; every change
// another node makes (a new endpoint, one disabled, one deleted, the
// tenant deleted and made again under its ID) shows in
// this node's next ingest.
func TestAppendEvent_EndpointsChangedOnAnotherNode(t *testing.T) {
	clock := &manualClock{t: time.Now()}
	ss := nodes(t, 2, clock)
	a, b := ss[0], ss[1]
	ctx := t.Context()
	now := clock.now()
	ids := acme(t, a, now, 1)
	ingest := func(key string) engine.IngestResult {
		t.Helper()
		ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: now, APIVersion: "1", Body: []byte(`{}`)}
		res, err := a.AppendEvent(ctx, engine.NewEvent{Event: ev, IdempotencyKey: key, RequestHash: [32]byte{1}, IdempotencyExpires: now.Add(time.Hour)})
		if err != nil {
			t.Fatalf("AppendEvent: %v", err)
		}
		return res
	}
	want := func(what string, res engine.IngestResult, endpoints ...string) {
		t.Helper()
		var got []string
		for _, d := range res.Deliveries {
			s := d.EndpointID
			if d.State != engine.StatePending {
				s += " " + string(d.State)
			}
			got = append(got, s)
		}
		if len(got) != len(endpoints) {
			t.Fatalf("%s: deliveries to %v; want %v", what, got, endpoints)
		}
		for _, e := range endpoints {
			found := false
			for _, g := range got {
				found = found || g == e
			}
			if !found {
				t.Fatalf("%s: deliveries to %v; want %v", what, got, endpoints)
			}
		}
		stored, ds, err := b.Event(ctx, "acme", res.Event.ID)
		if err != nil || stored.Seq != res.Event.Seq || len(ds) != len(res.Deliveries) {
			t.Fatalf("%s: as stored, seq %d and %d deliveries, %v; want seq %d and %d", what, stored.Seq, len(ds), err, res.Event.Seq, len(res.Deliveries))
		}
	}
	want("first ingest", ingest(""), ids[0])
	before := a.cachedIngests.Load()
	want("second ingest", ingest(""), ids[0])
	if a.cachedIngests.Load() != before+1 {
		t.Fatal("the second ingest of a tenant did not take the one-round-trip path")
	}

	ep := engine.Endpoint{ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/two", EventTypes: []string{"order.created"}, Created: now, Updated: now, Secrets: []engine.Secret{{Key: engine.NewSecret()}}}
	if err := b.CreateEndpoint(ctx, ep, 0); err != nil {
		t.Fatal(err)
	}
	want("after another node added an endpoint", ingest(""), ids[0], ep.ID)
	want("and again", ingest(""), ids[0], ep.ID)
	if _, err := b.UpdateEndpoint(ctx, "acme", ids[0], func(e *engine.Endpoint) error { e.Disabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	want("after another node disabled one", ingest(""), ids[0]+" paused", ep.ID)
	if err := b.DeleteEndpoint(ctx, "acme", ep.ID); err != nil {
		t.Fatal(err)
	}
	want("after another node deleted one", ingest(""), ids[0]+" paused")

	first := ingest("key-1")
	again := ingest("key-1")
	if !again.Duplicate || again.Event.ID != first.Event.ID {
		t.Fatalf("the same Idempotency-Key again gave event %s (duplicate %v); want %s", again.Event.ID, again.Duplicate, first.Event.ID)
	}

	// Deleted, purged and made again.
	if err := b.DeleteTenant(ctx, "acme", now); err != nil {
		t.Fatal(err)
	}
	ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: now, APIVersion: "1", Body: []byte(`{}`)}
	if _, err := a.AppendEvent(ctx, engine.NewEvent{Event: ev}); engine.ErrorCode(err) != engine.CodeTenantNotFound {
		t.Fatalf("ingest for a deleted tenant: %v; want %s", err, engine.CodeTenantNotFound)
	}
	for {
		res, err := b.PurgeDeletedTenants(ctx, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.Tenant == "" || res.Done {
			break
		}
	}
	again2 := acme(t, b, now, 1)
	if err := b.DeleteEndpoint(ctx, "acme", again2[0]); err != nil {
		t.Fatal(err)
	}
	want("after the tenant was made again", ingest(""))
}

// TestAppendEvent_ConcurrentIngestsShareACommit: ingests at once on one
// node are written many to a transaction; when one of them cannot be
// (its Idempotency-Key is another's of the same group), the others are
// written all the same and it is answered as it would be alone (the
// first event of that key, as a duplicate).
func TestAppendEvent_ConcurrentIngestsShareACommit(t *testing.T) {
	clock := &manualClock{t: time.Now()}
	s := nodes(t, 1, clock)[0]
	ctx := t.Context()
	now := clock.now()
	acme(t, s, now, 2)
	ingest := func(key string) (engine.IngestResult, error) {
		ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: now, APIVersion: "1", Body: []byte(`{}`)}
		return s.AppendEvent(ctx, engine.NewEvent{Event: ev, IdempotencyKey: key, RequestHash: [32]byte{1}, IdempotencyExpires: now.Add(time.Hour)})
	}
	if _, err := ingest(""); err != nil { // the tenant's endpoints, read
		t.Fatal(err)
	}
	const perRound = 48
	for round := 0; round < 20 && s.groupSplits.Load() == 0; round++ {
		cachedBefore := s.cachedIngests.Load()
		results := make([]engine.IngestResult, perRound)
		errs := make([]error, perRound)
		var wg sync.WaitGroup
		for i := range perRound {
			wg.Go(func() {
				key := ""
				if i%4 == 0 { // pairs of ingests with one key
					key = fmt.Sprintf("round-%d-key-%d", round, i/8)
				}
				results[i], errs[i] = ingest(key)
			})
		}
		wg.Wait()
		firsts := map[string]string{}
		seqs := map[uint64]bool{}
		for i, res := range results {
			if errs[i] != nil {
				t.Fatalf("round %d, ingest %d: %v", round, i, errs[i])
			}
			if len(res.Deliveries) != 2 {
				t.Fatalf("round %d, ingest %d: %d deliveries, want 2", round, i, len(res.Deliveries))
			}
			stored, ds, err := s.Event(ctx, "acme", res.Event.ID)
			if err != nil || stored.Seq != res.Event.Seq || len(ds) != 2 {
				t.Fatalf("round %d, ingest %d: as stored seq %d, %d deliveries, %v; want seq %d, 2", round, i, stored.Seq, len(ds), err, res.Event.Seq)
			}
			if i%4 == 0 {
				key := fmt.Sprintf("round-%d-key-%d", round, i/8)
				if first, ok := firsts[key]; ok && first != res.Event.ID {
					t.Fatalf("round %d: key %s gave events %s and %s", round, key, first, res.Event.ID)
				}
				firsts[key] = res.Event.ID
			}
			if !res.Duplicate {
				if seqs[res.Event.Seq] {
					t.Fatalf("round %d: seq %d twice", round, res.Event.Seq)
				}
				seqs[res.Event.Seq] = true
			}
		}
		if want := perRound - perRound/8; len(seqs) != want {
			t.Fatalf("round %d: %d events appended, want %d (one per key)", round, len(seqs), want)
		}
		// Only the second ingest of each key took the full path.
		if got, want := s.cachedIngests.Load()-cachedBefore, int64(perRound-perRound/8); got != want {
			t.Fatalf("round %d: %d ingests written in one round trip, want %d: a failed group took the others down with it", round, got, want)
		}
	}
	if s.groupSplits.Load() == 0 {
		t.Skip("no group with a key in use formed in 20 rounds (the machine ran the ingests one by one)")
	}
}

// TestScheduler_CloseHandsBackIngestClaims: the deliveries an ingest
// claimed for its node and no dispatcher took over go back when the
// node's scheduler closes, due at once for the other nodes, not when
// their lease ends.
func TestScheduler_CloseHandsBackIngestClaims(t *testing.T) {
	clock := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ss := nodes(t, 2, clock)
	ctx := t.Context()
	now := clock.now()
	acme(t, ss[0], now, 1)
	a := ss[0].Scheduler(SchedulerOptions{PreClaim: 10, Poll: 20 * time.Millisecond})
	if _, err := a.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 2 { // the first reads the endpoints; the second claims
		ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: now, APIVersion: "1", Body: []byte(`{}`)}
		res, err := ss[0].AppendEvent(ctx, engine.NewEvent{Event: ev})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Deliveries[0].ID)
	}
	if !a.Holds(ids[1]) {
		t.Fatal("the second ingest's delivery was not claimed by its node")
	}
	a.Close()
	b := ss[1].Scheduler(SchedulerOptions{Poll: 20 * time.Millisecond})
	if _, err := b.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	got := map[string]bool{}
	for _, w := range claimNow(t, b) {
		got[w.DeliveryID] = true
	}
	if !got[ids[0]] || !got[ids[1]] {
		t.Errorf("the other node claimed %v; want both %v at once", got, ids)
	}
}

// TestScheduler_CloseTwice: a second Close (serve closes its backend
// once when it stops and once more on the way out, after the store) does
// nothing: it once tried to leave the cluster again on a closed pool and
// logged a warning at every shutdown.
func TestScheduler_CloseTwice(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	s, err := Open(t.Context(), pgtest.URL(t), Options{Schema: pgtest.Schema(t), Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Scheduler(SchedulerOptions{})
	if _, err := c.Recover(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	c.Close()
	s.Close()
	c.Close()
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("a second Close logged:\n%s", logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestAppendEvent_ClaimedAtIngestSendsTheStoredBody: the attempt of a
// delivery its ingest claimed reads what the ingest kept, not the
// database, and that must be the body as stored, with the sequence the
// write gave it. It was the body before the write (no "sequence"), so
// the first attempt's bytes differed from every later one's.
func TestAppendEvent_ClaimedAtIngestSendsTheStoredBody(t *testing.T) {
	clock := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ss := nodes(t, 1, clock)
	ctx := t.Context()
	acme(t, ss[0], clock.now(), 1)
	a := ss[0].Scheduler(SchedulerOptions{PreClaim: 10, Poll: 20 * time.Millisecond})
	if _, err := a.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	var res engine.IngestResult
	for range 2 { // the first reads the endpoints; the second claims
		ne, err := engine.PrepareEvent("acme", engine.IngestInput{Type: "order.created", Data: []byte(`{"n":1}`)}, engine.IngestOptions{Now: clock.now})
		if err != nil {
			t.Fatal(err)
		}
		if res, err = ss[0].AppendEvent(ctx, ne); err != nil {
			t.Fatal(err)
		}
	}
	id := res.Deliveries[0].ID
	if !a.Holds(id) {
		t.Fatal("the second ingest's delivery was not claimed by its node")
	}
	stored, _, err := ss[0].Event(ctx, "acme", res.Event.ID)
	if err != nil {
		t.Fatal(err)
	}
	in, err := ss[0].AttemptInput(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if string(in.Body) != string(stored.Body) || string(res.Event.Body) != string(stored.Body) || engine.EnvelopeSequence(in.Body) != 2 {
		t.Errorf("the attempt's body\n%s\nthe ingest's\n%s\nstored\n%s", in.Body, res.Event.Body, stored.Body)
	}
	// The delivery has its event's sequence too, however it is read.
	read, err := ss[0].Delivery(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deliveries[0].Sequence != 2 || in.Delivery.Sequence != 2 || read.Sequence != 2 {
		t.Errorf("delivery sequence: ingest %d, attempt %d, read %d; want 2", res.Deliveries[0].Sequence, in.Delivery.Sequence, read.Sequence)
	}
	// The holder's record compares the document it kept with the row's:
	// it must apply in one statement, not fall back.
	before := ss[0].recordFallbacks.Load()
	at := clock.now()
	rec := engine.AttemptRecord{DeliveryID: id, Cycle: 1, State: engine.StateSucceeded, LastStatus: 200, At: at,
		Attempt: engine.Attempt{Cycle: 1, Number: 1, Start: at, Status: 200, Outcome: engine.OutcomeSuccess}}
	if _, err := ss[0].RecordOutcome(ctx, engine.NewOutcomeUpdate(in.Delivery, rec)); err != nil {
		t.Fatal(err)
	}
	if n := ss[0].recordFallbacks.Load() - before; n != 0 {
		t.Errorf("the holder's record fell back %d times", n)
	}
}
