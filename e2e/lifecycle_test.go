package e2e

// The test that lives through weeks: one webhookd, on each driver, driven
// through simulated days of a few seconds each, with the features an
// operator runs for months meeting each other: retention, dead letters
// and replays, ordered lines that block, tenant deletion, the backlog's
// bounds, alerts, backups, compaction, key rotation, restarts and
// kill -9; and the endpoint's own controls among them: custom headers
// (sealed with the key that rotates), channels, a retry policy longer
// than the standard one, a rate limit, scheduled events and a backfill;
// event types whose schema and status change under their events; and on
// bbolt, phases whose every fan-out is owed past its 202.
// After every phase it checks what must hold, whatever happened before.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/client"
	"github.com/webhookd/webhookd/verify"
)

// lifecycleSettings are the lifecycle test's length: days simulated
// days of day each. CI runs the month below; WEBHOOKD_LIFECYCLE_DAYS and
// WEBHOOKD_LIFECYCLE_DAY run a longer one (the scenario repeats every 30
// days) or slower days.
type lifecycleSettings struct {
	days int
	day  time.Duration
}

const (
	lifecycleDaysEnv = "WEBHOOKD_LIFECYCLE_DAYS"
	lifecycleDayEnv  = "WEBHOOKD_LIFECYCLE_DAY"
)

func lifecycleOptions(t *testing.T) lifecycleSettings {
	s := lifecycleSettings{days: 30, day: 1500 * time.Millisecond}
	if v := os.Getenv(lifecycleDaysEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of days, at least 1", lifecycleDaysEnv, v)
		}
		s.days = n
	}
	if v := os.Getenv(lifecycleDayEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			t.Fatalf("%s=%q: want a duration of at least 1s, like 5s", lifecycleDayEnv, v)
		}
		s.day = d
	}
	return s
}

// TestLifecycle runs the lifecycle on the driver the tests run on
// (WEBHOOKD_TEST_DRIVER): CI runs it once on the bbolt file and once on
// PostgreSQL (docs/reliability.md, "The test that lives through weeks").
func TestLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the lifecycle test runs for minutes")
	}
	webhookdBinary(t)
	opts := lifecycleOptions(t)
	driver := testDriver()
	t.Run(driver, func(t *testing.T) {
		newLifecycle(t, driver, opts).run()
	})
}

// simClock maps a lifecycle's simulated days to the wall clock: day 0 is
// its start, and a day lasts day. Every period webhookd is configured
// with is a number of simulated hours or days.
type simClock struct {
	start time.Time
	day   time.Duration
}

// now is the simulated day it is.
func (c simClock) now() float64 { return float64(time.Since(c.start)) / float64(c.day) }

// wall is when simulated day d is.
func (c simClock) wall(d float64) time.Time { return c.start.Add(c.span(d)) }

// span is how long days simulated days last.
func (c simClock) span(days float64) time.Duration {
	return time.Duration(days * float64(c.day)).Round(time.Millisecond)
}

// hours is how long h simulated hours last, as TOML's duration string.
func (c simClock) hours(h float64) string { return c.span(h / 24).String() }

// waitUntil paces the test: it returns at simulated day d (at once when
// that is past).
func (c simClock) waitUntil(ctx context.Context, d float64) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(c.wall(d))):
	}
}

// window is a stretch of simulated days [from, to).
type window struct{ from, to float64 }

// lifecycle is one run of the scenario on one driver.
type lifecycle struct {
	t      *testing.T
	ctx    context.Context
	opts   lifecycleSettings
	clock  simClock
	st     *store
	dir    string
	cfg    config
	cfgDir string // config and key files
	logs   *os.File
	node   *node
	api    *api
	key    []byte // the secret key the endpoint secrets are sealed with
	keys   int    // keys made so far, to name their files
	led    *ledger

	// The bounds and periods the node runs with.
	maxPending, perTenant int
	overdue               time.Duration // how late a pending delivery may be attempted
	lease                 time.Duration // postgres: a killed node's claims end after this
	// countLag is how late a node may see the backlog it bounds: at
	// once on bbolt (given a second), every few seconds on postgres
	// (docs/cluster.md).
	countLag time.Duration

	tenants map[string]*tenant
	alerts  *eventReceiver

	found  []finding           // findings of the phase under way
	broken map[string][]string // check → the phases it failed in
	stats  map[string]int      // what the run did, for its summary line
	gen    map[string]int      // receivers made per name, to name them apart
	// maxLate is the most simulated days a step ran after its time.
	maxLate float64
	// initechDisabled: initech's endpoint was found disabled after its
	// receiver's outage.
	initechDisabled bool
	// bearer is acme A's custom Authorization header's value: it must
	// reach every request and no log line.
	bearer string
	// scheduled are the events sent with a deliver_at, by ID: no
	// receiver may get one before its time.
	scheduled map[string]time.Time
	// tight: order.paid's schema requires a ref; auditStatus is
	// audit.logged's status; oldSchema are initech's order.paid events
	// taken without a ref, by ID, with the day of their 202
	// (lifecycle_catalogue_test.go).
	tight       bool
	auditStatus client.EventTypeStatus
	oldSchema   map[string]float64
}

// tenant is one of the scenario's tenants as the test knows it: by its
// name in the scenario (acme, globex, initech, umbrella) and its ID,
// the name and a random suffix, so that what it reads of a shared
// PostgreSQL server (the tenants' rows in the test's schema, a log
// line) is never another test's acme.
type tenant struct {
	name, id  string
	endpoints []*endpoint
	deleted   bool
	n         int         // events sent
	sent      []sentEvent // acknowledged sends, for the idempotency checks
}

// endpoint is one endpoint of a tenant, with its receiver.
type endpoint struct {
	id, name string
	types    []string
	channels []string // its channel filter; none: every event
	rc       *eventReceiver
	outages  []window // when its receiver fails on purpose
	deleted  bool
}

// sentEvent is an acknowledged ingest, to send again with its key.
type sentEvent struct {
	in client.EventInput
	id string
	at float64 // the simulated day of its 202
	// reused: sent again after its key's window, which made a new
	// event (sent later in tn.sent) the key's.
	reused bool
}

// subscribers returns tn's endpoints that take an event of typ on
// channels, by ID: subscribed to typ, and without a channel filter or
// with one of channels in it (an event on no channel goes only to the
// endpoints without one).
func (tn *tenant) subscribers(typ string, channels []string) map[string]*eventReceiver {
	out := map[string]*eventReceiver{}
	for _, ep := range tn.endpoints {
		if ep.deleted || !(slices.Contains(ep.types, typ) || slices.Contains(ep.types, client.AllEventTypes)) {
			continue
		}
		if len(ep.channels) == 0 || slices.ContainsFunc(channels, func(c string) bool { return slices.Contains(ep.channels, c) }) {
			out[ep.id] = ep.rc
		}
	}
	return out
}

func (tn *tenant) endpoint(name string) *endpoint {
	for _, ep := range tn.endpoints {
		if ep.name == name && !ep.deleted {
			return ep
		}
	}
	return nil
}

const lifecycleToken = "lifecycle-admin-token-0123456789"

// lifecyclePatient is the retry policy of acme's endpoint N: retries
// after 2, 6 and 12 hours inside a 30-hour deadline, where the standard
// policy gives up after 10 hours.
const lifecyclePatient = "patient"

