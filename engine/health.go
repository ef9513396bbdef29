package engine

import (
	"context"
	"fmt"
	"time"
)

// Endpoint health: webhookd disables an endpoint that answers 410 Gone at
// once (as Standard Webhooks recommends), and one that has failed every
// attempt for DisableAfter; its deliveries are then held as paused, not
// dropped, until it is enabled again.

// DefaultDisableAfter is how long an endpoint may fail every attempt
// before it is disabled.
const DefaultDisableAfter = 5 * 24 * time.Hour

// Health transitions reported to the operator (Dispatcher's OnAlert), as
// operational events of these types (operational.go).
const (
	AlertEndpointFailing   = "endpoint.failing"   // first failure after a success (or ever)
	AlertEndpointRecovered = "endpoint.recovered" // first success after a failure
	AlertEndpointDisabled  = "endpoint.disabled"  // disabled by a 410 or by failing too long
	AlertDeliveryDead      = "delivery.dead"      // a delivery moved to the dead letters
)

// disabledByRequest begins the DisabledReason of an endpoint a person
// disabled (SetEndpointEnabled), as opposed to webhookd's health rules.
const disabledByRequest = "disabled by request"

// healthAfter returns ep's health after an attempt that ended at at with
// outcome and status (reason: why it failed), and the transitions it made
// of ep (HealthAlerts). It is pure: the dispatcher decides the health to
// record with it and the store merges that into the endpoint as stored
// (MergeHealth) inside the transaction that records the attempt; the
// alerts raised are those of that merge (OutcomeUpdate.OnHealth), as
// several attempts may see one transition. disableAfter 0 never disables for
// failing too long; keepGone leaves an endpoint that answered 410 enabled
// (the delivery is still dead). disableAsked: the answer asked for the
// endpoint to be disabled (receiverDisables), which it is, whatever the
// outcome (keepGone does not apply: the receiver said so in words).
func healthAfter(ep Endpoint, outcome Outcome, status int, reason string, at time.Time, disableAfter time.Duration, keepGone, disableAsked bool) (Endpoint, []string) {
	before := ep
	if outcome == OutcomeSuccess {
		ep.FailingSince = time.Time{}
		if disableAsked && !ep.Disabled {
			ep.Disabled, ep.DisabledAt, ep.DisabledReason = true, at, ReasonReceiverDisabled
		}
		return ep, HealthAlerts(before, ep)
	}
	if ep.FailingSince.IsZero() {
		ep.FailingSince = at
	}
	ep.LastFailure, ep.LastFailureAt = reason, at
	if ep.Disabled {
		return ep, HealthAlerts(before, ep)
	}
	switch {
	case disableAsked:
		ep.Disabled, ep.DisabledAt, ep.DisabledReason = true, at, ReasonReceiverDisabled
	case status == 410 && !keepGone:
		ep.Disabled, ep.DisabledAt = true, at
		ep.DisabledReason = "HTTP 410 Gone: the endpoint asked for no more deliveries"
	case disableAfter > 0 && at.Sub(ep.FailingSince) >= disableAfter:
		ep.Disabled, ep.DisabledAt = true, at
		ep.DisabledReason = fmt.Sprintf("failing every attempt since %s (more than %s)", ep.FailingSince.UTC().Format(time.RFC3339), disableAfter)
	}
	return ep, HealthAlerts(before, ep)
}

// HealthAlerts returns the health transitions (AlertEndpointFailing,
// AlertEndpointRecovered, AlertEndpointDisabled) from endpoint before to
// after: failing when its run of failures began, recovered when it
// ended, disabled when it was disabled.
func HealthAlerts(before, after Endpoint) []string {
	var alerts []string
	switch {
	case before.FailingSince.IsZero() && !after.FailingSince.IsZero():
		alerts = append(alerts, AlertEndpointFailing)
	case !before.FailingSince.IsZero() && after.FailingSince.IsZero():
		alerts = append(alerts, AlertEndpointRecovered)
	}
	if !before.Disabled && after.Disabled {
		alerts = append(alerts, AlertEndpointDisabled)
	}
	return alerts
}

