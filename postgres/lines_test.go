package postgres

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// orderedAcme makes tenant acme with one endpoint of ordering key and
// on_dead onDead, through s, and returns it.
func orderedAcme(t *testing.T, s *Store, now time.Time, onDead engine.OnDead) engine.Endpoint {
	t.Helper()
	acme(t, s, now, 0)
	ep := engine.Endpoint{ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/hook", EventTypes: []string{"order.created"},
		Created: now, Updated: now, Secrets: []engine.Secret{{Key: engine.NewSecret()}}, Ordering: engine.OrderingKey, OnDead: onDead}
	if err := s.CreateEndpoint(t.Context(), ep, 0); err != nil {
		t.Fatal(err)
	}
	return ep
}

// ingestKeyed ingests an event of acme with ordering key key through s
// and returns its one delivery.
func ingestKeyed(t *testing.T, s *Store, now time.Time, key string) (engine.Delivery, error) {
	ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: now, APIVersion: "1", Body: []byte(`{}`), OrderingKey: key}
	res, err := s.AppendEvent(t.Context(), engine.NewEvent{Event: ev})
	if err != nil {
		return engine.Delivery{}, err
	}
	if len(res.Deliveries) != 1 {
		return engine.Delivery{}, fmt.Errorf("%d deliveries, want 1", len(res.Deliveries))
	}
	return res.Deliveries[0], nil
}

