package httpapi_test

import (
	"net/http"
	"testing"
)

// TestAPI_HeadIsGetWithoutBody: HEAD of a path that takes GET answers as
// the GET would, status and headers, without a body (RFC 9110 §9.3.2: a
// general-purpose server must take it), so an uptime monitor that probes
// /healthz with HEAD sees it up; HEAD of a path that takes no GET is 405.
func TestAPI_HeadIsGetWithoutBody(t *testing.T) {
	e := newAPIEnv(t)
	e.fixture()
	for _, tc := range []struct {
		path   string
		auth   bool
		status int
	}{
		{"/healthz", false, 200},
		{"/readyz", false, 200},
		{"/v1/tenants/acme/endpoints", true, 200},
		{"/v1/tenants/acme/endpoints", false, 401},
		{"/v1/tenants/nobody", true, 404},
		{"/v1/tenants/acme/events?limit=0", true, 422},
		{"/v1/tenants/acme/dead-letters/replay", true, 405},
	} {
		hr, err := http.NewRequestWithContext(t.Context(), http.MethodHead, e.srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.auth {
			hr.Header.Set("Authorization", "Bearer "+testToken)
		}
		resp, err := e.srv.Client().Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("HEAD %s: %d, want %d", tc.path, resp.StatusCode, tc.status)
		}
	}
	// Allow lists HEAD where GET is.
	r := e.do(req{method: "POST", path: "/healthz", header: map[string]string{"Authorization": "-"}})
	if got := r.header.Get("Allow"); got != "GET, HEAD, OPTIONS" {
		t.Errorf("Allow of /healthz: %q, want GET, HEAD, OPTIONS", got)
	}
}