// acmeCLimit is acme C's own rate limit: it is backfilled with a day of
// events at once.
var acmeCLimit = client.RateLimit{PerSecond: 4, Burst: 2}

// The scenario's event types: order.* and invoice.issued have
// subscribers, audit.logged none (such an event is kept for [retention]
// succeeded from its ingest).
var lifecycleTypes = []string{"order.created", "order.paid", "invoice.issued", "audit.logged"}

func newLifecycle(t *testing.T, driver string, opts lifecycleSettings) *lifecycle {
	dir := t.TempDir()
	lc := &lifecycle{
		t: t, ctx: t.Context(), opts: opts, dir: dir, cfgDir: filepath.Join(dir, "etc"),
		maxPending: 70, perTenant: 40,
		tenants: map[string]*tenant{}, broken: map[string][]string{}, stats: map[string]int{}, gen: map[string]int{},
		scheduled: map[string]time.Time{}, oldSchema: map[string]float64{},
	}
	lc.st = newStore(t, driver, dir)
	if err := os.MkdirAll(lc.cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	lc.logs = nodeLog(t, dir)
	lc.clock = simClock{day: opts.day}
	h := func(hours float64) time.Duration { return lc.clock.span(hours / 24) }
	lc.overdue = 2*time.Second + h(2)
	lc.countLag = time.Second
	lc.led = newLedger(lc.clock.span(2), lc.clock.span(5), h(1))
	lc.alerts = newEventReceiver(t, "alerts", nil)
	alertSecret := "whsec_" + base64.StdEncoding.EncodeToString(randomBytes(32))
	lc.alerts.setSecrets(alertSecret)

	// A day of opts.day: retries after 1, 2 and 4 hours inside a
	// 10-hour deadline; an endpoint failing for a day is disabled; an
	// idempotency key lives a day; a succeeded event is kept 2 days, a
	// dead letter 5; the pruner passes every 2 hours, or as often as
	// [retention] interval allows (16 hours with days of 1.5 s).
	c := config{}
	c.set("server", "shutdown_timeout", "10s")
	c.set("api", "tokens", []string{lifecycleToken})
	c.set("ingest", "idempotency_window", lc.clock.hours(24))
	c.set("ingest", "max_pending", lc.maxPending)
	c.set("limits", "pending_per_tenant", lc.perTenant)
	c.set("delivery", "allow_http", true) // the receivers are plain http on 127.0.0.1
	c.set("delivery", "allow_private_targets", true)
	c.set("delivery", "schedule", []string{lc.clock.hours(1), lc.clock.hours(2), lc.clock.hours(4)})
	c.set("delivery", "jitter", 0)
	c.set("delivery", "deadline", lc.clock.hours(10))
	c.set("delivery", "attempt_timeout", lc.clock.hours(4))
	c.set("delivery", "retry_after_max", lc.clock.hours(1))
	c.set("delivery", "disable_after", lc.clock.hours(24))
	c.set("delivery", "workers", 16)
	// patient: for acme's endpoint N, whose receiver is down for longer
	// than the standard 10 hours and must lose nothing to it.
	c.set("retry", "policies", map[string]any{lifecyclePatient: map[string]any{
		"schedule": []string{lc.clock.hours(2), lc.clock.hours(6), lc.clock.hours(12)},
		"deadline": lc.clock.hours(30),
		"jitter":   0,
	}})
	c.set("retention", "succeeded", lc.clock.hours(48))
	c.set("retention", "dead", lc.clock.hours(120))
	c.set("retention", "interval", max(time.Second, h(2)).String()) // the key's least is 1s
	c.set("alerts", "url", lc.alerts.URL())
	c.set("alerts", "secret", alertSecret)
	c.set("log", "level", "info")
	c.set("storage", "lock_timeout", "10s")
	lc.st.configure(c)
	if driver == postgreSQL {
		lc.lease = h(4) + 2*time.Second
		lc.countLag = 4 * time.Second
		c.set("storage", "lease", lc.lease.String())
	}
	lc.cfg = c
	lc.newKey()
	return lc
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// configPath is the node's config file.
func (lc *lifecycle) configPath() string { return filepath.Join(lc.cfgDir, "webhookd.toml") }

// newKey writes a new secret key file and returns its path; until
// useKey, the node keeps the one it has.
func (lc *lifecycle) newKey() string {
	lc.keys++
	key := randomBytes(32)
	path := filepath.Join(lc.cfgDir, fmt.Sprintf("secret-%d.key", lc.keys))
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		lc.t.Fatal(err)
	}
	if lc.key == nil {
		lc.useKey(path, key)
	}
	return path
}

// useKey makes the node start with the key in path from now on.
func (lc *lifecycle) useKey(path string, key []byte) {
	lc.key = key
	lc.cfg.set("storage", "secret_key_file", path)
	lc.cfg.write(lc.t, lc.configPath())
}

func (lc *lifecycle) start() {
	lc.node = startNode(lc.t, lc.configPath(), lc.logs)
	lc.api = newAPI(lc.node.URL, lifecycleToken)
	lc.stats["starts"]++
}

// note records a broken promise found outside a phase's checks; the
// phase's end reports it.
func (lc *lifecycle) note(check, format string, args ...any) {
	lc.found = append(lc.found, finding{check, fmt.Sprintf(format, args...)})
}

// step is one thing the scenario does at a simulated day.
type step struct {
	at   float64
	what string
	do   func()
}

func (lc *lifecycle) run() {
	lc.start()
	lc.clock.start = time.Now()
	lc.setup()
	steps := lc.timeline()
	for _, s := range steps {
		if lc.ctx.Err() != nil {
			return
		}
		lc.clock.waitUntil(lc.ctx, s.at)
		if late := lc.clock.now() - s.at; late > 0.5 {
			// The steps before took that long: a phase's end, or a
			// check that waited for a bound to be seen.
			lc.stats["steps over half a day late"]++
			lc.maxLate = max(lc.maxLate, late)
		}
		s.do()
	}
	lc.finish()
}

// timeline is the scenario, repeated every 30 days up to opts.days:
//
//	every day   traffic four times, an idempotent repeat each time, a key sent again after its window,
//	            acme's events on channel region-eu or region-us, an invoice scheduled 2 hours ahead
//	day 3.30    acme's receiver A fails for 6 hours: its deliveries succeed on a retry
//	day 5.05    a poison event at globex (ordered per endpoint, on_dead block) and umbrella (per key, block): both lines block
//	day 6.00    the flood: globex and umbrella are sent events until refused; the bounds and /readyz must tell
//	day 6.30    umbrella is deleted: without force it must be refused (it has deliveries not final), then with force
//	day 7.00    umbrella is created again, with a new endpoint
//	day 7.20    acme's receiver A fails for 14 hours: dead letters; N (same outage, patient policy) loses nothing
//	day 8.10    acme's dead letters are replayed, one by one (A's succeed, B's poison dies again)
//	day 9-13    initech's receiver fails for four days: dead letters, its endpoint disabled, deliveries paused
//	day 10.05   retention deletes globex's dead head: the line must go on
//	day 13.05   initech's endpoint enabled with its held deliveries, its dead letters replayed as a range
//	day 15.00   acme's endpoint A gets a new secret (1 day of grace); day 16.30 its receiver forgets the old one
//	day 20-25   acme's endpoint C is added (rate-limited) and backfilled with the day before, its receiver
//	            fails from day 24.6, and it is deleted at day 25
//	day 9.50    order.paid's schema requires a ref (every order.paid has one from 9.40): initech's order.paid
//	            of its outage's first hours predate it and must still be replayed and delivered
//	day 14.00   audit.logged is deprecated (still taken); day 26.00 archived (refused); day 29.60 active again;
//	            day 29.50 order.paid's schema is loose again (lifecycle_catalogue_test.go)
//	days 4, 8, 12, 18, 24, 30   a phase ends: checks, hot backup restored and checked, a clean stop or
//	            kill -9, the offline check, compaction (8, 24), rotate-key (12), a start; the run's
//	            last day ends with the checks, a backup, a clean stop and the offline check; on bbolt the
//	            phases from days 4, 12 and 24 leave every fan-out owed (owed_fanout_above = 0)
func (lc *lifecycle) timeline() []step {
	var steps []step
	add := func(at float64, what string, do func()) {
		if at < float64(lc.opts.days) {
			steps = append(steps, step{at, what, do})
		}
	}
	for o := 0.0; o < float64(lc.opts.days); o += 30 {
		for d := o; d < o+30; d++ {
			for i, f := range []float64{0.05, 0.30, 0.55, 0.80} {
				add(d+f, "traffic", func() { lc.traffic(i) })
			}
			add(d+0.95, "sweep", lc.sweep)
		}
		add(o+5.05, "poison", lc.poison)
		add(o+6.00, "flood", lc.flood)
		add(o+6.30, "delete umbrella", lc.deleteUmbrella)
		add(o+7.00, "re-create umbrella", lc.recreateUmbrella)
		add(o+8.10, "replay acme's dead letters one by one", lc.replayOneByOne)
		add(o+13.05, "initech's endpoint comes back", func() { lc.initechBack(o + 8.9) })
		add(o+15.00, "rotate acme A's secret", lc.rotateSecret)
		add(o+16.30, "acme A's receiver forgets the old secret", lc.forgetOldSecret)
		add(o+20.00, "add acme C", func() { lc.addAcmeC(o) })
		add(o+25.00, "delete acme C", lc.deleteAcmeC)
		lc.catalogueSteps(o, add)
		for _, p := range []struct {
			day           float64
			kill, compact bool
			rotate        bool
		}{{4, false, false, false}, {8, true, true, false}, {12, false, false, true}, {18, true, false, false}, {24, false, true, false}, {30, true, false, false}} {
			add(o+p.day, "phase end", func() { lc.phaseEnd(o+p.day, p.kill, p.compact, p.rotate) })
		}
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].at < steps[j].at })
	return steps
}

