package engine

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestAddressClass(t *testing.T) {
	tests := []struct {
		addr, want string
	}{
		{"8.8.8.8", ""},
		{"93.184.215.14", ""},
		{"2606:4700:4700::1111", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"fd00::1", "private"},
		{"fec0::1", "private"},
		{"::ffff:10.0.0.1", "private"},
		{"169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"ff05::2", "multicast"},
		{"100.64.0.1", "CGNAT (shared address space)"},
		{"100.127.255.255", "CGNAT (shared address space)"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"::", "unspecified"},
		{"255.255.255.255", "reserved"},
		{"240.0.0.1", "reserved"},
		{"64:ff9b::7f00:1", "loopback"},          // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", "link-local"},     // NAT64 of 169.254.169.254
		{"64:ff9b::808:808", ""},                 // NAT64 of 8.8.8.8
		{"2002:a00:1::1", "private"},             // 6to4 of 10.0.0.1
		{"2002:c0a8:101::1", "private"},          // 6to4 of 192.168.1.1
		{"::127.0.0.1", "loopback"},              // IPv4-compatible
		{"64:ff9b:1::a00:1", "private"},          // local-use NAT64 of 10.0.0.1
		{"2001:db8::1", ""},                      // documentation, unroutable anyway
		{"2002:808:808::1", ""},                  // 6to4 of 8.8.8.8
		{"::ffff:169.254.169.254", "link-local"}, // mapped metadata service
	}
	for _, tt := range tests {
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

func TestTargetPolicy_dialControl(t *testing.T) {
	strict := TargetPolicy{}
	for _, addr := range []string{"127.0.0.1:443", "[::1]:443", "10.0.0.1:80", "169.254.169.254:80", "[::ffff:127.0.0.1]:443", "garbage"} {
		err := strict.dialControl("tcp4", addr, nil)
		if !errors.Is(err, ErrTargetRefused) {
			t.Errorf("dial %s: %v, want ErrTargetRefused", addr, err)
		}
	}
	if err := strict.dialControl("tcp", "93.184.215.14:443", nil); err != nil {
		t.Errorf("dial a public address: %v", err)
	}
	if err := (TargetPolicy{AllowPrivate: true}).dialControl("tcp", "127.0.0.1:80", nil); err != nil {
		t.Errorf("dial loopback with AllowPrivate: %v", err)
	}
	err := strict.dialControl("tcp", "127.0.0.1:8080", nil)
	if msg := err.Error(); !strings.Contains(msg, "127.0.0.1 is a loopback address") || !strings.Contains(msg, "allow_private_targets") {
		t.Errorf("refusal %q does not say what and why", msg)
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
		{"https://127.0.0.1/in", strict, "loopback"},
		{"https://[::1]:8443/in", strict, "loopback"},
		{"https://localhost/in", strict, "loopback"},
		{"https://api.LOCALHOST./in", strict, "loopback"},
		{"https://10.0.0.1/in", strict, "private"},
		{"https://internal.example/in", strict, "10.0.0.7 is a private address"},
		{"https://mixed.example/in", strict, "loopback"},
		{"https://metadata.example/latest", strict, "link-local"},
		{"https://169.254.169.254/latest", strict, "link-local"},
		{"https://v6private.example/", strict, "private"},
		{"https://100.64.1.1/", strict, "CGNAT"},
		{"https://0.0.0.0/", strict, "unspecified"},
		{"https://224.0.0.1/", strict, "multicast"},
		{"https://[::ffff:192.168.0.1]/", strict, "private"},
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
	if out, why := classify(0, err, 0); out != OutcomePermanent || !strings.Contains(why, "allow_http") {
		t.Errorf("classify = %s %q, want permanent naming allow_http", out, why)
	}
}
