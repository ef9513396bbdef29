package engine

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/webhookd/webhookd/verify"
)

// DispatcherOptions configure a Dispatcher. A zero field means the default
// named on it.
type DispatcherOptions struct {
	Policy RetryPolicy // the standard policy (StandardRetryPolicy); zero Deadline: DefaultRetryPolicy()
	// Policies are the other retry policies a delivery may follow
	// (Delivery.RetryPolicy), by name: ExtendedRetryPolicyName and what
	// the operator defines. Each takes Policy's AttemptTimeout and
	// RetryAfterMax, which are the node's. A delivery naming a policy not
	// here follows Policy, and the log says so once per name. Nil: the
	// standard policy only.
	Policies            map[string]RetryPolicy
	Workers             int       // attempts in flight at once, all endpoints (and up to recordingPerWorker times as many outcomes being recorded); 0: 64
	EndpointConcurrency int       // attempts in flight at once per endpoint; 0: 8
	TenantConcurrency   int       // attempts in flight at once per tenant; 0: three quarters of Workers (at least 1)
	Scheduler           Scheduler // who owns due work (a SharedScheduler for a store shared by several processes); nil: NewLocalScheduler(store)
	// ClaimAhead, when not 0, bounds the deliveries claimed and waiting
	// for a worker: the claim loop claims only while fewer wait, so with
	// a Scheduler shared by several processes no process takes more due
	// work than it can start soon. Zero: all that is due is claimed at
	// once (LocalScheduler: it is this process's anyway, and the fair
	// queues choose among it).
	ClaimAhead int
	// EndpointRate bounds every endpoint's attempts per second, with a
	// burst of max(1, floor(EndpointRate)); it is the ceiling of an
	// endpoint's own RateLimit (EffectiveRateLimit). 0: no bound but the
	// endpoints' own.
	EndpointRate float64
	Client       *http.Client // nil: NewHTTPClient(Workers, EndpointConcurrency, Targets)
	Logger       *slog.Logger // nil: discard
	UserAgent    string       // "": "webhookd"
	// Now is the wall clock: the times written to records (an attempt's
	// start, a delivery's next attempt, health) and due times read from
	// them; nil: time.Now. No wait is measured on it: waits and an
	// attempt's duration run on the monotonic clock (time.Now's reading,
	// as every Scheduler time is), so a jump of the wall clock moves none
	// of them (TestDispatcher_ClockJump).
	Now    func() time.Time
	Random func() float64 // jitter source in [0, 1); nil: math/rand/v2
	// OnAttempt, when set, is told of every attempt whose outcome was
	// recorded, with the state the delivery moved to (for metrics). It runs
	// on a worker: it must be fast and must not block.
	OnAttempt func(endpointID string, a Attempt, state State)
	// DisableAfter disables an endpoint that has failed every attempt for
	// this long (see healthAfter); zero: never for that reason (a 410
	// still disables at once).
	DisableAfter time.Duration
	// KeepGoneEndpoints leaves an endpoint that answered 410 Gone enabled;
	// the delivery is dead all the same. Zero (false): a 410 disables the
	// endpoint at once, as Standard Webhooks recommends.
	KeepGoneEndpoints bool
	// OnAlert, when set, is told of health transitions: an endpoint's
	// first failure, its first success after failing, its disabling, a
	// delivery's death. It runs on a
	// worker after the transition is recorded: it must not block.
	OnAlert func(Alert)

	// Tracer, when set, traces each attempt (tracing.go); an endpoint
	// with SendTraceparent gets the attempt span's traceparent. Nil:
	// none.
	Tracer Tracer

	// Targets is where attempts and challenges may go, checked on every
	// connection by the client NewHTTPClient builds. IMPORTANT: the zero
	// value is the strict policy (https only, public addresses only), so a
	// dispatcher is never an open SSRF proxy by omission; tests against
	// loopback receivers set both fields. A Client given above must make
	// its own checks.
	Targets TargetPolicy
}

// storeRetryDelay is how long a delivery waits when the store failed to
// read it or to record its outcome (it stays pending in the retry index, so
// a crash meanwhile loses nothing).
const storeRetryDelay = time.Second

// maxDrainBody bounds how much of a response body is read (to keep the
// connection reusable) beyond the excerpt that is stored.
const maxDrainBody = 64 << 10

// Dispatcher makes delivery attempts. Work reaches it three ways: Enqueue
// after ingest or replay (due at once), the timer queue for retries, and
// Start's recovery, which rebuilds the timer from the store's retry index.
//
// Fairness: each endpoint has its own queue of ready deliveries, and each
// tenant a turn among the tenants with ready work. A worker takes the next
// tenant in turn and, within it, the next endpoint in turn; no tenant gets
// more than TenantConcurrency workers at once, no endpoint more than
// EndpointConcurrency, and none faster than its RateLimit within
// EndpointRate (see endpointRate). So a slow or
// failing endpoint cannot take every worker, a tenant with a thousand
// endpoints gets no more turns than a tenant with one, and a tenant whose
// attempts all hang leaves Workers - TenantConcurrency workers to the
// others: their first attempts start at once instead of waiting for its
// timeouts. A delivery is never attempted twice at the same time in one
// process.
type Dispatcher struct {
	store  Store
	opts   DispatcherOptions
	client *http.Client
	log    *slog.Logger

	sched     Scheduler
	claimCtx  context.Context    // cancelled by Stop: the claim loop ends
	endClaims context.CancelFunc //

	mu        sync.Mutex
	cond      *sync.Cond
	claimCond *sync.Cond // the claim loop waits on it for room (ClaimAhead)
	endpoints map[string]*endpointQueue
	tenants   map[string]*tenantQueue   // by tenant ID, while it has work here
	runnable  []*tenantQueue            // tenants with a runnable endpoint and room, in turn order
	ready     map[string]bool           // delivery IDs in some endpoint's ready queue (claimed, not yet attempted)
	busy      map[string]*tenantQueue   // tenants at TenantConcurrency, by ID (kept with a skipper only)
	rateBound map[string]*endpointQueue // endpoints parked on their rate limiter, by ID (kept with a skipper only)
	skipper   ClaimSkipper              // the scheduler, when it is a SharedScheduler and ClaimAhead is set
	sharer    BoundSharer               // the scheduler, when it is a SharedScheduler (it shares the endpoint bounds)
	leaser    Leaser                    // the scheduler, when it is a SharedScheduler (its leases may end: leaseEnding)
	held      HeldCounter               // the scheduler, when it is a SharedScheduler (it counts the held deliveries: Backlog)
	dropped   atomic.Int64              // attempts not made for a lease near its end (Dropped)
	inflight  map[string]bool           // delivery IDs being attempted
	signers   signers                   // each endpoint's signer, its HMAC states kept (sign.go)
	rates     map[string]*endpointRate  // per endpoint, kept while the process runs
	recording chan struct{}             // a slot per outcome being recorded (recordLater)
	started   bool
	stopping  bool
	stopped   chan struct{}      // closed when workersWG is done
	baseCtx   context.Context    // cancelled when Stop gives up waiting
	cancel    context.CancelFunc //
	// workersWG counts every goroutine the dispatcher runs: the claim
	// loop, the workers, the outcomes being recorded, and the timers of
	// afterLocked, from the moment each is armed.
	workersWG sync.WaitGroup
	timers    map[*time.Timer]bool // armed by afterLocked and not yet fired; Stop stops them

	verification verificationState // endpoint challenges; see verification.go

	policies      map[string]*RetryPolicy // DispatcherOptions.Policies, each with Policy's AttemptTimeout and RetryAfterMax
	maxWait       time.Duration           // the longest wait any policy can ask for: the longest Deadline plus RetryAfterMax
	unknownPolicy sync.Map                // names of policies not configured that a delivery named, logged once each
}

