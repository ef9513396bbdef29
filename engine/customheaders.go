package engine

import (
	"fmt"
	"net/textproto"
	"slices"
	"strings"
)

// Custom headers: an endpoint may carry headers of its tenant's choosing
// (Endpoint.Headers), sent with every request made to it: each attempt,
// hence each test event, and the verification challenge. A receiver uses
// them for its own authentication (an endpoint URL may not carry user
// info) or routing.
//
// A header's value is a secret, like a signing key: a store seals it at
// rest when a secret key is configured (package sealing), it is never
// logged nor put in an error, and every answer shows it masked
// (MaskHeaderValue), but an explicit reveal (Service.RevealSecret), which
// is recorded. Its name is not a secret.
//
// The headers webhookd writes itself, and those that steer the exchange
// rather than describe the event, are not the tenant's to set
// (ReservedHeader).

// Bounds of an endpoint's custom headers. They keep a request's headers
// well under the 8 KiB per request line or header that common servers
// accept by default (nginx, Node's 16 KiB in all), with room left for
// webhookd's own: three signatures of two schemes at most during a
// rotation's grace window.
const (
	// MaxEndpointHeaders is how many custom headers an endpoint may
	// have.
	MaxEndpointHeaders = 20
	// MaxHeaderNameLen bounds a custom header's name, in bytes.
	MaxHeaderNameLen = 64
	// MaxHeaderValueLen bounds a custom header's value, in bytes: room
	// for an OAuth access token (a JWT) with its "Bearer " prefix.
	MaxHeaderValueLen = 2048
	// MaxHeadersSize bounds an endpoint's custom headers together: the
	// sum over its headers of len(name) + len(value) + 4 (": " and the
	// line's CRLF), as they are sent in HTTP/1.1.
	MaxHeadersSize = 4096
)

// headerOverhead is what a header line adds to its name and value in
// HTTP/1.1: ": " and CRLF.
const headerOverhead = 4

// The mask of a header value (MaskHeaderValue).
const (
	// HeaderMask stands for the hidden part of a masked value. Its
	// length says nothing of the value's.
	HeaderMask = "••••"
	// MaskShowMinLen is the length from which a masked value shows its
	// first MaskShowLen characters: at most a quarter of it, enough to
	// tell "Bearer" from "Basic" or one key's prefix ("sk_liv") from
	// another's. A shorter value shows nothing.
	MaskShowMinLen = 24
	// MaskShowLen is how many leading characters a masked value of at
	// least MaskShowMinLen shows (and the space after them, if there is
	// one: "Bearer ••••").
	MaskShowLen = 6
)

// CustomHeader is one custom header of an endpoint.
type CustomHeader struct {
	// Name is in canonical form (textproto.CanonicalMIMEHeaderKey:
	// "X-Tenant"), as it is sent; names are case-insensitive.
	Name string
	// Value is the header's value: a secret (see the top of this file).
	Value string
	// Sealed reports that Value is the stored, sealed form of the value
	// (package sealing), not the value: a store sets it between reading
	// an endpoint and opening its secrets. Every Endpoint a store
	// returns has it false.
	Sealed bool
}

// Masked returns h's value masked (MaskHeaderValue).
func (h CustomHeader) Masked() string {
	if h.Sealed {
		return HeaderMask
	}
	return MaskHeaderValue(h.Value)
}

// CustomHeaders are an endpoint's custom headers, sorted by Name, each name
// once. Its JSON, the API's, is an object of names to masked values
// (MaskHeaderValue): {"Authorization": "Bearer ••••"}. Nothing decodes it
// from JSON: a masked value is not a value.
type CustomHeaders []CustomHeader

// MarshalJSON encodes h as an object of its names to its masked values,
// in name order.
func (h CustomHeaders) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, x := range h {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, x.Name)
		b = append(b, ':')
		b = appendJSONString(b, x.Masked())
	}
	return append(b, '}'), nil
}

// Map returns h as a map of names to values, in plain: what a reveal
// shows. Never nil.
func (h CustomHeaders) Map() map[string]string {
	m := make(map[string]string, len(h))
	for _, x := range h {
		m[x.Name] = x.Value
	}
	return m
}

// Size returns h's size as MaxHeadersSize counts it.
func (h CustomHeaders) Size() int {
	n := 0
	for _, x := range h {
		n += len(x.Name) + len(x.Value) + headerOverhead
	}
	return n
}

