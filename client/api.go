package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Health reports whether the server answers /healthz: nil when it is up.
func (c *Client) Health(ctx context.Context) error {
	_, _, err := c.do(ctx, get("/healthz", nil), nil)
	return err
}

// Ready reports whether the server can take work (/readyz): nil when it
// is ready, else a *Problem (503 unavailable) whose Detail says why. It is
// asked once, never retried: a readiness check wants the answer of now.
func (c *Client) Ready(ctx context.Context) error {
	r := get("/readyz", nil)
	r.retry = false
	_, _, err := c.do(ctx, r, nil)
	return err
}

// PutTenant creates tenant id or updates its name, and reports whether it
// created it. Admin tokens only (a test token may create test tenants).
func (c *Client) PutTenant(ctx context.Context, id string, in TenantInput) (Tenant, bool, error) {
	var t Tenant
	status, _, err := c.do(ctx, request{method: http.MethodPut, path: tenantPath(id), body: in}, &t)
	return t, status == http.StatusCreated, err
}

// Tenant returns tenant id.
func (c *Client) Tenant(ctx context.Context, id string) (Tenant, error) {
	var t Tenant
	_, _, err := c.do(ctx, get(tenantPath(id), nil), &t)
	return t, err
}

// DeleteTenant deletes tenant id and everything of it: the tenant, its
// endpoints and tokens at once, the rest by the task it returns (TaskPurge,
// the operator's: WaitTask follows it); until that ends, PutTenant of the
// id is CodeTenantDeleting. A tenant with deliveries pending is refused
// (CodePendingDeliveries) unless force is set, which drops them.
func (c *Client) DeleteTenant(ctx context.Context, id string, force bool) (Task, error) {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	return c.startTask(ctx, request{method: http.MethodDelete, path: tenantPath(id), query: q})
}

// PutEventType adds name to the catalogue, or updates its description,
// and reports whether it added it.
func (c *Client) PutEventType(ctx context.Context, name, description string) (EventType, bool, error) {
	return c.PutEventTypeWith(ctx, name, EventTypeInput{Description: description})
}

// PutEventTypeWith is PutEventType with every field a type has: it
// replaces the description, the status, the schema and the example
// (active, and none of the others, when in leaves them out:
// PutEventType resets them so).
func (c *Client) PutEventTypeWith(ctx context.Context, name string, in EventTypeInput) (EventType, bool, error) {
	var et EventType
	status, _, err := c.do(ctx, request{method: http.MethodPut, path: "/v1/event-types/" + seg(name), body: in}, &et)
	return et, status == http.StatusCreated, err
}

// DeleteEventType takes name out of the catalogue: ingest of that type is
// refused from then on; events stored already are delivered as usual.
func (c *Client) DeleteEventType(ctx context.Context, name string) error {
	_, _, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/event-types/" + seg(name)}, nil)
	return err
}

// CreateEndpoint adds an endpoint to tenant and returns it with its
// signing secret. No read shows it again; RevealSecret does, recorded.
func (c *Client) CreateEndpoint(ctx context.Context, tenant string, in EndpointInput) (CreatedEndpoint, error) {
	var ep CreatedEndpoint
	_, _, err := c.do(ctx, request{method: http.MethodPost, path: tenantPath(tenant, "endpoints"), body: in}, &ep)
	return ep, err
}

// Endpoint returns endpoint id of tenant.
func (c *Client) Endpoint(ctx context.Context, tenant, id string) (Endpoint, error) {
	var ep Endpoint
	_, _, err := c.do(ctx, get(tenantPath(tenant, "endpoints", seg(id)), nil), &ep)
	return ep, err
}

// UpdateEndpoint changes the fields of endpoint id that p sets.
func (c *Client) UpdateEndpoint(ctx context.Context, tenant, id string, p EndpointPatch) (Endpoint, error) {
	var ep Endpoint
	_, _, err := c.do(ctx, request{method: http.MethodPatch, path: tenantPath(tenant, "endpoints", seg(id)), body: p}, &ep)
	return ep, err
}

