package engine

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

// addressClassTests is every row of the IANA special-purpose registries
// (and the address-space rows the code adds) with an address inside it,
// every IPv6 form that embeds an IPv4 address, and public addresses next
// to refused blocks. want "" means public.
var addressClassTests = []struct {
	addr, want string
}{
	// Public unicast, some right next to a refused block.
	{"8.8.8.8", ""},
	{"93.184.215.14", ""},
	{"100.63.255.255", ""},
	{"100.128.0.0", ""},
	{"198.17.255.255", ""},
	{"198.20.0.0", ""},
	{"2606:4700:4700::1111", ""},
	{"2001:4860:4860::8888", ""}, // Google: outside 2001::/23
	{"2001:200::1", ""},          // just past 2001::/23
	{"::ffff:8.8.8.8", ""},       // IPv4-mapped: dialled as 8.8.8.8

	// Registry rows whose "Globally Reachable" is True, some inside a
	// refused block.
	{"192.0.0.9", ""},    // Port Control Protocol anycast, in 192.0.0.0/24
	{"192.0.0.10", ""},   // TURN anycast, in 192.0.0.0/24
	{"192.31.196.1", ""}, // AS112-v4
	{"192.52.193.1", ""}, // AMT
	{"192.175.48.1", ""}, // direct delegation AS112
	{"192.88.99.1", ""},  // the terminated 6to4 relay anycast block is no longer special
	{"2001:1::1", ""},    // PCP anycast, in 2001::/23
	{"2001:1::2", ""},    // TURN anycast
	{"2001:1::3", ""},    // DNS-SD SRP anycast
	{"2001:3::1", ""},    // AMT
	{"2001:4:112::1", ""},
	{"2001:20::1", ""}, // ORCHIDv2
	{"2001:30::1", ""}, // drone remote ID
	{"2620:4f:8000::1", ""},

	// IPv4 special-purpose registry.
	{"0.0.0.0", "this-network"},
	{"0.1.2.3", "this-network"},
	{"10.1.2.3", "private"},
	{"172.16.0.1", "private"},
	{"172.31.255.255", "private"},
	{"192.168.1.1", "private"},
	{"100.64.0.1", "CGNAT"},
	{"100.127.255.255", "CGNAT"},
	{"127.0.0.1", "loopback"},
	{"127.255.255.254", "loopback"},
	{"169.254.169.254", "link-local"},
	{"192.0.0.100", "IETF protocol assignment"},
	{"192.0.0.255", "IETF protocol assignment"},
	{"192.0.0.1", "IPv4 service continuity"},
	{"192.0.0.8", "dummy"},
	{"192.0.0.170", "NAT64/DNS64 discovery"},
	{"192.0.0.171", "NAT64/DNS64 discovery"},
	{"192.0.2.1", "documentation"},
	{"198.51.100.1", "documentation"},
	{"203.0.113.255", "documentation"},
	{"192.88.99.2", "6a44 relay anycast"},
	{"198.18.0.1", "benchmarking"},
	{"198.19.255.255", "benchmarking"},
	{"240.0.0.1", "reserved"},
	{"255.255.255.254", "reserved"},
	{"255.255.255.255", "limited broadcast"},
	// IPv4 address space registry.
	{"224.0.0.1", "multicast"},
	{"239.255.255.250", "multicast"},

	// IPv6 special-purpose registry.
	{"::1", "loopback"},
	{"::", "unspecified"},
	{"100::1", "discard-only"},
	{"100::ffff:ffff:ffff:ffff", "discard-only"},
	{"100:0:0:1::1", "dummy"},
	{"2001::1", "Teredo"},
	{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"}, // server 65.54.227.120, client 192.0.2.45
	{"2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo"}, // client 127.0.0.1
	{"2001:2::1", "benchmarking"},
	{"2001:10::1", "IETF protocol assignment"}, // terminated ORCHID: its parent decides
	{"2001:100::1", "IETF protocol assignment"},
	{"2001:db8::1", "documentation"},
	{"3fff::1", "documentation"},
	{"5f00::1", "segment routing (SRv6) SID"},
	{"fd00::1", "private"},
	{"fc00::1", "private"},
	{"fe80::1", "link-local"},
	{"fe80::1%eth0", "link-local"},
	// IPv6 address space registry.
	{"ff02::1", "multicast"},
	{"ff05::2", "multicast"},
	{"fec0::1", "site-local (deprecated)"},
	{"fe00::1", "reserved"},
	{"4000::1", "reserved"},
	{"1::1", "reserved"},
	{"e000::1", "reserved"},

	// IPv6 forms that embed an IPv4 address: the IPv4 address decides
	// when it is not public, then the form itself.
	{"::ffff:127.0.0.1", "loopback"},         // IPv4-mapped
	{"::ffff:10.0.0.1", "private"},           // IPv4-mapped
	{"::ffff:169.254.169.254", "link-local"}, // IPv4-mapped
	{"::ffff:192.0.2.1", "documentation"},    // IPv4-mapped
	{"::127.0.0.1", "loopback"},              // IPv4-compatible
	{"::8.8.8.8", "IPv4-compatible"},         // IPv4-compatible, deprecated
	{"::ffff:0:127.0.0.1", "loopback"},       // IPv4-translated
	{"::ffff:0:7f00:1", "loopback"},          // IPv4-translated
	{"::ffff:0:10.0.0.1", "private"},         // IPv4-translated
	{"::ffff:0:8.8.8.8", "IPv4-translated"},  // IPv4-translated
	{"64:ff9b::7f00:1", "loopback"},          // NAT64 of 127.0.0.1
	{"64:ff9b::a9fe:a9fe", "link-local"},     // NAT64 of 169.254.169.254
	{"64:ff9b::c612:1", "benchmarking"},      // NAT64 of 198.18.0.1
	{"64:ff9b::808:808", ""},                 // NAT64 of 8.8.8.8
	{"64:ff9b:1::a00:1", "private"},          // local-use NAT64 of 10.0.0.1
	{"64:ff9b:1::808:808", "local-use IPv4/IPv6 translation"},
	{"2002:a00:1::1", "private"},          // 6to4 of 10.0.0.1
	{"2002:c0a8:101::1", "private"},       // 6to4 of 192.168.1.1
	{"2002:c000:201::1", "documentation"}, // 6to4 of 192.0.2.1
	{"2002:7f00:1::1", "loopback"},        // 6to4 of 127.0.0.1
	{"2002:808:808::1", ""},               // 6to4 of 8.8.8.8
}

func TestAddressClass(t *testing.T) {
	for _, tt := range addressClassTests {
		t.Run(tt.addr, func(t *testing.T) {
			if got := AddressClass(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Errorf("AddressClass(%s) = %q, want %q", tt.addr, got, tt.want)
			}
		})
	}
	if got := AddressClass(netip.Addr{}); got == "" {
		t.Error("the invalid address is public")
	}
}

// TestTargetPolicy_dialControl: the Control hook refuses every address
// AddressClass refuses, in every form it can be dialled, and says what and
// why for an address literal.
func TestTargetPolicy_dialControl(t *testing.T) {
	strict := TargetPolicy{}
	for _, tt := range addressClassTests {
		addr := netip.AddrPortFrom(netip.MustParseAddr(tt.addr), 443).String()
		t.Run(addr, func(t *testing.T) {
			err := strict.dialControl("tcp", addr, nil)
			if tt.want == "" {
				if err != nil {
					t.Errorf("dial a public address: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrTargetRefused) {
				t.Fatalf("dial %s: %v, want ErrTargetRefused", addr, err)
			}
			if msg := err.Error(); !strings.Contains(msg, " "+tt.want+" address") || !strings.Contains(msg, "allow_private_targets") {
				t.Errorf("refusal %q does not name the class %q and the setting", msg, tt.want)
			}
		})
	}
	if err := strict.dialControl("tcp4", "garbage", nil); !errors.Is(err, ErrTargetRefused) {
		t.Errorf("dial garbage: %v, want ErrTargetRefused", err)
	}
	if err := (TargetPolicy{AllowPrivate: true}).dialControl("tcp", "127.0.0.1:80", nil); err != nil {
		t.Errorf("dial loopback with AllowPrivate: %v", err)
	}
	err := strict.dialControl("tcp", "127.0.0.1:8080", nil)
	if msg := err.Error(); !strings.Contains(msg, "127.0.0.1 is a loopback address (127.0.0.0/8)") || !strings.Contains(msg, "allow_private_targets") {
		t.Errorf("refusal %q does not say what and why", msg)
	}
	err = strict.dialControl("tcp", "[::ffff:0:7f00:1]:443", nil)
	if err == nil {
		t.Fatal("dial [::ffff:0:7f00:1]:443 allowed")
	}
	if msg := err.Error(); !strings.Contains(msg, "::ffff:0:7f00:1 is a loopback address (127.0.0.1 in 127.0.0.0/8, inside an IPv4-translated address)") {
		t.Errorf("refusal %q does not name the embedded address and the form", msg)
	}
}

func TestTargetPolicy_checkTargetURL(t *testing.T) {
	resolve := map[string][]string{
		"hooks.example.com":  {"93.184.215.14"},
		"internal.example":   {"10.0.0.7"},
		"mixed.example":      {"93.184.215.14", "127.0.0.1"},
		"metadata.example":   {"169.254.169.254"},
		"v6.example":         {"2606:4700:4700::1111"},
		"v6private.example":  {"fd12::1"},
		"translated.example": {"::ffff:0:a00:1"},
		"unresolved.example": nil,
	}
	lookups := 0
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		lookups++
		addrs, ok := resolve[host]
		if !ok || addrs == nil {
			return nil, errors.New("no such host")
		}
		var out []netip.Addr
		for _, a := range addrs {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
	strict, dev := TargetPolicy{}, TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	tests := []struct {
		url    string
		policy TargetPolicy
		want   string // "" accepted; else a part of the message
	}{
		{"https://hooks.example.com/in", strict, ""},
		{"https://v6.example/in", strict, ""},
		{"https://unresolved.example/in", strict, ""}, // checked when dialled
		{"https://93.184.215.14/in", strict, ""},
		{"http://hooks.example.com/in", strict, "must be https"},
		{"http://hooks.example.com/in", TargetPolicy{AllowHTTP: true}, ""},
		{"https://127.0.0.1/in", strict, "127.0.0.1 is a loopback address (127.0.0.0/8)"},
		{"https://[::1]:8443/in", strict, "loopback"},
		{"https://localhost/in", strict, "host localhost resolves to a non-public address"},
		{"https://api.LOCALHOST./in", strict, "host api.LOCALHOST. resolves to a non-public address"},
		{"https://10.0.0.1/in", strict, "private"},
		{"https://internal.example/in", strict, "url host internal.example resolves to a non-public address, not allowed ([delivery] allow_private_targets = false)"},
		{"https://mixed.example/in", strict, "resolves to a non-public address"},
		{"https://metadata.example/latest", strict, "resolves to a non-public address"},
		{"https://169.254.169.254/latest", strict, "link-local"},
		{"https://v6private.example/", strict, "resolves to a non-public address"},
		{"https://translated.example/", strict, "resolves to a non-public address"},
		{"https://100.64.1.1/", strict, "CGNAT"},
		{"https://0.0.0.0/", strict, "this-network"},
		{"https://224.0.0.1/", strict, "multicast"},
		{"https://[::ffff:192.168.0.1]/", strict, "private"},
		{"https://[::ffff:0:127.0.0.1]/", strict, "loopback"},
		{"https://198.18.0.1/", strict, "benchmarking"},
		{"https://192.0.0.1/", strict, "IPv4 service continuity"},
		{"https://192.0.2.1/", strict, "documentation"},
		{"https://[100::1]/", strict, "discard-only"},
		{"https://[2001:db8::1]/", strict, "documentation"},
		{"https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", strict, "Teredo"},
		{"http://127.0.0.1:9000/hooks", dev, ""},
		{"https://internal.example/in", TargetPolicy{AllowPrivate: true}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := tt.policy.checkTargetURL(context.Background(), tt.url, lookup)
			if tt.want == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidField || e.Field != "url" || !strings.Contains(e.Message, tt.want) {
				t.Errorf("error %v, want invalid_field url saying %q", err, tt.want)
			}
			if u, _ := url.Parse(tt.url); net.ParseIP(u.Hostname()) == nil {
				// A name: the answer must not tell what it resolves to.
				for _, addrs := range resolve {
					for _, a := range addrs {
						if strings.Contains(e.Message, a) {
							t.Errorf("refusal of a name %q shows the address %s it resolves to", e.Message, a)
						}
					}
				}
				for _, class := range []string{"loopback", "private", "link-local"} {
					if strings.Contains(e.Message, " "+class+" address") {
						t.Errorf("refusal of a name %q names the class %s", e.Message, class)
					}
				}
			}
		})
	}
	lookups = 0
	if err := dev.checkTargetURL(context.Background(), "http://internal.example/", lookup); err != nil || lookups != 0 {
		t.Errorf("with every target allowed: %v after %d lookups, want no lookup at all", err, lookups)
	}
}

func TestNewHTTPClient_refusesPlainHTTP(t *testing.T) {
	c := NewHTTPClient(1, 1, TargetPolicy{AllowPrivate: true})
	_, err := c.Post("http://127.0.0.1:1/", "application/json", strings.NewReader("{}"))
	if !errors.Is(err, ErrTargetRefused) {
		t.Fatalf("POST http:// = %v, want ErrTargetRefused before any dial", err)
	}
	if out, why := classify(0, err, 0, false, nil); out != OutcomePermanent || !strings.Contains(why, "allow_http") {
		t.Errorf("classify = %s %q, want permanent naming allow_http", out, why)
	}
}

// TestNewHTTPClient_refusalAtDialHidesAddress: a refusal at dial time of
// an endpoint named by a host name says that the name resolves to a
// non-public address, not which; one named by an address literal names it
// and its class.
func TestNewHTTPClient_refusalAtDialHidesAddress(t *testing.T) {
	c := NewHTTPClient(1, 1, TargetPolicy{AllowHTTP: true})
	_, err := c.Post("http://localhost:1/hooks?token=s3cret", "application/json", strings.NewReader("{}"))
	out, why := classify(0, err, time.Second, false, nil)
	if out != OutcomePermanent || !strings.Contains(why, "host localhost resolves to a non-public address") || !strings.Contains(why, "allow_private_targets") {
		t.Errorf("classify = %s %q, want permanent saying localhost resolves to a non-public address", out, why)
	}
	for _, leak := range []string{"127.0.0.1", "::1", "loopback", "s3cret"} {
		if strings.Contains(why, leak) {
			t.Errorf("reason %q shows %q", why, leak)
		}
	}
	_, err = c.Post("http://127.0.0.1:1/", "application/json", strings.NewReader("{}"))
	if _, why := classify(0, err, time.Second, false, nil); !strings.Contains(why, "127.0.0.1 is a loopback address") {
		t.Errorf("refusal of a literal: %q, want it named with its class", why)
	}
}

// TestAddressBlocks: every row of the table is a masked prefix, and no
// prefix is listed twice (the longest match would be ambiguous).
func TestAddressBlocks(t *testing.T) {
	seen := map[netip.Prefix]bool{}
	for _, b := range addressBlocks {
		if b.prefix != b.prefix.Masked() {
			t.Errorf("%s is not masked (%s)", b.prefix, b.prefix.Masked())
		}
		if seen[b.prefix] {
			t.Errorf("%s is listed twice", b.prefix)
		}
		seen[b.prefix] = true
		if b.inner != nil && !b.prefix.Addr().Is6() {
			t.Errorf("%s: only IPv6 forms carry an IPv4 address", b.prefix)
		}
	}
}
