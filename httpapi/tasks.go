package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/webhookd/webhookd/engine"
)

// Background tasks (engine/tasks.go): the routes that start one answer
// 202 {"task": …} at once; these read them.

// taskAnswer is the answer of a route that started a task.
type taskAnswer struct {
	Task engine.Task `json:"task"`
}

// writeTask answers t, just started, 202 with its location.
func (s *server) writeTask(w http.ResponseWriter, r *http.Request, t engine.Task) {
	loc := "/v1/tasks/" + t.ID
	if t.Tenant != "" {
		loc = "/v1/tenants/" + t.Tenant + "/tasks/" + t.ID
	}
	w.Header().Set("Location", loc)
	s.writeJSON(w, r, http.StatusAccepted, taskAnswer{t})
}

// pageQuery reads ?limit= (0 when absent: the engine's default) and
// ?cursor=.
func pageQuery(r *http.Request) (limit int, cursor string, err error) {
	q := r.URL.Query()
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > engine.MaxPageLimit {
			return 0, "", engine.Errorf(engine.CodeInvalidField, "limit", "limit must be an integer from 1 to %d", engine.MaxPageLimit)
		}
		limit = n
	}
	return limit, q.Get("cursor"), nil
}

// handleListTasks: GET /v1/tasks?limit=&cursor= (admin), newest first.
func (s *server) handleListTasks(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	limit, cursor, err := pageQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ts, next, err := s.svc.Tasks(r.Context(), cursor, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, list(ts, next))
}

// handleGetTask: GET /v1/tasks/:id (admin): a task of any tenant, or the
// operator's.
func (s *server) handleGetTask(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	t, err := s.svc.Task(r.Context(), ps.ByName("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, t)
}

// handleListTenantTasks: GET /v1/tenants/:tenant/tasks?limit=&cursor=.
func (s *server) handleListTenantTasks(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	limit, cursor, err := pageQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ts, next, err := s.svc.TenantTasks(r.Context(), ps.ByName("tenant"), cursor, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, list(ts, next))
}

// handleGetTenantTask: GET /v1/tenants/:tenant/tasks/:id.
func (s *server) handleGetTenantTask(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	t, err := s.svc.TenantTask(r.Context(), ps.ByName("tenant"), ps.ByName("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, t)
}

// logTaskStarted gives the operator's log one line for a task a request
// started, with who asked and what.
func (s *server) logTaskStarted(r *http.Request, msg string, t engine.Task) {
	attrs := []any{slog.String("task", t.ID), slog.String("kind", string(t.Kind)), slog.String("by", t.By)}
	if t.Tenant != "" {
		attrs = append(attrs, slog.String("tenant", t.Tenant))
	}
	p := t.Params
	if p.Tenant != "" {
		attrs = append(attrs, slog.String("tenant", p.Tenant), slog.Bool("force", p.Force))
	}
	if p.Endpoint != "" {
		attrs = append(attrs, slog.String("endpoint", p.Endpoint))
	}
	if !p.Since.IsZero() {
		attrs = append(attrs, slog.Time("since", p.Since), slog.Time("until", p.Until))
	}
	s.log.InfoContext(r.Context(), msg, attrs...)
}