type endpointQueue struct {
	id         string
	tenant     *tenantQueue
	ready      []string // delivery IDs, FIFO
	inflight   int
	rate       *endpointRate // the endpoint's, shared by its queues
	parked     bool          // waiting for the rate limiter
	inRunnable bool          // in tenant.runnable
}

// endpointRate is what the dispatcher knows of an endpoint's rate limit.
// It outlives the endpoint's queue, so that an endpoint whose queue
// drains and refills can neither skip its rate nor be asked its limit
// again.
//
// The limit is the endpoint's RateLimit, as read from the endpoint record
// with each attempt (AttemptInput), within EndpointRate
// (EffectiveRateLimit). Until the first read since the process started,
// the endpoint is held to one attempt in flight (concurrencyLocked), so
// that a burst of ready work cannot pass a limit not yet read; that
// attempt takes a token of the limiter made when the limit is learnt.
// Once known, limited or not, a limit is only compared with each record
// read (one atomic load), and changed when the record's differs: a
// change through the API applies from the endpoint's next attempt.
type endpointRate struct {
	// seen is the endpoint's RateLimit as last read; nil until the
	// first read. Written under Dispatcher.mu, read without it.
	seen atomic.Pointer[RateLimit]
	// effective is the bound of the endpoint in the whole cluster
	// (EffectiveRateLimit); under Dispatcher.mu, as limiter is.
	effective RateLimit
	limiter   *rate.Limiter // this process's share of effective; nil: unlimited
}

// tenantQueue is a tenant's turn: its endpoints with ready work and room,
// and the attempts it has in flight.
type tenantQueue struct {
	id         string
	runnable   []*endpointQueue // in turn order
	inflight   int
	ready      int  // its deliveries claimed and waiting for a worker
	inRunnable bool // in Dispatcher.runnable
}

