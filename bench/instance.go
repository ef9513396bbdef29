package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	apiclient "github.com/webhookd/webhookd/client"
	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/jsonschema"
	"github.com/webhookd/webhookd/postgres"
	"github.com/webhookd/webhookd/storage"
	"github.com/webhookd/webhookd/tracing"
)

// benchToken is the admin token of an in-process webhookd.
const benchToken = "bench-admin-token-0123456789abcdef"

// loopbackTargets lets the in-process webhookd deliver to the harness's
// receivers, which listen on plain http on 127.0.0.1.
var loopbackTargets = engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}

// maxPending is webhookd's default [ingest] max_pending: ingest answers 503
// overloaded beyond it, and the load waits and retries.
const maxPending = 1_000_000

// instanceOptions configure an in-process webhookd.
type instanceOptions struct {
	path      string             // database file
	dispatch  bool               // run a dispatcher; false: ingest only stores
	policy    engine.RetryPolicy // zero Deadline: the default policy
	workers   int                // 0: the default (64)
	perHost   int                // endpoint concurrency; 0: the default (8)
	perTenant int                // tenant concurrency; 0: the default (three quarters of workers)
	// clockShift moves the dispatcher's wall clock forward, so that retries
	// scheduled that far ahead fall due at once (backlog).
	clockShift time.Duration
	// keepGone leaves endpoints enabled after a 410 (mixed-faults).
	keepGone bool
	// pg, when set, runs the node on PostgreSQL (a schema shared by every
	// node opened on it) instead of the file at path.
	pg *pgOptions
	// traceTo, when set, traces the node as [tracing] on does, exporting
	// to it (-tracing).
	traceTo *otlpSink
}

// pgOptions say where an in-process node on PostgreSQL keeps its state.
type pgOptions struct {
	url    string
	schema string
	lease  time.Duration // 0: postgres.DefaultLease
}

// instance is the webhookd under test: in-process (svc set), wired as main's
// serve wires it, or a running one at a URL.
type instance struct {
	api   *apiClient
	db    *storage.DB         // the bbolt file; nil on PostgreSQL or remote
	pg    *postgres.Store     // nil on bbolt or remote
	sched *postgres.Scheduler // with pg
	node  *engine.Node
	disp  *engine.Dispatcher // nil when the node was not started (ingest only)
	svc   *engine.Service
	srv   *http.Server

	opened    time.Duration // storage.Open
	recovered time.Duration // Dispatcher.Start: the retry index into the timer

	tracer *tracing.Tracer // with instanceOptions.traceTo
	sink   *otlpSink
}

