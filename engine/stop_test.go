package engine_test

import (
	"context"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/storage"
)

// TestDispatcher_StopRecordsOutcomes stops a dispatcher while its workers'
// requests are held at the receiver and then answered: Stop must return
// only after every answered attempt's outcome is recorded (outcomes are
// recorded off the workers, see recordLater), so that after Stop each
// delivery the receiver answered 200 is succeeded and every other one is
// still pending, and the database closes with nothing left writing. It
// runs in a synctest bubble (the bbolt file included), so "Stop waits"
// is seen exactly: every goroutine waits, and Stop has not returned.
func TestDispatcher_StopRecordsOutcomes(t *testing.T) {
	synctest.Test(t, testStopRecordsOutcomes)
}

func testStopRecordsOutcomes(t *testing.T) {
	const workers, events = 4, 40
	release := make(chan struct{})
	var arrived, answered atomic.Int64
	receiver := func(*http.Request) int {
		arrived.Add(1)
		<-release
		answered.Add(1)
		return http.StatusOK
	}

	path := filepath.Join(t.TempDir(), "webhookd.db")
	n := seedPending(t, path, bubbleURL, events, 0)
	db, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	disp := engine.NewDispatcher(db, engine.DispatcherOptions{
		Policy: recoverPolicy(), Workers: workers, EndpointConcurrency: workers, TenantConcurrency: workers,
		Client: bubbleClient(receiver), Targets: bubbleTargets,
	})
	ctx := context.Background()
	if err := disp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	if got := arrived.Load(); got != workers {
		t.Fatalf("%d requests reached the receiver, want %d (one per worker)", got, workers)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- disp.Stop(ctx) }()
	// Stop has begun (the dispatcher no longer runs) and must wait: every
	// worker's request is still held at the receiver.
	synctest.Wait()
	if disp.Running() {
		t.Fatal("Stop did not begin")
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while %d attempts were in flight", err, workers)
	default:
	}
	for range workers {
		release <- struct{}{}
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pending := 0
	if err := db.RetryIndex(ctx, func(engine.RetryEntry) error { pending++; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, want := n-pending, int(answered.Load()); got != want {
		t.Errorf("after Stop %d deliveries are recorded and %d pending, but the receiver answered %d: an outcome was lost", got, pending, want)
	}
	if err := db.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// slowDisk is the real store with commits of attempt outcomes held until
// open is closed: a disk that has stopped answering.
type slowDisk struct {
	*storage.DB
	open    chan struct{}
	waiting atomic.Int64
}

func (s *slowDisk) RecordOutcome(ctx context.Context, u engine.OutcomeUpdate) (engine.Delivery, error) {
	s.waiting.Add(1)
	<-s.open
	return s.DB.RecordOutcome(ctx, u)
}

// TestDispatcher_RecordingBackpressure: while the disk does not answer,
// workers go on with attempts only until RecordingPerWorker × Workers
// outcomes wait for it and each worker holds one more; then no request is
// made until the disk answers, after which every outcome is recorded. In
// a synctest bubble (the bbolt file included), "no request is made" is
// exact: the count is read once every goroutine waits.
func TestDispatcher_RecordingBackpressure(t *testing.T) {
	synctest.Test(t, testRecordingBackpressure)
}

func testRecordingBackpressure(t *testing.T) {
	const workers, events = 2, 40
	var requests atomic.Int64
	receiver := func(*http.Request) int {
		requests.Add(1)
		return http.StatusOK
	}

	path := filepath.Join(t.TempDir(), "webhookd.db")
	n := seedPending(t, path, bubbleURL, events, 0)
	db, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	disk := &slowDisk{DB: db, open: make(chan struct{})}
	disp := engine.NewDispatcher(disk, engine.DispatcherOptions{
		Policy: recoverPolicy(), Workers: workers, EndpointConcurrency: workers, TenantConcurrency: workers,
		Client: bubbleClient(receiver), Targets: bubbleTargets,
	})
	ctx := context.Background()
	if err := disp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waiting := engine.RecordingPerWorker * workers
	want := int64(waiting + workers)
	synctest.Wait() // every worker waits for room to record; no request beyond the bound can come
	if got := requests.Load(); got != want {
		t.Errorf("with the disk not answering, %d requests were made, want %d (%d outcomes waiting + one per worker)", got, want, waiting)
	}
	if got := disk.waiting.Load(); got != int64(waiting) {
		t.Errorf("%d outcomes wait for the disk, want %d", got, waiting)
	}

	close(disk.open)
	synctest.Wait() // every delivery attempted and recorded: nothing is due later
	if s := disp.Stats(); s.Scheduled+s.Ready+s.InFlight != 0 {
		t.Errorf("once the disk answered the dispatcher still holds %+v", s)
	}
	if err := disp.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	pending := 0
	if err := db.RetryIndex(ctx, func(engine.RetryEntry) error { pending++; return nil }); err != nil {
		t.Fatal(err)
	}
	if pending != 0 || requests.Load() != int64(n) {
		t.Errorf("after the disk answered: %d pending, %d requests for %d deliveries; want 0 pending, one request each", pending, requests.Load(), n)
	}
}