// NewDispatcher returns a Dispatcher over store; Start runs it.
func NewDispatcher(store Store, opts DispatcherOptions) *Dispatcher {
	if opts.Policy.Deadline == 0 {
		opts.Policy = DefaultRetryPolicy()
	}
	if opts.Workers <= 0 {
		opts.Workers = 64
	}
	if opts.EndpointConcurrency <= 0 {
		opts.EndpointConcurrency = 8
	}
	if opts.TenantConcurrency <= 0 {
		opts.TenantConcurrency = max(1, opts.Workers*3/4)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "webhookd"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Random == nil {
		opts.Random = rand.Float64
	}
	maxWait := opts.Policy.Deadline
	policies := make(map[string]*RetryPolicy, len(opts.Policies))
	for name, p := range opts.Policies {
		p.AttemptTimeout, p.RetryAfterMax = opts.Policy.AttemptTimeout, opts.Policy.RetryAfterMax
		policies[name] = &p
		maxWait = max(maxWait, p.Deadline)
	}
	d := &Dispatcher{
		policies:  policies,
		maxWait:   maxWait + opts.Policy.RetryAfterMax,
		store:     store,
		opts:      opts,
		client:    opts.Client,
		log:       opts.Logger,
		sched:     opts.Scheduler,
		endpoints: make(map[string]*endpointQueue),
		tenants:   make(map[string]*tenantQueue),
		ready:     make(map[string]bool),
		busy:      make(map[string]*tenantQueue),
		rateBound: make(map[string]*endpointQueue),
		inflight:  make(map[string]bool),
		rates:     make(map[string]*endpointRate),
		recording: make(chan struct{}, recordingPerWorker*opts.Workers),
		stopped:   make(chan struct{}),
		timers:    make(map[*time.Timer]bool),
	}
	if d.client == nil {
		d.client = NewHTTPClient(opts.Workers, opts.EndpointConcurrency, opts.Targets)
	}
	if d.sched == nil {
		d.sched = NewLocalScheduler(store)
	}
	if sh, ok := d.sched.(SharedScheduler); ok {
		d.sharer, d.leaser, d.held = sh, sh, sh
		if opts.ClaimAhead > 0 {
			d.skipper = sh
		}
	}
	d.cond = sync.NewCond(&d.mu)
	d.claimCond = sync.NewCond(&d.mu)
	d.baseCtx, d.cancel = context.WithCancel(context.Background())
	d.claimCtx, d.endClaims = context.WithCancel(context.Background())
	return d
}

// NewHTTPClient returns the client attempts use: connections kept for
// reuse (idle per host sized to the per-endpoint concurrency), no
// redirects followed, no transparent decompression, and targets checked
// against targets: unless targets.AllowPrivate, the dialer's Control hook
// refuses every connection to a non-public address (see TargetPolicy), on
// the address actually dialled, after DNS; unless targets.AllowHTTP, a
// plain-http request is refused before anything is dialled.
//
// Challenges use it too. It reads response headers up to
// maxResponseHeaderBytes: a receiver that sends more fails the request
// (see classify).
//
// IMPORTANT: the client uses no proxy from the environment (HTTP_PROXY
// and the like are ignored): through a proxy the dialled address would be
// the proxy's, and the target check would no longer see where a request
// goes. Only targets.Proxy, which the operator sets on purpose
// ([delivery] proxy), is used, and then the check is made before each
// request instead (TargetPolicy.Proxy).
func NewHTTPClient(workers, perHost int, targets TargetPolicy) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	dial := dialer.DialContext
	if !targets.AllowPrivate && targets.Proxy == nil {
		dialer.Control = targets.dialControl
		dial = namingRefusals(dial)
	}
	t := &http.Transport{
		Proxy:                 nil, // see above; TargetPolicy.Proxy below
		DialContext:           dial,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		MaxIdleConns:          workers * 2,
		MaxIdleConnsPerHost:   perHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
		DisableCompression:    true,
	}
	t.MaxResponseHeaderBytes = maxResponseHeaderBytes // HTTP/2 too: its SETTINGS_MAX_HEADER_LIST_SIZE
	var rt http.RoundTripper = t
	if targets.Proxy != nil {
		t.Proxy = http.ProxyURL(targets.Proxy)
		t.OnProxyConnectResponse = refusedTunnel
		rt = viaProxy{next: rt, forwards: targets.Proxy.Scheme == "http" || targets.Proxy.Scheme == "https"}
		if !targets.AllowPrivate {
			rt = proxyChecked{next: rt, policy: targets, lookup: lookupNetIP}
		}
	}
	if !targets.AllowHTTP {
		rt = httpsOnly{rt}
	}
	return &http.Client{
		Transport:     rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Start recovers and runs the dispatcher. Recovery contract: the
// Scheduler learns every pending delivery from the store (Recover), due at
// its NextAttemptAt, so what was pending or in flight when the process
// stopped (crash included) is attempted again; an entry due in the past is
// attempted at once. A due time further out than the policy allows (the
// wall clock went back) is cut to the longest possible wait. Start returns
// after recovery, with workers running.
func (d *Dispatcher) Start(ctx context.Context) error {
	d.mu.Lock()
	if d.started {
		d.mu.Unlock()
		return errors.New("engine: dispatcher started twice")
	}
	d.started = true
	d.mu.Unlock()

	pending, err := d.sched.Recover(ctx, d.monotonic)
	if err != nil {
		return err
	}
	d.log.Info("dispatcher recovered", "pending", pending)

	d.workersWG.Add(d.opts.Workers + 1)
	go d.claimLoop()
	for range d.opts.Workers {
		go d.worker()
	}
	go func() { d.workersWG.Wait(); close(d.stopped) }()
	return nil
}

// Stop stops the dispatcher softly: no new attempt starts, no timer of
// its own fires again, attempts in flight finish and their outcomes are
// recorded; it returns when every goroutine the dispatcher started has
// ended. If ctx ends first, Stop cancels the attempts still running and
// returns at once, with ctx's error and what it left: a cancelled attempt
// is not recorded, and an outcome the store has not finished recording
// (a disk that stopped answering) may or may not be; either way the
// delivery is still pending in the retry index unless its record
// committed, and is attempted again at the next start. What Stop left
// ends on its own once the store answers. Stop is safe to call twice (the
// second call waits, within its own ctx, for what the first left), and
// before Start.
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.mu.Lock()
	started := d.started
	d.stopping = true
	for t := range d.timers {
		if t.Stop() {
			d.workersWG.Done() // it will never run: see afterLocked
		}
		delete(d.timers, t)
	}
	d.cond.Broadcast()
	d.claimCond.Broadcast()
	d.mu.Unlock()
	d.endClaims()
	if !started {
		return nil
	}
	var err error
	select {
	case <-d.stopped:
	case <-ctx.Done():
		d.cancel()
		d.mu.Lock()
		inflight, recording := len(d.inflight), len(d.recording)
		d.mu.Unlock()
		err = fmt.Errorf("engine: dispatcher stop gave up waiting (%w) with %d delivery(ies) in flight, of which %d outcome(s) the store is still recording; a delivery whose outcome is not recorded stays pending and is attempted again at the next start",
			ctx.Err(), inflight, recording)
	}
	// What was claimed and never attempted goes back to the scheduler.
	d.mu.Lock()
	for _, eq := range d.endpoints {
		for _, id := range eq.ready {
			d.sched.Release(Work{DeliveryID: id, TenantID: eq.tenant.id, EndpointID: eq.id})
			delete(d.ready, id)
			eq.tenant.ready--
		}
		eq.ready = nil
	}
	d.mu.Unlock()
	return err
}

// afterLocked runs f on a goroutine of its own after delay, unless Stop
// comes first; it does nothing once the dispatcher is stopping, or before
// Start. d.mu must be held. The timer counts in workersWG from now until
// it has run or Stop has stopped it, so Stop's wait covers it: while the
// dispatcher runs, workersWG is above zero (its workers and claim loop
// end only after stopping is set), so this Add never races Start's Wait.
func (d *Dispatcher) afterLocked(delay time.Duration, f func()) {
	if !d.started || d.stopping {
		return
	}
	d.workersWG.Add(1)
	var t *time.Timer
	t = time.AfterFunc(delay, func() {
		defer d.workersWG.Done()
		d.mu.Lock()
		armed := d.timers[t] // false: Stop came first, and found t.Stop too late
		delete(d.timers, t)
		d.mu.Unlock()
		if armed {
			f()
		}
	})
	d.timers[t] = true // before f can look: it locks d.mu first
}

// Enqueue hands the dispatcher delivery id of endpoint endpointID of
// tenant, due at due (wall clock; now or earlier means at once), through
// the Scheduler. Safe to call at any time; before Start and after Stop it
// does nothing: the store keeps the delivery pending, and Start's
// recovery finds it.
func (d *Dispatcher) Enqueue(id, tenant, endpointID string, due time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.started || d.stopping || d.ready[id] { // a ready one is attempted soon anyway
		return
	}
	w := Work{DeliveryID: id, TenantID: tenant, EndpointID: endpointID}
	if d.sched.Schedule(w, d.monotonic(due)) {
		d.readyLocked(w)
	}
}

// tenantQueueLocked returns tenant's turn, made when it has none.
func (d *Dispatcher) tenantQueueLocked(tenant string) *tenantQueue {
	tq := d.tenants[tenant]
	if tq == nil {
		tq = &tenantQueue{id: tenant}
		d.tenants[tenant] = tq
	}
	return tq
}

// ForgetTenant drops every delivery of tenant that the dispatcher holds
// and is not attempting: the tenant is deleted, and its deliveries with
// it. Attempts in flight finish; their outcome finds no delivery to
// record.
func (d *Dispatcher) ForgetTenant(tenant string) {
	d.sched.ForgetTenant(tenant)
	d.mu.Lock()
	defer d.mu.Unlock()
	tq := d.tenants[tenant]
	if tq == nil {
		return
	}
	for _, eq := range tq.runnable {
		eq.inRunnable = false
	}
	tq.runnable = nil
	d.runnable = slices.DeleteFunc(d.runnable, func(q *tenantQueue) bool { return q == tq })
	tq.inRunnable = false
	for id, eq := range d.endpoints {
		if eq.tenant != tq {
			continue
		}
		for _, dl := range eq.ready {
			delete(d.ready, dl)
			tq.ready--
			d.sched.Release(Work{DeliveryID: dl, TenantID: tenant, EndpointID: eq.id})
		}
		eq.ready = nil
		if eq.inflight == 0 && !eq.parked {
			delete(d.endpoints, id)
		}
	}
}

// TenantPending returns how many deliveries of tenant the dispatcher
// holds: waiting for their time, due, or in flight.
func (d *Dispatcher) TenantPending(tenant string) int {
	return d.sched.Pending(tenant)
}

// Running reports whether the dispatcher was started and is not stopping.
func (d *Dispatcher) Running() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.started && !d.stopping
}

// Holds reports whether the dispatcher has delivery id: waiting for its
// time, due, or in flight.
func (d *Dispatcher) Holds(id string) bool {
	return d.sched.Holds(id)
}

// InFlightIDs returns the deliveries whose attempt is running now (or
// whose outcome is being recorded), in no order.
func (d *Dispatcher) InFlightIDs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Collect(maps.Keys(d.inflight))
}

// InFlight reports whether an attempt of delivery id is running now.
func (d *Dispatcher) InFlight(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inflight[id]
}

// DispatcherStats is a snapshot of the dispatcher's queues. Their sum is
// every delivery the dispatcher holds.
type DispatcherStats struct {
	Scheduled int // waiting for their due time (the Scheduler's, unclaimed)
	Ready     int // claimed, due, waiting for a worker
	InFlight  int // being attempted, or its outcome recorded
}

