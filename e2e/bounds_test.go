package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi/contracttest"
)

// A bound is one limit openapi.json sets on what a request may carry:
// a keyword of JSON Schema with a number (maxLength, maximum, maxItems
// …) on a field of a request body or on a parameter.
type bound struct {
	op      string      // "METHOD /template"
	in      string      // "body", or the parameter's place: "query", "header", "path"
	param   string      // the parameter's name; "" in a body
	field   []fieldStep // where in the body (or the parameter's value): see fieldStep
	keyword string      // the JSON Schema keyword
	limit   float64     // its number
	integer bool        // a number bound on an integer
}

// A fieldStep is one level of a value: a property's name, "[]" for an
// array's items, "{}" for the values of an object whose names are the
// client's (additionalProperties), "{name}" for those names
// (propertyNames).
type fieldStep = string

func (b bound) String() string { return b.key() + " " + strconv.FormatFloat(b.limit, 'f', -1, 64) }

// key is b without its limit: "PUT /v1/tenants/{tenant}: body name
// maxLength".
func (b bound) key() string {
	where := b.in + " " + b.param
	if b.in == "body" {
		where = "body " + strings.Join(b.field, ".")
	} else if len(b.field) > 0 {
		where += "." + strings.Join(b.field, ".")
	}
	return fmt.Sprintf("%s: %s %s", b.op, where, b.keyword)
}

// serverBounds are the bounds the server enforces on a request (the
// engine's constants and the handlers' checks), by bound.key: each must
// be in openapi.json, or the document takes a request the server
// refuses. A bound the server enforces that JSON Schema cannot say (the
// custom headers' total size, a time's distance from now, data's depth)
// is in the field's description instead, and not here.
func serverBounds() map[string]float64 {
	m := map[string]float64{}
	add := func(op, where string, kwLimit ...any) {
		for i := 0; i+1 < len(kwLimit); i += 2 {
			var n float64
			switch x := kwLimit[i+1].(type) {
			case int:
				n = float64(x)
			case float64:
				n = x
			case time.Duration:
				n = x.Seconds()
			}
			m[op+": "+where+" "+kwLimit[i].(string)] = n
		}
	}
	add("PUT /v1/tenants/{tenant}", "path tenant", "maxLength", engine.MaxTenantIDLen)
	add("PUT /v1/tenants/{tenant}", "body name", "maxLength", engine.MaxTenantNameLen)
	add("PUT /v1/tenants/{tenant}", "body retry_policy", "maxLength", engine.MaxRetryPolicyName)
	add("PUT /v1/event-types/{type}", "path type", "maxLength", engine.MaxEventTypeLen)
	add("PUT /v1/event-types/{type}", "body description", "maxLength", engine.MaxDescriptionLen)
	for op, headers := range map[string]int{
		"POST /v1/tenants/{tenant}/endpoints":       engine.MaxEndpointHeaders,
		"PATCH /v1/tenants/{tenant}/endpoints/{id}": 2 * engine.MaxEndpointHeaders, // remove as many as set
	} {
		add(op, "body url", "maxLength", engine.MaxURLLen)
		add(op, "body description", "maxLength", engine.MaxDescriptionLen)
		add(op, "body event_types", "maxItems", engine.MaxEventTypesEach, "minItems", 1)
		add(op, "body event_types.[]", "maxLength", engine.MaxEventTypeLen)
		add(op, "body channels", "maxItems", engine.MaxChannels)
		add(op, "body channels.[]", "maxLength", engine.MaxChannelLen, "minLength", 1)
		add(op, "body retry_policy", "maxLength", engine.MaxRetryPolicyName)
		add(op, "body headers", "maxProperties", headers)
		add(op, "body headers.{}", "maxLength", engine.MaxHeaderValueLen, "minLength", 1)
		add(op, "body headers.{name}", "maxLength", engine.MaxHeaderNameLen, "minLength", 1)
		add(op, "body rate_limit.per_second", "minimum", engine.MinRateLimitPerSecond, "maximum", engine.MaxRateLimitPerSecond)
		add(op, "body rate_limit.burst", "minimum", 1, "maximum", engine.MaxRateLimitBurst)
	}
	for _, op := range []string{"POST /v1/tenants/{tenant}/endpoints/{id}/secret/rotate", "POST /v1/operational-endpoints/{id}/secret/rotate"} {
		add(op, "body grace_seconds", "minimum", 0, "maximum", engine.MaxRotationGrace)
	}
	add("POST /v1/tenants/{tenant}/endpoints/{id}/test-events", "body type", "maxLength", engine.MaxEventTypeLen)
	ingest := "POST /v1/tenants/{tenant}/events"
	add(ingest, "body type", "maxLength", engine.MaxEventTypeLen)
	add(ingest, "body api_version", "maxLength", engine.MaxAPIVersionLen)
	add(ingest, "body ordering_key", "maxLength", engine.MaxOrderingKey)
	add(ingest, "body channels", "maxItems", engine.MaxChannels)
	add(ingest, "body channels.[]", "maxLength", engine.MaxChannelLen, "minLength", 1)
	add(ingest, "header Idempotency-Key", "maxLength", engine.MaxIdempotencyKey)
	add("POST /v1/tenants/{tenant}/access-tokens", "body ttl_seconds", "minimum", 1, "maximum", engine.MaxAccessTokenTTL)
	add("POST /v1/tenants/{tenant}/portal-links", "body ttl_seconds", "minimum", 1, "maximum", engine.MaxPortalLinkTTL)
	add("POST /v1/tenants/{tenant}/portal-links", "body return_url", "maxLength", engine.MaxReturnURL)
	for _, op := range []string{"POST /v1/operational-endpoints", "PATCH /v1/operational-endpoints/{id}"} {
		add(op, "body url", "maxLength", engine.MaxURLLen)
		add(op, "body description", "maxLength", engine.MaxDescriptionLen)
		add(op, "body event_types", "maxItems", len(engine.OperationalEventTypes), "minItems", 1)
	}
	for _, list := range []string{"/v1/tenants", "/v1/event-types", "/v1/retry-policies", "/v1/operational-endpoints",
		"/v1/tenants/{tenant}/endpoints", "/v1/tenants/{tenant}/events", "/v1/tenants/{tenant}/deliveries",
		"/v1/tenants/{tenant}/dead-letters", "/v1/tenants/{tenant}/access-tokens", "/v1/tenants/{tenant}/tasks", "/v1/tasks"} {
		add("GET "+list, "query limit", "minimum", 1, "maximum", engine.MaxPageLimit)
	}
	for _, op := range []string{"GET /v1/tenants/{tenant}/report", "GET /v1/admin/report"} {
		add(op, "query last", "minimum", 1, "maximum", engine.MaxRecentEvents)
	}
	for _, op := range []string{"GET /v1/tenants/{tenant}/events", "GET /v1/tenants/{tenant}/deliveries"} {
		add(op, "query channel", "maxLength", engine.MaxChannelLen)
		add(op, "query type", "maxLength", engine.MaxEventTypeLen)
	}
	return m
}

