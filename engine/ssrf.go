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
// options struct that does not set one gets: https only, and only
// addresses that are globally reachable unicast (see AddressClass). Loosen
// it only for local development and tests.
//
// The address check is made twice. When an endpoint is created or its URL
// changed, an IP literal is checked and a host name is resolved and every
// address checked (a name that does not resolve then is accepted: it is
// checked when dialled). And on every connection an attempt or a challenge
// makes, the address actually dialled is checked by the dialer's Control
// hook (see NewHTTPClient), so a DNS answer that changes after the check (a
// rebinding attack) still cannot reach an internal address.
//
// A refusal of a host name never says what the name resolved to, at
// creation or at dial time: whoever may create an endpoint would otherwise
// learn the internal DNS through webhookd. A refusal of an address literal
// names the address and its class.
type TargetPolicy struct {
	// AllowHTTP allows plain http:// endpoints. Zero: https only.
	AllowHTTP bool
	// AllowPrivate allows every address, internal ones included.
	// Zero: only globally reachable unicast addresses (see AddressClass).
	AllowPrivate bool
	// Proxy, when set, is the egress proxy every attempt and challenge
	// goes through ([delivery] proxy): an http, https or socks5 URL,
	// with the proxy's credentials as its user info. The dialer then
	// dials the proxy alone, whose address is the operator's choice and
	// is not checked; the proxy resolves the endpoint's host and dials
	// it, so the check on the address dialled cannot be made here.
	// Instead, unless AllowPrivate, each request's host is checked
	// before it is sent (proxyChecked): an address literal, a localhost
	// name, and every address this machine resolves the name to; a name
	// this machine cannot resolve is left to the proxy (a VM whose only
	// way out is the proxy often resolves no outside name). A DNS answer
	// that differs between this machine and the proxy is the proxy's to
	// judge: docs/security.md says to run one that refuses internal
	// addresses itself (such as smokescreen) when that matters.
	Proxy *url.URL
}

// ErrTargetRefused is matched (errors.Is) by every refusal of TargetPolicy:
// a *TargetError.
var ErrTargetRefused = errors.New("target refused by the delivery policy")

// TargetError is a refused target: a plain-http URL, or an address of a
// refused class.
type TargetError struct {
	Addr  netip.Addr   // the refused address; invalid for a scheme refusal
	Class string       // "loopback", "private", ... (see AddressClass); "" for a scheme refusal
	Block netip.Prefix // the registry block of Class
	// Inner is the IPv4 address inside Addr, an IPv6 translation form
	// (Form: "NAT64", "6to4", ...), when Inner is what is refused.
	Inner netip.Addr
	Form  string
	// Host is the host name that resolved to Addr, when the URL named
	// one: the message then shows neither Addr nor Class.
	Host   string
	Scheme string // "http" for a scheme refusal
}

const allowPrivateHint = "not allowed ([delivery] allow_private_targets = false)"

// devHint ends an endpoint URL the target policy refuses at its create:
// the way to a local trial, for whoever reads the answer.
const devHint = "; for a local trial, start webhookd with -dev"

func (e *TargetError) Error() string {
	switch {
	case e.Class == "":
		return "plain http is not allowed ([delivery] allow_http = false); use an https URL"
	case e.Host != "":
		return "host " + e.Host + " resolves to a non-public address, " + allowPrivateHint
	case !e.Addr.IsValid():
		return "the address dialled does not parse, " + allowPrivateHint
	case e.Inner.IsValid():
		return fmt.Sprintf("%s is %s %s address (%s in %s, inside %s %s address), %s",
			e.Addr, article(e.Class), e.Class, e.Inner, e.Block, article(e.Form), e.Form, allowPrivateHint)
	}
	return fmt.Sprintf("%s is %s %s address (%s), %s", e.Addr, article(e.Class), e.Class, e.Block, allowPrivateHint)
}

// Is makes errors.Is(err, ErrTargetRefused) true for every *TargetError.
func (e *TargetError) Is(target error) bool { return target == ErrTargetRefused }

func article(word string) string {
	if word != "" && strings.ContainsRune("aeiouAEIOU", rune(word[0])) {
		return "an"
	}
	return "a"
}

// addressBlock is a row of addressBlocks.
type addressBlock struct {
	prefix netip.Prefix
	class  string // what a refusal calls it; "" for a globally reachable block
	// form names an IPv6 translation form; inner returns the IPv4
	// address inside an address of it, which is judged first.
	form  string
	inner func(b [16]byte) netip.Addr
}

func block(prefix, class string) addressBlock {
	return addressBlock{prefix: netip.MustParsePrefix(prefix), class: class}
}