// The receivers fail in these windows of every month (simulated days
// from the month's start).
var (
	acmeAOutages   = []window{{3.30, 3.55}, {7.20, 7.80}}
	initechOutages = []window{{9, 13}}
	acmeCOutages   = []window{{24.6, 30}}
)

// monthly repeats ws in every month of the run.
func (lc *lifecycle) monthly(ws []window) []window {
	var out []window
	for o := 0.0; o < float64(lc.opts.days); o += 30 {
		for _, w := range ws {
			out = append(out, window{o + w.from, o + w.to})
		}
	}
	return out
}

// answer is how a scenario receiver answers a verified request: 500 in
// its outages, 422 (dead at once) to a poison event when refusePoison,
// else 204.
func (lc *lifecycle) answer(outages []window, refusePoison bool) func(verify.Envelope) int {
	return func(env verify.Envelope) int {
		now := lc.clock.now()
		for _, w := range outages {
			if now >= w.from && now < w.to {
				return 500
			}
		}
		if refusePoison && poisoned(env) {
			return 422
		}
		return 204
	}
}

// poisoned reports whether env's data says "poison": true.
func poisoned(env verify.Envelope) bool {
	var data struct {
		Poison bool `json:"poison"`
	}
	json.Unmarshal(env.Data, &data)
	return data.Poison
}

// addEndpoint creates an endpoint of tn with a receiver of its own.
func (lc *lifecycle) addEndpoint(tn *tenant, name string, in client.EndpointInput, outages []window, refusePoison bool) *endpoint {
	lc.gen[name]++
	rc := newEventReceiver(lc.t, fmt.Sprintf("%s-%d", name, lc.gen[name]), lc.answer(outages, refusePoison))
	rc.ordered = in.Ordering == client.OrderingKey || in.Ordering == client.OrderingEndpoint
	rc.byKey = in.Ordering == client.OrderingKey
	in.URL = rc.URL()
	rc.setHeaders(in.Headers)
	created, err := lc.api.CreateEndpoint(lc.ctx, tn.id, in)
	if err != nil {
		lc.t.Fatalf("create endpoint %s of %s: %v", name, tn.id, err)
	}
	rc.setSecrets(created.Secret)
	ep := &endpoint{id: created.ID, name: name, types: in.EventTypes, channels: in.Channels, rc: rc, outages: outages}
	tn.endpoints = append(tn.endpoints, ep)
	return ep
}

func (lc *lifecycle) putTenant(name string) *tenant {
	tn := &tenant{name: name, id: fmt.Sprintf("%s-%x", name, randomBytes(3))}
	if _, _, err := lc.api.PutTenant(lc.ctx, tn.id, client.TenantInput{Name: name}); err != nil {
		lc.t.Fatalf("create tenant %s: %v", tn.id, err)
	}
	lc.tenants[name] = tn
	return tn
}

// setup makes the catalogue, the tenants and their endpoints.
func (lc *lifecycle) setup() {
	lc.putCatalogue()
	orders := []string{"order.created", "order.paid"}
	acme := lc.putTenant("acme")
	lc.bearer = fmt.Sprintf("Bearer lifecycle-%x", randomBytes(12))
	lc.addEndpoint(acme, "acme-a", client.EndpointInput{EventTypes: []string{"order.created", "order.paid", "invoice.issued"},
		Headers: map[string]string{"Authorization": lc.bearer, "X-Lifecycle": "acme-a"}}, lc.monthly(acmeAOutages), false)
	// N: the region-eu invoices, on the patient policy, down when A is.
	lc.addEndpoint(acme, "acme-n", client.EndpointInput{EventTypes: []string{"invoice.issued"}, Channels: []string{"region-eu"}, RetryPolicy: lifecyclePatient},
		lc.monthly(acmeAOutages), false)
	lc.addEndpoint(acme, "acme-b", client.EndpointInput{EventTypes: orders, Ordering: client.OrderingKey, OnDead: client.OnDeadSkip}, nil, true)
	globex := lc.putTenant("globex")
	lc.addEndpoint(globex, "globex-g", client.EndpointInput{EventTypes: []string{"order.created", "invoice.issued"}, Ordering: client.OrderingEndpoint, OnDead: client.OnDeadBlock}, nil, true)
	initech := lc.putTenant("initech")
	lc.addEndpoint(initech, "initech-i", client.EndpointInput{EventTypes: []string{client.AllEventTypes}}, lc.monthly(initechOutages), false)
	umbrella := lc.putTenant("umbrella")
	lc.addEndpoint(umbrella, "umbrella-u", client.EndpointInput{EventTypes: []string{"order.created"}, Ordering: client.OrderingKey, OnDead: client.OnDeadBlock}, nil, true)
}

