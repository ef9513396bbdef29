package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/client"
)

// proxy is a reverse proxy in front of the real API that can stand in
// for it: fault, when it returns a status, answers the request itself
// (status and Retry-After, a problem+json body unless plain is set) or,
// with forward set, lets the server handle it and replaces the answer.
type proxy struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []*http.Request // every request, in order
	// fault is called for the n-th request (1-based).
	fault func(n int, r *http.Request) (f fault)
}

type fault struct {
	status     int // 0: no fault
	retryAfter string
	forward    bool // the server handles the request; its answer is replaced
	plain      bool // a text/plain body, not a problem
}

func newProxy(t *testing.T, e *env, fn func(n int, r *http.Request) fault) *proxy {
	t.Helper()
	target, err := url.Parse(e.api.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{fault: fn}
	rp := httputil.NewSingleHostReverseProxy(target)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.got = append(p.got, r.Clone(context.Background()))
		n := len(p.got)
		p.mu.Unlock()
		f := p.fault(n, r)
		if f.status == 0 {
			rp.ServeHTTP(w, r)
			return
		}
		if f.forward {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			if rec.Code >= 300 {
				t.Errorf("the server answered %d %s behind the fault", rec.Code, rec.Body)
			}
		}
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		if f.plain {
			http.Error(w, "bad gateway", f.status)
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(f.status)
		io.WriteString(w, `{"type":"urn:webhookd:problem:unavailable","title":"Service unavailable","status":`+strconv.Itoa(f.status)+`,"code":"unavailable","detail":"try again"}`)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// requests returns the requests the proxy got.
func (p *proxy) requests() []*http.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*http.Request(nil), p.got...)
}

// firstOnly is a fault of the first request only.
func firstOnly(f fault) func(int, *http.Request) fault {
	return func(n int, _ *http.Request) fault {
		if n == 1 {
			return f
		}
		return fault{}
	}
}

// TestClient_IngestRetriedAfter503 is the case idempotency keys exist
// for: the server stored the event, but the answer the client got was a
// 503. The retry, after Retry-After, sends the same key and gets the same
// event: one event, not two.
func TestClient_IngestRetriedAfter503(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup(e.client("", client.Options{}), "/ok")
	p := newProxy(t, e, firstOnly(fault{status: 503, retryAfter: "1", forward: true}))
	c := e.client(p.srv.URL, client.Options{})

	start := time.Now()
	res, err := c.Ingest(t.Context(), "acme", client.EventInput{Type: "invoice.paid", Data: map[string]int{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("retried after %v, want the Retry-After of 1s", waited)
	}
	reqs := p.requests()
	if len(reqs) != 2 {
		t.Fatalf("the proxy got %d requests, want 2", len(reqs))
	}
	k1, k2 := reqs[0].Header.Get("Idempotency-Key"), reqs[1].Header.Get("Idempotency-Key")
	if k1 == "" || k1 != k2 || k1 != res.IdempotencyKey {
		t.Errorf("Idempotency-Key %q then %q, result %q: want one key throughout", k1, k2, res.IdempotencyKey)
	}
	if !res.Replayed {
		t.Errorf("the retry was not answered as a replay: %+v", res)
	}
	evs := collect(t, e.client("", client.Options{}).Feed("acme", client.FeedFilter{}).Events(t.Context()))
	if len(evs) != 1 || evs[0].Event.ID != res.ID {
		t.Fatalf("the feed holds %+v, want only event %s", evs, res.ID)
	}
}

// TestClient_GetRetriedAfter429: a GET is safe to repeat.
func TestClient_GetRetriedAfter429(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup(e.client("", client.Options{}), "/ok")
	p := newProxy(t, e, firstOnly(fault{status: 429, retryAfter: "1"}))
	c := e.client(p.srv.URL, client.Options{UserAgent: "reconciler/1.2"})
	start := time.Now()
	tn, err := c.Tenant(t.Context(), "acme")
	if err != nil || tn.ID != "acme" {
		t.Fatalf("Tenant = %+v, %v", tn, err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("retried after %v, want the Retry-After of 1s", waited)
	}
	reqs := p.requests()
	if len(reqs) != 2 {
		t.Fatalf("the proxy got %d requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		if got, want := r.Header.Get("User-Agent"), "reconciler/1.2"; got != want {
			t.Errorf("User-Agent %q, want %q", got, want)
		}
		if got, want := r.Header.Get("Authorization"), "Bearer "+adminToken; got != want {
			t.Errorf("Authorization %q, want the token", got)
		}
	}
}

// TestClient_PutAndDeleteRetried: PUT and DELETE are idempotent (RFC
// 9110 §9.2.2), so the client repeats them after a 429 or 503 as it does
// a GET: a DELETE refused because a lock was held, and a PUT whose first
// attempt took effect but whose answer was lost.
func TestClient_PutAndDeleteRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup(e.client("", client.Options{}), "/ok")
	direct := e.client("", client.Options{})

	t.Run("DELETE", func(t *testing.T) {
		t.Parallel()
		if _, _, err := direct.PutTenant(t.Context(), "globex", client.TenantInput{Name: "Globex"}); err != nil {
			t.Fatal(err)
		}
		p := newProxy(t, e, firstOnly(fault{status: 503, retryAfter: "1"}))
		start := time.Now()
		task, err := e.client(p.srv.URL, client.Options{}).DeleteTenant(t.Context(), "globex", true)
		if err != nil || task.ID == "" {
			t.Fatalf("DeleteTenant = %+v, %v", task, err)
		}
		if waited := time.Since(start); waited < time.Second {
			t.Errorf("retried after %v, want the Retry-After of 1s", waited)
		}
		if n := len(p.requests()); n != 2 {
			t.Errorf("the proxy got %d requests, want 2", n)
		}
		if _, err := direct.Tenant(t.Context(), "globex"); client.CodeOf(err) != client.CodeTenantNotFound && client.CodeOf(err) != client.CodeTenantDeleting {
			t.Errorf("Tenant after the delete: %v, want it gone", err)
		}
	})
	t.Run("PUT", func(t *testing.T) {
		t.Parallel()
		p := newProxy(t, e, firstOnly(fault{status: 503, retryAfter: "1", forward: true}))
		tn, created, err := e.client(p.srv.URL, client.Options{}).PutTenant(t.Context(), "initech", client.TenantInput{Name: "Initech"})
		if err != nil || tn.ID != "initech" || tn.Name != "Initech" {
			t.Fatalf("PutTenant = %+v, %v", tn, err)
		}
		if created {
			t.Errorf("created = true: the repeat found what the lost answer created, want false")
		}
		if n := len(p.requests()); n != 2 {
			t.Errorf("the proxy got %d requests, want 2", n)
		}
	})
	t.Run("PUT of an event type, 429", func(t *testing.T) {
		t.Parallel()
		p := newProxy(t, e, firstOnly(fault{status: 429, retryAfter: "1"}))
		et, created, err := e.client(p.srv.URL, client.Options{}).PutEventType(t.Context(), "invoice.voided", "")
		if err != nil || et.Name != "invoice.voided" || !created {
			t.Fatalf("PutEventType = %+v, created %v, %v", et, created, err)
		}
		if n := len(p.requests()); n != 2 {
			t.Errorf("the proxy got %d requests, want 2", n)
		}
	})
}

// TestClient_NotRetried: what the client must not retry, or wait for.
func TestClient_NotRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ep := e.setup(e.client("", client.Options{}), "/ok")

	t.Run("a POST that creates", func(t *testing.T) {
		t.Parallel()
		p := newProxy(t, e, firstOnly(fault{status: 503, retryAfter: "1"}))
		c := e.client(p.srv.URL, client.Options{})
		_, err := c.CreateEndpoint(t.Context(), "acme", client.EndpointInput{URL: e.receiver.URL + "/ok", EventTypes: []string{"invoice.paid"}})
		p503 := wantProblem(t, err, 503, client.CodeUnavailable)
		if p503.RetryAfter != time.Second {
			t.Errorf("RetryAfter = %v, want 1s", p503.RetryAfter)
		}
		if n := len(p.requests()); n != 1 {
			t.Errorf("the proxy got %d requests, want 1", n)
		}
	})
	t.Run("a PATCH", func(t *testing.T) {
		t.Parallel()
		p := newProxy(t, e, firstOnly(fault{status: 503, retryAfter: "1"}))
		c := e.client(p.srv.URL, client.Options{})
		desc := "patched"
		_, err := c.UpdateEndpoint(t.Context(), "acme", ep.ID, client.EndpointPatch{Description: &desc})
		wantProblem(t, err, 503, client.CodeUnavailable)
		if n := len(p.requests()); n != 1 {
			t.Errorf("the proxy got %d requests, want 1", n)
		}
	})
	t.Run("attempts run out", func(t *testing.T) {
		t.Parallel()
		p := newProxy(t, e, func(int, *http.Request) fault { return fault{status: 503, retryAfter: "1"} })
		c := e.client(p.srv.URL, client.Options{MaxAttempts: 2})
		_, err := c.Tenant(t.Context(), "acme")
		wantProblem(t, err, 503, client.CodeUnavailable)
		if n := len(p.requests()); n != 2 {
			t.Errorf("the proxy got %d requests, want MaxAttempts, 2", n)
		}
	})
	t.Run("a wait longer than MaxRetryWait", func(t *testing.T) {
		t.Parallel()
		p := newProxy(t, e, firstOnly(fault{status: 429, retryAfter: "120"}))
		c := e.client(p.srv.URL, client.Options{MaxRetryWait: time.Minute})
		_, err := c.Tenant(t.Context(), "acme")
		if p := wantProblem(t, err, 429, client.CodeUnavailable); p.RetryAfter != 2*time.Minute {
			t.Errorf("RetryAfter = %v, want 2m", p.RetryAfter)
		}
		if n := len(p.requests()); n != 1 {
			t.Errorf("the proxy got %d requests, want 1", n)
		}
	})
	t.Run("the context ends during the wait", func(t *testing.T) {
		t.Parallel()
		p := newProxy(t, e, firstOnly(fault{status: 503, retryAfter: "30"}))
		c := e.client(p.srv.URL, client.Options{})
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.Tenant(ctx, "acme")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Tenant: %v, want the context's deadline", err)
		}
		wantProblem(t, err, 503, client.CodeUnavailable) // and why it waited
		if waited := time.Since(start); waited > 20*time.Second {
			t.Errorf("returned after %v: the wait did not end with the context", waited)
		}
	})
	t.Run("an answer that is not problem+json", func(t *testing.T) {
		t.Parallel()
		p := newProxy(t, e, firstOnly(fault{status: 502, plain: true}))
		c := e.client(p.srv.URL, client.Options{})
		_, err := c.Tenant(t.Context(), "acme")
		if p := wantProblem(t, err, 502, ""); p.Detail != "bad gateway" {
			t.Errorf("Detail = %q, want the body", p.Detail)
		}
	})
}

// wantProblem fails unless err holds a *Problem with status and code.
func wantProblem(t *testing.T, err error, status int, code client.Code) *client.Problem {
	t.Helper()
	var p *client.Problem
	if !errors.As(err, &p) {
		t.Fatalf("error %v, want a *client.Problem", err)
	}
	if p.Status != status || p.Code != code {
		t.Errorf("Problem = %+v, want status %d, code %q", p, status, code)
	}
	return p
}