// translation is a block of an IPv6 form that carries an IPv4 address.
func translation(prefix, class, form string, inner func([16]byte) netip.Addr) addressBlock {
	b := block(prefix, class)
	b.form, b.inner = form, inner
	return b
}

func last32(b [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(b[12:16])) }

// addressBlocks is the table AddressClass reads: the longest prefix that
// holds an address decides. Its rows are, in order:
//
//   - the IANA IPv4 Special-Purpose Address Registry and the IANA IPv6
//     Special-Purpose Address Registry (RFC 6890), both as last updated
//     2025-10-09 (the newest row: 100:0:0:1::/64, RFC 9780, 2025-04):
//     every row, with the registry's "Globally Reachable" column deciding
//     (False: refused; True: allowed, even inside a refused block, as
//     192.0.0.9/32 is inside 192.0.0.0/24). Two rows say N/A: 2002::/16
//     (6to4) is judged by the IPv4 address inside it, and 2001::/32
//     (Teredo) is refused, as the 2001::/23 that holds it is: its
//     client address is a NAT's, which says nothing about where a packet
//     ends up, and nobody runs a webhook receiver on Teredo. Terminated
//     rows (192.88.99.0/24, 2001:10::/28) are no longer special: their
//     parent, if any, decides. ::ffff:0:0/96 (IPv4-mapped) is never
//     looked up: AddressClass unmaps it, as the kernel dials it as IPv4;
//   - from the IANA IPv4 Address Space registry, 224.0.0.0/4 (multicast);
//     from the IANA IPv6 Address Space registry, every block but
//     2000::/3 (global unicast) is reserved, multicast or local;
//   - two IPv6 forms of no registry that carry an IPv4 address:
//     IPv4-compatible ::/96 (RFC 4291 §2.5.5.1, deprecated) and
//     IPv4-translated ::ffff:0:0:0/96 (RFC 2765 §2.1, obsolete).
//
// Each IPv6 form that carries an IPv4 address (IPv4-compatible,
// IPv4-translated, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4) is judged
// by that address first, so that no form lets an internal IPv4 address
// through; then by its own row.
var addressBlocks = []addressBlock{
	// IPv4 Special-Purpose Address Registry.
	block("0.0.0.0/8", "this-network"), // 0.0.0.0/32 "this host on this network" is inside
	block("10.0.0.0/8", "private"),
	block("100.64.0.0/10", "CGNAT"), // shared address space, RFC 6598
	block("127.0.0.0/8", "loopback"),
	block("169.254.0.0/16", "link-local"),
	block("172.16.0.0/12", "private"),
	block("192.0.0.0/24", "IETF protocol assignment"),
	block("192.0.0.0/29", "IPv4 service continuity"),
	block("192.0.0.8/32", "dummy"),
	block("192.0.0.9/32", ""),  // Port Control Protocol anycast
	block("192.0.0.10/32", ""), // TURN anycast
	block("192.0.0.170/32", "NAT64/DNS64 discovery"),
	block("192.0.0.171/32", "NAT64/DNS64 discovery"),
	block("192.0.2.0/24", "documentation"),
	block("192.31.196.0/24", ""), // AS112-v4
	block("192.52.193.0/24", ""), // AMT
	block("192.88.99.2/32", "6a44 relay anycast"),
	block("192.168.0.0/16", "private"),
	block("192.175.48.0/24", ""), // direct delegation AS112 service
	block("198.18.0.0/15", "benchmarking"),
	block("198.51.100.0/24", "documentation"),
	block("203.0.113.0/24", "documentation"),
	block("240.0.0.0/4", "reserved"),
	block("255.255.255.255/32", "limited broadcast"),
	// IPv4 Address Space registry.
	block("224.0.0.0/4", "multicast"),

	// IPv6 Special-Purpose Address Registry.
	block("::1/128", "loopback"),
	block("::/128", "unspecified"),
	translation("64:ff9b::/96", "", "NAT64", last32),
	translation("64:ff9b:1::/48", "local-use IPv4/IPv6 translation", "local-use NAT64", last32),
	block("100::/64", "discard-only"),
	block("100:0:0:1::/64", "dummy"),
	block("2001::/23", "IETF protocol assignment"),
	block("2001::/32", "Teredo"),
	block("2001:1::1/128", ""), // Port Control Protocol anycast
	block("2001:1::2/128", ""), // TURN anycast
	block("2001:1::3/128", ""), // DNS-SD service registration protocol anycast
	block("2001:2::/48", "benchmarking"),
	block("2001:3::/32", ""),     // AMT
	block("2001:4:112::/48", ""), // AS112-v6
	block("2001:20::/28", ""),    // ORCHIDv2
	block("2001:30::/28", ""),    // drone remote ID entity tags
	block("2001:db8::/32", "documentation"),
	translation("2002::/16", "", "6to4", func(b [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(b[2:6])) }),
	block("2620:4f:8000::/48", ""), // direct delegation AS112 service
	block("3fff::/20", "documentation"),
	block("5f00::/16", "segment routing (SRv6) SID"),
	block("fc00::/7", "private"), // unique-local
	block("fe80::/10", "link-local"),
	// IPv6 Address Space registry.
	block("::/8", "reserved"),
	block("100::/8", "reserved"),
	block("200::/7", "reserved"),
	block("400::/6", "reserved"),
	block("800::/5", "reserved"),
	block("1000::/4", "reserved"),
	block("2000::/3", ""), // global unicast
	block("4000::/3", "reserved"),
	block("6000::/3", "reserved"),
	block("8000::/3", "reserved"),
	block("a000::/3", "reserved"),
	block("c000::/3", "reserved"),
	block("e000::/4", "reserved"),
	block("f000::/5", "reserved"),
	block("f800::/6", "reserved"),
	block("fe00::/9", "reserved"),
	block("fec0::/10", "site-local (deprecated)"),
	block("ff00::/8", "multicast"),
	// IPv6 forms of no registry that carry an IPv4 address.
	translation("::/96", "IPv4-compatible", "IPv4-compatible", last32),
	translation("::ffff:0:0:0/96", "IPv4-translated", "IPv4-translated", last32),
}

