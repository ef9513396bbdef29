package engine

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHealthAfter(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	failing := Endpoint{FailingSince: t0}
	tests := []struct {
		name       string
		ep         Endpoint
		outcome    Outcome
		status     int
		at         time.Time
		wantAlerts []string
		disabled   string // substring of DisabledReason; "" not disabled
		since      time.Time
		asked      bool // the answer said webhook-delivery: disable
	}{
		{"first failure", Endpoint{}, OutcomeRetry, 502, t0, []string{AlertEndpointFailing}, "", t0, false},
		{"another failure", failing, OutcomeRetry, 502, t0.Add(time.Hour), nil, "", t0, false},
		{"success clears: recovered", failing, OutcomeSuccess, 200, t0.Add(time.Hour), []string{AlertEndpointRecovered}, "", time.Time{}, false},
		{"another success", Endpoint{}, OutcomeSuccess, 200, t0.Add(time.Hour), nil, "", time.Time{}, false},
		{"410 disables at once", Endpoint{}, OutcomePermanent, 410, t0, []string{AlertEndpointFailing, AlertEndpointDisabled}, "410 Gone", t0, false},
		{"failing five days disables", failing, OutcomeRetry, 500, t0.Add(DefaultDisableAfter), []string{AlertEndpointDisabled}, "failing every attempt since", t0, false},
		{"just under five days", failing, OutcomeRetry, 500, t0.Add(DefaultDisableAfter - time.Second), nil, "", t0, false},
		{"already disabled: no second alert", Endpoint{Disabled: true, FailingSince: t0}, OutcomePermanent, 410, t0.Add(time.Minute), nil, "", t0, false},
		{"asked on a success: received, then disabled", failing, OutcomeSuccess, 200, t0, []string{AlertEndpointRecovered, AlertEndpointDisabled}, "asked to be disabled", time.Time{}, true},
		{"asked on a failure: disabled at once", Endpoint{}, OutcomeRetry, 503, t0, []string{AlertEndpointFailing, AlertEndpointDisabled}, "asked to be disabled", t0, true},
		{"asked with a 410: the receiver's words", Endpoint{}, OutcomePermanent, 410, t0, []string{AlertEndpointFailing, AlertEndpointDisabled}, "webhook-delivery: disable", t0, true},
		{"asked, already disabled: no second alert", Endpoint{Disabled: true}, OutcomeSuccess, 200, t0, nil, "", time.Time{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, alerts := healthAfter(tt.ep, tt.outcome, tt.status, "why", tt.at, DefaultDisableAfter, false, tt.asked)
			if !slices.Equal(alerts, tt.wantAlerts) {
				t.Errorf("alerts %v, want %v", alerts, tt.wantAlerts)
			}
			if !got.FailingSince.Equal(tt.since) {
				t.Errorf("failing since %v, want %v", got.FailingSince, tt.since)
			}
			if tt.disabled != "" && (!got.Disabled || !strings.Contains(got.DisabledReason, tt.disabled)) {
				t.Errorf("got %v %q, want disabled with %q", got.Disabled, got.DisabledReason, tt.disabled)
			}
			if tt.disabled == "" && got.Disabled != tt.ep.Disabled {
				t.Errorf("disabled changed to %v", got.Disabled)
			}
		})
	}
}

func TestHealthAfter_KeepGone(t *testing.T) {
	got, alerts := healthAfter(Endpoint{}, OutcomePermanent, 410, "gone", time.Now(), DefaultDisableAfter, true, false)
	if got.Disabled || slices.Contains(alerts, AlertEndpointDisabled) {
		t.Errorf("with keepGone a 410 disabled the endpoint: %+v %v", got, alerts)
	}
}

// TestHealthAlerts: the transitions from an endpoint as stored to the
// endpoint after a record's merge. A merge that finds the change made
// already (another attempt's record came first) raises nothing.
func TestHealthAlerts(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	healthy, failing := Endpoint{}, Endpoint{FailingSince: t0}
	disabled := Endpoint{FailingSince: t0, Disabled: true}
	tests := []struct {
		name          string
		before, after Endpoint
		want          []string
	}{
		{"starts failing", healthy, failing, []string{AlertEndpointFailing}},
		{"fails again", failing, Endpoint{FailingSince: t0.Add(-time.Second)}, nil},
		{"recovers", failing, healthy, []string{AlertEndpointRecovered}},
		{"stays healthy", healthy, healthy, nil},
		{"a 410 on a healthy one", healthy, disabled, []string{AlertEndpointFailing, AlertEndpointDisabled}},
		{"disabled after failing long", failing, disabled, []string{AlertEndpointDisabled}},
		{"disabled already", disabled, disabled, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HealthAlerts(tt.before, tt.after); !slices.Equal(got, tt.want) {
				t.Errorf("HealthAlerts = %v, want %v", got, tt.want)
			}
		})
	}
}
