package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/client"
)

// This file is the README's "Sending events reliably" example, run against
// the real service: the app writes its business change and an outbox row
// in one transaction of its own database (bbolt here; any database with
// transactions works), and a relay posts each row to webhookd with
// Idempotency-Key = the row's id, marking it sent only after the 2xx.

var (
	bucketOrders = []byte("orders")
	bucketOutbox = []byte("outbox") // row id (8 bytes) -> event JSON; deleted once sent
)

// placeOrder is the app's business write: the order and its outbox row
// commit together, or neither does.
func placeOrder(app *bolt.DB, orderID string, amount int) error {
	return app.Update(func(tx *bolt.Tx) error {
		orders, _ := tx.CreateBucketIfNotExists(bucketOrders)
		outbox, _ := tx.CreateBucketIfNotExists(bucketOutbox)
		if err := orders.Put([]byte(orderID), []byte(fmt.Sprint(amount))); err != nil {
			return err
		}
		seq, _ := outbox.NextSequence()
		row := binary.BigEndian.AppendUint64(nil, seq)
		event := fmt.Sprintf(`{"type":"payment.succeeded","data":{"order":%q,"amount":%d}}`, orderID, amount)
		return outbox.Put(row, []byte(event))
	})
}

// relay posts every outbox row to webhookd, through the project's Go
// client, and deletes the row once webhookd acknowledged it.
// crashAfterPost simulates a crash between the POST and the mark-sent
// (the relay dies, the row stays).
func relay(ctx context.Context, app *bolt.DB, webhookd, token string, crashAfterPost bool) error {
	type row struct{ id, event []byte }
	var rows []row
	app.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketOutbox); b != nil {
			b.ForEach(func(k, v []byte) error {
				rows = append(rows, row{bytes.Clone(k), bytes.Clone(v)})
				return nil
			})
		}
		return nil
	})
	c, err := client.New(webhookd, client.Options{Token: token})
	if err != nil {
		return err
	}
	for _, r := range rows {
		var ev struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(r.event, &ev); err != nil {
			return err
		}
		_, err := c.Ingest(ctx, "acme", client.EventInput{Type: ev.Type, Data: ev.Data, IdempotencyKey: fmt.Sprintf("outbox-%x", r.id)})
		if err != nil {
			return err // try again later: the row is still there
		}
		if crashAfterPost {
			return errors.New("relay crashed after the POST, before marking the row sent")
		}
		if err := app.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketOutbox).Delete(r.id) }); err != nil {
			return err
		}
	}
	return nil
}

func TestOutboxRelay_CrashBetweenPostAndMarkSent(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	rc := newReceiver(t, status(200))
	ep := in.createEndpoint(rc.srv.URL, "payment.succeeded")
	rc.setSecret(ep.Secret)

	app, err := bolt.Open(filepath.Join(t.TempDir(), "app.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	for i := range 3 {
		if err := placeOrder(app, fmt.Sprintf("ord_%d", i), 100*(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if err := relay(ctx, app, in.base, testToken, true); err == nil {
		t.Fatal("the crashing relay did not crash")
	}
	if err := relay(ctx, app, in.base, testToken, false); err != nil {
		t.Fatal(err)
	}
	app.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(bucketOutbox).Stats().KeyN; n != 0 {
			t.Errorf("%d outbox rows left unsent", n)
		}
		return nil
	})
	// Three orders, three events, three deliveries: the row posted twice
	// (before and after the crash) made one event.
	waitFor(t, "three deliveries", func() bool { return len(rc.got()) >= 3 })
	seen := map[string]int{}
	for _, r := range rc.got() {
		seen[r.id]++
	}
	if len(seen) != 3 || len(rc.got()) != 3 {
		t.Errorf("receiver got %d requests for %d events, want 3 and 3", len(rc.got()), len(seen))
	}
	rc.checkSignatures()
}
