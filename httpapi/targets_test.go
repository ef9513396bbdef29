package httpapi_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
)

// TestEndpoint_RefusedNameHidesWhatItResolvesTo: an endpoint whose host
// name resolves to an internal address is refused without saying which
// address (or which class), so that a tenant cannot resolve internal names
// through webhookd; an address literal the caller typed is named with its
// class.
func TestEndpoint_RefusedNameHidesWhatItResolvesTo(t *testing.T) {
	internal := map[string]string{
		"internal-db.test":   "10.20.30.40",
		"metadata.test":      "169.254.169.254",
		"translated.test":    "::ffff:0:a14:1e28",
		"documentation.test": "192.0.2.77",
	}
	e := newSecurityEnv(t, engine.ServiceOptions{LookupHost: func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := internal[host]; ok {
			return []netip.Addr{netip.MustParseAddr(a)}, nil
		}
		return publicLookup(nil, host)
	}}, httpapi.Options{})
	ep := e.fixture()
	before := e.snapshot()
	for host, addr := range internal {
		u := "https://" + host + "/x"
		for _, rq := range []req{
			{method: "POST", path: "/v1/tenants/acme/endpoints", body: mustJSON(map[string]any{"url": u, "event_types": []string{"*"}})},
			{method: "PATCH", path: "/v1/tenants/acme/endpoints/" + ep.ID, body: mustJSON(map[string]any{"url": u})},
		} {
			p := checkProblem(t, e.do(rq), 422, engine.CodeInvalidField, "url")
			want := "url host " + host + " resolves to a non-public address, not allowed ([delivery] allow_private_targets = false); for a local trial, start webhookd with -dev"
			if p.Detail != want {
				t.Errorf("%s %s: detail %q, want %q", rq.method, u, p.Detail, want)
			}
			if strings.Contains(p.Detail, addr) || strings.Contains(p.Detail, "a14:1e28") {
				t.Errorf("%s %s: detail %q shows the address %s", rq.method, u, p.Detail, addr)
			}
		}
	}
	p := checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://10.20.30.40/x","event_types":["*"]}`}), 422, engine.CodeInvalidField, "url")
	if want := "10.20.30.40 is a private address (10.0.0.0/8)"; !strings.Contains(p.Detail, want) {
		t.Errorf("literal: detail %q, want it to say %q", p.Detail, want)
	}
	if after := e.snapshot(); after != before {
		t.Errorf("refused URLs changed something:\n%s\nwas\n%s", after, before)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
