package httpapi_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
)

// testClock is a service clock a test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// issuedJSON is the answer of POST .../access-tokens.
type issuedJSON struct {
	ID          string    `json:"id"`
	Token       string    `json:"token"`
	Tenant      string    `json:"tenant"`
	Environment string    `json:"environment"`
	Created     time.Time `json:"created"`
	Expires     time.Time `json:"expires"`
	Revoked     time.Time `json:"revoked"`
}

// issue makes a tenant token for tenant with the admin token.
func (e *apiEnv) issue(tenant, body string) issuedJSON {
	e.t.Helper()
	var tok issuedJSON
	r := e.must(req{method: "POST", path: "/v1/tenants/" + tenant + "/access-tokens", body: body}, 201, &tok)
	if r.header.Get("Cache-Control") != "no-store" {
		e.t.Errorf("an issued token is sent without Cache-Control: no-store")
	}
	return tok
}

func TestAccessTokens_IssueListRevoke(t *testing.T) {
	e := newSecurityEnv(t, engine.ServiceOptions{}, httpapi.Options{TenantTokenTTL: 2 * time.Hour})
	e.must(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme"}`}, 201, nil)
	e.must(req{method: "PUT", path: "/v1/event-types/payment.succeeded"}, 201, nil)

	tok := e.issue("acme", "")
	if !strings.HasPrefix(tok.Token, engine.AccessTokenPrefix) || !strings.HasPrefix(tok.ID, "tok_") || tok.Tenant != "acme" || tok.Environment != "live" {
		t.Fatalf("issued %+v", tok)
	}
	if got := tok.Expires.Sub(tok.Created); got != 2*time.Hour {
		t.Errorf("lifetime %s, want the configured 2h", got)
	}
	if ttl := e.issue("acme", `{"ttl":"30m"}`); ttl.Expires.Sub(ttl.Created) != 30*time.Minute {
		t.Errorf("ttl 30m: lifetime %s", ttl.Expires.Sub(ttl.Created))
	}
	checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/acme/access-tokens", body: `{"ttl":"721h"}`}), 422, engine.CodeInvalidField, "ttl")
	checkProblem(t, e.do(req{method: "POST", path: "/v1/tenants/nobody/access-tokens"}), 404, engine.CodeTenantNotFound, "tenant")

	t.Run("listed without values", func(t *testing.T) {
		r := e.must(req{method: "GET", path: "/v1/tenants/acme/access-tokens"}, 200, nil)
		if strings.Contains(r.String(), tok.Token) || !strings.Contains(r.String(), tok.ID) {
			t.Errorf("listing %s", r)
		}
	})

	as := bearer(tok.Token)
	t.Run("works on its tenant", func(t *testing.T) {
		for _, rq := range []req{
			{method: "GET", path: "/v1/tenants/acme"},
			{method: "GET", path: "/v1/tenants/acme/endpoints"},
			{method: "GET", path: "/v1/tenants/acme/deliveries?state=dead"},
			{method: "GET", path: "/v1/tenants/acme/dead-letters"},
			{method: "GET", path: "/v1/tenants/acme/events"},
			{method: "GET", path: "/v1/tenants/acme/report?last=10"},
			{method: "GET", path: "/v1/event-types"},
		} {
			rq.header = as
			e.must(rq, 200, nil)
		}
		e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/t","event_types":["*"]}`, header: as}, 201, nil)
	})

	t.Run("revoked: 401 at once", func(t *testing.T) {
		e.must(req{method: "DELETE", path: "/v1/tenants/acme/access-tokens/" + tok.ID}, 204, nil)
		checkProblem(t, e.do(req{method: "GET", path: "/v1/tenants/acme/endpoints", header: as}), 401, engine.CodeUnauthorized, "")
		e.must(req{method: "DELETE", path: "/v1/tenants/acme/access-tokens/" + tok.ID}, 204, nil) // again: still 204
		checkProblem(t, e.do(req{method: "DELETE", path: "/v1/tenants/acme/access-tokens/tok_01hzzzzzzzzzzzzzzzzzzzzzzz"}), 404, engine.CodeNotFound, "id")
		var list struct{ Data []issuedJSON }
		e.must(req{method: "GET", path: "/v1/tenants/acme/access-tokens"}, 200, &list)
		if len(list.Data) != 2 || list.Data[0].Revoked.IsZero() || list.Data[0].Token != "" {
			t.Errorf("after revoking: %+v", list.Data)
		}
	})
}

func TestAuth_TenantTokenActsOnItsTenantOnly(t *testing.T) {
	e := newSecurityEnv(t, engine.ServiceOptions{}, httpapi.Options{})
	e.must(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme"}`}, 201, nil)
	e.must(req{method: "PUT", path: "/v1/tenants/globex", body: `{"name":"Globex"}`}, 201, nil)
	e.must(req{method: "PUT", path: "/v1/event-types/payment.succeeded"}, 201, nil)
	var globexEP endpointJSON
	e.must(req{method: "POST", path: "/v1/tenants/globex/endpoints", body: `{"url":"https://hooks.example.com/g","event_types":["*"]}`}, 201, &globexEP)
	before := e.snapshot()
	as := bearer(e.issue("acme", "").Token)

	// Every answer on another tenant's route, existing or not, is this.
	var generic string
	forbidden := []req{
		{method: "GET", path: "/v1/tenants/globex"},
		{method: "GET", path: "/v1/tenants/nobody"},
		{method: "GET", path: "/v1/tenants/globex/endpoints"},
		{method: "GET", path: "/v1/tenants/nobody/endpoints"},
		{method: "GET", path: "/v1/tenants/globex/endpoints/" + globexEP.ID},
		{method: "DELETE", path: "/v1/tenants/globex/endpoints/" + globexEP.ID},
		{method: "POST", path: "/v1/tenants/globex/endpoints/" + globexEP.ID + "/secret/rotate"},
		{method: "GET", path: "/v1/tenants/globex/deliveries"},
		{method: "GET", path: "/v1/tenants/nobody/deliveries"},
		{method: "POST", path: "/v1/tenants/globex/dead-letters/replay", body: `{"since":"2020-01-01T00:00:00Z"}`},
		{method: "GET", path: "/v1/tenants/globex/report"},
		{method: "POST", path: "/v1/tenants/globex/events", body: `{"type":"payment.succeeded","data":{}}`},
		// Routes of its own tenant that are the operator's:
		{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Evil"}`},
		{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`},
		{method: "POST", path: "/v1/tenants/acme/access-tokens"},
		{method: "GET", path: "/v1/tenants/acme/access-tokens"},
		// Routes of nobody's:
		{method: "PUT", path: "/v1/event-types/payment.refunded"},
		{method: "GET", path: "/v1/admin/backup"},
		{method: "GET", path: "/v1/admin/report"},
	}
	for _, rq := range forbidden {
		t.Run("403 "+rq.method+" "+rq.path, func(t *testing.T) {
			rq.header = as
			r := e.do(rq)
			checkProblem(t, r, 403, engine.CodeForbidden, "")
			if generic == "" {
				generic = r.String()
			}
			if r.String() != generic {
				t.Errorf("body %s differs from %s: it may tell something", r, generic)
			}
			if strings.Contains(r.String(), "globex") || strings.Contains(r.String(), "nobody") {
				t.Errorf("the answer names the tenant: %s", r)
			}
		})
	}
	if after := e.snapshot(); after != before {
		t.Errorf("a tenant token changed data it may not:\n%s\nwas\n%s", after, before)
	}
	var still endpointJSON
	e.must(req{method: "GET", path: "/v1/tenants/globex/endpoints/" + globexEP.ID}, 200, &still)
	if !still.Updated.Equal(globexEP.Updated) {
		t.Errorf("globex's endpoint changed: %+v", still)
	}
}

func TestAuth_TenantTokenExpires(t *testing.T) {
	clock := &testClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	e := newSecurityEnv(t, engine.ServiceOptions{Now: clock.Now}, httpapi.Options{})
	e.must(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme"}`}, 201, nil)
	as := bearer(e.issue("acme", `{"ttl":"1h"}`).Token)
	e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints", header: as}, 200, nil)
	clock.Add(59 * time.Minute)
	e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints", header: as}, 200, nil)
	clock.Add(time.Minute)
	expired := e.do(req{method: "GET", path: "/v1/tenants/acme/endpoints", header: as})
	checkProblem(t, expired, 401, engine.CodeUnauthorized, "")
	unknown := e.do(req{method: "GET", path: "/v1/tenants/acme/endpoints", header: bearer(engine.AccessTokenPrefix + "bm90LWEtcmVhbC10b2tlbi1hdC1hbGwtMDEyMzQ1Njc4OQ")})
	if expired.String() != unknown.String() {
		t.Errorf("an expired token answers %s, an unknown one %s: they must not differ", expired, unknown)
	}
}

func TestReplay_RecordsTheTenantToken(t *testing.T) {
	e := newSecurityEnv(t, engine.ServiceOptions{}, httpapi.Options{})
	e.fixture() // acme, payment.succeeded, one endpoint
	var ing struct {
		Deliveries []struct{ ID string } `json:"deliveries"`
	}
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, &ing)
	tok := e.issue("acme", "")
	var d struct {
		Replays []struct{ By string } `json:"replays"`
	}
	e.must(req{method: "POST", path: "/v1/tenants/acme/deliveries/" + ing.Deliveries[0].ID + "/replay", header: bearer(tok.Token)}, 202, &d)
	if len(d.Replays) != 1 || d.Replays[0].By != "token "+tok.ID {
		t.Errorf("replays %+v, want one by %q", d.Replays, "token "+tok.ID)
	}
	e.must(req{method: "POST", path: "/v1/tenants/acme/deliveries/" + ing.Deliveries[0].ID + "/replay"}, 202, &d)
	if len(d.Replays) != 2 || d.Replays[1].By != "admin" {
		t.Errorf("replays %+v, want the second by admin", d.Replays)
	}
}

func TestAdminReport_AllTenants(t *testing.T) {
	e := newSecurityEnv(t, engine.ServiceOptions{}, httpapi.Options{})
	e.fixture()
	e.must(req{method: "PUT", path: "/v1/tenants/globex", body: `{"name":"Globex"}`}, 201, nil)
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, nil)
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, nil)
	var rep struct {
		Tenants []struct {
			Tenant     string `json:"tenant"`
			Events     int    `json:"events"`
			Deliveries int    `json:"deliveries"`
			Pending    int    `json:"pending"`
		} `json:"tenants"`
		Total struct {
			Events     int `json:"events"`
			Deliveries int `json:"deliveries"`
			Pending    int `json:"pending"`
		} `json:"total"`
	}
	e.must(req{method: "GET", path: "/v1/admin/report?last=1000"}, 200, &rep)
	if len(rep.Tenants) != 2 || rep.Tenants[0].Tenant != "acme" || rep.Tenants[0].Events != 2 || rep.Tenants[1].Tenant != "globex" || rep.Tenants[1].Events != 0 {
		t.Errorf("tenants %+v", rep.Tenants)
	}
	if rep.Total.Events != 2 || rep.Total.Deliveries != 2 || rep.Total.Pending != 2 {
		t.Errorf("total %+v", rep.Total)
	}
	checkProblem(t, e.do(req{method: "GET", path: "/v1/admin/report?last=0"}), 422, engine.CodeInvalidField, "last")
	checkProblem(t, e.do(req{method: "GET", path: "/v1/admin/report", header: bearer(testEnvTk)}), 403, engine.CodeForbidden, "")
}
