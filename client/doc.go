// Package client is a typed Go client for webhookd's HTTP API.
//
// It imports nothing of the server: only the standard library, so a
// program that sends events or reads the delivery log can depend on it
// alone.
//
// # Getting started
//
// Make a Client with the server's base URL and a bearer token, then call
// the method named after what you want to do:
//
//	c, err := client.New("https://webhookd.internal:8080", client.Options{Token: os.Getenv("WEBHOOKD_TOKEN")})
//	if err != nil { ... }
//	res, err := c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]any{"id": "in_1"}})
//
// Every method takes a context; cancelling it ends the request and any
// wait between retries.
//
// # Errors
//
// Every error answer of the API (an application/problem+json body) is
// returned as a *Problem: use errors.As to read its Code, the Field at
// fault and, for 429 and 503, RetryAfter. Code values are the Code
// constants of this package, stable across releases:
//
//	var p *client.Problem
//	if errors.As(err, &p) && p.Code == client.CodeUnknownEventType { ... }
//
// Errors of the transport (connection refused, a cancelled context) are
// returned as they are, wrapped with the method and path.
//
// # Listings
//
// Every listing is an iterator (iter.Seq2[T, error]) that fetches one page
// at a time and follows the server's next_cursor until has_more is false:
//
//	for d, err := range c.Deliveries(ctx, "acme", client.DeliveryFilter{State: client.StateDead}) {
//		if err != nil { ... } // the walk stops after an error
//		fmt.Println(d.ID, d.Reason)
//	}
//
// The reconciliation feed (Client.Feed) is the exception: it stops at the
// end of the event log for now, and its Cursor says where to resume later.
//
// # Retries
//
// An answer 429 or 503 is retried after the wait its Retry-After header
// asks for, up to Options.MaxAttempts attempts in all and only when the
// wait is at most Options.MaxRetryWait, and only for requests that are
// safe to repeat: every GET but Ready; every PUT and DELETE (the Put and
// Delete methods, and RevokeAccessToken), idempotent by HTTP's definition
// (RFC 9110 §9.2.2); and Ingest, which always sends an Idempotency-Key
// (one is generated when the EventInput has none, and the same key is
// sent on every attempt), so a retried ingest stores one event. A repeat
// leaves the server as one request would, but its answer may differ when
// the first attempt took effect and only its answer was lost: a PUT then
// reports an update (created false), and a DELETE may report not found.
//
// Other requests are sent once: a POST that creates or acts
// (CreateEndpoint, IssueAccessToken, CreatePortalLink, SendTestEvent,
// RotateSecret, Replay, ...) could be done twice if it committed before
// the 503, and a PATCH (the Update methods) is not idempotent by definition.
// Their 429 or 503 is returned as a Problem with its RetryAfter, for the
// caller to decide.
package client
