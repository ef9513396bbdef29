package engine_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/storage"
)

// TestDispatcher_StopRecordsOutcomes stops a dispatcher while its workers'
// requests are held at the receiver and then answered: Stop must return
// only after every answered attempt's outcome is recorded (outcomes are
// recorded off the workers, see recordLater), so that after Stop each
// delivery the receiver answered 200 is succeeded and every other one is
// still pending, and the database closes with nothing left writing.
func TestDispatcher_StopRecordsOutcomes(t *testing.T) {
	const workers, events = 4, 40
	release := make(chan struct{})
	var arrived, answered atomic.Int64
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		<-release
		w.WriteHeader(http.StatusOK)
		answered.Add(1)
	}))
	defer rc.Close()
	defer close(release)

	path := filepath.Join(t.TempDir(), "webhookd.db")
	n := seedPending(t, path, rc.URL, events, 0)
	db, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	disp := engine.NewDispatcher(db, engine.DispatcherOptions{
		Policy: recoverPolicy(), Workers: workers, EndpointConcurrency: workers,
		Client: loopbackClient(workers), Targets: engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true},
	})
	ctx := context.Background()
	if err := disp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for arrived.Load() < workers && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := arrived.Load(); got != workers {
		t.Fatalf("%d requests reached the receiver, want %d (one per worker)", got, workers)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- disp.Stop(ctx) }()
	time.Sleep(20 * time.Millisecond) // Stop is waiting now
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
