package httpapi_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// TestAPI_Channels: an endpoint's channel filter on create and update,
// an event's channels at ingest, each bad one a 422 naming the field (or
// the channel, channels[i]) that stores nothing, the fan-out by channel,
// the channels in the event's and the deliveries' answers (not in the
// envelope), and the listings filtered by channel.
func TestAPI_Channels(t *testing.T) {
	e := newAPIEnv(t)
	plain := e.fixture()
	var a struct {
		ID       string   `json:"id"`
		Channels []string `json:"channels"`
	}
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/a","event_types":["payment.succeeded"],"channels":["project_1"]}`}, 201, &a)
	if !slices.Equal(a.Channels, []string{"project_1"}) {
		t.Fatalf("created endpoint answered channels %q", a.Channels)
	}
	var got map[string]any
	e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints/" + plain.ID}, 200, &got)
	if _, ok := got["channels"]; ok {
		t.Errorf("an endpoint without channels answers %v: want no channels member", got["channels"])
	}

	eleven := make([]string, engine.MaxChannels+1)
	for i := range eleven {
		eleven[i] = fmt.Sprintf("%q", fmt.Sprint("c", i))
	}
	before := e.snapshot()
	for _, tc := range []struct{ method, path, body, field string }{
		{"POST", "/v1/tenants/acme/endpoints", `{"url":"https://hooks.example.com/b","event_types":["*"],"channels":["ok","fine","not ok"]}`, "channels[2]"},
		{"POST", "/v1/tenants/acme/endpoints", `{"url":"https://hooks.example.com/b","event_types":["*"],"channels":[` + strings.Join(eleven, ",") + `]}`, "channels"},
		{"POST", "/v1/tenants/acme/endpoints", `{"url":"https://hooks.example.com/b","event_types":["*"],"channels":"project_1"}`, "channels"},
		{"PATCH", "/v1/tenants/acme/endpoints/" + plain.ID, `{"channels":["a","a"]}`, "channels[1]"},
		{"PATCH", "/v1/tenants/acme/endpoints/" + plain.ID, `{"channels":["` + strings.Repeat("x", engine.MaxChannelLen+1) + `"]}`, "channels[0]"},
		{"POST", "/v1/tenants/acme/events", `{"type":"payment.succeeded","channels":["ok",""],"data":{}}`, "channels[1]"},
		{"POST", "/v1/tenants/acme/events", `{"type":"payment.succeeded","channels":["é"],"data":{}}`, "channels[0]"},
		{"POST", "/v1/tenants/acme/events", `{"type":"payment.succeeded","channels":[` + strings.Join(eleven, ",") + `],"data":{}}`, "channels"},
		{"POST", "/v1/tenants/acme/events", `{"type":"payment.succeeded","channels":[1],"data":{}}`, "channels"},
	} {
		checkProblem(t, e.do(req{method: tc.method, path: tc.path, body: tc.body}), 422, engine.CodeInvalidField, tc.field)
	}
	if after := e.snapshot(); after != before {
		t.Errorf("a refused request changed the state:\n%s\nwant\n%s", after, before)
	}
	var feed struct{ Data []any }
	e.must(req{method: "GET", path: "/v1/tenants/acme/events"}, 200, &feed)
	if len(feed.Data) != 0 {
		t.Errorf("refused ingests stored %d events", len(feed.Data))
	}

	// Fan-out: the plain endpoint gets everything, a only project_1's.
	var on, off ingestJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","channels":["project_1","other"],"data":{"n":1}}`}, 202, &on)
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{"n":2}}`}, 202, &off)
	if len(on.Deliveries) != 2 || len(off.Deliveries) != 1 || off.Deliveries[0].EndpointID != plain.ID {
		t.Fatalf("deliveries: on channels %+v, on none %+v; want both endpoints, then the plain one", on.Deliveries, off.Deliveries)
	}
	var ev struct {
		Event      map[string]any `json:"event"`
		Channels   []string       `json:"channels"`
		Deliveries []struct {
			Channels []string `json:"channels"`
		} `json:"deliveries"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/events/" + on.ID}, 200, &ev)
	if !slices.Equal(ev.Channels, []string{"project_1", "other"}) || len(ev.Deliveries) != 2 || !slices.Equal(ev.Deliveries[0].Channels, ev.Channels) {
		t.Errorf("GET event: channels %q, deliveries %+v", ev.Channels, ev.Deliveries)
	}
	if _, ok := ev.Event["channels"]; ok {
		t.Errorf("the envelope holds the channels: %v", ev.Event)
	}
	var d struct {
		Channels []string `json:"channels"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries/" + on.Deliveries[0].ID}, 200, &d)
	if !slices.Equal(d.Channels, []string{"project_1", "other"}) {
		t.Errorf("GET delivery: channels %q", d.Channels)
	}

	// The listings by channel.
	var ds struct {
		Data []struct {
			ID      string `json:"id"`
			EventID string `json:"event_id"`
		} `json:"data"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries?channel=other"}, 200, &ds)
	if len(ds.Data) != 2 || ds.Data[0].EventID != on.ID || ds.Data[1].EventID != on.ID {
		t.Errorf("deliveries on channel other: %+v, want the two of %s", ds.Data, on.ID)
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries?channel=project_1&endpoint=" + a.ID}, 200, &ds)
	if len(ds.Data) != 1 {
		t.Errorf("deliveries on channel project_1 to %s: %+v, want one", a.ID, ds.Data)
	}
	var evs struct {
		Data []struct {
			Event    struct{ ID string } `json:"event"`
			Channels []string            `json:"channels"`
		} `json:"data"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/events?channel=project_1"}, 200, &evs)
	if len(evs.Data) != 1 || evs.Data[0].Event.ID != on.ID || !slices.Equal(evs.Data[0].Channels, ev.Channels) {
		t.Errorf("feed on channel project_1: %+v, want %s with its channels", evs.Data, on.ID)
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/events?channel=nothing"}, 200, &evs)
	if len(evs.Data) != 0 {
		t.Errorf("feed on channel nothing: %+v", evs.Data)
	}
	checkProblem(t, e.do(req{method: "GET", path: "/v1/tenants/acme/deliveries?channel=a%2Fb"}), 422, engine.CodeInvalidField, "channel")
	checkProblem(t, e.do(req{method: "GET", path: "/v1/tenants/acme/events?channel=a%20b"}), 422, engine.CodeInvalidField, "channel")

	// A change of the filter; [] removes it.
	e.must(req{method: "PATCH", path: "/v1/tenants/acme/endpoints/" + a.ID, body: `{"channels":["other"]}`}, 200, &a)
	if !slices.Equal(a.Channels, []string{"other"}) {
		t.Errorf("after PATCH: channels %q", a.Channels)
	}
	e.must(req{method: "PATCH", path: "/v1/tenants/acme/endpoints/" + a.ID, body: `{"channels":[]}`}, 200, &got)
	if _, ok := got["channels"]; ok {
		t.Errorf("after PATCH channels []: %v, want no channels member", got["channels"])
	}
}
