package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/webhookd/webhookd/client"
)

// api calls a node's API with one token: through package client where it
// has the call (typed answers; an error answer as a *client.Problem), and
// by hand where a test must see the answer itself (/readyz's status, each
// page of a listing). It never retries: a test sees every 429 and 503.
type api struct {
	*client.Client
	base  string
	token string
	hc    *http.Client
}

func newAPI(base, token string) *api {
	hc := &http.Client{Timeout: time.Minute}
	c, err := client.New(base, client.Options{Token: token, HTTPClient: hc, MaxAttempts: 1, UserAgent: "webhookd-e2e"})
	if err != nil {
		panic(err) // base is a node's own http:// URL
	}
	return &api{Client: c, base: base, token: token, hc: hc}
}

// status makes a GET of path and returns the answer's status; out, when
// not nil, gets a 2xx answer's JSON.
func (a *api) status(ctx context.Context, path string, q url.Values, out any) (int, error) {
	target := a.base + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(body, out); err != nil {
			return resp.StatusCode, fmt.Errorf("GET %s: %w", path, err)
		}
	}
	if resp.StatusCode/100 != 2 && out != nil {
		return resp.StatusCode, fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return resp.StatusCode, nil
}

// ready returns the status /readyz answers now.
func (a *api) ready(ctx context.Context) (int, error) {
	return a.status(ctx, "/readyz", nil, nil)
}

// pageOf is one page of a listing of Ts.
type pageOf[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"next_cursor"`
	HasMore    bool    `json:"has_more"`
}

// listAll reads every page of the listing at path (1000 items a page,
// unless q sets limit) and returns its items. A page that said has_more and was followed by
// an empty one is counted in emptyPages: has_more promises an item.
func listAll[T any](ctx context.Context, a *api, path string, q url.Values) (items []T, emptyPages int, err error) {
	q2 := url.Values{}
	for k, v := range q {
		q2[k] = v
	}
	if q2.Get("limit") == "" {
		q2.Set("limit", "1000")
	}
	promised := false
	for range 10000 {
		var p pageOf[T]
		if _, err := a.status(ctx, path, q2, &p); err != nil {
			return items, emptyPages, err
		}
		if promised && len(p.Data) == 0 {
			emptyPages++
		}
		items = append(items, p.Data...)
		if !p.HasMore || p.NextCursor == nil {
			return items, emptyPages, nil
		}
		promised = true
		q2.Set("cursor", *p.NextCursor)
	}
	return items, emptyPages, fmt.Errorf("GET %s: more than 10000 pages", path)
}

// deliveries lists the deliveries of tenant that q selects (state,
// endpoint, ...; nil: all), through every page.
func (a *api) deliveries(ctx context.Context, tenant string, q url.Values) ([]client.Delivery, int, error) {
	return listAll[client.Delivery](ctx, a, "/v1/tenants/"+url.PathEscape(tenant)+"/deliveries", q)
}

// tenantIDs lists the IDs GET /v1/tenants answers with.
func (a *api) tenantIDs(ctx context.Context) ([]string, error) {
	ts, _, err := listAll[client.Tenant](ctx, a, "/v1/tenants", nil)
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids, err
}

// report is a delivery report as GET …/report answers it. Paused counts
// the deliveries held for a disabled endpoint: one of the buckets that
// partition a report's deliveries (buckets).
type report struct {
	client.Report
	Paused int `json:"paused"`
}

// buckets returns the sum of r's counts that each delivery falls in
// exactly one of: succeeded at its first attempt, after retries in its
// first cycle, or after a replay; pending, waiting, paused or dead.
func (r report) buckets() int {
	return r.FirstAttemptSuccesses + r.RetrySuccesses + r.Replayed + r.Pending + r.Waiting + r.Paused + r.Dead
}

// tenantReport returns tenant's report over its last n events.
func (a *api) tenantReport(ctx context.Context, tenant string, n int) (report, error) {
	var r report
	_, err := a.status(ctx, "/v1/tenants/"+url.PathEscape(tenant)+"/report", url.Values{"last": {strconv.Itoa(n)}}, &r)
	return r, err
}

// adminReport is GET /v1/admin/report's answer.
type adminReport struct {
	Tenants []report `json:"tenants"`
	Total   report   `json:"total"`
}

// adminReport returns every tenant's report over its last n events.
func (a *api) adminReport(ctx context.Context, n int) (adminReport, error) {
	var r adminReport
	_, err := a.status(ctx, "/v1/admin/report", url.Values{"last": {strconv.Itoa(n)}}, &r)
	return r, err
}
