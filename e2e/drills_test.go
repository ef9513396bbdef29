package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/verify"
	"github.com/webhookd/webhookd/verify/boltinbox"
)

// The drills check the delivery contract end to end, as a receiver lives
// it: the real webhookd (the binary on loopback, testConfig's millisecond
// schedule and 300ms attempt timeout) delivers to a real receiver built on
// verify.Handler over a boltinbox.Inbox, whose business effect is one
// write in its own bucket inside the inbox transaction, so effects can be
// counted exactly. Each drill keeps a record (request times, what the receiver
// answered and had recorded, the delivery's attempts and final state) and
// prints it when it fails.

// drillEffects is the receiver's own bucket: one entry per business
// effect, keyed by sequence, holding the event id.
var drillEffects = []byte("drill.effects")

var errBusinessWrite = errors.New("drill: the business write failed")

// drillAnswer is how a drill's receiver treats its n-th request (from 1):
// it answers w, usually through rc.process, and returns what it did, for
// the record.
type drillAnswer func(rc *drillReceiver, n int, w http.ResponseWriter, r *http.Request) string

// drillReceiver is a loopback receiver: verify.Handler over a
// boltinbox.Inbox in t.TempDir(), behind the drill's answer.
type drillReceiver struct {
	t      *testing.T
	inbox  *boltinbox.Inbox
	srv    *httptest.Server
	answer drillAnswer
	logs   *syncBuffer // verify's log

	// failWrites is how many business writes fail (after writing, so that
	// the rollback has something to undo) before they succeed.
	failWrites atomic.Int32

	mu       sync.Mutex
	handler  *verify.Receiver // set once the endpoint's secret is known
	secret   string
	requests []drillRequest
}

// drillRequest is the record of one request.
type drillRequest struct {
	at        time.Time
	id        string // webhook-id
	timestamp string // webhook-timestamp
	header    http.Header
	body      []byte
	did       string // what the receiver did

	processed bool   // verify's handler ran
	status    int    // what it answered (whether or not that was sent)
	answer    string // its body
	recorded  bool   // the inbox held the event just after it, before any answer was sent
	effects   int    // the event's business effects at that point
}

func newDrillReceiver(t *testing.T, answer drillAnswer) *drillReceiver {
	inbox, err := boltinbox.Open(filepath.Join(t.TempDir(), "receiver-inbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inbox.Close() })
	rc := &drillReceiver{t: t, inbox: inbox, answer: answer, logs: &syncBuffer{}}
	rc.srv = httptest.NewServer(rc)
	t.Cleanup(rc.srv.Close) // before the inbox closes: waits for handlers
	return rc
}

func (rc *drillReceiver) setSecret(secret string) {
	h := verify.Handler([]string{secret}, rc.inbox, rc.business)
	h.Logger = slog.New(slog.NewTextHandler(rc.logs, nil))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.handler, rc.secret = h, secret
}

// business is the receiver's code: one write in its own bucket, in the
// inbox transaction.
func (rc *drillReceiver) business(_ context.Context, tx verify.Tx, m verify.Message) error {
	b, err := tx.(*boltinbox.Tx).Bolt().CreateBucketIfNotExists(drillEffects)
	if err != nil {
		return err
	}
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	if err := b.Put(binary.BigEndian.AppendUint64(nil, seq), []byte(m.ID)); err != nil {
		return err
	}
	if rc.failWrites.Add(-1) >= 0 {
		return errBusinessWrite
	}
	return nil
}

func (rc *drillReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	rc.mu.Lock()
	rc.requests = append(rc.requests, drillRequest{
		at: time.Now(), id: r.Header.Get(verify.HeaderID), timestamp: r.Header.Get(verify.HeaderTimestamp),
		header: r.Header.Clone(), body: body,
	})
	n := len(rc.requests)
	rc.mu.Unlock()
	did := rc.answer(rc, n, w, r)
	rc.mu.Lock()
	rc.requests[n-1].did = did
	rc.mu.Unlock()
}

// process runs verify's handler on request n into a recorder and notes
// what it answered and what the inbox then held, before anything is sent.
func (rc *drillReceiver) process(n int, r *http.Request) *httptest.ResponseRecorder {
	rc.mu.Lock()
	h := rc.handler
	rc.mu.Unlock()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	rc.mu.Lock()
	q := &rc.requests[n-1]
	q.processed, q.status, q.answer = true, rec.Code, strings.TrimSpace(rec.Body.String())
	rc.mu.Unlock()
	recorded := rc.snapshot(n)
	if rec.Code/100 == 2 && !recorded {
		rc.t.Errorf("request %d: answered %d before the event was recorded", n, rec.Code)
	}
	return rec
}

// snapshot notes, on request n's record, whether the inbox holds its event
// and how many business effects the event has had; it returns the first.
func (rc *drillReceiver) snapshot(n int) bool {
	rc.mu.Lock()
	id := rc.requests[n-1].id
	rc.mu.Unlock()
	recorded, effects := rc.recorded(id), rc.effects(id)
	rc.mu.Lock()
	rc.requests[n-1].recorded, rc.requests[n-1].effects = recorded, effects
	rc.mu.Unlock()
	return recorded
}

var errProbe = errors.New("probe")

// recorded reports whether the inbox holds event id. It asks Receive with
// an empty body and a fn that fails: a recorded event is a conflict (its
// body differs), an unrecorded one runs fn, which rolls back.
func (rc *drillReceiver) recorded(id string) bool {
	_, err := rc.inbox.Receive(context.Background(), "", id, nil, func(verify.Tx) error { return errProbe })
	switch {
	case errors.Is(err, verify.ErrEventConflict):
		return true
	case errors.Is(err, errProbe):
		return false
	}
	rc.t.Errorf("probe of event %s: %v", id, err)
	return false
}

// effects counts the business effects of event id.
func (rc *drillReceiver) effects(id string) int {
	n := 0
	err := rc.inbox.DB().View(func(tx *bolt.Tx) error {
		b := tx.Bucket(drillEffects)
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			if string(v) == id {
				n++
			}
			return nil
		})
	})
	if err != nil {
		rc.t.Errorf("count effects: %v", err)
	}
	return n
}