// DeleteEndpoint deletes endpoint id of tenant; its pending deliveries
// are not attempted again.
func (c *Client) DeleteEndpoint(ctx context.Context, tenant, id string) error {
	_, _, err := c.do(ctx, request{method: http.MethodDelete, path: tenantPath(tenant, "endpoints", seg(id))}, nil)
	return err
}

// DefaultGrace, as RotateSecret's grace, asks for the server's default
// grace window (24 hours).
const DefaultGrace time.Duration = -1

// RotateSecret gives endpoint id a new secret. The previous one keeps
// signing beside it for grace, so the receiver can switch keys without
// dropping a webhook; a grace of 0 drops it at once (for a leaked key);
// DefaultGrace: the server's default. No read shows the new secret again;
// RevealSecret does, recorded.
func (c *Client) RotateSecret(ctx context.Context, tenant, id string, grace time.Duration) (SecretResult, error) {
	return c.RotateSecretTo(ctx, tenant, id, "", grace)
}

// RotateSecretTo is RotateSecret to a secret of your own (as
// EndpointInput.Secret takes it; "": a new one the server makes), for a
// receiver that already verifies with it: moving from another service,
// the secret it rotated to there. A secret the endpoint signs with
// already is refused.
func (c *Client) RotateSecretTo(ctx context.Context, tenant, id, secret string, grace time.Duration) (SecretResult, error) {
	body := struct {
		Grace  string `json:"grace,omitempty"`
		Secret string `json:"secret,omitempty"`
	}{Secret: secret}
	if grace != DefaultGrace {
		body.Grace = grace.String()
	}
	var res SecretResult
	_, _, err := c.do(ctx, request{method: http.MethodPost, path: tenantPath(tenant, "endpoints", seg(id), "secret", "rotate"), body: body}, &res)
	return res, err
}

// RevokeSecret replaces every secret of endpoint id with a new one at
// once: the old ones sign nothing more. No read shows the new secret
// again; RevealSecret does, recorded.
func (c *Client) RevokeSecret(ctx context.Context, tenant, id string) (SecretResult, error) {
	var res SecretResult
	_, _, err := c.do(ctx, request{method: http.MethodPost, path: tenantPath(tenant, "endpoints", seg(id), "secret", "revoke")}, &res)
	return res, err
}

// RevealSecret shows the secrets endpoint id of tenant signs with now,
// again: the current one and the old ones still in their rotation grace
// window; and the values of its custom headers. Nothing changes but the endpoint's SecretReveals, where the
// server records who asked and when (the latest 20). Use it when a
// receiver lost its key; rotate when a key may have leaked. Keep the
// answer out of logs.
func (c *Client) RevealSecret(ctx context.Context, tenant, id string) (RevealedSecret, error) {
	var res RevealedSecret
	_, _, err := c.do(ctx, request{method: http.MethodPost, path: tenantPath(tenant, "endpoints", seg(id), "secret", "reveal")}, &res)
	return res, err
}

// VerifyEndpoint sends the Standard Webhooks verification challenge to
// endpoint id now. A challenge that fails is not an error: the answer
// says Verified false and why.
func (c *Client) VerifyEndpoint(ctx context.Context, tenant, id string) (Verification, error) {
	var v Verification
	_, _, err := c.do(ctx, request{method: http.MethodPost, path: tenantPath(tenant, "endpoints", seg(id), "verify")}, &v)
	return v, err
}

// SendTestEvent sends endpoint id of tenant a test event of typ, a
// catalogue type it subscribes to ("": the first by name with an
// example, else the first), whose data is the type's example: stored,
// signed and delivered as any event, to that endpoint only, and marked
// test in the delivery log and the feed.
func (c *Client) SendTestEvent(ctx context.Context, tenant, id, typ string) (TestEventResult, error) {
	var res TestEventResult
	body := struct {
		Type string `json:"type,omitempty"`
	}{typ}
	_, _, err := c.do(ctx, request{method: http.MethodPost, path: tenantPath(tenant, "endpoints", seg(id), "test-events"), body: body}, &res)
	return res, err
}

