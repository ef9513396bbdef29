package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/postgres/pgtest"
	"github.com/webhookd/webhookd/verify"
)

// barrier holds each request of a receiver until n are in flight at
// once (or until within has passed since the first of them), so that
// attempts of one endpoint made by several nodes overlap: each node then
// decides its attempt's outcome from the endpoint as it read it before
// any of them recorded.
type barrier struct {
	n      int
	within time.Duration

	mu      sync.Mutex
	waiting int
	open    chan struct{}
	first   time.Time
}

func newBarrier(n int, within time.Duration) *barrier {
	return &barrier{n: n, within: within, open: make(chan struct{})}
}

// wait returns once n requests have come (or within after the first),
// and reports how many were waiting together when it opened.
func (b *barrier) wait() {
	b.mu.Lock()
	b.waiting++
	if b.waiting == b.n {
		select {
		case <-b.open:
		default:
			close(b.open)
		}
	}
	open := b.open
	b.mu.Unlock()
	select {
	case <-open:
	case <-time.After(b.within):
	}
}

// opCollector is the [alerts] receiver of a cluster test: every event,
// its signature checked with the alert secret, by type.
type opCollector struct {
	t   *testing.T
	srv *httptest.Server

	mu  sync.Mutex
	got []operatorAlert
}

func newOpCollector(t *testing.T, secret string) *opCollector {
	check := &verify.Verifier{Secrets: []string{secret}}
	c := &opCollector{t: t}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if _, err := check.Verify(r.Header, body); err != nil {
			t.Errorf("alert signature: %v", err)
		}
		var a operatorAlert
		if err := json.Unmarshal(body, &a); err != nil {
			t.Errorf("alert %s: %v", body, err)
		}
		c.mu.Lock()
		c.got = append(c.got, a)
		c.mu.Unlock()
		w.WriteHeader(204)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// count is how many events of typ about endpoint came, each told apart
// by its webhook-id (a redelivery of one event is one).
func (c *opCollector) count(typ, endpoint string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, a := range c.got {
		var ep string
		json.Unmarshal(a.Data["endpoint_id"], &ep)
		if a.Type == typ && ep == endpoint {
			n++
		}
	}
	return n
}

func (c *opCollector) all() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, a := range c.got {
		fmt.Fprintf(&b, "%s %v\n", a.Type, a.Data)
	}
	return b.String()
}

// TestCluster_HealthAlertsOnce runs three nodes on one schema with the
// same [alerts] section, started at once, and makes an endpoint fail on
// all three at the same moment (a receiver that holds the three attempts
// until all have come, then answers 500), and another answer 410 Gone
// the same way. An operator gets one endpoint.failing and one
// endpoint.disabled, as from a single node, not one per node that saw
// the transition; and the three starts made one [alerts] endpoint.
func TestCluster_HealthAlertsOnce(t *testing.T) {
	clusterTest(t)
	schema := pgtest.Schema(t)
	secret := "whsec_" + strings.Repeat("QUJD", 8)
	ops := newOpCollector(t, secret)
	lease := 5 * time.Second
	cfg := configWith(t, clusterConfig(t, schema, lease, ""), map[string]any{
		"delivery.attempt_timeout": "3s",
		"alerts.url":               ops.srv.URL,
		"alerts.secret":            secret,
	})
	_, bases := clusterProcs(t, t.TempDir(), cfg, 3)
	nodes := make([]*instance, len(bases))
	for i, b := range bases {
		nodes[i] = &instance{t: t, base: b}
	}

	var list struct {
		Data []struct {
			ID     string `json:"id"`
			Source string `json:"source"`
		} `json:"data"`
	}
	nodes[0].mustCall(200, "GET", "/v1/operational-endpoints", nil, &list)
	configs := 0
	for _, ep := range list.Data {
		if ep.Source == "config" {
			configs++
		}
	}
	if configs != 1 {
		t.Errorf("three nodes started with one [alerts] section made %d config endpoints, want 1: %+v", configs, list.Data)
	}

	nodes[0].setup()
	failing, gone := newBarrier(3, 2*time.Second), newBarrier(3, 2*time.Second)
	failRC := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { failing.wait(); w.WriteHeader(500) })
	goneRC := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { gone.wait(); w.WriteHeader(410) })
	failEp := nodes[0].createEndpoint(failRC.srv.URL, "payment.succeeded")
	goneEp := nodes[0].createEndpoint(goneRC.srv.URL, "invoice.paid")

	// A node claims nothing for a tenth of a lease after it starts: past
	// that, each node attempts its own ingest's delivery at once.
	time.Sleep(lease / 10)
	ingestAll := func(typ string) []string {
		ids := make([]string, len(nodes))
		var wg sync.WaitGroup
		for i, n := range nodes {
			wg.Go(func() {
				res := n.ingest(typ, fmt.Sprintf(`{"node":%d}`, i))
				ids[i] = res.Deliveries[0].ID
			})
		}
		wg.Wait()
		return ids
	}
	for _, id := range ingestAll("payment.succeeded") {
		nodes[0].waitState(id, "dead")
	}
	// A 410 kills its delivery; one whose attempt the barrier did not
	// hold with the others starts after the endpoint was disabled and is
	// held (paused) instead.
	for _, id := range ingestAll("invoice.paid") {
		waitFor(t, "delivery "+id+" dead or held", func() bool {
			s := nodes[0].delivery(id).State
			return s == "dead" || s == "paused"
		})
	}
	waitFor(t, "the alerts", func() bool {
		return ops.count("endpoint.failing", failEp.ID) > 0 && ops.count("endpoint.disabled", goneEp.ID) > 0 &&
			ops.count("delivery.dead", failEp.ID) == 3
	})
	time.Sleep(2 * time.Second) // the other nodes' alerts, if any, come meanwhile
	for _, c := range []struct{ typ, ep string }{
		{"endpoint.failing", failEp.ID},
		{"endpoint.disabled", goneEp.ID},
	} {
		if got := ops.count(c.typ, c.ep); got != 1 {
			t.Errorf("%s of %s: the operator got %d, want 1", c.typ, c.ep, got)
		}
	}
	if t.Failed() {
		t.Logf("the operator got:\n%s", ops.all())
	}
}