// Stats returns the current queue sizes.
func (d *Dispatcher) Stats() DispatcherStats {
	total, waiting := d.sched.Counts()
	d.mu.Lock()
	inflight := len(d.inflight)
	d.mu.Unlock()
	inflight = min(inflight, total-waiting)
	return DispatcherStats{Scheduled: waiting, Ready: total - waiting - inflight, InFlight: inflight}
}

// monotonic turns a wall-clock due time into one with a monotonic reading,
// capped at the longest wait the policy can ask for.
func (d *Dispatcher) monotonic(due time.Time) time.Time {
	return d.after(time.Now(), due.Sub(d.opts.Now()))
}

// after returns from (a monotonic reading) plus wait, the wait cut to
// between zero and the longest any policy can ask for.
func (d *Dispatcher) after(from time.Time, wait time.Duration) time.Time {
	if wait > d.maxWait {
		wait = d.maxWait
	}
	if wait < 0 {
		wait = 0
	}
	return from.Add(wait)
}

// retryAt returns when delivery updated, which attempt rec left pending,
// is due again. ended is the monotonic reading when the attempt's request
// ended (zero if none was made). The policy measured the wait on the wall
// clock from the attempt's end (its Start plus Duration); it is measured
// here on the monotonic clock from the same moment, so a jump of the wall
// clock during the attempt neither fires the retry at once nor holds it
// back by the jump. When the delivery moved on meanwhile (a replay), its
// stored due time is used.
func (d *Dispatcher) retryAt(updated Delivery, rec AttemptRecord, ended time.Time) time.Time {
	if ended.IsZero() || !updated.NextAttemptAt.Equal(rec.NextAttemptAt) {
		return d.monotonic(updated.NextAttemptAt)
	}
	return d.after(ended, rec.NextAttemptAt.Sub(rec.Attempt.Start.Add(rec.Attempt.Duration)))
}

// readyLocked appends w, claimed from the Scheduler, to its endpoint's
// ready queue. A delivery already ready or in flight here is not queued
// again, whatever the Scheduler says: that would be a second attempt at
// the same time. Its claim is the one the dispatcher holds already, which
// the Settle after that attempt ends.
func (d *Dispatcher) readyLocked(w Work) {
	id, endpointID := w.DeliveryID, w.EndpointID
	if d.ready[id] || d.inflight[id] {
		d.log.Warn("the scheduler handed out a delivery this dispatcher holds; it is not attempted twice at once", "delivery", id, "endpoint", endpointID)
		return
	}
	eq := d.endpoints[endpointID]
	if eq == nil {
		eq = &endpointQueue{id: endpointID, tenant: d.tenantQueueLocked(w.TenantID), rate: d.rateLocked(endpointID)}
		d.endpoints[endpointID] = eq
	}
	eq.ready = append(eq.ready, id)
	eq.tenant.ready++
	d.ready[id] = true
	d.makeRunnableLocked(eq)
}

// rateLocked returns the endpointRate of endpoint id, made when it has
// none: its limit not yet known, and held meanwhile to EndpointRate.
func (d *Dispatcher) rateLocked(id string) *endpointRate {
	er := d.rates[id]
	if er == nil {
		er = &endpointRate{effective: EffectiveRateLimit(d.opts.EndpointRate, RateLimit{})}
		if !er.effective.IsZero() {
			er.limiter = rate.NewLimiter(d.limiterBoundsLocked(id, er.effective))
		}
		d.rates[id] = er
	}
	return er
}

// concurrencyLocked returns the attempts in flight this process may make
// to eq's endpoint: EndpointConcurrency, or this process's share of it
// (BoundSharer); 1 while the endpoint's rate limit is not known.
func (d *Dispatcher) concurrencyLocked(eq *endpointQueue) int {
	if eq.rate.seen.Load() == nil {
		return 1
	}
	if d.sharer == nil {
		return d.opts.EndpointConcurrency
	}
	n, _ := d.sharer.EndpointShare(eq.id, d.opts.EndpointConcurrency, 0)
	return n
}

// limiterBoundsLocked returns the rate and burst of this process's limiter
// for endpoint id, whose bound in the whole cluster is eff (not zero):
// eff itself, or this process's share of its rate (BoundSharer) with the
// burst in the same proportion, at least 1.
func (d *Dispatcher) limiterBoundsLocked(id string, eff RateLimit) (rate.Limit, int) {
	r, burst := eff.PerSecond, eff.Burst
	if d.sharer != nil {
		_, share := d.sharer.EndpointShare(id, d.opts.EndpointConcurrency, r)
		// 1e-9: a share of r/n times burst is a whole number of
		// attempts whenever burst/n is, whatever the rounding of r/n.
		burst = int(float64(burst)*share/r + 1e-9)
		r = share
	}
	return rate.Limit(r), max(1, burst)
}