// Ingest stores an event for tenant and schedules its delivery to every
// endpoint subscribed to its type. It is sent with in.IdempotencyKey, or
// with a random key when that is empty, and the same key on every retry,
// so a retried ingest stores one event; the result says which key and
// whether the server had it already.
func (c *Client) Ingest(ctx context.Context, tenant string, in EventInput) (IngestResult, error) {
	key := in.IdempotencyKey
	if key == "" {
		key = newIdempotencyKey()
	}
	r := request{
		method: http.MethodPost, path: tenantPath(tenant, "events"), body: in,
		header: http.Header{"Idempotency-Key": {key}},
		retry:  true, // the key makes a repeat harmless
	}
	var res IngestResult
	_, h, err := c.do(ctx, r, &res)
	if err != nil {
		return IngestResult{}, err
	}
	res.IdempotencyKey = key
	res.Replayed = h.Get("Idempotent-Replayed") == "true"
	return res, nil
}

// newIdempotencyKey returns a random key: 128 bits, hex.
func newIdempotencyKey() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return "wc_" + hex.EncodeToString(b[:])
}

// Event returns event id of tenant: its envelope exactly as delivered,
// and its deliveries.
func (c *Client) Event(ctx context.Context, tenant, id string) (EventDetail, error) {
	var ev EventDetail
	_, _, err := c.do(ctx, get(tenantPath(tenant, "events", seg(id)), nil), &ev)
	return ev, err
}

// Delivery returns delivery id of tenant with its attempts and replays.
func (c *Client) Delivery(ctx context.Context, tenant, id string) (Delivery, error) {
	var d Delivery
	_, _, err := c.do(ctx, get(tenantPath(tenant, "deliveries", seg(id)), nil), &d)
	return d, err
}

// Replay sends delivery id again, in a new cycle, whatever its state, and
// returns it as queued. A delivery whose endpoint was deleted has nowhere
// to go: a Problem with CodeEndpointNotFound (field endpoint_id), and
// nothing changes.
func (c *Client) Replay(ctx context.Context, tenant, id string) (Delivery, error) {
	var d Delivery
	_, _, err := c.do(ctx, request{method: http.MethodPost, path: tenantPath(tenant, "deliveries", seg(id), "replay")}, &d)
	return d, err
}

// Skip lets the line of delivery id go on without it: it must be a dead
// delivery blocking its line (its endpoint's on_dead is block), else the
// error's code is not_blocking. It returns the delivery with the skip
// recorded.
func (c *Client) Skip(ctx context.Context, tenant, id string) (Delivery, error) {
	var d Delivery
	_, _, err := c.do(ctx, request{method: http.MethodPost, path: tenantPath(tenant, "deliveries", seg(id), "skip")}, &d)
	return d, err
}

// ReplayDeadLetters starts the replay of every dead letter of tenant in
// r and returns its task, running (WaitTask follows it; its Done counts
// the dead letters replayed). A tenant at its bound of running tasks is
// refused (CodeLimitReached).
func (c *Client) ReplayDeadLetters(ctx context.Context, tenant string, r DeadLetterRange) (Task, error) {
	return c.startTask(ctx, request{method: http.MethodPost, path: tenantPath(tenant, "dead-letters", "replay"), body: r})
}

