package engine_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
)

// patientPolicy retries every minute, three times, and retries a 404 too.
var patientPolicy = engine.RetryPolicy{
	Schedule: []time.Duration{time.Minute, time.Minute, time.Minute},
	Deadline: 10 * time.Minute, RetryStatuses: []int{404},
}

// policyNode is a node over store (nil: a new memstore) that knows the
// extended policy and patientPolicy (as "patient"), whose attempts of an
// endpoint URL ending in /404 are answered 404 and all others status.
func policyNode(t *testing.T, store engine.Store, status int, logs io.Writer) *engine.Node {
	t.Helper()
	if store == nil {
		store = memstore.New()
	}
	var logger *slog.Logger
	if logs != nil {
		logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	answer := func(r *http.Request) int {
		if strings.HasSuffix(r.URL.Path, "/404") {
			return http.StatusNotFound
		}
		return status
	}
	return engine.NewNode(store, engine.NodeOptions{
		Logger: logger,
		Dispatcher: engine.DispatcherOptions{
			Workers: 2, Client: bubbleClient(answer), Targets: bubbleTargets, Random: func() float64 { return 0.5 },
			Policies: map[string]engine.RetryPolicy{engine.ExtendedRetryPolicyName: engine.ExtendedRetryPolicy(), "patient": patientPolicy},
		},
		Service: engine.ServiceOptions{Targets: bubbleTargets},
	})
}

// TestService_RetryPolicyChoice: a tenant chooses a policy and an endpoint
// overrides it, each among the node's policies only (CodeInvalidField
// naming retry_policy, nothing stored); an endpoint answers the policy it
// follows; a tenant's update that names none keeps its policy.
func TestService_RetryPolicyChoice(t *testing.T) {
	node := policyNode(t, nil, http.StatusOK, nil)
	svc, ctx := node.Service, t.Context()
	wantInvalid := func(err error) {
		t.Helper()
		var e *engine.Error
		if !errors.As(err, &e) || e.Code != engine.CodeInvalidField || e.Field != "retry_policy" {
			t.Fatalf("got %v, want invalid_field on retry_policy", err)
		}
	}
	_, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme", RetryPolicy: "nightly"})
	wantInvalid(err)
	if !strings.Contains(err.Error(), "extended, patient, standard") {
		t.Errorf("error %q does not list the policies", err)
	}
	_, _, err = svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme", RetryPolicy: "Bad Name"})
	wantInvalid(err)
	if _, err := svc.Tenant(ctx, "acme"); engine.ErrorCode(err) != engine.CodeTenantNotFound {
		t.Fatalf("a refused put stored the tenant: %v", err)
	}
	tn, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme", RetryPolicy: "extended"})
	if err != nil || tn.RetryPolicy != "extended" {
		t.Fatalf("PutTenant = %+v, %v", tn, err)
	}
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	_, _, err = svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"*"}, RetryPolicy: "nightly"})
	wantInvalid(err)
	if eps, _ := svc.Endpoints(ctx, "acme"); len(eps) != 0 {
		t.Fatalf("a refused create stored %d endpoints", len(eps))
	}
	inherits, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"*"}})
	if err != nil || inherits.RetryPolicy != "" || inherits.EffectiveRetryPolicy != "extended" {
		t.Fatalf("CreateEndpoint without a policy = %q effective %q, %v; want none, effective extended", inherits.RetryPolicy, inherits.EffectiveRetryPolicy, err)
	}
	own, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"*"}, RetryPolicy: "patient"})
	if err != nil || own.RetryPolicy != "patient" || own.EffectiveRetryPolicy != "patient" {
		t.Fatalf("CreateEndpoint with patient = %q effective %q, %v", own.RetryPolicy, own.EffectiveRetryPolicy, err)
	}
	bad := "nightly"
	_, err = svc.UpdateEndpoint(ctx, "acme", own.ID, engine.EndpointPatch{RetryPolicy: &bad})
	wantInvalid(err)
	none := ""
	got, err := svc.UpdateEndpoint(ctx, "acme", own.ID, engine.EndpointPatch{RetryPolicy: &none})
	if err != nil || got.RetryPolicy != "" || got.EffectiveRetryPolicy != "extended" {
		t.Fatalf("UpdateEndpoint to the tenant's = %q effective %q, %v", got.RetryPolicy, got.EffectiveRetryPolicy, err)
	}
	if tn, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme 2"}); err != nil || tn.RetryPolicy != "extended" {
		t.Fatalf("PutTenant without a policy = %+v, %v; want it kept", tn, err)
	}
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme 2", RetryPolicy: "standard"}); err != nil {
		t.Fatal(err)
	}
	for _, ep := range mustEndpoints(t, svc, "acme") {
		if ep.EffectiveRetryPolicy != "standard" {
			t.Errorf("endpoint %s follows %q after the tenant chose standard, want standard", ep.ID, ep.EffectiveRetryPolicy)
		}
	}
	if ps := svc.RetryPolicies(); len(ps) != 3 || ps["patient"].MaxAttempts() != 4 || ps["standard"].MaxAttempts() != 6 {
		t.Errorf("RetryPolicies = %+v", ps)
	}
}

