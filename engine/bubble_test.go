package engine_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
)

// Tests that run in a testing/synctest bubble control time: every
// goroutine of the dispatcher, its timers and the store run on the
// bubble's fake clock, which moves only when all of them are durably
// blocked, so a test waits for "nothing more happens" with synctest.Wait
// and for a retry by sleeping, at no cost in real time. What they may not
// use is a real network peer: a goroutine blocked on a socket is never
// durably blocked, so synctest.Wait would wait for it forever. A file is
// fine (a syscall returns, and synctest.Wait waits for it), so some run
// on the bbolt file; the receiver is always an answer func, called in the
// process (bubbleClient).

// receiverFunc is an http.RoundTripper that answers every request in the
// process: no connection is made.
type receiverFunc func(*http.Request) int

func (f receiverFunc) RoundTrip(r *http.Request) (*http.Response, error) {
	status := f(r)
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{
		Status: http.StatusText(status), StatusCode: status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), ContentLength: 0, Request: r,
	}, nil
}

// bubbleClient is the attempts' client in a bubble: answer gives each
// request's status (it may read the request's body).
func bubbleClient(answer func(*http.Request) int) *http.Client {
	return &http.Client{
		Transport:     receiverFunc(answer),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// bubbleTargets lets the service take the endpoints' loopback URLs; no
// request is ever made to them (bubbleClient answers).
var bubbleTargets = engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}

// bubbleURL is an endpoint URL for bubbleClient: nothing listens there.
const bubbleURL = "http://127.0.0.1:9/hook"

// bubbleNode returns a node over store (nil: a new memstore) whose
// attempts answer answers, with opts' other fields as given. It is not
// started.
func bubbleNode(t *testing.T, store engine.Store, answer func(*http.Request) int, opts engine.DispatcherOptions) *engine.Node {
	t.Helper()
	if store == nil {
		store = memstore.New()
	}
	opts.Client = bubbleClient(answer)
	opts.Targets = bubbleTargets
	return engine.NewNode(store, engine.NodeOptions{Dispatcher: opts, Service: engine.ServiceOptions{Targets: bubbleTargets}})
}

// ok200 answers every request 200.
func ok200(*http.Request) int { return http.StatusOK }
