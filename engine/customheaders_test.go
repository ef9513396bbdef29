package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
	"github.com/webhookd/webhookd/storage"
	"github.com/webhookd/webhookd/verify"
)

func TestMaskHeaderValue(t *testing.T) {
	tests := []struct{ value, want string }{
		{"acme", "••••"},
		{"Bearer short", "••••"},                   // under MaskShowMinLen
		{"0123456789abcdefghijklm", "••••"},        // 23 bytes
		{"0123456789abcdefghijklmn", "012345••••"}, // 24
		{"Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc", "Bearer ••••"},
		{"Basic dXNlcjpwYXNzd29yZA==", "Basic ••••"},
		{"sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_liv••••"},
	}
	for _, tt := range tests {
		if got := engine.MaskHeaderValue(tt.value); got != tt.want {
			t.Errorf("MaskHeaderValue(%q) = %q, want %q", tt.value, got, tt.want)
		}
	}
}

func TestCustomHeaders_MarshalJSON(t *testing.T) {
	ep := engine.Endpoint{ID: "ep_1", Headers: engine.CustomHeaders{
		{Name: "Authorization", Value: "Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc"},
		{Name: "X-Tenant", Value: "acme <&>"},
	}}
	b, err := json.Marshal(ep)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Headers map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Authorization": "Bearer ••••", "X-Tenant": "••••"}
	if !reflect.DeepEqual(got.Headers, want) {
		t.Errorf("headers = %v, want %v", got.Headers, want)
	}
	if strings.Contains(string(b), "eyJ") || strings.Contains(string(b), "acme <") {
		t.Errorf("the JSON shows a value: %s", b)
	}
	b, _ = json.Marshal(engine.Endpoint{ID: "ep_2"})
	if strings.Contains(string(b), `"headers"`) {
		t.Errorf("an endpoint without headers has %s", b)
	}
}