// MaskHeaderValue returns v as answers show it: HeaderMask alone, or,
// for a value of at least MaskShowMinLen bytes, its first MaskShowLen
// characters (and the space after them, if there is one) then
// HeaderMask: "Bearer ••••", "sk_liv••••". Values are ASCII
// (ValidateHeaders), so characters are bytes; any other value shows
// nothing.
func MaskHeaderValue(v string) string {
	if len(v) < MaskShowMinLen {
		return HeaderMask
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return HeaderMask
		}
	}
	n := MaskShowLen
	if v[n] == ' ' {
		n++
	}
	return v[:n] + HeaderMask
}

// reservedHeaders are the names (canonical) that webhookd writes, or
// that steer the exchange: hop-by-hop headers (RFC 9110 §7.6.1) and
// those Go's transport writes or reads itself.
var reservedHeaders = map[string]string{
	"Content-Type":        "the body is the JSON envelope",
	"Content-Length":      "it is the body's length",
	"X-Webhook-Signature": "every request is signed with it",
	"Host":                "it is the endpoint URL's host",
	"User-Agent":          "it names the sender",
	"Accept-Encoding":     "responses are read as they are sent",
	"Transfer-Encoding":   "it is hop-by-hop: the HTTP client sets it",
	"Connection":          "it is hop-by-hop: the HTTP client sets it",
	"Keep-Alive":          "it is hop-by-hop: the HTTP client sets it",
	"Te":                  "it is hop-by-hop: the HTTP client sets it",
	"Trailer":             "it is hop-by-hop: the HTTP client sets it",
	"Upgrade":             "it is hop-by-hop: the HTTP client sets it",
	"Http2-Settings":      "it is hop-by-hop: the HTTP client sets it",
	"Expect":              "it changes how the request is sent",
}

// reservedPrefixes are the name prefixes (canonical) webhookd keeps: the
// Standard Webhooks headers (webhook-id, webhook-signature, …, and any
// later one), the headers of a proxy, and those that describe the body,
// which webhookd writes and signs.
var reservedPrefixes = []struct{ prefix, why string }{
	{"Webhook-", "the Standard Webhooks headers (webhook-*) are the sender's"},
	{"Proxy-", "it is for proxies (proxy-*), and none is used"},
	{"Content-", "it describes the body (content-*), which the sender writes and signs"},
}

// ReservedHeader reports whether name, in canonical form, is a header
// webhookd keeps for itself, and why: webhook-* (the Standard Webhooks
// headers), X-Webhook-Signature, content-* (Content-Type,
// Content-Length, …), Host, User-Agent, Accept-Encoding, Expect, the
// hop-by-hop headers (Connection, Keep-Alive, Transfer-Encoding, TE,
// Trailer, Upgrade, HTTP2-Settings) and proxy-*.
func ReservedHeader(name string) (string, bool) {
	if why, ok := reservedHeaders[name]; ok {
		return why, true
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p.prefix) {
			return p.why, true
		}
	}
	return "", false
}

// tchar reports whether c may be in an HTTP token (RFC 9110 §5.6.2):
// letters, digits and !#$%&'*+-.^_`|~.
func tchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// headersField is the field of an error about custom headers as a
// whole, or about a name that is not one.
const headersField = "headers"

// HeaderField returns the field an error about header name names:
// "headers.X-Tenant".
func HeaderField(name string) string { return headersField + "." + name }

// CanonicalHeaderName returns name in canonical form ("x-tenant":
// "X-Tenant"), or a CodeInvalidField error: a name is an HTTP token (RFC
// 9110 tchar) of at most MaxHeaderNameLen bytes, and not reserved
// (ReservedHeader). An error about a valid token names the field
// "headers.<Name>"; one about a name that is not a token names
// "headers" and quotes it.
func CanonicalHeaderName(name string) (string, error) {
	if name == "" {
		return "", Errorf(CodeInvalidField, headersField, "a header name must not be empty")
	}
	if len(name) > MaxHeaderNameLen {
		return "", Errorf(CodeInvalidField, headersField, "header name %s is longer than %d bytes", quoteShort(name), MaxHeaderNameLen)
	}
	for i := 0; i < len(name); i++ {
		if !tchar(name[i]) {
			return "", Errorf(CodeInvalidField, headersField,
				"header name %s is not an HTTP token: it may hold only letters, digits and !#$%%&'*+-.^_`|~ (byte offset %d)", quoteShort(name), i)
		}
	}
	c := textproto.CanonicalMIMEHeaderKey(name)
	if why, ok := ReservedHeader(c); ok {
		return "", Errorf(CodeInvalidField, HeaderField(c), "%s is reserved, and cannot be set on an endpoint: %s", c, why)
	}
	return c, nil
}

