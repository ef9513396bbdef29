// Package verify is the receiving side of webhookd's signatures: it checks
// a delivery's signature, records the event in an idempotent inbox, and
// runs the receiver's code once per event however often it is delivered.
// It imports only the standard library, so a receiver can use it alone;
// the inbox it records in is an interface, and verify/boltinbox implements
// it in a bbolt file.
//
// # Signatures
//
// Every delivery carries two signatures over the exact body bytes:
//
//   - Standard Webhooks: webhook-id (the event id), webhook-timestamp
//     (Unix seconds) and webhook-signature, space-separated entries
//     "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>", where key is the
//     base64 decoding of the secret after "whsec_".
//   - X-Webhook-Signature: "t=<unix>,v1=<hex HMAC-SHA256(secret,
//     t.body)>", keyed with the whole secret string, as Stripe computes
//     it (stripe-go's webhook.ValidatePayload accepts it).
//
// There is one entry per active secret, so two while a secret is being
// rotated. A Verifier holds the receiver's active secrets and accepts a
// message if any entry matches any secret, compared in constant time,
// and if its timestamp is within Tolerance (5 minutes) of the clock in
// either direction. Verification errors wrap one of ErrNoSignature,
// ErrMalformedHeader, ErrBadSignature, ErrTimestampTooOld and
// ErrTimestampInFuture; their text never holds a signature or a secret.
// Verify the raw body before decoding it: re-encoded JSON does not verify.
//
// # Inbox and tasks
//
// The sender retries until it gets a 2xx, so any event may arrive twice.
// Inbox.Receive records (sender, event id) and runs the receiver's code in
// the same transaction: a duplicate does not run it, a failure rolls back
// both so the redelivery runs it, and a concurrent duplicate waits for the
// first one's outcome. boltinbox.Inbox keeps the inbox in a bbolt file,
// and the receiver's own writes go through boltinbox.Tx.Bolt into the same
// transaction.
//
// External effects (an email, a payment) cannot be rolled back, so they
// are enqueued as tasks with the event (Tx.EnqueueTask) and done after the
// commit by a worker: boltinbox.Inbox.ClaimTask (pending → processing,
// one more attempt), the call with Task.IdempotencyKey, then CompleteTask
// (→ completed) or FailTask (→ pending at a retry time, or failed). A pending task is
// queued, not done, and the inbox never says otherwise.
//
// # Order
//
// webhookd does not deliver in order: a retried or replayed event can
// arrive after a newer one about the same thing. ParseEnvelope gives the
// envelope's Created time; in fn, boltinbox.Tx.Advance(object, version)
// says whether the event is newer than the last one applied to that object
// (an order, a customer) and records a conflict when it is not, so that
// the receiver skips the write instead of putting back older state. The
// late event is still processed (answered 2xx): retrying it cannot help.
// boltinbox.Inbox.Conflicts lists what was skipped.
//
// # Trying it
//
// "webhookd receive -secret whsec_…" runs a Handler over a boltinbox.Inbox
// on 127.0.0.1:9000 and prints one line per request: the event id and
// type, and whether it verified and was new or a duplicate, or why it was
// rejected.
//
// # A receiver
//
// A receiver opens its inbox, mounts Handler on the path it gave the
// sender, with the endpoint's secret, and runs a task worker. The handler
// answers 200 once the event is recorded (and on duplicates), 401
// "invalid signature" for any verification failure, 400 for a body that is
// not a JSON envelope whose "id" is the signed id, and 500 when its code or
// the inbox fails, so that the sender tries again:
//
//	package main
//
//	import (
//		"context"
//		"encoding/json"
//		"log"
//		"net/http"
//		"os"
//		"time"
//
//		"github.com/webhookd/webhookd/verify"
//		"github.com/webhookd/webhookd/verify/boltinbox"
//	)
//
//	func main() {
//		inbox, err := boltinbox.Open("inbox.db")
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer inbox.Close()
//
//		secrets := []string{os.Getenv("WEBHOOK_SECRET")} // add the old one while rotating
//		h := verify.Handler(secrets, inbox, func(ctx context.Context, tx verify.Tx, m verify.Message) error {
//			var ev struct {
//				Type string          `json:"type"`
//				Data json.RawMessage `json:"data"`
//			}
//			if err := json.Unmarshal(m.Body, &ev); err != nil {
//				return err
//			}
//			// A local write, atomic with the inbox record.
//			b, err := tx.(*boltinbox.Tx).Bolt().CreateBucketIfNotExists([]byte("orders"))
//			if err != nil {
//				return err
//			}
//			if err := b.Put([]byte(m.ID), m.Body); err != nil {
//				return err
//			}
//			// An external effect, done later by the worker.
//			_, err = tx.EnqueueTask("email", []byte(ev.Type))
//			return err
//		})
//		go work(inbox)
//		http.Handle("POST /webhooks", h)
//		log.Fatal(http.ListenAndServe(":8080", nil))
//	}
//
//	func work(inbox *boltinbox.Inbox) {
//		ctx := context.Background()
//		for {
//			t, err := inbox.ClaimTask(ctx, time.Minute)
//			if err != nil { // verify.ErrNoTask: nothing due
//				time.Sleep(time.Second)
//				continue
//			}
//			if err := sendEmail(ctx, t.IdempotencyKey, t.Payload); err != nil {
//				retry := time.Now().Add(time.Duration(t.Attempts) * time.Minute)
//				inbox.FailTask(ctx, t, err, retry)
//				continue
//			}
//			inbox.CompleteTask(ctx, t)
//		}
//	}
//
// sendEmail stands for any call that accepts an idempotency key. A
// receiver that verifies without the inbox calls Verifier.Verify with the
// request's headers and raw body; Sign makes signed requests for its tests.
package verify
