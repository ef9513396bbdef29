package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/postgres/pgtest"
)

// clusterTest skips t unless the tests run on the postgres driver
// (WEBHOOKD_TEST_DRIVER=postgres): a cluster's nodes share a PostgreSQL
// database, so its tests belong to that pass, and CI runs them once.
func clusterTest(t *testing.T) {
	t.Helper()
	if !onPostgres {
		t.Skip("a cluster runs on PostgreSQL: its tests run with WEBHOOKD_TEST_DRIVER=postgres")
	}
}

// clusterConfig is testConfig on the postgres driver: every node on the
// same schema of the test server (pgtest), with a short lease.
func clusterConfig(t *testing.T, schema string, lease time.Duration, extra string) string {
	t.Helper()
	url := pgtest.URL(t)
	if i := strings.Index(testConfig, "[delivery]"); i >= 0 {
		return fmt.Sprintf("%s\n[storage]\ndriver = \"postgres\"\nurl = %q\nschema = %q\nlease = %q\n%s\n%s",
			testConfig[:i], url, schema, lease, testConfig[i:], extra)
	}
	t.Fatal("testConfig has no [delivery] section")
	return ""
}

// TestCluster_NodesShareOneDatabase runs two nodes on one PostgreSQL
// schema: what one node configures the other serves, events ingested
// through both are delivered once each (at-least-once allows more, and
// with nothing failing there is none), signed as on a single node, and
// each node's delivery log shows every delivery.
func TestCluster_NodesShareOneDatabase(t *testing.T) {
	clusterTest(t)
	schema := pgtest.Schema(t)
	cfg := clusterConfig(t, schema, 30*time.Second, "")
	a := startInstance(t, t.TempDir(), cfg)
	b := startInstance(t, t.TempDir(), cfg)
	a.setup()

	var mu sync.Mutex
	seen := map[string]int{}
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("webhook-id")]++
		mu.Unlock()
		w.WriteHeader(204)
	})
	ep := b.createEndpoint(rc.srv.URL, "payment.succeeded")
	rc.setSecret(ep.Secret)

	const n = 40
	var ids []string
	for i := range n {
		node := a
		if i%2 == 1 {
			node = b
		}
		res := node.ingest("payment.succeeded", fmt.Sprintf(`{"n":%d}`, i))
		if len(res.Deliveries) != 1 {
			t.Fatalf("ingest %d: %d deliveries, want 1", i, len(res.Deliveries))
		}
		ids = append(ids, res.Deliveries[0].ID)
	}
	for i, id := range ids {
		node := []*instance{a, b}[i%2]
		node.waitState(id, "succeeded")
	}
	rc.checkSignatures()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		t.Errorf("the receiver saw %d events, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("event %s arrived %d times with nothing failing", id, c)
		}
	}
}

// TestCluster_FileCommandsSayWhatToDo: backup, compact and rotate-key
// work on the bbolt file; with the postgres driver each refuses, writes
// nothing, and says what to use instead.
func TestCluster_FileCommandsSayWhatToDo(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "webhookd.toml")
	if err := os.WriteFile(cfg, []byte("[storage]\ndriver = \"postgres\"\nurl = \"postgres://nobody@127.0.0.1:1/none\"\n[api]\ntokens = [\"test-admin-token-0123456789\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "backup.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", "-config", cfg, "-o", out}, "pg_dump --schema=webhookd"},
		{[]string{"compact", "-config", cfg, "-in-place"}, "autovacuum"},
		{[]string{"rotate-key", "-config", cfg, "-new-key-file", filepath.Join(dir, "k")}, "not with [storage] driver = \"postgres\""},
	} {
		msg, err := command(t, tc.args...)
		if err == nil || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: err = %v (%q), want one that says %q", tc.args[0], err, msg, tc.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("backup wrote %s: %v", out, err)
	}
}
