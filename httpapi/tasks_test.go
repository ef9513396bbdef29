package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// maxTasks is the API tests' [limits] tasks_per_tenant.
const maxTasks = 4

// taskJSON is a task as the API answers it.
type taskJSON struct {
	ID       string         `json:"id"`
	Tenant   string         `json:"tenant"`
	Kind     string         `json:"kind"`
	State    string         `json:"state"`
	Params   map[string]any `json:"params"`
	Done     int            `json:"done"`
	Skipped  int            `json:"skipped"`
	Total    *int           `json:"total"`
	Errors   []any          `json:"errors"`
	Error    string         `json:"error"`
	By       string         `json:"by"`
	Started  string         `json:"started"`
	Finished string         `json:"finished"`
	location string
}

// startTask sends rq, which starts a task: 202 {"task": …} running, with
// the task's Location.
func (e *apiEnv) startTask(rq req) taskJSON {
	e.t.Helper()
	var got struct{ Task taskJSON }
	r := e.must(rq, http.StatusAccepted, &got)
	t := got.Task
	t.location = r.header.Get("Location")
	want := "/v1/tasks/" + t.ID
	if t.Tenant != "" {
		want = "/v1/tenants/" + t.Tenant + "/tasks/" + t.ID
	}
	if t.location != want || !strings.HasPrefix(t.ID, "task_") || t.State != "running" || t.Total != nil || t.Errors == nil {
		e.t.Errorf("%s %s started %+v at %q, want a running task at %s", rq.method, rq.path, t, t.location, want)
	}
	return t
}

// waitTask reads t at its Location until it ends, 10 s at most.
func (e *apiEnv) waitTask(t taskJSON, header ...map[string]string) taskJSON {
	e.t.Helper()
	rq := req{method: "GET", path: t.location}
	if len(header) > 0 {
		rq.header = header[0]
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got taskJSON
		e.must(rq, 200, &got)
		if got.State != "running" || time.Now().After(deadline) {
			got.location = t.location
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAPI_Tasks: a range replay, a backfill and a tenant's deletion each
// answer a task; a tenant lists and reads its own tasks, newest first, a
// page at a time, and never another's or the operator's; an admin lists
// and reads every task, the purge included; a tenant token may not.
func TestAPI_Tasks(t *testing.T) {
	e := newAPIEnv(t)
	ep := e.fixture()
	e.must(req{method: "PUT", path: "/v1/tenants/globex", body: `{"name":"Globex"}`}, 201, nil)
	since := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano)

	replay := e.startTask(req{method: "POST", path: "/v1/tenants/acme/dead-letters/replay", body: `{"since":"` + since + `","endpoint":"` + ep.ID + `"}`})
	if replay.Kind != "dead_letters.replay" || replay.Params["endpoint"] != ep.ID || replay.Params["until"] == nil {
		t.Errorf("the replay's task: %+v", replay)
	}
	backfill := e.startTask(req{method: "POST", path: "/v1/tenants/acme/endpoints/" + ep.ID + "/backfill", body: `{"since":"` + since + `"}`})
	theirs := e.startTask(req{method: "POST", path: "/v1/tenants/globex/dead-letters/replay", body: `{"since":"` + since + `"}`})
	for _, tk := range []taskJSON{replay, backfill, theirs} {
		if done := e.waitTask(tk); done.State != "succeeded" || done.Total == nil || *done.Total != 0 || done.Finished == "" {
			t.Errorf("task %s ended %+v, want succeeded with nothing to do", tk.ID, done)
		}
	}

	// A tenant's own, newest first, a page at a time.
	var page struct {
		Data    []taskJSON `json:"data"`
		Next    *string    `json:"next_cursor"`
		HasMore bool       `json:"has_more"`
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/tasks?limit=1"}, 200, &page)
	if len(page.Data) != 1 || page.Data[0].ID != backfill.ID || !page.HasMore || page.Next == nil {
		t.Fatalf("acme's first page of 1: %+v", page)
	}
	e.must(req{method: "GET", path: "/v1/tenants/acme/tasks?limit=1&cursor=" + *page.Next}, 200, &page)
	if len(page.Data) != 1 || page.Data[0].ID != replay.ID || page.HasMore || page.Next != nil {
		t.Fatalf("acme's second page of 1: %+v", page)
	}
	checkProblem(t, e.do(req{method: "GET", path: "/v1/tenants/acme/tasks?cursor=nope"}), 422, engine.CodeInvalidField, "cursor")
	checkProblem(t, e.do(req{method: "GET", path: "/v1/tenants/acme/tasks?limit=0"}), 422, engine.CodeInvalidField, "limit")
	checkProblem(t, e.do(req{method: "GET", path: "/v1/tenants/acme/tasks/" + theirs.ID}), 404, engine.CodeTaskNotFound, "id")
	checkProblem(t, e.do(req{method: "GET", path: "/v1/tenants/acme/tasks/task_nope"}), 404, engine.CodeTaskNotFound, "id")
	checkProblem(t, e.do(req{method: "GET", path: "/v1/tenants/nobody/tasks"}), 404, engine.CodeTenantNotFound, "tenant")

	// A tenant token reads its tenant's, and no route of every task.
	tok := e.issue("acme", "")
	bearer := map[string]string{"Authorization": "Bearer " + tok.Token}
	if got := e.waitTask(replay, bearer); got.ID != replay.ID {
		t.Errorf("acme's token reads %+v", got)
	}
	checkProblem(t, e.do(req{method: "GET", path: "/v1/tenants/globex/tasks/" + theirs.ID, header: bearer}), 403, engine.CodeForbidden, "")
	checkProblem(t, e.do(req{method: "GET", path: "/v1/tasks", header: bearer}), 403, engine.CodeForbidden, "")
	checkProblem(t, e.do(req{method: "GET", path: "/v1/tasks/" + replay.ID, header: bearer}), 403, engine.CodeForbidden, "")

	// Deleting a tenant answers its purge, the operator's task.
	purge := e.startTask(req{method: "DELETE", path: "/v1/tenants/globex"})
	if purge.Tenant != "" || purge.Kind != "tenant.purge" || purge.Params["tenant"] != "globex" {
		t.Errorf("the deletion's task: %+v", purge)
	}
	if done := e.waitTask(purge); done.State != "succeeded" {
		t.Errorf("the purge ended %+v", done)
	}
	e.must(req{method: "GET", path: "/v1/tasks"}, 200, &page)
	var ids []string
	for _, tk := range page.Data {
		ids = append(ids, tk.ID)
	}
	if want := []string{purge.ID, backfill.ID, replay.ID}; strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Errorf("every task: %v, want %v (newest first, globex's gone with it but its purge)", ids, want)
	}
	checkProblem(t, e.do(req{method: "GET", path: "/v1/tasks/" + theirs.ID}), 404, engine.CodeTaskNotFound, "id")
	checkProblem(t, e.do(req{method: "GET", path: "/v1/tasks?state=running"}), 400, engine.CodeUnknownParameter, "state")
}