// noteRateLimit tells the dispatcher the rate limit of eq's endpoint as
// in has it (none when the endpoint is gone), read for an attempt about
// to be made. It costs an atomic load when the limit is the one known.
func (d *Dispatcher) noteRateLimit(eq *endpointQueue, in *AttemptInput) {
	var rl RateLimit
	if in.EndpointFound {
		rl = in.Endpoint.RateLimit
	}
	if seen := eq.rate.seen.Load(); seen != nil && *seen == rl {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	er := eq.rate
	seen := er.seen.Load()
	if seen != nil && *seen == rl {
		return // another attempt of the endpoint got here first
	}
	known := new(RateLimit) // here, not &rl: rl would be on the heap at every call
	*known = rl
	er.seen.Store(known)
	er.effective = EffectiveRateLimit(d.opts.EndpointRate, rl)
	if er.effective.IsZero() {
		er.limiter = nil
	} else {
		r, burst := d.limiterBoundsLocked(eq.id, er.effective)
		switch lim := er.limiter; {
		case lim != nil && lim.Limit() == r && lim.Burst() == burst:
			// As it was (the attempt at hand took its token from it).
		case lim != nil && seen != nil:
			// A change: the bucket keeps its tokens, up to the new burst.
			lim.SetLimit(r)
			lim.SetBurst(burst)
		default:
			// The first limiter, or the first read of a limit that
			// EndpointRate's limiter stood in for: a bucket of its own,
			// from which the attempt at hand takes the first token.
			er.limiter = rate.NewLimiter(r, burst)
			er.limiter.Allow()
		}
	}
	if seen != nil {
		// A change: a delivery of the endpoint waiting for a token of
		// the old limit (parked by next while this attempt read its
		// record) takes its turn again, to wait by the new one.
		d.unparkLocked(eq)
		if cur := d.endpoints[eq.id]; cur != nil && cur != eq {
			d.unparkLocked(cur)
		}
		return
	}
	// Known now: the endpoint's queue may start more than one.
	d.makeRunnableLocked(eq)
	if cur := d.endpoints[eq.id]; cur != nil && cur != eq {
		d.makeRunnableLocked(cur)
	}
}

// unparkLocked makes eq runnable again if it is parked for its rate
// limit, before its timer: next reserves a token afresh, and parks it
// again if it must still wait. The old timer, when it fires, only makes
// a queue that is already runnable runnable (or wakes it early, to be
// parked again).
func (d *Dispatcher) unparkLocked(eq *endpointQueue) {
	if !eq.parked {
		return
	}
	eq.parked = false
	if d.rateBound[eq.id] == eq {
		delete(d.rateBound, eq.id)
	}
	d.makeRunnableLocked(eq)
}

// makeRunnableLocked gives eq a turn among its tenant's endpoints if it
// has ready work and room, and its tenant a turn among the tenants.
func (d *Dispatcher) makeRunnableLocked(eq *endpointQueue) {
	if eq.inRunnable || eq.parked || len(eq.ready) == 0 {
		d.makeTenantRunnableLocked(eq.tenant)
		return
	}
	if eq.inflight < d.concurrencyLocked(eq) {
		eq.inRunnable = true
		eq.tenant.runnable = append(eq.tenant.runnable, eq)
	}
	d.makeTenantRunnableLocked(eq.tenant)
}

func (d *Dispatcher) makeTenantRunnableLocked(tq *tenantQueue) {
	if tq.inRunnable || len(tq.runnable) == 0 || tq.inflight >= d.opts.TenantConcurrency {
		return
	}
	tq.inRunnable = true
	d.runnable = append(d.runnable, tq)
	d.cond.Signal()
}

// tenantDoneLocked counts an attempt of tq's out of flight.
func (d *Dispatcher) tenantDoneLocked(tq *tenantQueue) {
	tq.inflight--
	if d.skipper != nil && tq.inflight < d.opts.TenantConcurrency {
		delete(d.busy, tq.id)
	}
}

// aheadLocked counts the deliveries claimed and waiting that count
// against ClaimAhead. Claiming from a ClaimSkipper, those of a tenant at
// its concurrency and those of an endpoint waiting for its rate limit do
// not: they wait for attempts or for time, not for a worker, and no claim
// adds to them. From any other scheduler, all do.
func (d *Dispatcher) aheadLocked() int {
	n := len(d.ready)
	if d.skipper != nil {
		for _, tq := range d.busy {
			n -= tq.ready
		}
		for _, eq := range d.rateBound {
			if d.busy[eq.tenant.id] == nil { // counted with its tenant
				n -= len(eq.ready)
			}
		}
	}
	return n
}

// claimSkip lists the tenants at their concurrency and the endpoints
// waiting for their rate limit in this process (ClaimSkipper's skip).
func (d *Dispatcher) claimSkip() ClaimSkip {
	d.mu.Lock()
	defer d.mu.Unlock()
	sk := ClaimSkip{Tenants: make([]string, 0, len(d.busy)), Endpoints: make([]string, 0, len(d.rateBound))}
	for id := range d.busy {
		sk.Tenants = append(sk.Tenants, id)
	}
	for id := range d.rateBound {
		sk.Endpoints = append(sk.Endpoints, id)
	}
	return sk
}

// claimLoop claims due work from the Scheduler into the ready queues until
// Stop. With ClaimAhead it claims only while fewer than that many
// deliveries wait (aheadLocked), and, from a ClaimSkipper, none of a
// tenant at its concurrency here nor of an endpoint waiting for its rate
// limit: a backlogged tenant's or rate-limited endpoint's deliveries
// would fill the allowance and hold back everyone else's.
func (d *Dispatcher) claimLoop() {
	defer d.workersWG.Done()
	for {
		room := 0
		if d.opts.ClaimAhead > 0 {
			d.mu.Lock()
			for d.aheadLocked() >= d.opts.ClaimAhead && !d.stopping {
				d.claimCond.Wait()
			}
			room = d.opts.ClaimAhead - d.aheadLocked()
			d.mu.Unlock()
		}
		var ws []Work
		var err error
		if d.skipper != nil {
			ws, err = d.skipper.ClaimSkipping(d.claimCtx, room, d.claimSkip)
		} else {
			ws, err = d.sched.Claim(d.claimCtx, room)
		}
		if err != nil {
			return // Stop
		}
		d.mu.Lock()
		for _, w := range ws {
			if d.stopping { // Stop may have released the ready ones already
				d.sched.Release(w)
				continue
			}
			d.readyLocked(w)
		}
		d.mu.Unlock()
	}
}

// next blocks until a delivery may be attempted, and claims it. It returns
// false when the dispatcher is stopping.
func (d *Dispatcher) next() (id string, eq *endpointQueue, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		if d.stopping {
			return "", nil, false
		}
		if len(d.runnable) == 0 {
			d.cond.Wait()
			continue
		}
		tq := d.runnable[0]
		d.runnable[0] = nil
		d.runnable = d.runnable[1:]
		tq.inRunnable = false
		eq = tq.runnable[0]
		tq.runnable[0] = nil
		tq.runnable = tq.runnable[1:]
		eq.inRunnable = false
		if lim := eq.rate.limiter; lim != nil {
			if d.sharer != nil {
				// The share moves as processes come and go.
				if r, burst := d.limiterBoundsLocked(eq.id, eq.rate.effective); lim.Limit() != r || lim.Burst() != burst {
					lim.SetLimit(r)
					lim.SetBurst(burst)
				}
			}
			r := lim.Reserve()
			if delay := r.Delay(); delay > 0 {
				r.Cancel()
				eq.parked = true
				parked := eq // eq is this loop's, and the result: it moves on
				if d.skipper != nil {
					d.rateBound[eq.id] = eq
					if d.opts.ClaimAhead > 0 && d.aheadLocked() < d.opts.ClaimAhead {
						d.claimCond.Signal() // its ready ones count no more
					}
				}
				d.afterLocked(delay, func() {
					d.mu.Lock()
					defer d.mu.Unlock()
					parked.parked = false
					if d.rateBound[parked.id] == parked {
						delete(d.rateBound, parked.id)
					}
					d.makeRunnableLocked(parked)
				})
				d.makeTenantRunnableLocked(tq)
				continue
			}
		}
		id = eq.ready[0]
		eq.ready[0] = ""
		eq.ready = eq.ready[1:]
		delete(d.ready, id)
		tq.ready--
		eq.inflight++
		tq.inflight++
		if d.skipper != nil && tq.inflight >= d.opts.TenantConcurrency {
			d.busy[tq.id] = tq
		}
		if d.opts.ClaimAhead > 0 && d.aheadLocked() < d.opts.ClaimAhead {
			d.claimCond.Signal()
		}
		d.inflight[id] = true
		d.makeRunnableLocked(eq)
		return id, eq, true
	}
}

// finish releases a claimed delivery and schedules what comes next for it:
// at, when the attempt left it pending (zero: nothing), or at once if it was
// enqueued again while in flight. holdsSlot says the delivery still holds
// its endpoint's concurrency slot (no request was made: see releaseSlot).
func (d *Dispatcher) finish(id string, eq *endpointQueue, at time.Time, holdsSlot bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if holdsSlot {
		eq.inflight--
		d.tenantDoneLocked(eq.tenant)
	}
	delete(d.inflight, id)
	w := Work{DeliveryID: id, TenantID: eq.tenant.id, EndpointID: eq.id}
	if d.sched.Settle(w, at) { // due again at once, or replayed while in flight
		if d.stopping {
			d.sched.Release(w)
		} else {
			d.readyLocked(w)
		}
	}
	d.endpointDoneLocked(eq)
}

