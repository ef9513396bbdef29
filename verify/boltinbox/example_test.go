package boltinbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/webhookd/webhookd/verify"
	"github.com/webhookd/webhookd/verify/boltinbox"
)

func ExampleTx_Advance() {
	dir, _ := os.MkdirTemp("", "inbox")
	defer os.RemoveAll(dir)
	inbox, err := boltinbox.Open(filepath.Join(dir, "inbox.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer inbox.Close()

	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	h := verify.Handler([]string{secret}, inbox, func(ctx context.Context, tx verify.Tx, m verify.Message) error {
		env, err := verify.ParseEnvelope(m.Body)
		if err != nil {
			return err
		}
		var order struct {
			ID string `json:"order"`
		}
		if err := json.Unmarshal(env.Data, &order); err != nil {
			return err
		}
		// Only an event newer than the last one applied to the order may
		// change it.
		btx := tx.(*boltinbox.Tx)
		newer, err := btx.Advance("order:"+order.ID, env.Created.UnixNano())
		if err != nil || !newer {
			return err // a late event: processed, not applied, conflict recorded
		}
		b, err := btx.Bolt().CreateBucketIfNotExists([]byte("orders"))
		if err != nil {
			return err
		}
		return b.Put([]byte(order.ID), []byte(env.Type))
	})
	h.Logger = slog.New(slog.DiscardHandler)

	deliver := func(id, typ, created string) {
		body := []byte(`{"id":"` + id + `","type":"` + typ + `","created":"` + created + `","api_version":"v1","data":{"order":"1001"}}`)
		req := httptest.NewRequest("POST", "/webhooks", bytes.NewReader(body))
		req.Header, _ = verify.Sign([]string{secret}, id, time.Now(), body)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		fmt.Print(id, " ", w.Code, " ", w.Body.String())
	}
	deliver("evt_2", "order.shipped", "2026-12-02T14:35:11.000Z")
	deliver("evt_1", "order.paid", "2026-12-02T14:35:10.000Z") // retried, arrives late

	cs, _ := inbox.Conflicts(context.Background(), "", "order:1001")
	for _, c := range cs {
		fmt.Printf("%s kept; %s not applied\n", c.CurrentEventID, c.EventID)
	}
	// Output:
	// evt_2 200 processed
	// evt_1 200 processed
	// evt_2 kept; evt_1 not applied
}
