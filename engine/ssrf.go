package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// TargetPolicy says where attempts may go. A webhook sender POSTs to URLs
// its customers choose, which makes it a server-side request forgery
// machine unless the targets are checked: an endpoint at
// http://169.254.169.254/ or http://10.0.0.5:6379/ would have webhookd
// talk to the cloud metadata service or an internal database on the
// attacker's behalf.
//
// IMPORTANT: the zero value is the strict policy, and it is what an
// options struct that does not set one gets: https only, and no address
// that is loopback, private, link-local, multicast, CGNAT (shared address
// space) or unspecified. Loosen it only for local development and tests.
//
// The address check is made twice. When an endpoint is created or its URL
// changed, an IP literal is checked and a host name is resolved and every
// address checked (a name that does not resolve then is accepted: it is
// checked when dialled). And on every connection an attempt or a challenge
// makes, the address actually dialled is checked by the dialer's Control
// hook (see NewHTTPClient), so a DNS answer that changes after the check (a
// rebinding attack) still cannot reach an internal address.
type TargetPolicy struct {
	// AllowHTTP allows plain http:// endpoints. Zero: https only.
	AllowHTTP bool
	// AllowPrivate allows every address, internal ones included.
	// Zero: only public unicast addresses (see AddressClass).
	AllowPrivate bool
}

// ErrTargetRefused is matched (errors.Is) by every refusal of TargetPolicy:
// a *TargetError.
var ErrTargetRefused = errors.New("target refused by the delivery policy")

// TargetError is a refused target: a plain-http URL, or an address of a
// refused class.
type TargetError struct {
	Addr   netip.Addr // the refused address; invalid for a scheme refusal
	Class  string     // "loopback", "private", ...; "" for a scheme refusal
	Scheme string     // "http" for a scheme refusal
}

func (e *TargetError) Error() string {
	if e.Class == "" {
		return "plain http is not allowed ([delivery] allow_http = false); use an https URL"
	}
	return fmt.Sprintf("%s is a %s address, not allowed ([delivery] allow_private_targets = false)", e.Addr, e.Class)
}

// Is makes errors.Is(err, ErrTargetRefused) true for every *TargetError.
func (e *TargetError) Is(target error) bool { return target == ErrTargetRefused }

// Address ranges that are refused besides what netip.Addr's own predicates
// cover. IPv6 forms that embed an IPv4 address are checked on the embedded
// address too.
var (
	prefixThisNetwork = netip.MustParsePrefix("0.0.0.0/8")     // "this network", RFC 1122
	prefixCGNAT       = netip.MustParsePrefix("100.64.0.0/10") // shared address space, RFC 6598
	prefixReserved    = netip.MustParsePrefix("240.0.0.0/4")   // reserved, and the broadcast address
	prefixSiteLocal   = netip.MustParsePrefix("fec0::/10")     // deprecated site-local, RFC 3879
	prefixNAT64       = netip.MustParsePrefix("64:ff9b::/96")  // NAT64: last 32 bits are IPv4
	prefixNAT64Local  = netip.MustParsePrefix("64:ff9b:1::/48")
	prefix6to4        = netip.MustParsePrefix("2002::/16") // 6to4: bits 16-47 are IPv4
	prefixV4Compat    = netip.MustParsePrefix("::/96")     // deprecated IPv4-compatible
)

// AddressClass returns why a is not a public unicast address ("loopback",
// "private", "link-local", "multicast", "CGNAT (shared address space)",
// "unspecified", "reserved"), or "" when it is one. An IPv4-mapped,
// IPv4-compatible, NAT64 or 6to4 IPv6 address is judged by the IPv4
// address inside it as well.
func AddressClass(a netip.Addr) string {
	if !a.IsValid() {
		return "invalid"
	}
	a = a.WithZone("").Unmap()
	switch {
	case a.IsUnspecified(), prefixThisNetwork.Contains(a):
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate(), prefixSiteLocal.Contains(a):
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	case prefixCGNAT.Contains(a):
		return "CGNAT (shared address space)"
	case prefixReserved.Contains(a):
		return "reserved"
	}
	if a.Is6() {
		b := a.As16()
		var v4 [4]byte
		switch {
		case prefixNAT64.Contains(a), prefixV4Compat.Contains(a):
			copy(v4[:], b[12:16])
		case prefixNAT64Local.Contains(a):
			copy(v4[:], b[12:16])
		case prefix6to4.Contains(a):
			copy(v4[:], b[2:6])
		default:
			return ""
		}
		return AddressClass(netip.AddrFrom4(v4))
	}
	return ""
}

// CheckAddr returns a *TargetError when p refuses a, nil otherwise.
func (p TargetPolicy) CheckAddr(a netip.Addr) error {
	if p.AllowPrivate {
		return nil
	}
	if class := AddressClass(a); class != "" {
		return &TargetError{Addr: a.WithZone("").Unmap(), Class: class}
	}
	return nil
}

// dialControl is the net.Dialer Control hook: it runs after the name is
// resolved and before each connect, on the address being dialled.
func (p TargetPolicy) dialControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		// Not an IP:port: refuse rather than guess.
		return &TargetError{Class: "unparsable (" + address + ")"}
	}
	return p.CheckAddr(ap.Addr())
}

// lookupTimeout bounds the DNS lookup of the create-time check.
const lookupTimeout = 3 * time.Second

// checkTargetURL is the create-time check of an endpoint URL already
// accepted by ValidateEndpointURL: the scheme, and every address the host
// names now. Refusals are CodeInvalidField errors on "url".
func (p TargetPolicy) checkTargetURL(ctx context.Context, raw string, lookup func(context.Context, string) ([]netip.Addr, error)) error {
	u, err := url.Parse(raw)
	if err != nil {
		return Errorf(CodeInvalidField, "url", "url does not parse")
	}
	if u.Scheme != "https" && !p.AllowHTTP {
		return Errorf(CodeInvalidField, "url", "url must be https: this webhookd does not send to plain http ([delivery] allow_http = false)")
	}
	if p.AllowPrivate {
		return nil
	}
	host := u.Hostname()
	refused := func(err error) error {
		return &Error{Code: CodeInvalidField, Field: "url", Message: "url host " + host + " is refused: " + err.Error(), Err: err}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if err := p.CheckAddr(a); err != nil {
			return refused(err)
		}
		return nil
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		// RFC 6761: always loopback, whatever a resolver says.
		return refused(&TargetError{Addr: netip.MustParseAddr("127.0.0.1"), Class: "loopback"})
	}
	lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	addrs, err := lookup(lctx, host)
	if err != nil {
		return nil // checked when dialled
	}
	for _, a := range addrs {
		if err := p.CheckAddr(a); err != nil {
			return refused(err)
		}
	}
	return nil
}

// lookupNetIP resolves host with the default resolver.
func lookupNetIP(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// httpsOnly is the RoundTripper of a client whose policy refuses plain
// http: the request is refused before anything is dialled.
type httpsOnly struct{ next *http.Transport }

func (t httpsOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != "https" {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, &TargetError{Scheme: r.URL.Scheme}
	}
	return t.next.RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport.
func (t httpsOnly) CloseIdleConnections() { t.next.CloseIdleConnections() }

// targetRefusal returns the refusal in err's chain, if any.
func targetRefusal(err error) (*TargetError, bool) {
	return errors.AsType[*TargetError](err)
}

// refusalReason returns the words of the refusal in err's chain.
func refusalReason(err error) string {
	if te, ok := targetRefusal(err); ok {
		return te.Error()
	}
	return ErrTargetRefused.Error()
}