// boundKeywords are the keywords that bound a value by a number.
var boundKeywords = []string{"maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties",
	"maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum"}

// openAPIDoc is httpapi/openapi.json, decoded.
type openAPIDoc map[string]any

func loadOpenAPIDoc(t *testing.T) ([]byte, openAPIDoc) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "httpapi", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d openAPIDoc
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return raw, d
}

// resolve follows v's $ref (#/components/…) until there is none.
func (d openAPIDoc) resolve(v map[string]any) map[string]any {
	for v != nil {
		ref, ok := v["$ref"].(string)
		if !ok {
			return v
		}
		var cur any = map[string]any(d)
		for _, seg := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			m, _ := cur.(map[string]any)
			cur = m[strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")]
		}
		v, _ = cur.(map[string]any)
	}
	return nil
}

// bounds returns every bound of every request the document describes:
// of each operation's request body (walked through properties, items,
// additionalProperties, propertyNames and anyOf/oneOf/allOf) and of its
// parameters.
func (d openAPIDoc) bounds() []bound {
	var out []bound
	paths, _ := d["paths"].(map[string]any)
	for _, p := range slices.Sorted(mapKeys(paths)) {
		item, _ := paths[p].(map[string]any)
		shared, _ := item["parameters"].([]any)
		for _, method := range []string{"get", "put", "post", "patch", "delete"} {
			o, ok := item[method].(map[string]any)
			if !ok {
				continue
			}
			op := strings.ToUpper(method) + " " + p
			own, _ := o["parameters"].([]any)
			for _, pv := range append(slices.Clone(shared), own...) {
				prm := d.resolve(asMap(pv))
				name, _ := prm["name"].(string)
				in, _ := prm["in"].(string)
				d.schemaBounds(d.resolve(asMap(prm["schema"])), nil, 0, func(field []fieldStep, kw string, limit float64, integer bool) {
					out = append(out, bound{op: op, in: in, param: name, field: field, keyword: kw, limit: limit, integer: integer})
				})
			}
			body := d.resolve(asMap(o["requestBody"]))
			content, _ := body["content"].(map[string]any)
			media, _ := content["application/json"].(map[string]any)
			d.schemaBounds(d.resolve(asMap(media["schema"])), nil, 0, func(field []fieldStep, kw string, limit float64, integer bool) {
				out = append(out, bound{op: op, in: "body", field: field, keyword: kw, limit: limit, integer: integer})
			})
		}
	}
	return out
}

