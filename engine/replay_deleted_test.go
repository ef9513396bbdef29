package engine_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
)

// TestReplayTask_LeavesADeletedEndpointsDeadLetters: a range replay
// replays the dead letters of the tenant's endpoints and leaves those of
// an endpoint deleted since, as a replay of one of them is refused: a
// cycle to a deleted endpoint could only die again. Its done counts only
// the ones replayed.
func TestReplayTask_LeavesADeletedEndpointsDeadLetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := taskNode(t, memstore.New(), func(*http.Request) int { return http.StatusBadRequest }, engine.ServiceOptions{}, nil)
		svc, ctx := n.Service, t.Context()
		setupTenant(t, svc, 0)
		var eps [2]engine.Endpoint
		for i := range eps {
			ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: bubbleURL, EventTypes: []string{"order.created"}})
			if err != nil {
				t.Fatal(err)
			}
			eps[i] = ep
		}
		since := time.Now()
		var ds []engine.Delivery
		for range 3 {
			res, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, res.Deliveries...)
		}
		synctest.Wait() // 400: each dies at its first attempt
		time.Sleep(time.Second)
		if err := svc.DeleteEndpoint(ctx, "acme", eps[0].ID); err != nil {
			t.Fatal(err)
		}
		tk, err := svc.StartReplay(ctx, "acme", since, time.Time{}, "", "admin")
		if err != nil {
			t.Fatal(err)
		}
		done := waitTask(t, svc, tk.ID, ended)
		if done.State != engine.TaskSucceeded || done.Done != 3 {
			t.Errorf("the replay task: %+v, want 3 replayed (the live endpoint's)", done)
		}
		for _, d := range ds {
			got, err := svc.Delivery(ctx, "acme", d.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := 1
			if d.EndpointID == eps[0].ID {
				want = 0
			}
			if len(got.Replays) != want || got.State != engine.StateDead {
				t.Errorf("delivery %s to %s: %s, %d replays; want dead, %d", d.ID, d.EndpointID, got.State, len(got.Replays), want)
			}
		}
	})
}
