package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/storage"
)

// TestService_Backfill: a backfill's task makes what the pending bound
// leaves room for and then waits, saying for which bound; it hands what
// it made to the dispatcher and records who asked; a backfill's range is
// validated like a range replay's before any task is made.
func TestService_Backfill(t *testing.T) {
	ctx := context.Background()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	open := engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	now := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	clock := func() time.Time { return now }
	// Attempts are a day away: nothing moves while the test looks.
	disp := engine.NewDispatcher(db, engine.DispatcherOptions{Targets: open, Now: func() time.Time { return now.Add(-24 * time.Hour) }})
	if err := disp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer disp.Stop(ctx)
	svc := engine.NewService(db, disp, engine.ServiceOptions{Targets: open, Now: clock, MaxPendingPerTenant: 3})
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"order.created", "order.shipped"} {
		if _, _, err := svc.PutEventType(ctx, typ, engine.EventTypeInput{}); err != nil {
			t.Fatal(err)
		}
	}
	since := now
	for i := range 6 {
		typ := "order.created"
		if i == 5 {
			typ = "order.shipped"
		}
		now = since.Add(time.Duration(i) * time.Second)
		if _, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: typ, Data: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	now = since.Add(time.Minute)
	ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/x", EventTypes: []string{"order.created"}})
	if err != nil {
		t.Fatal(err)
	}

	defer svc.StopTasks(ctx)
	tk, err := svc.StartBackfill(ctx, "acme", ep.ID, since, time.Time{}, "token tok_1")
	if err != nil {
		t.Fatal(err)
	}
	// The attempts are a day away: the bound stays full once it is.
	got := pollTaskUntil(t, svc, tk.ID, func(tk engine.Task) bool { return tk.Waiting != "" })
	if got.Done != 3 || got.Waiting != "pending_per_tenant" || got.State != engine.TaskRunning {
		t.Errorf("the backfill at the bound: %+v, want 3 made, waiting for pending_per_tenant", got)
	}
	ds, _, err := svc.ListDeliveries(ctx, "acme", engine.DeliveryFilter{EndpointID: ep.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 3 {
		t.Fatalf("%d deliveries to the endpoint, want 3", len(ds))
	}
	for _, d := range ds {
		if d.Backfill == nil || d.Backfill.By != "token tok_1" || !d.Backfill.At.Equal(now) || !d.NextAttemptAt.Equal(now) {
			t.Errorf("delivery %s: backfill %+v, due %v; want by token tok_1 at %v, due then", d.ID, d.Backfill, d.NextAttemptAt, now)
		}
		if !disp.Holds(d.ID) {
			t.Errorf("the dispatcher does not hold backfilled delivery %s", d.ID)
		}
	}

	for _, tt := range []struct {
		name         string
		tenant, id   string
		since, until time.Time
		code         engine.Code
		field        string
	}{
		{"no since", "acme", ep.ID, time.Time{}, now, engine.CodeInvalidField, "since"},
		{"until before since", "acme", ep.ID, now, since, engine.CodeInvalidField, "until"},
		{"until equal to since", "acme", ep.ID, since, since, engine.CodeInvalidField, "until"},
		{"since after now, no until", "acme", ep.ID, now.Add(time.Hour), time.Time{}, engine.CodeInvalidField, "until"},
		{"unknown endpoint", "acme", "ep_nope", since, now, engine.CodeEndpointNotFound, ""},
		{"unknown tenant", "nobody", ep.ID, since, now, engine.CodeTenantNotFound, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.StartBackfill(ctx, tt.tenant, tt.id, tt.since, tt.until, "admin")
			if engine.ErrorCode(err) != tt.code || tt.field != "" && errorField(err) != tt.field {
				t.Errorf("error %v (field %q), want %s naming %q", err, errorField(err), tt.code, tt.field)
			}
		})
	}
}

// TestService_BackfillUnbounded: without a pending bound a backfill's
// task makes every missing delivery, over more than one step, and a
// second makes none.
func TestService_BackfillUnbounded(t *testing.T) {
	ctx := context.Background()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	svc := engine.NewService(db, nil, engine.ServiceOptions{Targets: engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}})
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Minute)
	const n = 1500 // more than one step reads
	for range n {
		if _, err := svc.Ingest(ctx, "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(`1`)}); err != nil {
			t.Fatal(err)
		}
	}
	ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/x", EventTypes: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.StopTasks(ctx)
	for _, want := range []struct{ done, skipped int }{{n, 0}, {0, n}} {
		tk, err := svc.StartBackfill(ctx, "acme", ep.ID, since, time.Time{}, "admin")
		if err != nil {
			t.Fatal(err)
		}
		got := pollTask(t, svc, tk.ID)
		if got.State != engine.TaskSucceeded || got.Done != want.done || got.Skipped != want.skipped || got.Cursor == "" {
			t.Fatalf("backfill = %+v; want %d made, %d skipped, in more than one step", got, want.done, want.skipped)
		}
	}
}
