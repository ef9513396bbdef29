package engine

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxLimiters bounds the limiters a keyedLimiters keeps: past it they
// are all forgotten and start again with a full burst. Ingest checks its
// rate before the store says whether the tenant exists, so without the
// bound made-up tenant names would grow the map.
const maxLimiters = 100_000

// keyedLimiters is a token bucket per key: a tenant (its ingest rate), an
// endpoint (its test events).
type keyedLimiters struct {
	limit rate.Limit // zero: unlimited
	burst int

	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func (l *keyedLimiters) init(perSecond float64, burst int) {
	if perSecond <= 0 {
		return
	}
	if burst <= 0 {
		burst = max(1, int(math.Ceil(perSecond)))
	}
	l.limit, l.burst = rate.Limit(perSecond), burst
	l.m = make(map[string]*rate.Limiter)
}

// take takes a token of key's bucket and returns 0, or takes none and
// returns how long until one is there (at least a second, in whole
// seconds: what Retry-After can say).
func (l *keyedLimiters) take(key string) time.Duration {
	if l.limit == 0 {
		return 0
	}
	l.mu.Lock()
	lim := l.m[key]
	if lim == nil {
		if len(l.m) >= maxLimiters {
			clear(l.m)
		}
		lim = rate.NewLimiter(l.limit, l.burst)
		l.m[key] = lim
	}
	l.mu.Unlock()
	return takeToken(lim)
}

// takeToken takes a token of lim and returns 0, or takes none and returns
// how long until one is there, rounded up to whole seconds (at least one).
func takeToken(lim *rate.Limiter) time.Duration {
	r := lim.Reserve()
	delay := r.Delay()
	if r.OK() && delay == 0 {
		return 0
	}
	r.Cancel()
	secs := min(max(math.Ceil(delay.Seconds()), 1), 3600)
	if !r.OK() { // a burst of 0: never, but say something
		secs = 1
	}
	return time.Duration(secs) * time.Second
}

// endpointLimit is the most endpoints tenant may have; 0: no limit.
func (s *Service) endpointLimit(tenant string) int {
	if tenant == OperatorTenant {
		return 0
	}
	return s.opts.MaxEndpointsPerTenant
}

// checkTenantRate refuses an ingest for tenant over its ingest rate
// (CodeRateLimited). The operator's own tenant is exempt.
func (s *Service) checkTenantRate(tenant string) error {
	if tenant == OperatorTenant {
		return nil
	}
	if wait := s.ingestRates.take(tenant); wait > 0 {
		return &Error{Code: CodeRateLimited, RetryAfter: wait, Message: fmt.Sprintf(
			"tenant %s is sent events faster than its limit of %g per second ([limits] ingest_rate_per_tenant); the event was not stored: send it again after Retry-After",
			tenant, s.opts.TenantIngestRate)}
	}
	return nil
}

// DeleteTenant deletes tenant: at once its record, endpoints and access
// tokens (the API knows it no more, and its ingest is refused), and
// after, in small steps, its events, deliveries, dead letters,
// idempotency keys and tasks, by the task it returns (TaskPurge, the
// operator's, running; purgeStep); until those are gone the id cannot
// be used again (CodeTenantDeleting). While the tenant has deliveries
// that are not final (its backlog, backlog.go: pending, waiting behind
// their line's head, paused for a disabled endpoint, or dead and
// blocking their line), deletion would drop them and is refused with
// CodePendingDeliveries, which counts each, unless force: then they are
// dropped, never attempted again. Its other dead letters go with the
// tenant either way. by is who asks ("": "admin").
//
// The task is stored before the tenant is deleted, so that a purge never
// goes untracked; a process that stops between the two leaves a task
// that fails, saying the tenant was not deleted, when it resumes.
func (s *Service) DeleteTenant(ctx context.Context, tenant string, force bool, by string) (Task, error) {
	if err := ValidateTenantID(tenant); err != nil {
		return Task{}, TenantNotFound()
	}
	if _, err := s.store.Tenant(ctx, tenant); err != nil {
		return Task{}, err
	}
	if !force {
		var b Backlog
		var err error
		if b.Held, _, err = s.store.Held(ctx, tenant); err != nil {
			return Task{}, err
		}
		if s.disp != nil {
			b.Pending = s.disp.TenantPending(tenant)
		}
		owed, _ := s.owed(tenant) // acknowledged, not yet stored (fanout.go)
		b.Pending += owed
		if n := b.Total(); n > 0 {
			return Task{}, Errorf(CodePendingDeliveries, "", "tenant %s has %d deliveries not yet delivered or dead (%s); deleting it would drop them: wait until they are delivered or dead (replay or skip a blocking one, enable a disabled endpoint), or delete with ?force=true", tenant, n, b)
		}
	}
	t := s.tasks.newTask("", TaskPurge, TaskParams{Tenant: tenant, Force: force}, by)
	if err := s.store.CreateTask(ctx, t, 0); err != nil {
		return Task{}, err
	}
	now := s.now()
	if err := s.store.DeleteTenant(ctx, tenant, now); err != nil {
		s.tasks.finish(t, err) // it has nothing to purge: it ends failed, as the request does
		return Task{}, err
	}
	s.emitOperational(ctx, OpTenantDeleted, map[string]any{"tenant": tenant, "force": force, "task_id": t.ID, "at": now})
	s.forgetTenant(tenant) // before the purge starts: its fan-outs are owed no longer
	if s.disp != nil {
		s.disp.ForgetTenant(tenant)
	}
	if s.opts.TenantDeleted != nil {
		s.opts.TenantDeleted(tenant)
	}
	s.tasks.run(t)
	return t, nil
}