// send ingests in for tn and keeps the 202 in the ledger. It reports
// whether the event was acknowledged, and the code of a refusal (429 or
// 503: the bounds); any other failure is a finding.
func (lc *lifecycle) send(tn *tenant, in client.EventInput) (client.IngestResult, bool, client.Code) {
	if in.IdempotencyKey == "" {
		in.IdempotencyKey = fmt.Sprintf("%s-%d-%x", tn.id, tn.n, randomBytes(4))
	}
	tn.n++
	subs := tn.subscribers(in.Type, in.Channels)
	res, err := lc.api.Ingest(lc.ctx, tn.id, in)
	if err != nil {
		var p *client.Problem
		if errors.As(err, &p) && (p.Status == 429 || p.Status == 503) {
			lc.stats["refused "+string(p.Code)]++
			return res, false, p.Code
		}
		lc.note("ingest answers 202, or 429/503 at a bound", "%s %s: %v", tn.id, in.Type, err)
		return res, false, client.CodeOf(err)
	}
	if res.Replayed {
		return res, true, "" // repeatExpired's to judge: a fresh key is never a repeat
	}
	if msg := lc.led.ack(tn.id, in.Type, res, subs); msg != "" {
		lc.note("an event's deliveries are its subscribed endpoints'", "%s", msg)
	}
	lc.stats["acknowledged"]++
	lc.noteUnderOldSchema(tn, in, res.ID)
	tn.sent = append(tn.sent, sentEvent{in: in, id: res.ID, at: lc.clock.now()})
	return res, true, ""
}

// event makes tn's next event of typ; every ninth order at acme is a
// poison event, which acme's ordered endpoint B refuses (on_dead skip).
func (lc *lifecycle) event(tn *tenant, typ string) client.EventInput {
	data := map[string]any{"n": tn.n, "day": fmt.Sprintf("%.2f", lc.clock.now())}
	lc.withRef(typ, tn.n, data)
	in := client.EventInput{Type: typ, Data: data}
	switch tn.name {
	case "acme":
		in.OrderingKey = fmt.Sprintf("order-%d", tn.n%3)
		in.Channels = []string{[]string{"region-eu", "region-us"}[tn.n%2]}
		if strings.HasPrefix(typ, "order.") && tn.n%9 == 4 {
			data["poison"] = true
		}
	case "umbrella":
		in.OrderingKey = fmt.Sprintf("u-%d", tn.n%3)
	}
	return in
}

// traffic is a quarter day's ingest: a few events per tenant, one of them
// sent again with its key (the same event must answer), and once a day a
// key whose window has passed (a new event must answer).
func (lc *lifecycle) traffic(quarter int) {
	types := []string{"order.created", "order.paid", "invoice.issued"}
	for _, name := range []string{"acme", "globex", "initech", "umbrella"} {
		tn := lc.tenants[name]
		if tn == nil || tn.deleted {
			continue
		}
		n := 1
		if name == "acme" {
			n = 2
		}
		for range n {
			typ := types[tn.n%len(types)]
			if name == "umbrella" {
				typ = "order.created"
			}
			lc.send(tn, lc.event(tn, typ))
		}
		lc.repeatRecent(tn)
	}
	acme := lc.tenants["acme"]
	switch quarter {
	case 1:
		lc.repeatExpired(acme)
		lc.sendScheduled(acme)
	case 2:
		lc.sendAudit()
	}
}

// sendScheduled sends tn an invoice to deliver in 2 hours, on the
// channel acme's endpoint N takes. On day 7.30 that is inside acme's
// 14-hour outage, early enough that the standard policy's 4 attempts
// would all fail: N's patient policy must deliver it after the outage.
func (lc *lifecycle) sendScheduled(tn *tenant) {
	in := lc.event(tn, "invoice.issued")
	in.Channels = []string{"region-eu"}
	in.DeliverAt = time.Now().Add(lc.clock.span(2.0 / 24)).Truncate(time.Millisecond)
	if res, ok, _ := lc.send(tn, in); ok {
		lc.scheduled[res.ID] = in.DeliverAt
		lc.stats["scheduled"]++
	}
}

// repeatRecent sends tn's latest acknowledged event again with its
// idempotency key: within the window, the answer is that event.
func (lc *lifecycle) repeatRecent(tn *tenant) {
	if len(tn.sent) == 0 {
		return
	}
	s := tn.sent[len(tn.sent)-1]
	if lc.clock.now()-s.at > 0.5 {
		return
	}
	res, err := lc.api.Ingest(lc.ctx, tn.id, s.in)
	var p *client.Problem
	switch {
	case errors.As(err, &p) && (p.Status == 429 || p.Status == 503):
	case lc.clock.now()-s.at > 0.9:
		// Answered near or past the key's one-day window (a machine so
		// loaded that the call took most of a simulated day): either
		// answer is right.
		lc.stats["repeats answered too late to judge"]++
	case err != nil:
		lc.note("an idempotent repeat answers the first event", "%s key %s: %v", tn.id, s.in.IdempotencyKey, err)
	case res.ID != s.id || !res.Replayed:
		lc.note("an idempotent repeat answers the first event", "%s key %s, sent again %.2f days later: event %s (replayed %t), first %s",
			tn.id, s.in.IdempotencyKey, lc.clock.now()-s.at, res.ID, res.Replayed, s.id)
	default:
		lc.stats["idempotent repeats"]++
	}
}

// repeatExpired sends an acknowledged event of tn again with its key
// after the key's window (1 day) ended: the answer is a new event.
func (lc *lifecycle) repeatExpired(tn *tenant) {
	now := lc.clock.now()
	for i := range tn.sent {
		s := &tn.sent[i]
		if now-s.at < 1.2 {
			return
		}
		if now-s.at > 1.8 || s.reused || !s.in.DeliverAt.IsZero() || lc.refusedNow(s.in) {
			continue // a scheduled one's deliver_at is past by now: 422; so is one its type refuses now
		}
		s.reused = true
		in := s.in
		res, ok, _ := lc.send(tn, in)
		if ok && (res.ID == s.id || res.Replayed) {
			lc.note("a key past its window makes a new event", "%s key %s, sent again %.2f days later, answered event %s (replayed %t), first %s", tn.id, in.IdempotencyKey, now-s.at, res.ID, res.Replayed, s.id)
		}
		return
	}
}

// poison sends globex and umbrella an event their receivers refuse for
// good (422): on_dead block, so each line stops behind it.
func (lc *lifecycle) poison() {
	for _, name := range []string{"globex", "umbrella"} {
		tn := lc.tenants[name]
		in := lc.event(tn, "order.created")
		in.Data.(map[string]any)["poison"] = true
		if name == "umbrella" {
			in.OrderingKey = "u-0"
		}
		lc.send(tn, in)
	}
}

