// The OpenAPI checks are sequential and their validator library is large:
// the race run (.ci/run) leaves them out rather than build it a second time
// with the race detector.

//go:build !race

package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/httpapi/contracttest"
	"github.com/webhookd/webhookd/jsonschema"
	"github.com/webhookd/webhookd/verify"
)

// openAPI is the document under test, parsed, and a strict validator of
// it (contracttest.Load).
type openAPI struct {
	raw   []byte
	model *v3.Document
	v     validator.Validator
}

func loadOpenAPI(t *testing.T) *openAPI {
	t.Helper()
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	m, v, err := contracttest.Load(raw)
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return &openAPI{raw: raw, model: m, v: v}
}

func TestOpenAPI_DocumentIsValid(t *testing.T) {
	o := loadOpenAPI(t)
	if !strings.HasPrefix(o.model.Version, "3.1.") {
		t.Errorf("openapi = %q, want 3.1.x", o.model.Version)
	}
	if ok, errs := o.v.ValidateDocument(); !ok {
		for _, e := range errs {
			t.Errorf("openapi.json: %v", e)
		}
	}
	if o.model.Webhooks == nil || o.model.Webhooks.Len() == 0 {
		t.Error("openapi.json describes no webhook")
	}
}

// routePat is one method and path, with {param} for httprouter's :param.
type routePat struct{ method, path string }

// registeredRoutes returns the routes server.go's routes() registers with
// s.handle, read from its source: a route added there is in this list
// without anyone keeping it in sync. The console's routes are registered
// elsewhere (consoleRoutes) and are not part of the API.
func registeredRoutes(t *testing.T) []routePat {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "server.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []routePat
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "routes" {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "handle" || len(call.Args) != 3 {
				return true
			}
			var lit [2]string
			for i := range lit {
				bl, ok := call.Args[i].(*ast.BasicLit)
				if !ok || bl.Kind != token.STRING {
					t.Fatalf("server.go: s.handle with a non-literal method or path: the test cannot read it")
				}
				lit[i], _ = strconv.Unquote(bl.Value)
			}
			segs := strings.Split(lit[1], "/")
			for i, s := range segs {
				if name, ok := strings.CutPrefix(s, ":"); ok {
					segs[i] = "{" + name + "}"
				}
			}
			out = append(out, routePat{lit[0], strings.Join(segs, "/")})
			return true
		})
	}
	if len(out) < 10 {
		t.Fatalf("read %d routes from server.go: the reader is broken", len(out))
	}
	return out
}

// documentedRoutes returns every operation of the document's paths.
func (o *openAPI) documentedRoutes() []routePat {
	var out []routePat
	for path, item := range o.model.Paths.PathItems.FromOldest() {
		for method := range item.GetOperations().FromOldest() {
			out = append(out, routePat{strings.ToUpper(method), path})
		}
	}
	return out
}

func TestOpenAPI_EveryRouteDocumented(t *testing.T) {
	o := loadOpenAPI(t)
	reg, doc := registeredRoutes(t), o.documentedRoutes()
	for _, r := range reg {
		if !slices.Contains(doc, r) {
			t.Errorf("%s %s is served (server.go) but not in openapi.json", r.method, r.path)
		}
	}
	for _, r := range doc {
		if !slices.Contains(reg, r) {
			t.Errorf("%s %s is in openapi.json but not served (server.go)", r.method, r.path)
		}
	}
}

// contractEnv is a real API with every optional part on (backup, metrics,
// a readiness check it can flip), the document, and what was checked.
type contractEnv struct {
	*apiEnv
	o        *openAPI
	notReady atomic.Bool
	driven   map[string]bool // "METHOD /path/{param} status" answered and validated
}

func newContractEnv(t *testing.T, sopts engine.ServiceOptions, opts httpapi.Options, o *openAPI) *contractEnv {
	c := &contractEnv{o: o, driven: map[string]bool{}}
	opts.Ready = func() error {
		if c.notReady.Load() {
			return engine.Errorf(engine.CodeUnavailable, "", "told so by the test")
		}
		return nil
	}
	opts.Metrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		io.WriteString(w, "# TYPE up gauge\nup 1\n")
	})
	opts.Backup = backupOf{c}
	c.apiEnv = newSecurityEnv(t, sopts, opts)
	return c
}

// noRoom is a backup that fails before its first byte, as one without
// room for its copy does.
type noRoom struct{}

func (noRoom) WriteTo(io.Writer) (int64, error) {
	return 0, engine.Errorf(engine.CodeUnavailable, "", "no room for the copy")
}

// backupOf is the backup of a contractEnv's database, opened after the
// handler is made.
type backupOf struct{ c *contractEnv }

func (b backupOf) WriteTo(w io.Writer) (int64, error) { return b.c.db.WriteTo(w) }

// call is one request of the contract test.
type call struct {
	method, path, body string
	header             map[string]string // "-" removes a header
	// invalid says the request breaks the document on purpose (a missing
	// token, an unknown field or parameter): the validator must say so.
	invalid bool
	status  int
	code    engine.Code // the problem's code, for an error
}

// check sends c, validates the request and the answer against the
// document, and returns the answer.
func (e *contractEnv) check(c call) response {
	t := e.t
	t.Helper()
	name := c.method + " " + c.path
	newReq := func() *http.Request {
		return e.request(req{method: c.method, path: c.path, body: c.body, header: c.header})
	}
	ok, verrs := e.o.v.ValidateHttpRequestSync(newReq())
	switch {
	case !ok && !c.invalid:
		for _, ve := range verrs {
			t.Errorf("%s: request breaks openapi.json: %v", name, ve)
		}
	case ok && c.invalid:
		t.Errorf("%s: request meant to break openapi.json passes it", name)
	}
	hr := newReq()
	resp, err := e.srv.Client().Do(hr)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := response{status: resp.StatusCode, header: resp.Header, body: b}
	if r.status != c.status {
		t.Fatalf("%s = %d %s, want %d", name, r.status, b, c.status)
	}
	if c.code != "" {
		checkProblem(t, r, c.status, c.code, problemField(t, r))
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if ok, verrs := e.o.v.ValidateHttpResponse(newReq(), resp); !ok {
		for _, ve := range verrs {
			t.Errorf("%s = %d: answer breaks openapi.json: %v\n%.300s", name, r.status, ve, b)
		}
	}
	e.driven[e.o.template(t, c.method, c.path)+" "+strconv.Itoa(r.status)] = true
	return r
}

// problemField is the field a problem names, for checkProblem.
func problemField(t *testing.T, r response) string {
	var p problemBody
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem %s: %v", r.body, err)
	}
	return p.Field
}