// TestNewHeaders: the validation table of the headers of a create.
func TestNewHeaders(t *testing.T) {
	long := strings.Repeat("a", engine.MaxHeaderValueLen)
	many := map[string]string{}
	for i := range engine.MaxEndpointHeaders + 1 {
		many["X-H"+string(rune('a'+i))] = "v"
	}
	big := map[string]string{}
	for i := range 3 {
		big["X-Big"+string(rune('a'+i))] = long
	}
	tests := []struct {
		name  string
		in    map[string]string
		field string // "": valid
		says  string
	}{
		{"none", nil, "", ""},
		{"canonicalised", map[string]string{"x-tenant": "acme", "AUTHORIZATION": "Bearer x"}, "", ""},
		{"webhook-id", map[string]string{"webhook-id": "x"}, "headers.Webhook-Id", "reserved"},
		{"Webhook-Signature any case", map[string]string{"WEBHOOK-SIGNATURE": "x"}, "headers.Webhook-Signature", "webhook-*"},
		{"a future webhook-*", map[string]string{"Webhook-Anything": "x"}, "headers.Webhook-Anything", "webhook-*"},
		{"X-Webhook-Signature", map[string]string{"x-webhook-signature": "x"}, "headers.X-Webhook-Signature", "signed with it"},
		{"Content-Type", map[string]string{"content-type": "text/plain"}, "headers.Content-Type", "JSON envelope"},
		{"Content-Length", map[string]string{"Content-Length": "1"}, "headers.Content-Length", ""},
		{"Content-Encoding", map[string]string{"Content-Encoding": "gzip"}, "headers.Content-Encoding", "body"},
		{"Host", map[string]string{"host": "evil.example"}, "headers.Host", ""},
		{"User-Agent", map[string]string{"User-Agent": "x"}, "headers.User-Agent", ""},
		{"Transfer-Encoding", map[string]string{"Transfer-Encoding": "chunked"}, "headers.Transfer-Encoding", "hop-by-hop"},
		{"Connection", map[string]string{"connection": "close"}, "headers.Connection", "hop-by-hop"},
		{"Keep-Alive", map[string]string{"Keep-Alive": "1"}, "headers.Keep-Alive", ""},
		{"TE", map[string]string{"TE": "trailers"}, "headers.Te", ""},
		{"Trailer", map[string]string{"Trailer": "x"}, "headers.Trailer", ""},
		{"Upgrade", map[string]string{"Upgrade": "h2c"}, "headers.Upgrade", ""},
		{"Proxy-Authorization", map[string]string{"proxy-authorization": "x"}, "headers.Proxy-Authorization", "proxies"},
		{"Expect", map[string]string{"Expect": "100-continue"}, "headers.Expect", ""},
		{"Accept-Encoding", map[string]string{"Accept-Encoding": "gzip"}, "headers.Accept-Encoding", ""},
		{"not a token: space", map[string]string{"X Tenant": "x"}, "headers", "not an HTTP token"},
		{"not a token: colon", map[string]string{"X-Tenant:": "x"}, "headers", "not an HTTP token"},
		{"not a token: CRLF", map[string]string{"X-A\r\nX-B": "x"}, "headers", "not an HTTP token"},
		{"not a token: pseudo-header", map[string]string{":authority": "x"}, "headers", "not an HTTP token"},
		{"not a token: non-ASCII", map[string]string{"X-Tënant": "x"}, "headers", "not an HTTP token"},
		{"empty name", map[string]string{"": "x"}, "headers", "empty"},
		{"name too long", map[string]string{"X-" + strings.Repeat("a", engine.MaxHeaderNameLen-1): "x"}, "headers", "longer than 64"},
		{"name at the bound", map[string]string{"X-" + strings.Repeat("a", engine.MaxHeaderNameLen-2): "x"}, "", ""},
		{"twice in two cases", map[string]string{"X-Tenant": "a", "x-tenant": "b"}, "headers.X-Tenant", "twice"},
		{"empty value", map[string]string{"X-Tenant": ""}, "headers.X-Tenant", "no value"},
		{"CRLF injection", map[string]string{"X-Tenant": "acme\r\nX-Admin: yes"}, "headers.X-Tenant", "line break at byte offset 4"},
		{"LF", map[string]string{"X-Tenant": "acme\nx"}, "headers.X-Tenant", "line break"},
		{"NUL", map[string]string{"X-Tenant": "acme\x00"}, "headers.X-Tenant", "control character"},
		{"tab", map[string]string{"X-Tenant": "a\tb"}, "headers.X-Tenant", "control character"},
		{"DEL", map[string]string{"X-Tenant": "a\x7fb"}, "headers.X-Tenant", "control character"},
		{"non-ASCII value", map[string]string{"X-Tenant": "Müller"}, "headers.X-Tenant", "not ASCII"},
		{"NEL", map[string]string{"X-Tenant": "a\u0085b"}, "headers.X-Tenant", "not ASCII"},
		{"leading space", map[string]string{"X-Tenant": " acme"}, "headers.X-Tenant", "space"},
		{"trailing space", map[string]string{"X-Tenant": "acme "}, "headers.X-Tenant", "space"},
		{"value at the bound", map[string]string{"Authorization": long}, "", ""},
		{"value too long", map[string]string{"Authorization": long + "a"}, "headers.Authorization", "longer than 2048"},
		{"too many", many, "headers", "at most 20"},
		{"too big in all", big, "headers", "at most 4096 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := engine.NewHeaders(tt.in)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("NewHeaders = %v, want valid", err)
				}
				if len(h) != len(tt.in) {
					t.Fatalf("NewHeaders = %d headers, want %d", len(h), len(tt.in))
				}
				for i, x := range h {
					if c, err := engine.CanonicalHeaderName(x.Name); err != nil || c != x.Name || i > 0 && h[i-1].Name >= x.Name {
						t.Errorf("header %d is %q: want canonical names, in order", i, x.Name)
					}
				}
				return
			}
			var e *engine.Error
			if !asError(err, &e) || e.Code != engine.CodeInvalidField || e.Field != tt.field || !strings.Contains(e.Message, tt.says) {
				t.Fatalf("NewHeaders = %v, want invalid_field %q saying %q", err, tt.field, tt.says)
			}
			for _, v := range tt.in {
				if len(v) > 3 && strings.Contains(e.Error(), v) {
					t.Errorf("the error shows the value: %v", e)
				}
			}
		})
	}
	t.Run("canonical and sorted", func(t *testing.T) {
		h, err := engine.NewHeaders(map[string]string{"x-tenant": "acme", "AUTHORIZATION": "Bearer x"})
		want := engine.CustomHeaders{{Name: "Authorization", Value: "Bearer x"}, {Name: "X-Tenant", Value: "acme"}}
		if err != nil || !reflect.DeepEqual(h, want) {
			t.Errorf("NewHeaders = %+v, %v; want %+v", h, err, want)
		}
	})
}

