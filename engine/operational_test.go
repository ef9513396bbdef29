package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
)

// opsURL is where the bubble's operational endpoint points.
const opsURL = "http://127.0.0.1:9/ops"

// opEvent is one operational event as the operator's endpoint got it.
type opEvent struct {
	Type string         `json:"type"`
	Data map[string]any `json:"data"`
}

// opReceiver answers the bubble's requests: those to opsURL are the
// operator's (recorded, 200), the others the customer's, answered
// status.
type opReceiver struct {
	status atomic.Int32
	mu     sync.Mutex
	events []opEvent
}

func (o *opReceiver) answer(r *http.Request) int {
	if r.URL.Path != "/ops" {
		return int(o.status.Load())
	}
	body, _ := io.ReadAll(r.Body)
	var ev opEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		panic(err)
	}
	o.mu.Lock()
	o.events = append(o.events, ev)
	o.mu.Unlock()
	return http.StatusOK
}

// take returns the events received since the last take.
func (o *opReceiver) take() []opEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.events
	o.events = nil
	return out
}

// milliseconds is engine.TimeFormat's text.
var milliseconds = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// wantEvents fails t unless got is exactly the events of types, in that
// order, each about tenant acme and endpoint ep (but tenant.deleted),
// each at a time with milliseconds, and returns them.
func wantEvents(t *testing.T, got []opEvent, ep string, types ...string) []opEvent {
	t.Helper()
	var gotTypes []string
	for _, ev := range got {
		gotTypes = append(gotTypes, ev.Type)
		if ev.Data["tenant"] != "acme" {
			t.Errorf("%s is about tenant %v, want acme", ev.Type, ev.Data["tenant"])
		}
		if ev.Type != engine.OpTenantDeleted && ev.Type != engine.OpTaskFinished && ev.Data["endpoint_id"] != ep {
			t.Errorf("%s is about endpoint %v, want %s", ev.Type, ev.Data["endpoint_id"], ep)
		}
		if at, _ := ev.Data["at"].(string); !milliseconds.MatchString(at) {
			t.Errorf("%s: at %v, want UTC with three fraction digits", ev.Type, ev.Data["at"])
		}
	}
	if !slices.Equal(gotTypes, types) {
		t.Fatalf("operational events %v, want %v", gotTypes, types)
	}
	return got
}