// template returns "METHOD /path/{param}" of the documented route that
// path matches. httprouter allows no static segment beside a parameter,
// so at most one matches.
func (o *openAPI) template(t *testing.T, method, path string) string {
	t.Helper()
	path, _, _ = strings.Cut(path, "?")
	segs := strings.Split(path, "/")
	for _, r := range o.documentedRoutes() {
		if r.method != method {
			continue
		}
		tsegs := strings.Split(r.path, "/")
		if len(tsegs) != len(segs) {
			continue
		}
		match := true
		for i, s := range tsegs {
			if !strings.HasPrefix(s, "{") && s != segs[i] {
				match = false
				break
			}
		}
		if match {
			return method + " " + r.path
		}
	}
	t.Fatalf("%s %s matches no route of openapi.json", method, path)
	return ""
}

// checkProblemSchema validates a problem answered outside any route (404
// for an unknown path, 405 for a method a path does not take) against
// components.schemas.Problem.
func (e *contractEnv) checkProblemSchema(method, path string, status int, code engine.Code) {
	t := e.t
	t.Helper()
	r := e.do(req{method: method, path: path})
	checkProblem(t, r, status, code, "")
	schema := e.o.model.Components.Schemas.GetOrZero("Problem").Schema()
	if ok, errs := schema_validation.NewSchemaValidator().ValidateSchemaBytes(schema, r.body); !ok {
		for _, ve := range errs {
			t.Errorf("%s %s: problem breaks openapi.json: %v", method, path, ve)
		}
	}
}

// notDriven lists the documented answers this test cannot cause without
// breaking the store or sending real requests, and why.
var notDriven = map[string]string{
	"500":                             "an internal error is a bug",
	"DELETE /v1/tenants/{tenant} 409": "pending_deliveries needs a running dispatcher: TestOpenAPI_DispatcherAnswersValidate",
	"POST /v1/tenants/{tenant}/endpoints/{id}/verify 200": "the challenge is sent by a running dispatcher: TestOpenAPI_DispatcherAnswersValidate",
	"503": "storage refusing writes, or a dispatcher over max_pending, needs a broken store or a running dispatcher",
}