// endpointDoneLocked gives eq its turn again after one of its
// deliveries left flight, and drops it when it holds nothing more.
func (d *Dispatcher) endpointDoneLocked(eq *endpointQueue) {
	d.makeRunnableLocked(eq)
	// eq may be gone from d.endpoints already, and a new queue in its place
	// (releaseSlot let eq empty while this delivery was being recorded).
	if len(eq.ready) == 0 && eq.inflight == 0 && !eq.parked && !eq.inRunnable && d.endpoints[eq.id] == eq {
		delete(d.endpoints, eq.id)
	}
}

// leaseEnding reports whether the claim on delivery id, about to be
// attempted from eq, has less than the attempt timeout left of its lease
// (Leaser); if so it makes no attempt: it releases the claim without an
// outcome (the delivery is offered again, to any process, under a lease
// of its own) and gives back the endpoint's slot. A claim the scheduler
// does not know is left to the attempt, whose record says if it was lost.
func (d *Dispatcher) leaseEnding(id string, eq *endpointQueue) bool {
	if d.leaser == nil {
		return false
	}
	w := Work{DeliveryID: id, TenantID: eq.tenant.id, EndpointID: eq.id}
	left, ok := d.leaser.LeaseLeft(w)
	if !ok || left >= d.opts.Policy.AttemptTimeout {
		return false
	}
	d.dropped.Add(1)
	d.log.Info("attempt not made: its lease ends before the attempt could (the process was stalled); the delivery is offered again",
		"delivery", id, "endpoint", eq.id, "lease_left", left.Round(time.Millisecond), "attempt_timeout", d.opts.Policy.AttemptTimeout)
	d.mu.Lock()
	defer d.mu.Unlock()
	eq.inflight--
	d.tenantDoneLocked(eq.tenant)
	delete(d.inflight, id)
	d.sched.Release(w)
	d.endpointDoneLocked(eq)
	return true
}

// Dropped counts the attempts not made because their lease had less
// than the attempt timeout left (see Leaser), since the dispatcher was
// made.
func (d *Dispatcher) Dropped() int64 { return d.dropped.Load() }

// worker claims deliveries and attempts them, one at a time.
func (d *Dispatcher) worker() {
	defer d.workersWG.Done()
	for {
		id, eq, ok := d.next()
		if !ok {
			return
		}
		d.attempt(id, eq)
	}
}

// releaseSlot gives back eq's concurrency slot when an attempt's request
// is over, before its outcome is recorded: recording does not touch the
// endpoint, so the endpoint's next delivery need not wait for the commit.
// The delivery itself stays in flight until finish.
func (d *Dispatcher) releaseSlot(eq *endpointQueue) {
	d.mu.Lock()
	defer d.mu.Unlock()
	eq.inflight--
	d.tenantDoneLocked(eq.tenant)
	d.makeRunnableLocked(eq)
}

// attempt makes one attempt of delivery id, claimed from eq, and hands
// its outcome to recordLater; when no attempt is to be made, it finishes
// the delivery itself.
func (d *Dispatcher) attempt(id string, eq *endpointQueue) {
	ctx := d.baseCtx
	in, err := d.store.AttemptInput(ctx, id)
	if err != nil {
		if ErrorCode(err) == CodeDeliveryNotFound {
			d.finish(id, eq, time.Time{}, true)
			return
		}
		if ctx.Err() == nil {
			d.log.Error("read delivery for attempt", "delivery", id, "err", err)
		}
		d.finish(id, eq, time.Now().Add(storeRetryDelay), true)
		return
	}
	d.noteRateLimit(eq, &in)
	dl := in.Delivery
	if dl.State != StatePending {
		d.finish(id, eq, time.Time{}, true)
		return
	}
	if at, held := d.holdUnverified(ctx, &in); held {
		d.finish(id, eq, at, true) // endpoint verification pending: see verification.go
		return
	}
	rec := AttemptRecord{DeliveryID: dl.ID, Cycle: dl.Cycle}
	rec.Attempt = Attempt{Cycle: dl.Cycle, Number: dl.CycleAttempts + 1}

	switch {
	case !in.EndpointFound:
		rec.Attempt.Start = d.opts.Now().UTC()
		rec.Attempt.Outcome = OutcomePermanent
		rec.Attempt.Error = "endpoint deleted; no request made"
		rec.State, rec.Reason = StateDead, ReasonEndpointDeleted
		d.recordLater(id, eq, &in, rec, time.Time{}, true)
	case in.Endpoint.Disabled:
		// No attempt: the delivery waits, paused, for the endpoint to be
		// enabled (see StatePaused).
		now, cycle := d.opts.Now().UTC(), dl.Cycle
		at := time.Time{}
		paused, err := d.store.UpdateDelivery(context.WithoutCancel(ctx), dl.ID, func(cur Delivery) (Delivery, error) {
			return PauseDelivery(cur, cycle, now), nil
		})
		switch {
		case err != nil:
			d.log.Error("pause delivery", "delivery", dl.ID, "endpoint", dl.EndpointID, "err", err)
			at = time.Now().Add(storeRetryDelay)
		case paused.State == StatePaused && paused.Cycle == cycle:
			at = d.unpauseIfEnabled(context.WithoutCancel(ctx), dl, paused)
		}
		d.finish(id, eq, at, true)
	default:
		if d.leaseEnding(id, eq) {
			return
		}
		d.send(ctx, &in, &rec)
		ended := time.Now()
		d.releaseSlot(eq)
		if ctx.Err() != nil {
			// Stop gave up waiting: the attempt is not counted, the
			// delivery stays pending in the retry index.
			d.finish(id, eq, time.Time{}, false)
			return
		}
		d.recordLater(id, eq, &in, rec, ended, false)
	}
}

// unpauseIfEnabled looks at the endpoint of dl again once the dispatcher
// has paused dl (stored as paused) for it, having read it disabled: an
// enabling between that read and the pause's write looked for paused
// deliveries before this one was, and left it paused for good under an
// endpoint that is enabled. So when the endpoint is enabled now, the
// pause is undone (UnpauseDelivery: pending again, due at once) and it
// returns when the delivery is due; otherwise (still disabled, deleted:
// the janitor drops it, or unreadable) the zero time. Read after the
// pause was stored, the endpoint is as the last enabling left it, or
// that enabling's search for paused deliveries came after the pause and
// found it.
func (d *Dispatcher) unpauseIfEnabled(ctx context.Context, dl, paused Delivery) time.Time {
	ep, err := d.store.Endpoint(ctx, dl.TenantID, dl.EndpointID)
	if err != nil {
		if ErrorCode(err) != CodeEndpointNotFound && ErrorCode(err) != CodeTenantNotFound {
			d.log.Error("read endpoint after pausing its delivery", "delivery", dl.ID, "endpoint", dl.EndpointID, "err", err)
		}
		return time.Time{}
	}
	if ep.Disabled {
		return time.Time{}
	}
	now := d.opts.Now().UTC()
	got, err := d.store.UpdateDelivery(ctx, dl.ID, func(cur Delivery) (Delivery, error) {
		return UnpauseDelivery(cur, dl, paused, now), nil
	})
	if err != nil {
		d.log.Error("unpause delivery", "delivery", dl.ID, "endpoint", dl.EndpointID, "err", err)
		return time.Time{}
	}
	if got.State != StatePending || got.Cycle != paused.Cycle {
		return time.Time{} // the enabling, or a replay, moved it first
	}
	return time.Now()
}

