package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// orderSchema is a typical event type schema: an object with a required
// positive integer amount and a three-letter currency, nothing else.
const orderSchema = `{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type": "object",
	"required": ["amount", "currency"],
	"properties": {
		"amount": {"type": "integer", "minimum": 1},
		"currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
		"lines": {"type": "array", "items": {"$ref": "#/$defs/line"}}
	},
	"additionalProperties": false,
	"$defs": {"line": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string"}}}}
}`

// problemView is the part of a problem+json answer the tests read.
type problemView struct {
	Code   string `json:"code"`
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// eventTypeView is an event type as the API shows it.
type eventTypeView struct {
	Name    string          `json:"name"`
	Status  string          `json:"status"`
	Schema  json.RawMessage `json:"schema"`
	Example json.RawMessage `json:"example"`
}

// putOrderType puts order.created into the catalogue with body and
// returns the answer.
func putOrderType(t *testing.T, in *instance, want int, body string) (eventTypeView, problemView) {
	t.Helper()
	var raw json.RawMessage
	if got := in.call("PUT", "/v1/event-types/order.created", body, &raw); got != want {
		t.Fatalf("PUT order.created: status %d, want %d: %s", got, want, raw)
	}
	var et eventTypeView
	var p problemView
	json.Unmarshal(raw, &et)
	json.Unmarshal(raw, &p)
	return et, p
}

// ingestRefused sends an event of order.created with data and checks it
// is refused with 422 code at field.
func ingestRefused(t *testing.T, in *instance, data, code, field string) problemView {
	t.Helper()
	var p problemView
	body := `{"type":"order.created","data":` + data + `}`
	if got := in.call("POST", "/v1/tenants/acme/events", body, &p); got != 422 || p.Code != code || p.Field != field {
		t.Fatalf("ingest of %s answered %d %+v; want 422 %s at %q", data, got, p, code, field)
	}
	if p.Detail == "" {
		t.Errorf("the refusal says nothing: %+v", p)
	}
	return p
}

// eventCount returns how many events tenant acme has.
func eventCount(t *testing.T, in *instance) int {
	t.Helper()
	var page struct {
		Data []json.RawMessage `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/tenants/acme/events?limit=100", nil, &page)
	return len(page.Data)
}

// TestSchemas_RefusesMismatchDeliversMatch runs the binary with a
// loopback receiver: an event type with a JSON Schema refuses an event
// whose data does not match it (422 schema_mismatch naming the JSON
// pointer at fault; nothing stored, nothing delivered) and takes one
// that matches, which is delivered. A schema that does not compile, one
// that refers outside itself and an example that does not match are
// refused at the PUT, naming the field.
func TestSchemas_RefusesMismatchDeliversMatch(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()

	et, _ := putOrderType(t, in, 201, `{"description":"an order was placed","schema":`+orderSchema+`,"example":{"amount":100,"currency":"EUR"}}`)
	if et.Status != "active" || !strings.Contains(string(et.Schema), `"additionalProperties":false`) {
		t.Fatalf("the put answered status %q, schema %s; want active with the schema", et.Status, et.Schema)
	}
	rc := newReceiver(t, status(http.StatusOK))
	ep := in.createEndpoint(rc.srv.URL+"/hooks", "order.created")
	rc.setSecret(ep.Secret)

	p := ingestRefused(t, in, `{"amount":"ten","currency":"EUR"}`, "schema_mismatch", "data/amount")
	t.Logf("refused: %s", p.Detail)
	ingestRefused(t, in, `{"amount":5,"currency":"EUR","lines":[{"sku":"a"},{"qty":1}]}`, "schema_mismatch", "data/lines/1")
	ingestRefused(t, in, `{"amount":5}`, "schema_mismatch", "data")
	ingestRefused(t, in, `[1]`, "schema_mismatch", "data")

	good := in.ingest("order.created", `{"amount":5,"currency":"EUR","lines":[{"sku":"a"}]}`)
	if len(good.Deliveries) != 1 {
		t.Fatalf("the matching event has %d deliveries, want 1", len(good.Deliveries))
	}
	in.waitState(good.Deliveries[0].ID, "succeeded")
	time.Sleep(200 * time.Millisecond) // a refused event's delivery would show by now
	got := rc.got()
	if len(got) != 1 || envelopeID(t, got[0].body) != good.ID {
		t.Fatalf("the receiver got %d requests, want the matching event only", len(got))
	}
	rc.checkSignatures()
	if n := eventCount(t, in); n != 1 {
		t.Errorf("tenant acme has %d events, want the matching one only", n)
	}

	// The PUT's own refusals leave the entry as it was.
	for _, c := range []struct{ name, body, code, field, says string }{
		{"does not compile", `{"schema":{"type":12}}`, "invalid_field", "schema", "type"},
		{"refers outside itself", `{"schema":{"$ref":"https://example.com/order.json"}}`, "invalid_field", "schema", "example.com"},
		{"too large", `{"schema":{"description":"` + strings.Repeat("x", 70<<10) + `"}}`, "invalid_field", "schema", "65536"},
		{"too many paths", `{"schema":` + anyOfChain(22) + `}`, "invalid_field", "schema", "more than 1000 of its subschemas"},
		{"example does not match", `{"schema":` + orderSchema + `,"example":{"amount":0,"currency":"EUR"}}`, "schema_mismatch", "example/amount", "minimum"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, p := putOrderType(t, in, 422, c.body)
			if p.Code != c.code || p.Field != c.field || !strings.Contains(p.Detail, c.says) {
				t.Errorf("answered %+v; want %s at %q saying %q", p, c.code, c.field, c.says)
			}
		})
	}
	var list struct {
		Data []eventTypeView `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/event-types", nil, &list)
	for _, et := range list.Data {
		if et.Name == "order.created" && !strings.Contains(string(et.Schema), `"minimum":1`) {
			t.Errorf("after refused puts the catalogue shows schema %s, want the first one", et.Schema)
		}
	}

	// A put without a schema takes it away: the data is free again.
	putOrderType(t, in, 200, `{"description":"an order was placed"}`)
	in.ingest("order.created", `{"amount":"ten"}`)
}

// anyOfChain is a schema of n links, each an anyOf of two $ref to the
// next: 2^n evaluations of a value that fails them all (n=22 held an
// ingest 15 s before the PUT refused it).
func anyOfChain(n int) string {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := range n {
		fmt.Fprintf(&b, `"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"d%d":{"type":"string"}}}`, n)
	return b.String()
}

// TestSchemas_ArchivedAfterTheFirstIngest: an ingest taken before its
// type was archived, repeated with its Idempotency-Key after, answers
// as the first did (202, the same event and deliveries), not 422: the
// event was accepted, and a client retrying a lost answer must learn
// so. The same repeat after the schema changed so that the data no
// longer matches answers the first answer too; a new key is refused.
func TestSchemas_ArchivedAfterTheFirstIngest(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	putOrderType(t, in, 201, `{"description":"an order was placed","schema":`+orderSchema+`}`)
	rc := newReceiver(t, status(http.StatusOK))
	ep := in.createEndpoint(rc.srv.URL+"/hooks", "order.created")
	rc.setSecret(ep.Secret)

	data := `{"amount":5,"currency":"EUR"}`
	first := in.ingest("order.created", data, "Idempotency-Key", "order-1")
	putOrderType(t, in, 200, `{"description":"stricter","schema":{"type":"object","required":["customer"]}}`)
	again := in.ingest("order.created", data, "Idempotency-Key", "order-1")
	putOrderType(t, in, 200, `{"description":"gone","status":"archived"}`)
	third := in.ingest("order.created", data, "Idempotency-Key", "order-1")
	for _, r := range []ingestResponse{again, third} {
		if r.ID != first.ID || len(r.Deliveries) != 1 || r.Deliveries[0].ID != first.Deliveries[0].ID {
			t.Errorf("the repeat answered %+v; want the first answer %+v", r, first)
		}
	}
	ingestRefused(t, in, data, "event_type_archived", "type")
	in.waitState(first.Deliveries[0].ID, "succeeded")
	if n := eventCount(t, in); n != 1 {
		t.Errorf("tenant acme has %d events, want 1", n)
	}
	rc.checkSignatures()
}

// TestSchemas_DeprecatedCountedArchivedRefused: a deprecated type is
// still taken and delivered, shown as such in the catalogue and counted
// in webhookd_deprecated_events_total; an archived one is refused at
// ingest (422 event_type_archived, nothing stored); active again, it is
// taken again.
func TestSchemas_DeprecatedCountedArchivedRefused(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	putOrderType(t, in, 201, `{"description":"an order was placed"}`)
	rc := newReceiver(t, status(http.StatusOK))
	ep := in.createEndpoint(rc.srv.URL+"/hooks", "order.created")
	rc.setSecret(ep.Secret)

	et, _ := putOrderType(t, in, 200, `{"description":"an order was placed; use order.placed","status":"deprecated"}`)
	if et.Status != "deprecated" {
		t.Fatalf("the put answered status %q, want deprecated", et.Status)
	}
	for range 2 {
		res := in.ingest("order.created", `{"n":1}`)
		in.waitState(res.Deliveries[0].ID, "succeeded")
	}
	in.ingest("payment.succeeded", `{"n":1}`) // not deprecated: not counted
	if got := deprecatedCount(t, in.base, "order.created"); got != 2 {
		t.Errorf("webhookd_deprecated_events_total{type=\"order.created\"} = %v, want 2", got)
	}

	putOrderType(t, in, 200, `{"description":"gone","status":"archived"}`)
	before := eventCount(t, in)
	p := ingestRefused(t, in, `{"n":1}`, "event_type_archived", "type")
	if !strings.Contains(p.Detail, "archived") {
		t.Errorf("the refusal does not say archived: %q", p.Detail)
	}
	if n := eventCount(t, in); n != before {
		t.Errorf("an archived type's event was stored: %d events, want %d", n, before)
	}
	var list struct {
		Data []eventTypeView `json:"data"`
	}
	in.mustCall(200, "GET", "/v1/event-types", nil, &list)
	statuses := map[string]string{}
	for _, et := range list.Data {
		statuses[et.Name] = et.Status
	}
	if statuses["order.created"] != "archived" || statuses["payment.succeeded"] != "active" {
		t.Errorf("the catalogue shows statuses %v", statuses)
	}

	putOrderType(t, in, 200, `{"description":"back","status":"active"}`)
	in.ingest("order.created", `{"n":1}`)
	if got := deprecatedCount(t, in.base, "order.created"); got != 2 {
		t.Errorf("after archived and active again, the count is %v, want 2", got)
	}
	rc.checkSignatures()
}

// deprecatedCount returns webhookd_deprecated_events_total for typ in
// base's /metrics (0 when absent).
func deprecatedCount(t *testing.T, base, typ string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	l := metricLine(string(text), "webhookd_deprecated_events_total{", `type="`+typ+`"`)
	if l == "" {
		return 0
	}
	v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
	if err != nil {
		t.Fatalf("metric line %q: %v", l, err)
	}
	return v
}