// flood sends events into the blocked lines of umbrella and globex until
// ingest refuses them (at most [limits] pending_per_tenant and ten more
// each), then checks, within lc.countLag, that ingest refuses at the
// bounds: a tenant with pending_per_tenant deliveries not finished
// (pending or waiting) gets 429, every tenant 503 once all of them hold
// [ingest] max_pending, and /readyz says 503 then.
func (lc *lifecycle) flood() {
	// umbrella first: its line is deleted with it at 6.30, so whatever
	// the flood leaves above the bounds goes then, while globex's line
	// stays blocked for days. A node counts its own ingests between two
	// counts of the database (docs/cluster.md), so on one node either
	// tenant stops at its bound give or take what is in flight.
	flooded := []*tenant{lc.tenants["umbrella"], lc.tenants["globex"]}
	refused := map[*tenant]bool{}
	for _, tn := range flooded {
		for range lc.perTenant + 10 {
			if _, ok, _ := lc.send(tn, lc.floodEvent(tn)); !ok {
				refused[tn] = true
				break
			}
		}
	}
	acme := lc.tenants["acme"]
	var busy, ready bool // the backlog reached max_pending; /readyz said so
	var backlog map[string]int
	poll(lc.countLag, func() bool {
		backlog = lc.backlogs()
		done := true
		for _, tn := range flooded {
			if !refused[tn] && backlog[tn.id] >= lc.perTenant {
				_, ok, _ := lc.send(tn, lc.floodEvent(tn))
				refused[tn] = !ok
				done = done && !ok
			}
		}
		if busy = backlog[""] >= lc.maxPending; busy {
			if !refused[acme] {
				_, ok, _ := lc.send(acme, lc.floodEvent(acme))
				refused[acme] = !ok
			}
			code, err := lc.api.ready(lc.ctx)
			ready = err == nil && code == 503
			done = done && refused[acme] && ready
		}
		return done
	})
	for _, tn := range flooded {
		if !refused[tn] && backlog[tn.id] >= lc.perTenant {
			lc.note("a tenant's ingest stops at [limits] pending_per_tenant", "%s: %d deliveries pending or waiting (bound %d), and ingest still answered 202 %s later", tn.id, backlog[tn.id], lc.perTenant, lc.countLag)
		}
	}
	if busy && !refused[acme] {
		lc.note("ingest stops at [ingest] max_pending", "%d deliveries pending or waiting (bound %d), and %s's ingest still answered 202 %s later", backlog[""], lc.maxPending, acme.id, lc.countLag)
	}
	if busy && !ready {
		lc.note("/readyz tells the truth", "%d deliveries pending or waiting (max_pending %d), and /readyz answered 200 for %s", backlog[""], lc.maxPending, lc.countLag)
	}
}

// floodEvent is an event for tn's blocked line (umbrella's is key u-0).
func (lc *lifecycle) floodEvent(tn *tenant) client.EventInput {
	in := lc.event(tn, "order.created")
	in.OrderingKey = "u-0"
	return in
}

// backlogs counts the deliveries pending or waiting, what the backlog's
// bounds count, of each tenant by ID and of all under "".
func (lc *lifecycle) backlogs() map[string]int {
	n := map[string]int{}
	for id, ds := range lc.listAll() {
		for _, d := range ds {
			switch d.State {
			case client.StatePending, client.StateDelivering, client.StateWaiting:
				n[id]++
				n[""]++
			}
		}
	}
	return n
}

// deleteUmbrella deletes umbrella, whose ordered line is blocked with
// deliveries waiting: without force the delete must be refused (409
// pending_deliveries: its deliveries are not finished), with force done.
func (lc *lifecycle) deleteUmbrella() {
	tn := lc.tenants["umbrella"]
	notFinal := lc.notFinal(tn.id)
	_, err := lc.api.DeleteTenant(lc.ctx, tn.id, false)
	switch code := client.CodeOf(err); {
	case err == nil:
		lc.note("a tenant with deliveries not finished is deleted only with force", "DELETE /v1/tenants/%s without force answered 202 while %d of its deliveries were not finished (%s)", tn.id, sum(notFinal), describe(notFinal))
	case code != client.CodePendingDeliveries:
		lc.note("a tenant with deliveries not finished is deleted only with force", "DELETE without force: %v", err)
	}
	if err != nil {
		if _, err := lc.api.DeleteTenant(lc.ctx, tn.id, true); err != nil {
			lc.t.Fatalf("DELETE /v1/tenants/%s?force=true: %v", tn.id, err)
		}
	}
	tn.deleted = true
	lc.led.tenantDeleted(tn.id)
	lc.stats["tenants deleted"]++
}

// notFinal counts tenant's deliveries by state, of those not finished.
func (lc *lifecycle) notFinal(tenant string) map[client.State]int {
	out := map[client.State]int{}
	for _, d := range lc.listAll()[tenant] {
		if d.State != client.StateSucceeded && d.State != client.StateDead {
			out[d.State]++
		}
		if d.State == client.StateDead && d.Line != "" && d.WaitingBehind == "" && len(d.Skips) == 0 {
			out["dead, blocking its line"]++
		}
	}
	return out
}

func sum(m map[client.State]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func describe(m map[client.State]int) string {
	var parts []string
	for _, s := range keys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", s, m[client.State(s)]))
	}
	return strings.Join(parts, ", ")
}

// recreateUmbrella makes umbrella again once its purge is done, with an
// ordered endpoint and a receiver of its own.
func (lc *lifecycle) recreateUmbrella() {
	tn := lc.tenants["umbrella"]
	var err error
	ok := poll(lc.clock.span(1), func() bool {
		_, _, err = lc.api.PutTenant(lc.ctx, tn.id, client.TenantInput{Name: "umbrella again"})
		return err == nil
	})
	if !ok {
		lc.note("a deleted tenant's ID is free again once purged", "PUT /v1/tenants/%s for a simulated day after its delete: %v", tn.id, err)
		return
	}
	tn.deleted, tn.endpoints, tn.sent = false, nil, nil
	lc.addEndpoint(tn, "umbrella-u", client.EndpointInput{EventTypes: []string{"order.created"}, Ordering: client.OrderingKey, OnDead: client.OnDeadBlock}, nil, true)
	lc.stats["tenants re-created"]++
}

// replayOneByOne replays acme's dead letters one by one (at most 20):
// those of its endpoint A's outage, which succeed now, and poison events
// its ordered endpoint B refused, which die again in their second cycle.
func (lc *lifecycle) replayOneByOne() {
	acme := lc.tenants["acme"]
	dead, _, err := lc.api.deliveries(lc.ctx, acme.id, url.Values{"state": {"dead"}})
	if err != nil {
		lc.note("dead letters are listed", "%s: %v", acme.id, err)
		return
	}
	for _, d := range dead[:min(20, len(dead))] {
		r, err := lc.api.Replay(lc.ctx, acme.id, d.ID)
		if err != nil {
			lc.note("a dead letter can be replayed", "%s delivery %s: %v", acme.id, d.ID, err)
			continue
		}
		lc.led.observe([]client.Delivery{r}, time.Now())
		lc.stats["replayed one by one"]++
	}
}