// judge returns the refusal of a, nil when a is globally reachable
// unicast. See addressBlocks.
func judge(a netip.Addr) *TargetError {
	if !a.IsValid() {
		return &TargetError{Class: "invalid"}
	}
	a = a.WithZone("").Unmap()
	var row *addressBlock
	for i := range addressBlocks {
		b := &addressBlocks[i]
		if b.prefix.Contains(a) && (row == nil || b.prefix.Bits() > row.prefix.Bits()) {
			row = b
		}
	}
	if row == nil {
		return nil // IPv4 unicast outside every special block
	}
	if row.inner != nil {
		inner := row.inner(a.As16())
		if te := judge(inner); te != nil {
			te.Addr, te.Inner, te.Form = a, inner, row.form
			return te
		}
	}
	if row.class == "" {
		return nil
	}
	return &TargetError{Addr: a, Class: row.class, Block: row.prefix}
}

// AddressClass returns why a is not a globally reachable unicast address,
// as the IANA registries say (see addressBlocks): "loopback", "private",
// "link-local", "multicast", "CGNAT", "this-network", "unspecified",
// "documentation", "benchmarking", "reserved", "Teredo", ...; or "" when
// it is one. An IPv6 address that carries an IPv4 address (IPv4-mapped,
// IPv4-compatible, IPv4-translated, NAT64, 6to4) has the class of that
// IPv4 address when it is refused.
func AddressClass(a netip.Addr) string {
	if te := judge(a); te != nil {
		return te.Class
	}
	return ""
}

// CheckAddr returns a *TargetError when p refuses a, nil otherwise.
func (p TargetPolicy) CheckAddr(a netip.Addr) error {
	if te := p.refusal(a); te != nil {
		return te
	}
	return nil
}

func (p TargetPolicy) refusal(a netip.Addr) *TargetError {
	if p.AllowPrivate {
		return nil
	}
	return judge(a)
}

// dialControl is the net.Dialer Control hook: it runs after the name is
// resolved and before each connect, on the address being dialled.
func (p TargetPolicy) dialControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		// Not an IP:port: refuse rather than guess.
		return &TargetError{Class: "unparsable"}
	}
	return p.CheckAddr(ap.Addr())
}

