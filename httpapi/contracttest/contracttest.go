// Package contracttest checks HTTP exchanges against webhookd's OpenAPI
// document (httpapi/openapi.json), for tests: the API's own contract
// test, and tests that drive the API as a user would (the README's
// walk-through) through a Proxy that validates everything passing it.
//
// It uses github.com/pb33f/libopenapi and libopenapi-validator, which read
// OpenAPI 3.1 (JSON Schema 2020-12, type arrays, const, webhooks) and
// validate a request and a response (status, headers, body, security) in
// strict mode, which also refuses a query parameter, a header or a body
// field the document does not declare. Only tests import this package,
// so the binary does not carry the validator.
package contracttest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
)

// Load parses doc and returns its model and a strict validator of it.
func Load(doc []byte) (*v3.Document, validator.Validator, error) {
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		return nil, nil, err
	}
	m, err := d.BuildV3Model()
	if err != nil {
		return nil, nil, err
	}
	v, errs := validator.NewValidator(d,
		config.WithFormatAssertions(),
		config.WithStrictMode(),
		config.WithStrictIgnoredHeadersExtra("x-content-type-options"),
		config.WithRejectUndeclaredRequestBody(),
		// An event's data and an event type's example and schema are
		// the client's JSON, a report's dead_by_reason is keyed by reason, an
		// attempt's response_headers and an endpoint's headers by
		// header name: all are any object by design, and so are the
		// members of the document itself (GET /v1/openapi.json).
		config.WithStrictIgnorePaths("$.body.data.**", "$.body.event.data.**", "$.body.data[*].event.data.**",
			"$.body.example.**", "$.body.data[*].example.**",
			"$.body.schema.**", "$.body.data[*].schema.**",
			"$.body.headers.**", "$.body.data[*].headers.**", "$.body.endpoint.headers.**",
			"$.body.dead_by_reason.**", "$.body.total.dead_by_reason.**", "$.body.tenants[*].dead_by_reason.**",
			"$.body.attempts[*].response_headers.**", "$.body.data[*].attempts[*].response_headers.**",
			"$.body.deliveries[*].attempts[*].response_headers.**",
			"$.body.info.**", "$.body.paths.**", "$.body.paths[**", "$.body.webhooks.**", "$.body.webhooks[**", "$.body.components.**"),
	)
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("%v", errs)
	}
	return &m.Model, v, nil
}

// Proxy forwards every request to a webhookd and validates the request
// and its answer against the document; Violations returns what broke it.
// It buffers bodies, so it suits tests, not streams.
type Proxy struct {
	v     validator.Validator
	proxy *httputil.ReverseProxy

	mu         sync.Mutex
	violations []string
	exchanges  int
}

// NewProxy returns a Proxy to target (e.g. http://127.0.0.1:8080).
func NewProxy(v validator.Validator, target *url.URL) *Proxy {
	p := &Proxy{v: v}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
		},
		ModifyResponse: p.checkResponse,
	}
	return p
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	check := r.Clone(r.Context())
	check.Body = io.NopCloser(bytes.NewReader(body))
	if ok, errs := p.v.ValidateHttpRequestSync(check); !ok {
		for _, e := range errs {
			p.violate("%s %s: request: %v", r.Method, r.URL.RequestURI(), e)
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	p.proxy.ServeHTTP(w, r)
}

// checkResponse validates resp, the answer to resp.Request, and leaves
// its body readable.
func (p *Proxy) checkResponse(resp *http.Response) error {
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	req := resp.Request.Clone(resp.Request.Context())
	req.Body = http.NoBody
	check := *resp
	check.Body = io.NopCloser(bytes.NewReader(body))
	if ok, errs := p.v.ValidateHttpResponse(req, &check); !ok {
		for _, e := range errs {
			p.violate("%s %s = %d: answer: %v", req.Method, req.URL.RequestURI(), resp.StatusCode, e)
		}
	}
	p.mu.Lock()
	p.exchanges++
	p.mu.Unlock()
	return nil
}

func (p *Proxy) violate(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.violations = append(p.violations, fmt.Sprintf(format, args...))
}

// Violations returns what broke the document so far, and how many
// exchanges were checked.
func (p *Proxy) Violations() ([]string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.violations...), p.exchanges
}
