package engine_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
)

// headerReceiver is an http.RoundTripper that answers every request in
// the process with a status and response headers: no connection is
// made (see bubbleClient).
type headerReceiver func(*http.Request) (int, http.Header)

func (f headerReceiver) RoundTrip(r *http.Request) (*http.Response, error) {
	status, h := f(r)
	if r.Body != nil {
		r.Body.Close()
	}
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{
		Status: http.StatusText(status), StatusCode: status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader("")), ContentLength: 0, Request: r,
	}, nil
}

// TestDispatcher_ReceiverAbort: a receiver's webhook-delivery: abort
// (whatever its case) on a failed attempt ends the delivery's retries at
// once, dead with the reason saying so, after that one attempt; on a 2xx
// it changes nothing (2xx = received).
func TestDispatcher_ReceiverAbort(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		value     string
		wantState engine.State
	}{
		{"503 abort", http.StatusServiceUnavailable, "abort", engine.StateDead},
		{"500 ABORT, spaced", http.StatusInternalServerError, " ABORT ", engine.StateDead},
		{"429 Abort with Retry-After", http.StatusTooManyRequests, "Abort", engine.StateDead},
		{"404 abort", http.StatusNotFound, "abort", engine.StateDead},
		{"200 abort: received", http.StatusOK, "abort", engine.StateSucceeded},
		{"503 abort-message, Svix's name", http.StatusServiceUnavailable, "abort-message", engine.StateDead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var requests atomic.Int64
				answer := headerReceiver(func(*http.Request) (int, http.Header) {
					requests.Add(1)
					h := http.Header{}
					h.Set("Webhook-Delivery", tc.value)
					h.Set("Retry-After", "1")
					return tc.status, h
				})
				node := startAnsweredNode(t, answer)
				ctx := t.Context()
				res, err := node.Service.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)})
				if err != nil {
					t.Fatal(err)
				}
				d := waitState(t, node.Service, res.Deliveries[0].ID, tc.wantState)
				time.Sleep(2 * time.Hour) // past every retry the default schedule would make
				synctest.Wait()
				if n := requests.Load(); n != 1 || len(d.Attempts) != 1 {
					t.Fatalf("%d requests, %d attempts; want exactly 1", n, len(d.Attempts))
				}
				if tc.wantState != engine.StateDead {
					return
				}
				const want = "the receiver asked to stop retrying (webhook-delivery: abort)"
				if !strings.Contains(d.Reason, want) || !strings.Contains(d.Attempts[0].Error, want) {
					t.Errorf("reason %q, attempt error %q; want both to say %q", d.Reason, d.Attempts[0].Error, want)
				}
				if d.Attempts[0].Outcome != engine.OutcomePermanent {
					t.Errorf("attempt outcome %s, want permanent", d.Attempts[0].Outcome)
				}
			})
		})
	}
}

// TestDispatcher_ReceiverDisables: a receiver's webhook-delivery:
// disable (Svix's delivery control) disables its endpoint, as a 410
// does: on a 2xx the event is received and the endpoint disabled, with
// the reason saying who asked; on a 503 the delivery is not retried but
// held, paused, with the endpoint's next deliveries, until it is
// enabled. No request reaches it meanwhile.
func TestDispatcher_ReceiverDisables(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		wantFirst engine.State
	}{
		{"200 disable", http.StatusOK, engine.StateSucceeded},
		{"503 Disable", http.StatusServiceUnavailable, engine.StatePaused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var requests atomic.Int64
				answer := headerReceiver(func(*http.Request) (int, http.Header) {
					requests.Add(1)
					h := http.Header{}
					h.Set("Webhook-Delivery", "later, Disable") // any case, among other values
					return tc.status, h
				})
				node := startAnsweredNode(t, answer)
				ctx := t.Context()
				first, err := node.Service.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)})
				if err != nil {
					t.Fatal(err)
				}
				waitState(t, node.Service, first.Deliveries[0].ID, tc.wantFirst)
				ep, err := node.Service.Endpoint(ctx, "acme", first.Deliveries[0].EndpointID)
				if err != nil {
					t.Fatal(err)
				}
				const want = "the receiver asked to be disabled (webhook-delivery: disable)"
				if !ep.Disabled || ep.DisabledReason != want {
					t.Fatalf("endpoint disabled %v, reason %q; want disabled, %q", ep.Disabled, ep.DisabledReason, want)
				}
				next, err := node.Service.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)})
				if err != nil {
					t.Fatal(err)
				}
				waitState(t, node.Service, next.Deliveries[0].ID, engine.StatePaused)
				time.Sleep(2 * time.Hour) // past every retry the default schedule would make
				synctest.Wait()
				if n := requests.Load(); n != 1 {
					t.Fatalf("%d requests; want 1: none while the endpoint is disabled", n)
				}
			})
		})
	}
}

// startAnsweredNode starts, in a synctest bubble, a node on a memstore
// with one worker whose requests answer answers, and acme's endpoint on
// every type; it is stopped when t ends.
func startAnsweredNode(t *testing.T, answer headerReceiver) *engine.Node {
	t.Helper()
	node := engine.NewNode(memstore.New(), engine.NodeOptions{
		Dispatcher: engine.DispatcherOptions{Workers: 1, Targets: bubbleTargets, Client: &http.Client{Transport: answer}},
		Service:    engine.ServiceOptions{Targets: bubbleTargets},
	})
	acmeEndpoint(t, node.Service, bubbleURL)
	if err := node.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Stop(context.Background()) })
	return node
}