func (rc *drillReceiver) got() []drillRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]drillRequest(nil), rc.requests...)
}

// respond sends what verify's handler answered.
func respond(w http.ResponseWriter, rec *httptest.ResponseRecorder) string {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
	return fmt.Sprintf("answered %d", rec.Code)
}

// processAndRespond is the plain receiver.
func processAndRespond(rc *drillReceiver, n int, w http.ResponseWriter, r *http.Request) string {
	return respond(w, rc.process(n, r))
}

// hangUp closes the connection without an answer.
func hangUp(t *testing.T, w http.ResponseWriter) string {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return "could not hang up: " + err.Error()
	}
	conn.Close()
	return "closed the connection without an answer"
}

// drill is one webhookd, one receiver, one event.
type drill struct {
	t     *testing.T
	in    *instance
	rc    *drillReceiver
	start time.Time
	event ingestResponse
}

// startDrill starts webhookd and a receiver answering with answer, and
// prints the drill's record at cleanup if the test failed.
func startDrill(t *testing.T, answer drillAnswer) *drill {
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	rc := newDrillReceiver(t, answer)
	ep := in.createEndpoint(rc.srv.URL+"/hooks", "payment.succeeded")
	rc.setSecret(ep.Secret)
	d := &drill{t: t, in: in, rc: rc}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(d.record())
		}
	})
	return d
}

// send ingests one event and returns its delivery's id.
func (d *drill) send() string {
	d.t.Helper()
	d.start = time.Now()
	d.event = d.in.ingest("payment.succeeded", `{"amount":4200,"currency":"eur"}`)
	if len(d.event.Deliveries) != 1 {
		d.t.Fatalf("ingest answered %+v, want one delivery", d.event)
	}
	return d.event.Deliveries[0].ID
}

// waitAttempts polls the delivery until it is in state with at least n
// attempts, or fails after 15s.
func (d *drill) waitAttempts(id string, n int, state string) deliveryView {
	d.t.Helper()
	var dv deliveryView
	if !poll(15*time.Second, func() bool { dv = d.in.delivery(id); return dv.State == state && len(dv.Attempts) >= n }) {
		d.t.Fatalf("delivery %s is %s with %d attempts, want %s with %d", id, dv.State, len(dv.Attempts), state, n)
	}
	return dv
}

// check asserts what every drill ends with: the delivery in final state
// after the attempts whose statuses are want (0: no response), the
// receiver asked once per attempt, every request of the one event, the
// event recorded once with exactly one business effect.
func (d *drill) check(dv deliveryView, want ...int) {
	d.t.Helper()
	var got []int
	for _, a := range dv.Attempts {
		got = append(got, a.Status)
	}
	if !equalInts(got, want) {
		d.t.Errorf("attempt statuses %v, want %v", got, want)
	}
	reqs := d.rc.got()
	if len(reqs) != len(dv.Attempts) {
		d.t.Errorf("%d requests for %d attempts", len(reqs), len(dv.Attempts))
	}
	for i, q := range reqs {
		if q.id != d.event.ID || !bytes.Equal(q.body, reqs[0].body) {
			d.t.Errorf("request %d: webhook-id %s or body differ from the event's", i+1, q.id)
		}
	}
	if !d.rc.recorded(d.event.ID) {
		d.t.Error("the inbox does not hold the event")
	}
	if n := d.rc.effects(d.event.ID); n != 1 {
		d.t.Errorf("%d business effects, want exactly 1", n)
	}
}

