package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
)

// TestChannels_FilterOnAMixOfEndpoints runs the binary with loopback
// receivers behind endpoints that filter on channels [a], on [b], on
// none, and on [a] for another type, sends events on [a], [a b], no
// channel, [c] and (the other type) [a], and checks that each receiver
// gets exactly the events it should, once each, signed, and nothing
// else; that the API shows and filters by the channels; and that a
// changed filter applies to the next event.
func TestChannels_FilterOnAMixOfEndpoints(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()

	type target struct {
		rc *receiver
		ep endpointCreated
	}
	mk := func(typ string, channels ...string) target {
		t.Helper()
		rc := newReceiver(t, status(http.StatusOK))
		body := map[string]any{"url": rc.srv.URL + "/hooks", "event_types": []string{typ}}
		if channels != nil {
			body["channels"] = channels
		}
		var ep endpointCreated
		in.mustCall(201, "POST", "/v1/tenants/acme/endpoints", body, &ep)
		rc.setSecret(ep.Secret)
		return target{rc, ep}
	}
	a, b, all := mk("payment.succeeded", "a"), mk("payment.succeeded", "b"), mk("payment.succeeded")
	aInvoices := mk("invoice.paid", "a")

	send := func(typ string, channels ...string) ingestResponse {
		t.Helper()
		body := map[string]any{"type": typ, "data": map[string]any{"channels": channels}}
		if channels != nil {
			body["channels"] = channels
		}
		var res ingestResponse
		in.mustCall(202, "POST", "/v1/tenants/acme/events", body, &res)
		return res
	}
	onA, onAB, onNone, onC := send("payment.succeeded", "a"), send("payment.succeeded", "a", "b"), send("payment.succeeded"), send("payment.succeeded", "c")
	invoiceOnA := send("invoice.paid", "a")

	want := map[*receiver][]string{
		a.rc:         {onA.ID, onAB.ID},
		b.rc:         {onAB.ID},
		all.rc:       {onA.ID, onAB.ID, onNone.ID, onC.ID},
		aInvoices.rc: {invoiceOnA.ID},
	}
	deliveries := 0
	for _, res := range []ingestResponse{onA, onAB, onNone, onC, invoiceOnA} {
		deliveries += len(res.Deliveries)
		for _, d := range res.Deliveries {
			in.waitState(d.ID, "succeeded")
		}
	}
	if deliveries != 8 {
		t.Fatalf("the ingests made %d deliveries, want 8", deliveries)
	}
	// Those are all the deliveries there are, and each has succeeded at
	// its first attempt (answered 200): no request is still on its way.
	var every struct {
		Data []struct {
			State string `json:"state"`
		} `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/tenants/acme/deliveries", nil, &every)
	if len(every.Data) != deliveries {
		t.Fatalf("the delivery log has %d deliveries, want the ingests' %d", len(every.Data), deliveries)
	}
	for rc, ids := range want {
		var got []string
		for _, r := range rc.got() {
			var env struct{ ID string }
			if err := json.Unmarshal(r.body, &env); err != nil {
				t.Fatalf("a body that is not an envelope: %q", r.body)
			}
			got = append(got, env.ID)
		}
		slices.Sort(got)
		if w := slices.Sorted(slices.Values(ids)); !slices.Equal(got, w) {
			t.Errorf("a receiver got events %v, want exactly %v", got, w)
		}
		rc.checkSignatures()
	}

	// The API: the event's channels beside its envelope, the delivery log
	// and the feed by channel.
	var ev struct {
		Event    map[string]any `json:"event"`
		Channels []string       `json:"channels"`
	}
	in.mustCall(200, "GET", "/v1/tenants/acme/events/"+onAB.ID, nil, &ev)
	if !slices.Equal(ev.Channels, []string{"a", "b"}) || ev.Event["channels"] != nil {
		t.Errorf("GET event: channels %q, envelope %v", ev.Channels, ev.Event)
	}
	var log struct {
		Data []struct {
			EventID  string   `json:"event_id"`
			Channels []string `json:"channels"`
		} `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/tenants/acme/deliveries?channel=b", nil, &log)
	if len(log.Data) != len(onAB.Deliveries) {
		t.Errorf("deliveries on channel b: %+v, want the %d of %s", log.Data, len(onAB.Deliveries), onAB.ID)
	}
	for _, d := range log.Data {
		if d.EventID != onAB.ID || !slices.Equal(d.Channels, []string{"a", "b"}) {
			t.Errorf("a delivery on channel b: %+v, want one of %s on [a b]", d, onAB.ID)
		}
	}
	var feed struct {
		Data []struct {
			Event struct{ ID string } `json:"event"`
		} `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/tenants/acme/events?channel=c", nil, &feed)
	if len(feed.Data) != 1 || feed.Data[0].Event.ID != onC.ID {
		t.Errorf("feed on channel c: %+v, want %s", feed.Data, onC.ID)
	}
	if code := in.call("POST", "/v1/tenants/acme/events", `{"type":"payment.succeeded","channels":["ok","not ok"],"data":{}}`, nil); code != 422 {
		t.Errorf("an event on a bad channel: %d, want 422", code)
	}

	// A changed filter applies to the next event: b now listens to c.
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+b.ep.ID, map[string]any{"channels": []string{"c"}}, nil)
	next := send("payment.succeeded", "c")
	var to []string
	for _, d := range next.Deliveries {
		to = append(to, d.EndpointID)
		in.waitState(d.ID, "succeeded")
	}
	slices.Sort(to)
	if w := slices.Sorted(slices.Values([]string{b.ep.ID, all.ep.ID})); !slices.Equal(to, w) {
		t.Errorf("the event on c after the change went to %v, want %v", to, w)
	}
	if n := len(b.rc.got()); n != 2 {
		t.Errorf("b's receiver has %d requests, want 2 (%s, then the event on c)", n, onAB.ID)
	}
}
