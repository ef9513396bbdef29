package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// OperatorTenant is the tenant that holds the operator's alert endpoint
// ([alerts] in the config). Its id cannot be named through the API (tenant
// ids start with a letter or digit), so no customer can read, change or
// receive it; it is reserved, no customer, and no listing or report of
// tenants shows it (Service.Tenants).
const OperatorTenant = "_operator"

// AlertTypes are the event types of webhookd's own alerts, added to the
// catalogue when alerts are on.
var AlertTypes = map[string]string{
	AlertEndpointFailing:  "an endpoint failed an attempt after a success (or for the first time)",
	AlertEndpointDisabled: "an endpoint was disabled: it answered 410 Gone, or failed every attempt for too long",
	AlertDeliveryDead:     "a delivery moved to the dead letters",
}

// EnsureOperatorEndpoint makes, idempotently, the operator tenant, the
// alert event types and the one operator endpoint at url signed with
// secret (updating its URL and secret when they changed). The URL obeys
// the same target policy as every endpoint.
func (s *Service) EnsureOperatorEndpoint(ctx context.Context, url, secret string) error {
	now := s.now()
	if _, _, err := s.store.PutTenant(ctx, Tenant{ID: OperatorTenant, Name: "webhookd operator alerts", Environment: EnvironmentLive, Created: now, Updated: now}); err != nil {
		return fmt.Errorf("engine: operator tenant: %w", err)
	}
	types := make([]string, 0, len(AlertTypes))
	for name, desc := range AlertTypes {
		if _, _, err := s.store.PutEventType(ctx, EventType{Name: name, Description: desc, Created: now, Updated: now}); err != nil {
			return fmt.Errorf("engine: alert event type %s: %w", name, err)
		}
		types = append(types, name)
	}
	eps, err := s.store.Endpoints(ctx, OperatorTenant)
	if err != nil {
		return err
	}
	if len(eps) == 0 {
		err := s.store.CreateEndpoint(ctx, Endpoint{
			ID: NewID("ep"), TenantID: OperatorTenant, URL: url, EventTypes: []string{AllEventTypes},
			Description: "operator alerts ([alerts] url)", Created: now, Updated: now,
			Secrets: []Secret{{Key: secret}},
		}, 1)
		if ErrorCode(err) != CodeLimitReached {
			return err
		}
		// Another node of a cluster, starting at the same time, made it
		// first (the limit of 1 let only one through): update that one.
		if eps, err = s.store.Endpoints(ctx, OperatorTenant); err != nil {
			return err
		}
	}
	_, err = s.store.UpdateEndpoint(ctx, OperatorTenant, eps[0].ID, func(ep *Endpoint) error {
		ep.URL, ep.Secrets, ep.Disabled, ep.Updated = url, []Secret{{Key: secret}}, false, now
		return nil
	})
	return err
}

// RaiseAlert sends alert a to the operator endpoint as an event of type
// a.Kind, unless it concerns the operator tenant itself (an alert about an
// alert would loop).
func (s *Service) RaiseAlert(ctx context.Context, a Alert) error {
	d := a.Delivery
	if d.TenantID == OperatorTenant {
		return nil
	}
	// Times are strings in TimeFormat, as in every other answer and
	// envelope: json.Marshal of a time.Time would write nine digits.
	data := map[string]any{"tenant": d.TenantID, "endpoint_id": d.EndpointID, "at": a.At.UTC().Format(TimeFormat)}
	switch a.Kind {
	case AlertDeliveryDead:
		data["delivery_id"], data["event_id"], data["event_type"] = d.ID, d.EventID, d.EventType
		data["reason"], data["attempts"], data["last_status"] = d.Reason, d.CycleAttempts, d.LastStatus
	case AlertEndpointFailing:
		if a.Endpoint != nil {
			data["reason"] = a.Endpoint.LastFailure
			if !a.Endpoint.FailingSince.IsZero() {
				data["failing_since"] = a.Endpoint.FailingSince.UTC().Format(TimeFormat)
			}
		}
	case AlertEndpointDisabled:
		if a.Endpoint != nil {
			data["reason"] = a.Endpoint.DisabledReason
		}
	}
	body, err := json.Marshal(data)
	if err != nil {
		return err
	}
	_, err = s.ingest(ctx, OperatorTenant, IngestInput{Type: a.Kind, Data: body})
	return err
}

