package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// rawRequest sends text, a whole HTTP/1.1 request, on a connection of
// its own to the test server and returns the answer. It writes in the
// background, so an answer sent before the server read it all is still
// read.
func (e *apiEnv) rawRequest(text string) response {
	e.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	go io.WriteString(conn, text)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		e.t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// headerOfSize returns a GET of path whose request line and header lines,
// with the blank line that ends them, are exactly size bytes as sent: a
// Host and an X-Padding header (and Authorization, when token is set)
// fill it.
func headerOfSize(t *testing.T, path, token string, size int) string {
	t.Helper()
	head := "GET " + path + " HTTP/1.1\r\nHost: webhookd.test\r\nConnection: close\r\n"
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	pad := size - len(head) - len("X-Padding: \r\n\r\n")
	if pad < 1 {
		t.Fatalf("a header of %d bytes is too small for %s", size, path)
	}
	text := head + "X-Padding: " + strings.Repeat("p", pad) + "\r\n\r\n"
	if len(text) != size {
		t.Fatalf("made %d bytes, want %d", len(text), size)
	}
	return text
}

// TestAPI_HeadersTooLarge: a request whose header (its request line and
// header lines, as sent) is over 64 KiB is answered 431 as every other
// error is, problem+json with code headers_too_large, whatever its path
// and before its token is looked at; one of exactly 64 KiB is served.
// The test server reads headers up to Go's default of 1 MiB, as main's
// does (httpapi.ServerMaxHeaderBytes); beyond that Go's server answers
// itself (e2e's TestSecurity_HeaderAndBodyCaps).
func TestAPI_HeadersTooLarge(t *testing.T) {
	e := newAPIEnv(t)
	e.fixture()
	const bound = 64 << 10
	for _, c := range []struct {
		name, path, token string
		within            int // the status of a header at the bound
	}{
		{"a tenant", "/v1/tenants/acme", testToken, 200},
		{"without a token", "/v1/tenants/acme", "", 401},
		{"liveness", "/healthz", "", 200},
		{"no such route", "/v1/nope", testToken, 404},
		{"the console", "/console/", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.rawRequest(headerOfSize(t, c.path, c.token, bound))
			if r.status == http.StatusRequestHeaderFieldsTooLarge || c.within != 0 && r.status != c.within {
				t.Errorf("a header of exactly %d bytes: %d %s, want %d", bound, r.status, r.body, c.within)
			}
			r = e.rawRequest(headerOfSize(t, c.path, c.token, bound+1))
			p := checkProblem(t, r, http.StatusRequestHeaderFieldsTooLarge, engine.Code("headers_too_large"), "")
			if !strings.Contains(p.Detail, fmt.Sprint(bound)) {
				t.Errorf("detail %q does not name the bound", p.Detail)
			}
		})
	}

	t.Run("many headers", func(t *testing.T) {
		req, err := http.NewRequest("GET", e.srv.URL+"/v1/tenants/acme", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		for i := range 100 {
			req.Header.Set(fmt.Sprintf("X-Part-%d", i), strings.Repeat("v", 700))
		}
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		checkProblem(t, response{status: resp.StatusCode, header: resp.Header, body: b}, http.StatusRequestHeaderFieldsTooLarge, engine.Code("headers_too_large"), "")
	})
}