func (d openAPIDoc) schemaBounds(s map[string]any, field []fieldStep, depth int, emit func([]fieldStep, string, float64, bool)) {
	if s == nil || depth > 8 {
		return
	}
	integer := s["type"] == "integer"
	for _, kw := range boundKeywords {
		if n, ok := s[kw].(float64); ok {
			if (kw == "minLength" || kw == "minItems" || kw == "minProperties") && n == 0 {
				continue // no edge: nothing is shorter than empty
			}
			emit(slices.Clone(field), kw, n, integer)
		}
	}
	props, _ := s["properties"].(map[string]any)
	for _, name := range slices.Sorted(mapKeys(props)) {
		d.schemaBounds(d.resolve(asMap(props[name])), append(slices.Clone(field), name), depth+1, emit)
	}
	if items := d.resolve(asMap(s["items"])); items != nil {
		d.schemaBounds(items, append(slices.Clone(field), "[]"), depth+1, emit)
	}
	if values := d.resolve(asMap(s["additionalProperties"])); values != nil {
		d.schemaBounds(values, append(slices.Clone(field), "{}"), depth+1, emit)
	}
	if names := d.resolve(asMap(s["propertyNames"])); names != nil {
		d.schemaBounds(names, append(slices.Clone(field), "{name}"), depth+1, emit)
	}
	for _, kw := range []string{"anyOf", "oneOf", "allOf"} {
		alts, _ := s[kw].([]any)
		for _, a := range alts {
			d.schemaBounds(d.resolve(asMap(a)), field, depth+1, emit)
		}
	}
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// boundsFixture is what the edges are sent against: a tenant with a
// catalogue of more types than an endpoint may subscribe to, one of
// them as long as an event type may be, and a retry policy whose name
// is as long as one may be.
type boundsFixture struct {
	in       *instance
	types    []string // catalogue types, MaxEventTypesEach+1 of them
	longType string   // a catalogue type of the longest name
	policy   string   // a configured retry policy of the longest name
	opTypes  []string // the operational event types, from the document
	opID     string   // an operational endpoint
	n        int      // to make names unique
}

// Lengths the fixture is made for; the test fails when the document
// says otherwise, so that the fixture follows it.
const (
	boundsTypeLen   = 128 // an event type's name
	boundsPolicyLen = 32  // a retry policy's name
	boundsTypes     = 256 // the event types one endpoint may subscribe to
)

// TestBounds_TheDocumentsVerdict sends every bound openapi.json sets on
// a request (each bounded field of every request body, each bounded
// parameter) to the real webhookd, at the bound and one past it, and
// expects the document's verdict: 2xx at the bound, 422 past it. A
// string at its bound is made of characters that UTF-8 writes in more
// than one byte wherever the field takes them, so a server that counts
// bytes where the document counts characters fails here. Each request
// is also checked against the document first, so a value the test
// makes is what the document calls at and past the bound.
func TestBounds_TheDocumentsVerdict(t *testing.T) {
	t.Parallel()
	raw, doc := loadOpenAPIDoc(t)
	_, v, err := contracttest.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	bounds := doc.bounds()
	documented := map[string]float64{}
	for _, b := range bounds {
		documented[b.key()] = b.limit
	}
	server := serverBounds()
	for _, k := range slices.Sorted(mapKeys(server)) {
		switch n, ok := documented[k]; {
		case !ok:
			t.Errorf("%s: the server bounds it at %v, the document does not", k, server[k])
		case n != server[k]:
			t.Errorf("%s: the server bounds it at %v, the document at %v", k, server[k], n)
		}
	}

	policy := "p" + strings.Repeat("a", boundsPolicyLen-1)
	config := testConfig + fmt.Sprintf("\n[retry.policies.%s]\nschedule = [\"20ms\"]\ndeadline = \"30s\"\n", policy)
	fx := &boundsFixture{in: startInstance(t, t.TempDir(), config), policy: policy}
	fx.in.setup()
	fx.longType = "bound." + strings.Repeat("a", boundsTypeLen-len("bound."))
	fx.in.mustCall(201, "PUT", "/v1/event-types/"+fx.longType, map[string]string{}, nil)
	for i := range boundsTypes + 1 {
		name := fmt.Sprintf("bound.t%03d", i)
		fx.in.mustCall(201, "PUT", "/v1/event-types/"+name, map[string]string{}, nil)
		fx.types = append(fx.types, name)
	}
	opType := doc.resolve(map[string]any{"$ref": "#/components/schemas/OperationalEventType"})
	for _, e := range opType["enum"].([]any) {
		fx.opTypes = append(fx.opTypes, e.(string))
	}
	var op struct{ ID string }
	fx.in.mustCall(201, "POST", "/v1/operational-endpoints", map[string]any{"url": "http://127.0.0.1:9/ops", "event_types": []string{"*"}}, &op)
	fx.opID = op.ID

	for _, b := range bounds {
		if b.in == "path" && !strings.HasPrefix(b.op, "PUT ") {
			// Only a PUT makes what its path names: elsewhere an id that
			// cannot exist is not found (404), as one that does not.
			continue
		}
		t.Run(b.String(), func(t *testing.T) {
			for _, past := range []bool{false, true} {
				r, ok := fx.request(t, b, past)
				if !ok {
					return
				}
				what := "at the bound"
				if past {
					what = "one past the bound"
				}
				docOK, verrs := v.ValidateHttpRequestSync(r.clone())
				switch {
				case past && docOK:
					t.Errorf("%s: the document takes the request; the test made no value past the bound", what)
				case !past && !docOK:
					for _, e := range verrs {
						t.Errorf("%s: the document refuses the request (the test's value is wrong): %v", what, e)
					}
				}
				status, body := r.send(t)
				switch {
				case !past && status/100 != 2:
					t.Errorf("%s: %s %s = %d %s, want 2xx: the document takes it", what, r.method, r.url, status, body)
				case past && status != http.StatusUnprocessableEntity:
					t.Errorf("%s: %s %s = %d %s, want 422: the document refuses it", what, r.method, r.url, status, body)
				}
			}
		})
	}
}

// edgeRequest is one request of the test, kept whole so that it can be
// validated and then sent.
type edgeRequest struct {
	method, url string
	body        []byte // nil: none
	header      http.Header
}

func (r edgeRequest) clone() *http.Request {
	var body io.Reader = http.NoBody
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, r.url, body)
	if err != nil {
		panic(err)
	}
	req.Header = r.header.Clone()
	return req
}

