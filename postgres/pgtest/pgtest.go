// Package pgtest gives tests a PostgreSQL database of their own: the
// server named by WEBHOOKD_TEST_DATABASE_URL (which .ci/run starts; see
// .ci/postgres), and a schema per test, dropped when the test ends.
// Outside CI a test without that variable is skipped with a message that
// says how to run it; in CI (CI set) it fails instead, so the PostgreSQL
// suite never goes missing silently.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL is the variable that names the test server.
const EnvURL = "WEBHOOKD_TEST_DATABASE_URL"

// URL returns the test server's URL, or skips (fails, in CI) t.
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(EnvURL)
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: .ci/run starts a PostgreSQL server for the tests (.ci/postgres)", EnvURL)
		}
		t.Skipf("no PostgreSQL: set %s (e.g. postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable), or source .ci/postgres to start a throwaway server", EnvURL)
	}
	return url
}

// Schema returns the name of a new schema for t, and drops it with all it
// holds when t ends. The store makes it at its first Open.
func Schema(t testing.TB) string {
	t.Helper()
	url := URL(t)
	var b [6]byte
	rand.Read(b[:])
	name := "test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("pgtest: drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", name, err)
		}
	})
	return name
}