// TestOperational_EventsOfActions: each action on a customer's endpoint
// and tenant, and each health transition of an endpoint, is told to the
// operational endpoint once, in order, with its tenant, its object's ID,
// its reason where there is one and the time; the operator's own
// endpoint's creation, and its own deliveries, tell nothing.
func TestOperational_EventsOfActions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &opReceiver{}
		rc.status.Store(http.StatusOK)
		node := bubbleNode(t, nil, rc.answer, engine.DispatcherOptions{Workers: 1, Random: func() float64 { return 0.5 }})
		ctx := t.Context()
		if err := node.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer node.Stop(context.Background())
		svc := node.Service
		if _, err := svc.CreateOperationalEndpoint(ctx, engine.OperationalEndpointInput{URL: opsURL, EventTypes: []string{"*"}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
			t.Fatal(err)
		}
		settle := func() { time.Sleep(2 * time.Second); synctest.Wait() }

		ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"*"}})
		if err != nil {
			t.Fatal(err)
		}
		desc := "orders"
		if _, err := svc.UpdateEndpoint(ctx, "acme", ep.ID, engine.EndpointPatch{Description: &desc}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.UpdateEndpoint(ctx, "acme", ep.ID, engine.EndpointPatch{Description: &desc}); err != nil {
			t.Fatal(err) // the same again: nothing changed, nothing told
		}
		off, on := true, false
		if _, err := svc.UpdateEndpoint(ctx, "acme", ep.ID, engine.EndpointPatch{Disabled: &off}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.UpdateEndpoint(ctx, "acme", ep.ID, engine.EndpointPatch{Disabled: &on, DeliverHeld: true}); err != nil {
			t.Fatal(err)
		}
		settle()
		evs := wantEvents(t, rc.take(), ep.ID, engine.OpEndpointCreated, engine.OpEndpointUpdated, engine.OpEndpointDisabled, engine.OpEndpointEnabled)
		if got := evs[1].Data["changed"]; !slices.Equal(toStrings(got), []string{"description"}) {
			t.Errorf("endpoint.updated: changed %v, want [description]", got)
		}
		if got := evs[2].Data["reason"]; got != "disabled by request (admin)" {
			t.Errorf("endpoint.disabled: reason %v", got)
		}
		if evs[3].Data["deliver_held"] != true || evs[3].Data["by"] != "admin" {
			t.Errorf("endpoint.enabled: data %v", evs[3].Data)
		}

		// Failing, then recovered at the retry; then a permanent failure
		// fails it again and kills the delivery; then a 410 disables it.
		rc.status.Store(http.StatusInternalServerError)
		ingest := func() {
			t.Helper()
			if _, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}
		ingest()
		settle()
		rc.status.Store(http.StatusOK)
		time.Sleep(10 * time.Second) // the retry
		synctest.Wait()
		settle()
		evs = wantEvents(t, rc.take(), ep.ID, engine.OpEndpointFailing, engine.OpEndpointRecovered)
		if evs[0].Data["reason"] == "" || evs[0].Data["failing_since"] == nil || evs[1].Data["failing_since"] != evs[0].Data["failing_since"] {
			t.Errorf("failing %v, then recovered %v: want the reason, and the run's start in both", evs[0].Data, evs[1].Data)
		}
		rc.status.Store(http.StatusBadRequest)
		ingest()
		settle()
		evs = wantEvents(t, rc.take(), ep.ID, engine.OpEndpointFailing, engine.OpDeliveryDead)
		if d := evs[1].Data; d["delivery_id"] == nil || d["event_id"] == nil || d["reason"] == "" || d["last_status"] != float64(400) {
			t.Errorf("delivery.dead: data %v", d)
		}
		rc.status.Store(http.StatusGone)
		ingest()
		settle()
		evs = wantEvents(t, rc.take(), ep.ID, engine.OpEndpointDisabled, engine.OpDeliveryDead)
		if r, _ := evs[0].Data["reason"].(string); !strings.Contains(r, "410 Gone") {
			t.Errorf("endpoint.disabled by a 410: reason %v", evs[0].Data["reason"])
		}

		if err := svc.DeleteEndpoint(ctx, "acme", ep.ID); err != nil {
			t.Fatal(err)
		}
		purge, err := svc.DeleteTenant(ctx, "acme", true, "admin")
		if err != nil {
			t.Fatal(err)
		}
		settle()
		// The deletion, then its purge's task as it ends.
		evs = wantEvents(t, rc.take(), ep.ID, engine.OpEndpointDeleted, engine.OpTenantDeleted, engine.OpTaskFinished)
		if evs[1].Data["task_id"] != purge.ID || evs[2].Data["task_id"] != purge.ID || evs[2].Data["kind"] != "tenant.purge" || evs[2].Data["state"] != "succeeded" {
			t.Errorf("tenant.deleted %v and task.finished %v, want both to name the purge %s", evs[1].Data, evs[2].Data, purge.ID)
		}
	})
}

// toStrings is a JSON array of strings as []string.
func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// TestOperational_Filter: an operational endpoint gets the types it
// subscribes to only, and an event no operational endpoint subscribes
// to is not stored at all.
func TestOperational_Filter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &opReceiver{}
		rc.status.Store(http.StatusOK)
		store := memstore.New()
		node := bubbleNode(t, store, rc.answer, engine.DispatcherOptions{Workers: 1})
		ctx := t.Context()
		if err := node.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer node.Stop(context.Background())
		svc := node.Service
		if _, err := svc.CreateOperationalEndpoint(ctx, engine.OperationalEndpointInput{URL: opsURL, EventTypes: []string{engine.OpEndpointDeleted}}); err != nil {
			t.Fatal(err)
		}
		acmeEndpoint(t, svc, bubbleURL)
		eps, _ := svc.Endpoints(ctx, "acme")
		if err := svc.DeleteEndpoint(ctx, "acme", eps[0].ID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		wantEvents(t, rc.take(), eps[0].ID, engine.OpEndpointDeleted)
		stored, err := store.RecentEvents(ctx, engine.OperatorTenant, 100)
		if err != nil || len(stored) != 1 {
			t.Errorf("the operator tenant stores %d events (%v), want the one subscribed to", len(stored), err)
		}
	})
}

// stuckOperator is a store whose ingests into the operator's tenant
// hang until open is closed, or fail when failing is set.
type stuckOperator struct {
	engine.Store
	open    chan struct{}
	failing bool
}

