package engine

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// forwardProxy is a loopback HTTP forward proxy: absolute-form requests
// (plain http targets) are forwarded, CONNECT (https targets) is
// tunnelled. It records each request's target and Proxy-Authorization.
type forwardProxy struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []proxied
}

type proxied struct {
	method, target, auth string
}

func newForwardProxy(t *testing.T) *forwardProxy {
	p := &forwardProxy{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.got = append(p.got, proxied{r.Method, r.Host, r.Header.Get("Proxy-Authorization")})
		p.mu.Unlock()
		if r.Method == http.MethodConnect {
			up, err := net.DialTimeout("tcp", r.Host, 5*time.Second)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer up.Close()
			w.WriteHeader(http.StatusOK)
			c, rw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			go io.Copy(up, rw)
			io.Copy(c, up)
			return
		}
		if !r.URL.IsAbs() {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
		out := r.Clone(context.Background())
		out.RequestURI = ""
		out.Header.Del("Proxy-Authorization")
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *forwardProxy) requests() []proxied {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]proxied(nil), p.got...)
}

// proxyURL is p's URL with user info user:pass.
func (p *forwardProxy) proxyURL(t *testing.T) *url.URL {
	u, err := url.Parse(p.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("egress", "proxy-pass-7f3a")
	return u
}

// TestNewHTTPClient_proxy: with TargetPolicy.Proxy every request goes
// through the proxy, with its credentials: a plain-http target as an
// absolute-form request, an https one in a CONNECT tunnel; the proxy's own
// loopback address is not refused even where private targets are.
func TestNewHTTPClient_proxy(t *testing.T) {
	p := newForwardProxy(t)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" {
			t.Error("the receiver got the proxy's credentials")
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	tlsRecv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer tlsRecv.Close()

	c := NewHTTPClient(2, 2, TargetPolicy{AllowHTTP: true, AllowPrivate: true, Proxy: p.proxyURL(t)})
	resp, err := c.Post(recv.URL+"/hook", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("through the proxy: %d, want 204", resp.StatusCode)
	}
	// The test server's certificate is not trusted: the handshake fails,
	// after the tunnel was asked for.
	if _, err := c.Get(tlsRecv.URL + "/hook"); err == nil {
		t.Error("an untrusted certificate was accepted")
	}
	wantAuth := "Basic " + "ZWdyZXNzOnByb3h5LXBhc3MtN2YzYQ==" // egress:proxy-pass-7f3a
	got := p.requests()
	if len(got) != 2 || got[0].method != "POST" || got[0].target != strings.TrimPrefix(recv.URL, "http://") ||
		got[1].method != "CONNECT" || got[1].target != strings.TrimPrefix(tlsRecv.URL, "https://") {
		t.Fatalf("the proxy saw %+v, want the POST to the receiver, then a CONNECT to the TLS one", got)
	}
	for _, r := range got {
		if r.auth != wantAuth {
			t.Errorf("%s to %s: Proxy-Authorization %q, want the URL's user info", r.method, r.target, r.auth)
		}
	}
}

// TestNewHTTPClient_proxyChecksTargets: with a proxy and private targets
// refused, a request to an internal address is refused before it is
// sent (the proxy sees nothing), by literal, by localhost name and by
// what a name resolves to here, the last without the address; a name
// this machine cannot resolve goes to the proxy, which judges it.
func TestNewHTTPClient_proxyChecksTargets(t *testing.T) {
	p := newForwardProxy(t)
	c := NewHTTPClient(2, 2, TargetPolicy{AllowHTTP: true, Proxy: p.proxyURL(t)})
	for _, target := range []string{"http://127.0.0.1:9/x", "http://[::1]:9/x", "http://localhost:9/x", "http://10.1.2.3/x"} {
		_, err := c.Get(target)
		if te, ok := targetRefusal(err); !ok {
			t.Errorf("%s through the proxy: %v, want a refusal", target, err)
		} else if strings.Contains(target, "localhost") && (te.Host != "localhost" || strings.Contains(te.Error(), "::1")) {
			t.Errorf("%s: refusal %q names the address, not the host", target, te.Error())
		}
	}
	if got := p.requests(); len(got) != 0 {
		t.Fatalf("the proxy saw %+v: a refused target reached it", got)
	}
	_, err := c.Get("http://no-such-host.invalid/x")
	if _, refused := targetRefusal(err); refused {
		t.Errorf("a name this machine cannot resolve was refused: %v", err)
	}
	if got := p.requests(); len(got) != 1 || got[0].target != "no-such-host.invalid" {
		t.Errorf("the proxy saw %+v, want the request to the unresolvable name", got)
	}
}

// TestProxyChecked_resolvedName: a name that resolves here to an internal
// address is refused, naming the host and not the address; one that
// resolves to public addresses only is sent.
func TestProxyChecked_resolvedName(t *testing.T) {
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return nil, errors.New("sent")
	})
	zone := map[string][]netip.Addr{
		"internal.example": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("192.168.1.10")},
		"public.example":   {netip.MustParseAddr("93.184.216.34")},
	}
	pc := proxyChecked{next: next, policy: TargetPolicy{}, lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := zone[host]; ok {
			return a, nil
		}
		return nil, errors.New("no such host")
	}}
	req := func(u string) *http.Request { r, _ := http.NewRequest("GET", u, nil); return r }
	_, err := pc.RoundTrip(req("https://internal.example/x"))
	te, ok := targetRefusal(err)
	if !ok || te.Host != "internal.example" || strings.Contains(te.Error(), "192.168") {
		t.Errorf("internal.example: %v, want a refusal naming the host only", err)
	}
	if _, err := pc.RoundTrip(req("https://public.example/x")); err == nil || err.Error() != "sent" {
		t.Errorf("public.example: %v, want it sent", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestNewHTTPClient_proxyFailures: what the proxy fails (its 407 to a
// forwarded request, a CONNECT it refuses, the proxy down) is retried
// with a reason that names the proxy and shows none of its URL; a 407
// from behind a tunnel is the receiver's own answer.
func TestNewHTTPClient_proxyFailures(t *testing.T) {
	refusing := func(status int) *url.URL {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no", status)
		}))
		t.Cleanup(srv.Close)
		u, _ := url.Parse(srv.URL)
		u.User = url.UserPassword("egress", "proxy-pass-7f3a")
		return u
	}
	down := func() *url.URL {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		return &url.URL{Scheme: "http", User: url.UserPassword("egress", "proxy-pass-7f3a"), Host: ln.Addr().String()}
	}
	for _, c := range []struct {
		name   string
		proxy  *url.URL
		target string
		want   string
	}{
		{"407 forwarding", refusing(407), "http://receiver.example/hook", "connection error: the egress proxy answered HTTP 407 Proxy Authentication Required; check the credentials in its URL"},
		{"407 to CONNECT", refusing(407), "https://receiver.example/hook", "connection error: the egress proxy answered the tunnel request (CONNECT) HTTP 407 Proxy Authentication Required; check the credentials in its URL"},
		{"502 to CONNECT", refusing(502), "https://receiver.example/hook", "connection error: the egress proxy answered the tunnel request (CONNECT) HTTP 502 Bad Gateway"},
		{"down", down(), "https://receiver.example/hook", "connection error: the egress proxy: connect: connection refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := NewHTTPClient(1, 1, TargetPolicy{AllowHTTP: true, Proxy: c.proxy})
			resp, err := cl.Post(c.target, "application/json", strings.NewReader(`{}`))
			status := 0
			if err == nil {
				status = resp.StatusCode
				resp.Body.Close()
			}
			outcome, reason := classify(status, err, time.Second, false, nil)
			if outcome != OutcomeRetry || reason != c.want {
				t.Errorf("got %v %q, want retry %q", outcome, reason, c.want)
			}
			if strings.Contains(reason, "proxy-pass") || strings.Contains(reason, c.proxy.Host) {
				t.Errorf("the reason %q shows the proxy's URL", reason)
			}
		})
	}
}
