package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The end-to-end tests of what a hostile receiver or a curious tenant
// could get out of webhookd's HTTP client: README "Security" names each.

// hostileHeaderReceiver is a raw TCP endpoint on 127.0.0.1 that answers
// every request with a status line and size bytes of headers. It returns
// the endpoint URL and a count of the requests it read.
func hostileHeaderReceiver(t *testing.T, size int) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int64
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	line := "X-Pad: " + strings.Repeat("h", 1000) + "\r\n"
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed at cleanup
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				requests.Add(1)
				w := bufio.NewWriterSize(c, 64<<10)
				w.WriteString("HTTP/1.1 200 OK\r\n")
				for n := 0; n < size; n += len(line) {
					if _, err := w.WriteString(line); err != nil {
						return // webhookd hung up
					}
				}
				w.WriteString("Content-Length: 0\r\n\r\n")
				w.Flush()
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/hooks", &requests
}

// TestSecurity_OversizedResponseHeaders: a receiver that answers with
// megabytes of headers fails the attempt ("response headers larger than 64
// KiB", retried like a connection error), and webhookd reads no more than
// the bound: what it allocates over all the attempts is far below what the
// headers weigh.
//
// Not parallel: it counts the allocations of the whole webhookd process.
func TestSecurity_OversizedResponseHeaders(t *testing.T) {
	const size = 4 << 20
	const events = 8
	// A generous attempt timeout: a slow machine must not turn the
	// refusal into a timeout.
	in := startInstance(t, t.TempDir(), strings.Replace(testConfig, `attempt_timeout = "300ms"`, `attempt_timeout = "5s"`, 1))
	in.setup()
	url, requests := hostileHeaderReceiver(t, size)
	in.createEndpoint(url, "payment.succeeded")

	before := allocated(t, in)
	var ids []string
	for i := range events {
		ids = append(ids, in.ingest("payment.succeeded", `{"n":`+strconv.Itoa(i)+`}`).Deliveries[0].ID)
	}
	var finished []deliveryView
	for _, id := range ids {
		var d deliveryView
		poll(15*time.Second, func() bool { d = in.delivery(id); return d.State == "dead" || d.State == "succeeded" })
		finished = append(finished, d)
	}
	attempts := requests.Load()
	alloc := allocated(t, in) - before
	t.Logf("%d attempts at %d MiB of headers each: %.1f MiB allocated in all", attempts, size>>20, float64(alloc)/(1<<20))
	if bound := uint64(attempts) * size / 4; alloc > bound {
		t.Errorf("%d attempts allocated %d bytes; want under %d (a quarter of the headers sent): the headers are read whole", attempts, alloc, bound)
	}
	for _, d := range finished {
		if d.State != "dead" || len(d.Attempts) != 4 || !strings.Contains(d.Reason, "response headers larger than 64 KiB") {
			t.Errorf("delivery %s: %s after %d attempts, reason %q; want dead after the 4 of the schedule, saying why", d.ID, d.State, len(d.Attempts), d.Reason)
		}
		for _, a := range d.Attempts {
			if a.Outcome != "retry" || a.Error != "response headers larger than 64 KiB" {
				t.Errorf("attempt %d: %s %q, want retry for headers larger than 64 KiB", a.Number, a.Outcome, a.Error)
			}
		}
	}
}

// allocated returns the bytes in's webhookd process has allocated since
// it started (go_memstats_alloc_bytes_total).
func allocated(t *testing.T, in *instance) uint64 {
	t.Helper()
	m, err := scrapeMetrics(in.base)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := m["go_memstats_alloc_bytes_total"]
	if !ok {
		t.Fatal("/metrics has no go_memstats_alloc_bytes_total")
	}
	return uint64(v)
}

