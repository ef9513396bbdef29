package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webhookd/webhookd/verify"
)

// Fault is one kind of failure a receiver answers with, and how often.
type Fault struct {
	Status  int     // the HTTP status answered; 0 with Timeout
	Timeout bool    // hang until the sender gives up
	P       float64 // probability per request, in [0, 1]
}

// Faults is a fault mix: each request draws one number and gets the first
// fault whose cumulative probability covers it, or a 204.
type Faults []Fault

// ParseFaults reads a fault mix like "502:5%,timeout:1%,429:1%,410:0.5%":
// comma-separated KIND:PERCENT, where KIND is an HTTP status (300-599) or
// "timeout". The percentages must add up to at most 100. "" is no faults.
func ParseFaults(s string) (Faults, error) {
	var out Faults
	total := 0.0
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		kind, pct, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("fault %q: want KIND:PERCENT, like 502:5%%", part)
		}
		p, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(pct), "%"), 64)
		if err != nil || p < 0 || p > 100 {
			return nil, fmt.Errorf("fault %q: percentage must be a number from 0 to 100", part)
		}
		f := Fault{P: p / 100}
		switch kind = strings.TrimSpace(kind); kind {
		case "timeout":
			f.Timeout = true
		default:
			code, err := strconv.Atoi(kind)
			if err != nil || code < 300 || code > 599 {
				return nil, fmt.Errorf("fault %q: kind must be an HTTP status from 300 to 599 or \"timeout\"", part)
			}
			f.Status = code
		}
		total += p
		out = append(out, f)
	}
	if total > 100+1e-9 {
		return nil, fmt.Errorf("faults add up to %g%%, more than 100%%", total)
	}
	return out, nil
}

// String returns the mix in ParseFaults's syntax.
func (fs Faults) String() string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		kind := strconv.Itoa(f.Status)
		if f.Timeout {
			kind = "timeout"
		}
		parts[i] = kind + ":" + strconv.FormatFloat(f.P*100, 'g', -1, 64) + "%"
	}
	return strings.Join(parts, ",")
}

// pick returns the fault r (uniform in [0, 1)) falls on, if any.
func (fs Faults) pick(r float64) (Fault, bool) {
	for _, f := range fs {
		if r < f.P {
			return f, true
		}
		r -= f.P
	}
	return Fault{}, false
}

// receiver is one loopback endpoint. It answers by its fault mix (or hangs
// on every request) and counts every request per event id, so that the
// harness knows what was delivered, when, and how often, independently of
// webhookd's own records.
type receiver struct {
	index   int
	url     string
	srv     *http.Server
	faults  Faults
	hang    bool
	delay   time.Duration // how long each request takes before its answer
	release chan struct{} // closed by close: hanging handlers return

	// verifier checks every verifyEvery-th request's signature (0: none).
	verifier    atomic.Pointer[verify.Verifier]
	verifyEvery int64
	badSig      atomic.Int64

	requests  atomic.Int64
	okPairs   atomic.Int64  // distinct events answered 2xx
	delivered *atomic.Int64 // the same, summed over a receiverSet

	mu    sync.Mutex
	pairs map[string]*pair // by webhook-id (the event id)
	// arrivals, when logOrder, is every request answered 2xx in the order
	// the receiver answered them.
	logOrder bool
	arrivals []arrival
}

// arrival is one request a receiver answered 2xx.
type arrival struct {
	id  string // webhook-id
	seq uint64 // webhook-sequence: the event's place in its tenant
}

// pair is what one receiver saw of one event.
type pair struct {
	first    time.Time // arrival of the first request
	ok       time.Time // arrival of the first request answered 2xx
	requests int32
	oks      int32 // requests answered 2xx; more than 1 is a duplicate
}

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	n := rc.requests.Add(1)
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	_, err := buf.ReadFrom(r.Body)
	defer bodyPool.Put(buf)
	if err != nil {
		return
	}
	if rc.verifyEvery > 0 && n%rc.verifyEvery == 0 {
		if v := rc.verifier.Load(); v != nil {
			if _, err := v.Verify(r.Header, buf.Bytes()); err != nil {
				rc.badSig.Add(1)
			}
		}
	}
	if rc.delay > 0 {
		t := time.NewTimer(rc.delay)
		select {
		case <-r.Context().Done():
		case <-rc.release:
		case <-t.C:
		}
		t.Stop()
	}
	status := http.StatusNoContent
	if f, ok := rc.faults.pick(rand.Float64()); rc.hang || ok {
		switch {
		case rc.hang || f.Timeout:
			select {
			case <-r.Context().Done():
			case <-rc.release:
			}
			status = http.StatusServiceUnavailable
		default:
			status = f.Status
		}
	}
	var seq uint64
	if rc.logOrder {
		seq, _ = strconv.ParseUint(r.Header.Get(verify.HeaderSequence), 10, 64)
	}
	rc.record(r.Header.Get(verify.HeaderID), seq, arrived, status < 300)
	w.WriteHeader(status)
}

