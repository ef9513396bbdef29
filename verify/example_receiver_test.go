package verify_test

import (
	"context"
	"log"
	"net/http"
	"os"
	"strings"

	"github.com/webhookd/webhookd/verify"
	"github.com/webhookd/webhookd/verify/boltinbox"
)

// Example_receiver is the receiver of the README's "Receiving webhooks"
// section (a test in package main keeps the two equal). It is compiled,
// not run: it listens until killed.
func Example_receiver() {
	inbox, err := boltinbox.Open("data/inbox.db")
	if err != nil {
		log.Fatal(err)
	}
	defer inbox.Close()
	secrets := strings.Split(os.Getenv("WEBHOOK_SECRETS"), ",") // new,old while rotating

	http.Handle("POST /hooks", verify.Handler(secrets, inbox, func(ctx context.Context, tx verify.Tx, m verify.Message) error {
		// Runs once per event id, in the inbox's transaction: an error rolls
		// back this write and the record, answers 500, and webhookd retries.
		orders, err := tx.(*boltinbox.Tx).Bolt().CreateBucketIfNotExists([]byte("orders"))
		if err != nil {
			return err
		}
		return orders.Put([]byte(m.ID), m.Body)
	}))
	log.Fatal(http.ListenAndServe("127.0.0.1:9000", nil))
}