// TestOpenAPI_EveryAnswerValidates drives every route: each success and
// each documented error it can give here, every request and answer
// validated against openapi.json; then it fails for a documented answer
// that was not driven, unless notDriven says why.
func TestOpenAPI_EveryAnswerValidates(t *testing.T) {
	o := loadOpenAPI(t)
	policies := map[string]engine.RetryPolicy{engine.StandardRetryPolicy: engine.DefaultRetryPolicy(), engine.ExtendedRetryPolicyName: engine.ExtendedRetryPolicy()}
	e := newContractEnv(t, engine.ServiceOptions{MaxEndpointsPerTenant: 3, RetryPolicies: policies, Schemas: jsonschema.Compiler{}, Tasks: engine.TaskOptions{MaxPerTenant: 3}}, httpapi.Options{}, o)
	noAuth := map[string]string{"Authorization": "-"}
	tenantTok := func(tok string) map[string]string { return bearer(tok) }

	// The document itself, served.
	r := e.check(call{method: "GET", path: "/v1/openapi.json", header: noAuth, status: 200})
	if !bytes.Equal(r.body, o.raw) {
		t.Error("GET /v1/openapi.json is not openapi.json")
	}
	e.check(call{method: "GET", path: "/v1/openapi.json?x=1", header: noAuth, invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: "/healthz", header: noAuth, status: 200})
	e.check(call{method: "GET", path: "/healthz?verbose=1", header: noAuth, invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: "/readyz", header: noAuth, status: 200})
	e.notReady.Store(true)
	r = e.check(call{method: "GET", path: "/readyz", header: noAuth, status: 503, code: engine.CodeUnavailable})
	e.notReady.Store(false)
	e.check(call{method: "GET", path: "/readyz?x=1", header: noAuth, invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: "/metrics", header: noAuth, status: 200})
	e.check(call{method: "GET", path: "/metrics?x=1", header: noAuth, invalid: true, status: 200}) // not under /v1: extra parameters are ignored

	// Tenants.
	e.check(call{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme"}`, status: 201})
	e.check(call{method: "PUT", path: "/v1/tenants/acme", status: 200})
	e.check(call{method: "PUT", path: "/v1/tenants/sandbox", body: `{"environment":"test"}`, header: bearer(testEnvTk), status: 201})
	e.check(call{method: "PUT", path: "/v1/tenants/acme", body: `{"nmae":"x"}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PUT", path: "/v1/tenants/acme", body: `{"name":`, invalid: true, status: 400, code: engine.CodeInvalidJSON})
	e.check(call{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"x"}`, header: map[string]string{"Content-Type": "text/plain"}, invalid: true, status: 415, code: engine.CodeUnsupportedMedia})
	e.check(call{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"` + strings.Repeat("x", maxBody) + `"}`, invalid: true, status: 413, code: engine.CodeBodyTooLarge})
	e.check(call{method: "PUT", path: "/v1/tenants/acme", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "PUT", path: "/v1/tenants/acme", header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "PUT", path: "/v1/tenants/acme?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: "/v1/tenants", status: 200})
	e.check(call{method: "GET", path: "/v1/tenants?limit=1", status: 200})
	e.check(call{method: "GET", path: "/v1/tenants?limit=0", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "GET", path: "/v1/tenants?after=x", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: "/v1/tenants", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: "/v1/tenants", header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: "/v1/tenants/acme", status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/nobody", status: 404, code: engine.CodeTenantNotFound})
	e.check(call{method: "GET", path: "/v1/tenants/acme", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: "/v1/tenants/acme", header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: "/v1/tenants/acme?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})

	// The catalogue.
	e.check(call{method: "PUT", path: "/v1/event-types/payment.succeeded", body: `{"description":"A payment went through."}`, status: 201})
	e.check(call{method: "PUT", path: "/v1/event-types/payment.succeeded", status: 200})
	e.check(call{method: "PUT", path: "/v1/event-types/payment.succeeded", body: `{"description":"A payment went through.","example":{"payment":"pay_example","amount":4200}}`, status: 200})
	e.check(call{method: "PUT", path: "/v1/event-types/a.b", body: `{"example":{"a":}}`, invalid: true, status: 400, code: engine.CodeInvalidJSON})
	e.check(call{method: "PUT", path: "/v1/event-types/payment.refunded", status: 201})
	// A schema and a status (engine/schema.go), and what a PUT refuses of them.
	e.check(call{method: "PUT", path: "/v1/event-types/order.created", body: `{"description":"An order was placed.","status":"deprecated","schema":{"type":"object","required":["amount"],"properties":{"amount":{"type":"integer","minimum":1}}},"example":{"amount":4200}}`, status: 201})
	e.check(call{method: "PUT", path: "/v1/event-types/order.archived", body: `{"status":"archived","schema":true}`, status: 201})
	e.check(call{method: "PUT", path: "/v1/event-types/a.b", body: `{"schema":{"type":"integr"}}`, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PUT", path: "/v1/event-types/a.b", body: `{"schema":{"$ref":"https://example.com/s.json"}}`, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PUT", path: "/v1/event-types/a.b", body: `{"schema":[]}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PUT", path: "/v1/event-types/a.b", body: `{"schema":{"type":"object"},"example":[1]}`, status: 422, code: engine.CodeSchemaMismatch})
	e.check(call{method: "PUT", path: "/v1/event-types/a.b", body: `{"status":"retired"}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PUT", path: "/v1/event-types/Bad", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PUT", path: "/v1/event-types/a.b", body: `[]`, invalid: true, status: 400, code: engine.CodeInvalidJSON})
	e.check(call{method: "PUT", path: "/v1/event-types/a.b", body: `{}`, header: map[string]string{"Content-Type": "text/plain"}, invalid: true, status: 415, code: engine.CodeUnsupportedMedia})
	e.check(call{method: "PUT", path: "/v1/event-types/a.b", body: `{"description":"` + strings.Repeat("x", maxBody) + `"}`, invalid: true, status: 413, code: engine.CodeBodyTooLarge})
	e.check(call{method: "PUT", path: "/v1/event-types/a.b", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "PUT", path: "/v1/event-types/a.b", header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "PUT", path: "/v1/event-types/a.b?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: "/v1/event-types?limit=1", header: bearer(testEnvTk), status: 200})
	e.check(call{method: "GET", path: "/v1/event-types?limit=x", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "GET", path: "/v1/event-types?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: "/v1/event-types", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "DELETE", path: "/v1/event-types/payment.refunded", status: 204})
	e.check(call{method: "DELETE", path: "/v1/event-types/payment.refunded", status: 404, code: engine.CodeNotFound})
	e.check(call{method: "DELETE", path: "/v1/event-types/Bad", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "DELETE", path: "/v1/event-types/a.b", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "DELETE", path: "/v1/event-types/a.b", header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "DELETE", path: "/v1/event-types/a.b?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})

	// Retry policies.
	e.check(call{method: "GET", path: "/v1/retry-policies", status: 200})
	e.check(call{method: "GET", path: "/v1/retry-policies?limit=1", header: bearer(testEnvTk), status: 200})
	e.check(call{method: "GET", path: "/v1/retry-policies?limit=0", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "GET", path: "/v1/retry-policies?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: "/v1/retry-policies", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme","retry_policy":"extended"}`, status: 200})
	e.check(call{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme","retry_policy":"nightly"}`, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme","retry_policy":"Not A Name"}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme","retry_policy":"standard"}`, status: 200})

	// Access tokens, so that a tenant token can be checked on the
	// routes below.
	var tok issuedJSON
	r = e.check(call{method: "POST", path: "/v1/tenants/acme/access-tokens", body: `{"ttl":"1h"}`, status: 201})
	if err := json.Unmarshal(r.body, &tok); err != nil {
		t.Fatal(err)
	}
	e.check(call{method: "POST", path: "/v1/tenants/acme/access-tokens", status: 201})
	e.check(call{method: "POST", path: "/v1/tenants/acme/access-tokens", body: `{"ttl":"1y"}`, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: "/v1/tenants/acme/access-tokens", body: `{"ttl":1}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: "/v1/tenants/acme/access-tokens", body: `{`, invalid: true, status: 400, code: engine.CodeInvalidJSON})
	e.check(call{method: "POST", path: "/v1/tenants/acme/access-tokens", body: `{}`, header: map[string]string{"Content-Type": "text/plain"}, invalid: true, status: 415, code: engine.CodeUnsupportedMedia})
	e.check(call{method: "POST", path: "/v1/tenants/acme/access-tokens", body: `{"ttl":"` + strings.Repeat("1", maxBody) + `"}`, status: 413, code: engine.CodeBodyTooLarge})
	e.check(call{method: "POST", path: "/v1/tenants/nobody/access-tokens", status: 404, code: engine.CodeTenantNotFound})
	e.check(call{method: "POST", path: "/v1/tenants/acme/access-tokens", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "POST", path: "/v1/tenants/acme/access-tokens", header: tenantTok(tok.Token), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "POST", path: "/v1/tenants/acme/access-tokens?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: "/v1/tenants/acme/access-tokens?limit=1", status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/acme/access-tokens?limit=1001", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "GET", path: "/v1/tenants/nobody/access-tokens", status: 404, code: engine.CodeTenantNotFound})
	e.check(call{method: "GET", path: "/v1/tenants/acme/access-tokens", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: "/v1/tenants/acme/access-tokens", header: tenantTok(tok.Token), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: "/v1/tenants/acme/access-tokens?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})

	// Portal links.
	pl := "/v1/tenants/acme/portal-links"
	e.check(call{method: "POST", path: pl, body: `{"ttl":"5m","return_url":"https://app.example.com/settings"}`, status: 201})
	e.check(call{method: "POST", path: pl, status: 201})
	e.check(call{method: "POST", path: pl, body: `{"ttl":"2h"}`, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: pl, body: `{"return_url":"javascript:alert(1)"}`, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: pl, body: `{"ttl":1}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: pl, body: `{`, invalid: true, status: 400, code: engine.CodeInvalidJSON})
	e.check(call{method: "POST", path: pl, body: `{}`, header: map[string]string{"Content-Type": "text/plain"}, invalid: true, status: 415, code: engine.CodeUnsupportedMedia})
	e.check(call{method: "POST", path: pl, body: `{"ttl":"` + strings.Repeat("1", maxBody) + `"}`, status: 413, code: engine.CodeBodyTooLarge})
	e.check(call{method: "POST", path: "/v1/tenants/nobody/portal-links", status: 404, code: engine.CodeTenantNotFound})
	e.check(call{method: "POST", path: pl, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "POST", path: pl, header: tenantTok(tok.Token), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "POST", path: pl + "?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})

	// Endpoints.
	var ep endpointJSON
	r = e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/in","event_types":["payment.succeeded"],"description":"main"}`, status: 201})
	if err := json.Unmarshal(r.body, &ep); err != nil {
		t.Fatal(err)
	}
	if loc := r.header.Get("Location"); loc != "/v1/tenants/acme/endpoints/"+ep.ID {
		t.Errorf("Location = %q", loc)
	}
	epPath := "/v1/tenants/acme/endpoints/" + ep.ID
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/b","event_types":["*"]}`, header: tenantTok(tok.Token), status: 201})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/c","event_types":["*"],"headers":{"X-Tenant":"acme"},"rate_limit":{"per_second":2.5}}`, status: 201})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/c","event_types":["*"],"headers":{"X-Tenant":""}}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/c","event_types":["*"],"headers":{"Content-Type":"text/plain"}}`, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/e","event_types":["*"],"rate_limit":{"per_second":0}}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/e","event_types":["*"],"rate_limit":{"per_second":5,"burst":10001}}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/d","event_types":["*"]}`, status: 409, code: engine.CodeLimitReached})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"hooks.example.com","event_types":["*"]}`, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: "/v1/tenants/sandbox/endpoints", body: `{"url":"https://hooks.example.com/in","event_types":["payment.succeded"]}`, header: bearer(testEnvTk), status: 422, code: engine.CodeUnknownEventType})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", invalid: true, status: 400, code: engine.CodeInvalidJSON})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{}`, header: map[string]string{"Content-Type": "text/plain"}, invalid: true, status: 415, code: engine.CodeUnsupportedMedia})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"event_types":[],"url":"` + strings.Repeat("x", maxBody) + `"}`, invalid: true, status: 413, code: engine.CodeBodyTooLarge})
	e.check(call{method: "POST", path: "/v1/tenants/nobody/endpoints", body: `{"url":"https://hooks.example.com/in","event_types":["*"]}`, status: 404, code: engine.CodeTenantNotFound})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/in","event_types":["*"]}`, header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: "/v1/tenants/acme/endpoints?limit=2", header: tenantTok(tok.Token), status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/acme/endpoints?limit=-1", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "GET", path: "/v1/tenants/nobody/endpoints", status: 404, code: engine.CodeTenantNotFound})
	e.check(call{method: "GET", path: "/v1/tenants/acme/endpoints", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: "/v1/tenants/sandbox/endpoints", header: tenantTok(tok.Token), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: "/v1/tenants/acme/endpoints?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: epPath, status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/acme/endpoints/ep_nope", status: 404, code: engine.CodeEndpointNotFound})
	e.check(call{method: "GET", path: epPath, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: epPath, header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: epPath + "?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "PATCH", path: epPath, body: `{"description":"changed","disabled":false,"deliver_held":true}`, status: 200})
	e.check(call{method: "PATCH", path: epPath, body: `{"headers":{"Authorization":"Bearer a-long-enough-token-0123456789","x-tenant":"acme"}}`, status: 200})
	e.check(call{method: "PATCH", path: epPath, body: `{"headers":{"X-Tenant":null}}`, status: 200})
	e.check(call{method: "PATCH", path: epPath, body: `{"headers":null}`, status: 200})
	e.check(call{method: "PATCH", path: epPath, body: `{"headers":{"Webhook-Id":"x"}}`, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PATCH", path: epPath, body: `{"headers":{"X-Tenant":"a\r\nb"}}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PATCH", path: epPath, body: `{"headers":{"X Tenant":"a"}}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PATCH", path: epPath, body: `{"rate_limit":{"per_second":20,"burst":5}}`, status: 200})
	e.check(call{method: "GET", path: epPath, status: 200})
	e.check(call{method: "PATCH", path: epPath, body: `{"rate_limit":null}`, status: 200})
	e.check(call{method: "PATCH", path: epPath, body: `{"rate_limit":{"per_second":20000}}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PATCH", path: epPath, body: `{"rate_limit":{"burst":2}}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PATCH", path: epPath, body: `{"url":"ftp://x"}`, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PATCH", path: epPath, body: `{"retry_policy":"extended"}`, status: 200})
	e.check(call{method: "PATCH", path: epPath, body: `{"retry_policy":""}`, status: 200})
	e.check(call{method: "PATCH", path: epPath, body: `{"retry_policy":"nightly"}`, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/e","event_types":["*"],"retry_policy":"nightly"}`, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PATCH", path: epPath, body: `{"disabled":"yes"}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PATCH", path: epPath, invalid: true, status: 400, code: engine.CodeInvalidJSON})
	e.check(call{method: "PATCH", path: epPath, body: `{}`, header: map[string]string{"Content-Type": "text/plain"}, invalid: true, status: 415, code: engine.CodeUnsupportedMedia})
	e.check(call{method: "PATCH", path: epPath, body: `{"description":"` + strings.Repeat("x", maxBody) + `"}`, invalid: true, status: 413, code: engine.CodeBodyTooLarge})
	e.check(call{method: "PATCH", path: "/v1/tenants/acme/endpoints/ep_nope", body: `{}`, status: 404, code: engine.CodeEndpointNotFound})
	e.check(call{method: "PATCH", path: epPath, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "PATCH", path: epPath, body: `{}`, header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "PATCH", path: epPath + "?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})

	for _, action := range []string{"rotate", "revoke", "reveal"} {
		p := epPath + "/secret/" + action
		e.check(call{method: "POST", path: p, status: 200})
		e.check(call{method: "POST", path: p, body: `{}`, status: 200})
		e.check(call{method: "POST", path: p, body: `{"grace_period":"1h"}`, invalid: true, status: 422, code: engine.CodeInvalidField})
		e.check(call{method: "POST", path: p, body: `{`, invalid: true, status: 400, code: engine.CodeInvalidJSON})
		e.check(call{method: "POST", path: p, body: `{}`, header: map[string]string{"Content-Type": "text/plain"}, invalid: true, status: 415, code: engine.CodeUnsupportedMedia})
		e.check(call{method: "POST", path: p, body: `{"x":"` + strings.Repeat("x", maxBody) + `"}`, invalid: true, status: 413, code: engine.CodeBodyTooLarge})
		e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints/ep_nope/secret/" + action, status: 404, code: engine.CodeEndpointNotFound})
		e.check(call{method: "POST", path: p, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
		e.check(call{method: "POST", path: p, header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
		e.check(call{method: "POST", path: p + "?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	}
	e.check(call{method: "POST", path: epPath + "/secret/rotate", body: `{"grace":"1h"}`, status: 200})
	e.check(call{method: "POST", path: epPath + "/secret/rotate", body: `{"grace_seconds":60}`, status: 200})
	e.check(call{method: "POST", path: epPath + "/secret/rotate", body: `{"grace":"1000h"}`, status: 422, code: engine.CodeInvalidField})

	p := epPath + "/verify"
	e.check(call{method: "POST", path: p, status: 503, code: engine.CodeUnavailable}) // no dispatcher here; see TestOpenAPI_Webhook
	e.check(call{method: "POST", path: p, body: `{"now":true}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: p, body: `{`, invalid: true, status: 400, code: engine.CodeInvalidJSON})
	e.check(call{method: "POST", path: p, body: `{}`, header: map[string]string{"Content-Type": "text/plain"}, invalid: true, status: 415, code: engine.CodeUnsupportedMedia})
	e.check(call{method: "POST", path: p, body: `{"x":"` + strings.Repeat("x", maxBody) + `"}`, invalid: true, status: 413, code: engine.CodeBodyTooLarge})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints/ep_nope/verify", status: 404, code: engine.CodeEndpointNotFound})
	e.check(call{method: "POST", path: p, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "POST", path: p, header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "POST", path: p + "?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})

	// Test events.
	p = epPath + "/test-events"
	r = e.check(call{method: "POST", path: p, status: 202})
	var sent struct {
		Type string `json:"type"`
		Test bool   `json:"test"`
	}
	if err := json.Unmarshal(r.body, &sent); err != nil || sent.Type != "payment.succeeded" || !sent.Test {
		t.Errorf("a test event answered %s (%v)", r.body, err)
	}
	e.check(call{method: "POST", path: p, body: `{"type":"payment.succeeded"}`, header: tenantTok(tok.Token), status: 202})
	e.check(call{method: "POST", path: p, body: `{"type":"payment.refunded"}`, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: p, body: `{"type":1}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: p, body: `{"data":{}}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: p, body: `{`, invalid: true, status: 400, code: engine.CodeInvalidJSON})
	e.check(call{method: "POST", path: p, body: `{}`, header: map[string]string{"Content-Type": "text/plain"}, invalid: true, status: 415, code: engine.CodeUnsupportedMedia})
	e.check(call{method: "POST", path: p, body: `{"type":"` + strings.Repeat("x", maxBody) + `"}`, invalid: true, status: 413, code: engine.CodeBodyTooLarge})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints/ep_nope/test-events", status: 404, code: engine.CodeEndpointNotFound})
	e.check(call{method: "POST", path: p, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "POST", path: p, header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "POST", path: p + "?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "PATCH", path: epPath, body: `{"disabled":true}`, status: 200})
	e.check(call{method: "POST", path: p, status: 409, code: engine.CodeEndpointDisabled})
	e.check(call{method: "PATCH", path: epPath, body: `{"disabled":false}`, status: 200})

	// Backfill.
	p = epPath + "/backfill"
	e.check(call{method: "POST", path: p, body: `{"since":"2020-01-01T00:00:00Z"}`, status: 202})
	e.check(call{method: "POST", path: p, body: `{"since":"2020-01-01T00:00:00Z","until":"2030-01-01T00:00:00Z"}`, header: tenantTok(tok.Token), status: 202})
	e.check(call{method: "POST", path: p, body: `{"since":"2020-01-01T00:00:00Z","until":"2019-01-01T00:00:00Z"}`, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: p, body: `{}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: p, body: `{"since":"yesterday"}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: p, body: `{`, invalid: true, status: 400, code: engine.CodeInvalidJSON})
	e.check(call{method: "POST", path: p, body: `{}`, header: map[string]string{"Content-Type": "text/plain"}, invalid: true, status: 415, code: engine.CodeUnsupportedMedia})
	e.check(call{method: "POST", path: p, body: `{"since":"` + strings.Repeat("x", maxBody) + `"}`, invalid: true, status: 413, code: engine.CodeBodyTooLarge})
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints/ep_nope/backfill", body: `{"since":"2020-01-01T00:00:00Z"}`, status: 404, code: engine.CodeEndpointNotFound})
	e.check(call{method: "POST", path: p, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "POST", path: p, body: `{"since":"2020-01-01T00:00:00Z"}`, header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "POST", path: p + "?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})

	// Events.
	ingest := `{"type":"payment.succeeded","data":{"amount":4200}}`
	var ing ingestJSON
	r = e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: ingest, header: map[string]string{"Idempotency-Key": "k1"}, status: 202})
	if err := json.Unmarshal(r.body, &ing); err != nil {
		t.Fatal(err)
	}
	r = e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: ingest, header: map[string]string{"Idempotency-Key": "k1"}, status: 202})
	if r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("a repeated ingest has no Idempotent-Replayed")
	}
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":2,"api_version":"v2"}`, header: map[string]string{"Idempotency-Key": "k1"}, status: 409, code: engine.CodeIdempotencyConflict})
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeded","data":{}}`, status: 422, code: engine.CodeUnknownEventType})
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"order.created","data":{"amount":4200}}`, status: 202})
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"order.created","data":{"amount":"4200"}}`, status: 422, code: engine.CodeSchemaMismatch})
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"order.archived","data":{}}`, status: 422, code: engine.CodeEventTypeArchived})
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded"}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{},"extra":1}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", invalid: true, status: 400, code: engine.CodeInvalidJSON})
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: ingest, header: map[string]string{"Content-Type": "text/plain"}, invalid: true, status: 415, code: engine.CodeUnsupportedMedia})
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":"` + strings.Repeat("x", maxBody) + `"}`, status: 413, code: engine.CodeBodyTooLarge})
	e.check(call{method: "POST", path: "/v1/tenants/nobody/events", body: ingest, status: 404, code: engine.CodeTenantNotFound})
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: ingest, header: tenantTok(tok.Token), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "POST", path: "/v1/tenants/acme/events?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	evPath := "/v1/tenants/acme/events/" + ing.ID
	e.check(call{method: "GET", path: evPath, header: tenantTok(tok.Token), status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/acme/events/evt_nope", status: 404, code: engine.CodeEventNotFound})
	e.check(call{method: "GET", path: evPath, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: evPath, header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: evPath + "?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	var feed struct {
		NextCursor string `json:"next_cursor"`
	}
	r = e.check(call{method: "GET", path: "/v1/tenants/acme/events?type=payment.succeeded&since=2020-01-01T00:00:00Z&limit=1", status: 200})
	if err := json.Unmarshal(r.body, &feed); err != nil {
		t.Fatal(err)
	}
	e.check(call{method: "GET", path: "/v1/tenants/acme/events?cursor=" + feed.NextCursor, status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/acme/events?since=yesterday", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "GET", path: "/v1/tenants/nobody/events", status: 404, code: engine.CodeTenantNotFound})
	e.check(call{method: "GET", path: "/v1/tenants/acme/events", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: "/v1/tenants/acme/events", header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: "/v1/tenants/acme/events?after=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})

	// Deliveries and dead letters.
	dlvID := ing.Deliveries[0].ID
	killDelivery(t, e.apiEnv, dlvID)
	dPath := "/v1/tenants/acme/deliveries/" + dlvID
	e.check(call{method: "GET", path: dPath, status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/acme/deliveries/dlv_nope", status: 404, code: engine.CodeDeliveryNotFound})
	e.check(call{method: "GET", path: dPath, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: dPath, header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: dPath + "?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: "/v1/tenants/acme/deliveries?state=dead&type=payment.succeeded&endpoint=" + ep.ID + "&since=2020-01-01T00:00:00Z&until=2100-01-01T00:00:00Z&limit=10", status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/acme/deliveries?state=lost", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "GET", path: "/v1/tenants/acme/deliveries?status=4xx&state=dead", status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/acme/deliveries?status=404", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "GET", path: "/v1/tenants/nobody/deliveries", status: 404, code: engine.CodeTenantNotFound})
	e.check(call{method: "GET", path: "/v1/tenants/acme/deliveries", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: "/v1/tenants/acme/deliveries", header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: "/v1/tenants/acme/deliveries?iterator=abc", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: "/v1/tenants/acme/dead-letters?limit=1", status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/acme/dead-letters?limit=0", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "GET", path: "/v1/tenants/nobody/dead-letters", status: 404, code: engine.CodeTenantNotFound})
	e.check(call{method: "GET", path: "/v1/tenants/acme/dead-letters", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: "/v1/tenants/acme/dead-letters", header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: "/v1/tenants/acme/dead-letters?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "POST", path: "/v1/tenants/acme/dead-letters/replay", body: `{"since":"2020-01-01T00:00:00Z","endpoint":"` + ep.ID + `"}`, status: 202})
	e.check(call{method: "POST", path: "/v1/tenants/acme/dead-letters/replay", body: `{"since":"2020-01-01T00:00:00Z","until":"2019-01-01T00:00:00Z"}`, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: "/v1/tenants/acme/dead-letters/replay", body: `{"since":"2020-01-01T00:00:00Z","endpoint":"ep_nope"}`, status: 404, code: engine.CodeEndpointNotFound})
	e.check(call{method: "POST", path: "/v1/tenants/acme/dead-letters/replay", body: `{"since":"yesterday"}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "POST", path: "/v1/tenants/acme/dead-letters/replay", invalid: true, status: 400, code: engine.CodeInvalidJSON})
	e.check(call{method: "POST", path: "/v1/tenants/acme/dead-letters/replay", body: `{}`, header: map[string]string{"Content-Type": "text/plain"}, invalid: true, status: 415, code: engine.CodeUnsupportedMedia})
	e.check(call{method: "POST", path: "/v1/tenants/acme/dead-letters/replay", body: `{"endpoint":"` + strings.Repeat("x", maxBody) + `"}`, invalid: true, status: 413, code: engine.CodeBodyTooLarge})
	e.check(call{method: "POST", path: "/v1/tenants/nobody/dead-letters/replay", body: `{"since":"2020-01-01T00:00:00Z"}`, status: 404, code: engine.CodeTenantNotFound})
	e.check(call{method: "POST", path: "/v1/tenants/acme/dead-letters/replay", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "POST", path: "/v1/tenants/acme/dead-letters/replay", body: `{"since":"2020-01-01T00:00:00Z"}`, header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "POST", path: "/v1/tenants/acme/dead-letters/replay?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "POST", path: dPath + "/replay", header: tenantTok(tok.Token), status: 202})
	e.check(call{method: "POST", path: "/v1/tenants/acme/deliveries/dlv_nope/replay", status: 404, code: engine.CodeDeliveryNotFound})
	e.check(call{method: "POST", path: dPath + "/replay", body: `{}`, invalid: true, status: 202})
	e.check(call{method: "POST", path: dPath + "/replay", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "POST", path: dPath + "/replay", header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "POST", path: dPath + "/replay?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})

	// An ordered line blocked by its dead head, and its skip.
	e.check(call{method: "PATCH", path: epPath, body: `{"ordering":"endpoint","on_dead":"block"}`, status: 200})
	e.check(call{method: "PATCH", path: epPath, body: `{"ordering":"endpont"}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	var blocked ingestJSON
	if err := json.Unmarshal(e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: ingest, status: 202}).body, &blocked); err != nil {
		t.Fatal(err)
	}
	var headID string
	for _, d := range blocked.Deliveries {
		if d.EndpointID == ep.ID {
			headID = d.ID
		}
	}
	killDelivery(t, e.apiEnv, headID)
	skPath := "/v1/tenants/acme/deliveries/" + headID + "/skip"
	e.check(call{method: "POST", path: skPath, header: tenantTok(tok.Token), status: 200})
	e.check(call{method: "POST", path: skPath, status: 409, code: engine.CodeNotBlocking})
	e.check(call{method: "POST", path: "/v1/tenants/acme/deliveries/dlv_nope/skip", status: 404, code: engine.CodeDeliveryNotFound})
	e.check(call{method: "POST", path: skPath, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "POST", path: skPath, header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "POST", path: skPath + "?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})

	// Channels: an endpoint's filter, an event's channels, the listings
	// by channel, and the answers that show them.
	e.check(call{method: "PATCH", path: epPath, body: `{"channels":["project_1","Org-2.eu"]}`, status: 200})
	e.check(call{method: "PATCH", path: epPath, body: `{"channels":["project 1"]}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PATCH", path: epPath, body: `{"channels":["a","a"]}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	var onChannel ingestJSON
	if err := json.Unmarshal(e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","channels":["project_1"],"data":{}}`, status: 202}).body, &onChannel); err != nil {
		t.Fatal(err)
	}
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","channels":["ok","` + strings.Repeat("x", engine.MaxChannelLen+1) + `"],"data":{}}`, invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "GET", path: "/v1/tenants/acme/events/" + onChannel.ID, status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/acme/deliveries/" + onChannel.Deliveries[0].ID, status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/acme/deliveries?channel=project_1", status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/acme/events?channel=project_1", status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/acme/deliveries?channel=a%2Fb", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "GET", path: "/v1/tenants/acme/events?channel=a%2Fb", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "PATCH", path: epPath, body: `{"channels":[]}`, status: 200})

	// Tasks: the ones the replays and backfills above started.
	var tasks struct {
		Data []struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"data"`
	}
	if err := json.Unmarshal(e.check(call{method: "GET", path: "/v1/tenants/acme/tasks?limit=10", header: tenantTok(tok.Token), status: 200}).body, &tasks); err != nil || len(tasks.Data) == 0 {
		t.Fatalf("acme's tasks: %v %+v", err, tasks)
	}
	taskPath := "/v1/tenants/acme/tasks/" + tasks.Data[0].ID
	e.check(call{method: "GET", path: "/v1/tenants/acme/tasks?limit=1&cursor=" + tasks.Data[0].ID, status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/acme/tasks?cursor=x", status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "GET", path: "/v1/tenants/nobody/tasks", status: 404, code: engine.CodeTenantNotFound})
	e.check(call{method: "GET", path: "/v1/tenants/acme/tasks", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: "/v1/tenants/acme/tasks", header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: "/v1/tenants/acme/tasks?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: taskPath, header: tenantTok(tok.Token), status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/acme/tasks/task_nope", status: 404, code: engine.CodeTaskNotFound})
	e.check(call{method: "GET", path: taskPath, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: taskPath, header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: taskPath + "?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: "/v1/tasks?limit=2", status: 200})
	e.check(call{method: "GET", path: "/v1/tasks?limit=1001", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "GET", path: "/v1/tasks", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: "/v1/tasks", header: tenantTok(tok.Token), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: "/v1/tasks?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: "/v1/tasks/" + tasks.Data[0].ID, status: 200})
	e.check(call{method: "GET", path: "/v1/tasks/task_nope", status: 404, code: engine.CodeTaskNotFound})
	e.check(call{method: "GET", path: "/v1/tasks/task_nope", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: "/v1/tasks/task_nope", header: tenantTok(tok.Token), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: "/v1/tasks/task_nope?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	// At the tenant's bound of running tasks (3, tasks no process runs
	// here), a replay or a backfill is 409 limit_reached.
	for range 3 {
		now := time.Now().UTC()
		if err := e.db.CreateTask(t.Context(), engine.Task{ID: engine.NewID("task"), Tenant: "acme", Kind: engine.TaskReplay, State: engine.TaskRunning,
			Started: now, Updated: now, Errors: []engine.TaskError{}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	e.check(call{method: "POST", path: "/v1/tenants/acme/dead-letters/replay", body: `{"since":"2020-01-01T00:00:00Z"}`, status: 409, code: engine.CodeLimitReached})
	e.check(call{method: "POST", path: epPath + "/backfill", body: `{"since":"2020-01-01T00:00:00Z"}`, status: 409, code: engine.CodeLimitReached})

	// Reports.
	e.check(call{method: "GET", path: "/v1/tenants/acme/report?last=10", header: tenantTok(tok.Token), status: 200})
	e.check(call{method: "GET", path: "/v1/tenants/acme/report?last=0", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "GET", path: "/v1/tenants/nobody/report", status: 404, code: engine.CodeTenantNotFound})
	e.check(call{method: "GET", path: "/v1/tenants/acme/report", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: "/v1/tenants/acme/report", header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: "/v1/tenants/acme/report?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "GET", path: "/v1/admin/report?last=10", status: 200})
	e.check(call{method: "GET", path: "/v1/admin/report?last=x", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "GET", path: "/v1/admin/report", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	driveOperationalEndpoints(t, e, tok.Token)

	e.check(call{method: "GET", path: "/v1/admin/report", header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: "/v1/admin/report?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})

	// Backup.
	e.check(call{method: "GET", path: "/v1/admin/backup", status: 200})
	e.check(call{method: "GET", path: "/v1/admin/backup", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "GET", path: "/v1/admin/backup", header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "GET", path: "/v1/admin/backup?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})

	// Deletes, last.
	e.check(call{method: "DELETE", path: "/v1/tenants/acme/access-tokens/" + tok.ID, status: 204})
	e.check(call{method: "DELETE", path: "/v1/tenants/acme/access-tokens/tok_nope", status: 404, code: engine.CodeNotFound})
	e.check(call{method: "DELETE", path: "/v1/tenants/acme/access-tokens/" + tok.ID, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "DELETE", path: "/v1/tenants/acme/access-tokens/" + tok.ID, header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "DELETE", path: "/v1/tenants/acme/access-tokens/" + tok.ID + "?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "DELETE", path: epPath, status: 204})
	e.check(call{method: "DELETE", path: epPath, status: 404, code: engine.CodeEndpointNotFound})
	e.check(call{method: "DELETE", path: epPath, header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "DELETE", path: epPath, header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "DELETE", path: epPath + "?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`, status: 202})
	e.check(call{method: "DELETE", path: "/v1/tenants/acme?force=maybe", invalid: true, status: 422, code: engine.CodeInvalidField})
	e.check(call{method: "DELETE", path: "/v1/tenants/acme", header: noAuth, invalid: true, status: 401, code: engine.CodeUnauthorized})
	e.check(call{method: "DELETE", path: "/v1/tenants/acme", header: bearer(testEnvTk), status: 403, code: engine.CodeForbidden})
	e.check(call{method: "DELETE", path: "/v1/tenants/acme?x=1", invalid: true, status: 400, code: engine.CodeUnknownParameter})
	e.check(call{method: "DELETE", path: "/v1/tenants/acme?force=true", status: 202})
	e.check(call{method: "DELETE", path: "/v1/tenants/acme", status: 404, code: engine.CodeTenantNotFound})
	// A tenant deleted by the store alone: no task purges it.
	e.check(call{method: "PUT", path: "/v1/tenants/gone", status: 201})
	if err := e.db.DeleteTenant(t.Context(), "gone", time.Now()); err != nil {
		t.Fatal(err)
	}
	e.check(call{method: "PUT", path: "/v1/tenants/gone", status: 409, code: engine.CodeTenantDeleting})

	// Answers outside any route.
	e.checkProblemSchema("GET", "/v1/nowhere", 404, engine.CodeNotFound)
	e.checkProblemSchema("POST", "/v1/tenants", 405, engine.CodeMethodNotAllowed)

	// What needs other options: no backup or metrics configured, an
	// ingest rate.
	bare := &contractEnv{apiEnv: newSecurityEnv(t, engine.ServiceOptions{}, httpapi.Options{IngestRate: 1e-6, IngestBurst: 1}), o: o, driven: e.driven}
	bare.check(call{method: "GET", path: "/metrics", header: noAuth, status: 404, code: engine.CodeNotFound})
	bare.check(call{method: "GET", path: "/v1/admin/backup", status: 404, code: engine.CodeNotFound})
	bare.check(call{method: "PUT", path: "/v1/tenants/acme", status: 201})
	bare.check(call{method: "PUT", path: "/v1/event-types/payment.succeeded", status: 201})
	bare.check(call{method: "POST", path: "/v1/tenants/acme/events", body: ingest, status: 202})
	bare.check(call{method: "POST", path: "/v1/tenants/acme/events", body: ingest, status: 429, code: engine.CodeRateLimited})
	// A test event counts against the tenant's ingest rate.
	slow := &contractEnv{apiEnv: newSecurityEnv(t, engine.ServiceOptions{TenantIngestRate: 1e-6, TenantIngestBurst: 1}, httpapi.Options{}), o: o, driven: e.driven}
	slow.check(call{method: "PUT", path: "/v1/tenants/acme", status: 201})
	slow.check(call{method: "PUT", path: "/v1/event-types/payment.succeeded", status: 201})
	var slowEp endpointJSON
	r = slow.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/in","event_types":["*"]}`, status: 201})
	if err := json.Unmarshal(r.body, &slowEp); err != nil {
		t.Fatal(err)
	}
	slow.check(call{method: "POST", path: "/v1/tenants/acme/endpoints/" + slowEp.ID + "/test-events", status: 202})
	slow.check(call{method: "POST", path: "/v1/tenants/acme/endpoints/" + slowEp.ID + "/test-events", status: 429, code: engine.CodeRateLimited})

	// A backup that cannot start (no room for the copy).
	full := &contractEnv{apiEnv: newSecurityEnv(t, engine.ServiceOptions{}, httpapi.Options{Backup: noRoom{}}), o: o, driven: e.driven}
	full.check(call{method: "GET", path: "/v1/admin/backup", status: 503, code: engine.CodeUnavailable})

	// A head over httpapi.MaxHeaderBytes, on every route: 431 before
	// anything else is looked at (the token, the path's ids, the body).
	pad := map[string]string{"X-Padding": strings.Repeat("p", httpapi.MaxHeaderBytes)}
	ids := strings.NewReplacer("{tenant}", "acme", "{type}", "payment.succeeded", "{id}", "ep_00000000000000000000000000")
	for _, r := range o.documentedRoutes() {
		e.check(call{method: r.method, path: ids.Replace(r.path), header: pad, invalid: true, status: 431, code: engine.CodeHeadersTooLarge})
	}

	// Every documented answer was driven, or notDriven says why not.
	for path, item := range o.model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			for status := range op.Responses.Codes.KeysFromOldest() {
				key := strings.ToUpper(method) + " " + path + " " + status
				if !e.driven[key] && notDriven[status] == "" && notDriven[key] == "" {
					t.Errorf("%s: documented but not driven by this test", key)
				}
			}
		}
	}
}

// TestOpenAPI_DispatcherAnswersValidate drives, against an API whose
// service runs a dispatcher delivering to a loopback receiver, the
// answers TestOpenAPI_EveryAnswerValidates cannot cause: a verification
// challenge sent (200, verified or not), and the refusal to delete a
// tenant with deliveries pending (409 pending_deliveries).
func TestOpenAPI_DispatcherAnswersValidate(t *testing.T) {
	o := loadOpenAPI(t)
	release := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("webhook-challenge") == "" {
			<-release // hold every delivery: it stays pending
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	defer close(release)
	e := newDispatchingEnv(t, o)

	e.check(call{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme"}`, status: 201})
	e.check(call{method: "PUT", path: "/v1/event-types/payment.succeeded", body: `{}`, status: 201})
	r := e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"` + hook.URL + `/in","event_types":["*"]}`, status: 201})
	var ep struct{ ID string }
	if err := json.Unmarshal(r.body, &ep); err != nil {
		t.Fatal(err)
	}
	e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints/" + ep.ID + "/verify", status: 200})
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`, status: 202})
	e.check(call{method: "DELETE", path: "/v1/tenants/acme", status: 409, code: engine.CodePendingDeliveries})
	for _, key := range []string{"POST /v1/tenants/{tenant}/endpoints/{id}/verify 200", "DELETE /v1/tenants/{tenant} 409"} {
		if !e.driven[key] {
			t.Errorf("%s was not driven", key)
		}
	}
}

// newDispatchingEnv is a contractEnv whose service runs a dispatcher
// that may deliver to loopback receivers.
func newDispatchingEnv(t *testing.T, o *openAPI) *contractEnv {
	t.Helper()
	return &contractEnv{apiEnv: newDispatchingAPIEnv(t), o: o, driven: map[string]bool{}}
}

// webhookValidator validates what a receiver gets against the document's
// webhooks. The validator library matches requests to the document's
// paths only, so it is given a copy of the document whose paths are its
// webhooks, each at /webhooks/<name>.
func (o *openAPI) webhookValidator(t *testing.T) validator.Validator {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(o.raw, &doc); err != nil {
		t.Fatal(err)
	}
	hooks, _ := doc["webhooks"].(map[string]any)
	paths := map[string]any{}
	for name, item := range hooks {
		paths["/webhooks/"+name] = item
	}
	doc["paths"] = paths
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, v, err := contracttest.Load(raw)
	if err != nil {
		t.Fatalf("webhooks of openapi.json: %v", err)
	}
	return v
}

// exchange is one request a receiver got and what it answered.
type exchange struct {
	req  *http.Request // its body read into body
	body []byte
	resp *http.Response
}

// TestOpenAPI_WebhooksValidate checks what a receiver really gets from a
// running dispatcher against the document's webhooks: an event's
// delivery signed with one key and, during a rotation's grace window,
// with two; the endpoint-verification challenge; and the answer the
// receiver's toolkit (verify.ChallengeResponse) gives it.
func TestOpenAPI_WebhooksValidate(t *testing.T) {
	o := loadOpenAPI(t)
	wv := o.webhookValidator(t)
	got := make(chan exchange, 10)
	var secret atomic.Value
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec := httptest.NewRecorder()
		if c := r.Header.Get(engine.HeaderChallenge); c != "" {
			resp, err := verify.ChallengeResponse(secret.Load().(string), c)
			if err != nil {
				t.Error(err)
			}
			rec.Header().Set(engine.HeaderChallengeResponse, resp)
		}
		rec.WriteHeader(http.StatusNoContent)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		got <- exchange{req: r.Clone(context.Background()), body: body, resp: rec.Result()}
	}))
	defer hook.Close()
	e := newDispatchingEnv(t, o)

	e.check(call{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme"}`, status: 201})
	e.check(call{method: "PUT", path: "/v1/event-types/payment.succeeded", body: `{}`, status: 201})
	r := e.check(call{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"` + hook.URL + `/in","event_types":["*"]}`, status: 201})
	var ep struct{ ID, Secret string }
	if err := json.Unmarshal(r.body, &ep); err != nil {
		t.Fatal(err)
	}
	secret.Store(ep.Secret)
	epPath := "/v1/tenants/acme/endpoints/" + ep.ID

	validated := map[string]bool{}
	lastOfKey := map[string]uint64{} // ordering key → the sequence of its last event
	validate := func(name, webhook string, wantKeys int) {
		t.Helper()
		validated[webhook] = true
		var x exchange
		select {
		case x = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the receiver got nothing", name)
		}
		u := *x.req.URL
		u.Path = "/webhooks/" + webhook
		req := x.req.Clone(context.Background())
		req.URL, req.RequestURI = &u, ""
		req.Body = io.NopCloser(bytes.NewReader(x.body))
		if ok, errs := wv.ValidateHttpRequestSync(req); !ok {
			for _, ve := range errs {
				t.Errorf("%s: request breaks openapi.json webhooks.%s: %v", name, webhook, ve)
			}
		}
		if ok, errs := wv.ValidateHttpResponse(req, x.resp); !ok {
			for _, ve := range errs {
				t.Errorf("%s: the receiver's answer breaks openapi.json webhooks.%s: %v", name, webhook, ve)
			}
		}
		if webhook != "event" {
			return
		}
		if n := len(strings.Fields(req.Header.Get("webhook-signature"))); n != wantKeys {
			t.Errorf("%s: %d signatures, want %d", name, n, wantKeys)
		}
		env, err := verify.ParseEnvelope(x.body)
		if err != nil || env.Sequence == 0 || req.Header.Get(verify.HeaderSequence) != strconv.FormatUint(env.Sequence, 10) {
			t.Errorf("%s: webhook-sequence %q, envelope sequence %d (%v)", name, req.Header.Get(verify.HeaderSequence), env.Sequence, err)
		}
		wantPrevious := ""
		if env.OrderingKey != "" && lastOfKey[env.OrderingKey] != 0 {
			wantPrevious = strconv.FormatUint(lastOfKey[env.OrderingKey], 10)
		}
		if got := req.Header.Get(verify.HeaderPreviousSequence); got != wantPrevious {
			t.Errorf("%s: webhook-previous-sequence %q, want %q", name, got, wantPrevious)
		}
		if env.OrderingKey != "" {
			lastOfKey[env.OrderingKey] = env.Sequence
		}
	}

	e.check(call{method: "POST", path: epPath + "/verify", status: 200})
	validate("challenge", "endpoint-verification", 0)
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{"amount":1200,"note":"ok"}}`, status: 202})
	validate("event", "event", 1)
	e.check(call{method: "POST", path: epPath + "/secret/rotate", body: `{"grace":"1h"}`, status: 200})
	e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":[1,2]}`, status: 202})
	validate("event during a rotation", "event", 2)
	for i := range 2 {
		e.check(call{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","ordering_key":"order_1","data":{}}`, status: 202})
		validate(fmt.Sprintf("keyed event %d", i+1), "event", 2)
	}
	for name := range o.model.Webhooks.KeysFromOldest() {
		if !validated[name] && !slices.ContainsFunc(engine.OperationalEventTypes, func(op engine.OperationalEventType) bool { return op.Name == name }) {
			t.Errorf("webhooks.%s is documented but no request of it was validated", name)
		}
	}
	// The operational events' webhooks are validated against what a
	// running webhookd sends, each caused by its action, in
	// e2e/operational_test.go.
}
