package boltinbox

import (
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/verify"
)

// TestOpen_v1File opens testdata/inbox-v1.db.gz, an inbox file in the v1
// layout of doc.go as verify.BoltInbox wrote it, with the clock at
// 1_700_000_000 plus one second per call:
//
//	acme/evt_2  Advance("order:1001", 20) applied, orders[evt_2], task sms: claimed once, failed for good ("boom")
//	acme/evt_1  Advance("order:1001", 10) refused: a Conflict, no writes
//	""/evt_3    orders[evt_3], tasks email (pending) and ledger (completed, never claimed)
//
// Every record must read back as written, and the inbox must go on from
// there: duplicates, claims and the ordering check.
func TestOpen_v1File(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.db")
	gunzip(t, "testdata/inbox-v1.db.gz", path)
	in := mustOpenInboxAt(t, path)
	ctx := t.Context()
	at := func(s int64) time.Time { return time.Unix(1_700_000_000+s, 0) }
	bodies := map[[2]string]string{
		{"acme", "evt_2"}: `{"id":"evt_2","type":"order.shipped"}`,
		{"acme", "evt_1"}: `{"id":"evt_1","type":"order.paid"}`,
		{"", "evt_3"}:     `{"id":"evt_3","type":"ping"}`,
	}

	for k, body := range bodies {
		res, err := in.Receive(ctx, k[0], k[1], []byte(body), func(verify.Tx) error {
			t.Errorf("%q: fn ran for a recorded event", k)
			return nil
		})
		if res != verify.AlreadyProcessed || err != nil {
			t.Errorf("%q: %v, %v; want already processed", k, res, err)
		}
		if _, err := in.Receive(ctx, k[0], k[1], []byte(body+" "), func(verify.Tx) error { return nil }); !errors.Is(err, verify.ErrEventConflict) {
			t.Errorf("%q with another body: %v, want ErrEventConflict", k, err)
		}
	}

	type task struct {
		name     string
		state    verify.TaskState
		attempts int
		due      time.Time
		lastErr  string
		created  time.Time
		updated  time.Time
	}
	for _, c := range []struct {
		sender, eventID string
		want            []task
	}{
		{"acme", "evt_1", nil},
		{"acme", "evt_2", []task{{"sms", verify.TaskFailed, 1, time.Time{}, "boom", at(1), at(5)}}},
		{"", "evt_3", []task{
			{"email", verify.TaskPending, 0, at(3), "", at(3), at(3)},
			{"ledger", verify.TaskCompleted, 0, time.Time{}, "", at(3), at(6)},
		}},
	} {
		ts, err := in.Tasks(ctx, c.sender, c.eventID)
		if err != nil || len(ts) != len(c.want) {
			t.Fatalf("tasks of %s/%s: %+v, %v; want %d", c.sender, c.eventID, ts, err, len(c.want))
		}
		for i, w := range c.want {
			g := ts[i]
			got := task{g.Name, g.State, g.Attempts, g.Due, g.LastError, g.CreatedAt, g.UpdatedAt}
			if got.name != w.name || got.state != w.state || got.attempts != w.attempts || !got.due.Equal(w.due) ||
				got.lastErr != w.lastErr || !got.created.Equal(w.created) || !got.updated.Equal(w.updated) {
				t.Errorf("task %s/%s: got %+v, want %+v", c.sender, c.eventID, got, w)
			}
			if p := "payload of " + w.name; string(g.Payload) != p || g.IdempotencyKey != verify.IdempotencyKey(c.sender, c.eventID, w.name) {
				t.Errorf("task %s: payload %q, key %s", w.name, g.Payload, g.IdempotencyKey)
			}
		}
	}

	cs, err := in.Conflicts(ctx, "acme", "")
	want := Conflict{Sender: "acme", Object: "order:1001", EventID: "evt_1", Version: 10, CurrentEventID: "evt_2", CurrentVersion: 20, At: at(2)}
	if err != nil || len(cs) != 1 || !cs[0].At.Equal(want.At) {
		t.Fatalf("conflicts %+v, %v; want [%+v]", cs, err, want)
	}
	if cs[0].At = want.At; cs[0] != want {
		t.Errorf("conflict %+v, want %+v", cs[0], want)
	}

	var orders []string
	in.DB().View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("orders")); b != nil {
			b.ForEach(func(k, _ []byte) error { orders = append(orders, string(k)); return nil })
		}
		return nil
	})
	if got := strings.Join(orders, ","); got != "evt_2,evt_3" {
		t.Errorf("the receiver's orders bucket holds %s, want evt_2,evt_3", got)
	}

	// Going on: the recorded version still orders new events, and the
	// pending task is the one due.
	if ok, err := apply(t, in, "acme", "evt_4", "order:1001", 15, false); ok || err != nil {
		t.Errorf("version 15 after 20: applied %v, %v", ok, err)
	}
	if ok, err := apply(t, in, "acme", "evt_5", "order:1001", 30, false); !ok || err != nil {
		t.Errorf("version 30 after 20: applied %v, %v", ok, err)
	}
	tk, err := in.ClaimTask(ctx, time.Minute)
	if err != nil || tk.Name != "email" || tk.State != verify.TaskProcessing || tk.Attempts != 1 {
		t.Fatalf("claim: %+v, %v; want email, processing, attempt 1", tk, err)
	}
	if err := in.CompleteTask(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if _, err := in.ClaimTask(ctx, time.Minute); !errors.Is(err, verify.ErrNoTask) {
		t.Errorf("second claim: %v, want ErrNoTask", err)
	}
}

// gunzip writes the gzip file src, decompressed, to dst.
func gunzip(tb testing.TB, src, dst string) {
	tb.Helper()
	f, err := os.Open(src)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		tb.Fatal(err)
	}
}
