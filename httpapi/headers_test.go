package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// The custom header values the tests below set: long enough that a
// masked one shows its first characters, and distinct enough that a
// found one is no accident.
const (
	hdrToken  = "Bearer hdr-tok-5f0c2a9e7d1b4c3a8e6f0b2d9c7a1e4f"
	hdrTenant = "tenant-7c1e9a2f"
)

// TestEndpointHeaders_BadInput: the validation table of custom headers
// on create and PATCH: reserved names, names that are not HTTP tokens,
// the bounds, line breaks and other control characters in values. Each
// is a 422 problem naming the header (or "headers" for a name that is
// not one), whose detail never shows the value, and stores nothing.
func TestEndpointHeaders_BadInput(t *testing.T) {
	e := newAPIEnv(t)
	ep := e.fixture()
	epPath := "/v1/tenants/acme/endpoints/" + ep.ID
	// A value of 2 KiB already: one more makes the total too big (a
	// body over 4 KiB would be refused before its headers are read).
	e.must(req{method: "PATCH", path: epPath, body: `{"headers":{"X-Tenant":"` + hdrTenant + `","X-Big-One":"` + strings.Repeat("v", engine.MaxHeaderValueLen) + `"}}`}, 200, nil)
	create := func(headers string) req {
		return req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://x.example/h","event_types":["*"],"headers":` + headers + `}`}
	}
	patch := func(headers string) req {
		return req{method: "PATCH", path: epPath, body: `{"description":"changed","headers":` + headers + `}`}
	}
	many := func(n int, value string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"X-H` + strings.Repeat("a", i+1) + `":"` + value + `"`)
		}
		return b.String() + "}"
	}
	long := strings.Repeat("w", engine.MaxHeaderValueLen)
	tests := []struct {
		name  string
		rq    req
		field string
		says  string
	}{
		{"webhook-id", create(`{"webhook-id":"x"}`), "headers.Webhook-Id", "reserved"},
		{"webhook-signature upper case", create(`{"WEBHOOK-SIGNATURE":"v1,x"}`), "headers.Webhook-Signature", "webhook-*"},
		{"webhook-timestamp on PATCH", patch(`{"webhook-timestamp":"1"}`), "headers.Webhook-Timestamp", "webhook-*"},
		{"X-Webhook-Signature", create(`{"x-webhook-signature":"t=1,v1=x"}`), "headers.X-Webhook-Signature", ""},
		{"Content-Type", create(`{"Content-Type":"text/plain"}`), "headers.Content-Type", ""},
		{"Content-Length", patch(`{"content-length":"5"}`), "headers.Content-Length", ""},
		{"Host", create(`{"Host":"internal.example"}`), "headers.Host", ""},
		{"User-Agent", create(`{"User-Agent":"x"}`), "headers.User-Agent", ""},
		{"Transfer-Encoding", create(`{"Transfer-Encoding":"chunked"}`), "headers.Transfer-Encoding", "hop-by-hop"},
		{"Connection", patch(`{"Connection":"close"}`), "headers.Connection", "hop-by-hop"},
		{"Keep-Alive", create(`{"Keep-Alive":"timeout=5"}`), "headers.Keep-Alive", ""},
		{"Proxy-Authorization", create(`{"Proxy-Authorization":"Basic x"}`), "headers.Proxy-Authorization", "proxies"},
		{"TE", create(`{"TE":"trailers"}`), "headers.Te", ""},
		{"Trailer", create(`{"Trailer":"X"}`), "headers.Trailer", ""},
		{"Upgrade", create(`{"Upgrade":"websocket"}`), "headers.Upgrade", ""},
		{"removing a reserved one", patch(`{"Host":null}`), "headers.Host", ""},
		{"name with a space", create(`{"X Tenant":"a"}`), "headers", "not an HTTP token"},
		{"name with a colon", create(`{"X-Tenant:":"a"}`), "headers", "not an HTTP token"},
		{"name with CRLF", create(`{"X-A\r\nX-Admin":"yes"}`), "headers", "not an HTTP token"},
		{"pseudo-header", create(`{":path":"/admin"}`), "headers", "not an HTTP token"},
		{"empty name", patch(`{"":"a"}`), "headers", "empty"},
		{"name too long", create(`{"X-` + strings.Repeat("n", engine.MaxHeaderNameLen) + `":"a"}`), "headers", "longer than 64"},
		{"CRLF injection in a value", create(`{"X-Tenant":"acme\r\nX-Admin: yes"}`), "headers.X-Tenant", "line break"},
		{"LF in a value on PATCH", patch(`{"Authorization":"Bearer a\nb"}`), "headers.Authorization", "line break"},
		{"NUL in a value", create(`{"X-Tenant":"acme\u0000"}`), "headers.X-Tenant", "control character"},
		{"ESC in a value", create(`{"X-Tenant":"\u001b[31macme"}`), "headers.X-Tenant", "control character"},
		{"non-ASCII value", create(`{"X-Tenant":"Müller"}`), "headers.X-Tenant", "not ASCII"},
		{"empty value", create(`{"X-Tenant":""}`), "headers.X-Tenant", "no value"},
		{"null value on create", create(`{"X-Tenant":null}`), "headers.X-Tenant", "no value"},
		{"value with an edge space", create(`{"X-Tenant":"acme "}`), "headers.X-Tenant", "space"},
		{"value too long", create(`{"Authorization":"` + long + `x"}`), "headers.Authorization", "longer than 2048"},
		{"one name in two cases", create(`{"X-Tenant":"a","x-tenant":"b"}`), "headers.X-Tenant", "twice"},
		{"too many on create", create(many(engine.MaxEndpointHeaders+1, "v")), "headers", "at most 20"},
		{"too many after a PATCH", patch(many(engine.MaxEndpointHeaders, "v")), "headers", "at most 20"},
		{"too big in all after a PATCH", patch(`{"X-Big-Two":"` + long + `"}`), "headers", "at most 4096 bytes"},
		{"a value that is not a string", create(`{"X-Tenant":7}`), "headers", "must be a string"},
		{"headers not an object", create(`["X-Tenant"]`), "headers", ""},
	}
	before := e.snapshot()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.rq)
			p := checkProblem(t, r, 422, engine.CodeInvalidField, tt.field)
			if !strings.Contains(p.Detail, tt.says) {
				t.Errorf("detail %q does not say %q", p.Detail, tt.says)
			}
			for _, v := range []string{"acme\r\n", "X-Admin: yes", "Müller", "Bearer a", long[:64], "internal.example"} {
				if strings.Contains(p.Detail, v) {
					t.Errorf("detail %q shows the value", p.Detail)
				}
			}
		})
	}
	if after := e.snapshot(); after != before {
		t.Errorf("bad input changed state:\nbefore %s\nafter  %s", before, after)
	}
	if strings.Contains(e.logs.String(), hdrTenant) {
		t.Errorf("a header value was logged:\n%s", e.logs)
	}
}

// endpointHeadersJSON is an endpoint answer's custom headers.
type endpointHeadersJSON struct {
	ID      string            `json:"id"`
	Headers map[string]string `json:"headers"`
	Secret  string            `json:"secret"`
}

// TestEndpointHeaders_Masked: every answer that shows an endpoint (create,
// get, list, PATCH, rotate, revoke) shows its custom headers with their
// values masked; a PATCH merges them (a string sets, null removes, the
// rest stay; {} removes them all), and the reveal shows them in plain.
func TestEndpointHeaders_Masked(t *testing.T) {
	e, dbPath := newDeliveringEnv(t)
	e.must(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme"}`}, 201, nil)
	var ep endpointHeadersJSON
	r := e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/in","event_types":["*"],"headers":{"authorization":"` + hdrToken + `","X-Tenant":"` + hdrTenant + `"}}`}, 201, &ep)
	masked := map[string]string{"Authorization": "Bearer ••••", "X-Tenant": "••••"}
	noValue := func(what string, r response) {
		t.Helper()
		if bytes.Contains(r.body, []byte(hdrToken[7:])) || bytes.Contains(r.body, []byte(hdrTenant)) {
			t.Errorf("%s shows a header value: %s", what, r.body)
		}
	}
	if !reflect.DeepEqual(ep.Headers, masked) {
		t.Errorf("create answered headers %v, want %v", ep.Headers, masked)
	}
	noValue("create", r)
	epPath := "/v1/tenants/acme/endpoints/" + ep.ID
	for _, rq := range []req{
		{method: "GET", path: epPath},
		{method: "GET", path: "/v1/tenants/acme/endpoints"},
		{method: "PATCH", path: epPath, body: `{"description":"main"}`},
		{method: "POST", path: epPath + "/secret/rotate", body: `{"grace":"1h"}`},
		{method: "POST", path: epPath + "/secret/revoke"},
	} {
		r := e.must(rq, 200, nil)
		noValue(rq.method+" "+rq.path, r)
		if !bytes.Contains(r.body, []byte(`"headers":{"Authorization":"Bearer ••••","X-Tenant":"••••"}`)) {
			t.Errorf("%s %s does not show the headers masked: %s", rq.method, rq.path, r.body)
		}
	}
	if raw, err := os.ReadFile(dbPath); err != nil || bytes.Contains(raw, []byte(hdrToken[7:])) || bytes.Contains(raw, []byte(hdrTenant)) {
		t.Errorf("the database file holds a header value in plain (%v): it must be sealed at rest", err)
	}

	reveal := func() map[string]string {
		t.Helper()
		var rev struct {
			Headers map[string]string `json:"headers"`
		}
		r := e.must(req{method: "POST", path: epPath + "/secret/reveal"}, 200, &rev)
		if r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("the reveal answered Cache-Control %q", r.header.Get("Cache-Control"))
		}
		if rev.Headers == nil {
			t.Fatalf("the reveal has no headers: %s", r.body)
		}
		return rev.Headers
	}
	if got, want := reveal(), map[string]string{"Authorization": hdrToken, "X-Tenant": hdrTenant}; !reflect.DeepEqual(got, want) {
		t.Errorf("reveal = %v, want %v", got, want)
	}

	// A PATCH merges.
	var patched endpointHeadersJSON
	e.must(req{method: "PATCH", path: epPath, body: `{"headers":{"x-tenant":null,"X-Region":"eu-west-1"}}`}, 200, &patched)
	if want := map[string]string{"Authorization": "Bearer ••••", "X-Region": "••••"}; !reflect.DeepEqual(patched.Headers, want) {
		t.Errorf("after a PATCH that removes one and adds one: %v, want %v", patched.Headers, want)
	}
	if got, want := reveal(), map[string]string{"Authorization": hdrToken, "X-Region": "eu-west-1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("reveal after the PATCH = %v, want %v", got, want)
	}
	e.must(req{method: "PATCH", path: epPath, body: `{"headers":null}`}, 200, &patched)
	if len(patched.Headers) != 2 {
		t.Errorf("headers null changed them: %v", patched.Headers)
	}
	patched = endpointHeadersJSON{}
	r = e.must(req{method: "PATCH", path: epPath, body: `{"headers":{}}`}, 200, &patched)
	if patched.Headers != nil || bytes.Contains(r.body, []byte(`"headers"`)) {
		t.Errorf("headers {} left %s", r.body)
	}
	if got := reveal(); len(got) != 0 {
		t.Errorf("reveal after {} = %v, want {}", got)
	}

	t.Run("not logged", func(t *testing.T) {
		for _, v := range []string{hdrToken[7:], hdrTenant, "eu-west-1"} {
			if strings.Contains(e.logs.String(), v) {
				t.Errorf("the log holds a header value %q:\n%s", v, e.logs)
			}
		}
	})
}

