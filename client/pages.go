package client

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// page is the body of every listing.
type page[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"next_cursor"`
	HasMore    bool    `json:"has_more"`
}

// list walks the listing at path: it asks for one page at a time, with
// query and ?cursor=, yields each item, and follows next_cursor while
// has_more is true. An error is yielded once, with a zero T, and ends the
// walk. cursor, when not "", starts after it.
func list[T any](ctx context.Context, c *Client, path string, query url.Values, cursor string) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		for {
			q := url.Values{}
			for k, v := range query {
				q[k] = v
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var p page[T]
			if _, _, err := c.do(ctx, get(path, q), &p); err != nil {
				yield(zero, err)
				return
			}
			for _, it := range p.Data {
				if !yield(it, nil) {
					return
				}
			}
			if !p.HasMore {
				return
			}
			if p.NextCursor == nil || *p.NextCursor == cursor {
				yield(zero, fmt.Errorf("client: GET %s: %w", path, errNoCursor))
				return
			}
			cursor = *p.NextCursor
		}
	}
}

// limitQuery is ?limit= when limit is set.
func limitQuery(limit int) url.Values {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q
}

// Tenants walks every tenant, in ID order. Admin tokens only.
func (c *Client) Tenants(ctx context.Context, o ListOptions) iter.Seq2[Tenant, error] {
	return list[Tenant](ctx, c, "/v1/tenants", limitQuery(o.Limit), o.Cursor)
}

// EventTypes walks the catalogue, in name order. Every token may read it.
func (c *Client) EventTypes(ctx context.Context, o ListOptions) iter.Seq2[EventType, error] {
	return list[EventType](ctx, c, "/v1/event-types", limitQuery(o.Limit), o.Cursor)
}

// RetryPolicies walks the server's retry policies, in name order: what a
// tenant's or an endpoint's RetryPolicy may name. Every token may read
// them.
func (c *Client) RetryPolicies(ctx context.Context, o ListOptions) iter.Seq2[RetryPolicy, error] {
	return list[RetryPolicy](ctx, c, "/v1/retry-policies", limitQuery(o.Limit), o.Cursor)
}

// Endpoints walks tenant's endpoints, in ID order.
func (c *Client) Endpoints(ctx context.Context, tenant string, o ListOptions) iter.Seq2[Endpoint, error] {
	return list[Endpoint](ctx, c, tenantPath(tenant, "endpoints"), limitQuery(o.Limit), o.Cursor)
}

// AccessTokens walks tenant's access tokens (revoked and expired ones
// included until the server prunes them). Admin tokens only.
func (c *Client) AccessTokens(ctx context.Context, tenant string, o ListOptions) iter.Seq2[AccessToken, error] {
	return list[AccessToken](ctx, c, tenantPath(tenant, "access-tokens"), limitQuery(o.Limit), o.Cursor)
}

// DeadLetters walks tenant's dead letters: the deliveries in StateDead.
func (c *Client) DeadLetters(ctx context.Context, tenant string, o ListOptions) iter.Seq2[Delivery, error] {
	return list[Delivery](ctx, c, tenantPath(tenant, "dead-letters"), limitQuery(o.Limit), o.Cursor)
}

// Deliveries walks tenant's delivery log, newest first, keeping the
// deliveries f selects.
func (c *Client) Deliveries(ctx context.Context, tenant string, f DeliveryFilter) iter.Seq2[Delivery, error] {
	q := limitQuery(f.Limit)
	setNonEmpty(q, "state", string(f.State))
	setNonEmpty(q, "type", f.Type)
	setNonEmpty(q, "endpoint", f.Endpoint)
	setNonEmpty(q, "status", string(f.Status))
	setTime(q, "since", f.Since)
	setTime(q, "until", f.Until)
	setNonEmpty(q, "channel", f.Channel)
	return list[Delivery](ctx, c, tenantPath(tenant, "deliveries"), q, f.Cursor)
}

func setNonEmpty(q url.Values, name, v string) {
	if v != "" {
		q.Set(name, v)
	}
}

func setTime(q url.Values, name string, t time.Time) {
	if !t.IsZero() {
		q.Set(name, t.UTC().Format(time.RFC3339Nano))
	}
}

// Feed is a walk of a tenant's reconciliation feed: its events in ingest
// order, each envelope exactly as delivered. Unlike the other listings it
// ends at the end of the log for now; Cursor then says where to resume,
// in a later Feed, to read only what was ingested since.
//
// A Feed is one walk at a time: it is not safe for concurrent use.
type Feed struct {
	c      *Client
	tenant string
	f      FeedFilter
	cursor string
}

// Feed returns a walk of tenant's reconciliation feed from f.Cursor. It
// sends nothing until Events is ranged over.
func (c *Client) Feed(tenant string, f FeedFilter) *Feed {
	return &Feed{c: c, tenant: tenant, f: f, cursor: f.Cursor}
}

// Cursor is where to resume the feed: after the last event Events
// yielded, or as far as the server said the log was read; f.Cursor
// before the first page.
func (f *Feed) Cursor() string { return f.cursor }

// Events walks the feed from Cursor to the end of the log, yielding each
// event; ranging over it again continues from where the last walk
// stopped. An error is yielded once, with a zero FeedEvent, and ends the
// walk; Cursor is then still where to resume.
func (f *Feed) Events(ctx context.Context) iter.Seq2[FeedEvent, error] {
	path := tenantPath(f.tenant, "events")
	return func(yield func(FeedEvent, error) bool) {
		for {
			q := limitQuery(f.f.Limit)
			setNonEmpty(q, "cursor", f.cursor)
			setNonEmpty(q, "type", f.f.Type)
			setTime(q, "since", f.f.Since)
			setNonEmpty(q, "channel", f.f.Channel)
			var p struct {
				Data       []FeedEvent `json:"data"`
				NextCursor string      `json:"next_cursor"`
				HasMore    bool        `json:"has_more"`
			}
			if _, _, err := f.c.do(ctx, get(path, q), &p); err != nil {
				yield(FeedEvent{}, err)
				return
			}
			before := f.cursor
			for _, ev := range p.Data {
				f.cursor = ev.Cursor
				if !yield(ev, nil) {
					return
				}
			}
			if p.NextCursor != "" {
				f.cursor = p.NextCursor
			}
			if !p.HasMore {
				return
			}
			if f.cursor == before {
				yield(FeedEvent{}, fmt.Errorf("client: %s %s: %w", http.MethodGet, path, errNoCursor))
				return
			}
		}
	}
}
