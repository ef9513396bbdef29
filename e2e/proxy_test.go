package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/webhookd/webhookd/verify"
)

// egressProxy is a loopback HTTP forward proxy for plain-http receivers
// (absolute-form requests; no CONNECT). It records each request and
// forwards it, or answers failWith instead when that is set.
type egressProxy struct {
	srv      *httptest.Server
	failWith atomic.Int32 // 0: forward; else the status to answer
	mu       sync.Mutex
	seen     []string // method, target, credentials
}

// proxyPassword is the password in egressProxy.url: nothing webhookd
// writes may show it.
const proxyPassword = "proxy-pw-7f3a"

func newEgressProxy(t *testing.T) *egressProxy {
	p := &egressProxy{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, r.Method+" "+r.URL.String()+" "+r.Header.Get("Proxy-Authorization"))
		p.mu.Unlock()
		if s := p.failWith.Load(); s != 0 {
			http.Error(w, "the proxy says no", int(s))
			return
		}
		if !r.URL.IsAbs() {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
		out := r.Clone(r.Context())
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

// url is the proxy's URL with credentials egress:proxyPassword.
func (p *egressProxy) url() string {
	return strings.Replace(p.srv.URL, "http://", "http://egress:"+proxyPassword+"@", 1)
}

func (p *egressProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// TestDeliveryProxy: with [delivery] proxy, the binary sends every
// attempt through the proxy, with the proxy's credentials, and the
// receiver gets it signed as ever; the log names the proxy with its
// password masked, and nothing it writes shows the password.
func TestDeliveryProxy(t *testing.T) {
	t.Parallel()
	proxy := newEgressProxy(t)
	rc := newReceiver(t, func(int, http.ResponseWriter, *http.Request) {})
	in := startInstance(t, t.TempDir(), configWith(t, testConfig, map[string]any{"delivery.proxy": proxy.url()}))
	in.setup()
	ep := in.createEndpoint(rc.srv.URL+"/hooks", "payment.succeeded")
	rc.setSecret(ep.Secret)
	res := in.ingest("payment.succeeded", `{"n":1}`)
	in.waitState(res.Deliveries[0].ID, "succeeded")

	if got := rc.got(); len(got) != 1 || got[0].sigErr != nil {
		t.Fatalf("the receiver got %d requests (%v), want one, signed", len(got), got)
	}
	seen := proxy.requests()
	wantAuth := "Basic ZWdyZXNzOnByb3h5LXB3LTdmM2E=" // egress:proxy-pw-7f3a
	if len(seen) != 1 || !strings.HasPrefix(seen[0], "POST "+rc.srv.URL+"/hooks ") || !strings.HasSuffix(seen[0], " "+wantAuth) {
		t.Errorf("the proxy saw %q, want one POST to the receiver with the URL's credentials", seen)
	}
	in.stop()
	logs := in.logs.String()
	if !strings.Contains(logs, "deliveries go through a proxy") || !strings.Contains(logs, "egress:xxxxx@") {
		t.Errorf("the log does not name the proxy, masked:\n%s", logs)
	}
	if strings.Contains(logs, proxyPassword) {
		t.Error("the log shows the proxy's password")
	}
}

// TestDeliveryProxy_ChallengeAndTestEvent: the endpoint-verification
// challenge and a test event go through the proxy as attempts do.
func TestDeliveryProxy_ChallengeAndTestEvent(t *testing.T) {
	t.Parallel()
	proxy := newEgressProxy(t)
	var secret atomic.Pointer[string]
	rc := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if nonce := r.Header.Get("webhook-challenge"); nonce != "" {
			if s := secret.Load(); s != nil {
				resp, _ := verify.ChallengeResponse(*s, nonce)
				w.Header().Set("webhook-challenge-response", resp)
			}
		}
		w.WriteHeader(http.StatusOK)
	})
	config := configWith(t, withDelivery(testConfig, "require_endpoint_verification = true"), map[string]any{"delivery.proxy": proxy.url()})
	in := startInstance(t, t.TempDir(), config)
	in.setup()
	ep := in.createEndpoint(rc.srv.URL+"/in", "payment.succeeded")
	secret.Store(&ep.Secret)
	ev := in.ingest("payment.succeeded", `{"n":1}`)
	in.waitState(ev.Deliveries[0].ID, "succeeded")
	var te ingestResponse
	in.mustCall(202, "POST", "/v1/tenants/acme/endpoints/"+ep.ID+"/test-events", map[string]string{}, &te)
	in.waitState(te.Deliveries[0].ID, "succeeded")

	// The challenge, the event, the test event: all three through the proxy.
	got, seen := rc.requests(), proxy.requests()
	if len(got) != 3 || got[0].header.Get("webhook-challenge") == "" {
		t.Fatalf("the receiver got %d requests, want the challenge, the event and the test event", len(got))
	}
	if len(seen) != len(got) {
		t.Fatalf("the proxy saw %d requests (%q), the receiver got %d: some went around it", len(seen), seen, len(got))
	}
	for _, s := range seen {
		if !strings.HasPrefix(s, "POST "+rc.srv.URL+"/in ") {
			t.Errorf("the proxy saw %q, want a POST to the receiver", s)
		}
	}
}

// TestDeliveryProxy_Failures: a proxy that answers 407 (its credentials
// refused) or 502, or that is down, fails the attempt with a reason
// that names the proxy, and the delivery is retried, not dead at once;
// the proxy's password shows in no reason, API answer or log line.
func TestDeliveryProxy_Failures(t *testing.T) {
	t.Parallel()
	proxy := newEgressProxy(t)
	rc := newReceiver(t, func(int, http.ResponseWriter, *http.Request) {})
	// A long schedule: the first attempt fails, the second waits.
	config := configWith(t, testConfig, map[string]any{"delivery.proxy": proxy.url(), "delivery.schedule": []string{"200ms", "10s"}})
	in := startInstance(t, t.TempDir(), config)
	in.setup()
	ep := in.createEndpoint(rc.srv.URL+"/hooks", "payment.succeeded")
	rc.setSecret(ep.Secret)

	for _, c := range []struct {
		name     string
		failWith int32 // 0: the proxy is down
		want     string
	}{
		{"407", http.StatusProxyAuthRequired, "proxy"},
		{"502", http.StatusBadGateway, "502"},
		{"down", 0, "proxy"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.failWith == 0 {
				proxy.srv.Close()
			}
			proxy.failWith.Store(c.failWith)
			res := in.ingest("payment.succeeded", `{"n":1}`)
			id := res.Deliveries[0].ID
			var d deliveryView
			waitFor(t, "two attempts", func() bool { d = in.delivery(id); return len(d.Attempts) >= 2 || d.State == "dead" })
			if d.State == "dead" {
				t.Fatalf("the delivery is dead at once: %q", d.Reason)
			}
			for _, a := range d.Attempts[:2] {
				if a.Outcome != "retry" || !strings.Contains(a.Error, c.want) {
					t.Errorf("attempt %d: outcome %s, reason %q; want retry, naming %q", a.Number, a.Outcome, a.Error, c.want)
				}
			}
			for _, path := range []string{"/v1/tenants/acme/deliveries/" + id, "/v1/tenants/acme/deliveries?endpoint=" + ep.ID} {
				var raw json.RawMessage
				in.mustCall(200, "GET", path, nil, &raw)
				if strings.Contains(string(raw), proxyPassword) {
					t.Errorf("GET %s shows the proxy's password: %s", path, raw)
				}
			}
		})
	}
	if n := len(rc.got()); n != 0 {
		t.Errorf("the receiver got %d requests through a failing proxy", n)
	}
	in.stop()
	if strings.Contains(in.logs.String(), proxyPassword) {
		t.Error("the log shows the proxy's password")
	}
}

