package engine

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// Header is one response header of an attempt as kept: its canonical
// name (http.CanonicalHeaderKey) and its values joined with ", ", as
// RFC 9110 §5.3 allows for every field but Set-Cookie (never kept).
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// The bounds of an attempt's ResponseHeaders. Every attempt is kept in
// its delivery's record for as long as the event is, beside its 1 KiB
// body excerpt (MaxResponseExcerpt), so the headers get a budget of the
// same order: 20 headers hold what receivers send (Date, Content-Type,
// Content-Length, Server, a request ID, rate limits, CORS) with room to
// spare; 256 bytes keep a request ID, a trace ID or a rate-limit figure
// whole and cut a Content-Security-Policy or a long Link; 2 KiB bounds
// the whole, so a receiver sending 64 KiB of headers
// (maxResponseHeaderBytes) adds at most 2 KiB to each attempt.
const (
	// MaxResponseHeaders is the most headers an attempt keeps: the
	// first by name that fit.
	MaxResponseHeaders = 20
	// MaxResponseHeaderValue is the most bytes of a header's value kept,
	// cut at a UTF-8 character boundary.
	MaxResponseHeaderValue = 256
	// MaxResponseHeadersBytes bounds the names and values kept of one
	// attempt, added up; a header that does not fit in what is left is
	// left out, and the next by name may still fit.
	MaxResponseHeadersBytes = 2048
)

// credentialHeader reports whether canonical name is a header an
// attempt never keeps: one that sets or carries a credential of the
// receiver's own (a session cookie, a token echoed back) or asks for
// one (an authentication challenge, which may carry a nonce). The
// attempt log is read by whoever reads the delivery log, the customer in
// the portal included, and a secret never reaches a log.
func credentialHeader(name string) bool {
	switch name {
	case "Set-Cookie", "Set-Cookie2", "Cookie",
		"Authorization", "Proxy-Authorization",
		"Www-Authenticate", "Proxy-Authenticate",
		"Authentication-Info", "Proxy-Authentication-Info",
		"X-Api-Key", "X-Auth-Token", "X-Access-Token", "X-Csrf-Token", "X-Xsrf-Token":
		return true
	}
	return false
}

// KeepResponseHeaders returns the headers of a response that its
// attempt keeps: every header but the credential ones
// (credentialHeader), by canonical name in byte order, each value (its
// values joined with ", ") cut to MaxResponseHeaderValue bytes and made
// valid UTF-8 (an invalid byte reads U+FFFD), the first
// MaxResponseHeaders whose names and values fit in
// MaxResponseHeadersBytes; nil when none is kept. It is on the dispatch
// path: a response of at most 32 headers, each with one valid value,
// costs one allocation, the result, whose names and uncut values share
// h's strings.
func KeepResponseHeaders(h http.Header) []Header {
	type field struct {
		name, key string // canonical, and as in h
		values    []string
		size      int // bytes of the value to keep
	}
	var buf [32]field // most responses have fewer headers: no allocation to sort them
	fields := buf[:0]
	for name, values := range h {
		if len(values) == 0 {
			continue
		}
		canonical := http.CanonicalHeaderKey(name)
		if credentialHeader(canonical) {
			continue
		}
		fields = append(fields, field{name: canonical, key: name, values: values})
	}
	slices.SortFunc(fields, func(a, b field) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.key, b.key))
	})
	kept, budget, prev := fields[:0], MaxResponseHeadersBytes, ""
	for _, f := range fields {
		if len(kept) == MaxResponseHeaders {
			break
		}
		if f.name == prev {
			continue // two keys of one canonical name (not from net/http): the first in byte order
		}
		prev = f.name
		n, valid := 2*(len(f.values)-1), true // the ", " between values
		for _, v := range f.values {
			n += len(v)
			valid = valid && utf8.ValidString(v)
		}
		if !valid { // rare: the budget is of the value as kept
			v := strings.ToValidUTF8(strings.Join(f.values, ", "), "\uFFFD")
			f.values, n = []string{v}, len(v)
		}
		f.size = min(n, MaxResponseHeaderValue)
		if len(f.name)+f.size > budget {
			continue
		}
		budget -= len(f.name) + f.size
		kept = append(kept, f)
	}
	if len(kept) == 0 {
		return nil
	}
	out := make([]Header, len(kept))
	for i, f := range kept {
		v := f.values[0]
		if len(f.values) > 1 {
			v = strings.Join(f.values, ", ")
		}
		out[i] = Header{Name: f.name, Value: cutValue(v, f.size)}
	}
	return out
}

// cutValue returns v, valid UTF-8, cut to at most n bytes at a character
// boundary. A value cut is copied, so that the response's whole value is
// not kept alive by its start.
func cutValue(v string, n int) string {
	if len(v) <= n {
		return v
	}
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return strings.Clone(v[:n])
}
