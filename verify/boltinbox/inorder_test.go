package boltinbox

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/verify"
)

// orderedReceiver serves a verify.Receiver with Ordered set over a real
// inbox file, and records the sequences Handle processed, in order.
type orderedReceiver struct {
	t      *testing.T
	in     *Inbox
	url    string
	secret string
	mu     sync.Mutex
	seen   []uint64
	fail   func(verify.Message) error // nil: process every event
}

func newOrderedReceiver(t *testing.T, in verify.Inbox) *orderedReceiver {
	r := &orderedReceiver{t: t, secret: "whsec_" + strings.Repeat("QUJD", 8)}
	if b, ok := in.(*Inbox); ok {
		r.in = b
	}
	rc := verify.Handler([]string{r.secret}, in, func(_ context.Context, _ verify.Tx, m verify.Message) error {
		if r.fail != nil {
			if err := r.fail(m); err != nil {
				return err
			}
		}
		r.mu.Lock()
		r.seen = append(r.seen, m.Sequence)
		r.mu.Unlock()
		return nil
	})
	rc.Ordered = true
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// send delivers event seq of key (no key: "") with previous in the
// webhook-previous-sequence header (0: none), as webhookd sends it, and
// returns the status.
func (r *orderedReceiver) send(seq uint64, key string, previous uint64, extra ...string) int {
	r.t.Helper()
	id := fmt.Sprintf("evt_%d", seq)
	body := fmt.Sprintf(`{"id":%q,"type":"order.updated","created":"2026-12-03T10:00:00.000Z","sequence":%d`, id, seq)
	if key != "" {
		body += fmt.Sprintf(`,"ordering_key":%q`, key)
	}
	body += `,"api_version":"v1","data":{}}`
	h, err := verify.Sign([]string{r.secret}, id, time.Now(), []byte(body))
	if err != nil {
		r.t.Fatal(err)
	}
	if previous != 0 {
		h.Set(verify.HeaderPreviousSequence, strconv.FormatUint(previous, 10))
	}
	for i := 0; i+1 < len(extra); i += 2 {
		h.Set(extra[i], extra[i+1])
	}
	req, _ := http.NewRequest(http.MethodPost, r.url, strings.NewReader(body))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestReceiver_Ordered: with Ordered, an event whose previous event in
// its key is not processed is answered 425 and not processed; once the
// previous one is, it is. Events older than the first the inbox checked,
// events without a key, and other keys pass.
func TestReceiver_Ordered(t *testing.T) {
	r := newOrderedReceiver(t, MustOpenInbox(t))
	steps := []struct {
		seq      uint64
		key      string
		previous uint64
		want     int
	}{
		{5, "order_1", 0, 200},   // the first checked: the floor is 5
		{9, "order_1", 7, 425},   // 7 not processed
		{8, "order_2", 6, 425},   // 6 not processed, above the floor
		{7, "order_1", 5, 200},   // 5 processed
		{9, "order_1", 7, 200},   // retried: 7 processed now
		{9, "order_1", 7, 200},   // a duplicate: already processed
		{3, "order_3", 2, 200},   // 2 is below the floor: sent before the receiver kept order
		{10, "", 0, 200},         // no key: not ordered
		{6, "order_2", 0, 200},   // order_2's first
		{8, "order_2", 6, 200},   // now in order
		{12, "order_1", 11, 425}, // 11 never came
	}
	for _, s := range steps {
		if got := r.send(s.seq, s.key, s.previous); got != s.want {
			t.Errorf("event %d of %q after %d: %d, want %d", s.seq, s.key, s.previous, got, s.want)
		}
	}
	if want := []uint64{5, 7, 9, 3, 10, 6, 8}; !slices.Equal(r.seen, want) {
		t.Errorf("processed %v, want %v", r.seen, want)
	}
	for key, want := range map[string]uint64{"order_1": 9, "order_2": 8, "order_3": 3} {
		if got, ok, err := r.in.Processed(t.Context(), "", key); err != nil || !ok || got != want {
			t.Errorf("Processed(%s) = %d, %v, %v; want %d", key, got, ok, err, want)
		}
	}
	if _, ok, _ := r.in.Processed(t.Context(), "", "order_9"); ok {
		t.Error("Processed(order_9) found a key never seen")
	}
}

// TestReceiver_OrderedRollsBack: a refused or failed event records no
// progress, so its successors wait for its retry, also when it is the
// first the inbox sees (the floor stands); a malformed header is 400.
func TestReceiver_OrderedRollsBack(t *testing.T) {
	r := newOrderedReceiver(t, MustOpenInbox(t))
	failing := map[uint64]bool{1: true, 2: true}
	r.fail = func(m verify.Message) error {
		if failing[m.Sequence] {
			return errBoom
		}
		return nil
	}
	steps := []struct {
		seq, previous uint64
		want          int
		then          func()
	}{
		{1, 0, 500, nil}, // the first the inbox sees fails
		{2, 1, 425, func() { delete(failing, 1) }}, // its floor stands: 1 is not processed
		{1, 0, 200, nil},
		{2, 1, 500, nil},
		{3, 2, 425, func() { delete(failing, 2) }}, // 2 failed: no progress
		{2, 1, 200, nil},
		{3, 2, 200, nil},
	}
	for _, s := range steps {
		if got := r.send(s.seq, "k", s.previous); got != s.want {
			t.Errorf("event %d after %d: %d, want %d", s.seq, s.previous, got, s.want)
		}
		if s.then != nil {
			s.then()
		}
	}
	if got := r.send(4, "k", 3, verify.HeaderPreviousSequence, "three"); got != 400 {
		t.Errorf("malformed %s: %d, want 400", verify.HeaderPreviousSequence, got)
	}
	if !slices.Equal(r.seen, []uint64{1, 2, 3}) {
		t.Errorf("processed %v, want [1 2 3]", r.seen)
	}
}

// TestReceiver_OrderedNeedsOrderTx: Ordered over an inbox that cannot
// keep order answers 500 to a keyed event (a misconfiguration, retried)
// and processes one without a key.
func TestReceiver_OrderedNeedsOrderTx(t *testing.T) {
	for name, in := range map[string]verify.Inbox{
		"not an OrderInbox":     plainInbox{MustOpenInbox(t)},
		"its Tx not an OrderTx": plainTxInbox{MustOpenInbox(t)},
	} {
		t.Run(name, func(t *testing.T) {
			r := newOrderedReceiver(t, in)
			if got := r.send(1, "k", 0); got != 500 {
				t.Errorf("keyed event: %d, want 500", got)
			}
			if got := r.send(2, "", 0); got != 200 {
				t.Errorf("event without a key: %d, want 200", got)
			}
		})
	}
}

// plainInbox is only a verify.Inbox.
type plainInbox struct{ in *Inbox }

func (p plainInbox) Receive(ctx context.Context, sender, id string, body []byte, fn func(verify.Tx) error) (verify.Result, error) {
	return p.in.Receive(ctx, sender, id, body, fn)
}

// plainTxInbox is an OrderInbox that hands fn a Tx that is only a
// verify.Tx.
type plainTxInbox struct{ in *Inbox }

type plainTx struct{ verify.Tx }

func (p plainTxInbox) Receive(ctx context.Context, sender, id string, body []byte, fn func(verify.Tx) error) (verify.Result, error) {
	return p.in.Receive(ctx, sender, id, body, func(tx verify.Tx) error { return fn(plainTx{tx}) })
}

func (p plainTxInbox) StartOrder(ctx context.Context, sender string, sequence uint64) error {
	return p.in.StartOrder(ctx, sender, sequence)
}