// initechBack enables initech's endpoint, which failing for a day
// disabled, sending what it held, and replays its dead letters since
// simulated day since as one range.
func (lc *lifecycle) initechBack(since float64) {
	tn := lc.tenants["initech"]
	ep := tn.endpoint("initech-i")
	got, err := lc.api.Endpoint(lc.ctx, tn.id, ep.id)
	if err != nil {
		lc.t.Fatalf("initech's endpoint: %v", err)
	}
	// Failing every attempt for a day disabled it, unless a bound held
	// initech's ingest for that long (TestEndpointHealth_* hold the rule
	// itself).
	if got.Disabled {
		lc.initechDisabled = true
		lc.stats["endpoints disabled by failing"]++
		off := false
		if _, err := lc.api.UpdateEndpoint(lc.ctx, tn.id, ep.id, client.EndpointPatch{Disabled: &off, DeliverHeld: true}); err != nil {
			lc.note("a disabled endpoint can be enabled with its held deliveries", "initech: %v", err)
		}
	}
	task, err := lc.api.ReplayDeadLetters(lc.ctx, tn.id, client.DeadLetterRange{Since: lc.clock.wall(since), Endpoint: ep.id})
	if err == nil {
		task, err = lc.api.WaitTask(lc.ctx, task, 10*time.Millisecond)
	}
	if err != nil || task.State != client.TaskSucceeded {
		lc.note("dead letters can be replayed as a range", "%s: %v (task %+v)", tn.id, err, task)
	}
	lc.stats["replayed as a range"] += task.Done
	lc.sweep() // what was dead is pending now, kept for its new cycle
}

// rotateSecret gives acme's endpoint A a new secret, the old one signing
// beside it for a simulated day; its receiver takes both.
func (lc *lifecycle) rotateSecret() {
	acme := lc.tenants["acme"]
	a := acme.endpoint("acme-a")
	res, err := lc.api.RotateSecret(lc.ctx, acme.id, a.id, lc.clock.span(1))
	if err != nil {
		lc.note("an endpoint's secret can be rotated", "acme A: %v", err)
		return
	}
	a.rc.mu.Lock()
	old := slices.Clone(a.rc.secrets)
	a.rc.mu.Unlock()
	a.rc.setSecrets(append([]string{res.Secret}, old...)...)
	lc.stats["secrets rotated"]++
}

// forgetOldSecret leaves acme's receiver A only the newest secret, after
// the grace window: every delivery from now on must verify with it.
func (lc *lifecycle) forgetOldSecret() {
	a := lc.tenants["acme"].endpoint("acme-a")
	a.rc.mu.Lock()
	newest := a.rc.secrets[0]
	a.rc.mu.Unlock()
	a.rc.setSecrets(newest)
}

// addAcmeC gives acme a third endpoint, C, whose receiver fails from day
// o+24.6 on, until the endpoint is deleted.
//
// C is backfilled with acme's order.paid events of the day before: it
// gets exactly those, within its own rate limit, and a second backfill
// of the same range adds nothing.
func (lc *lifecycle) addAcmeC(o float64) {
	var outages []window
	for _, w := range acmeCOutages {
		outages = append(outages, window{o + w.from, o + w.to})
	}
	acme := lc.tenants["acme"]
	limit := acmeCLimit
	ep := lc.addEndpoint(acme, "acme-c", client.EndpointInput{EventTypes: []string{"order.paid"}, RateLimit: &limit}, outages, false)
	since, until := lc.clock.wall(o+19), time.Now()
	want := lc.led.eventsOf(acme.id, "order.paid", since, until)
	backfill := func() (client.Task, error) {
		t, err := lc.api.Backfill(lc.ctx, acme.id, ep.id, since, until)
		if err == nil {
			t, err = lc.api.WaitTask(lc.ctx, t, 10*time.Millisecond)
		}
		return t, err
	}
	got, err := backfill()
	if err != nil || got.State != client.TaskSucceeded {
		lc.note("a new endpoint can be backfilled", "acme C: %v (task %+v)", err, got)
		return
	}
	lc.stats["backfilled"] += got.Done
	if got.Done != len(want) {
		lc.note("a backfill delivers exactly the missing events", "acme C, the day before: made %d, want the %d order.paid events acknowledged then", got.Done, len(want))
	}
	again, err := backfill()
	if err != nil || again.Done != 0 || again.Skipped != got.Done {
		lc.note("a second backfill adds nothing", "acme C: made %d, skipped %d (%v), want 0 and %d", again.Done, again.Skipped, err, got.Done)
	}
	// The ledger expects each backfilled delivery delivered like the others.
	ds, _, err := lc.api.deliveries(lc.ctx, acme.id, url.Values{"endpoint": {ep.id}})
	if err != nil {
		lc.note("the delivery listing answers", "acme C: %v", err)
		return
	}
	for _, d := range ds {
		lc.led.expect(d.EventID, d.EndpointID, d.ID, ep.rc)
	}
}

// deleteAcmeC deletes acme's endpoint C while its deliveries retry: they
// must end dead ("endpoint deleted"), never vanish.
func (lc *lifecycle) deleteAcmeC() {
	acme := lc.tenants["acme"]
	ep := acme.endpoint("acme-c")
	if ep == nil {
		return
	}
	if err := lc.api.DeleteEndpoint(lc.ctx, acme.id, ep.id); err != nil {
		lc.note("an endpoint can be deleted", "acme C: %v", err)
		return
	}
	ep.deleted = true
}

// live returns the tenants not deleted, by name.
func (lc *lifecycle) live() []*tenant {
	var out []*tenant
	for _, name := range keys(lc.tenants) {
		if tn := lc.tenants[name]; !tn.deleted {
			out = append(out, tn)
		}
	}
	return out
}

// listAll lists every delivery of every live tenant, by tenant ID. A failed listing is
// a finding.
func (lc *lifecycle) listAll() map[string][]client.Delivery {
	out := map[string][]client.Delivery{}
	for _, tn := range lc.live() {
		id := tn.id
		ds, empty, err := lc.api.deliveries(lc.ctx, id, nil)
		if err != nil {
			lc.note("the delivery listing answers", "%s: %v", id, err)
		}
		if empty > 0 {
			lc.note("has_more promises a next item", "%s's delivery listing: %d empty pages after has_more", id, empty)
		}
		out[id] = ds
	}
	return out
}

// sweep reads every delivery, so that the ledger knows when each
// finished before retention may delete it, and answers the day's
// endpoint.disabled alerts.
func (lc *lifecycle) sweep() {
	at := time.Now()
	for _, ds := range lc.listAll() {
		lc.led.observe(ds, at)
	}
	lc.answerDisabled()
}

// answerDisabled is the operator answering endpoint.disabled: each
// disabled endpoint whose receiver is not failing on purpose now is
// enabled with what it held. An endpoint that refuses a poison event
// now and then (422) and gets no other attempt for a day is, rightly,
// failing every attempt for [delivery] disable_after; a receiver in an
// outage is the scenario's to bring back (initechBack).
func (lc *lifecycle) answerDisabled() {
	now := lc.clock.now()
	for _, tn := range lc.live() {
		for _, ep := range tn.endpoints {
			if ep.deleted || slices.ContainsFunc(ep.outages, func(w window) bool { return now >= w.from && now < w.to }) {
				continue
			}
			got, err := lc.api.Endpoint(lc.ctx, tn.id, ep.id)
			if err != nil || !got.Disabled {
				continue
			}
			off := false
			if _, err := lc.api.UpdateEndpoint(lc.ctx, tn.id, ep.id, client.EndpointPatch{Disabled: &off, DeliverHeld: true}); err != nil {
				lc.note("a disabled endpoint can be enabled with its held deliveries", "%s %s: %v", tn.id, ep.name, err)
				continue
			}
			lc.stats["endpoints enabled again"]++
			lc.t.Logf("day %.2f: %s's endpoint %s was disabled (%s); enabled with what it held", now, tn.id, ep.name, got.DisabledReason)
		}
	}
}