// record is the drill's log: every request and the delivery as webhookd
// has it now.
func (d *drill) record() string {
	var b strings.Builder
	fmt.Fprintf(&b, "drill record (times from the ingest at %s):\n", d.start.Format("15:04:05.000"))
	for i, q := range d.rc.got() {
		fmt.Fprintf(&b, "  request %d at +%s: webhook-id %s, webhook-timestamp %s: %s", i+1, q.at.Sub(d.start).Round(time.Millisecond), q.id, q.timestamp, q.did)
		if q.processed {
			fmt.Fprintf(&b, "; verify answered %d %q", q.status, q.answer)
		}
		fmt.Fprintf(&b, "; event recorded %v, business effects %d\n", q.recorded, q.effects)
	}
	if len(d.event.Deliveries) == 1 {
		var dv deliveryView
		status := d.in.call("GET", "/v1/tenants/acme/deliveries/"+d.event.Deliveries[0].ID, nil, &dv)
		fmt.Fprintf(&b, "  delivery %s (GET %d): state %s, reason %q, %d attempts, %d replays\n", dv.ID, status, dv.State, dv.Reason, len(dv.Attempts), len(dv.Replays))
		for _, a := range dv.Attempts {
			fmt.Fprintf(&b, "    cycle %d attempt %d: status %d, outcome %s, error %q\n", a.Cycle, a.Number, a.Status, a.Outcome, a.Error)
		}
	}
	if logs := d.rc.logs.String(); logs != "" {
		fmt.Fprintf(&b, "  receiver log:\n%s", logs)
	}
	return b.String()
}

// Drill 1: the receiver answers 502 (its proxy cannot reach it): webhookd
// retries, and the retry is processed once.
func TestDrill_502ThenDelivered(t *testing.T) {
	t.Parallel()
	d := startDrill(t, func(rc *drillReceiver, n int, w http.ResponseWriter, r *http.Request) string {
		if n == 1 {
			rc.snapshot(n)
			w.WriteHeader(http.StatusBadGateway)
			return "answered 502 without processing"
		}
		return processAndRespond(rc, n, w, r)
	})
	id := d.send()
	d.check(d.in.waitState(id, "succeeded"), 502, 200)
	if reqs := d.rc.got(); len(reqs) == 2 && (reqs[0].recorded || reqs[1].answer != "processed") {
		t.Errorf("the 502 left a record, or the retry was not processed")
	}
}

// Drill 2: the receiver answers only after webhookd's attempt timeout:
// webhookd gives up on it, retries, and the event has one effect whether
// the slow request was abandoned or finished anyway.
func TestDrill_TimeoutThenDelivered(t *testing.T) {
	t.Parallel()
	// waitForHangUp holds request 1 until webhookd's 300ms attempt timeout
	// closes the connection.
	waitForHangUp := func(t *testing.T, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
			t.Error("webhookd did not hang up on a request that outlived attempt_timeout")
		}
	}
	t.Run("the receiver stops when the sender hangs up", func(t *testing.T) {
		t.Parallel()
		firstDone := make(chan struct{})
		d := startDrill(t, func(rc *drillReceiver, n int, w http.ResponseWriter, r *http.Request) string {
			if n == 1 {
				defer close(firstDone)
				waitForHangUp(t, r)
				// verify's handler sees the cancelled request: nothing runs.
				respond(w, rc.process(n, r))
				return "answered after webhookd hung up"
			}
			<-firstDone // what request 1 left is noted before the retry is handled
			return processAndRespond(rc, n, w, r)
		})
		id := d.send()
		d.check(d.in.waitState(id, "succeeded"), 0, 200)
		reqs := d.rc.got()
		if len(reqs) == 2 && (reqs[0].recorded || reqs[0].effects != 0 || reqs[1].answer != "processed") {
			t.Error("the abandoned request left a record, or the retry was not processed")
		}
		if dv := d.in.delivery(id); !strings.Contains(dv.Attempts[0].Error, "timeout") {
			t.Errorf("attempt 1 error %q, want a timeout", dv.Attempts[0].Error)
		}
	})
	t.Run("the receiver finishes after the sender hung up", func(t *testing.T) {
		t.Parallel()
		firstDone := make(chan struct{})
		d := startDrill(t, func(rc *drillReceiver, n int, w http.ResponseWriter, r *http.Request) string {
			if n == 1 {
				defer close(firstDone)
				waitForHangUp(t, r)
				respond(w, rc.process(n, r.WithContext(context.WithoutCancel(r.Context()))))
				return "processed after webhookd hung up, answered nobody"
			}
			<-firstDone // the slow request commits before the retry is handled
			return processAndRespond(rc, n, w, r)
		})
		id := d.send()
		d.check(d.in.waitState(id, "succeeded"), 0, 200)
		reqs := d.rc.got()
		if len(reqs) == 2 && (!reqs[0].recorded || reqs[1].answer != "already processed") {
			t.Error("the slow request did not commit, or the retry was not a duplicate")
		}
	})
}

