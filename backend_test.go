package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/webhookd/webhookd/engine/memstore"
	"github.com/webhookd/webhookd/storage"
)

// TestBackend_SealedWith: a store that seals nothing (memstore keeps
// nothing at rest) is a backend like another: its key ID is "", and serve
// starts on it and logs no key. The bbolt file names its key.
func TestBackend_SealedWith(t *testing.T) {
	if got := (&backend{Backend: memstore.New()}).SecretKeyID(); got != "" {
		t.Errorf("memstore: SecretKeyID() = %q, want \"\"", got)
	}

	cfg := defaultConfig()
	cfg.Storage.Path = filepath.Join(t.TempDir(), "webhookd.db")
	key := bytes.Repeat([]byte{7}, 32)
	be, err := openBackend(context.Background(), cfg, key, func(string) string { return "" }, newMetrics(), nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer be.close()
	id := storage.SecretKeyID(key)
	if got, want := be.SecretKeyID(), hex.EncodeToString(id[:]); got != want {
		t.Errorf("bbolt: SecretKeyID() = %q, want %q", got, want)
	}
}
