package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
)

// TestConsole_Tasks: an admin's Tasks page lists every task, a deleted
// tenant's purge included, and shows any; a tenant token is sent to its
// tenant's tasks and may not read the operator's; a portal session's
// task page shows the task in its customer's words: no task ID, no API
// path, the operator by the brand's name.
func TestConsole_Tasks(t *testing.T) {
	e := newConsoleEnv(t)
	purge := e.startTask(req{method: "DELETE", path: "/v1/tenants/globex"})
	e.waitTask(purge)
	since := time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)
	replay := e.startTask(req{method: "POST", path: "/v1/tenants/acme/dead-letters/replay", body: `{"since":"` + since + `"}`})
	e.waitTask(replay)

	admin := e.browser()
	admin.mustLogin(testToken, "/console/tenants")
	list := admin.get("/console/tasks")
	for _, want := range []string{`data-task="` + purge.ID + `"`, `data-task="` + replay.ID + `"`, "Purge of a deleted tenant", "Replay of dead letters", "<code>globex</code> <small>(deleted)</small>", `href="/console/tasks/` + purge.ID + `"`} {
		if !strings.Contains(list.body, want) {
			t.Errorf("the admin's tasks page has no %s:\n%s", want, list.body)
		}
	}
	if strings.Index(list.body, replay.ID) > strings.Index(list.body, purge.ID) {
		t.Error("the tasks page is not newest first")
	}
	one := admin.get("/console/tasks/" + purge.ID)
	for _, want := range []string{"Purge of a deleted tenant", `id="task-state">succeeded<`, "<code>globex</code> (deleted", `id="task-id">` + purge.ID} {
		if !strings.Contains(one.body, want) {
			t.Errorf("the purge's page has no %s:\n%s", want, one.body)
		}
	}

	tenant := e.browser()
	tenant.mustLogin(e.token.Token, "/console/t/acme/endpoints")
	if p := tenant.get("/console/tasks"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/t/acme/tasks" {
		t.Errorf("a tenant token's /console/tasks: %d to %q", p.status, p.header.Get("Location"))
	}
	if p := tenant.get("/console/tasks/" + purge.ID); p.status != http.StatusForbidden {
		t.Errorf("a tenant token reads the operator's task: %d", p.status)
	}
	if p := tenant.get("/console/t/acme/tasks/" + purge.ID); p.status != http.StatusNotFound {
		t.Errorf("the purge read as acme's task: %d", p.status)
	}
	if p := tenant.get("/console/t/acme/tasks"); !strings.Contains(p.body, `data-task="`+replay.ID+`"`) || strings.Contains(p.body, purge.ID) {
		t.Errorf("acme's tasks page lists its replay only:\n%s", p.body)
	}

	// A running task's page reloads itself, and says what it waits for;
	// an ended one's does not reload.
	now := time.Now().UTC()
	running := engine.Task{ID: engine.NewID("task"), Tenant: "acme", Kind: engine.TaskBackfill, State: engine.TaskRunning,
		Params: engine.TaskParams{Since: now.Add(-time.Hour), Until: now, Endpoint: e.endpoint.ID}, Done: 7, Waiting: "pending_per_tenant",
		Started: now, Updated: now, Errors: []engine.TaskError{{At: now, Message: "storage cannot write now; retry later"}}}
	if err := e.db.CreateTask(t.Context(), running, 0); err != nil {
		t.Fatal(err)
	}
	p := tenant.get("/console/t/acme/tasks/" + running.ID)
	for _, want := range []string{`data-refresh="2"`, `id="task-state">running<`, "waiting for the tenant's deliveries not yet delivered to go down", `id="task-total">not known until it ends`, "storage cannot write now; retry later"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("a running task's page has no %s:\n%s", want, p.body)
		}
	}
	if p := tenant.get("/console/t/acme/tasks/" + replay.ID); strings.Contains(p.body, "data-refresh") {
		t.Errorf("an ended task's page reloads itself:\n%s", p.body)
	}
}

// TestPortal_TaskPage: a task's page in a portal session shows what the
// customer needs, in its words.
func TestPortal_TaskPage(t *testing.T) {
	e, _ := portalEnv(t, httpapi.ConsoleOptions{Brand: httpapi.Brand{Name: "Acme Hooks"}})
	since := time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)
	replay := e.startTask(req{method: "POST", path: "/v1/tenants/acme/dead-letters/replay", body: `{"since":"` + since + `"}`})
	e.waitTask(replay)
	b := e.browser()
	if p := b.open(link(e, `{"return_url":"https://app.example.com/settings"}`)); p.status != http.StatusSeeOther {
		t.Fatalf("open: %d\n%s", p.status, p.body)
	}
	p := b.get("/console/t/acme/tasks/" + replay.ID)
	if p.status != http.StatusOK || !strings.Contains(p.body, "Replay of dead letters") || !strings.Contains(p.body, "by Acme Hooks") {
		t.Fatalf("the portal's task page: %d\n%s", p.status, p.body)
	}
	for _, never := range []string{`id="task-id"`, "/v1/", "admin"} {
		if strings.Contains(p.body, never) {
			t.Errorf("the portal's task page shows %q:\n%s", never, p.body)
		}
	}
	if list := b.get("/console/t/acme/tasks"); strings.Contains(list.body, "/v1/") || !strings.Contains(list.body, replay.ID) {
		t.Errorf("the portal's tasks page:\n%s", list.body)
	}
}
