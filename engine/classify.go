package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// classify decides an attempt's outcome from the HTTP status (when a
// response arrived) or the transport error, and says why in words an
// endpoint owner understands. It is the only place that decides.
func classify(status int, err error, timeout time.Duration) (Outcome, string) {
	switch {
	case err != nil && errors.Is(err, ErrTargetRefused):
		return OutcomePermanent, "refused: " + refusalReason(err) + "; check endpoint configuration"
	case err != nil && isTimeout(err):
		return OutcomeRetry, fmt.Sprintf("timeout: no complete response within %s", timeout)
	case err != nil:
		return OutcomeRetry, "connection error: " + transportError(err)
	case status >= 200 && status <= 299:
		return OutcomeSuccess, ""
	case status == http.StatusRequestTimeout, status == http.StatusTooEarly,
		status == http.StatusTooManyRequests, status >= 500 && status <= 599:
		return OutcomeRetry, fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
	case status >= 300 && status <= 399:
		return OutcomePermanent, fmt.Sprintf("HTTP %d %s: redirects are not followed; check endpoint configuration (the URL should answer 2xx itself)", status, http.StatusText(status))
	default:
		return OutcomePermanent, fmt.Sprintf("HTTP %d %s: permanent failure; check endpoint configuration", status, http.StatusText(status))
	}
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// transportError returns err's message without the request URL, which
// may carry credentials an endpoint owner put in a query string.
func transportError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an
// HTTP-date. It returns 0 when the header is absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(365*24*time.Hour/time.Second) {
			secs = int64(365 * 24 * time.Hour / time.Second)
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