// quoteShort quotes s for an error message, cut to MaxHeaderNameLen
// bytes.
func quoteShort(s string) string {
	if len(s) > MaxHeaderNameLen {
		return fmt.Sprintf("%q…", s[:MaxHeaderNameLen])
	}
	return fmt.Sprintf("%q", s)
}

// ValidateHeaderValue reports a CodeInvalidField error for field unless v
// is 1 to MaxHeaderValueLen bytes of visible ASCII characters and
// spaces, neither starting nor ending with a space. So no value can end
// its header line early (CR, LF, NUL and every other control character
// are refused), and a receiver sees it byte for byte, whatever charset
// its HTTP stack assumes. The error never shows the value.
func ValidateHeaderValue(field, v string) error {
	switch {
	case v == "":
		return Errorf(CodeInvalidField, field, "%s has no value: leave the header out (in a change, null removes it)", field)
	case len(v) > MaxHeaderValueLen:
		return Errorf(CodeInvalidField, field, "%s's value is longer than %d bytes", field, MaxHeaderValueLen)
	}
	for i := 0; i < len(v); i++ {
		var what string
		switch c := v[i]; {
		case c == '\r' || c == '\n':
			what = "a line break"
		case c < 0x20 || c == 0x7f:
			what = "a control character"
		case c >= 0x80:
			what = "a character that is not ASCII"
		default:
			continue
		}
		return Errorf(CodeInvalidField, field, "%s's value holds %s at byte offset %d: a value may hold only visible ASCII characters and spaces", field, what, i)
	}
	if v[0] == ' ' || v[len(v)-1] == ' ' {
		return Errorf(CodeInvalidField, field, "%s's value starts or ends with a space, which a receiver would not see", field)
	}
	return nil
}

// checkHeadersBounds reports a CodeInvalidField error "headers" when h
// has more than MaxEndpointHeaders headers or is over MaxHeadersSize.
func checkHeadersBounds(h CustomHeaders) error {
	if len(h) > MaxEndpointHeaders {
		return Errorf(CodeInvalidField, headersField, "an endpoint may have at most %d custom headers, and this one would have %d", MaxEndpointHeaders, len(h))
	}
	if n := h.Size(); n > MaxHeadersSize {
		return Errorf(CodeInvalidField, headersField, "an endpoint's custom headers may take at most %d bytes (each name and value, plus 4), and these would take %d", MaxHeadersSize, n)
	}
	return nil
}

// NewHeaders returns the custom headers in, the "headers" of an endpoint
// being created, validated (CanonicalHeaderName, ValidateHeaderValue,
// the bounds) and sorted; nil for none. Two names that differ only in
// case are an error.
func NewHeaders(in map[string]string) (CustomHeaders, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if len(in) > MaxEndpointHeaders {
		return nil, checkHeadersBounds(make(CustomHeaders, len(in)))
	}
	h := make(CustomHeaders, 0, len(in))
	for _, name := range sortedKeys(in) {
		c, err := CanonicalHeaderName(name)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(h, func(x CustomHeader) bool { return x.Name == c }) {
			return nil, Errorf(CodeInvalidField, HeaderField(c), "%s is given twice (header names are case-insensitive)", c)
		}
		if err := ValidateHeaderValue(HeaderField(c), in[name]); err != nil {
			return nil, err
		}
		h = append(h, CustomHeader{Name: c, Value: in[name]})
	}
	slices.SortFunc(h, func(a, b CustomHeader) int { return strings.Compare(a.Name, b.Name) })
	if err := checkHeadersBounds(h); err != nil {
		return nil, err
	}
	return h, nil
}

// HeadersPatch is a change of an endpoint's custom headers, checked
// (CheckHeadersPatch): each name, canonical, to its new value, or to nil
// to remove it; Clear removes every header first.
type HeadersPatch struct {
	Clear bool
	Set   []CustomHeader // the headers to set or replace, by canonical name, in order
	Del   []string       // the canonical names of the headers to remove, in order
}

