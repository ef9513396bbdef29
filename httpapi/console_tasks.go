package httpapi

import (
	"net/http"
	"net/url"

	"github.com/julienschmidt/httprouter"

	"github.com/webhookd/webhookd/engine"
)

// The console's task pages: a tenant's tasks under its pages (a range
// replay, a backfill), and every task, the operator's purges included,
// for an admin (/console/tasks).

// tasksData is a tasks page's data.
type tasksData struct {
	Tasks []engine.Task
	All   bool // every tenant's: the tenant column, the admin's links
	// Newest and Older are the paging links; "" when there is none.
	Newest, Older string
}

// taskData is a task page's data.
type taskData struct {
	T   engine.Task
	All bool // the admin's page of any task
	// Back is the list the page came from.
	Back string
}

// taskKinds name each kind of task in words, for the pages.
var taskKinds = map[engine.TaskKind]string{
	engine.TaskReplay:   "Replay of dead letters",
	engine.TaskBackfill: "Backfill of an endpoint",
	engine.TaskPurge:    "Purge of a deleted tenant",
}

// taskKind names kind in words (the kind itself for one this code does
// not know).
func taskKind(kind engine.TaskKind) string {
	if s, ok := taskKinds[kind]; ok {
		return s
	}
	return string(kind)
}

// handleTenantTasksPage lists the tenant's tasks, newest first.
func (s *server) handleTenantTasksPage(w http.ResponseWriter, r *http.Request, _ httprouter.Params, v *visit) {
	cursor := r.URL.Query().Get("cursor")
	ts, next, err := s.svc.TenantTasks(r.Context(), v.tenant.ID, cursor, consolePageSize)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	s.renderTasks(w, r, v, tasksData{Tasks: ts}, tenantPath(v.tenant.ID, "tasks"), cursor, next, "tasks")
}

// handleTasksPage lists every task, an admin's page: a tenant token's
// principal goes to its own tenant's.
func (s *server) handleTasksPage(w http.ResponseWriter, r *http.Request, _ httprouter.Params, v *visit) {
	if v.p.tenant != "" {
		http.Redirect(w, r, tenantPath(v.p.tenant, "tasks"), http.StatusSeeOther)
		return
	}
	if err := s.allow(r.Context(), v.p, scopeAdmin, ""); err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	cursor := r.URL.Query().Get("cursor")
	ts, next, err := s.svc.Tasks(r.Context(), cursor, consolePageSize)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	s.renderTasks(w, r, v, tasksData{Tasks: ts, All: true}, "/console/tasks", cursor, next, "all-tasks")
}

func (s *server) renderTasks(w http.ResponseWriter, r *http.Request, v *visit, data tasksData, base, cursor, next, nav string) {
	if cursor != "" {
		data.Newest = base
	}
	if next != "" {
		data.Older = base + "?" + url.Values{"cursor": {next}}.Encode()
	}
	p := s.newPage(v, "Tasks", nav)
	p.Notice = notice(r)
	p.Data = data
	s.render(w, r, http.StatusOK, "tasks", p)
}

// handleTenantTaskPage shows one of the tenant's tasks; it reloads
// itself while the task runs.
func (s *server) handleTenantTaskPage(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	t, err := s.svc.TenantTask(r.Context(), v.tenant.ID, ps.ByName("id"))
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	s.renderTask(w, r, v, taskData{T: t, Back: tenantPath(v.tenant.ID, "tasks")}, "tasks")
}

// handleTaskPage shows any task, an admin's page.
func (s *server) handleTaskPage(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	if err := s.allow(r.Context(), v.p, scopeAdmin, ""); err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	t, err := s.svc.Task(r.Context(), ps.ByName("id"))
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	s.renderTask(w, r, v, taskData{T: t, All: true, Back: "/console/tasks"}, "all-tasks")
}

func (s *server) renderTask(w http.ResponseWriter, r *http.Request, v *visit, data taskData, nav string) {
	p := s.newPage(v, taskKind(data.T.Kind), nav)
	p.Notice = notice(r)
	p.Data = data
	s.render(w, r, http.StatusOK, "task", p)
}
