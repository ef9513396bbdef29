package engine

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/webhookd/webhookd/verify"
)

// Endpoint verification (Standard Webhooks): before the first delivery to
// an endpoint that requires it, webhookd proves that whoever runs the URL
// holds the endpoint's secret, so an endpoint cannot be pointed at
// somebody else's server to have webhookd send it traffic.
//
// The challenge is a POST to the endpoint's URL with an empty body and the
// header
//
//	webhook-challenge: <base64 of 24 random bytes>
//
// The endpoint passes when it answers 2xx with
//
//	webhook-challenge-response: v1,<base64 HMAC-SHA256(HMAC-SHA256(key, "wev-v1"), challenge)>
//
// for one of its signing keys, which is what the official libraries'
// EndpointVerificationResponse computes (and verify.ChallengeResponse).
// The challenge goes through the same client as attempts: the same target
// policy, no redirects, the attempt timeout.
//
// While an endpoint that requires verification is not verified, its
// deliveries are held: they stay pending, no attempt is made or counted,
// the delivery's reason says "endpoint not verified: <why>" and
// next_attempt_at says when the challenge is sent again. Challenges of one
// endpoint are shared by all its deliveries and spaced by the retry
// schedule (the first wait after the first failure, the second after the
// second, ...). A hold ends when the endpoint passes (its held deliveries
// are then attempted at once), or at the delivery's deadline, when the
// delivery is dead with reason "endpoint not verified within the delivery
// deadline: <why>" and can be replayed once the endpoint is verified.

// HeaderChallenge and HeaderChallengeResponse are the Standard Webhooks
// endpoint-verification headers.
const (
	HeaderChallenge         = "webhook-challenge"
	HeaderChallengeResponse = "webhook-challenge-response"
)

// verificationState is the dispatcher's memory of challenges, per endpoint.
// Its zero value is ready to use. It is lost at restart, which only means
// the next challenge comes sooner.
type verificationState struct {
	mu        sync.Mutex
	endpoints map[string]*endpointChallenge
}

// endpointChallenge is what is known of one endpoint's verification.
type endpointChallenge struct {
	url      string          // the URL the state is about; another URL starts afresh
	inflight *challengeCall  // a challenge being made now, shared
	passed   time.Time       // when it passed at url; zero if it has not
	failures int             // challenges failed in a row
	retryAt  time.Time       // no new challenge before this (after a failure); a monotonic reading, like a Scheduler time
	reason   string          // why the last challenge failed
	held     map[string]bool // delivery IDs held for it
}

// challengeCall is one challenge in flight; done is closed when err and at
// are set.
type challengeCall struct {
	done chan struct{}
	err  error
	at   time.Time
}

// VerificationResult is the outcome of a challenge.
type VerificationResult struct {
	Verified bool
	Reason   string // why not, when not verified
}

// entry returns the state of endpoint ep, reset if its URL changed. The
// lock must be held.
func (v *verificationState) entry(ep Endpoint) *endpointChallenge {
	if v.endpoints == nil {
		v.endpoints = make(map[string]*endpointChallenge)
	}
	e := v.endpoints[ep.ID]
	if e == nil || e.url != ep.URL {
		held := map[string]bool{}
		if e != nil {
			held = e.held
		}
		e = &endpointChallenge{url: ep.URL, held: held}
		v.endpoints[ep.ID] = e
	}
	return e
}