// TestEndpointHeaders_Delivered: the headers set through the API reach
// the receiver with each attempt, and the debug log of the delivery
// holds none of their values.
func TestEndpointHeaders_Delivered(t *testing.T) {
	e, _ := newDeliveringEnv(t)
	rc := &received{}
	receiver := httptest.NewServer(rc)
	t.Cleanup(receiver.Close)
	e.must(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme"}`}, 201, nil)
	e.must(req{method: "PUT", path: "/v1/event-types/payment.succeeded"}, 201, nil)
	body, _ := json.Marshal(map[string]any{"url": receiver.URL + "/in", "event_types": []string{"*"},
		"headers": map[string]string{"Authorization": hdrToken, "X-Tenant": hdrTenant}})
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: string(body)}, 201, nil)
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, nil)
	got := rc.wait(t, 1)[0]
	if got.header.Get("Authorization") != hdrToken || got.header.Get("X-Tenant") != hdrTenant {
		t.Errorf("the receiver got Authorization %q, X-Tenant %q", got.header.Get("Authorization"), got.header.Get("X-Tenant"))
	}
	for _, v := range []string{hdrToken[7:], hdrTenant} {
		if strings.Contains(e.logs.String(), v) {
			t.Errorf("the debug log holds a header value:\n%s", e.logs)
		}
	}
}

