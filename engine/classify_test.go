package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		status     int
		err        error
		want       Outcome
		wantReason string
	}{
		{200, nil, OutcomeSuccess, ""},
		{204, nil, OutcomeSuccess, ""},
		{299, nil, OutcomeSuccess, ""},
		{408, nil, OutcomeRetry, "HTTP 408"},
		{425, nil, OutcomeRetry, "HTTP 425"},
		{429, nil, OutcomeRetry, "HTTP 429"},
		{500, nil, OutcomeRetry, "HTTP 500"},
		{502, nil, OutcomeRetry, "HTTP 502"},
		{599, nil, OutcomeRetry, "HTTP 599"},
		{301, nil, OutcomePermanent, "check endpoint configuration"},
		{302, nil, OutcomePermanent, "redirects are not followed"},
		{400, nil, OutcomePermanent, "check endpoint configuration"},
		{401, nil, OutcomePermanent, "check endpoint configuration"},
		{404, nil, OutcomePermanent, "HTTP 404"},
		{410, nil, OutcomePermanent, "HTTP 410 Gone"},
		{100, nil, OutcomePermanent, "check endpoint configuration"},
		{0, context.DeadlineExceeded, OutcomeRetry, "timeout"},
		{0, &url.Error{Op: "Post", URL: "http://h/?token=s3cret", Err: syscall.ECONNREFUSED}, OutcomeRetry, "connection error: connection refused"},
		{0, errors.New("connection reset by peer"), OutcomeRetry, "connection error"},
		{0, &url.Error{Op: "Post", URL: "http://h/?token=s3cret", Err: errors.New("net/http: server response headers exceeded 65536 bytes; aborted")}, OutcomeRetry, "response headers larger than 64 KiB"},
		{0, &url.Error{Op: "Post", URL: "https://h/?token=s3cret", Err: errors.New("http2: response header list larger than advertised limit")}, OutcomeRetry, "response headers larger than 64 KiB"},
	}
	for _, tt := range tests {
		name := strings.TrimSpace(strconv.Itoa(tt.status) + " " + errString(tt.err))
		t.Run(name, func(t *testing.T) {
			got, reason := classify(tt.status, tt.err, 10*time.Second, false, nil)
			if got != tt.want {
				t.Errorf("outcome %s, want %s", got, tt.want)
			}
			if !strings.Contains(reason, tt.wantReason) {
				t.Errorf("reason %q, want it to contain %q", reason, tt.wantReason)
			}
			if strings.Contains(reason, "s3cret") {
				t.Errorf("reason %q leaks the URL", reason)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-5", 0},
		{"+5", 0}, // not delay-seconds (1*DIGIT)
		{"5.5", 0},
		{"7", 7 * time.Second},
		{"007", 7 * time.Second},
		{"soon", 0},
		{"86400", 24 * time.Hour},
		// Longer than a Duration holds: the longest wait, which
		// RetryPolicy.Next cuts to RetryAfterMax.
		{"9223372036", 9223372036 * time.Second},
		{"9223372037", maxRetryAfter},
		{"9223372036854775807", maxRetryAfter},
		{"99999999999999999999999", maxRetryAfter},
		{"-99999999999999999999999", 0},
		{now.Add(90 * time.Second).Format(time_RFC1123GMT), 90 * time.Second},
		{now.Add(-time.Minute).Format(time_RFC1123GMT), 0},
		{now.Format(time_RFC1123GMT), 0},
		{"Fri, 31 Dec 9999 23:59:59 GMT", maxRetryAfter},
		{"Friday, 31-Dec-99 23:59:59 GMT", 0}, // RFC 850: 1999
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
	// Whatever the header says, the next attempt waits at most
	// RetryAfterMax, or the delivery is dead when that passes the deadline.
	p := RetryPolicy{Schedule: []time.Duration{time.Second}, Deadline: time.Hour, AttemptTimeout: time.Second, RetryAfterMax: 10 * time.Minute}
	due, dead := p.Next(1, now, now, parseRetryAfter("99999999999999999999999", now), func() float64 { return 0.5 })
	if dead != "" || !due.Equal(now.Add(10*time.Minute)) {
		t.Errorf("Next after Retry-After 99999999999999999999999 = %s %q, want %s", due, dead, now.Add(10*time.Minute))
	}
	p.RetryAfterMax = 2 * time.Hour
	if due, dead := p.Next(1, now, now, parseRetryAfter("99999999999999999999999", now), func() float64 { return 0.5 }); !due.IsZero() || !strings.Contains(dead, "deadline reached") {
		t.Errorf("with retry_after_max past the deadline: %s %q, want dead by the deadline", due, dead)
	}
}

// TestClassify_transportErrorsHideAddresses: the reason of a transport
// error, which tenants read, never shows a resolver's address, webhookd's
// own address, or an address a host name resolved to; only an address the
// endpoint URL itself names.
func TestClassify_transportErrorsHideAddresses(t *testing.T) {
	resolver := "10.255.255.53:53"
	dnsErr := func(mod func(*net.DNSError)) error {
		e := &net.DNSError{Err: "no such host", Name: "hooks.example.com", Server: resolver, IsNotFound: true}
		if mod != nil {
			mod(e)
		}
		return &url.Error{Op: "Post", URL: "https://hooks.example.com/in", Err: &net.OpError{Op: "dial", Net: "tcp", Err: e}}
	}
	local := &net.TCPAddr{IP: net.ParseIP("10.0.0.2"), Port: 51234}
	remote := &net.TCPAddr{IP: net.ParseIP("93.184.215.14"), Port: 443}
	tests := []struct {
		name    string
		err     error
		want    string
		visible []string // addresses the reason may show
	}{
		{"no such host", dnsErr(nil), "connection error: could not resolve host hooks.example.com: no such host", nil},
		{"DNS timeout", dnsErr(func(e *net.DNSError) { e.Err, e.IsNotFound, e.IsTimeout = "i/o timeout", false, true }), "could not resolve host hooks.example.com: DNS lookup timed out", nil},
		{"DNS server failure", dnsErr(func(e *net.DNSError) { e.Err, e.IsNotFound, e.IsTemporary = "server misbehaving", false, true }), "could not resolve host hooks.example.com: DNS server failure", nil},
		{"DNS other", dnsErr(func(e *net.DNSError) {
			e.Err, e.IsNotFound = "dial udp "+resolver+": connect: network is unreachable", false
		}), "could not resolve host hooks.example.com", nil},
		{"reset, by name", &url.Error{Op: "Post", URL: "https://hooks.example.com/in", Err: &net.OpError{Op: "read", Net: "tcp", Source: local, Addr: remote, Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}}, "connection error: read: connection reset by peer", nil},
		{"refused, by name", &url.Error{Op: "Post", URL: "https://hooks.example.com/in", Err: &net.OpError{Op: "dial", Net: "tcp", Addr: remote, Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}}, "connection error: connect: connection refused", nil},
		{"refused, by literal", &url.Error{Op: "Post", URL: "https://93.184.215.14/in", Err: &net.OpError{Op: "dial", Net: "tcp", Addr: remote, Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}}, "connect: connection refused", []string{"93.184.215.14"}},
		{"unknown error naming addresses", &url.Error{Op: "Post", URL: "https://93.184.215.14/in", Err: errors.New("tls: handshake with 93.184.215.14:443 from 10.0.0.2:51234 via [fd00::53]:53 and fd00::54 failed")}, "connection error: tls: handshake with 93.184.215.14:443 from [address] via [address] and [address] failed", []string{"93.184.215.14"}},
		{"unknown error, by name", &url.Error{Op: "Post", URL: "https://hooks.example.com/in", Err: errors.New("remote error: 93.184.215.14 said no")}, "connection error: remote error: [address] said no", nil},
	}
	addrLike := regexp.MustCompile(`\d+\.\d+\.\d+\.\d+|[0-9a-f]*:[0-9a-f]*:[0-9a-f:]*|:53\b`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, reason := classify(0, tt.err, 10*time.Second, false, nil)
			if !strings.Contains(reason, tt.want) {
				t.Errorf("reason %q, want it to contain %q", reason, tt.want)
			}
			for _, m := range addrLike.FindAllString(reason, -1) {
				if !slices.Contains(tt.visible, m) {
					t.Errorf("reason %q shows %q", reason, m)
				}
			}
		})
	}
}

const time_RFC1123GMT = "Mon, 02 Jan 2006 15:04:05 GMT"

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestNewHTTPClient_responseHeaderBound: the client reads response headers
// up to maxResponseHeaderBytes, over HTTP/1.1 and HTTP/2; past it the
// attempt fails and is retried, over HTTP/1.1 saying why (Go's HTTP/2
// client drops the connection with a PROTOCOL_ERROR at the first frame
// past the bound, which says nothing more).
func TestNewHTTPClient_responseHeaderBound(t *testing.T) {
	headers := func(n int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			for i := range n {
				w.Header().Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("h", 1000))
			}
			w.WriteHeader(http.StatusNoContent)
		}
	}
	for _, h2 := range []bool{false, true} {
		for _, tt := range []struct {
			kib     int // of headers
			outcome Outcome
		}{{60, OutcomeSuccess}, {70, OutcomeRetry}, {2048, OutcomeRetry}} {
			t.Run(fmt.Sprintf("h2=%t/%dKiB", h2, tt.kib), func(t *testing.T) {
				srv := httptest.NewUnstartedServer(headers(tt.kib))
				c := NewHTTPClient(1, 1, TargetPolicy{AllowHTTP: !h2, AllowPrivate: true})
				if h2 {
					srv.EnableHTTP2 = true
					srv.StartTLS()
					c.Transport.(httpsOnly).next.(*http.Transport).TLSClientConfig.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
				} else {
					srv.Start()
				}
				defer srv.Close()
				resp, err := c.Post(srv.URL, "application/json", strings.NewReader("{}"))
				status := 0
				if err == nil {
					status = resp.StatusCode
					if got := resp.ProtoMajor == 2; got != h2 {
						t.Errorf("answered over %s", resp.Proto)
					}
					resp.Body.Close()
				}
				out, why := classify(status, err, time.Second, false, nil)
				if out != tt.outcome {
					t.Errorf("classify = %s %q, want %s", out, why, tt.outcome)
				}
				if !h2 && out == OutcomeRetry && why != "response headers larger than 64 KiB" {
					t.Errorf("reason %q, want it to say the headers are larger than 64 KiB", why)
				}
			})
		}
	}
}
