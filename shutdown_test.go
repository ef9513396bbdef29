package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestCloseWithin: closing the database gives up at the shutdown
// deadline plus its grace when the close hangs (a write stuck on the
// disk), and otherwise returns what the close returned.
func TestCloseWithin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		hung := make(chan struct{})
		defer close(hung)
		start := time.Now()
		err := closeWithin(ctx, func() error { <-hung; return nil }, time.Second)
		if err == nil || !strings.Contains(err.Error(), "hung disk") {
			t.Errorf("closeWithin of a hung close = %v, want an error naming a hung disk", err)
		}
		if took := time.Since(start); took != 11*time.Second {
			t.Errorf("closeWithin gave up after %s, want the deadline (10s) and the grace (1s)", took)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		closed := errors.New("closed with an error")
		start := time.Now()
		// A close that ends after the deadline, within the grace, is waited for.
		err := closeWithin(ctx, func() error { time.Sleep(10*time.Second + 500*time.Millisecond); return closed }, time.Second) // the bubble's clock
		if !errors.Is(err, closed) || time.Since(start) != 10*time.Second+500*time.Millisecond {
			t.Errorf("closeWithin = %v after %s, want the close's own error after 10.5s", err, time.Since(start))
		}
	})
}
