package httpapi

import (
	_ "embed"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"
)

// openAPIDocument is the OpenAPI 3.1 description of every route New
// serves but the console: their parameters, bodies, answers, errors and
// security, and the webhook a receiver gets. It is the one description of
// the API; openapi_test.go validates every answer of every route against
// it and fails when a route is missing from it.
//
//go:embed openapi.json
var openAPIDocument []byte

// handleOpenAPI serves openAPIDocument, with no token: it holds no data.
func (s *server) handleOpenAPI(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	h["Content-Length"] = []string{strconv.Itoa(len(openAPIDocument))}
	w.WriteHeader(http.StatusOK)
	w.Write(openAPIDocument) // a write error means the client went away
}
