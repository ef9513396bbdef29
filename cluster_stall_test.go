package main

// Cluster mode when a client or a node stalls: a client that gives up
// mid-ingest, and a node frozen (SIGSTOP) inside a transaction.

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/postgres/pgtest"
)

// metricLine returns the line of the metrics text that starts with
// prefix and contains every one of parts, or "".
func metricLine(text, prefix string, parts ...string) string {
	for l := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(l, prefix) {
			continue
		}
		found := true
		for _, p := range parts {
			found = found && strings.Contains(l, p)
		}
		if found {
			return l
		}
	}
	return ""
}

// TestCluster_ClientGivesUpMidIngest: a client that cancels its ingest
// while the node waits for the database (here a lock the test holds on
// the events table) is not an internal error: no ERROR line in the log,
// no 500 in the metrics (the request is counted as 499, the client's
// own close), and the node goes on acknowledging once the lock is gone.
func TestCluster_ClientGivesUpMidIngest(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t)
	in := startInstance(t, t.TempDir(), clusterConfig(t, schema, 30*time.Second, ""))
	in.setup()
	db := clusterDB(t, pgtest.URL(t), schema)

	tx, err := db.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), "LOCK TABLE events IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", in.base+"/v1/tenants/acme/events", strings.NewReader(`{"type":"payment.succeeded","data":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the ingest was answered %d while the events table was locked", resp.StatusCode)
	}

	// The node's handler ends when its database call does: then the
	// request is counted, with the status it was given.
	var line string
	if !poll(10*time.Second, func() bool {
		resp, err := http.Get(in.base + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		line = metricLine(string(b), "webhookd_http_requests_total{", `method="POST"`, `route="/v1/tenants/:tenant/events"`)
		return line != ""
	}) {
		t.Fatal("the cancelled ingest was not counted within 10 s")
	}
	if !strings.Contains(line, `code="499"`) {
		t.Errorf("the cancelled ingest was counted as %s, want code 499", line)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	in.ingest("payment.succeeded", `{}`)
	for l := range strings.SplitSeq(in.logs.String(), "\n") {
		if strings.Contains(l, "level=ERROR") {
			t.Errorf("logged at error level: %s", l)
		}
	}
}