// phaseEnd checks every invariant with the node running, takes a hot
// backup and checks its restored copy, stops the node (SIGTERM, or
// SIGKILL when kill), checks the stopped store, compacts it and rotates
// its key when asked, and starts the node again.
func (lc *lifecycle) phaseEnd(day float64, kill, compact, rotate bool) {
	name := fmt.Sprintf("day %g", day)
	before := lc.check(name, day)
	lc.checkBackup(before)
	if kill {
		lc.node.kill()
		lc.stats["kill -9"]++
	} else {
		lc.node.stop()
		lc.stats["clean stops"]++
	}
	lc.offlineCheck("after the stop")
	if compact {
		if err := lc.st.compact(lc.t, lc.configPath()); err != nil {
			lc.note("compaction works on a pruned store", "%v", err)
		} else {
			lc.stats["compactions"]++
			lc.offlineCheck("after compaction")
		}
	}
	if rotate {
		newKey := lc.newKey()
		b, _ := os.ReadFile(newKey)
		key, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
		did, err := lc.st.rotateKey(lc.t, lc.configPath(), newKey)
		if err != nil {
			lc.note("rotate-key works on a pruned store", "%v", err)
			// It may have re-sealed the secrets and failed after: then
			// the new key is the one to start with, as it says.
			did = lc.st.opensWith(lc.ctx, key)
		}
		if did {
			lc.useKey(newKey, key)
			lc.stats["key rotations"]++
			lc.offlineCheck("after rotate-key")
		}
	}
	lc.report(name)
	lc.setOwed(day)
	lc.start()
}

// offlineCheck runs the store's check with the node stopped.
func (lc *lifecycle) offlineCheck(when string) {
	if err := lc.st.check(lc.ctx, lc.key); err != nil {
		lc.note("the store's Check passes", "%s: %v", when, err)
	}
}

// report reports the findings of the phase that ends, one error per
// broken check.
func (lc *lifecycle) report(phase string) {
	for _, line := range findings(lc.found) {
		lc.t.Errorf("%s: %s", phase, line)
	}
	seen := map[string]bool{}
	for _, f := range lc.found {
		if !seen[f.check] {
			seen[f.check] = true
			lc.broken[f.check] = append(lc.broken[f.check], phase)
		}
	}
	lc.found = nil
}

// finish drains what is left once every receiver is up, checks a last
// time, backs up, stops and checks the stopped store, and sums up.
func (lc *lifecycle) finish() {
	name := fmt.Sprintf("day %d (the end)", lc.opts.days)
	lc.answerDisabled()
	var left map[client.State]int
	drained := poll(lc.clock.span(2), func() bool {
		left = map[client.State]int{}
		for _, tn := range lc.live() {
			for s, n := range lc.notFinal(tn.id) {
				left[s] += n
			}
		}
		return sum(left) == 0
	})
	if !drained {
		lc.note("every delivery finishes once its receiver is up", "after two simulated days of receivers up: %s", describe(left))
	}
	before := lc.check(name, float64(lc.opts.days))
	lc.checkBackup(before)
	lc.node.stop()
	lc.offlineCheck("after the last stop")
	lc.report(name)
	for _, check := range keys(lc.broken) {
		lc.t.Logf("broken: %s (%s)", check, strings.Join(lc.broken[check], ", "))
	}
	var parts []string
	for _, k := range keys(lc.stats) {
		parts = append(parts, fmt.Sprintf("%s %d", k, lc.stats[k]))
	}
	lc.t.Logf("LIFECYCLE %s: %d simulated days of %s in %s: %s; the latest step %.1f days late", lc.st.driver, lc.opts.days, lc.opts.day, time.Since(lc.clock.start).Round(time.Second), strings.Join(parts, ", "), lc.maxLate)
}

// check checks, with the node running, what must hold after every phase
// (the phase that ends at simulated day day), and returns the events it
// found stored.
func (lc *lifecycle) check(phase string, day float64) map[string]bool {
	at := time.Now()
	listed := lc.listAll()
	for _, ds := range listed {
		lc.led.observe(ds, at)
	}
	stored := map[string]bool{}
	for _, ds := range listed {
		for _, d := range ds {
			stored[d.EventID] = true
		}
	}
	gone := func(tenant, id string) bool {
		_, err := lc.api.Event(lc.ctx, tenant, id)
		if err == nil {
			stored[id] = true
		}
		return client.CodeOf(err) == client.CodeEventNotFound || client.CodeOf(err) == client.CodeTenantNotFound
	}
	lc.found = append(lc.found, lc.led.audit(listed, at, gone)...)
	lc.checkFilteredListings()
	lc.checkOverdue()
	lc.checkReceivers()
	lc.checkReports()
	lc.checkReady()
	lc.checkAlerts(phase, day)
	lc.checkControls()
	lc.checkOldSchema(day)
	return stored
}

// checkControls checks the endpoints' own controls as the month wears
// on: acme N (patient policy) never lost a delivery to an outage the
// standard policy does not outlive; acme C never got more requests in a
// second than its rate limit allows; no scheduled event reached a
// receiver before its deliver_at; and acme A's bearer token, sent with
// every request (the receiver checks), is in no log line.
func (lc *lifecycle) checkControls() {
	acme := lc.tenants["acme"]
	if n := acme.endpoint("acme-n"); n != nil {
		if died := lc.led.diedAt(n.id); len(died) > 0 {
			lc.note("a patient retry policy outlives an outage longer than the standard window", "acme N: %d deliveries seen dead, e.g. %s", len(died), died[0])
		}
	}
	for _, ep := range acme.endpoints {
		if ep.name != "acme-c" {
			continue
		}
		// A token bucket lets burst + rate × window through; one more for
		// the two ends of a window.
		if most, bound := ep.rc.busiest(time.Second), acmeCLimit.Burst+int(acmeCLimit.PerSecond)+1; most > bound {
			lc.note("an endpoint's rate limit holds", "acme C (%g/s, burst %d): %d requests within a second", acmeCLimit.PerSecond, acmeCLimit.Burst, most)
		}
	}
	for _, ep := range acme.endpoints {
		for id, rec := range ep.rc.received() {
			if at, ok := lc.scheduled[id]; ok && rec.first.Before(at) {
				lc.note("a scheduled event is not delivered before its deliver_at", "event %s reached %s %s early", id, ep.name, at.Sub(rec.first))
			}
		}
	}
	if logs, err := os.ReadFile(lc.logs.Name()); err != nil {
		lc.note("custom header values are never logged", "read the node's log: %v", err)
	} else if strings.Contains(string(logs), strings.TrimPrefix(lc.bearer, "Bearer ")) {
		lc.note("custom header values are never logged", "acme A's Authorization value is in the node's log")
	}
}

// checkFilteredListings pages through each tenant's dead letters one at
// a time and its succeeded deliveries 50 at a time: has_more must
// promise a next item.
func (lc *lifecycle) checkFilteredListings() {
	for _, tn := range lc.live() {
		for _, q := range []url.Values{{"state": {"dead"}, "limit": {"1"}}, {"state": {"succeeded"}, "limit": {"50"}}} {
			_, empty, err := lc.api.deliveries(lc.ctx, tn.id, q)
			if err != nil {
				lc.note("the delivery listing answers", "%s %s: %v", tn.id, q.Encode(), err)
			}
			if empty > 0 {
				lc.note("has_more promises a next item", "%s: deliveries?%s answered has_more true, then an empty page", tn.id, q.Encode())
			}
		}
	}
}

