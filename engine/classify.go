package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/webhookd/webhookd/verify"
)

// maxResponseHeaderBytes bounds the response headers of an attempt or a
// challenge (http.Transport.MaxResponseHeaderBytes; net/http's default is
// 10 MB, which hostile receivers turned into 10 MB of garbage per
// attempt). A receiver that sends more fails the attempt, which is
// retried like a connection error.
const maxResponseHeaderBytes = 64 << 10

// classify decides an attempt's outcome from the HTTP status (when a
// response arrived) or the transport error, and says why in words an
// endpoint owner understands. It is the only place that decides.
//
// abort says the response (not a 2xx) asked for no more attempts
// (receiverAborts): the outcome is permanent whatever the status. retry
// are the statuses the delivery's policy retries though they are
// permanent failures by default (RetryPolicy.RetryStatuses).
//
// What the egress proxy failed (*proxyError) is retried, and its reason
// names the proxy, not the receiver.
//
// A reason never shows an address the endpoint's URL does not name: not
// the resolver's, not webhookd's own, not what a host name resolved to
// (see transportError). The operator's log has the whole error
// (transportDetail).
func classify(status int, err error, timeout time.Duration, abort bool, retry []int) (Outcome, string) {
	var dnsErr *net.DNSError
	switch {
	case err == nil && abort && (status < 200 || status > 299):
		return OutcomePermanent, fmt.Sprintf("HTTP %d %s: %s", status, http.StatusText(status), ReasonReceiverAborted)
	case err != nil && errors.Is(err, ErrTargetRefused):
		return OutcomePermanent, "refused: " + refusalReason(err) + "; check endpoint configuration"
	case err != nil && errors.As(err, new(*proxyError)):
		pe, _ := errors.AsType[*proxyError](err)
		return OutcomeRetry, "connection error: " + pe.Error()
	case err != nil && responseHeadersTooLarge(err):
		return OutcomeRetry, fmt.Sprintf("response headers larger than %d KiB", maxResponseHeaderBytes>>10)
	case err != nil && errors.As(err, &dnsErr):
		return OutcomeRetry, "connection error: " + dnsReason(dnsErr)
	case err != nil && isTimeout(err):
		return OutcomeRetry, fmt.Sprintf("timeout: no complete response within %s", timeout)
	case err != nil:
		return OutcomeRetry, "connection error: " + transportError(err)
	case status >= 200 && status <= 299:
		return OutcomeSuccess, ""
	case status == http.StatusRequestTimeout, status == http.StatusTooEarly,
		status == http.StatusTooManyRequests, status >= 500 && status <= 599:
		return OutcomeRetry, fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
	case slices.Contains(retry, status):
		return OutcomeRetry, fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
	case status >= 300 && status <= 399:
		return OutcomePermanent, fmt.Sprintf("HTTP %d %s: redirects are not followed; check endpoint configuration (the URL should answer 2xx itself)", status, http.StatusText(status))
	default:
		return OutcomePermanent, fmt.Sprintf("HTTP %d %s: permanent failure; check endpoint configuration", status, http.StatusText(status))
	}
}

// ReasonReceiverAborted ends the reason of an attempt whose response
// asked for no more attempts (receiverAborts), and of its dead delivery.
const ReasonReceiverAborted = "the receiver asked to stop retrying (" + verify.HeaderDelivery + ": " + verify.DeliveryAbort + ")"

// receiverAborts reports whether response headers h ask webhookd to stop
// retrying: a webhook-delivery field one of whose comma-separated values
// is "abort" or Svix's "abort-message", in any case. The dispatcher asks
// only of a response that is not a 2xx: a 2xx is received, whatever it
// says.
func receiverAborts(h http.Header) bool {
	return deliveryControl(h, verify.DeliveryAbort) || deliveryControl(h, verify.DeliveryAbortMessage)
}

// receiverDisables reports whether response headers h ask webhookd to
// disable the endpoint: a webhook-delivery value "disable" (Svix's
// delivery control), asked of any answer.
func receiverDisables(h http.Header) bool { return deliveryControl(h, verify.DeliveryDisable) }

