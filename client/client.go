package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults of the Options whose zero value means "the default".
const (
	DefaultMaxAttempts  = 3
	DefaultMaxRetryWait = 30 * time.Second
	DefaultUserAgent    = "webhookd-go-client"
)

// Options configure a Client. The zero value of each field means what its
// comment says.
type Options struct {
	// Token is the bearer token sent with every request: an admin or test
	// token from the server's configuration, or a tenant access token
	// (IssueAccessToken). "": no Authorization header (only Health and
	// Ready work then).
	Token string
	// HTTPClient sends the requests. Nil: http.DefaultClient. Its Timeout,
	// if any, bounds each attempt, including a Backup's whole transfer.
	HTTPClient *http.Client
	// UserAgent is the User-Agent header. "": DefaultUserAgent.
	UserAgent string
	// MaxAttempts bounds the attempts of a request that may be retried
	// (see the package doc), the first included. Zero: DefaultMaxAttempts;
	// 1 or less than zero: no retries.
	MaxAttempts int
	// MaxRetryWait is the longest wait the client makes before a retry. An
	// answer asking for a longer wait is returned as it is, a Problem with
	// its RetryAfter. Zero: DefaultMaxRetryWait.
	MaxRetryWait time.Duration
}

// Client calls one webhookd server. It is safe for concurrent use.
type Client struct {
	base         string // scheme://host[/prefix], no trailing slash
	token        string
	hc           *http.Client
	userAgent    string
	maxAttempts  int
	maxRetryWait time.Duration
}

// New returns a Client of the server at baseURL ("http://127.0.0.1:8080",
// or with a path prefix when the API is served below one). It reports an
// error only for a baseURL that is not an absolute http or https URL.
func New(baseURL string, opts Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http:// or https:// and a host", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: base URL %q: want no query or fragment", baseURL)
	}
	c := &Client{
		base:         strings.TrimRight(u.String(), "/"),
		token:        opts.Token,
		hc:           opts.HTTPClient,
		userAgent:    opts.UserAgent,
		maxAttempts:  opts.MaxAttempts,
		maxRetryWait: opts.MaxRetryWait,
	}
	if c.hc == nil {
		c.hc = http.DefaultClient
	}
	if c.userAgent == "" {
		c.userAgent = DefaultUserAgent
	}
	switch {
	case c.maxAttempts == 0:
		c.maxAttempts = DefaultMaxAttempts
	case c.maxAttempts < 1:
		c.maxAttempts = 1
	}
	if c.maxRetryWait <= 0 {
		c.maxRetryWait = DefaultMaxRetryWait
	}
	return c, nil
}

// request is one call of the API.
type request struct {
	method string
	path   string     // escaped, from the root: "/v1/tenants/acme"
	query  url.Values // nil: none
	body   any        // marshalled as JSON; nil: no body
	header http.Header
	// retry says a GET or POST is safe to repeat: a 429 or 503 answer is
	// retried (see Client.send). A PUT or DELETE is repeated without it.
	retry bool
}

// repeatable reports whether a 429 or 503 answer to r may be retried: r
// says so (a GET, an ingest with its Idempotency-Key), or its method is
// idempotent (RFC 9110 §9.2.2), so a repeat leaves the server as one
// request would, also when the first attempt took effect.
func (r request) repeatable() bool {
	return r.retry || r.method == http.MethodPut || r.method == http.MethodDelete
}

// get is the request GET path?query, retried on 429 and 503.
func get(path string, query url.Values) request {
	return request{method: http.MethodGet, path: path, query: query, retry: true}
}

// send makes r and returns the response to its last attempt, whose status
// is 2xx, or an error: a *Problem for an answer outside 2xx. The caller
// must close the body of the response it gets.
//
// A repeatable request (see request.repeatable) is repeated after a 429
// or 503 when attempts remain and the wait the answer asks for (Retry-After; 1 s, doubling,
// when it names none) is at most maxRetryWait. The wait ends early, with
// ctx's error, when ctx is done.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	var body []byte
	if r.body != nil {
		var err error
		if body, err = json.Marshal(r.body); err != nil {
			return nil, fmt.Errorf("client: %s %s: encode body: %w", r.method, r.path, err)
		}
	}
	target := c.base + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	backoff := time.Second
	for attempt := 1; ; attempt++ {
		resp, err := c.attempt(ctx, r, target, body)
		if err != nil {
			return nil, fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, nil
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBody))
		resp.Body.Close()
		p := problemOf(resp, raw)
		retryable := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
		if !r.repeatable() || !retryable || attempt >= c.maxAttempts {
			return nil, p
		}
		wait := p.RetryAfter
		if wait <= 0 {
			wait, backoff = backoff, backoff*2
		}
		if wait > c.maxRetryWait {
			return nil, p
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("client: %s %s: waiting %v to retry after %w: %w", r.method, r.path, wait, p, err)
		}
	}
}

// attempt sends r once.
func (c *Client) attempt(ctx context.Context, r request, target string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, r.method, target, rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range r.header {
		hr.Header[k] = vs
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json, application/problem+json")
	hr.Header.Set("User-Agent", c.userAgent)
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	return c.hc.Do(hr)
}

// do makes r and decodes the answer's JSON body into out (nil: the body
// is discarded). It returns the answer's status and header.
func (c *Client) do(ctx context.Context, r request, out any) (int, http.Header, error) {
	resp, err := c.send(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, resp.Body) // keep the connection reusable
		return resp.StatusCode, resp.Header, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return 0, nil, fmt.Errorf("client: %s %s: decode answer: %w", r.method, r.path, err)
	}
	return resp.StatusCode, resp.Header, nil
}

// sleep waits d, or until ctx is done (then it returns ctx's error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// retryAfter parses a Retry-After header, in seconds or an HTTP date
// (RFC 9110 §10.2.3), as a wait from now; 0 when v is empty or invalid.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0
		}
		return time.Duration(min(secs, 1<<31)) * time.Second // no overflow
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }

// tenantPath is "/v1/tenants/{tenant}" followed by more.
func tenantPath(tenant string, more ...string) string {
	p := "/v1/tenants/" + seg(tenant)
	for _, m := range more {
		p += "/" + m
	}
	return p
}

// errNoCursor is reported when a page says has_more without a cursor
// that moves on: following it would loop for ever.
var errNoCursor = errors.New("the server answered has_more without a new next_cursor")