// Alert is a health transition for the operator.
type Alert struct {
	Kind     string    // AlertEndpointFailing, AlertEndpointRecovered, AlertEndpointDisabled, AlertDeliveryDead
	Delivery Delivery  // the delivery whose attempt made the transition
	Endpoint *Endpoint // the endpoint's health after it; nil when not recorded
	// FailingSince is, for AlertEndpointRecovered, when the run of
	// failures the success ended began.
	FailingSince time.Time
	At           time.Time
}

// SetEndpointEnabled enables or disables endpoint id of tenant. Disabling
// holds its deliveries as paused from their next attempt on. Enabling with
// deliverHeld resumes every paused delivery at once (each recorded as a
// replay by by); enabling without it dead-letters them ("held while the
// endpoint was disabled"), where each can still be replayed. It returns the
// endpoint and how many held deliveries it resumed or dead-lettered.
// Enabling waits for the owed fan-outs of the tenant's events
// acknowledged before it (fanout.go), with no bound but ctx's: their
// paused deliveries are stored after it otherwise, with nothing left to
// move them. When ctx ends first the endpoint is enabled, its held
// deliveries are left as they are, and the error is CodeUnavailable:
// the same call again finishes.
func (s *Service) SetEndpointEnabled(ctx context.Context, tenant, id string, enabled, deliverHeld bool, by string) (Endpoint, int, error) {
	if !validID(id) {
		return Endpoint{}, 0, EndpointNotFound()
	}
	now := s.now()
	changed := false
	ep, err := s.store.UpdateEndpoint(ctx, tenant, id, func(ep *Endpoint) error {
		changed = ep.Disabled != !enabled
		if !changed {
			return nil
		}
		ep.Disabled = !enabled
		ep.Updated = now
		if enabled {
			ep.DisabledReason, ep.DisabledAt, ep.FailingSince = "", time.Time{}, time.Time{}
		} else {
			ep.DisabledReason, ep.DisabledAt = disabledByRequest+" ("+by+")", now
		}
		return nil
	})
	switch {
	case err != nil || !changed:
	case enabled:
		s.emitOperational(ctx, OpEndpointEnabled, map[string]any{"tenant": tenant, "endpoint_id": id, "by": by, "deliver_held": deliverHeld, "at": now})
	default:
		s.emitOperational(ctx, OpEndpointDisabled, map[string]any{"tenant": tenant, "endpoint_id": id, "reason": ep.DisabledReason, "at": now})
	}
	if err != nil || !enabled {
		return ep, 0, err
	}
	// The paused deliveries of events acknowledged before the endpoint
	// was enabled may be owed still (fanout.go): they are stored paused,
	// and only this loop resumes or drops them. So it waits for them,
	// however long their fan-out takes (a slow disk), until ctx ends:
	// then the endpoint is enabled and the same request again finishes.
	if _, err := s.settle(ctx, tenant, 0); err != nil {
		what := "dropped"
		if deliverHeld {
			what = "resumed"
		}
		return ep, 0, Errorf(CodeUnavailable, "", "the endpoint is enabled, but the deliveries of events acknowledged before are not all written yet, so its held deliveries were not %s: send the same request again", what)
	}
	var policy RetryPolicyName
	if deliverHeld {
		t, err := s.store.Tenant(ctx, tenant)
		if err != nil {
			return ep, 0, err
		}
		policy = CyclePolicy(t.RetryPolicy, ep)
	}
	total := 0
	for {
		r := Replay{At: s.now(), By: by}
		ds, err := s.store.UpdateDeliveries(ctx, Selection{Tenant: tenant, State: StatePaused, EndpointID: id}, replayBatch, func(d Delivery) Delivery {
			if deliverHeld {
				return ResumeHeldDelivery(d, r, policy)
			}
			return DropHeldDelivery(d, r.At)
		})
		if err != nil {
			return ep, total, err
		}
		for _, d := range ds {
			switch {
			case s.disp == nil:
			case deliverHeld && d.State == StatePending:
				s.disp.Enqueue(d.ID, d.TenantID, d.EndpointID, d.NextAttemptAt)
			case !deliverHeld:
				s.disp.FollowLine(d) // a dropped head's line goes on
			}
		}
		total += len(ds)
		if len(ds) == 0 {
			return ep, total, nil
		}
	}
}
