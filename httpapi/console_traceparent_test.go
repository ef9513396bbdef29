package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsole_EndpointSendTraceparent: the operator's endpoint forms
// have a send_traceparent box, which create and save set and clear; a
// customer in the portal has none (it is the app's choice to show its
// trace IDs, not its customer's), and a save there leaves it as it is.
func TestConsole_EndpointSendTraceparent(t *testing.T) {
	e := newAPIEnv(t)
	e.fixture()
	tok := e.issue("acme", "")
	b := e.browser()
	b.mustLogin(tok.Token, "/console/t/acme/endpoints")
	list := b.get("/console/t/acme/endpoints")
	if !strings.Contains(list.body, `name="send_traceparent"`) {
		t.Fatal("the new endpoint form has no send_traceparent box")
	}
	csrf := list.field(t, csrfField)
	post := func(path string, form url.Values) page {
		t.Helper()
		return b.do("POST", path, form, "Origin", e.srv.URL)
	}
	type endpointJSON struct {
		ID              string `json:"id"`
		URL             string `json:"url"`
		SendTraceparent bool   `json:"send_traceparent"`
	}
	endpoints := func() []endpointJSON {
		t.Helper()
		var eps struct{ Data []endpointJSON }
		e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints"}, 200, &eps)
		return eps.Data
	}
	if p := post("/console/t/acme/endpoints", url.Values{"csrf": {csrf}, "url": {"https://hooks.example.com/traced"}, "type": {"*"}, "send_traceparent": {"yes"}}); p.status != http.StatusCreated {
		t.Fatalf("add with the box ticked: %d\n%s", p.status, p.body)
	}
	eps := endpoints()
	ep := eps[len(eps)-1]
	if !ep.SendTraceparent || eps[0].SendTraceparent {
		t.Fatalf("after adding one with the box ticked: %+v", eps)
	}
	editPath := "/console/t/acme/endpoints/" + ep.ID + "/edit"
	if edit := b.get(editPath); !strings.Contains(edit.body, `name="send_traceparent" value="yes" checked`) {
		t.Error("the edit form of an endpoint that sends it has the box unticked")
	}
	save := func(bb *browser, form url.Values) {
		t.Helper()
		form.Set("csrf", bb.get(editPath).field(t, csrfField))
		if p := bb.do("POST", "/console/t/acme/endpoints/"+ep.ID, form, "Origin", e.srv.URL); p.status != http.StatusSeeOther {
			t.Fatalf("save: %d\n%s", p.status, p.body)
		}
	}
	form := func() url.Values {
		return url.Values{"url": {ep.URL}, "type": {"*"}, "ordering": {"none"}, "on_dead": {"skip"}}
	}
	ticked := func() bool {
		t.Helper()
		var got endpointJSON
		e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints/" + ep.ID}, 200, &got)
		return got.SendTraceparent
	}

	pb := e.browser()
	pb.open(link(e, `{"return_url":"https://app.example.com/hooks"}`))
	if portal := pb.get(editPath); portal.status != http.StatusOK || strings.Contains(portal.body, "send_traceparent") {
		t.Errorf("the portal's edit form: %d, with a send_traceparent box: %v", portal.status, strings.Contains(portal.body, "send_traceparent"))
	}
	save(pb, form())
	if !ticked() {
		t.Error("a save in the portal cleared send_traceparent")
	}

	save(b, form()) // the operator's form, the box unticked
	if ticked() {
		t.Error("saving the form with the box unticked left send_traceparent on")
	}
	f := form()
	f.Set("send_traceparent", "yes")
	save(b, f)
	if !ticked() {
		t.Error("saving the form with the box ticked left send_traceparent off")
	}
}