func (r edgeRequest) send(t *testing.T) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(r.clone())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if len(b) > 300 {
		b = append(b[:300], "…"...)
	}
	return resp.StatusCode, string(b)
}

// request returns the request that carries b at its limit (past false)
// or one past it, on a base that the server takes: a hand-kept body and
// path for each operation (base), with the bounded value set in it.
// It fails t and reports false for an operation or a field it has no
// way to make a value for.
func (fx *boundsFixture) request(t *testing.T, b bound, past bool) (edgeRequest, bool) {
	t.Helper()
	method, tmpl, _ := strings.Cut(b.op, " ")
	base, ok := fx.base(t, method, tmpl)
	if !ok {
		t.Errorf("no base request for %s: add it to boundsFixture.base", b.op)
		return edgeRequest{}, false
	}
	val, ok := fx.value(t, b, past)
	if !ok {
		return edgeRequest{}, false
	}
	header := http.Header{}
	header.Set("Authorization", "Bearer "+testToken)
	path, query := base.path, url.Values{}
	switch b.in {
	case "body":
		setField(base.body, b.field, val, fx.nested)
	case "query":
		query.Set(b.param, paramText(val))
	case "header":
		header.Set(b.param, paramText(val))
	case "path":
		path = strings.Replace(tmpl, "{"+b.param+"}", url.PathEscape(paramText(val)), 1)
		path = fx.fillPath(t, path)
	}
	r := edgeRequest{method: method, url: fx.in.base + path, header: header}
	if len(query) > 0 {
		r.url += "?" + query.Encode()
	}
	if base.body != nil {
		j, err := json.Marshal(base.body)
		if err != nil {
			t.Fatal(err)
		}
		r.body = j
		header.Set("Content-Type", "application/json")
	}
	return r, true
}