func mustEndpoints(t *testing.T, svc *engine.Service, tenant string) []engine.Endpoint {
	t.Helper()
	eps, err := svc.Endpoints(t.Context(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return eps
}

// TestDispatcher_FollowsTheDeliveryPolicy: each delivery is attempted by
// the schedule of its cycle's policy and classified by it: a failing
// endpoint on the patient policy gets its 4 attempts a minute apart, one
// on the standard policy its 6; a 404 is retried where the policy says
// so and dead at once elsewhere; a replay after the endpoint changed its
// policy follows the new one.
func TestDispatcher_FollowsTheDeliveryPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node := policyNode(t, nil, http.StatusServiceUnavailable, nil)
		svc, ctx := node.Service, t.Context()
		if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
			t.Fatal(err)
		}
		create := func(url, policy string) engine.Endpoint {
			ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: url, EventTypes: []string{"*"}, RetryPolicy: policy})
			if err != nil {
				t.Fatal(err)
			}
			return ep
		}
		standard := create(bubbleURL, "")
		patient := create(bubbleURL, "patient")
		patient404 := create("http://127.0.0.1:9/404", "patient")
		standard404 := create("http://127.0.0.1:9/404", "")
		if err := node.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer node.Stop(ctx)
		start := time.Now()
		res, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		by := map[string]engine.Delivery{}
		for _, d := range res.Deliveries {
			by[d.EndpointID] = d
		}
		time.Sleep(3 * time.Hour) // past every window
		synctest.Wait()
		read := func(ep engine.Endpoint) engine.Delivery {
			d, err := svc.Delivery(ctx, "acme", by[ep.ID].ID)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		for _, tc := range []struct {
			ep       engine.Endpoint
			policy   engine.RetryPolicyName
			attempts int
			reason   string
		}{
			{standard, "", 6, "all 6 attempts failed"},
			{patient, "patient", 4, "all 4 attempts failed"},
			{patient404, "patient", 4, "all 4 attempts failed; last attempt: HTTP 404"},
			{standard404, "", 1, "permanent failure"},
		} {
			d := read(tc.ep)
			if d.RetryPolicy != tc.policy || d.State != engine.StateDead || len(d.Attempts) != tc.attempts || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("delivery to %s (%s): policy %q, %s after %d attempts (%q); want policy %q, dead after %d (%q)",
					tc.ep.ID, tc.ep.EffectiveRetryPolicy, d.RetryPolicy, d.State, len(d.Attempts), d.Reason, tc.policy, tc.attempts, tc.reason)
			}
		}
		for i, a := range read(patient).Attempts {
			if want := start.Add(time.Duration(i) * time.Minute); !a.Start.Equal(want.UTC()) {
				t.Errorf("patient attempt %d at +%s, want +%dm", i+1, a.Start.Sub(start), i)
			}
		}

		// The endpoint that killed a 404 at once now retries it: its
		// replay follows the policy it has now.
		p := "patient"
		if _, err := svc.UpdateEndpoint(ctx, "acme", standard404.ID, engine.EndpointPatch{RetryPolicy: &p}); err != nil {
			t.Fatal(err)
		}
		d, err := svc.Replay(ctx, "acme", by[standard404.ID].ID, "admin")
		if err != nil || d.RetryPolicy != "patient" {
			t.Fatalf("replay = policy %q, %v; want patient", d.RetryPolicy, err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if d := read(standard404); d.Cycle != 2 || d.CycleAttempts != 4 || d.State != engine.StateDead {
			t.Errorf("replayed on patient: cycle %d, %d attempts in it, %s; want cycle 2, 4, dead", d.Cycle, d.CycleAttempts, d.State)
		}
	})
}

// TestDispatcher_UnknownPolicyFollowsStandard: a delivery naming a policy
// the node does not have (the configuration dropped it) follows the
// standard policy, and the log says so once.
func TestDispatcher_UnknownPolicyFollowsStandard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		ctx := t.Context()
		// Stored as a node that had the policy left it.
		if _, _, err := store.PutTenant(ctx, engine.Tenant{ID: "acme", Name: "Acme", RetryPolicy: "nightly"}); err != nil {
			t.Fatal(err)
		}
		var logs lockedBuffer
		node := policyNode(t, store, http.StatusServiceUnavailable, &logs)
		svc := node.Service
		if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"*"}}); err != nil {
			t.Fatal(err)
		}
		if err := node.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer node.Stop(ctx)
		var ids []string
		for range 2 {
			res, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.Deliveries[0].ID)
		}
		time.Sleep(3 * time.Hour)
		synctest.Wait()
		for _, id := range ids {
			d, err := svc.Delivery(ctx, "acme", id)
			if err != nil {
				t.Fatal(err)
			}
			if d.RetryPolicy != "nightly" || len(d.Attempts) != 6 || !strings.Contains(d.Reason, "all 6 attempts failed") {
				t.Errorf("delivery %s: policy %q, %d attempts, %q; want nightly kept, the standard 6 attempts", id, d.RetryPolicy, len(d.Attempts), d.Reason)
			}
		}
		if p, known := svc.RetryPolicy("nightly"); known || p.MaxAttempts() != 6 {
			t.Errorf("RetryPolicy(nightly) = %d attempts, known %v; want the standard one, unknown", p.MaxAttempts(), known)
		}
		if n := strings.Count(logs.String(), "retry_policy=nightly"); n != 1 {
			t.Errorf("the log names the unknown policy %d times, want once:\n%s", n, logs.String())
		}
	})
}

// lockedBuffer is a bytes.Buffer safe for the logger's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.String()
}
