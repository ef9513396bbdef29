package storage

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/storetest"
)

// TestConformance runs engine.Backend's conformance suite on a bbolt file
// per subtest, with Check after each and the purge of deleted tenants done
// as the pruner does it: once with secrets in plain and once sealed with a
// key, so that every read of an endpoint gives back the secrets stored.
func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  func(testing.TB) []byte
	}{
		{"plain", func(testing.TB) []byte { return nil }},
		{"sealed", newKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.key(t)
			storetest.Run(t, storetest.Harness{
				Open: func(t *testing.T) engine.Backend {
					if key == nil {
						return MustOpenDB(t)
					}
					return openKeyed(t, filepath.Join(t.TempDir(), "webhookd.db"), key)
				},
				Reopen: func(t *testing.T, s engine.Backend) engine.Backend {
					path := s.(*DB).Path()
					if err := s.(*DB).Close(); err != nil {
						t.Fatal(err)
					}
					if key == nil {
						return mustOpenDBAt(t, path)
					}
					return openKeyed(t, path, key)
				},
				Check: func(t *testing.T, s engine.Store) {
					t.Helper()
					if err := s.(*DB).Check(); err != nil {
						t.Errorf("Check: %v", err)
					}
				},
				Purge: func(ctx context.Context, s engine.Store) error {
					for {
						res, err := s.PurgeDeletedTenants(ctx, "", 0)
						if err != nil || res.Tenant == "" {
							return err
						}
					}
				},
			})
		})
	}
}