// paramText is a parameter's value as the query or a header carries it.
func paramText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	j, _ := json.Marshal(v)
	return string(j)
}

// edgeBase is an operation's request without the bounded value: its
// path (parameters filled in) and body (nil: none).
type edgeBase struct {
	path string
	body map[string]any
}

// base returns the request of method and tmpl (a path template of the
// document) that the server takes: a fresh endpoint for each request on
// one, so that no edge changes what the next one is sent to.
func (fx *boundsFixture) base(t *testing.T, method, tmpl string) (edgeBase, bool) {
	t.Helper()
	path := fx.fillPath(t, tmpl)
	var body map[string]any
	switch method + " " + tmpl {
	case "PUT /v1/tenants/{tenant}":
		fx.n++
		path = fmt.Sprintf("/v1/tenants/bound-%d", fx.n)
		body = map[string]any{}
	case "PUT /v1/event-types/{type}":
		body = map[string]any{}
	case "POST /v1/tenants/{tenant}/endpoints":
		body = map[string]any{"url": "http://127.0.0.1:9/hook", "event_types": []any{"*"}}
	case "PATCH /v1/tenants/{tenant}/endpoints/{id}",
		"POST /v1/tenants/{tenant}/endpoints/{id}/secret/rotate",
		"POST /v1/tenants/{tenant}/endpoints/{id}/test-events",
		"POST /v1/tenants/{tenant}/access-tokens",
		"POST /v1/tenants/{tenant}/portal-links",
		"PATCH /v1/operational-endpoints/{id}",
		"POST /v1/operational-endpoints/{id}/secret/rotate":
		body = map[string]any{}
	case "POST /v1/tenants/{tenant}/events":
		body = map[string]any{"type": "invoice.paid", "data": map[string]any{}}
	case "POST /v1/operational-endpoints":
		body = map[string]any{"url": "http://127.0.0.1:9/ops", "event_types": []any{"*"}}
	default:
		if method != "GET" {
			return edgeBase{}, false
		}
	}
	return edgeBase{path: path, body: body}, true
}

// fillPath fills tmpl's parameters: the tenant acme, a catalogue type,
// a new endpoint of acme (subscribed to every type), the operational
// endpoint.
func (fx *boundsFixture) fillPath(t *testing.T, tmpl string) string {
	t.Helper()
	path := strings.ReplaceAll(tmpl, "{tenant}", "acme")
	path = strings.ReplaceAll(path, "{type}", fx.types[0])
	if strings.Contains(path, "{id}") {
		id := fx.opID
		if strings.HasPrefix(path, "/v1/tenants/") {
			id = fx.in.createEndpoint("http://127.0.0.1:9/hook", "*").ID
		}
		path = strings.ReplaceAll(path, "{id}", id)
	}
	return path
}

// nested is the object a body's field starts from when a bound is on a
// member of it that the base leaves out.
func (fx *boundsFixture) nested(field string) map[string]any {
	if field == "rate_limit" {
		return map[string]any{"per_second": 1}
	}
	return map[string]any{}
}

// setField sets the value at field in body: a property's value, an
// array of one item ("[]"), an object of one member ("{}": its value;
// "{name}": its name, the value "v").
func setField(body map[string]any, field []fieldStep, val any, nested func(string) map[string]any) {
	name := field[0]
	if len(field) == 1 {
		body[name] = val
		return
	}
	switch field[1] {
	case "[]":
		body[name] = []any{val}
	case "{}":
		body[name] = map[string]any{"X-Bound": val}
	case "{name}":
		body[name] = map[string]any{val.(string): "v"}
	default:
		sub, ok := body[name].(map[string]any)
		if !ok {
			sub = nested(name)
		}
		setField(sub, field[1:], val, nested)
		body[name] = sub
	}
}

