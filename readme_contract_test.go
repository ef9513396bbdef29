// The OpenAPI validator is large: the race run (.ci/run) leaves it out
// rather than build it a second time with the race detector, and the
// walk-through then runs unchecked.

//go:build !race

package main

import (
	"net/http/httptest"
	"net/url"
	"os"
	"testing"

	"github.com/webhookd/webhookd/httpapi/contracttest"
)

func init() { checkAPI = contractProxy }

// contractProxy puts a contracttest.Proxy in front of the webhookd at
// target: every call the README's walk-through makes, and every answer
// it gets, must be what httpapi/openapi.json describes, so the README's
// examples cannot drift from the document.
func contractProxy(t *testing.T, target string) string {
	t.Helper()
	raw, err := os.ReadFile("httpapi/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	_, v, err := contracttest.Load(raw)
	if err != nil {
		t.Fatalf("httpapi/openapi.json: %v", err)
	}
	p := contracttest.NewProxy(v, &url.URL{Scheme: "http", Host: target})
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		srv.Close()
		violations, n := p.Violations()
		if n == 0 {
			t.Error("no call of the walk-through went through the checking proxy")
		}
		for _, v := range violations {
			t.Errorf("the README's walk-through breaks httpapi/openapi.json: %s", v)
		}
		t.Logf("%d exchanges of the walk-through checked against httpapi/openapi.json", n)
	})
	return srv.Listener.Addr().String()
}
