package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/webhookd/webhookd/engine"
)

// The console's operational endpoints page (engine/operational.go): the
// operator's own endpoints, which receive webhookd's operational events.
// Admin sessions of the live environment only, as the API's
// /v1/operational-endpoints: a test token, a tenant token and a portal
// session get 403.

// consoleOperator is consoleSession for the operator's own pages.
func (s *server) consoleOperator(h consoleHandler) httprouter.Handle {
	return s.consoleSession(func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
		if err := s.allow(r.Context(), v.p, scopeAdmin, ""); err != nil {
			s.consoleError(w, r, v, err)
			return
		}
		h(w, r, ps, v)
	})
}

// operationalData is the operational endpoints page's data.
type operationalData struct {
	Endpoints []engine.OperationalEndpoint
	Types     []engine.OperationalEventType
	Max       int
}

// handleOperationalPage lists the operational endpoints, with a form
// that makes one.
func (s *server) handleOperationalPage(w http.ResponseWriter, r *http.Request, _ httprouter.Params, v *visit) {
	eps, err := s.svc.OperationalEndpoints(r.Context())
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	p := s.newPage(v, "Operational webhooks", "operational")
	p.Notice = notice(r)
	p.Data = operationalData{Endpoints: eps, Types: engine.OperationalEventTypes, Max: engine.MaxOperationalEndpoints}
	s.render(w, r, http.StatusOK, "operational", p)
}

// operationalSecretData is the page that shows an operational endpoint's
// new secret, this once.
type operationalSecretData struct {
	Created bool
	engine.OperationalSecret
}

// handleConsoleCreateOperational makes an operational endpoint from the
// page's form (url, description, type repeated; "*" for every one) and
// shows its secret.
func (s *server) handleConsoleCreateOperational(w http.ResponseWriter, r *http.Request, _ httprouter.Params, v *visit) {
	types := r.PostForm["type"]
	if slices.Contains(types, engine.AllEventTypes) {
		types = []string{engine.AllEventTypes}
	}
	res, err := s.svc.CreateOperationalEndpoint(r.Context(), engine.OperationalEndpointInput{
		URL: strings.TrimSpace(r.PostForm.Get("url")), Description: strings.TrimSpace(r.PostForm.Get("description")), EventTypes: types,
	})
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	p := s.newPage(v, "New operational endpoint", "operational")
	p.Data = operationalSecretData{Created: true, OperationalSecret: res}
	s.render(w, r, http.StatusOK, "operational-secret", p)
}

// handleConsoleRotateOperational gives an operational endpoint a new
// secret and shows it; the previous one signs for the chosen grace.
func (s *server) handleConsoleRotateOperational(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	res, err := s.svc.RotateOperationalSecret(r.Context(), ps.ByName("id"), engine.RotateInput{Grace: r.PostForm.Get("grace")})
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	p := s.newPage(v, "New secret", "operational")
	p.Data = operationalSecretData{OperationalSecret: res}
	s.render(w, r, http.StatusOK, "operational-secret", p)
}

// handleConsoleDisableOperational disables an operational endpoint: its
// events are held.
func (s *server) handleConsoleDisableOperational(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	off := true
	if _, err := s.svc.UpdateOperationalEndpoint(r.Context(), ps.ByName("id"), engine.OperationalEndpointPatch{Disabled: &off, By: v.p.name}); err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	redirectNotice(w, r, "/console/operational-endpoints", "op-disabled", -1)
}

// handleConsoleEnableOperational enables an operational endpoint; with
// deliver_held=1 the events held meanwhile are sent, else dead-lettered.
func (s *server) handleConsoleEnableOperational(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	on := false
	p := engine.OperationalEndpointPatch{Disabled: &on, DeliverHeld: r.PostForm.Get("deliver_held") == "1", By: v.p.name}
	if _, err := s.svc.UpdateOperationalEndpoint(r.Context(), ps.ByName("id"), p); err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	redirectNotice(w, r, "/console/operational-endpoints", "op-enabled", -1)
}

// handleConsoleDeleteOperational deletes an operational endpoint once
// the form's confirm box is ticked (confirm=yes).
func (s *server) handleConsoleDeleteOperational(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	if r.PostForm.Get("confirm") != "yes" {
		s.consoleError(w, r, v, engine.Errorf(engine.CodeInvalidField, "confirm", "tick the box to confirm that the operational endpoint and what it has not delivered go"))
		return
	}
	if err := s.svc.DeleteOperationalEndpoint(r.Context(), ps.ByName("id")); err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	redirectNotice(w, r, "/console/operational-endpoints", "op-deleted", -1)
}