// value returns the value at b's limit, or one past it.
func (fx *boundsFixture) value(t *testing.T, b bound, past bool) (any, bool) {
	t.Helper()
	n := b.limit
	switch b.keyword {
	case "maxLength", "maxItems", "maxProperties":
		if past {
			n++
		}
	case "minLength", "minItems", "minProperties":
		if past {
			n--
		}
	case "maximum":
		if past {
			n = fx.next(b, n, +1)
		}
	case "minimum":
		if past {
			n = fx.next(b, n, -1)
		}
	case "exclusiveMaximum":
		n = fx.next(b, n, -1)
		if past {
			n = b.limit
		}
	case "exclusiveMinimum":
		n = fx.next(b, n, +1)
		if past {
			n = b.limit
		}
	}
	key := b.param
	if b.in == "body" {
		key = ""
		for _, s := range b.field {
			if strings.HasPrefix(s, "[") || strings.HasPrefix(s, "{") {
				key += s
			} else {
				key = s
			}
		}
	}
	switch b.keyword {
	case "maxLength", "minLength":
		return fx.text(t, b, key, int(n))
	case "maxItems", "minItems":
		return fx.items(t, b, key, int(n))
	case "maxProperties", "minProperties":
		return fx.members(t, b, key, int(n))
	}
	return n, true
}

// next is the number next to n in direction dir: n±1 for an integer,
// the nearest float64 for a number.
func (fx *boundsFixture) next(b bound, n float64, dir int) float64 {
	if b.integer {
		return n + float64(dir)
	}
	return math.Nextafter(n, float64(dir)*math.Inf(1))
}

// text returns a string of n characters that the field named key takes
// (at its bound): non-ASCII characters of two bytes in UTF-8 wherever
// the field takes them.
func (fx *boundsFixture) text(t *testing.T, b bound, key string, n int) (any, bool) {
	t.Helper()
	pad := func(prefix, with string) string {
		if n < len(prefix) {
			return strings.Repeat("a", n)
		}
		return prefix + strings.Repeat(with, n-len(prefix))
	}
	switch key {
	case "url", "return_url":
		return pad("http://127.0.0.1:9/", "é"), true
	case "type", "event_types[]":
		if n == boundsTypeLen {
			return fx.longType, true // in the catalogue
		}
		if n > boundsTypeLen {
			return fx.longType + strings.Repeat("a", n-boundsTypeLen), true
		}
		return fx.types[0], true
	case "retry_policy":
		if n != boundsPolicyLen && n != boundsPolicyLen+1 {
			t.Errorf("a retry policy's name is bounded at %d; the fixture is made for %d", n, boundsPolicyLen)
			return nil, false
		}
		return fx.policy + strings.Repeat("a", n-boundsPolicyLen), true
	case "tenant":
		return pad("t", "a"), true
	case "channel", "channels[]":
		return strings.Repeat("c", n), true
	case "headers{}":
		return strings.Repeat("v", n), true
	case "headers{name}":
		return pad("X-", "n"), true
	}
	return strings.Repeat("é", n), true
}

// items returns an array of n items that the field named key takes.
func (fx *boundsFixture) items(t *testing.T, b bound, key string, n int) (any, bool) {
	t.Helper()
	var from []string
	switch {
	case key == "event_types" && strings.Contains(b.op, "/v1/operational-endpoints"):
		from = fx.opTypes
	case key == "event_types":
		from = fx.types
	case key == "channels":
		for i := range n {
			from = append(from, fmt.Sprintf("c%d", i))
		}
	default:
		t.Errorf("no items for %q: add them to boundsFixture.items", key)
		return nil, false
	}
	out := make([]any, n)
	for i := range out {
		// Past the bound there may be no more distinct values than the
		// bound: the extra one repeats, refused for its number anyway.
		out[i] = from[i%len(from)]
	}
	return out, true
}

// members returns an object of n members that the field named key
// takes: custom headers, set and (past the bound of one endpoint's)
// removed with null.
func (fx *boundsFixture) members(t *testing.T, b bound, key string, n int) (any, bool) {
	t.Helper()
	if key != "headers" {
		t.Errorf("no members for %q: add them to boundsFixture.members", key)
		return nil, false
	}
	const set = 20 // the headers an endpoint may have
	out := map[string]any{}
	for i := range n {
		var v any = "v"
		if i >= set && b.op != "POST /v1/tenants/{tenant}/endpoints" {
			v = nil
		}
		out[fmt.Sprintf("X-H%02d", i)] = v
	}
	return out, true
}
