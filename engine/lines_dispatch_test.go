package engine_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
	"github.com/webhookd/webhookd/storage"
)

// arrival is one request a lineReceiver got.
type arrival struct {
	key      string
	sequence uint64
	status   int
}

// lineReceiver records the requests it gets in arrival order and answers
// each with what answer says of its envelope (nil: 200). It answers in the
// process (receive, through bubbleClient): the line tests run in synctest
// bubbles.
type lineReceiver struct {
	mu       sync.Mutex
	arrivals []arrival
	answer   func(key string, sequence uint64, try int) int
	tries    map[uint64]int
}

func newLineReceiver(answer func(key string, sequence uint64, try int) int) *lineReceiver {
	return &lineReceiver{answer: answer, tries: map[uint64]int{}}
}

// receive answers one request.
func (rc *lineReceiver) receive(r *http.Request) int {
	body, _ := io.ReadAll(r.Body)
	var env struct {
		Sequence    uint64 `json:"sequence"`
		OrderingKey string `json:"ordering_key"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return http.StatusBadRequest
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.tries[env.Sequence]++
	status := http.StatusOK
	if rc.answer != nil {
		status = rc.answer(env.OrderingKey, env.Sequence, rc.tries[env.Sequence])
	}
	rc.arrivals = append(rc.arrivals, arrival{env.OrderingKey, env.Sequence, status})
	return status
}

// succeeded returns the sequences answered 2xx, in arrival order.
func (rc *lineReceiver) succeeded() []uint64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []uint64
	for _, a := range rc.arrivals {
		if a.status < 300 {
			out = append(out, a.sequence)
		}
	}
	return out
}

// wantInOrder fails t unless, for each key, the requests arrived in
// sequence order (a retry repeats a sequence; a later one never comes
// before an earlier one of its key has succeeded or died).
func (rc *lineReceiver) wantInOrder(t *testing.T, byKey bool) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	last := map[string]uint64{}
	for i, a := range rc.arrivals {
		k := a.key
		if !byKey {
			k = ""
		}
		if a.sequence < last[k] {
			t.Fatalf("arrival %d: sequence %d of key %q after %d", i, a.sequence, a.key, last[k])
		}
		last[k] = a.sequence
	}
}

// lineService is a service and a running dispatcher on a bbolt file, for
// a synctest bubble,
// with tenant acme and type order.created, and an endpoint at rc with
// ordering and onDead.
func lineService(t *testing.T, rc *lineReceiver, ordering engine.Ordering, onDead engine.OnDead) (*engine.Service, *storage.DB, engine.Endpoint) {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "webhookd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	disp := engine.NewDispatcher(db, engine.DispatcherOptions{
		Policy: engine.RetryPolicy{
			Schedule: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}, Deadline: time.Hour,
			AttemptTimeout: 5 * time.Second, RetryAfterMax: time.Second,
		},
		Workers: 8, EndpointConcurrency: 8, TenantConcurrency: 8,
		Client: bubbleClient(rc.receive), Targets: bubbleTargets,
	})
	if err := disp.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := disp.Stop(context.Background()); err != nil {
			t.Error(err)
		}
		if err := db.Check(); err != nil {
			t.Errorf("Check: %v", err)
		}
		db.Close()
	})
	svc := engine.NewService(db, disp, engine.ServiceOptions{Targets: bubbleTargets})
	ctx := t.Context()
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"*"}, Ordering: ordering, OnDead: onDead})
	if err != nil {
		t.Fatal(err)
	}
	return svc, db, ep
}

// ingest ingests one event with ordering key key and returns its one
// delivery.
func ingestKeyed(t *testing.T, svc *engine.Service, key string) engine.Delivery {
	t.Helper()
	res, err := svc.Ingest(t.Context(), "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{}`), OrderingKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return res.Deliveries[0]
}