// checkOverdue checks that no delivery stays pending more than
// lc.overdue past its due time: one that does is one no scheduler knows.
// A late one is given two seconds more to be taken (a phase ends days
// after the last start, so no lease of a killed node is left to end).
func (lc *lifecycle) checkOverdue() {
	var late []string
	ok := poll(2*time.Second, func() bool {
		late = nil
		at := time.Now()
		for id, ds := range lc.listAll() {
			for _, d := range ds {
				if d.State == client.StatePending && at.Sub(d.NextAttemptAt) > lc.overdue {
					late = append(late, fmt.Sprintf("%s delivery %s (event %s, line %q) due %.2f days ago", id, d.ID, d.EventID, d.Line, at.Sub(d.NextAttemptAt).Seconds()/lc.opts.day.Seconds()))
				}
			}
		}
		return len(late) == 0
	})
	if !ok {
		sort.Strings(late)
		lc.note("no delivery is pending past its due time", "%d pending deliveries not attempted %s after they were due, e.g. %s", len(late), lc.overdue, strings.Join(late[:min(3, len(late))], "; "))
	}
}

// checkReceivers collects what the receivers found wrong: a request that
// did not verify, a body other than the first, an event out of its
// line's order.
func (lc *lifecycle) checkReceivers() {
	rcs := []*eventReceiver{lc.alerts}
	for _, tn := range lc.tenants {
		for _, ep := range tn.endpoints {
			rcs = append(rcs, ep.rc)
		}
	}
	for _, rc := range rcs {
		for _, p := range rc.trouble() {
			lc.note("receivers get verified, unchanged, ordered events", "%s", p)
		}
	}
}

// checkReports checks each tenant's report and the admin's: every
// delivery in exactly one of its buckets, and the admin report's total
// the sum of the tenants'.
func (lc *lifecycle) checkReports() {
	const all = 100000
	for _, tn := range lc.live() {
		id := tn.id
		r, err := lc.api.tenantReport(lc.ctx, id, all)
		if err != nil {
			lc.note("the report answers", "%s: %v", id, err)
			continue
		}
		if r.buckets() != r.Deliveries {
			lc.note("a report's counts add up to its deliveries", "%s: first %d + retries %d + replayed %d + pending %d + waiting %d + paused %d + dead %d = %d, deliveries %d",
				id, r.FirstAttemptSuccesses, r.RetrySuccesses, r.Replayed, r.Pending, r.Waiting, r.Paused, r.Dead, r.buckets(), r.Deliveries)
		}
	}
	ar, err := lc.api.adminReport(lc.ctx, all)
	if err != nil {
		lc.note("the admin report answers", "%v", err)
	} else {
		total := 0
		for _, r := range ar.Tenants {
			total += r.Deliveries
			if strings.HasPrefix(r.Tenant, "_") {
				lc.note("reserved tenants never appear as customers", "the admin report lists %s", r.Tenant)
			}
		}
		if total != ar.Total.Deliveries || ar.Total.buckets() != ar.Total.Deliveries {
			lc.note("a report's counts add up to its deliveries", "admin report: tenants' deliveries %d, total %d, total's buckets %d", total, ar.Total.Deliveries, ar.Total.buckets())
		}
	}
	ids, err := lc.api.tenantIDs(lc.ctx)
	if err != nil {
		lc.note("the tenant listing answers", "%v", err)
	}
	for _, id := range ids {
		if strings.HasPrefix(id, "_") {
			lc.note("reserved tenants never appear as customers", "GET /v1/tenants lists %s", id)
		}
	}
}

// checkReady checks that /readyz says what the backlog is: 503 when
// the deliveries pending or waiting reach [ingest] max_pending, 200
// otherwise (the node runs and its store takes writes).
func (lc *lifecycle) checkReady() {
	var n, code int
	ok := poll(lc.countLag+time.Second, func() bool {
		n = lc.backlogs()[""]
		var err error
		code, err = lc.api.ready(lc.ctx)
		return err == nil && (code == 503) == (n >= lc.maxPending)
	})
	if !ok {
		lc.note("/readyz tells the truth", "/readyz answered %d with %d deliveries pending or waiting (max_pending %d)", code, n, lc.maxPending)
	}
}

// checkAlerts checks the operator's alerts: each verified (the alert
// receiver counts those that are not), each delivery.dead naming a
// delivery the test saw dead; and, once initech's receiver has failed
// for days, its endpoint.failing, delivery.dead and endpoint.disabled.
func (lc *lifecycle) checkAlerts(phase string, day float64) {
	kinds := map[string]map[string]int{} // tenant → type → alerts
	for _, rec := range lc.alerts.received() {
		var data struct {
			Tenant     string `json:"tenant"`
			DeliveryID string `json:"delivery_id"`
		}
		json.Unmarshal(rec.env.Data, &data)
		if kinds[data.Tenant] == nil {
			kinds[data.Tenant] = map[string]int{}
		}
		kinds[data.Tenant][rec.env.Type]++
		if rec.env.Type == "delivery.dead" && !lc.led.sawDead(data.DeliveryID) && !lc.led.tenantGone(data.Tenant) {
			// It may have died after the check read it.
			d, err := lc.api.Delivery(lc.ctx, data.Tenant, data.DeliveryID)
			if err == nil {
				lc.led.observe([]client.Delivery{d}, time.Now())
			}
			if err != nil || d.State != client.StateDead && d.Cycle == 1 {
				lc.note("a delivery.dead alert names a dead delivery", "alert %s names delivery %s of %s, which is %s (%v)", rec.env.ID, data.DeliveryID, data.Tenant, d.State, err)
			}
		}
	}
	// What initech's outage did is known once it has ended (initechBack):
	// deliveries dead and the endpoint disabled, unless ingest was
	// refused through it (a bound held).
	initech := lc.tenants["initech"].id
	var want []string
	if day >= 13.05 && lc.led.sawDeadOf(initech) {
		want = append(want, "endpoint.failing", "delivery.dead")
	}
	if lc.initechDisabled {
		want = append(want, "endpoint.disabled")
	}
	for _, kind := range want {
		if kinds[initech][kind] == 0 {
			lc.note("an endpoint failing for days raises the operator's alerts", "no %s alert for initech by %s", kind, phase)
		}
	}
	n := 0
	for _, byType := range kinds {
		for _, k := range byType {
			n += k
		}
	}
	lc.stats["alerts received"] = n
}

// checkBackup takes a hot backup, restores, opens and checks it, and
// checks that it holds every event stored both before it (stored) and
// after it: an event retention deleted meanwhile may be missing.
func (lc *lifecycle) checkBackup(stored map[string]bool) {
	ids, err := lc.st.backup(lc.ctx, lc.t, lc.node, lc.configPath(), lc.key)
	if err != nil {
		lc.note("a hot backup restores and passes Check", "%v", err)
		return
	}
	lc.stats["backups restored"]++
	after := map[string]bool{}
	for _, ds := range lc.listAll() {
		for _, d := range ds {
			after[d.EventID] = true
		}
	}
	var missing []string
	for id := range stored {
		if after[id] && !ids[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		lc.note("a hot backup holds every stored event", "%d events stored before and after the backup are not in it, e.g. %s", len(missing), strings.Join(missing[:min(3, len(missing))], ", "))
	}
}