// addressLike matches what would show an address: IPv4, bracketed IPv6 or
// a DNS port.
var addressLike = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+|\[[0-9a-fA-F:.]+\]|:53\b`)

// apiTime matches a time as the API writes it, whose minutes or seconds
// addressLike would take for a DNS port (…T09:42:53.951Z).
var apiTime = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)

// addressIn returns the first thing like an address (addressLike) in a
// string of the JSON document raw, times aside, or "". Only strings are
// read: in the text of the document a key's colon before a number
// (`"duration_ms":53`) looks like a DNS port too.
func addressIn(t *testing.T, raw []byte) string {
	t.Helper()
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("not JSON: %v: %s", err, raw)
	}
	var walk func(v any) string
	walk = func(v any) string {
		switch v := v.(type) {
		case string:
			return addressLike.FindString(apiTime.ReplaceAllString(v, "<time>"))
		case []any:
			for _, e := range v {
				if m := walk(e); m != "" {
					return m
				}
			}
		case map[string]any:
			for _, e := range v {
				if m := walk(e); m != "" {
					return m
				}
			}
		}
		return ""
	}
	return walk(doc)
}

// TestAddressIn: the check above finds a resolver's address in a string
// and takes neither a time nor a number after a key for one; it once
// failed on an attempt that took 53 ms.
func TestAddressIn(t *testing.T) {
	for doc, want := range map[string]string{
		`{"attempts":[{"duration_ms":53,"start":"2026-12-04T17:38:53.530Z"}]}`: "",
		`{"reason":"lookup x on 10.255.255.53:53: no such host"}`:              "10.255.255.53",
		`{"attempts":[{"error":"dial [fd00::1]:53"}]}`:                         "[fd00::1]",
		`{"reason":"lookup x on resolver:53: no such host"}`:                   ":53",
	} {
		if got := addressIn(t, []byte(doc)); got != want {
			t.Errorf("addressIn(%s) = %q, want %q", doc, got, want)
		}
	}
}

// TestSecurity_ReasonsHideInternalDNS: a host name that does not resolve
// fails its attempts with a reason that names the host and not the
// resolver's address; the operator's log keeps the resolver's error.
func TestSecurity_ReasonsHideInternalDNS(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	in.createEndpoint("http://nonexistent.invalid/hooks", "payment.succeeded")
	d := in.waitState(in.ingest("payment.succeeded", `{}`).Deliveries[0].ID, "dead")
	if !strings.Contains(d.Reason, "could not resolve host nonexistent.invalid") {
		t.Errorf("reason %q does not say the host did not resolve", d.Reason)
	}
	var raw json.RawMessage
	in.mustCall(200, "GET", "/v1/tenants/acme/deliveries/"+d.ID, nil, &raw)
	if m := addressIn(t, raw); m != "" {
		t.Errorf("the delivery shows %q: %s", m, raw)
	}
	if logs := in.logs.String(); !strings.Contains(logs, "attempt error") || !strings.Contains(logs, "lookup nonexistent.invalid") {
		t.Errorf("the operator's log (debug) lacks the resolver's error:\n%s", logs)
	}
}

// TestSecurity_SpecialPurposeRefusedAtCreate: every class of the IANA
// special-purpose registries that is not globally reachable, and every
// IPv6 form that carries such an IPv4 address, is refused when an endpoint
// is created, with the class named; globally reachable ones next to them
// are accepted.
func TestSecurity_SpecialPurposeRefusedAtCreate(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), strictConfig)
	in.setup()
	for _, tt := range []struct{ host, class string }{
		{"198.18.0.1", "benchmarking"},
		{"192.0.0.1", "IPv4 service continuity"},
		{"192.0.0.100", "IETF protocol assignment"},
		{"192.0.0.170", "NAT64/DNS64 discovery"},
		{"192.0.2.1", "documentation"},
		{"203.0.113.9", "documentation"},
		{"192.88.99.2", "6a44 relay anycast"},
		{"255.255.255.255", "limited broadcast"},
		{"[100::1]", "discard-only"},
		{"[100:0:0:1::1]", "dummy"},
		{"[2001:db8::1]", "documentation"},
		{"[3fff::1]", "documentation"},
		{"[2001::1]", "Teredo"},
		{"[2001:0:4136:e378:8000:63bf:3fff:fdd2]", "Teredo"},
		{"[2001:2::1]", "benchmarking"},
		{"[5f00::1]", "segment routing (SRv6) SID"},
		{"[4000::1]", "reserved"},
		{"[fec0::1]", "site-local (deprecated)"},
		{"[::ffff:0:127.0.0.1]", "loopback"},      // IPv4-translated
		{"[::ffff:0:8.8.8.8]", "IPv4-translated"}, // obsolete form
		{"[::127.0.0.1]", "loopback"},             // IPv4-compatible
		{"[64:ff9b::a9fe:a9fe]", "link-local"},    // NAT64 of the metadata service
		{"[64:ff9b:1::808:808]", "local-use IPv4/IPv6 translation"},
		{"[2002:c000:201::1]", "documentation"}, // 6to4 of 192.0.2.1
	} {
		var p struct{ Code, Field, Detail string }
		u := "https://" + tt.host + "/in"
		if got := in.call("POST", "/v1/tenants/acme/endpoints", map[string]any{"url": u, "event_types": []string{"*"}}, &p); got != 422 || p.Code != "invalid_field" || p.Field != "url" || !strings.Contains(p.Detail, " "+tt.class+" address") || !strings.Contains(p.Detail, "allow_private_targets") {
			t.Errorf("%s: %d %+v, want 422 invalid_field url naming the class %q and the setting", u, got, p, tt.class)
		}
	}
	for _, host := range []string{"192.0.0.9", "192.88.99.1", "[2001:4860:4860::8888]", "[2001:1::1]", "[64:ff9b::808:808]", "[2002:808:808::1]"} {
		if got := in.call("POST", "/v1/tenants/acme/endpoints", map[string]any{"url": "https://" + host + "/in", "event_types": []string{"*"}}, nil); got != 201 {
			t.Errorf("https://%s/in: %d, want 201 (globally reachable)", host, got)
		}
	}
}

// TestSecurity_TranslatedAddressRefusedAtDial: an endpoint at an
// IPv4-translated form of 127.0.0.1 ([::ffff:0:127.0.0.1], accepted under
// a permissive policy) is refused at dial time under the strict one, with
// the embedded address and the form named. Linux does not route
// ::ffff:0:0/96 to the loopback, so this shows the refusal, not a request
// that would otherwise have arrived; TestTargetPolicy_dialControl [engine]
// covers every other class.
func TestSecurity_TranslatedAddressRefusedAtDial(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := startInstance(t, dir, testConfig)
	in.setup()
	rc := newRecorder(t, nil)
	port := rc.srv.URL[strings.LastIndex(rc.srv.URL, ":"):]
	in.createEndpoint("http://[::ffff:0:127.0.0.1]"+port+"/hooks", "payment.succeeded")
	in.stop()

	in = startInstance(t, dir, strings.Replace(testConfig, "allow_private_targets = true ", "allow_private_targets = false", 1))
	d := in.waitState(in.ingest("payment.succeeded", `{}`).Deliveries[0].ID, "dead")
	want := "refused: ::ffff:0:7f00:1 is a loopback address (127.0.0.1 in 127.0.0.0/8, inside an IPv4-translated address)"
	if len(d.Attempts) != 1 || !strings.Contains(d.Reason, want) {
		t.Errorf("%d attempts, reason %q; want one attempt refused with %q", len(d.Attempts), d.Reason, want)
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("the receiver got %d requests", n)
	}
}

// TestDelivery_RetryAfterBeyondInt64: a Retry-After of more seconds than
// an int64 holds is the longest wait, so the next attempt waits
// retry_after_max; and when retry_after_max passes the deadline, the
// delivery is dead by the deadline at once.
func TestDelivery_RetryAfterBeyondInt64(t *testing.T) {
	t.Parallel()
	const huge = "99999999999999999999999"
	in := startInstance(t, t.TempDir(), testConfig) // retry_after_max = "2s"
	in.setup()
	var n atomic.Int64
	rc := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", huge)
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	in.createEndpoint(rc.srv.URL, "payment.succeeded")
	id := in.ingest("payment.succeeded", `{}`).Deliveries[0].ID
	var d struct {
		State         string    `json:"state"`
		NextAttemptAt time.Time `json:"next_attempt_at"`
		Attempts      []struct {
			Start    time.Time `json:"start"`
			Duration millis    `json:"duration_ms"`
		} `json:"attempts"`
	}
	// Until the first attempt is recorded and let go of: a delivery reads
	// as delivering from its claim until its outcome is recorded and the
	// claim settled.
	if !poll(10*time.Second, func() bool {
		in.mustCall(200, "GET", "/v1/tenants/acme/deliveries/"+id, nil, &d)
		return len(d.Attempts) > 0 && d.State != "delivering"
	}) {
		t.Fatalf("no attempt recorded: %+v", d)
	}
	a := d.Attempts[0]
	if wait := d.NextAttemptAt.Sub(a.Start.Add(time.Duration(a.Duration))); d.State != "pending" || wait < 1900*time.Millisecond || wait > 2500*time.Millisecond {
		t.Errorf("after Retry-After %s: %s, next attempt %s after the first ended; want pending, retry_after_max (2s) later", huge, d.State, wait)
	}
	in.waitState(id, "succeeded")

	// retry_after_max past the deadline: dead at once, by the deadline.
	in2 := startInstance(t, t.TempDir(), strings.NewReplacer(`deadline = "30s"`, `deadline = "1s"`, `retry_after_max = "2s"`, `retry_after_max = "5s"`).Replace(testConfig))
	in2.setup()
	always := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", huge)
		w.WriteHeader(http.StatusTooManyRequests)
	})
	in2.createEndpoint(always.srv.URL, "payment.succeeded")
	dead := in2.waitState(in2.ingest("payment.succeeded", `{}`).Deliveries[0].ID, "dead")
	if len(dead.Attempts) != 1 || !strings.Contains(dead.Reason, "deadline reached") {
		t.Errorf("%d attempts, reason %q; want one attempt, dead by the deadline", len(dead.Attempts), dead.Reason)
	}
}
