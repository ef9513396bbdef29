package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// The end-to-end tests of what a hostile receiver or a curious tenant
// could get out of webhookd's HTTP client: README "Security" names each.

// addressLike matches what would show an address: IPv4, bracketed IPv6 or
// a DNS port.
var addressLike = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+|\[[0-9a-fA-F:.]+\]|:53\b`)

// TestSecurity_ReasonsHideInternalDNS: a host name that does not resolve
// fails its attempts with a reason that names the host and not the
// resolver's address; the operator's log keeps the resolver's error.
func TestSecurity_ReasonsHideInternalDNS(t *testing.T) {
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	in.createEndpoint("http://nonexistent.invalid/hooks", "payment.succeeded")
	d := in.waitState(in.ingest("payment.succeeded", `{}`).Deliveries[0].ID, "dead")
	if !strings.Contains(d.Reason, "could not resolve host nonexistent.invalid") {
		t.Errorf("reason %q does not say the host did not resolve", d.Reason)
	}
	var raw json.RawMessage
	in.mustCall(200, "GET", "/v1/tenants/acme/deliveries/"+d.ID, nil, &raw)
	if m := addressLike.FindString(string(raw)); m != "" {
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