func asError(err error, e **engine.Error) bool {
	var x *engine.Error
	ok := errors.As(err, &x)
	*e = x
	return ok
}

// TestApplyHeadersPatch: a PATCH's headers merge.
func TestApplyHeadersPatch(t *testing.T) {
	s := func(v string) *string { return &v }
	cur := engine.CustomHeaders{{Name: "Authorization", Value: "Bearer a"}, {Name: "X-Tenant", Value: "acme"}}
	tests := []struct {
		name  string
		patch map[string]*string
		want  engine.CustomHeaders
		field string
	}{
		{"absent", nil, cur, ""},
		{"{} clears", map[string]*string{}, nil, ""},
		{"set one, keep the other", map[string]*string{"authorization": s("Bearer b")}, engine.CustomHeaders{{Name: "Authorization", Value: "Bearer b"}, {Name: "X-Tenant", Value: "acme"}}, ""},
		{"add one", map[string]*string{"X-Region": s("eu")}, engine.CustomHeaders{{Name: "Authorization", Value: "Bearer a"}, {Name: "X-Region", Value: "eu"}, {Name: "X-Tenant", Value: "acme"}}, ""},
		{"null removes", map[string]*string{"x-tenant": nil}, engine.CustomHeaders{{Name: "Authorization", Value: "Bearer a"}}, ""},
		{"null of an absent one", map[string]*string{"X-Nothing": nil}, cur, ""},
		{"remove both", map[string]*string{"X-Tenant": nil, "Authorization": nil}, nil, ""},
		{"reserved", map[string]*string{"Webhook-Id": s("x")}, nil, "headers.Webhook-Id"},
		{"reserved, even to remove", map[string]*string{"Host": nil}, nil, "headers.Host"},
		{"CRLF", map[string]*string{"X-Tenant": s("a\r\nb")}, nil, "headers.X-Tenant"},
		{"twice", map[string]*string{"X-Tenant": s("a"), "X-TENANT": nil}, nil, "headers.X-Tenant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := engine.CheckHeadersPatch(tt.patch)
			if err == nil {
				var got engine.CustomHeaders
				got, err = engine.ApplyHeadersPatch(cur, p)
				if err == nil && !reflect.DeepEqual(got, tt.want) {
					t.Errorf("applied = %+v, want %+v", got, tt.want)
				}
			}
			if tt.field == "" && err != nil {
				t.Errorf("error %v, want none", err)
			}
			if tt.field != "" {
				var e *engine.Error
				if !asError(err, &e) || e.Field != tt.field {
					t.Errorf("error %v, want one naming %q", err, tt.field)
				}
			}
		})
	}
	if cur[1].Value != "acme" || len(cur) != 2 {
		t.Errorf("the patch changed the current headers: %+v", cur)
	}
	t.Run("bounds of the result", func(t *testing.T) {
		var full engine.CustomHeaders
		for i := range engine.MaxEndpointHeaders {
			full = append(full, engine.CustomHeader{Name: "X-H" + string(rune('a'+i)), Value: "v"})
		}
		p, err := engine.CheckHeadersPatch(map[string]*string{"X-One-More": s("v")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.ApplyHeadersPatch(full, p); engine.ErrorCode(err) != engine.CodeInvalidField || !strings.Contains(err.Error(), "at most 20") {
			t.Errorf("a 21st header = %v, want refused", err)
		}
		p, _ = engine.CheckHeadersPatch(map[string]*string{"X-Ha": s("w")})
		if got, err := engine.ApplyHeadersPatch(full, p); err != nil || len(got) != engine.MaxEndpointHeaders || got[0].Value != "w" {
			t.Errorf("replacing one of 20 = %d headers, %v; want 20", len(got), err)
		}
	})
}

// TestCheckStoredHeaders: the rules a store's check and an import hold
// stored headers to; a sealed value is not looked at.
func TestCheckStoredHeaders(t *testing.T) {
	ok := engine.CustomHeaders{{Name: "Authorization", Value: "Bearer x"}, {Name: "X-Tenant", Value: "sealed:v1:AAAA", Sealed: true}}
	if err := engine.CheckStoredHeaders(ok); err != nil {
		t.Errorf("CheckStoredHeaders(%+v) = %v", ok, err)
	}
	if err := engine.CheckStoredHeaders(nil); err != nil {
		t.Errorf("CheckStoredHeaders(nil) = %v", err)
	}
	for _, tt := range []struct {
		name string
		h    engine.CustomHeaders
		says string
	}{
		{"reserved", engine.CustomHeaders{{Name: "Host", Value: "x"}}, "Host"},
		{"not canonical", engine.CustomHeaders{{Name: "x-tenant", Value: "x"}}, "canonical"},
		{"out of order", engine.CustomHeaders{{Name: "X-B", Value: "x"}, {Name: "X-A", Value: "x"}}, "order"},
		{"twice", engine.CustomHeaders{{Name: "X-A", Value: "x"}, {Name: "X-A", Value: "y"}}, "repeated"},
		{"a plain value with CRLF", engine.CustomHeaders{{Name: "X-A", Value: "a\r\nb"}}, "line break"},
		{"an empty plain value", engine.CustomHeaders{{Name: "X-A"}}, "no value"},
		{"too big", engine.CustomHeaders{{Name: "X-A", Value: strings.Repeat("a", 2048)}, {Name: "X-B", Value: strings.Repeat("b", 2048)}}, "4096"},
	} {
		if err := engine.CheckStoredHeaders(tt.h); err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: CheckStoredHeaders = %v, want an error saying %q", tt.name, err, tt.says)
		} else if strings.Contains(err.Error(), "a\r\nb") {
			t.Errorf("%s: the error shows the value: %v", tt.name, err)
		}
	}
}

