package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/webhookd/webhookd/verify"
)

// receiver is a loopback endpoint that checks every request's signatures
// with the official Standard Webhooks and Stripe libraries and answers
// what answer says for the n-th request (1-based).
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	secret string
	answer func(n int, w http.ResponseWriter, r *http.Request)

	mu       sync.Mutex
	requests []received
}

type received struct {
	at        time.Time
	id        string
	timestamp string
	body      []byte
	sigErr    error
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{t: t, answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		secret := rc.secret
		rq := received{at: time.Now(), id: r.Header.Get("webhook-id"), timestamp: r.Header.Get("webhook-timestamp"), body: body}
		if wh, err := standardwebhooks.NewWebhook(secret); err != nil {
			rq.sigErr = err
		} else if err := wh.Verify(body, r.Header); err != nil {
			rq.sigErr = fmt.Errorf("standard webhooks: %w", err)
		} else if err := stripewebhook.ValidatePayloadWithTolerance(body, r.Header.Get("X-Webhook-Signature"), secret, 5*time.Minute); err != nil {
			rq.sigErr = fmt.Errorf("stripe scheme: %w", err)
		}
		rc.requests = append(rc.requests, rq)
		n := len(rc.requests)
		rc.mu.Unlock()
		rc.answer(n, w, r)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) setSecret(s string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secret = s
}

func (rc *receiver) got() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.requests...)
}

// checkSignatures fails the test for any request whose signature did not
// verify with the official libraries.
func (rc *receiver) checkSignatures() {
	rc.t.Helper()
	for i, r := range rc.got() {
		if r.sigErr != nil {
			rc.t.Errorf("request %d: signature rejected: %v", i+1, r.sigErr)
		}
	}
}

func status(code int) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

// eventReceiver is an endpoint's receiving side: a loopback httptest server
// that verifies every request with verify.Verifier against the secrets
// it holds, answers a verified request as answer says, and records what
// it received. A request that does not verify is answered 401 and counted
// as a problem; so is a body that differs from the one first received for
// the same event, and (on an ordered receiver) an event seen for the
// first time behind a later one its line already acknowledged.
type eventReceiver struct {
	name    string
	srv     *httptest.Server
	ordered bool // the endpoint orders its deliveries (ordering key or endpoint)
	byKey   bool // one line per ordering key, rather than one line
	// answer returns the status for a verified request; nil: 204.
	answer func(verify.Envelope) int

	mu sync.Mutex
	// headers, when set (setHeaders), must arrive with every request:
	// the endpoint's custom headers.
	headers  map[string]string
	arrivals []time.Time // every request's, in order
	secrets  []string
	events   map[string]*receipt
	lines    map[string]uint64 // line → the highest sequence answered 2xx
	requests int
	problems []string
}

// receipt is what a receiver got of one event.
type receipt struct {
	body     []byte // the first body received
	env      verify.Envelope
	requests int
	status   int       // the last answer
	first    time.Time // the first request's arrival
	firstAck time.Time // the first 2xx answer; zero: none yet
	lastAck  time.Time
	acks     int // 2xx answers
}

// newEventReceiver starts a receiver on 127.0.0.1; it stops when t ends.
func newEventReceiver(t testing.TB, name string, answer func(verify.Envelope) int) *eventReceiver {
	rc := &eventReceiver{name: name, answer: answer, events: map[string]*receipt{}, lines: map[string]uint64{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

// URL is where the endpoint points.
func (rc *eventReceiver) URL() string { return rc.srv.URL + "/hooks/" + rc.name }

// setSecrets sets the secrets a request may be signed with: during a
// rotation's grace window, the new one and the old.
func (rc *eventReceiver) setSecrets(secrets ...string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secrets = secrets
}

// setHeaders sets the headers every request must carry.
func (rc *eventReceiver) setHeaders(h map[string]string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.headers = h
}

// busiest returns the most requests that arrived within any window of
// length d.
func (rc *eventReceiver) busiest(d time.Duration) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	most, from := 0, 0
	for i, at := range rc.arrivals {
		for at.Sub(rc.arrivals[from]) >= d {
			from++
		}
		most = max(most, i-from+1)
	}
	return most
}

func (rc *eventReceiver) problem(format string, args ...any) {
	if len(rc.problems) < 20 {
		rc.problems = append(rc.problems, rc.name+": "+fmt.Sprintf(format, args...))
	}
}

func (rc *eventReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // webhookd went away mid-request (killed, or the attempt timed out)
	}
	arrived := time.Now()
	rc.mu.Lock()
	rc.requests++
	rc.arrivals = append(rc.arrivals, arrived)
	v := verify.Verifier{Secrets: rc.secrets}
	for name, want := range rc.headers {
		if got := r.Header.Get(name); got != want {
			// The value is a test's, not a secret, but say only how it differs.
			rc.problem("request %s: header %s of %d bytes, want the endpoint's %d", r.Header.Get("webhook-id"), name, len(got), len(want))
		}
	}
	rc.mu.Unlock()
	msg, err := v.Verify(r.Header, body)
	var env verify.Envelope
	if err == nil {
		env, err = verify.ParseEnvelope(body)
	}
	if err == nil && env.ID != msg.ID {
		err = fmt.Errorf("webhook-id %s, envelope id %s", msg.ID, env.ID)
	}
	if err != nil {
		rc.mu.Lock()
		rc.problem("request %s: %v", r.Header.Get("webhook-id"), err)
		rc.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	status := http.StatusNoContent
	if rc.answer != nil {
		status = rc.answer(env)
	}

	rc.mu.Lock()
	defer rc.mu.Unlock()
	rec := rc.events[env.ID]
	if rec == nil {
		rec = &receipt{body: body, env: env, first: arrived}
		rc.events[env.ID] = rec
		if line, ok := rc.line(env); ok && env.Sequence < rc.lines[line] {
			rc.problem("event %s (sequence %d) first arrived after sequence %d of its line %q was acknowledged", env.ID, env.Sequence, rc.lines[line], line)
		}
	} else if !bytes.Equal(rec.body, body) {
		rc.problem("event %s: body %q, earlier %q", env.ID, body, rec.body)
	}
	rec.requests++
	rec.status = status
	if status >= 200 && status < 300 {
		now := time.Now()
		if rec.firstAck.IsZero() {
			rec.firstAck = now
		}
		rec.lastAck = now
		rec.acks++
		if line, ok := rc.line(env); ok {
			rc.lines[line] = max(rc.lines[line], env.Sequence)
		}
	}
	w.WriteHeader(status)
}

// line returns the line env is ordered in at this receiver's endpoint,
// if it is ordered there.
func (rc *eventReceiver) line(env verify.Envelope) (string, bool) {
	switch {
	case !rc.ordered:
		return "", false
	case !rc.byKey:
		return "endpoint", true
	case env.OrderingKey != "":
		return "key:" + env.OrderingKey, true
	}
	return "", false
}

// acknowledged returns when the receiver last answered event id with a
// 2xx, and whether it did.
func (rc *eventReceiver) acknowledged(id string) (time.Time, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rec := rc.events[id]
	if rec == nil || rec.lastAck.IsZero() {
		return time.Time{}, false
	}
	return rec.lastAck, true
}

// received returns a copy of what the receiver got, by event ID.
func (rc *eventReceiver) received() map[string]receipt {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make(map[string]receipt, len(rc.events))
	for id, rec := range rc.events {
		out[id] = *rec
	}
	return out
}

// trouble returns the problems seen so far (at most 20).
func (rc *eventReceiver) trouble() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.problems...)
}