// waitState waits, in a synctest bubble, until delivery id is in state:
// it looks each time every goroutine waits, and moves the bubble's fake
// clock a millisecond on (retries are due later) until 20 s of it passed.
func waitState(t *testing.T, svc *engine.Service, id string, state engine.State) engine.Delivery {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		synctest.Wait()
		d, err := svc.Delivery(t.Context(), "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		if d.State == state {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery %s is %s (behind %q), want %s", id, d.State, d.WaitingBehind, state)
		}
		time.Sleep(time.Millisecond) // the bubble's clock: no real time passes
	}
}

// TestDispatcher_DeliversLinesInOrder: with ordering key, each key's
// events reach the receiver in sequence order though every third first
// attempt fails (502) and keys go in parallel; with ordering endpoint,
// all of them do.
func TestDispatcher_DeliversLinesInOrder(t *testing.T) {
	for _, ordering := range []engine.Ordering{engine.OrderingKey, engine.OrderingEndpoint} {
		t.Run(string(ordering), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rc := newLineReceiver(func(_ string, seq uint64, try int) int {
					if seq%3 == 0 && try == 1 {
						return http.StatusBadGateway
					}
					return http.StatusOK
				})
				svc, _, _ := lineService(t, rc, ordering, engine.OnDeadSkip)
				keys := []string{"a", "b", "c", "d"}
				var ids []string
				for i := range 40 {
					ids = append(ids, ingestKeyed(t, svc, keys[i%len(keys)]).ID)
				}
				for _, id := range ids {
					waitState(t, svc, id, engine.StateSucceeded)
				}
				rc.wantInOrder(t, ordering == engine.OrderingKey)
				if got := len(rc.succeeded()); got != len(ids) {
					t.Errorf("%d successes, want %d", got, len(ids))
				}
			})
		})
	}
}

// TestDispatcher_BlockedLine: on_dead block stops the line at a dead
// head until it is skipped; Skip of anything else is not_blocking; a
// replay of a delivery of the line waits behind the head.
func TestDispatcher_BlockedLine(t *testing.T) {
	synctest.Test(t, testBlockedLine)
}

func testBlockedLine(t *testing.T) {
	var gone sync.Map // sequences answered 400 (permanent)
	rc := newLineReceiver(func(_ string, seq uint64, _ int) int {
		if _, ok := gone.Load(seq); ok {
			return http.StatusBadRequest
		}
		return http.StatusOK
	})
	svc, _, _ := lineService(t, rc, engine.OrderingEndpoint, engine.OnDeadBlock)
	first := ingestKeyed(t, svc, "")
	waitState(t, svc, first.ID, engine.StateSucceeded)

	gone.Store(first.Sequence+1, true) // before it is ingested: its first attempt may come at once
	second := ingestKeyed(t, svc, "")
	head := waitState(t, svc, second.ID, engine.StateDead)
	if !head.Blocking() {
		t.Fatalf("dead head does not block: skips %+v", head.Skips)
	}
	third := ingestKeyed(t, svc, "")
	if third.State != engine.StateWaiting || third.WaitingBehind != second.ID {
		t.Fatalf("third = %s behind %q, want waiting behind %s", third.State, third.WaitingBehind, second.ID)
	}
	if _, err := svc.Skip(t.Context(), "acme", third.ID, "admin"); engine.ErrorCode(err) != engine.CodeNotBlocking {
		t.Fatalf("Skip of a waiting delivery: %v, want %s", err, engine.CodeNotBlocking)
	}
	// A replay of the first, which succeeded, waits behind the blocked head.
	again, err := svc.Replay(t.Context(), "acme", first.ID, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if again.State != engine.StateWaiting {
		t.Fatalf("replay into a blocked line is %s, want waiting", again.State)
	}
	synctest.Wait() // every goroutine waits: a blocked line sends nothing
	if got := rc.succeeded(); len(got) != 1 {
		t.Fatalf("successes %v while the line is blocked, want only the first", got)
	}

	skipped, err := svc.Skip(t.Context(), "acme", second.ID, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if skipped.Blocking() || len(skipped.Skips) != 1 || skipped.Skips[0].By != "admin" {
		t.Errorf("skipped = %+v, want one skip by admin", skipped.Skips)
	}
	// The replayed first (lower sequence) goes before the third.
	waitState(t, svc, first.ID, engine.StateSucceeded)
	waitState(t, svc, third.ID, engine.StateSucceeded)
	got := rc.succeeded()
	want := []uint64{first.Sequence, first.Sequence, third.Sequence}
	if len(got) != len(want) || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("successes in order %v, want %v", got, want)
	}
}

// TestService_LineNote: a waiting delivery's note names its line's head
// with the head's next attempt, read when asked; a blocking head's says
// so; any other delivery has none.
func TestService_LineNote(t *testing.T) {
	svc := engine.NewService(memstore.New(), nil, engine.ServiceOptions{Targets: engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}})
	ctx := t.Context()
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:1/in", EventTypes: []string{"*"}, Ordering: engine.OrderingEndpoint}); err != nil {
		t.Fatal(err)
	}
	head, next := ingestKeyed(t, svc, ""), ingestKeyed(t, svc, "")
	want := "waiting behind " + head.ID + " (attempt 1, next at " + head.NextAttemptAt.UTC().Format(engine.TimeFormat) + ")"
	if got := svc.LineNote(ctx, next); got != want {
		t.Errorf("LineNote(waiting) = %q, want %q", got, want)
	}
	if got := svc.LineNote(ctx, head); got != "" {
		t.Errorf("LineNote(head) = %q, want none", got)
	}
}