// roundRobin is a load balancer on 127.0.0.1 in front of nodes: each
// request goes to the next node in turn, with its Host as the browser
// sent it (the balancer's), as a balancer without sticky sessions does.
func roundRobin(t *testing.T, nodes []string) *httptest.Server {
	var mu sync.Mutex
	next := 0
	lb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		target := nodes[next%len(nodes)]
		next++
		mu.Unlock()
		u, _ := url.Parse(target)
		httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
	}))
	t.Cleanup(lb.Close)
	return lb
}

// TestCluster_ConsoleBehindABalancer: a browser uses the console of a
// cluster through one address, a balancer that sends each request to
// the next node. The login form one node served logs in on another, and
// a form of a page one node served changes what it says on another: a
// node accepts the CSRF tokens of every node of its cluster.
func TestCluster_ConsoleBehindABalancer(t *testing.T) {
	clusterTest(t)
	schema := pgtest.Schema(t)
	cfg := clusterConfig(t, schema, 5*time.Second, "")
	_, bases := clusterProcs(t, t.TempDir(), cfg, 3)
	lb := roundRobin(t, bases)

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, form url.Values) (int, string) {
		t.Helper()
		var resp *http.Response
		var err error
		if method == "GET" {
			resp, err = c.Get(lb.URL + path)
		} else {
			resp, err = c.PostForm(lb.URL+path, form)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// Each step twice, so that a page and its form meet different nodes
	// whatever node the balancer starts at.
	for i := range 2 {
		_, page := do("GET", "/console/login", nil)
		m := regexp.MustCompile(`name="login" value="([^"]+)"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no login nonce in the login page:\n%s", page)
		}
		if got, body := do("POST", "/console/login", url.Values{"token": {testToken}, "login": {m[1]}}); got != http.StatusSeeOther {
			t.Fatalf("login %d, the form from another node: %d, want 303\n%s", i, got, body)
		}
	}
	for i := range 2 {
		_, page := do("GET", "/console/tenants", nil)
		m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no CSRF token in the tenants page:\n%s", page)
		}
		id := fmt.Sprintf("lb%d", i)
		if got, body := do("POST", "/console/tenants", url.Values{"csrf": {m[1]}, "id": {id}, "name": {"Behind a balancer"}}); got != http.StatusSeeOther {
			t.Fatalf("create tenant %s with the form from another node: %d, want 303\n%s", id, got, body)
		}
	}
}

// TestCluster_RollingRestart restarts three nodes one by one (SIGTERM,
// then a new process on the same config) while a light load ingests
// through the nodes that run, to a receiver that answers each event's
// first attempt 503 at once (a retry due 20 ms later) and the next after
// 150 ms, so that each stop finds attempts in flight, retries about to
// be due and claims not started.
// With a minute's lease, a delivery a stopping node left to its lease
// would wait that long; a stop hands its claims back instead. So: no delivery
// is attempted by two nodes at once, none twice, every acknowledged event
// is delivered well within half a lease of its ingest, and every ingest
// a running node answered was acknowledged.
func TestCluster_RollingRestart(t *testing.T) {
	clusterTest(t)
	schema := pgtest.Schema(t)
	lease := time.Minute
	dir := t.TempDir()
	// 50 events a second of 150 ms each, to an endpoint of 4 attempts
	// at once: a backlog (about 6 s at the end), so that each stop finds
	// claims not started yet.
	cfg := clusterConfig(t, schema, lease, "")
	procs, bases := clusterProcs(t, dir, cfg, 3)
	first := &instance{t: t, base: bases[0]}
	first.setup()

	var mu sync.Mutex
	inFlight := map[string]int{}
	oks := map[string][]time.Time{}
	overlaps := 0
	tries := map[string]int{}
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("webhook-id")
		mu.Lock()
		tries[id]++
		if tries[id] == 1 {
			mu.Unlock()
			w.WriteHeader(503)
			return
		}
		if inFlight[id] > 0 {
			overlaps++
		}
		inFlight[id]++
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight[id]--
			mu.Unlock()
		}()
		select {
		case <-time.After(150 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(http.StatusNoContent)
		mu.Lock()
		oks[id] = append(oks[id], time.Now())
		mu.Unlock()
	})
	first.createEndpoint(rc.srv.URL, "payment.succeeded")
	time.Sleep(lease / 10) // the nodes' first claims

	// The load: an event every 20 ms, to the running nodes in turn; a
	// node that stops refuses the connection, and the client tries the
	// next, as behind a balancer.
	var lmu sync.Mutex
	live := slices.Clone(bases)
	acked := map[string]time.Time{} // event ID → its 202
	var problems []string
	client := &http.Client{Timeout: 10 * time.Second}
	stop := make(chan struct{})
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			for try := n; try < n+6; try++ {
				lmu.Lock()
				base := live[try%len(live)]
				lmu.Unlock()
				if base == "" {
					continue
				}
				req, _ := http.NewRequest("POST", base+"/v1/tenants/acme/events", strings.NewReader(fmt.Sprintf(`{"type":"payment.succeeded","data":{"n":%d}}`, n)))
				req.Header.Set("Authorization", "Bearer "+testToken)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", fmt.Sprintf("rolling-%d", n))
				resp, err := client.Do(req)
				if err != nil {
					continue // stopping: the next node
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				lmu.Lock()
				if resp.StatusCode == http.StatusAccepted {
					var ack struct{ ID string }
					json.Unmarshal(body, &ack)
					acked[ack.ID] = time.Now()
				} else if len(problems) < 20 {
					problems = append(problems, fmt.Sprintf("event %d: %d %s", n, resp.StatusCode, body))
				}
				lmu.Unlock()
				break
			}
		}
	}()

	cfgPath := filepath.Join(dir, "webhookd.toml")
	for i := range procs {
		time.Sleep(time.Second)
		lmu.Lock()
		live[i] = ""
		lmu.Unlock()
		procs[i].stop()
		logs, err := os.Create(filepath.Join(dir, fmt.Sprintf("node%d-restarted.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { logs.Close() })
		procs[i] = startProc(t, cfgPath, filepath.Join(dir, fmt.Sprintf("node%d.db", i)), logs)
		base := procs[i].waitListening()
		lmu.Lock()
		live[i] = base
		lmu.Unlock()
	}
	time.Sleep(time.Second)
	close(stop)
	<-loadDone

	lmu.Lock()
	defer lmu.Unlock()
	for _, p := range problems {
		t.Errorf("ingest: %s", p)
	}
	if len(acked) < 50 {
		t.Fatalf("only %d events acknowledged: the test checked little", len(acked))
	}
	latest := time.Time{}
	for _, at := range acked {
		if at.After(latest) {
			latest = at
		}
	}
	// Every event delivered: waited for up to a lease and a half after the
	// last ingest, so that one left to its lease shows as late, not lost.
	poll(time.Until(latest.Add(lease+lease/2)), func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id := range acked {
			if len(oks[id]) == 0 {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	var slowest time.Duration
	missing, twice, late := 0, 0, 0
	for id, at := range acked {
		if len(oks[id]) == 0 {
			missing++
			continue
		}
		if len(oks[id]) > 1 {
			twice++
		}
		d := oks[id][0].Sub(at)
		slowest = max(slowest, d)
		if d > lease/2 {
			late++
		}
	}
	t.Logf("%d events acknowledged through a rolling restart; the slowest delivered %s after its 202", len(acked), slowest)
	if missing > 0 {
		t.Errorf("%d of %d acknowledged events never delivered", missing, len(acked))
	}
	if late > 0 {
		t.Errorf("%d events delivered more than half a lease (%s) after their 202 (the slowest %s): left to a stopped node's lease", late, lease/2, slowest)
	}
	if overlaps > 0 {
		t.Errorf("%d requests came while another of the same event was in flight", overlaps)
	}
	if twice > 0 {
		t.Errorf("%d events delivered twice, with every node stopped cleanly", twice)
	}
}

// TestCluster_PendingBoundAcrossNodes: three nodes ingest one tenant's
// events at once, two clients each, as fast as they are answered, to an
// endpoint that is disabled (every delivery held: it counts toward
// [limits] pending_per_tenant until it is delivered or dead). As
// docs/cluster.md bounds it, the tenant's backlog reaches at most n times
// the bound plus the ingests in flight before every node refuses; and
// after the next count every node refuses.
func TestCluster_PendingBoundAcrossNodes(t *testing.T) {
	clusterTest(t)
	schema := pgtest.Schema(t)
	const bound, clients = 30, 2
	cfg := configWith(t, clusterConfig(t, schema, 5*time.Second, ""), map[string]any{"limits.pending_per_tenant": bound})
	_, bases := clusterProcs(t, t.TempDir(), cfg, 3)
	first := &instance{t: t, base: bases[0]}
	first.setup()
	ep := first.createEndpoint("http://127.0.0.1:1/", "payment.succeeded")
	first.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+ep.ID, map[string]any{"disabled": true}, nil)

	post := func(base string, n int) int {
		req, _ := http.NewRequest("POST", base+"/v1/tenants/acme/events", strings.NewReader(fmt.Sprintf(`{"type":"payment.succeeded","data":{"n":%d}}`, n)))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	var mu sync.Mutex
	acked, others := 0, map[int]int{}
	var wg sync.WaitGroup
	deadline := time.Now().Add(20 * time.Second)
	for i, base := range bases {
		for c := range clients {
			wg.Go(func() {
				refused := 0
				for n := 0; refused < 5 && n < 400 && time.Now().Before(deadline); n++ {
					switch code := post(base, (i*clients+c)*1000+n); code {
					case http.StatusAccepted:
						refused = 0
						mu.Lock()
						acked++
						mu.Unlock()
					case http.StatusTooManyRequests:
						refused++
					default:
						mu.Lock()
						others[code]++
						mu.Unlock()
						return
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("three nodes acknowledged %d events of a tenant bound at %d before each refused", acked, bound)
	if len(others) > 0 {
		t.Errorf("answers besides 202 and 429: %v", others)
	}
	if limit := len(bases)*bound + len(bases)*clients; acked > limit {
		t.Errorf("%d events acknowledged, more than nodes × pending_per_tenant + the ingests in flight (%d)", acked, limit)
	}
	time.Sleep(3 * time.Second) // a count, every 2 s
	for i, base := range bases {
		if code := post(base, 99999+i); code != http.StatusTooManyRequests {
			t.Errorf("node %d after a count of %d held: %d, want 429", i, acked, code)
		}
	}
}

// TestCluster_CatalogueChangedOnAnotherNode: node A changes an event
// type's schema, archives it, makes it active again and deletes it; node
// B, which ingested events of the type just before each change (so that
// it keeps what it read of the type), takes or refuses the next ingest
// by the change at once: no ingest passes on what B read before.
func TestCluster_CatalogueChangedOnAnotherNode(t *testing.T) {
	clusterTest(t)
	schema := pgtest.Schema(t)
	cfg := clusterConfig(t, schema, 5*time.Second, "")
	a := startInstance(t, t.TempDir(), cfg)
	b := startInstance(t, t.TempDir(), cfg)
	a.setup()
	putOrderType(t, a, 201, `{"description":"an order was placed","schema":`+orderSchema+`}`)
	rc := newReceiver(t, status(http.StatusOK))
	ep := a.createEndpoint(rc.srv.URL+"/hooks", "order.created")
	rc.setSecret(ep.Secret)

	valid, stricter := `{"amount":5,"currency":"EUR"}`, `{"amount":5,"currency":"EUR","customer":"c1"}`
	warm := func(data string) {
		t.Helper()
		for range 3 { // more than once: the node's one-round-trip path keeps the type from the first
			b.ingest("order.created", data)
		}
	}
	warm(valid)
	putOrderType(t, a, 200, `{"description":"stricter","schema":{"type":"object","required":["customer"]}}`)
	ingestRefused(t, b, valid, "schema_mismatch", "data")
	warm(stricter)
	putOrderType(t, a, 200, `{"description":"gone","status":"archived"}`)
	ingestRefused(t, b, stricter, "event_type_archived", "type")
	putOrderType(t, a, 200, `{"description":"back","status":"active"}`)
	warm(valid)
	a.mustCall(204, "DELETE", "/v1/event-types/order.created", nil, nil)
	var p problemView
	if got := b.call("POST", "/v1/tenants/acme/events", `{"type":"order.created","data":`+valid+`}`, &p); got != 422 || p.Code != "unknown_event_type" {
		t.Errorf("ingest on B of a type A deleted: %d %+v, want 422 unknown_event_type", got, p)
	}
}