// holdUnverified runs before an attempt. When the endpoint requires
// verification and is not verified, it challenges the endpoint (or reuses
// a recent outcome). If the endpoint passes, it marks in.Endpoint verified
// and returns false: the attempt goes ahead. Otherwise it records the
// delivery as held (or dead at its deadline) and returns true with when to
// look at the delivery again (monotonic; zero: not again).
func (d *Dispatcher) holdUnverified(ctx context.Context, in *AttemptInput) (time.Time, bool) {
	ep := &in.Endpoint
	if !in.EndpointFound || ep.Disabled || !ep.VerificationRequired || !ep.Verified.IsZero() {
		return time.Time{}, false
	}
	dl := in.Delivery
	// Not held while it is being attempted: a pass must not release (and
	// so re-run at once) the delivery this worker is about to attempt.
	d.verification.mu.Lock()
	delete(d.verification.entry(*ep).held, dl.ID)
	d.verification.mu.Unlock()
	at, err := d.challengeShared(ctx, *ep, false)
	if ctx.Err() != nil {
		return time.Time{}, true // stopping: not recorded, still pending
	}
	if err == nil {
		ep.Verified = at
		return time.Time{}, false
	}

	v := &d.verification
	v.mu.Lock()
	e := v.entry(*ep)
	retryAt, why := e.retryAt, e.reason
	e.held[dl.ID] = true
	v.mu.Unlock()

	p := d.policy(dl.RetryPolicy)
	now := d.opts.Now().UTC()
	wait := time.Until(retryAt)
	if wait < 0 {
		wait = 0 // passed meanwhile: look again at once
	}
	due := now.Add(wait)
	transition := func(cur Delivery) (Delivery, error) {
		return HoldDelivery(cur, dl.Cycle, due, "endpoint not verified: "+why+"; held until it answers the challenge", now), nil
	}
	if limit := dl.CycleStart.Add(p.Deadline - p.AttemptTimeout); due.After(limit) {
		rec := AttemptRecord{DeliveryID: dl.ID, Cycle: dl.Cycle, At: now, LastStatus: dl.LastStatus}
		rec.Attempt = Attempt{Cycle: dl.Cycle, Number: dl.CycleAttempts + 1, Start: now, Outcome: OutcomePermanent,
			Error: "endpoint not verified; no request made: " + why}
		rec.State, rec.Reason = StateDead, "endpoint not verified within the delivery deadline: "+why
		transition = func(cur Delivery) (Delivery, error) { return RecordAttempt(cur, rec), nil }
	}
	updated, err := d.store.UpdateDelivery(context.WithoutCancel(ctx), dl.ID, transition)
	if err != nil {
		d.log.Error("record held delivery", "delivery", dl.ID, "endpoint", dl.EndpointID, "err", err)
		return time.Now().Add(storeRetryDelay), true
	}
	d.log.Info("delivery held: endpoint not verified", "event", dl.EventID, "delivery", dl.ID,
		"endpoint", dl.EndpointID, "state", updated.State, "next_attempt_at", updated.NextAttemptAt, "reason", why)
	if updated.State != StatePending {
		v.mu.Lock()
		delete(v.entry(*ep).held, dl.ID)
		v.mu.Unlock()
		return time.Time{}, true
	}
	return d.monotonic(updated.NextAttemptAt), true
}

// VerifyEndpoint challenges ep now, whatever happened before, records a
// pass on the endpoint and releases its held deliveries. A failed
// challenge is not an error: the result says why.
func (d *Dispatcher) VerifyEndpoint(ctx context.Context, ep Endpoint) (Endpoint, VerificationResult, error) {
	at, err := d.challengeShared(ctx, ep, true)
	if err != nil {
		if ctx.Err() != nil {
			return ep, VerificationResult{}, ctx.Err()
		}
		return ep, VerificationResult{Reason: err.Error()}, nil
	}
	ep.Verified = at
	return ep, VerificationResult{Verified: true}, nil
}

