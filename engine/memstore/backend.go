package memstore

import (
	"context"
	"io"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// What a process asks of its database beside the Store (engine.Backend):
// a Store in memory is always writable, seals nothing and has no backup.

// Writable reports nil: memory takes every write.
func (s *Store) Writable(context.Context, int) error { return nil }

// OldestDue returns the earliest NextAttemptAt of a pending delivery, and
// whether there is one.
func (s *Store) OldestDue(ctx context.Context) (due time.Time, ok bool, err error) {
	if err := s.lock(ctx); err != nil {
		return time.Time{}, false, err
	}
	defer s.mu.Unlock()
	for _, d := range s.deliveries {
		if d.State == engine.StatePending && (!ok || d.NextAttemptAt.Before(due)) {
			due, ok = d.NextAttemptAt, true
		}
	}
	return utc(due), ok, nil
}

// SecretKeyID returns "": nothing is kept at rest, so nothing is sealed.
func (s *Store) SecretKeyID() string { return "" }

// Backup returns nil: there is no file to copy.
func (s *Store) Backup() io.WriterTo { return nil }

// Close does nothing: the Store is gone with its last reference.
func (s *Store) Close() error { return nil }