// recordingPerWorker is how many outcomes per worker may wait for their
// commit (recordLater). A commit takes the outcomes that came during the
// one before, so at full speed about two commits' worth wait; with room
// for fewer, workers block on recordLater instead of attempting (the
// measurement is in docs/performance.md, "Dispatch: the CPU"). Each
// waiting outcome holds its attempt's input (the event body among it):
// 256 of them at the default Workers are well under a megabyte of 1 KiB
// events.
const recordingPerWorker = 4

// recordLater records the outcome rec of an attempt of delivery id on a
// goroutine of its own and then finishes the delivery, which stays in
// flight until then. The worker that made the attempt goes on to its next
// delivery meanwhile, so a worker's time is its request's, not also the
// commit's: with every worker waiting for its commit, attempts in flight
// were bounded by the disk's latency rather than by Workers. At most
// recordingPerWorker × Workers outcomes wait to be recorded at once; a
// worker with one more waits for room (backpressure from the disk). Stop
// waits for them all. ended and holdsSlot are as for record and finish.
func (d *Dispatcher) recordLater(id string, eq *endpointQueue, in *AttemptInput, rec AttemptRecord, ended time.Time, holdsSlot bool) {
	d.recording <- struct{}{}
	d.workersWG.Add(1)
	go func() {
		defer d.workersWG.Done()
		at := d.record(in, &rec, ended)
		<-d.recording
		d.finish(id, eq, at, holdsSlot)
	}()
}

// record records rec, the outcome of an attempt of in.Delivery whose
// request ended at ended (monotonic; zero if none was made), with the
// endpoint's health after it, and tells OnAttempt and OnAlert. It returns
// when the delivery should be looked at again (monotonic), or zero.
func (d *Dispatcher) record(in *AttemptInput, rec *AttemptRecord, ended time.Time) time.Time {
	dl := in.Delivery
	rec.At = d.opts.Now().UTC()
	if in.EndpointFound {
		after, _ := healthAfter(in.Endpoint, rec.Attempt.Outcome, rec.Attempt.Status, rec.Attempt.Error, rec.At, d.opts.DisableAfter, d.opts.KeepGoneEndpoints, rec.disableAsked)
		if rec.Attempt.Outcome != OutcomeSuccess || !after.FailingSince.Equal(in.Endpoint.FailingSince) || after.Disabled != in.Endpoint.Disabled {
			health := after // only this path puts an endpoint on the heap
			rec.Endpoint = &health
		}
	}
	// The alerts are those of the endpoint as the record found it stored
	// and left it: of attempts that each saw it start failing (at once,
	// on this node or others), only the first record raises it.
	var alerts []string
	var stored Endpoint
	var merged *Endpoint // nil: no health recorded
	onHealth := func(before, after Endpoint) {
		stored, merged, alerts = before, &after, HealthAlerts(before, after)
	}
	updated, err := d.recordOutcome(context.WithoutCancel(d.baseCtx), dl, rec, onHealth)
	if errors.Is(err, ErrClaimLost) {
		d.log.Warn("attempt not recorded: its lease ended and another node holds the delivery", "delivery", dl.ID, "event", dl.EventID, "endpoint", dl.EndpointID)
		return time.Time{}
	}
	if ErrorCode(err) == CodeDeliveryNotFound {
		// Deleted while its attempt ran: its tenant was deleted (force
		// drops what is in flight) and purged. Expected, and said once
		// per tenant by the purge; the outcome has nothing to go to.
		d.log.Debug("attempt not recorded: its delivery was deleted", "delivery", dl.ID, "endpoint", dl.EndpointID)
		return time.Time{}
	}
	if err != nil {
		d.log.Error("record attempt", "delivery", dl.ID, "event", dl.EventID, "endpoint", dl.EndpointID, "err", err)
		return time.Now().Add(storeRetryDelay)
	}
	d.logAttempt(dl, *rec)
	if d.opts.OnAttempt != nil {
		d.opts.OnAttempt(dl.EndpointID, rec.Attempt, updated.State)
	}
	if d.opts.OnAlert != nil {
		if updated.State == StateDead && updated.Cycle == dl.Cycle {
			alerts = append(alerts, AlertDeliveryDead)
		}
		for _, kind := range alerts {
			d.opts.OnAlert(Alert{Kind: kind, Delivery: updated, Endpoint: merged, FailingSince: stored.FailingSince, At: rec.At})
		}
	}
	d.FollowLine(updated)
	if updated.State != StatePending {
		return time.Time{}
	}
	return d.retryAt(updated, *rec, ended)
}

// maxRecordReads bounds how many times recordOutcome reads a delivery
// that keeps changing under its record: each ErrDeliveryChanged means a
// change came between a read and the write (a replay, a pause), which a
// person makes, so a second read all but always settles it.
const maxRecordReads = 4

// recordOutcome records rec, an attempt of read (the delivery as read for
// it), through Log.RecordOutcome, and returns the delivery as stored.
// When the delivery changed since it was read (ErrDeliveryChanged), it
// reads it again and records rec over what it reads (RecordAttempt of an
// older cycle only logs the attempt), up to maxRecordReads times in all;
// then it returns ErrDeliveryChanged. onHealth is the OutcomeUpdate's
// OnHealth.
func (d *Dispatcher) recordOutcome(ctx context.Context, read Delivery, rec *AttemptRecord, onHealth func(stored, merged Endpoint)) (Delivery, error) {
	for reads := 1; ; reads++ {
		u := NewOutcomeUpdate(read, *rec)
		u.OnHealth = onHealth
		updated, err := d.store.RecordOutcome(ctx, u)
		if !errors.Is(err, ErrDeliveryChanged) || reads == maxRecordReads {
			return updated, err
		}
		if read, err = d.store.Delivery(ctx, read.TenantID, read.ID); err != nil {
			return Delivery{}, err
		}
	}
}

// FollowLine hands the dispatcher the head of dl's line when dl, as just
// stored, may have ended its line's head (see lines.go): an ordered
// delivery that no longer holds its line (succeeded, dead and skipped,
// or waiting) may have made the store promote the next, which is
// pending now and due at once. It does nothing for any other delivery.
// When the store cannot be read it tries again after storeRetryDelay
// while the dispatcher runs, never after Stop; a restart finds the
// promoted delivery in the retry index anyway.
func (d *Dispatcher) FollowLine(dl Delivery) {
	if dl.Line == "" || HoldsLine(dl) {
		return
	}
	head, ok, err := d.store.LineHead(d.baseCtx, dl.EndpointID, dl.Line)
	if err != nil {
		if d.baseCtx.Err() == nil {
			d.log.Error("read line head", "endpoint", dl.EndpointID, "line", dl.Line, "err", err)
			d.mu.Lock()
			d.afterLocked(storeRetryDelay, func() { d.FollowLine(dl) })
			d.mu.Unlock()
		}
		return
	}
	if ok && head.State == StatePending && head.ID != dl.ID {
		d.Enqueue(head.ID, head.TenantID, head.EndpointID, head.NextAttemptAt)
	}
}

