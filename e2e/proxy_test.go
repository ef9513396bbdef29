package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestDeliveryProxy: with [delivery] proxy, the binary sends every
// attempt through the proxy, with the proxy's credentials, and the
// receiver gets it signed as ever; the log names the proxy with its
// password masked, and nothing it writes shows the password.
func TestDeliveryProxy(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string // the proxy's requests: method, target, credentials
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.String()+" "+r.Header.Get("Proxy-Authorization"))
		mu.Unlock()
		if !r.URL.IsAbs() { // the receivers are plain http: no CONNECT here
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
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	defer proxy.Close()
	const password = "proxy-pw-7f3a"
	proxyURL := strings.Replace(proxy.URL, "http://", "http://egress:"+password+"@", 1)

	rc := newReceiver(t, func(int, http.ResponseWriter, *http.Request) {})
	in := startInstance(t, t.TempDir(), configWith(t, testConfig, map[string]any{"delivery.proxy": proxyURL}))
	in.setup()
	ep := in.createEndpoint(rc.srv.URL+"/hooks", "payment.succeeded")
	rc.setSecret(ep.Secret)
	res := in.ingest("payment.succeeded", `{"n":1}`)
	in.waitState(res.Deliveries[0].ID, "succeeded")

	if got := rc.got(); len(got) != 1 || got[0].sigErr != nil {
		t.Fatalf("the receiver got %d requests (%v), want one, signed", len(got), got)
	}
	mu.Lock()
	defer mu.Unlock()
	wantAuth := "Basic ZWdyZXNzOnByb3h5LXB3LTdmM2E=" // egress:proxy-pw-7f3a
	if len(seen) != 1 || !strings.HasPrefix(seen[0], "POST "+rc.srv.URL+"/hooks ") || !strings.HasSuffix(seen[0], " "+wantAuth) {
		t.Errorf("the proxy saw %q, want one POST to the receiver with the URL's credentials", seen)
	}
	in.stop()
	logs := in.logs.String()
	if !strings.Contains(logs, "deliveries go through a proxy") || !strings.Contains(logs, "egress:xxxxx@") {
		t.Errorf("the log does not name the proxy, masked:\n%s", logs)
	}
	if strings.Contains(logs, password) {
		t.Error("the log shows the proxy's password")
	}
}