// TestConsole_EndpointHeaders: the console's endpoint forms set custom
// headers (rows of name and value) and remove them (a ticked box beside
// each); the endpoint's page and the delivery page's request show them
// masked, never their values, and Reveal secret shows the values; a bad
// header is refused with the problem's words, without the value.
func TestConsole_EndpointHeaders(t *testing.T) {
	e := newConsoleEnv(t)
	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	list := b.get("/console/t/acme/endpoints")
	if !strings.Contains(list.body, `name="header_name"`) || !strings.Contains(list.body, `name="header_value"`) {
		t.Fatalf("the new endpoint form has no header rows:\n%s", list.body)
	}
	csrf := list.field(t, csrfField)
	post := func(path string, form url.Values) page {
		return b.do("POST", path, form, "Origin", e.srv.URL)
	}
	created := post("/console/t/acme/endpoints", url.Values{"csrf": {csrf}, "url": {"https://hooks.example.com/h"}, "type": {"*"},
		"header_name": {"authorization", "X-Tenant", ""}, "header_value": {hdrToken, hdrTenant, ""}})
	if created.status != http.StatusCreated {
		t.Fatalf("add endpoint with headers: %d\n%s", created.status, created.body)
	}
	var eps struct {
		Data []endpointHeadersJSON `json:"data"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints"}, 200, &eps)
	ep := eps.Data[len(eps.Data)-1]
	if want := map[string]string{"Authorization": "Bearer ••••", "X-Tenant": "••••"}; !reflect.DeepEqual(ep.Headers, want) {
		t.Fatalf("created with headers %v, want %v", ep.Headers, want)
	}
	noValue := func(what string, p page) {
		t.Helper()
		for _, v := range []string{hdrToken[7:], hdrTenant} {
			if strings.Contains(p.body, v) {
				t.Errorf("%s shows a header value", what)
			}
		}
	}
	noValue("the created page", created)

	editPath := "/console/t/acme/endpoints/" + ep.ID + "/edit"
	edit := b.get(editPath)
	noValue("the endpoint's page", edit)
	for _, want := range []string{`<code>Authorization</code>`, `Bearer ••••`, `name="header_remove" value="X-Tenant"`} {
		if !strings.Contains(edit.body, want) {
			t.Errorf("the endpoint's page lacks %s", want)
		}
	}

	// Reveal secret shows the values, on its answer only.
	revealed := post("/console/t/acme/endpoints/"+ep.ID+"/reveal", url.Values{"csrf": {csrf}})
	for _, want := range []string{"Authorization: " + hdrToken, "X-Tenant: " + hdrTenant} {
		if !strings.Contains(revealed.body, want) {
			t.Errorf("the reveal does not show %q", want)
		}
	}
	noValue("the endpoint's page after a reveal", b.get(editPath))

	// Save: remove one, add one, keep the other.
	saved := post("/console/t/acme/endpoints/"+ep.ID, url.Values{"csrf": {csrf}, "url": {"https://hooks.example.com/h"}, "type": {"*"},
		"ordering": {"none"}, "on_dead": {"skip"}, "header_remove": {"X-Tenant"}, "header_name": {"X-Region", ""}, "header_value": {"eu-west-1", ""}})
	if saved.status != http.StatusSeeOther {
		t.Fatalf("save: %d\n%s", saved.status, saved.body)
	}
	var rev struct {
		Headers map[string]string `json:"headers"`
	}
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints/" + ep.ID + "/secret/reveal"}, 200, &rev)
	if want := map[string]string{"Authorization": hdrToken, "X-Region": "eu-west-1"}; !reflect.DeepEqual(rev.Headers, want) {
		t.Errorf("after the save: %v, want %v", rev.Headers, want)
	}
	// A save with no header rows filled leaves them.
	post("/console/t/acme/endpoints/"+ep.ID, url.Values{"csrf": {csrf}, "url": {"https://hooks.example.com/h"}, "type": {"*"}, "ordering": {"none"}, "on_dead": {"skip"}, "header_name": {""}, "header_value": {""}})
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints/" + ep.ID + "/secret/reveal"}, 200, &rev)
	if len(rev.Headers) != 2 {
		t.Errorf("a save without header rows changed them: %v", rev.Headers)
	}

	for _, bad := range []struct{ name, value, says string }{
		{"Host", "evil.example", "Host is reserved"},
		{"X-Tenant", "acme\r\nX-Admin: yes", "line break"},
		{"", "orphan-value-123", "without its name"},
	} {
		p := post("/console/t/acme/endpoints/"+ep.ID, url.Values{"csrf": {csrf}, "url": {"https://hooks.example.com/h"}, "type": {"*"},
			"ordering": {"none"}, "on_dead": {"skip"}, "header_name": {bad.name}, "header_value": {bad.value}})
		if p.status != 422 || !strings.Contains(p.body, bad.says) {
			t.Errorf("header %q: %d, want 422 saying %q\n%s", bad.name, p.status, bad.says, p.body)
		}
		if strings.Contains(p.body, "X-Admin") || strings.Contains(p.body, "orphan-value") || strings.Contains(p.body, "evil.example") {
			t.Errorf("header %q: the error page shows the value", bad.name)
		}
	}

	// The delivery page's request shows the endpoint's headers, masked.
	e.must(req{method: "PATCH", path: "/v1/tenants/acme/endpoints/" + e.endpoint.ID, body: `{"headers":{"Authorization":"` + hdrToken + `"}}`}, 200, nil)
	dp := b.get("/console/t/acme/deliveries/" + e.delivery)
	noValue("the delivery page", dp)
	rq := regexp.MustCompile(`(?s)<pre class="request" id="request">(.*?)</pre>`).FindStringSubmatch(dp.body)
	if rq == nil || !strings.Contains(rq[1], "\nAuthorization: Bearer ••••") || !strings.Contains(rq[1], "webhook-id: ") {
		t.Errorf("the delivery's request section: %q", rq)
	}
}
