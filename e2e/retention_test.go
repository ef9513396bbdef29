package e2e

// Retention end to end, with windows of seconds and the pruner running
// every second: what it leaves behind is a sound database for every
// command that copies one, and a line it unblocks goes on.

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/storage"
)

// retentionConfig is testConfig with the retention windows succeeded and
// dead, an idempotency window of a second (the least both may be), and
// the pruner running every second.
func retentionConfig(t *testing.T, succeeded, dead string) string {
	t.Helper()
	return configWith(t, testConfig, map[string]any{
		"ingest.idempotency_window": "1s",
		"retention.succeeded":       succeeded,
		"retention.dead":            dead,
		"retention.interval":        "1s",
	})
}

// waitPruned waits until the events ids are gone from the API (404), as
// retention deletes them.
func (in *instance) waitPruned(ids ...string) {
	in.t.Helper()
	for _, id := range ids {
		waitFor(in.t, "retention to delete event "+id, func() bool {
			return in.call("GET", "/v1/tenants/acme/events/"+id, nil, nil) == 404
		})
	}
}

// TestRetention_PrunedDatabaseCopies: retention keeps two dead letters
// (sequences 1 and 4) and deletes the two events between them, which
// succeeded, so the tenant's sequences have a gap. Every command that
// writes a copy of the database checks the copy before it puts it in
// place, and takes this one as sound: the hot backup, the backup of the
// stopped file, compaction to a file and in place, and rotate-key; the
// node starts on the result with the kept events.
func TestRetention_PrunedDatabaseCopies(t *testing.T) {
	skipOnPostgres(t, "backup, compact and rotate-key of the bbolt file")
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "webhookd.db")
	in := startInstance(t, dir, retentionConfig(t, "1s", "1h"))
	in.setup()
	ok, failing := newReceiver(t, status(200)), newReceiver(t, status(500))
	in.createEndpoint(ok.srv.URL, "payment.succeeded")
	in.createEndpoint(failing.srv.URL, "invoice.paid")

	var kept, pruned []string
	for i, typ := range []string{"invoice.paid", "payment.succeeded", "payment.succeeded", "invoice.paid"} {
		ev := in.ingest(typ, `{"n":1}`)
		if i == 0 || i == 3 {
			in.waitState(ev.Deliveries[0].ID, "dead")
			kept = append(kept, ev.ID)
		} else {
			in.waitState(ev.Deliveries[0].ID, "succeeded")
			pruned = append(pruned, ev.ID)
		}
	}
	in.waitPruned(pruned...)

	sound := func(what, path string) {
		t.Helper()
		db, err := storage.Open(path, storage.Options{})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer db.Close()
		if err := db.Check(); err != nil {
			t.Errorf("%s fails its check: %v", what, err)
		}
	}
	hot := filepath.Join(t.TempDir(), "hot.db")
	if msg, err := command(t, "backup", "-o", hot, "-url", in.base, "-token", testToken); err != nil {
		t.Fatalf("hot backup of a pruned database: %v\n%s", err, msg)
	}
	sound("the hot backup", hot)
	in.stop()

	cold, compacted := filepath.Join(t.TempDir(), "cold.db"), filepath.Join(t.TempDir(), "compacted.db")
	for _, args := range [][]string{
		{"backup", "-o", cold, "-db", dbPath},
		{"compact", "-o", compacted, "-db", dbPath},
		{"compact", "-in-place", "-db", dbPath},
	} {
		if msg, err := command(t, args...); err != nil {
			t.Fatalf("%s of a pruned database: %v\n%s", strings.Join(args[:2], " "), err, msg)
		}
	}
	sound("the backup of the stopped file", cold)
	sound("the compacted copy", compacted)

	var k [32]byte
	rand.Read(k[:])
	keyPath := filepath.Join(t.TempDir(), "new.key")
	if err := os.WriteFile(keyPath, []byte(base64.StdEncoding.EncodeToString(k[:])), 0o600); err != nil {
		t.Fatal(err)
	}
	if msg, err := command(t, "rotate-key", "-db", dbPath, "-new-key-file", keyPath); err != nil {
		t.Fatalf("rotate-key of a pruned database: %v\n%s", err, msg)
	}

	in = startInstance(t, dir, retentionConfig(t, "1s", "1h")+"[storage]\nsecret_key_file = \""+keyPath+"\"\n")
	for _, id := range kept {
		in.mustCall(200, "GET", "/v1/tenants/acme/events/"+id, nil, nil)
	}
	for _, id := range pruned {
		in.mustCall(404, "GET", "/v1/tenants/acme/events/"+id, nil, nil)
	}
}

// TestRetention_UnblocksLine: an endpoint ordered as a whole with on_dead
// block, whose first event dies and blocks the line with the second
// waiting behind it. Retention deletes the dead head once its second of
// dead retention has passed, and the line goes on: the second event is
// delivered, without a restart.
func TestRetention_UnblocksLine(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), retentionConfig(t, "1h", "1s"))
	in.setup()
	const attempts = 4 // testConfig's schedule has 3 waits
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= attempts { // every attempt of the first event
			w.WriteHeader(500)
			return
		}
		w.WriteHeader(200)
	})
	var ep endpointCreated
	in.mustCall(201, "POST", "/v1/tenants/acme/endpoints", map[string]any{
		"url": rc.srv.URL, "event_types": []string{"*"}, "ordering": "endpoint", "on_dead": "block"}, &ep)
	rc.setSecret(ep.Secret)

	head := in.ingest("invoice.paid", `{"n":1}`)
	next := in.ingest("invoice.paid", `{"n":2}`)
	in.waitState(head.Deliveries[0].ID, "dead")
	if d := in.delivery(next.Deliveries[0].ID); d.State != "waiting" {
		t.Fatalf("the delivery behind the dead head is %s, want waiting", d.State)
	}
	in.waitPruned(head.ID)
	pruned := time.Now()
	in.waitState(next.Deliveries[0].ID, "succeeded")
	got := rc.got()
	if len(got) != attempts+1 || !strings.Contains(string(got[attempts].body), `"n":2`) {
		t.Fatalf("the receiver got %d requests, the last %s; want %d attempts of the first event, then the second", len(got), got[len(got)-1].body, attempts)
	}
	t.Logf("the second event reached the receiver %v after its head's event was seen gone", got[attempts].at.Sub(pruned).Round(time.Millisecond))
	rc.checkSignatures()
}
