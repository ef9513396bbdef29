package verify_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/webhookd/webhookd/verify"
	"github.com/webhookd/webhookd/verify/boltinbox"
)

func ExampleVerifier_Verify() {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	body := []byte(`{"id":"evt_1","type":"ping","data":{}}`)
	sent := time.Unix(1_700_000_000, 0)
	h, _ := verify.Sign([]string{secret}, "evt_1", sent, body) // what webhookd sends

	v := verify.Verifier{
		Secrets: []string{secret},
		Now:     func() time.Time { return sent.Add(30 * time.Second) },
	}
	m, err := v.Verify(h, body)
	fmt.Println(m.ID, m.Timestamp.Unix(), m.Scheme, err)

	_, err = v.Verify(h, []byte(`{"id":"evt_1","type":"ping","data":{"x":1}}`))
	fmt.Println(errors.Is(err, verify.ErrBadSignature))

	v.Now = func() time.Time { return sent.Add(time.Hour) }
	_, err = v.Verify(h, body)
	fmt.Println(err)
	// Output:
	// evt_1 1700000000 standard-webhooks <nil>
	// true
	// verify: timestamp too old: 1h0m0s behind the clock, tolerance 5m0s
}

func ExampleHandler() {
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
		fmt.Println("handling", m.ID)
		_, err := tx.EnqueueTask("email", m.Body) // done later, by a worker
		return err
	})
	h.Logger = slog.New(slog.DiscardHandler)

	body := []byte(`{"id":"evt_1","type":"user.created","data":{}}`)
	deliver := func(b []byte) {
		sig, _ := verify.Sign([]string{secret}, "evt_1", time.Now(), body)
		req := httptest.NewRequest("POST", "/webhooks", bytes.NewReader(b))
		req.Header = sig
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		fmt.Print(w.Code, " ", w.Body.String())
	}
	deliver(body)
	deliver(body) // a redelivery
	deliver([]byte(`{"id":"evt_1","type":"user.deleted","data":{}}`))

	t, _ := inbox.ClaimTask(context.Background(), time.Minute)
	fmt.Println(t.Name, t.State, t.Attempts)
	inbox.CompleteTask(context.Background(), t)
	t, _ = inbox.Task(context.Background(), "", "evt_1", "email")
	fmt.Println(t.Name, t.State)
	// Output:
	// handling evt_1
	// 200 processed
	// 200 already processed
	// 401 invalid signature
	// email processing 1
	// email completed
}