func (s *stuckOperator) AppendEvent(ctx context.Context, in engine.NewEvent) (engine.IngestResult, error) {
	if in.Event.TenantID == engine.OperatorTenant {
		if s.failing {
			return engine.IngestResult{}, errors.New("the disk is full")
		}
		<-s.open
	}
	return s.Store.AppendEvent(ctx, in)
}

// TestOperational_NeverHoldsTheAction: an operational event neither
// slows nor fails the action that emits it: with the operator's ingest
// hung, every request still returns at once (the events past the
// queue's room are dropped and logged); with it failing, every request
// still succeeds.
func TestOperational_NeverHoldsTheAction(t *testing.T) {
	for _, failing := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			store := &stuckOperator{Store: memstore.New(), open: make(chan struct{}), failing: failing}
			var logs lockedBuffer
			node := engine.NewNode(store, engine.NodeOptions{
				Dispatcher: engine.DispatcherOptions{Client: bubbleClient(ok200), Targets: bubbleTargets},
				Service:    engine.ServiceOptions{Targets: bubbleTargets},
				Logger:     slog.New(slog.NewTextHandler(&logs, nil)),
			})
			ctx := t.Context()
			if err := node.Start(ctx); err != nil {
				t.Fatal(err)
			}
			svc := node.Service
			if _, err := svc.CreateOperationalEndpoint(ctx, engine.OperationalEndpointInput{URL: opsURL, EventTypes: []string{"*"}}); err != nil {
				t.Fatal(err)
			}
			acmeEndpoint(t, svc, bubbleURL)
			start := time.Now()
			for range 1100 {
				desc := engine.NewID("d")
				if _, err := svc.UpdateEndpoint(ctx, "acme", mustFirstEndpoint(t, svc), engine.EndpointPatch{Description: &desc}); err != nil {
					t.Fatal(err)
				}
			}
			if took := time.Since(start); took != 0 {
				t.Errorf("1100 updates took %s of the bubble's time, want none", took)
			}
			synctest.Wait()
			want := "operational event endpoint.updated dropped: 1024 events waiting"
			if failing {
				want = "operational event endpoint.updated: the disk is full"
			}
			if !strings.Contains(logs.String(), want) {
				t.Errorf("the log says nothing like %q:\n%.2000s", want, logs.String())
			}
			close(store.open)
			if err := node.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// mustFirstEndpoint returns the ID of acme's first endpoint.
func mustFirstEndpoint(t *testing.T, svc *engine.Service) string {
	t.Helper()
	eps, err := svc.Endpoints(t.Context(), "acme")
	if err != nil || len(eps) == 0 {
		t.Fatalf("acme's endpoints: %v %v", eps, err)
	}
	return eps[0].ID
}

// TestOperational_NoLoop: an operational endpoint that fails is not told
// so: its failing, its disabling and its dead deliveries are the
// operator tenant's, which nothing is emitted about.
func TestOperational_NoLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var opsRequests atomic.Int32
		store := memstore.New()
		node := bubbleNode(t, store, func(r *http.Request) int {
			if r.URL.Path == "/ops" {
				opsRequests.Add(1)
				return http.StatusGone
			}
			return http.StatusOK
		}, engine.DispatcherOptions{Workers: 1})
		ctx := t.Context()
		if err := node.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer node.Stop(context.Background())
		svc := node.Service
		op, err := svc.CreateOperationalEndpoint(ctx, engine.OperationalEndpointInput{URL: opsURL, EventTypes: []string{"*"}})
		if err != nil {
			t.Fatal(err)
		}
		acmeEndpoint(t, svc, bubbleURL) // endpoint.created: the one event
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := opsRequests.Load(); n != 1 {
			t.Errorf("the operational endpoint got %d requests, want 1 (its failure, disabling and dead delivery tell nothing)", n)
		}
		got, err := svc.OperationalEndpoint(ctx, op.Endpoint.ID)
		if err != nil || !got.Disabled {
			t.Errorf("the operational endpoint after a 410: %+v %v, want disabled", got, err)
		}
		if evs, _ := store.RecentEvents(ctx, engine.OperatorTenant, 100); len(evs) != 1 {
			t.Errorf("the operator tenant stores %d events, want 1", len(evs))
		}
	})
}