// policy returns the retry policy named name (Delivery.RetryPolicy):
// Policy for the standard one, and for a name the node does not have
// (its configuration dropped it), which is logged once per name.
func (d *Dispatcher) policy(name RetryPolicyName) *RetryPolicy {
	if name.Standard() {
		return &d.opts.Policy
	}
	if p, ok := d.policies[string(name)]; ok {
		return p
	}
	if _, logged := d.unknownPolicy.LoadOrStore(name, true); !logged {
		d.log.Warn("a delivery follows a retry policy the configuration does not have: it follows the standard policy instead (logged once per name)", "retry_policy", string(name))
	}
	return &d.opts.Policy
}

// RetryPolicies returns every retry policy the dispatcher knows, by
// name: StandardRetryPolicy (DispatcherOptions.Policy) and Policies.
func (d *Dispatcher) RetryPolicies() map[string]RetryPolicy {
	all := make(map[string]RetryPolicy, len(d.policies)+1)
	for name, p := range d.policies {
		all[name] = *p
	}
	all[StandardRetryPolicy] = d.opts.Policy
	return all
}

// send makes the HTTP request of one attempt and fills in rec: the attempt's
// times, status or error, response headers and excerpt, outcome, and the
// delivery's next state.
func (d *Dispatcher) send(ctx context.Context, in *AttemptInput, rec *AttemptRecord) {
	p := d.policy(in.Delivery.RetryPolicy)
	dl := in.Delivery
	start := d.opts.Now().UTC()
	mono := time.Now()
	rec.Attempt.Start = start
	var traceparent string

	if span := d.startAttemptSpan(ctx, in, rec); span != nil {
		defer func() { span.End(rec.Attempt, rec.State) }()
		if in.Endpoint.SendTraceparent {
			traceparent = span.TraceParent()
		}
	}

	actx, cancel := context.WithTimeout(ctx, p.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, in.Endpoint.URL, bytes.NewReader(in.Body))
	var status int
	var retryAfter time.Duration
	var abort bool
	if err == nil {
		setCustomHeaders(req.Header, in.Endpoint.Headers)
		if traceparent != "" { // after the custom headers: the span's, not one of theirs
			req.Header["Traceparent"] = []string{traceparent}
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", d.opts.UserAgent)
		if n := EnvelopeSequence(in.Body); n > 0 {
			req.Header[http.CanonicalHeaderKey(verify.HeaderSequence)] = []string{strconv.FormatUint(n, 10)}
		}
		if dl.PreviousSequence > 0 {
			req.Header[http.CanonicalHeaderKey(verify.HeaderPreviousSequence)] = []string{strconv.FormatUint(dl.PreviousSequence, 10)}
		}
		err = d.signers.sign(req.Header, in.Endpoint.ID, in.Endpoint.SigningKeys(start), dl.EventID, start, in.Body)
		if err != nil {
			// Not a transport error: no key can sign. Never retried.
			rec.Attempt.Duration = time.Since(mono)
			rec.Attempt.Outcome = OutcomePermanent
			rec.Attempt.Error = "endpoint has no usable signing secret; rotate its secret"
			rec.State, rec.Reason = StateDead, rec.Attempt.Error
			return
		}
		var resp *http.Response
		resp, err = d.client.Do(req)
		if err == nil {
			status = resp.StatusCode
			rec.Attempt.ResponseHeaders = KeepResponseHeaders(resp.Header)
			var excerpt []byte
			var rerr error
			if resp.ContentLength != 0 { // 0: an empty body, nothing to read
				excerpt, rerr = io.ReadAll(io.LimitReader(resp.Body, MaxResponseExcerpt))
				if rerr == nil {
					_, rerr = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrainBody))
				}
			}
			resp.Body.Close()
			if len(excerpt) > 0 { // ToValidUTF8 allocates even for nothing
				rec.Attempt.Response = string(bytes.ToValidUTF8(excerpt, []byte("\uFFFD")))
			}
			failed := status < 200 || status > 299
			if failed {
				abort = receiverAborts(resp.Header) // never asked of a 2xx: received is received
			}
			rec.disableAsked = receiverDisables(resp.Header)
			if !abort && (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) {
				retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), start)
			}
			if rerr != nil && isTimeout(rerr) && failed && !abort {
				// The status line came in time, the body did not. A 2xx
				// stands: the receiver said it has the event (2xx =
				// received), and retrying it would only duplicate it; so
				// does an abort, which the headers said.
				err, status = rerr, 0
			}
		}
	}
	rec.Attempt.Duration = time.Since(mono)
	outcome, reason := classify(status, err, p.AttemptTimeout, abort, p.RetryStatuses)
	if err != nil { // the reason hides addresses; the operator may see them
		d.log.Debug("attempt error", "delivery", dl.ID, "endpoint", dl.EndpointID, "detail", transportDetail(err))
	}
	rec.Attempt.Status = status
	rec.Attempt.Outcome = outcome
	rec.Attempt.Error = reason
	rec.Attempt.RetryAfter = retryAfter
	rec.LastStatus = status
	switch outcome {
	case OutcomeSuccess:
		rec.State = StateSucceeded
	case OutcomePermanent:
		rec.State, rec.Reason = StateDead, reason
	case OutcomeRetry:
		end := start.Add(rec.Attempt.Duration)
		due, dead := p.Next(rec.Attempt.Number, dl.CycleStart, end, retryAfter, d.opts.Random)
		if dead != "" {
			rec.State, rec.Reason = StateDead, dead+"; last attempt: "+reason
		} else {
			rec.State, rec.Reason, rec.NextAttemptAt = StatePending, reason, due
		}
	}
}

// setCustomHeaders sets an endpoint's custom headers on a request's
// header h, before webhookd's own (which none of them may be: see
// ReservedHeader, and which are set after them in any case). Their names
// are canonical, so they are set as they are. It allocates nothing for
// an endpoint without headers. The values are secrets: never log h.
func setCustomHeaders(h http.Header, custom CustomHeaders) {
	for _, x := range custom {
		h[x.Name] = []string{x.Value}
	}
}

func (d *Dispatcher) logAttempt(dl Delivery, rec AttemptRecord) {
	a := rec.Attempt
	level := slog.LevelDebug
	if a.Outcome != OutcomeSuccess {
		level = slog.LevelInfo
	}
	if !d.log.Enabled(context.Background(), level) {
		return // before the arguments are boxed: most attempts succeed, at Debug
	}
	d.log.Log(context.Background(), level, "attempt",
		"event", dl.EventID, "delivery", dl.ID, "endpoint", dl.EndpointID,
		"attempt", a.Number, "cycle", a.Cycle, "status", a.Status,
		"duration", a.Duration, "outcome", a.Outcome, "state", rec.State, "reason", rec.Reason)
}
