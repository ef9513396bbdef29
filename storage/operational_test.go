package storage

import (
	"context"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
)

// TestDB_Check_source: Check finds an endpoint whose source is none the
// engine writes, or a customer's endpoint that has one.
func TestDB_Check_source(t *testing.T) {
	db := MustOpenDB(t)
	mustTenant(t, db, "acme")
	ep := mustEndpoint(t, db, "acme", "*")
	set := func(source engine.EndpointSource) {
		t.Helper()
		if _, err := db.UpdateEndpoint(context.Background(), "acme", ep.ID, func(e *engine.Endpoint) error {
			e.Source = source
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	mustCheck(t, db)
	for _, source := range []engine.EndpointSource{engine.SourceAPI, "files"} {
		set(source)
		if err := db.Check(); err == nil || !strings.Contains(err.Error(), ep.ID) || !strings.Contains(err.Error(), "source") {
			t.Errorf("source %q on a customer's endpoint: Check = %v, want it to name the endpoint and its source", source, err)
		}
	}
	set("")
	mustCheck(t, db)
}
