package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/webhookd/webhookd/client"
)

// Send an event. The idempotency key makes the call safe to repeat: a
// retry (by the client after a 503, or by you after a crash) stores the
// event once.
func ExampleClient_Ingest() {
	baseURL, token, stop := startExampleServer() // your server's URL and token
	defer stop()
	ctx := context.Background()

	c, err := client.New(baseURL, client.Options{Token: token})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Ingest(ctx, "acme", client.EventInput{
		Type:           "invoice.paid",
		Data:           map[string]any{"invoice": "in_1", "amount": 4200},
		IdempotencyKey: "invoice-in_1-paid",
	})
	if p, ok := errors.AsType[*client.Problem](err); ok {
		fmt.Println("refused:", p.Code, p.Detail) // CodeUnknownEventType, say
		return
	}
	if err != nil {
		log.Fatal(err) // the server could not be reached
	}
	fmt.Println(len(res.Deliveries), "delivery", res.Deliveries[0].State)

	// The same key again: the same event, not a second one.
	again, _ := c.Ingest(ctx, "acme", client.EventInput{
		Type:           "invoice.paid",
		Data:           map[string]any{"invoice": "in_1", "amount": 4200},
		IdempotencyKey: "invoice-in_1-paid",
	})
	fmt.Println("same event:", again.ID == res.ID, "replayed:", again.Replayed)
	// Output:
	// 1 delivery pending
	// same event: true replayed: true
}

// Start a background task (here a range replay of dead letters; a
// backfill and a tenant's deletion answer one too) and wait for it: the
// call answers at once, the task goes on in the server, across its
// restarts, and WaitTask reads it until it has ended.
func ExampleClient_WaitTask() {
	baseURL, token, stop := startExampleServer()
	defer stop()
	ctx := context.Background()
	c, err := client.New(baseURL, client.Options{Token: token})
	if err != nil {
		log.Fatal(err)
	}
	task, err := c.ReplayDeadLetters(ctx, "acme", client.DeadLetterRange{Since: time.Now().Add(-time.Hour)})
	if err != nil {
		log.Fatal(err) // CodeLimitReached: the tenant runs as many tasks as it may
	}
	fmt.Println(task.Kind, task.State)
	task, err = c.WaitTask(ctx, task, 0)
	if err != nil {
		log.Fatal(err)
	}
	if task.State == client.TaskFailed {
		log.Fatal(task.Error)
	}
	fmt.Println(task.State, "replayed:", task.Done, "of", *task.Total)
	// Output:
	// dead_letters.replay running
	// succeeded replayed: 0 of 0
}

// Walk the delivery log. The iterator fetches a page at a time (Limit
// per page) and follows the server's cursor to the last page.
func ExampleClient_Deliveries() {
	baseURL, token, stop := startExampleServer()
	defer stop()
	ctx := context.Background()
	c, err := client.New(baseURL, client.Options{Token: token})
	if err != nil {
		log.Fatal(err)
	}
	for i := range 3 {
		if _, err := c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]int{"n": i}}); err != nil {
			log.Fatal(err)
		}
	}

	n := 0
	for d, err := range c.Deliveries(ctx, "acme", client.DeliveryFilter{Type: "invoice.paid", Limit: 2}) {
		if err != nil {
			log.Fatal(err) // the walk ends after an error
		}
		n++
		fmt.Println(n, d.EventType, d.State)
	}
	// Output:
	// 1 invoice.paid pending
	// 2 invoice.paid pending
	// 3 invoice.paid pending
}

// Read the events ingested since the last run: the feed stops at the end
// of the log, and its cursor is where the next run starts.
func ExampleFeed() {
	baseURL, token, stop := startExampleServer()
	defer stop()
	ctx := context.Background()
	c, err := client.New(baseURL, client.Options{Token: token})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]int{}}); err != nil {
		log.Fatal(err)
	}

	cursor := "" // saved by the previous run; "" the first time
	feed := c.Feed("acme", client.FeedFilter{Cursor: cursor})
	for ev, err := range feed.Events(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Event.Type, len(ev.Event.Raw) > 0)
	}
	cursor = feed.Cursor() // save it for the next run
	fmt.Println("resume from a cursor:", cursor != "")
	// Output:
	// invoice.paid true
	// resume from a cursor: true
}