// headersReceiver is a loopback endpoint that records the headers of
// every request, and answers the verification challenge with the
// endpoint's secret (once it is set).
type headersReceiver struct {
	srv    *httptest.Server
	secret atomic.Pointer[string]

	mu         sync.Mutex
	challenges []http.Header
	attempts   []http.Header
}

func newHeadersReceiver(t *testing.T) *headersReceiver {
	rc := &headersReceiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if nonce := r.Header.Get(engine.HeaderChallenge); nonce != "" {
			rc.challenges = append(rc.challenges, r.Header.Clone())
			if s := rc.secret.Load(); s != nil {
				resp, _ := verify.ChallengeResponse(*s, nonce)
				w.Header().Set(engine.HeaderChallengeResponse, resp)
			}
			return
		}
		rc.attempts = append(rc.attempts, r.Header.Clone())
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *headersReceiver) counts() (challenges, attempts int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.challenges), len(rc.attempts)
}

// TestDispatcher_customHeaders: an endpoint's custom headers go with
// its verification challenge, each attempt and a test event, beside
// webhookd's own; an endpoint without them gets none. On the bbolt store
// with a secret key too, where the values are sealed at rest and opened
// for the attempts.
func TestDispatcher_customHeaders(t *testing.T) {
	stores := []struct {
		name string
		open func(t *testing.T) engine.Store
	}{
		{"memstore", func(*testing.T) engine.Store { return memstore.New() }},
		{"bbolt sealed", func(t *testing.T) engine.Store {
			db, err := storage.Open(filepath.Join(t.TempDir(), "webhookd.db"), storage.Options{SecretKey: []byte("0123456789abcdef0123456789abcdef")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) { testCustomHeaders(t, st.open(t)) })
	}
}

func testCustomHeaders(t *testing.T, store engine.Store) {
	ctx := context.Background()
	targets := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	node := engine.NewNode(store, engine.NodeOptions{
		Dispatcher: engine.DispatcherOptions{Client: loopbackClient(4), Workers: 4, Targets: targets},
		Service:    engine.ServiceOptions{Targets: targets, RequireEndpointVerification: true},
	})
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Stop(context.Background()) })
	svc := node.Service
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	with, plain := newHeadersReceiver(t), newHeadersReceiver(t)
	const token = "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhY21lIn0.c2lnbmF0dXJl"
	ep, secret, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: with.srv.URL + "/in", EventTypes: []string{"*"},
		Headers: map[string]string{"authorization": token, "X-Tenant": "acme-eu"}})
	if err != nil {
		t.Fatal(err)
	}
	with.secret.Store(&secret)
	ep2, secret2, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: plain.srv.URL + "/in", EventTypes: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	plain.secret.Store(&secret2)
	if _, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if !poll(10*time.Second, func() bool { _, a := with.counts(); _, b := plain.counts(); return a == 1 && b == 1 }) {
		t.Fatalf("no attempt reached the receivers (%v, %v)", func() []int { c, a := with.counts(); return []int{c, a} }(), func() []int { c, a := plain.counts(); return []int{c, a} }())
	}
	if _, err := svc.SendTestEvent(ctx, "acme", ep.ID, engine.TestEventInput{}); err != nil {
		t.Fatal(err)
	}
	if !poll(10*time.Second, func() bool { _, a := with.counts(); return a == 2 }) {
		t.Fatal("the test event did not reach the receiver")
	}

	with.mu.Lock()
	defer with.mu.Unlock()
	if len(with.challenges) == 0 {
		t.Fatal("the endpoint was not challenged")
	}
	for what, hs := range map[string][]http.Header{"challenge": with.challenges, "attempt": with.attempts} {
		for i, h := range hs {
			if got := h.Get("Authorization"); got != token {
				t.Errorf("%s %d: Authorization %q, want the endpoint's", what, i, got)
			}
			if got := h.Values("X-Tenant"); !reflect.DeepEqual(got, []string{"acme-eu"}) {
				t.Errorf("%s %d: X-Tenant %q, want [acme-eu]", what, i, got)
			}
			if h.Get("User-Agent") == "" {
				t.Errorf("%s %d: no User-Agent", what, i)
			}
		}
	}
	for i, h := range with.attempts {
		if h.Get(verify.HeaderSignature) == "" || h.Get("Content-Type") != "application/json" {
			t.Errorf("attempt %d lost webhookd's own headers: %v", i, h)
		}
	}
	plain.mu.Lock()
	defer plain.mu.Unlock()
	for i, h := range append(plain.challenges, plain.attempts...) {
		if h.Get("Authorization") != "" || h.Get("X-Tenant") != "" {
			t.Errorf("request %d to the endpoint without headers carried %v", i, h)
		}
	}
	_ = ep2
}
