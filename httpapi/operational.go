package httpapi

import (
	"net/http"
	"net/url"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/webhookd/webhookd/engine"
)

// The operational endpoints (engine/operational.go): the operator's own
// endpoints, which receive webhookd's operational events. Admin tokens
// only: they are no tenant's.

// operationalSecret is the answer that shows an operational endpoint's
// secret: its creation and the rotation of its secret.
type operationalSecret struct {
	engine.OperationalEndpoint
	Secret string `json:"secret"`
	// PreviousSecretExpires is when the previous secret stops signing;
	// absent for a new endpoint, or when it stopped at once.
	PreviousSecretExpires time.Time `json:"previous_secret_expires,omitzero"`
}

func (s *server) writeOperationalSecret(w http.ResponseWriter, r *http.Request, status int, res engine.OperationalSecret) {
	w.Header().Set("Cache-Control", "no-store") // the body carries the secret
	s.writeJSON(w, r, status, operationalSecret{OperationalEndpoint: res.Endpoint, Secret: res.Secret, PreviousSecretExpires: res.PreviousExpires})
}

// handleCreateOperationalEndpoint: POST /v1/operational-endpoints
func (s *server) handleCreateOperationalEndpoint(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var in engine.OperationalEndpointInput
	if err := decodeJSON(w, r, s.maxBody, &in, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.svc.CreateOperationalEndpoint(r.Context(), in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/operational-endpoints/"+url.PathEscape(res.Endpoint.ID))
	s.writeOperationalSecret(w, r, http.StatusCreated, res)
}

// handleListOperationalEndpoints: GET /v1/operational-endpoints?limit=&cursor=,
// in creation order.
func (s *server) handleListOperationalEndpoints(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	eps, err := s.svc.OperationalEndpoints(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, next, err := pageOf(&query{v: r.URL.Query()}, eps, func(ep engine.OperationalEndpoint) string { return ep.ID })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, list(page, next))
}

// handleGetOperationalEndpoint: GET /v1/operational-endpoints/:id
func (s *server) handleGetOperationalEndpoint(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	ep, err := s.svc.OperationalEndpoint(r.Context(), ps.ByName("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, ep)
}

// handleUpdateOperationalEndpoint: PATCH /v1/operational-endpoints/:id
func (s *server) handleUpdateOperationalEndpoint(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var p engine.OperationalEndpointPatch
	if err := decodeJSON(w, r, s.maxBody, &p, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	p.By = replayedBy(r)
	ep, err := s.svc.UpdateOperationalEndpoint(r.Context(), ps.ByName("id"), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, ep)
}

// handleDeleteOperationalEndpoint: DELETE /v1/operational-endpoints/:id
func (s *server) handleDeleteOperationalEndpoint(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	if err := s.svc.DeleteOperationalEndpoint(r.Context(), ps.ByName("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleRotateOperationalSecret: POST /v1/operational-endpoints/:id/secret/rotate
func (s *server) handleRotateOperationalSecret(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var in engine.RotateInput
	if err := decodeJSON(w, r, s.maxBody, &in, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.svc.RotateOperationalSecret(r.Context(), ps.ByName("id"), in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeOperationalSecret(w, r, http.StatusOK, res)
}