// openInstance opens the database, starts the dispatcher (recovery
// included) and serves the API on a loopback port.
func openInstance(ctx context.Context, o instanceOptions, conns int) (*instance, error) {
	in := &instance{}
	var tracer engine.Tracer // nil, not a nil *tracing.Tracer, without -tracing
	if o.traceTo != nil {
		tr, err := o.traceTo.tracer(ctx)
		if err != nil {
			return nil, err
		}
		in.tracer, in.sink, tracer = tr, o.traceTo, tr
	}
	start := time.Now()
	var store engine.Store
	var sched engine.Scheduler // nil: the dispatcher's local one
	claimAhead := 0
	if o.pg != nil {
		// Wired as serve's openPostgres wires it.
		pg, err := postgres.Open(ctx, o.pg.url, postgres.Options{Schema: o.pg.schema, Lease: o.pg.lease, MaxConns: 8})
		if err != nil {
			in.closeTracer()
			return nil, err
		}
		workers := 64 // as serve: the default's, unless set
		if o.workers > 0 {
			workers = o.workers
		}
		claimAhead = 2 * workers // as serve: twice the workers
		lease := o.pg.lease
		if lease <= 0 {
			lease = postgres.DefaultLease
		}
		in.pg, in.sched = pg, pg.Scheduler(postgres.SchedulerOptions{EndpointConcurrency: o.perHost, PreClaim: 4 * workers, JoinWait: lease / 10})
		store, sched = pg, in.sched
	} else {
		var so storage.Options
		if in.tracer != nil {
			so.ObserveCommit = in.tracer.ObserveCommit // as serve wires it
		}
		db, err := storage.Open(o.path, so)
		if err != nil {
			in.closeTracer()
			return nil, err
		}
		in.db, store = db, db
	}
	in.opened = time.Since(start)
	now := time.Now
	if shift := o.clockShift; shift != 0 {
		now = func() time.Time { return time.Now().Add(shift) }
	}
	// Wired as serve wires it (engine.NewNode), less the janitor and the
	// alerts; without dispatch the node is never started, so ingest only
	// stores (what Start's recovery would find).
	node := engine.NewNode(store, engine.NodeOptions{
		Dispatcher: engine.DispatcherOptions{
			Scheduler: sched, ClaimAhead: claimAhead,
			Policy: o.policy, Workers: o.workers, EndpointConcurrency: o.perHost, TenantConcurrency: o.perTenant, Now: now,
			KeepGoneEndpoints: o.keepGone,
			Targets:           loopbackTargets, // the receivers are on 127.0.0.1, over http
		},
		Service: engine.ServiceOptions{Targets: loopbackTargets, Schemas: jsonschema.Compiler{}},
		Tracer:  tracer,
	})
	in.node, in.svc = node, node.Service
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		in.closeStore()
		return nil, err
	}
	if o.dispatch {
		in.disp = node.Dispatcher
		start := time.Now()
		if err := node.Start(ctx); err != nil {
			ln.Close()
			in.closeStore()
			return nil, err
		}
		in.recovered = time.Since(start)
	}
	var api http.Handler = httpapi.New(in.svc, httpapi.Options{Tokens: []string{benchToken}})
	if in.tracer != nil {
		api = in.tracer.Handler(api)
	}
	in.srv = &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          discardLog,
	}
	go in.srv.Serve(ln)
	in.api = newAPIClient("http://"+ln.Addr().String(), benchToken, conns)
	return in, nil
}

// remoteInstance is a webhookd running at base.
func remoteInstance(base, token string, conns int) (*instance, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("-target %q: want an http URL like http://127.0.0.1:8080", base)
	}
	switch u.Hostname() {
	case "127.0.0.1", "localhost", "::1":
	default:
		return nil, fmt.Errorf("-target %q: the receivers listen on 127.0.0.1, so the target must run on this machine (127.0.0.1, localhost or ::1)", base)
	}
	if token == "" {
		return nil, errors.New("-target needs the admin token: -token or WEBHOOKD_TOKEN")
	}
	return &instance{api: newAPIClient(u.Scheme+"://"+u.Host, token, conns)}, nil
}

// inProcess reports whether the instance runs in this process.
func (in *instance) inProcess() bool { return in.svc != nil }

// pending returns the deliveries the dispatcher holds (scheduled, ready or
// in flight) and those of acknowledged events not written yet, or -1 when
// unknown (a remote target, no dispatcher).
func (in *instance) pending() int {
	if in.disp == nil {
		return -1
	}
	s := in.disp.Stats()
	return s.Scheduled + s.Ready + s.InFlight + in.svc.OwedDeliveries()
}

// close shuts the instance down in serve's order: HTTP, dispatcher (soft
// stop, at most grace), database.
func (in *instance) close(grace time.Duration) error {
	if !in.inProcess() {
		in.api.hc.CloseIdleConnections()
		return nil
	}
	// The clients' idle connections first: one the transport dialed and
	// never used is new to the server, and Shutdown waits up to 5s for a
	// new connection to send its request.
	in.api.hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := in.srv.Shutdown(ctx); err != nil {
		in.srv.Close()
	}
	if in.disp != nil {
		in.node.Stop(ctx) // a cut-off attempt stays pending: fine here
	} else {
		// Ingest only: the deliveries the answers named are written by
		// now, as Node.Stop makes sure of (not by the next Open).
		in.svc.WaitFanOut(ctx)
	}
	return in.closeStore()
}

// closeStore closes the database (the scheduler's leases first, as serve
// does), then exports the tracer's last spans.
func (in *instance) closeStore() error {
	defer in.closeTracer()
	if in.pg != nil {
		in.sched.Close()
		return in.pg.Close()
	}
	return in.db.Close()
}

// closeTracer exports the tracer's last spans and stops it (-tracing).
func (in *instance) closeTracer() {
	if in.tracer != nil {
		in.sink.done(in.tracer)
		in.tracer = nil
	}
}