// TestService_ReplaySelected: deliveries picked one by one are replayed
// in their line's order whatever order they were picked in; one ID that
// is not the tenant's delivery replays none.
func TestService_ReplaySelected(t *testing.T) {
	synctest.Test(t, testReplaySelected)
}

func testReplaySelected(t *testing.T) {
	var failing sync.Map
	rc := newLineReceiver(func(string, uint64, int) int {
		if _, ok := failing.Load("all"); ok {
			return http.StatusBadRequest // permanent: dead at once
		}
		return http.StatusOK
	})
	svc, _, _ := lineService(t, rc, engine.OrderingKey, engine.OnDeadSkip)
	failing.Store("all", true)
	var ds []engine.Delivery
	for range 3 {
		d := ingestKeyed(t, svc, "order_1")
		waitState(t, svc, d.ID, engine.StateDead)
		ds = append(ds, d)
	}
	failing.Delete("all")

	picked := []string{ds[2].ID, ds[0].ID, "dlv_nope", ds[1].ID}
	if _, err := svc.ReplaySelected(t.Context(), "acme", picked, "admin"); engine.ErrorCode(err) != engine.CodeDeliveryNotFound {
		t.Fatalf("ReplaySelected with an unknown ID: %v, want %s", err, engine.CodeDeliveryNotFound)
	}
	for _, d := range ds {
		if got, _ := svc.Delivery(t.Context(), "acme", d.ID); got.State != engine.StateDead || len(got.Replays) != 0 {
			t.Fatalf("%s after a refused ReplaySelected: %s, %d replays", d.ID, got.State, len(got.Replays))
		}
	}
	before := len(rc.succeeded())
	got, err := svc.ReplaySelected(t.Context(), "acme", []string{ds[2].ID, ds[0].ID, ds[1].ID, ds[2].ID}, "admin")
	if err != nil || len(got) != 3 {
		t.Fatalf("ReplaySelected = %d deliveries, %v; want 3", len(got), err)
	}
	for _, d := range ds {
		waitState(t, svc, d.ID, engine.StateSucceeded)
	}
	if s := rc.succeeded()[before:]; len(s) != 3 || s[0] != ds[0].Sequence || s[1] != ds[1].Sequence || s[2] != ds[2].Sequence {
		t.Errorf("replayed arrivals %v, want %d, %d, %d", s, ds[0].Sequence, ds[1].Sequence, ds[2].Sequence)
	}
	if _, err := svc.ReplaySelected(t.Context(), "acme", nil, "admin"); engine.ErrorCode(err) != engine.CodeInvalidField {
		t.Errorf("ReplaySelected of nothing: %v", err)
	}
}