// TestDeliveryProxy_PrivateTargets: with a proxy and private targets
// refused, an endpoint at localhost is refused at creation (422), and
// one created while they were allowed is refused at attempt time, dead
// with the refusal, the proxy seeing nothing.
func TestDeliveryProxy_PrivateTargets(t *testing.T) {
	t.Parallel()
	proxy := newEgressProxy(t)
	rc := newReceiver(t, func(int, http.ResponseWriter, *http.Request) {})
	localhost := strings.Replace(rc.srv.URL, "127.0.0.1", "localhost", 1) + "/hooks"
	dir := t.TempDir()
	allowed := configWith(t, testConfig, map[string]any{"delivery.proxy": proxy.url()})
	in := startInstance(t, dir, allowed)
	in.setup()
	ep := in.createEndpoint(localhost, "payment.succeeded")
	in.stop()

	in = startInstance(t, dir, configWith(t, allowed, map[string]any{"delivery.allow_private_targets": false}))
	var problem struct {
		Code string `json:"code"`
	}
	if got := in.call("POST", "/v1/tenants/acme/endpoints", map[string]any{"url": localhost, "event_types": []string{"*"}}, &problem); got != 422 {
		t.Errorf("create at %s: %d %+v, want 422", localhost, got, problem)
	}
	res := in.ingest("payment.succeeded", `{"n":1}`)
	d := in.waitState(res.Deliveries[0].ID, "dead")
	if !strings.Contains(d.Reason, "refused: ") || !strings.Contains(d.Reason, "localhost") {
		t.Errorf("the delivery to %s is dead with %q, want the refusal naming the host", ep.ID, d.Reason)
	}
	if seen := proxy.requests(); len(seen) != 0 || len(rc.got()) != 0 {
		t.Errorf("the proxy saw %q, the receiver got %d: want nothing sent", seen, len(rc.got()))
	}
}
