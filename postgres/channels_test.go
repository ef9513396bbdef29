package postgres

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// TestAppendEvent_ChannelsInOneRoundTrip: an event on channels takes the
// one-round-trip ingest like any other (its channels are a parameter of
// the one write), is matched against the cached endpoints' filters, and
// is stored with its channels.
func TestAppendEvent_ChannelsInOneRoundTrip(t *testing.T) {
	clock := &manualClock{t: time.Now()}
	s := nodes(t, 1, clock)[0]
	ctx := t.Context()
	now := clock.now()
	plain := acme(t, s, now, 1)[0]
	filtered := engine.Endpoint{ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/a", EventTypes: []string{"order.created"},
		Channels: []string{"a"}, Created: now, Updated: now, Secrets: []engine.Secret{{Key: engine.NewSecret()}}}
	if err := s.CreateEndpoint(ctx, filtered, 0); err != nil {
		t.Fatal(err)
	}
	ingest := func(chs ...string) engine.IngestResult {
		t.Helper()
		ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: now, APIVersion: "1", Body: []byte(`{}`), Channels: chs}
		res, err := s.AppendEvent(ctx, engine.NewEvent{Event: ev})
		if err != nil {
			t.Fatalf("AppendEvent: %v", err)
		}
		return res
	}
	ingest() // reads the tenant's endpoints: the next ones may take the cached path
	for _, tt := range []struct {
		channels []string
		want     []string
	}{
		{[]string{"a"}, []string{plain, filtered.ID}},
		{[]string{"b"}, []string{plain}},
		{nil, []string{plain}},
	} {
		before := s.cachedIngests.Load()
		res := ingest(tt.channels...)
		if s.cachedIngests.Load() != before+1 {
			t.Errorf("an event on %q did not take the one-round-trip path", tt.channels)
		}
		var got []string
		for _, d := range res.Deliveries {
			got = append(got, d.EndpointID)
		}
		slices.Sort(got)
		if want := slices.Sorted(slices.Values(tt.want)); !slices.Equal(got, want) {
			t.Errorf("event on %q: deliveries to %v, want %v", tt.channels, got, want)
		}
		ev, ds, err := s.Event(ctx, "acme", res.Event.ID)
		if err != nil || !slices.Equal(ev.Channels, tt.channels) || len(ds) != len(tt.want) {
			t.Fatalf("event on %q as stored: channels %q, %d deliveries, %v", tt.channels, ev.Channels, len(ds), err)
		}
		for _, d := range ds {
			if !slices.Equal(d.Channels, tt.channels) {
				t.Errorf("event on %q: delivery %s stored with channels %q", tt.channels, d.ID, d.Channels)
			}
		}
	}
}

// TestEnqueueTx_Channels: an event enqueued in an application's
// transaction keeps its channels, and a repeat of its key with other
// channels is a conflict, as on the HTTP route.
func TestEnqueueTx_Channels(t *testing.T) {
	a := newEnqueueApp(t)
	ctx := context.Background()
	in := engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{}`), Channels: []string{"project_1"}, IdempotencyKey: "k"}
	tx, err := a.conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := EnqueueTx(ctx, tx, "acme", in, a.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	ev, _, err := a.s.Event(ctx, "acme", res.Event.ID)
	if err != nil || !slices.Equal(ev.Channels, in.Channels) {
		t.Fatalf("enqueued event: channels %q, %v; want %q", ev.Channels, err, in.Channels)
	}
	in.Channels = []string{"project_2"}
	if _, err := a.svc.Ingest(ctx, "acme", in); engine.ErrorCode(err) != engine.CodeIdempotencyConflict {
		t.Errorf("the key again on other channels: %v, want %s", err, engine.CodeIdempotencyConflict)
	}
}