// TestLines_ConcurrentNodes: three nodes ingest into the same lines at
// once, then each takes the heads and records their success at once.
// Every line has one head, its lowest sequence, the rest waiting behind
// it; and each line's successes commit in sequence order, each once.
func TestLines_ConcurrentNodes(t *testing.T) {
	clock := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ss := nodes(t, 3, clock)
	now := clock.now()
	ep := orderedAcme(t, ss[0], now, engine.OnDeadSkip)
	keys, perNode := 4, 15
	if testing.Short() {
		perNode = 6
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(ss)*perNode)
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perNode {
				if _, err := ingestKeyed(t, s, now, fmt.Sprintf("k%d", i%keys)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("ingest: %v", err)
	}
	checkLines(t, ss[0])
	lines := make([]string, keys)
	for k := range lines {
		lines[k] = engine.LineKeyPrefix + fmt.Sprintf("k%d", k)
		head, ok, err := ss[0].LineHead(t.Context(), ep.ID, lines[k])
		if err != nil || !ok || head.State != engine.StatePending {
			t.Fatalf("head of %s: %+v %v %v", lines[k], head, ok, err)
		}
		ds, _, err := ss[0].ListDeliveries(t.Context(), "acme", engine.DeliveryFilter{State: engine.StateWaiting, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Line == lines[k] && (d.Sequence < head.Sequence || d.WaitingBehind != head.ID) {
				t.Errorf("%s: delivery of sequence %d waits behind %q; the head %s has sequence %d", lines[k], d.Sequence, d.WaitingBehind, head.ID, head.Sequence)
			}
		}
	}

	// Each node takes the heads and succeeds them, all at once; fn runs
	// under the line's lock, so the order it sees is the commit order
	// (no transaction here rolls back after fn).
	var mu sync.Mutex
	succeeded := map[string][]uint64{}
	total := len(ss) * perNode
	errNotHead := errors.New("not the head anymore")
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				mu.Lock()
				n := 0
				for _, l := range succeeded {
					n += len(l)
				}
				mu.Unlock()
				if n == total {
					return
				}
				for _, line := range lines {
					head, ok, err := s.LineHead(t.Context(), ep.ID, line)
					if err != nil {
						t.Error(err)
						return
					}
					if !ok {
						continue
					}
					_, err = s.UpdateDelivery(t.Context(), head.ID, func(d engine.Delivery) (engine.Delivery, error) {
						if d.State != engine.StatePending {
							return d, errNotHead
						}
						rec := engine.AttemptRecord{DeliveryID: d.ID, Cycle: d.Cycle, At: now, State: engine.StateSucceeded, LastStatus: 200,
							Attempt: engine.Attempt{Cycle: d.Cycle, Number: d.CycleAttempts + 1, Start: now, Status: 200, Outcome: engine.OutcomeSuccess}}
						mu.Lock()
						succeeded[line] = append(succeeded[line], d.Sequence)
						mu.Unlock()
						return engine.RecordAttempt(d, rec), nil
					})
					if err != nil && !errors.Is(err, errNotHead) {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	n := 0
	for _, line := range lines {
		seqs := succeeded[line]
		n += len(seqs)
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				t.Errorf("%s: succeeded in the order %v, want increasing sequences", line, seqs)
				break
			}
		}
	}
	if n != total {
		t.Errorf("%d successes, want %d", n, total)
	}
	checkLines(t, ss[0])
}

// TestLines_RetentionEndsABlockingHead: retention that deletes the dead
// head blocking a line promotes the next, due at once, and reports it.
func TestLines_RetentionEndsABlockingHead(t *testing.T) {
	clock := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := nodes(t, 1, clock)[0]
	now := clock.now()
	ep := orderedAcme(t, s, now, engine.OnDeadBlock)
	head, err := ingestKeyed(t, s, now, "a")
	if err != nil {
		t.Fatal(err)
	}
	dead, err := s.UpdateDelivery(t.Context(), head.ID, func(d engine.Delivery) (engine.Delivery, error) {
		return engine.RecordAttempt(d, engine.AttemptRecord{DeliveryID: d.ID, Cycle: d.Cycle, At: now, State: engine.StateDead, LastStatus: 410,
			Attempt: engine.Attempt{Cycle: d.Cycle, Number: 1, Start: now, Status: 410, Outcome: engine.OutcomePermanent}}), nil
	})
	if err != nil || !dead.Blocking() {
		t.Fatalf("dead head: %+v %v, want blocking", dead, err)
	}
	clock.add(time.Hour) // the next event is newer than retention
	next, err := ingestKeyed(t, s, clock.now(), "a")
	if err != nil || next.State != engine.StateWaiting {
		t.Fatalf("next: %+v %v, want waiting", next, err)
	}
	res, err := s.PruneEvents(t.Context(), 0, engine.Retention{SucceededBefore: now.Add(time.Minute), DeadBefore: now.Add(time.Minute)}, 0)
	if err != nil || res.Events != 1 || res.Deliveries != 1 {
		t.Fatalf("PruneEvents: %+v %v, want the dead head's event pruned", res, err)
	}
	if want := []engine.Work{{DeliveryID: next.ID, TenantID: next.TenantID, EndpointID: ep.ID}}; !reflect.DeepEqual(res.Promoted, want) {
		t.Errorf("Promoted = %+v, want %+v", res.Promoted, want)
	}
	got, ok, err := s.LineHead(t.Context(), ep.ID, engine.LineKeyPrefix+"a")
	if err != nil || !ok || got.ID != next.ID || got.State != engine.StatePending || !got.NextAttemptAt.Equal(clock.now()) {
		t.Errorf("head after retention: %s %s due %v (%v %v), want %s pending due %v", got.ID, got.State, got.NextAttemptAt, ok, err, next.ID, clock.now())
	}
	checkLines(t, s)
}

// TestLines_ConcurrentReplays: three nodes replay the dead deliveries of
// one line, each its share, while a fourth goroutine succeeds whatever
// heads the line: every replay is settled behind the head of the moment
// (no second head, no waiting delivery without one), and the line
// drains.
func TestLines_ConcurrentReplays(t *testing.T) {
	clock := &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ss := nodes(t, 3, clock)
	now := clock.now()
	ep := orderedAcme(t, ss[0], now, engine.OnDeadSkip)
	n := 24
	if testing.Short() {
		n = 12
	}
	line := engine.LineKeyPrefix + "a"
	var ids []string
	for range n {
		d, err := ingestKeyed(t, ss[0], now, "a")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID)
	}
	attempt := func(d engine.Delivery, state engine.State, status int) engine.Delivery {
		outcome := map[engine.State]engine.Outcome{engine.StateSucceeded: engine.OutcomeSuccess, engine.StateDead: engine.OutcomePermanent}[state]
		return engine.RecordAttempt(d, engine.AttemptRecord{DeliveryID: d.ID, Cycle: d.Cycle, At: now, State: state, LastStatus: status,
			Attempt: engine.Attempt{Cycle: d.Cycle, Number: d.CycleAttempts + 1, Start: now, Status: status, Outcome: outcome}})
	}
	// Each head dies in turn (on_dead skip): the line is empty, every
	// delivery a dead letter.
	for range n {
		head, ok, err := ss[0].LineHead(t.Context(), ep.ID, line)
		if err != nil || !ok {
			t.Fatalf("head: %v %v", ok, err)
		}
		if _, err := ss[0].UpdateDelivery(t.Context(), head.ID, func(d engine.Delivery) (engine.Delivery, error) {
			return attempt(d, engine.StateDead, 410), nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() {
			for j := i; j < n; j += len(ss) {
				if _, err := s.UpdateDelivery(t.Context(), ids[j], func(d engine.Delivery) (engine.Delivery, error) {
					return engine.ReplayDelivery(d, engine.Replay{At: now, By: "admin"}, ""), nil
				}); err != nil {
					t.Errorf("replay %d: %v", j, err)
				}
			}
		})
	}
	succeeded := 0
	wg.Go(func() {
		for deadline := time.Now().Add(30 * time.Second); succeeded < n && time.Now().Before(deadline); {
			head, ok, err := ss[0].LineHead(t.Context(), ep.ID, line)
			if err != nil {
				t.Error(err)
				return
			}
			if !ok {
				time.Sleep(time.Millisecond) // the replays, on the real server, have not made a head yet
				continue
			}
			_, err = ss[0].UpdateDelivery(t.Context(), head.ID, func(d engine.Delivery) (engine.Delivery, error) {
				if d.State != engine.StatePending {
					return d, errors.New("not pending")
				}
				return attempt(d, engine.StateSucceeded, 200), nil
			})
			if err == nil {
				succeeded++
			}
		}
	})
	wg.Wait()
	if succeeded != n {
		t.Errorf("%d of %d replays succeeded", succeeded, n)
	}
	checkLines(t, ss[0])
}
