package httpapi_test

import (
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestConsole_Backfill: the endpoint's page has a Backfill form (since
// and until as datetime-local, a confirm); it starts a task that makes
// the deliveries the endpoint is missing and goes to the task's page,
// which shows how many, as the tenant's tasks page lists it; a second
// press makes none, and a missing since is the form's error and changes
// nothing.
func TestConsole_Backfill(t *testing.T) {
	e := newConsoleEnv(t)
	since := time.Now().UTC().Add(-time.Minute)
	for range 2 {
		e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, nil)
	}
	var late endpointJSON
	e.must(req{method: "POST", path: "/v1/tenants/acme/endpoints", body: `{"url":"https://hooks.example.com/late","event_types":["*"]}`}, 201, &late)

	b := e.browser()
	b.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	edit := b.get("/console/t/acme/endpoints/" + late.ID + "/edit")
	for _, want := range []string{`id="backfill-form"`, `data-confirm="`, `type="datetime-local" name="since"`, `type="datetime-local" name="until"`, `id="backfill-send"`} {
		if !strings.Contains(edit.body, want) {
			t.Fatalf("the endpoint's page has no %s:\n%s", want, edit.body)
		}
	}
	csrf := edit.field(t, csrfField)
	path := "/console/t/acme/endpoints/" + late.ID + "/backfill"
	post := func(form url.Values) page { return b.do("POST", path, form, "Origin", e.srv.URL) }

	before := e.snapshot()
	if p := post(url.Values{"csrf": {csrf}}); p.status != http.StatusUnprocessableEntity || !strings.Contains(html.UnescapeString(p.body), "since") {
		t.Errorf("backfill without since: %d\n%s", p.status, p.body)
	}
	if after := e.snapshot(); after != before {
		t.Errorf("a refused backfill changed the state:\n%s\nwant\n%s", after, before)
	}

	form := url.Values{"csrf": {csrf}, "since": {since.Format("2006-01-02T15:04:05")}}
	p := post(form)
	loc := p.header.Get("Location")
	if p.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/console/t/acme/tasks/task_") || !strings.Contains(loc, "m=backfill-started") {
		t.Fatalf("backfill: %d to %q\n%s", p.status, loc, p.body)
	}
	taskPage := strings.SplitN(loc, "?", 2)[0]
	id := strings.TrimPrefix(taskPage, "/console/t/acme/tasks/")
	e.waitTask(taskJSON{ID: id, location: "/v1/tenants/acme/tasks/" + id})
	var page struct{ Data []struct{ ID string } }
	e.must(req{method: "GET", path: "/v1/tenants/acme/deliveries?endpoint=" + late.ID}, 200, &page)
	if len(page.Data) < 2 { // the two above, and any the fixture ingested
		t.Errorf("%d deliveries to the endpoint after a backfill, want at least 2", len(page.Data))
	}
	back := b.get(loc)
	for _, want := range []string{"Backfill started", "Backfill of an endpoint", `id="task-state">succeeded<`, `id="task-done">` + strconv.Itoa(len(page.Data)) + " deliveries made", late.ID} {
		if !strings.Contains(back.body, want) {
			t.Errorf("the task's page does not say %q:\n%s", want, back.body)
		}
	}
	if p := b.get("/console/t/acme/tasks"); !strings.Contains(p.body, `data-task="`+id+`"`) {
		t.Errorf("the tenant's tasks page does not list the backfill:\n%s", p.body)
	}
	p = post(form)
	second := p.header.Get("Location")
	sid := strings.TrimPrefix(strings.SplitN(second, "?", 2)[0], "/console/t/acme/tasks/")
	e.waitTask(taskJSON{ID: sid, location: "/v1/tenants/acme/tasks/" + sid})
	if back := b.get(second); !strings.Contains(back.body, `id="task-done">0 deliveries made`) || !strings.Contains(back.body, `id="task-skipped">`+strconv.Itoa(len(page.Data))) {
		t.Errorf("a second backfill does not say none were made:\n%s", back.body)
	}
	if !strings.Contains(e.logs.String(), "endpoint backfill started") {
		t.Errorf("the operator's log has no line for the console's backfill:\n%s", e.logs.String())
	}
}