// challengeShared returns when ep passed the challenge, or why it did not.
// Concurrent callers for one endpoint share one challenge. Unless force is
// set, a pass is remembered and a failure is reused until its retry time,
// so held deliveries do not each send a challenge. On a pass the endpoint
// is marked verified in the store and its held deliveries are released.
func (d *Dispatcher) challengeShared(ctx context.Context, ep Endpoint, force bool) (time.Time, error) {
	v := &d.verification
	v.mu.Lock()
	e := v.entry(ep)
	switch {
	case e.inflight != nil:
	case !force && !e.passed.IsZero():
		at := e.passed
		v.mu.Unlock()
		return at, nil
	case !force && time.Now().Before(e.retryAt):
		reason := e.reason
		v.mu.Unlock()
		return time.Time{}, fmt.Errorf("%s", reason)
	default:
		e.inflight = &challengeCall{done: make(chan struct{})}
		call := e.inflight
		v.mu.Unlock()
		d.runChallenge(ctx, ep, call)
		return call.at, call.err
	}
	call := e.inflight
	v.mu.Unlock()
	select {
	case <-call.done:
		return call.at, call.err
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// runChallenge makes the challenge of call, records its outcome in the
// state (and, on a pass, in the store) and closes call.done.
func (d *Dispatcher) runChallenge(ctx context.Context, ep Endpoint, call *challengeCall) {
	err := d.challenge(ctx, ep)
	now := d.opts.Now().UTC()
	var release []string
	v := &d.verification
	v.mu.Lock()
	e := v.entry(ep)
	e.inflight = nil
	switch {
	case err == nil:
		e.passed, e.failures, e.retryAt, e.reason = now, 0, time.Time{}, ""
		for id := range e.held {
			release = append(release, id)
		}
		clear(e.held)
	case ctx.Err() == nil:
		e.failures++
		e.retryAt = time.Now().Add(d.challengeWait(e.failures))
		e.reason = err.Error()
	}
	call.err, call.at = err, now
	close(call.done)
	v.mu.Unlock()
	if err != nil {
		d.log.Info("endpoint verification failed", "endpoint", ep.ID, "tenant", ep.TenantID, "reason", err.Error())
		return
	}
	d.log.Info("endpoint verified", "endpoint", ep.ID, "tenant", ep.TenantID)
	_, uerr := d.store.UpdateEndpoint(context.WithoutCancel(ctx), ep.TenantID, ep.ID, func(stored *Endpoint) error {
		if stored.URL == ep.URL && stored.Verified.IsZero() {
			stored.Verified = now
		}
		return nil
	})
	if uerr != nil && ErrorCode(uerr) != CodeEndpointNotFound {
		d.log.Error("record endpoint verification", "endpoint", ep.ID, "err", uerr)
	}
	for _, id := range release {
		d.Enqueue(id, ep.TenantID, ep.ID, time.Time{})
	}
}

// challengeWait is the wait after the n-th failed challenge in a row: the
// retry schedule's n-th wait (its last one beyond), or a minute when the
// schedule is empty.
func (d *Dispatcher) challengeWait(n int) time.Duration {
	s := d.opts.Policy.Schedule
	if len(s) == 0 {
		return time.Minute
	}
	return s[min(n, len(s))-1]
}

// challenge sends one endpoint-verification challenge to ep and reports
// why it failed, or nil. The reasons name no key and no expected answer.
func (d *Dispatcher) challenge(ctx context.Context, ep Endpoint) error {
	var raw [24]byte
	rand.Read(raw[:]) // never returns an error (see newAccessTokenValue)
	nonce := base64.StdEncoding.EncodeToString(raw[:])
	timeout := d.opts.Policy.AttemptTimeout
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, ep.URL, http.NoBody)
	if err != nil {
		return fmt.Errorf("challenge not sent: the URL does not make a request")
	}
	setCustomHeaders(req.Header, ep.Headers)
	req.Header.Set(HeaderChallenge, nonce)
	req.Header.Set("User-Agent", d.opts.UserAgent)
	resp, err := d.client.Do(req)
	if err != nil {
		d.log.Debug("challenge error", "endpoint", ep.ID, "detail", transportDetail(err))
		_, why := classify(0, err, timeout, false, nil)
		return fmt.Errorf("challenge failed: %s", why)
	}
	_, rerr := io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrainBody))
	resp.Body.Close()
	if rerr != nil && isTimeout(rerr) {
		return fmt.Errorf("challenge failed: timeout: no complete response within %s", timeout)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the challenge was answered HTTP %d %s, want 2xx with %s", resp.StatusCode, http.StatusText(resp.StatusCode), HeaderChallengeResponse)
	}
	got := resp.Header.Get(HeaderChallengeResponse)
	if got == "" {
		return fmt.Errorf("the challenge was answered HTTP %d without a %s header", resp.StatusCode, HeaderChallengeResponse)
	}
	for _, key := range ep.SigningKeys(d.opts.Now()) {
		want, err := verify.ChallengeResponse(key, nonce)
		if err == nil && hmac.Equal([]byte(got), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("the %s header does not match the endpoint's secret", HeaderChallengeResponse)
}

// VerifyEndpoint sends the endpoint-verification challenge to an endpoint
// of tenant now, records a pass on it and releases the deliveries held for
// it. The result says whether it passed and why not.
func (s *Service) VerifyEndpoint(ctx context.Context, tenant, id string) (Endpoint, VerificationResult, error) {
	ep, err := s.Endpoint(ctx, tenant, id)
	if err != nil {
		return Endpoint{}, VerificationResult{}, err
	}
	if s.disp == nil {
		return Endpoint{}, VerificationResult{}, Errorf(CodeUnavailable, "", "this webhookd sends no requests (no dispatcher)")
	}
	return s.disp.VerifyEndpoint(ctx, ep)
}