// deliveryControl reports whether one of the comma-separated values of
// h's webhook-delivery fields is want, in any case.
func deliveryControl(h http.Header, want string) bool {
	for _, v := range h.Values(verify.HeaderDelivery) {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), want) {
				return true
			}
		}
	}
	return false
}

// ReasonReceiverDisabled is the DisabledReason of an endpoint whose
// receiver asked to be disabled (receiverDisables).
const ReasonReceiverDisabled = "the receiver asked to be disabled (" + verify.HeaderDelivery + ": " + verify.DeliveryDisable + ")"

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// responseHeadersTooLarge reports whether err is net/http's refusal of
// response headers over Transport.MaxResponseHeaderBytes, over HTTP/1
// or HTTP/2. net/http exports no error value for either: these are its
// messages (TestSecurity_OversizedResponseHeaders pins the HTTP/1 one).
func responseHeadersTooLarge(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "server response headers exceeded") ||
		strings.Contains(msg, "response header list larger than advertised limit")
}

// dnsReason says why a host name did not resolve, without the resolver's
// address that *net.DNSError's message carries.
func dnsReason(e *net.DNSError) string {
	what := "could not resolve host " + e.Name
	switch {
	case e.IsNotFound:
		return what + ": no such host"
	case e.IsTimeout:
		return what + ": DNS lookup timed out"
	case e.IsTemporary:
		return what + ": DNS server failure"
	}
	return what
}

// transportError returns err's message for the delivery's reason: without
// the request URL, which may carry credentials an endpoint owner put in a
// query string; without the local and remote addresses of a
// *net.OpError; and with every other IP address in it, but the one the URL
// names, replaced by "[address]".
func transportError(err error) string {
	var own netip.Addr
	if ue, ok := errors.AsType[*url.Error](err); ok {
		if u, perr := url.Parse(ue.URL); perr == nil {
			own, _ = netip.ParseAddr(u.Hostname())
		}
		err = ue.Err
	}
	for {
		oe, ok := err.(*net.OpError)
		if !ok || oe.Err == nil {
			break
		}
		err = oe.Err
	}
	return hideAddresses(err.Error(), own)
}

// transportDetail returns err's whole message but the request URL: for
// the operator's log, not for a reason.
func transportDetail(err error) string {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

// hideAddresses replaces every IP address (with or without a port, IPv6
// bracketed or not) in msg by "[address]", except own.
func hideAddresses(msg string, own netip.Addr) string {
	isAddrByte := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.IndexByte(".:[]%", c) >= 0
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		if !isAddrByte(msg[i]) {
			b.WriteByte(msg[i])
			i++
			continue
		}
		j := i
		for j < len(msg) && isAddrByte(msg[j]) {
			j++
		}
		tok := strings.TrimRight(msg[i:j], ":.")
		if a, ok := parseAddrToken(tok); ok && a != own.WithZone("").Unmap() {
			b.WriteString("[address]")
		} else {
			b.WriteString(tok)
		}
		b.WriteString(msg[i+len(tok) : j])
		i = j
	}
	return b.String()
}

// parseAddrToken parses "a", "a:port", "[a]" or "[a]:port".
func parseAddrToken(tok string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(tok); err == nil {
		return ap.Addr().WithZone("").Unmap(), true
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(tok, "["), "]")); err == nil {
		return a.WithZone("").Unmap(), true
	}
	return netip.Addr{}, false
}

// maxRetryAfter is the longest Retry-After parseRetryAfter returns: the
// longest Duration, so that a larger one still means "at least
// retry_after_max" whatever that is set to.
const maxRetryAfter = time.Duration(math.MaxInt64)

// parseRetryAfter reads a Retry-After header (RFC 9110 §10.2.3):
// delay-seconds (1*DIGIT) or an HTTP-date. A wait longer than a Duration
// holds, in seconds or to a date, is maxRetryAfter: RetryPolicy.Next cuts
// it to RetryAfterMax. It returns 0 when the header is absent, unreadable
// (a sign, a fraction), zero, or a date not in the future.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if strings.Trim(v, "0123456789") == "" {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil || secs > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter // only digits, so too many of them
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now) // at most maxRetryAfter: Sub saturates
	}
	return 0
}
