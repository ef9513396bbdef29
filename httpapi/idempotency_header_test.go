package httpapi_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// TestAPI_IdempotencyKeyHeaderGivenOnce: an Idempotency-Key header that
// is empty (a client whose key variable was unset) or given twice is
// refused, naming it, and nothing is stored; ingest without the header
// is still taken without a key. Before, an empty one was taken as none
// and the first of two was used, so the client's retries silently made
// one event each.
func TestAPI_IdempotencyKeyHeaderGivenOnce(t *testing.T) {
	e := newAPIEnv(t)
	e.fixture()
	body := `{"type":"payment.succeeded","data":{}}`
	for name, values := range map[string][]string{
		"empty":       {""},
		"blank":       {"  "},
		"given twice": {"order-1", "order-2"},
	} {
		t.Run(name, func(t *testing.T) {
			before := e.snapshot()
			hr := e.request(req{method: "POST", path: "/v1/tenants/acme/events", body: body})
			hr.Header["Idempotency-Key"] = values
			resp, err := e.srv.Client().Do(hr)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			checkProblem(t, response{status: resp.StatusCode, header: resp.Header, body: b}, http.StatusUnprocessableEntity, engine.CodeInvalidField, "Idempotency-Key")
			if after := e.snapshot(); after != before {
				t.Errorf("state changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: body}, 202, nil)
}
