package httpapi

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
	"github.com/webhookd/webhookd/engine"
)

// Tenant access tokens (engine/tokens.go) and the all-tenants report:
// admin routes. Which routes a tenant token may use is decided by the
// route table (server.go: tenantAuth) and authorize (security.go).

// issuedToken is the answer of POST .../access-tokens: the token's facts
// and the token itself, shown this once.
type issuedToken struct {
	engine.AccessToken
	Token string `json:"token"`
}

// handleIssueAccessToken: POST /v1/tenants/:tenant/access-tokens {"ttl"}
func (s *server) handleIssueAccessToken(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var in engine.AccessTokenInput
	if err := decodeJSON(w, r, s.maxBody, &in, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	t, token, err := s.svc.IssueAccessToken(r.Context(), ps.ByName("tenant"), in, s.opts.TenantTokenTTL)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store") // the body carries the token
	s.writeJSON(w, r, http.StatusCreated, issuedToken{AccessToken: t, Token: token})
}

// handleListAccessTokens: GET /v1/tenants/:tenant/access-tokens
func (s *server) handleListAccessTokens(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	ts, err := s.svc.AccessTokens(r.Context(), ps.ByName("tenant"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, next, err := pageOf(&query{v: r.URL.Query()}, ts, func(t engine.AccessToken) string { return t.ID })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, list(page, next))
}

// handleRevokeAccessToken: DELETE /v1/tenants/:tenant/access-tokens/:id
func (s *server) handleRevokeAccessToken(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	if _, err := s.svc.RevokeAccessToken(r.Context(), ps.ByName("tenant"), ps.ByName("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleReportAll: GET /v1/admin/report?last=1000
func (s *server) handleReportAll(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := &query{v: r.URL.Query()}
	last := q.int("last")
	if q.err != nil {
		s.writeError(w, r, q.err)
		return
	}
	rep, err := s.svc.ReportAll(r.Context(), last)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, rep)
}
