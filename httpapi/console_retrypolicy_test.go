package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsole_RetryPolicy: the endpoint forms offer a "Retry policy"
// select (the tenant's default, then each of the server's policies with
// a one-line summary) and save the choice, refusing a name the server
// does not have; a delivery's page says which policy its cycle follows
// and how many attempts it has left.
func TestConsole_RetryPolicy(t *testing.T) {
	e := retryPolicyEnv(t)
	ep := e.fixture()
	e.must(req{method: "PUT", path: "/v1/tenants/acme", body: `{"name":"Acme","retry_policy":"extended"}`}, 200, nil)
	tok := e.issue("acme", "")
	b := e.browser()
	b.mustLogin(tok.Token, "/console/t/acme/endpoints")
	list := b.get("/console/t/acme/endpoints")
	for _, want := range []string{
		`<select id="ep-retry" name="retry_policy">`,
		`<option value="" selected>the tenant's default: extended, 8 attempts within 28 h</option>`,
		`<option value="standard">standard: 6 attempts within 75 min</option>`,
		`<option value="deploys">deploys: 4 attempts within 5 min, retries 404</option>`,
	} {
		if !strings.Contains(list.body, want) {
			t.Errorf("the new endpoint form lacks %s", want)
		}
	}
	csrf := list.field(t, csrfField)
	post := func(path string, form url.Values) page {
		return b.do("POST", path, form, "Origin", e.srv.URL)
	}
	if p := post("/console/t/acme/endpoints", url.Values{"csrf": {csrf}, "url": {"https://hooks.example.com/b"}, "type": {"*"}, "retry_policy": {"nightly"}}); p.status != http.StatusUnprocessableEntity {
		t.Errorf("an unknown policy: %d", p.status)
	}
	created := post("/console/t/acme/endpoints", url.Values{"csrf": {csrf}, "url": {"https://hooks.example.com/b"}, "type": {"*"}, "retry_policy": {"standard"}})
	if created.status != http.StatusCreated {
		t.Fatalf("add endpoint: %d\n%s", created.status, created.body)
	}
	var eps struct {
		Data []struct {
			ID          string
			RetryPolicy string `json:"retry_policy"`
		} `json:"data"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints"}, 200, &eps)
	if len(eps.Data) != 2 || eps.Data[1].RetryPolicy != "standard" {
		t.Fatalf("endpoints after the forms: %+v, want a second one on standard (the refused form made none)", eps.Data)
	}
	// A third follows the tenant's.
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/c","event_types":["*"]}`}, 201, nil)

	edit := b.get("/console/t/acme/endpoints/" + ep.ID + "/edit")
	if !strings.Contains(edit.body, `<option value="" selected>the tenant's default: extended, 8 attempts within 28 h</option>`) {
		t.Errorf("the edit form does not select the tenant's default:\n%s", edit.body)
	}
	form := url.Values{"csrf": {csrf}, "url": {"https://hooks.example.com/in"}, "type": {"payment.succeeded"}, "ordering": {"none"}, "on_dead": {"skip"}, "retry_policy": {"deploys"}}
	if p := post("/console/t/acme/endpoints/"+ep.ID, form); p.status != http.StatusSeeOther {
		t.Fatalf("save: %d\n%s", p.status, p.body)
	}
	if edit := b.get("/console/t/acme/endpoints/" + ep.ID + "/edit"); !strings.Contains(edit.body, `<option value="deploys" selected>deploys: 4 attempts within 5 min, retries 404</option>`) {
		t.Errorf("the edit form does not select deploys after the save")
	}
	form.Set("retry_policy", "nightly")
	if p := post("/console/t/acme/endpoints/"+ep.ID, form); p.status != http.StatusUnprocessableEntity {
		t.Errorf("an unknown policy: %d", p.status)
	}

	var ing ingestJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, &ing)
	if len(ing.Deliveries) != 3 {
		t.Fatalf("%d deliveries, want 3", len(ing.Deliveries))
	}
	for _, d := range ing.Deliveries {
		page := b.get("/console/t/acme/deliveries/" + d.ID)
		want := `<span id="policy-name">extended</span>: 8 attempts within 28 h; <span id="attempts-left">8 attempts left</span> in this cycle`
		switch d.EndpointID {
		case ep.ID:
			want = `<span id="policy-name">deploys</span>: 4 attempts within 5 min, retries 404; <span id="attempts-left">4 attempts left</span> in this cycle`
		case eps.Data[1].ID:
			want = `<span id="policy-name">standard</span>: 6 attempts within 75 min; <span id="attempts-left">6 attempts left</span> in this cycle`
		}
		if !strings.Contains(page.body, want) {
			t.Errorf("the page of the delivery to %s lacks %s", d.EndpointID, want)
		}
	}
}