// record counts a request for event id, and logs its arrival when ok and
// rc.logOrder. It runs before the answer is written, so a sender that
// waits for the answer to one event before it sends the next finds them
// logged in that order.
func (rc *receiver) record(id string, seq uint64, at time.Time, ok bool) {
	rc.mu.Lock()
	if ok && rc.logOrder {
		rc.arrivals = append(rc.arrivals, arrival{id: id, seq: seq})
	}
	p := rc.pairs[id]
	if p == nil {
		p = &pair{first: at}
		rc.pairs[id] = p
	}
	p.requests++
	first := false
	if ok {
		p.oks++
		if p.oks == 1 {
			p.ok, first = at, true
		}
	}
	rc.mu.Unlock()
	if first {
		rc.okPairs.Add(1)
		rc.delivered.Add(1)
	}
}

// receiverSet is the endpoints of one run.
type receiverSet struct {
	rs        []*receiver
	delivered atomic.Int64
}

// startReceivers starts n receivers on 127.0.0.1 with the fault mix; the
// first hang of them hang on every request. Each of configure is applied
// to each receiver before it serves.
func startReceivers(n, hang int, faults Faults, configure ...func(*receiver)) (*receiverSet, error) {
	s := &receiverSet{}
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.close()
			return nil, fmt.Errorf("receiver: %w", err)
		}
		rc := &receiver{
			index: i, url: "http://" + ln.Addr().String() + "/hooks/" + strconv.Itoa(i),
			faults: faults, hang: i < hang, release: make(chan struct{}),
			verifyEvery: 64, delivered: &s.delivered, pairs: make(map[string]*pair),
		}
		for _, f := range configure {
			f(rc)
		}
		rc.srv = &http.Server{Handler: rc, ReadHeaderTimeout: 10 * time.Second, ErrorLog: discardLog}
		go rc.srv.Serve(ln)
		s.rs = append(s.rs, rc)
	}
	return s, nil
}

// close releases hanging handlers and stops every receiver.
func (s *receiverSet) close() {
	for _, rc := range s.rs {
		close(rc.release)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := rc.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			rc.srv.Close()
		}
		cancel()
	}
}

// shiftClock makes the receivers check signature timestamps against a
// clock shift ahead, as webhookd's own (backlog runs it an hour ahead).
func (s *receiverSet) shiftClock(shift time.Duration) {
	for _, rc := range s.rs {
		if v := rc.verifier.Load(); v != nil {
			nv := *v
			nv.Now = func() time.Time { return time.Now().Add(shift) }
			rc.verifier.Store(&nv)
		}
	}
}

// receiverCounts sums what the receivers saw.
type receiverCounts struct {
	Requests     int64 // every request
	Delivered    int64 // distinct (event, endpoint) answered 2xx at least once
	FirstAttempt int64 // of those, on their first request
	Retried      int64 // of those, after at least one failed request
	Duplicates   int64 // extra 2xx answers to an (event, endpoint) already answered 2xx
	BadSignature int64 // sampled requests whose signature did not verify
}

// counts sums what the receivers saw; the deliveries of events only
// when only is not nil (the acknowledged ones: an event the load sent as
// its window closed may be committed and delivered without a 202 read).
// Requests and BadSignature count every request.
func (s *receiverSet) counts(only map[string]bool) receiverCounts {
	var c receiverCounts
	for _, rc := range s.rs {
		c.Requests += rc.requests.Load()
		c.BadSignature += rc.badSig.Load()
		rc.mu.Lock()
		for id, p := range rc.pairs {
			if p.oks == 0 || only != nil && !only[id] {
				continue
			}
			c.Delivered++
			c.Duplicates += int64(p.oks - 1)
			if p.requests == p.oks {
				c.FirstAttempt++
			} else {
				c.Retried++
			}
		}
		rc.mu.Unlock()
	}
	return c
}

// deliveredTimes calls fn for each (event, endpoint) answered 2xx, with the
// arrival time of its first 2xx, on the receivers for which use is true.
func (s *receiverSet) deliveredTimes(use func(i int) bool, fn func(eventID string, at time.Time)) {
	for _, rc := range s.rs {
		if !use(rc.index) {
			continue
		}
		rc.mu.Lock()
		for id, p := range rc.pairs {
			if p.oks > 0 {
				fn(id, p.ok)
			}
		}
		rc.mu.Unlock()
	}
}

// orderViolations counts, over every receiver of s, the arrivals of an
// event after a later one (a higher sequence) of the same line, where
// lineOf names an event's line by its id. A repeat of the latest
// (at-least-once) is not one.
func (s *receiverSet) orderViolations(lineOf func(eventID string) string) int64 {
	var n int64
	for _, rc := range s.rs {
		latest := make(map[string]uint64)
		rc.mu.Lock()
		for _, a := range rc.arrivals {
			line := lineOf(a.id)
			if a.seq < latest[line] {
				n++
			} else {
				latest[line] = a.seq
			}
		}
		rc.mu.Unlock()
	}
	return n
}

// discardLog silences net/http's own logging in receivers and servers.
var discardLog = log.New(io.Discard, "", 0)