// namingRefusals wraps a dial function whose dialer has dialControl: a
// refusal of an address that a host name resolved to gets that name as its
// Host, so that its message does not show the address.
func namingRefusals(dial func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := dial(ctx, network, address)
		if te, ok := targetRefusal(err); ok {
			if host, _, serr := net.SplitHostPort(address); serr == nil {
				if _, perr := netip.ParseAddr(host); perr != nil {
					te.Host = host
				}
			}
		}
		return c, err
	}
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
		return Errorf(CodeInvalidField, "url", "url must be https: this webhookd does not send to plain http ([delivery] allow_http = false)"+devHint)
	}
	if p.AllowPrivate {
		return nil
	}
	host := u.Hostname()
	refused := func(te *TargetError) error {
		msg := "url host " + host + " is refused: " + te.Error() + devHint
		if te.Host != "" {
			msg = "url " + te.Error() + devHint
		}
		return &Error{Code: CodeInvalidField, Field: "url", Message: msg, Err: te}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if te := p.refusal(a); te != nil {
			return refused(te)
		}
		return nil
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		// RFC 6761: always loopback, whatever a resolver says.
		te := p.refusal(netip.IPv6Loopback())
		te.Host = host
		return refused(te)
	}
	lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	addrs, err := lookup(lctx, host)
	if err != nil {
		return nil // checked when dialled
	}
	for _, a := range addrs {
		if te := p.refusal(a); te != nil {
			te.Host = host
			return refused(te)
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
type httpsOnly struct{ next http.RoundTripper }

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
func (t httpsOnly) CloseIdleConnections() { closeIdle(t.next) }

// closeIdle closes rt's idle connections, when it keeps any.
func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// proxyChecked is the RoundTripper of a client that sends through
// TargetPolicy.Proxy with AllowPrivate off: the request's host is
// checked before it is sent, as TargetPolicy.Proxy says, and a refusal
// names the host and not the address it resolved to, as at dial time.
type proxyChecked struct {
	next   http.RoundTripper
	policy TargetPolicy
	lookup func(context.Context, string) ([]netip.Addr, error)
}

func (t proxyChecked) RoundTrip(r *http.Request) (*http.Response, error) {
	if te := t.refusal(r.Context(), r.URL.Hostname()); te != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, te
	}
	return t.next.RoundTrip(r)
}

// refusal is the check of host: nil when it may be sent to.
func (t proxyChecked) refusal(ctx context.Context, host string) *TargetError {
	if a, err := netip.ParseAddr(host); err == nil {
		return t.policy.refusal(a)
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		te := t.policy.refusal(netip.IPv6Loopback())
		te.Host = host
		return te
	}
	lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	addrs, err := t.lookup(lctx, host)
	if err != nil {
		return nil // the proxy resolves it, or fails to
	}
	for _, a := range addrs {
		if te := t.policy.refusal(a); te != nil {
			te.Host = host
			return te
		}
	}
	return nil
}

func (t proxyChecked) CloseIdleConnections() { closeIdle(t.next) }

// targetRefusal returns the refusal in err's chain, if any.
func targetRefusal(err error) (*TargetError, bool) {
	if err == nil {
		return nil, false
	}
	return errors.AsType[*TargetError](err)
}

// refusalReason returns the words of the refusal in err's chain.
func refusalReason(err error) string {
	if te, ok := targetRefusal(err); ok {
		return te.Error()
	}
	return ErrTargetRefused.Error()
}

// proxyError is a request the egress proxy (TargetPolicy.Proxy) failed,
// not the receiver: it could not be reached, refused its credentials or
// refused the tunnel. An attempt it fails is retried (classify), with a
// reason that names the proxy; the proxy's URL, and so its password, is
// never in it.
type proxyError struct {
	status int   // the proxy's answer, when it answered
	tunnel bool  // status answered CONNECT
	err    error // the transport's error, when it did not answer
}

func (e *proxyError) Error() string {
	switch {
	case e.err != nil:
		return "the egress proxy: " + transportError(e.err)
	case e.tunnel:
		return fmt.Sprintf("the egress proxy answered the tunnel request (CONNECT) HTTP %d %s%s", e.status, http.StatusText(e.status), e.hint())
	}
	return fmt.Sprintf("the egress proxy answered HTTP %d %s%s", e.status, http.StatusText(e.status), e.hint())
}

func (e *proxyError) hint() string {
	if e.status == http.StatusProxyAuthRequired {
		return "; check the credentials in its URL"
	}
	return ""
}

func (e *proxyError) Unwrap() error { return e.err }

// viaProxy is the RoundTripper of a client that sends through
// TargetPolicy.Proxy: what the proxy, not the receiver, failed becomes a
// *proxyError. forwards is set for an http(s) proxy, which forwards a
// plain-http request itself: its 407 is the proxy's own (a request
// tunnelled to an https receiver, or sent through socks5, reaches the
// receiver, whose 407 is the receiver's answer).
type viaProxy struct {
	next     http.RoundTripper
	forwards bool
}

func (t viaProxy) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		if oe, ok := errors.AsType[*net.OpError](err); ok && (oe.Op == "proxyconnect" || strings.HasPrefix(oe.Op, "socks ")) {
			return nil, &proxyError{err: err}
		}
		return nil, err
	}
	if t.forwards && r.URL.Scheme == "http" && resp.StatusCode == http.StatusProxyAuthRequired {
		resp.Body.Close()
		return nil, &proxyError{status: resp.StatusCode}
	}
	return resp, nil
}

func (t viaProxy) CloseIdleConnections() { closeIdle(t.next) }

// refusedTunnel is the Transport's OnProxyConnectResponse: a CONNECT the
// proxy does not answer 200 is a *proxyError.
func refusedTunnel(_ context.Context, _ *url.URL, _ *http.Request, resp *http.Response) error {
	if resp.StatusCode != http.StatusOK {
		return &proxyError{status: resp.StatusCode, tunnel: true}
	}
	return nil
}
