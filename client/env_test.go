package client_test

import (
	"context"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/client"
	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/jsonschema"
	"github.com/webhookd/webhookd/storage"
)

const adminToken = "client-test-admin-token"

// env is a real webhookd API (httpapi over engine over a bbolt file in
// t.TempDir) with a dispatcher delivering to a loopback receiver.
type env struct {
	t   *testing.T
	api *httptest.Server
	// receiver answers 200 on /ok and 400 (a permanent failure: the
	// delivery dies at once) on every other path.
	receiver *httptest.Server
	received atomic.Int64 // requests the receiver got
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t}
	e.receiver = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.received.Add(1)
		if r.URL.Path == "/ok" {
			w.WriteHeader(http.StatusOK)
			return
		}
		http.Error(w, "no such hook", http.StatusBadRequest)
	}))
	t.Cleanup(e.receiver.Close)

	db := openDB(t)
	loopback := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	disp := engine.NewDispatcher(db, engine.DispatcherOptions{
		Policy: engine.RetryPolicy{
			Schedule: []time.Duration{10 * time.Millisecond}, Deadline: time.Minute,
			AttemptTimeout: 5 * time.Second, RetryAfterMax: time.Second,
		},
		Policies: map[string]engine.RetryPolicy{engine.ExtendedRetryPolicyName: engine.ExtendedRetryPolicy()},
		Targets:  loopback,
	})
	svc := engine.NewService(db, disp, engine.ServiceOptions{Targets: loopback, LookupHost: publicLookup, Schemas: jsonschema.Compiler{}})
	e.api = httptest.NewServer(httpapi.New(svc, httpapi.Options{Tokens: []string{adminToken}, Backup: db}))
	t.Cleanup(e.api.Close)
	if err := disp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { disp.Stop(context.Background()) })
	t.Cleanup(func() { svc.StopTasks(context.Background()) }) // before the dispatcher stops and the store closes
	return e
}

// openDB opens a bbolt file in t.TempDir, closed at cleanup.
func openDB(t *testing.T) *storage.DB {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "webhookd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

// publicLookup resolves every host to a public address: no DNS in tests.
func publicLookup(context.Context, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
}

// client returns a client of base (the API's URL when ""), with the
// admin token unless opts has one.
func (e *env) client(base string, opts client.Options) *client.Client {
	e.t.Helper()
	if base == "" {
		base = e.api.URL
	}
	if opts.Token == "" {
		opts.Token = adminToken
	}
	c, err := client.New(base, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// setup makes tenant acme, the catalogue entry invoice.paid and an
// endpoint on the receiver's path, and returns the endpoint.
func (e *env) setup(c *client.Client, path string) client.CreatedEndpoint {
	e.t.Helper()
	ctx := e.t.Context()
	if _, _, err := c.PutTenant(ctx, "acme", client.TenantInput{Name: "Acme"}); err != nil {
		e.t.Fatal(err)
	}
	if _, _, err := c.PutEventType(ctx, "invoice.paid", "An invoice was paid."); err != nil {
		e.t.Fatal(err)
	}
	ep, err := c.CreateEndpoint(ctx, "acme", client.EndpointInput{URL: e.receiver.URL + path, EventTypes: []string{"invoice.paid"}})
	if err != nil {
		e.t.Fatal(err)
	}
	return ep
}

// waitDelivery polls delivery id of acme until it leaves pending, for at
// most 10 s, and returns it.
func waitDelivery(t *testing.T, c *client.Client, id string) client.Delivery {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := c.Delivery(t.Context(), "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		if d.State == client.StateSucceeded || d.State == client.StateDead || time.Now().After(deadline) {
			return d
		}
		time.Sleep(10 * time.Millisecond) // a real webhookd and receiver on loopback: nothing here signals the state
	}
}

// collect drains a listing into a slice, failing the test on an error.
func collect[T any](t *testing.T, seq func(func(T, error) bool)) []T {
	t.Helper()
	var out []T
	for v, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// countingTransport counts the requests it sends.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// startExampleServer runs a webhookd for the examples, without a
// dispatcher (deliveries stay pending): tenant acme, event type
// invoice.paid and an endpoint subscribed to it. It returns the API's
// URL, its token and the function that stops it.
func startExampleServer() (baseURL, token string, stop func()) {
	dir, err := os.MkdirTemp("", "client-example")
	if err != nil {
		log.Fatal(err)
	}
	db, err := storage.Open(filepath.Join(dir, "webhookd.db"), storage.Options{})
	if err != nil {
		log.Fatal(err)
	}
	svc := engine.NewService(db, nil, engine.ServiceOptions{LookupHost: publicLookup})
	api := httptest.NewServer(httpapi.New(svc, httpapi.Options{Tokens: []string{adminToken}}))
	stop = func() {
		api.Close()
		svc.StopTasks(context.Background())
		db.Close()
		os.RemoveAll(dir)
	}
	ctx := context.Background()
	_, _, err = svc.PutTenant(ctx, "acme", engine.TenantInput{})
	if err == nil {
		_, _, err = svc.PutEventType(ctx, "invoice.paid", engine.EventTypeInput{})
	}
	if err == nil {
		_, _, err = svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "https://hooks.example.com/in", EventTypes: []string{"invoice.paid"}})
	}
	if err != nil {
		stop()
		log.Fatal(err)
	}
	return api.URL, adminToken, stop
}