// Drill 3: the receiver's business write fails: its transaction rolls
// back and it answers 500, so no record of the event is left; the retry
// processes it once.
func TestDrill_BusinessWriteFails(t *testing.T) {
	t.Parallel()
	d := startDrill(t, processAndRespond)
	d.rc.failWrites.Store(1)
	id := d.send()
	d.check(d.in.waitState(id, "succeeded"), 500, 200)
	reqs := d.rc.got()
	if len(reqs) != 2 {
		t.FailNow()
	}
	if first := reqs[0]; first.status != 500 || first.recorded || first.effects != 0 {
		t.Errorf("after the failed write: status %d, event recorded %v, %d effects; want 500, false, 0", first.status, first.recorded, first.effects)
	}
	if second := reqs[1]; second.answer != "processed" || !second.recorded || second.effects != 1 {
		t.Errorf("the retry: %q, recorded %v, %d effects; want processed, true, 1", second.answer, second.recorded, second.effects)
	}
}

// Drill 4: the same event arrives twice, by a lost acknowledgement or a
// replay: one business effect, and a 2xx only once the event is recorded
// (process checks that on every request).
func TestDrill_DeliveredTwice(t *testing.T) {
	t.Parallel()
	t.Run("lost acknowledgement", func(t *testing.T) {
		t.Parallel()
		d := startDrill(t, func(rc *drillReceiver, n int, w http.ResponseWriter, r *http.Request) string {
			if n == 1 {
				rc.process(n, r) // committed
				return hangUp(t, w)
			}
			return processAndRespond(rc, n, w, r)
		})
		id := d.send()
		dv := d.in.waitState(id, "succeeded")
		d.check(dv, 0, 200)
		if !strings.Contains(dv.Attempts[0].Error, "connection error") {
			t.Errorf("attempt 1 error %q, want a connection error", dv.Attempts[0].Error)
		}
		reqs := d.rc.got()
		if len(reqs) == 2 && (reqs[0].answer != "processed" || !reqs[0].recorded || reqs[1].answer != "already processed") {
			t.Error("the first request was not processed, or the retry was not a duplicate")
		}
	})
	t.Run("replay: a duplicate, signed afresh", func(t *testing.T) {
		t.Parallel()
		d := startDrill(t, processAndRespond)
		id := d.send()
		d.in.waitState(id, "succeeded")
		first := d.rc.got()[0]
		ts := afterSecond(t, first.timestamp)
		d.in.mustCall(202, "POST", "/v1/tenants/acme/deliveries/"+id+"/replay", nil, nil)
		dv := d.waitAttempts(id, 2, "succeeded")
		d.check(dv, 200, 200)
		if len(dv.Replays) != 1 || dv.Attempts[1].Cycle != 2 {
			t.Errorf("replays %+v, attempts %+v: want one replay, its attempt in cycle 2", dv.Replays, dv.Attempts)
		}
		reqs := d.rc.got()
		if len(reqs) != 2 {
			t.FailNow()
		}
		again := reqs[1]
		if again.answer != "already processed" || again.status != 200 {
			t.Errorf("the replay was answered %d %q, want 200 already processed", again.status, again.answer)
		}
		if again.id != first.id || !bytes.Equal(again.body, first.body) {
			t.Error("the replay changed the event id or the body")
		}
		if againTS, _ := strconv.ParseInt(again.timestamp, 10, 64); againTS <= ts || again.header.Get(verify.HeaderSignature) == first.header.Get(verify.HeaderSignature) {
			t.Errorf("the replay reused timestamp %s or the signature", first.timestamp)
		}
		d.rc.mu.Lock()
		v := verify.Verifier{Secrets: []string{d.rc.secret}}
		d.rc.mu.Unlock()
		m, err := v.Verify(again.header, again.body)
		if err != nil || m.ID != d.event.ID || m.Timestamp.Unix() <= ts || m.Scheme != verify.SchemeStandard {
			t.Errorf("verify of the replay: %+v, %v; want %s, signed after %d", m, err, d.event.ID, ts)
		}
		stripeOnly := again.header.Clone()
		stripeOnly.Del(verify.HeaderSignature)
		if m, err := v.Verify(stripeOnly, again.body); err != nil || m.Timestamp.Unix() <= ts {
			t.Errorf("verify of the replay's X-Webhook-Signature: %+v, %v", m, err)
		}
	})
}
