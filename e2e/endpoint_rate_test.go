package e2e

import (
	"fmt"
	"testing"
	"time"
)

// TestEndpointRateLimit: an endpoint created with rate_limit 20 per second
// gets a backlog of ten seconds' worth at 20 per second, within 10%, after
// a burst of at most 20 (its default burst), while an endpoint of the
// same tenant without a limit gets every delivery as soon as it is
// ingested. The limit is answered as set, with its default burst; PATCH
// rate_limit null removes it.
func TestEndpointRateLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("10 s of deliveries at 20 per second")
	}
	const (
		perSecond = 20
		seconds   = 10
		n         = perSecond*seconds + perSecond // the burst, then ten seconds at the rate
	)
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	limited, free := newReceiver(t, status(204)), newReceiver(t, status(204))
	var ep struct {
		endpointCreated
		RateLimit *struct {
			PerSecond float64 `json:"per_second"`
			Burst     int     `json:"burst"`
		} `json:"rate_limit"`
	}
	in.mustCall(201, "POST", "/v1/tenants/acme/endpoints", map[string]any{
		"url": limited.srv.URL + "/hook", "event_types": []string{"payment.succeeded"},
		"rate_limit": map[string]any{"per_second": perSecond},
	}, &ep)
	if ep.RateLimit == nil || ep.RateLimit.PerSecond != perSecond || ep.RateLimit.Burst != perSecond {
		t.Fatalf("created with rate_limit %+v, want %d per second, burst %d", ep.RateLimit, perSecond, perSecond)
	}
	limited.setSecret(ep.Secret)
	free.setSecret(in.createEndpoint(free.srv.URL+"/hook", "payment.succeeded").Secret)

	start := time.Now()
	for i := range n {
		in.ingest("payment.succeeded", fmt.Sprintf(`{"n":%d}`, i))
	}
	ingested := time.Now()
	if !poll(15*time.Second, func() bool { return len(free.got()) >= n }) {
		t.Fatalf("the endpoint without a limit got %d of %d deliveries", len(free.got()), n)
	}
	if !poll(seconds*time.Second+15*time.Second, func() bool { return len(limited.got()) >= n }) {
		t.Fatalf("the limited endpoint got %d of %d deliveries", len(limited.got()), n)
	}
	limited.checkSignatures()
	free.checkSignatures()

	got := limited.got()
	if len(got) != n {
		t.Errorf("the limited endpoint got %d requests, want %d", len(got), n)
	}
	// After its burst the endpoint gets the rest at the rate: 20 per
	// second over the ten seconds, within 10%.
	steady := got[perSecond:]
	span := steady[len(steady)-1].at.Sub(steady[0].at)
	rate := float64(len(steady)-1) / span.Seconds()
	t.Logf("ingested %d events in %v; the limited endpoint got its last %d at %.2f per second over %v", n, ingested.Sub(start).Round(time.Millisecond), len(steady), rate, span.Round(time.Millisecond))
	if rate < perSecond*0.9 || rate > perSecond*1.1 {
		t.Errorf("the limited endpoint got %.2f requests per second after its burst, want %d within 10%%", rate, perSecond)
	}
	// No second of it had more than the burst and a second's rate.
	for i := range got {
		j := i
		for j < len(got) && got[j].at.Sub(got[i].at) < time.Second {
			j++
		}
		if j-i > 2*perSecond {
			t.Errorf("the limited endpoint got %d requests in the second from request %d, want at most %d (burst and rate)", j-i, i+1, 2*perSecond)
			break
		}
	}
	// The other endpoint was not slowed: each delivery came as its
	// event was ingested.
	if last := free.got()[n-1].at; last.Sub(ingested) > time.Second {
		t.Errorf("the endpoint without a limit got its last delivery %v after the last ingest, want it within a second", last.Sub(ingested).Round(time.Millisecond))
	}

	var after struct {
		RateLimit any `json:"rate_limit"`
	}
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+ep.ID, `{"rate_limit":null}`, &after)
	if after.RateLimit != nil {
		t.Errorf("after PATCH rate_limit null the endpoint answers rate_limit %v, want none", after.RateLimit)
	}
}
