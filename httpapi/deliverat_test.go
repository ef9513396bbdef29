package httpapi_test

import (
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// TestAPI_DeliverAt: deliver_at at ingest, RFC 3339 with an offset, is
// refused with a 422 naming deliver_at (storing nothing) when it is not
// a time with an offset, further than engine.MaxDeliverAtSkew in the
// past or engine.MaxDeliverAtAhead in the future; a scheduled event is
// answered with its deliver_at, its deliveries pending and due then; a
// repeat of its Idempotency-Key at another time is a conflict.
func TestAPI_DeliverAt(t *testing.T) {
	e := newAPIEnv(t)
	e.fixture()
	now := time.Now()
	before := e.snapshot()
	for _, tc := range []struct{ name, at string }{
		{"no offset", `"` + now.Add(time.Hour).UTC().Format("2006-01-02T15:04:05") + `"`},
		{"not a time", `"tomorrow"`},
		{"a number", `1893456000`},
		{"past the skew", `"` + now.Add(-time.Minute).Format(time.RFC3339) + `"`},
		{"past the horizon", `"` + now.Add(engine.MaxDeliverAtAhead+time.Hour).Format(time.RFC3339) + `"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{},"deliver_at":` + tc.at + `}`}), 422, engine.CodeInvalidField, "deliver_at")
		})
	}
	if after := e.snapshot(); after != before {
		t.Errorf("a refused ingest changed the state:\n%s\nwant\n%s", after, before)
	}

	at := now.Add(time.Hour).Truncate(time.Second)
	body := `{"type":"payment.succeeded","data":{"n":1},"deliver_at":"` + at.In(time.FixedZone("", 2*3600)).Format(time.RFC3339) + `"}`
	var in struct {
		ingestJSON
		DeliverAt time.Time `json:"deliver_at"`
	}
	key := map[string]string{"Idempotency-Key": "sched-1"}
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: body, header: key}, 202, &in)
	if !in.DeliverAt.Equal(at) || len(in.Deliveries) != 1 || in.Deliveries[0].State != "pending" {
		t.Fatalf("ingest answered deliver_at %v, deliveries %+v; want %v, one pending", in.DeliverAt, in.Deliveries, at)
	}
	var ev struct {
		DeliverAt  time.Time `json:"deliver_at"`
		Deliveries []struct {
			State         string    `json:"state"`
			DeliverAt     time.Time `json:"deliver_at"`
			NextAttemptAt time.Time `json:"next_attempt_at"`
		} `json:"deliveries"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/events/" + in.ID}, 200, &ev)
	if !ev.DeliverAt.Equal(at) || len(ev.Deliveries) != 1 || !ev.Deliveries[0].DeliverAt.Equal(at) || !ev.Deliveries[0].NextAttemptAt.Equal(at) {
		t.Errorf("GET event: deliver_at %v, deliveries %+v; want %v on both, due then", ev.DeliverAt, ev.Deliveries, at)
	}
	// The same request again is the same event; at another time, or
	// none, a conflict.
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: body, header: key}, 202, &in)
	other := `{"type":"payment.succeeded","data":{"n":1},"deliver_at":"` + at.Add(time.Minute).Format(time.RFC3339) + `"}`
	checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/acme/events", body: other, header: key}), 409, engine.CodeIdempotencyConflict, "Idempotency-Key")
	checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{"n":1}}`, header: key}), 409, engine.CodeIdempotencyConflict, "Idempotency-Key")

	// Unscheduled: no deliver_at member anywhere.
	var plain map[string]any
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, &plain)
	if _, ok := plain["deliver_at"]; ok {
		t.Errorf("an unscheduled ingest answers deliver_at %v", plain["deliver_at"])
	}
}
