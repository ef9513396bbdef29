package httpapi_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestConsole_Channels: the endpoint forms take a comma-separated
// Channels field (a bad channel is the form's error, naming it, and
// changes nothing); the endpoints list, the delivery log's rows, the
// delivery's and the event's pages show the channels; the delivery log
// filters by channel, and keeps the filter on its page links.
func TestConsole_Channels(t *testing.T) {
	e := newConsoleEnv(t)
	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	list := b.get("/console/t/acme/endpoints")
	if !strings.Contains(list.body, `name="channels"`) {
		t.Fatal("the new endpoint form has no channels field")
	}
	csrf := list.field(t, csrfField)
	post := func(path string, form url.Values) page {
		return b.do("POST", path, form, "Origin", e.srv.URL)
	}
	form := func(chs string) url.Values {
		return url.Values{"csrf": {csrf}, "url": {"https://hooks.example.com/chan"}, "type": {"payment.succeeded"}, "channels": {chs}}
	}
	errorLine := regexp.MustCompile(`<p class="error" role="alert" id="error">([^<]*)</p>`)
	before := e.snapshot()
	for chs, want := range map[string]string{
		"project_1, not ok":     `channels[1] "not ok" is not a channel`,
		"a,b,c,d,e,f,g,h,i,j,k": "at most 10",
		"a, a":                  `channel "a" is listed twice`,
	} {
		p := post("/console/t/acme/endpoints", form(chs))
		m := errorLine.FindStringSubmatch(p.body)
		if p.status != http.StatusUnprocessableEntity || m == nil || !strings.Contains(html.UnescapeString(m[1]), want) {
			t.Errorf("channels %q: %d, error %q; want 422 saying %s", chs, p.status, m, want)
		}
	}
	if after := e.snapshot(); after != before {
		t.Errorf("a refused form changed the state:\n%s\nwant\n%s", after, before)
	}
	if p := post("/console/t/acme/endpoints", form(" project_1 ,, Org-2.eu ")); p.status != http.StatusCreated {
		t.Fatalf("add an endpoint with channels: %d\n%s", p.status, p.body)
	}
	var eps struct {
		Data []struct {
			ID       string
			Channels []string `json:"channels"`
		} `json:"data"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/endpoints"}, 200, &eps)
	if len(eps.Data) != 2 || !slices.Equal(eps.Data[1].Channels, []string{"project_1", "Org-2.eu"}) {
		t.Fatalf("endpoints after the form: %+v", eps.Data)
	}
	id := eps.Data[1].ID
	if p := b.get("/console/t/acme/endpoints"); !strings.Contains(p.body, `class="channels">channels <code>project_<wbr>1</code>`) {
		t.Errorf("the endpoints list does not show the channels:\n%s", p.body)
	}
	edit := b.get("/console/t/acme/endpoints/" + id + "/edit")
	if !strings.Contains(edit.body, `value="project_1, Org-2.eu"`) {
		t.Errorf("the edit form does not hold the channels:\n%s", edit.body)
	}
	save := func(chs string) page {
		return post("/console/t/acme/endpoints/"+id, url.Values{"csrf": {csrf}, "url": {"https://hooks.example.com/chan"}, "type": {"payment.succeeded"}, "ordering": {"none"}, "on_dead": {"skip"}, "channels": {chs}})
	}
	if p := save("project_2, b@d"); p.status != http.StatusUnprocessableEntity || !strings.Contains(html.UnescapeString(p.body), `channels[1] "b@d" is not a channel`) {
		t.Errorf("save a bad channel: %d\n%s", p.status, p.body)
	}
	if p := save("project_2"); p.status != http.StatusSeeOther {
		t.Fatalf("save channels: %d\n%s", p.status, p.body)
	}

	var on, off ingestJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","channels":["project_2","zone.eu"],"data":{}}`}, 202, &on)
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, &off)
	if len(on.Deliveries) != 2 || len(off.Deliveries) != 1 {
		t.Fatalf("deliveries: %d on channels, %d on none; want 2 and 1", len(on.Deliveries), len(off.Deliveries))
	}
	log := b.get("/console/t/acme/deliveries")
	if !strings.Contains(log.body, `id="filter-channel"`) || !strings.Contains(log.body, `<small class="channels">project_<wbr>2, zone.<wbr>eu</small>`) {
		t.Errorf("the delivery log has no channel filter or no channels under the event type:\n%s", log.body)
	}
	filtered := b.get("/console/t/acme/deliveries?channel=zone.eu")
	for _, d := range on.Deliveries {
		if !strings.Contains(filtered.body, d.ID) {
			t.Errorf("the log filtered on zone.eu lacks %s", d.ID)
		}
	}
	if strings.Contains(filtered.body, off.Deliveries[0].ID) || !strings.Contains(filtered.body, `value="zone.eu"`) {
		t.Errorf("the log filtered on zone.eu shows %s, or lost the filter", off.Deliveries[0].ID)
	}
	if p := b.get("/console/t/acme/deliveries?channel=no%20such"); p.status != http.StatusUnprocessableEntity || !errorLine.MatchString(p.body) {
		t.Errorf("a bad channel filter: %d", p.status)
	}
	for _, path := range []string{"/console/t/acme/deliveries/" + on.Deliveries[0].ID, "/console/t/acme/events/" + on.ID} {
		if p := b.get(path); !strings.Contains(p.body, `<dd id="channels"><code>project_2</code>, <code>zone.eu</code></dd>`) {
			t.Errorf("%s does not show the channels:\n%s", path, p.body)
		}
	}
	if p := b.get("/console/t/acme/deliveries/" + off.Deliveries[0].ID); strings.Contains(p.body, `id="channels"`) {
		t.Error("a delivery on no channel shows a Channels line")
	}
}