// AlertSink takes alerts from the dispatcher's workers without blocking
// them and raises them on a goroutine of its own, from Start to Stop.
// Repeated endpoint.failing alerts of one endpoint within a minute are
// sent once (concurrent attempts each see the first failure).
type AlertSink struct {
	svc     *Service
	ch      chan Alert
	done    chan struct{}
	onErr   func(error)
	started bool
	ctx     context.Context    // the alerts' store calls; cancelled when a stop gives up waiting
	cancel  context.CancelFunc //

	mu     sync.Mutex
	closed bool // ch is closed: Stop was called
}

// NewAlertSink returns a sink that raises alerts through svc; onErr is
// told of alerts that could not be stored or were dropped.
func NewAlertSink(svc *Service, onErr func(error)) *AlertSink {
	ctx, cancel := context.WithCancel(context.Background())
	return &AlertSink{svc: svc, ch: make(chan Alert, 1024), done: make(chan struct{}), onErr: onErr, ctx: ctx, cancel: cancel}
}

// Start raises the alerts Put queues until Stop.
func (k *AlertSink) Start() {
	k.started = true
	go k.run()
}

// Put queues a; when 1024 alerts are already waiting, or the sink has
// stopped, it drops a (and tells onErr).
func (k *AlertSink) Put(a Alert) {
	k.mu.Lock()
	var dropped error
	switch {
	case k.closed:
		dropped = fmt.Errorf("alert %s of delivery %s dropped: the alert sink has stopped", a.Kind, a.Delivery.ID)
	default:
		select {
		case k.ch <- a:
		default:
			dropped = fmt.Errorf("alert %s of delivery %s dropped: 1024 alerts waiting", a.Kind, a.Delivery.ID)
		}
	}
	k.mu.Unlock()
	if dropped != nil {
		k.onErr(dropped)
	}
}

// Stop raises what is queued and stops. Call it after the dispatcher has
// stopped: an alert Put after it is dropped. Safe to call twice, and
// before Start.
func (k *AlertSink) Stop() {
	k.stopWithin(context.Background())
}

// stopWithin is Stop that waits for the queued alerts to be raised only
// until ctx ends; then it drops those not raised yet and returns ctx's
// error (the sink's goroutine ends when the store call under way
// returns).
func (k *AlertSink) stopWithin(ctx context.Context) error {
	k.mu.Lock()
	if !k.closed {
		k.closed = true
		close(k.ch)
	}
	k.mu.Unlock()
	if !k.started {
		return nil
	}
	select {
	case <-k.done:
		return nil
	case <-ctx.Done():
		k.cancel()
		return fmt.Errorf("engine: alert sink stop gave up waiting (%w): the alerts not raised yet are dropped", ctx.Err())
	}
}

func (k *AlertSink) run() {
	defer close(k.done)
	lastFailing := map[string]time.Time{}
	for a := range k.ch {
		if k.ctx.Err() != nil {
			continue // a stop gave up waiting: dropped
		}
		if a.Kind == AlertEndpointFailing {
			if t, ok := lastFailing[a.Delivery.EndpointID]; ok && a.At.Sub(t) < time.Minute {
				continue
			}
			lastFailing[a.Delivery.EndpointID] = a.At
		}
		if err := k.svc.RaiseAlert(k.ctx, a); err != nil {
			k.onErr(fmt.Errorf("alert %s: %w", a.Kind, err))
		}
	}
}