// Backfill starts the delivery to endpoint endpointID of tenant of every
// retained event created in [since, until) (until zero: now; since is
// required) that the endpoint receives (its types and channels; test
// events never) and that has no delivery to it yet, each in a new cycle:
// Svix's "replay missing", for an endpoint made after its events. It
// returns the task, running (WaitTask follows it): its Done counts the
// deliveries made, its Skipped the events that had one, so a second
// backfill makes none twice. At the tenant's pending bound the task waits
// (Waiting) and goes on by itself. A tenant at its bound of running tasks
// is refused (CodeLimitReached).
func (c *Client) Backfill(ctx context.Context, tenant, endpointID string, since, until time.Time) (Task, error) {
	body := struct {
		Since time.Time `json:"since,omitzero"`
		Until time.Time `json:"until,omitzero"`
	}{since, until}
	return c.startTask(ctx, request{method: http.MethodPost, path: tenantPath(tenant, "endpoints", seg(endpointID), "backfill"), body: body})
}

// Report returns the delivery report over tenant's last events (0: the
// server's default, 1000).
func (c *Client) Report(ctx context.Context, tenant string, last int) (Report, error) {
	var rep Report
	_, _, err := c.do(ctx, get(tenantPath(tenant, "report"), lastQuery(last)), &rep)
	return rep, err
}

// ReportAll returns the report of every tenant over its last events (0:
// the server's default, 1000) and their total. Admin tokens only.
func (c *Client) ReportAll(ctx context.Context, last int) (TenantsReport, error) {
	var rep TenantsReport
	_, _, err := c.do(ctx, get("/v1/admin/report", lastQuery(last)), &rep)
	return rep, err
}

func lastQuery(last int) url.Values {
	if last == 0 {
		return nil
	}
	return url.Values{"last": {strconv.Itoa(last)}}
}

// IssueAccessToken makes a token that acts on tenant's routes only, for
// ttl (0: the server's default, 24h; at most 30 days). The token is shown
// this once. Admin tokens only.
func (c *Client) IssueAccessToken(ctx context.Context, tenant string, ttl time.Duration) (IssuedToken, error) {
	body := struct {
		TTL string `json:"ttl,omitempty"`
	}{}
	if ttl != 0 {
		body.TTL = ttl.String()
	}
	var t IssuedToken
	_, _, err := c.do(ctx, request{method: http.MethodPost, path: tenantPath(tenant, "access-tokens"), body: body}, &t)
	return t, err
}

// CreatePortalLink makes a one-time URL that opens the console as tenant
// in the browser that opens it, within ttl (0: the server's default,
// 10 minutes); returnURL, when not "", is where the console's "back"
// link goes. Hand the URL to your customer's browser (an iframe or a new
// tab) right away. Admin tokens only.
func (c *Client) CreatePortalLink(ctx context.Context, tenant string, ttl time.Duration, returnURL string) (PortalLink, error) {
	body := struct {
		TTL       string `json:"ttl,omitempty"`
		ReturnURL string `json:"return_url,omitempty"`
	}{ReturnURL: returnURL}
	if ttl != 0 {
		body.TTL = ttl.String()
	}
	var l PortalLink
	_, _, err := c.do(ctx, request{method: http.MethodPost, path: tenantPath(tenant, "portal-links"), body: body}, &l)
	return l, err
}

// RevokeAccessToken revokes token id ("tok_…") of tenant: it is refused
// from the next request on. Admin tokens only.
func (c *Client) RevokeAccessToken(ctx context.Context, tenant, id string) error {
	_, _, err := c.do(ctx, request{method: http.MethodDelete, path: tenantPath(tenant, "access-tokens", seg(id))}, nil)
	return err
}

// Backup streams a consistent copy of the server's database into w and
// returns how many bytes it wrote. The copy is whole only when the error
// is nil: a transfer cut short is an error, and what reached w must then
// be thrown away. Admin tokens only; a server without a backup source
// answers CodeNotFound.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	resp, err := c.send(ctx, get("/v1/admin/backup", nil))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("client: GET /v1/admin/backup: after %d bytes: %w", n, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("client: GET /v1/admin/backup: got %d bytes of %d", n, resp.ContentLength)
	}
	return n, nil
}