// CheckHeadersPatch reads p, the "headers" of a PATCH, as a merge (RFC
// 7396's, member by member): a name with a string sets or replaces that
// header, a name with null removes it (whether or not the endpoint has
// it), and the headers it does not name stay. An empty object, which
// such a merge would leave as a no-op, removes every header. Names and
// values are validated as NewHeaders does; the bounds are checked on the
// result (ApplyHeadersPatch). p nil: nothing changes.
func CheckHeadersPatch(p map[string]*string) (HeadersPatch, error) {
	if p == nil {
		return HeadersPatch{}, nil
	}
	if len(p) == 0 {
		return HeadersPatch{Clear: true}, nil
	}
	if len(p) > 2*MaxEndpointHeaders {
		// A merge can remove at most what there is and set at most the
		// bound: anything longer cannot apply.
		return HeadersPatch{}, Errorf(CodeInvalidField, headersField, "a change of custom headers may name at most %d headers", 2*MaxEndpointHeaders)
	}
	var out HeadersPatch
	seen := make(map[string]bool, len(p))
	for _, name := range sortedKeys(p) {
		c, err := CanonicalHeaderName(name)
		if err != nil {
			return HeadersPatch{}, err
		}
		if seen[c] {
			return HeadersPatch{}, Errorf(CodeInvalidField, HeaderField(c), "%s is given twice (header names are case-insensitive)", c)
		}
		seen[c] = true
		v := p[name]
		if v == nil {
			out.Del = append(out.Del, c)
			continue
		}
		if err := ValidateHeaderValue(HeaderField(c), *v); err != nil {
			return HeadersPatch{}, err
		}
		out.Set = append(out.Set, CustomHeader{Name: c, Value: *v})
	}
	return out, nil
}

// Empty reports whether p changes nothing.
func (p HeadersPatch) Empty() bool { return !p.Clear && len(p.Set) == 0 && len(p.Del) == 0 }

// ApplyHeadersPatch returns cur with p applied (a new slice; cur is not
// changed), or a CodeInvalidField error "headers" when the result is
// over the bounds.
func ApplyHeadersPatch(cur CustomHeaders, p HeadersPatch) (CustomHeaders, error) {
	if p.Empty() {
		return cur, nil
	}
	var out CustomHeaders
	if !p.Clear {
		out = slices.DeleteFunc(slices.Clone(cur), func(x CustomHeader) bool {
			return slices.Contains(p.Del, x.Name) || slices.ContainsFunc(p.Set, func(s CustomHeader) bool { return s.Name == x.Name })
		})
	}
	out = append(out, p.Set...)
	slices.SortFunc(out, func(a, b CustomHeader) int { return strings.Compare(a.Name, b.Name) })
	if len(out) == 0 {
		return nil, nil
	}
	if err := checkHeadersBounds(out); err != nil {
		return nil, err
	}
	return out, nil
}

// sortedKeys returns m's keys in order, so that the first bad one is
// the one reported, whatever the map's order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// CheckStoredHeaders reports what is wrong with h as an endpoint's
// stored headers, or nil: each name canonical and not reserved, in
// order and once, each value that is not Sealed as ValidateHeaderValue
// wants it, and the bounds (the total size only when no value is
// sealed). A store's integrity check and an import use it. Its errors
// never show a value.
func CheckStoredHeaders(h CustomHeaders) error {
	sealed := false
	for i, x := range h {
		c, err := CanonicalHeaderName(x.Name)
		if err != nil {
			return err
		}
		if c != x.Name {
			return Errorf(CodeInvalidField, HeaderField(c), "header %q is not in canonical form (%q)", x.Name, c)
		}
		if i > 0 && h[i-1].Name >= x.Name {
			return Errorf(CodeInvalidField, headersField, "headers %q and %q are not in order, or repeated", h[i-1].Name, x.Name)
		}
		if sealed = sealed || x.Sealed; !x.Sealed {
			if err := ValidateHeaderValue(HeaderField(c), x.Value); err != nil {
				return err
			}
		}
	}
	if len(h) > MaxEndpointHeaders || !sealed {
		return checkHeadersBounds(h)
	}
	return nil
}