// fileSize returns the database file's size, or 0 for a remote target.
func (in *instance) fileSize() int64 {
	if in.db == nil {
		return 0
	}
	st, err := os.Stat(in.db.Path())
	if err != nil {
		return 0
	}
	return st.Size()
}

// apiClient speaks webhookd's HTTP API.
type apiClient struct {
	base  string
	auth  string
	hc    *http.Client
	tport *http.Transport
}

// newAPIClient returns a client that keeps up to conns connections alive,
// so that conns concurrent clients never open a new one after warm-up.
func newAPIClient(base, token string, conns int) *apiClient {
	t := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	return &apiClient{base: base, auth: "Bearer " + token, hc: &http.Client{Transport: t, Timeout: time.Minute}, tport: t}
}

// apiError is a non-2xx answer.
type apiError struct {
	Status     int
	Code       string
	Detail     string
	RetryAfter time.Duration
}

func (e *apiError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Detail)
}

// do sends a request with a JSON body (nil: none) and decodes a 2xx JSON
// answer into out (nil: discard).
func (a *apiClient) do(ctx context.Context, method, path string, body []byte, out any) error {
	return a.doKey(ctx, method, path, body, "", out)
}

// doKey is do with an Idempotency-Key header, unless key is "".
func (a *apiClient) doKey(ctx context.Context, method, path string, body []byte, key string, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	req.Header["Authorization"] = []string{a.auth}
	if body != nil {
		req.Header["Content-Type"] = []string{"application/json"}
	}
	if key != "" {
		req.Header["Idempotency-Key"] = []string{key}
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		e := &apiError{Status: resp.StatusCode}
		var p struct{ Code, Detail string }
		if json.Unmarshal(b, &p) == nil {
			e.Code, e.Detail = p.Code, p.Detail
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			e.RetryAfter = time.Duration(s) * time.Second
		}
		return e
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// endpointInfo is an endpoint the harness created.
type endpointInfo struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

// setup creates tenant, the event type and one endpoint per URL, through
// the project's Go client (the load itself goes through do, which adds
// nothing to a request and never retries on its own).
func (a *apiClient) setup(ctx context.Context, tenant, eventType string, urls []string) ([]endpointInfo, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	if _, _, err := c.PutTenant(ctx, tenant, apiclient.TenantInput{Name: "webhookd bench"}); err != nil {
		return nil, fmt.Errorf("create tenant: %w", err)
	}
	if _, _, err := c.PutEventType(ctx, eventType, "webhookd bench"); err != nil {
		return nil, fmt.Errorf("create event type: %w", err)
	}
	eps := make([]endpointInfo, len(urls))
	for i, u := range urls {
		ep, err := c.CreateEndpoint(ctx, tenant, apiclient.EndpointInput{URL: u, EventTypes: []string{eventType}})
		if err != nil {
			return nil, fmt.Errorf("create endpoint %s: %w", u, err)
		}
		eps[i] = endpointInfo{ID: ep.ID, Secret: ep.Secret}
	}
	return eps, nil
}

// client returns the project's Go client on a's connections.
func (a *apiClient) client() (*apiclient.Client, error) {
	return apiclient.New(a.base, apiclient.Options{Token: strings.TrimPrefix(a.auth, "Bearer "), HTTPClient: a.hc, UserAgent: "webhookd-bench"})
}

// ingestAnswer is the part of ingest's 202 the harness keeps.
type ingestAnswer struct {
	ID         string `json:"id"`
	Deliveries []struct {
		ID string `json:"id"`
	} `json:"deliveries"`
}

// ingest posts one event, with an Idempotency-Key unless key is "".
func (a *apiClient) ingest(ctx context.Context, tenant string, body []byte, key string) (ingestAnswer, error) {
	var ans ingestAnswer
	err := a.doKey(ctx, http.MethodPost, "/v1/tenants/"+tenant+"/events", body, key, &ans)
	return ans, err
}

// deliveryState returns a delivery's state and how many attempts it had.
func (a *apiClient) deliveryState(ctx context.Context, tenant, id string) (string, int, error) {
	c, err := a.client()
	if err != nil {
		return "", 0, err
	}
	d, err := c.Delivery(ctx, tenant, id)
	return string(d.State), len(d.Attempts), err
}
