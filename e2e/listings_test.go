package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
)

// TestListings_HasMoreOnlyWhenMore: every paged listing says has_more
// only when an item follows its page that the same query would list, so
// no filtered listing ends on an empty page; the log's later entries that
// the filter leaves out do not count.
func TestListings_HasMoreOnlyWhenMore(t *testing.T) {
	t.Parallel()
	// One failed attempt leaves a delivery pending for an hour.
	cfg := configWith(t, testConfig, map[string]any{"delivery.schedule": []string{"1h", "1h", "1h"}})
	in := startInstance(t, t.TempDir(), cfg)
	in.setup()
	refused, ok, failing := newReceiver(t, status(400)), newReceiver(t, status(200)), newReceiver(t, status(500))
	a := in.createEndpoint(refused.srv.URL, "invoice.paid")      // dead at once
	b := in.createEndpoint(ok.srv.URL, "*")                      // succeeded
	c := in.createEndpoint(failing.srv.URL, "payment.succeeded") // pending, retried in an hour
	refused.setSecret(a.Secret)
	ok.setSecret(b.Secret)
	failing.setSecret(c.Secret)

	// Log order: payment, 4 invoices, payment. The invoices' deliveries to
	// a are the dead ones; each filter's matches have entries after them
	// in the log that they leave out.
	var ids []string
	for _, typ := range []string{"payment.succeeded", "invoice.paid", "invoice.paid", "invoice.paid", "invoice.paid", "payment.succeeded"} {
		for _, d := range in.ingest(typ, `{}`).Deliveries {
			ids = append(ids, d.ID)
		}
	}
	for _, id := range ids {
		waitFor(t, "delivery "+id+" to settle", func() bool {
			d := in.delivery(id)
			return d.State == "dead" || d.State == "succeeded" || d.State == "pending" && len(d.Attempts) == 1
		})
	}

	for range 2 {
		in.mustCall(201, "POST", "/v1/tenants/acme/access-tokens", `{}`, nil)
	}

	list := func(path string) pageOf[json.RawMessage] {
		t.Helper()
		var p pageOf[json.RawMessage]
		in.mustCall(http.StatusOK, "GET", path, nil, &p)
		return p
	}
	base := "/v1/tenants/acme"
	tests := []struct {
		path string // up to the limit parameter
		want int    // how many it lists
	}{
		{base + "/deliveries?state=dead&", 4},
		{base + "/deliveries?state=pending&", 2},
		{base + "/deliveries?state=delivering&", 0},
		{base + "/deliveries?state=succeeded&", 6},
		{base + "/deliveries?endpoint=" + a.ID + "&", 4},
		{base + "/deliveries?type=invoice.paid&", 8},
		{base + "/deliveries?", 12},
		{base + "/events?type=invoice.paid&", 4},
		{base + "/events?", 6},
		{base + "/dead-letters?", 4},
		{base + "/endpoints?", 3},
		{base + "/access-tokens?", 2},
		{"/v1/tenants?", 1},
		{"/v1/event-types?", 2},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			p := list(fmt.Sprintf("%slimit=%d", tt.path, tt.want+1))
			if len(p.Data) != tt.want || p.HasMore {
				t.Errorf("limit %d: %d items, has_more %v; want %d, has_more false", tt.want+1, len(p.Data), p.HasMore, tt.want)
			}
			if tt.want == 0 {
				return
			}
			// A page of all of them says no more; in pages of want-1 the
			// first says more, and the second holds the last one and
			// says no more.
			if all := list(fmt.Sprintf("%slimit=%d", tt.path, tt.want)); len(all.Data) != tt.want || all.HasMore {
				t.Errorf("limit %d: %d items, has_more %v; want %d, has_more false", tt.want, len(all.Data), all.HasMore, tt.want)
			}
			if tt.want == 1 {
				return
			}
			first := list(fmt.Sprintf("%slimit=%d", tt.path, tt.want-1))
			if len(first.Data) != tt.want-1 || !first.HasMore || first.NextCursor == nil {
				t.Fatalf("limit %d: %d items, has_more %v; want %d, has_more true", tt.want-1, len(first.Data), first.HasMore, tt.want-1)
			}
			second := list(fmt.Sprintf("%slimit=%d&cursor=%s", tt.path, tt.want-1, url.QueryEscape(*first.NextCursor)))
			if len(second.Data) != 1 || second.HasMore {
				t.Errorf("the next page: %d items, has_more %v; want 1, has_more false", len(second.Data), second.HasMore)
			}
		})
	}
}

// startHeld starts webhookd with attempts that may take 10s and sets up
// tenant acme, and returns it with a receiver that holds every request
// until release is called (or the test ends).
func startHeld(t *testing.T) (in *instance, held *receiver, release func()) {
	t.Helper()
	in = startInstance(t, t.TempDir(), configWith(t, testConfig, map[string]any{"delivery.attempt_timeout": "10s"}))
	in.setup()
	held, release = holdingReceiver(t)
	return in, held, release
}

// TestListings_Delivering: state=delivering lists the deliveries whose
// attempt is in flight, newest first, in pages that say has_more only
// when one follows.
func TestListings_Delivering(t *testing.T) {
	t.Parallel()
	in, held, release := startHeld(t)
	defer release()
	ep := in.createEndpoint(held.srv.URL, "*")
	held.setSecret(ep.Secret)
	var newest []string
	for i := range 3 {
		newest = append([]string{in.ingest("invoice.paid", fmt.Sprintf(`{"n":%d}`, i)).Deliveries[0].ID}, newest...)
	}
	waitFor(t, "three attempts in flight", func() bool { return len(held.got()) == 3 })

	var got []string
	cursor := ""
	for page := 0; ; page++ {
		path := "/v1/tenants/acme/deliveries?state=delivering&limit=2"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		var p struct {
			Data    []deliveryView `json:"data"`
			Next    *string        `json:"next_cursor"`
			HasMore bool           `json:"has_more"`
		}
		in.mustCall(200, "GET", path, nil, &p)
		for _, d := range p.Data {
			if d.State != "delivering" {
				t.Errorf("%s is %s", d.ID, d.State)
			}
			got = append(got, d.ID)
		}
		if want := []int{2, 1}[min(page, 1)]; len(p.Data) != want || p.HasMore != (page == 0) {
			t.Fatalf("page %d: %d deliveries, has_more %v", page, len(p.Data), p.HasMore)
		}
		if !p.HasMore {
			break
		}
		cursor = *p.Next
	}
	if fmt.Sprint(got) != fmt.Sprint(newest) {
		t.Errorf("delivering: %v, want newest first %v", got, newest)
	}
	var problem struct{ Code, Field string }
	if code := in.call("GET", "/v1/tenants/acme/deliveries?state=delivering&cursor=%21%21", nil, &problem); code != 422 || problem.Code != "invalid_field" || problem.Field != "cursor" {
		t.Errorf("a cursor it did not make: %d %+v, want 422 invalid_field cursor", code, problem)
	}
}
