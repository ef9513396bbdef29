package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/storage"
)

func TestEndpoint_ListensTo(t *testing.T) {
	tests := []struct {
		endpoint, event []string
		want            bool
	}{
		{nil, nil, true},
		{nil, []string{"a"}, true},
		{[]string{}, []string{"a", "b"}, true},
		{[]string{"a"}, []string{"a"}, true},
		{[]string{"a"}, []string{"b", "a"}, true},
		{[]string{"a", "b"}, []string{"b"}, true},
		{[]string{"a"}, nil, false}, // Svix: an event on no channel skips filtered endpoints
		{[]string{"a"}, []string{"b"}, false},
		{[]string{"a"}, []string{"A"}, false}, // case counts
	}
	for _, tt := range tests {
		ep := engine.Endpoint{Channels: tt.endpoint}
		if got := ep.ListensTo(tt.event); got != tt.want {
			t.Errorf("endpoint %q, event %q: ListensTo = %v, want %v", tt.endpoint, tt.event, got, tt.want)
		}
	}
}

// TestNewDeliveries_Channels: a delivery is made where the type and the
// channels both match, and carries its event's channels.
func TestNewDeliveries_Channels(t *testing.T) {
	eps := []engine.Endpoint{
		{ID: "ep_a", EventTypes: []string{"*"}, Channels: []string{"a"}},
		{ID: "ep_b", EventTypes: []string{"*"}, Channels: []string{"b"}},
		{ID: "ep_all", EventTypes: []string{"*"}},
		{ID: "ep_a_other_type", EventTypes: []string{"order.shipped"}, Channels: []string{"a"}},
		{ID: "ep_b_disabled", EventTypes: []string{"order.created"}, Channels: []string{"b", "c"}, Disabled: true},
	}
	tests := []struct {
		channels []string
		want     []string // endpoint IDs, sorted
	}{
		{nil, []string{"ep_all"}},
		{[]string{"a"}, []string{"ep_a", "ep_all"}},
		{[]string{"a", "b"}, []string{"ep_a", "ep_all", "ep_b", "ep_b_disabled"}},
		{[]string{"c"}, []string{"ep_all", "ep_b_disabled"}},
		{[]string{"z"}, []string{"ep_all"}},
	}
	for _, tt := range tests {
		ev := engine.Event{ID: "evt_1", TenantID: "acme", Type: "order.created", Created: time.Unix(1, 0).UTC(), Channels: tt.channels}
		n := 0
		ds := engine.NewDeliveries(ev, "", eps, func(p string) string { n++; return p + "_" + string(rune('a'+n)) })
		var got []string
		for _, d := range ds {
			got = append(got, d.EndpointID)
			if !slices.Equal(d.Channels, tt.channels) {
				t.Errorf("event %q: delivery to %s has channels %q", tt.channels, d.EndpointID, d.Channels)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("event on %q: deliveries to %q, want %q", tt.channels, got, tt.want)
		}
	}
}

func TestValidateChannels(t *testing.T) {
	long := strings.Repeat("x", engine.MaxChannelLen)
	eleven := make([]string, engine.MaxChannels+1)
	for i := range eleven {
		eleven[i] = "c" + string(rune('a'+i))
	}
	tests := []struct {
		channels  []string
		wantField string // "": valid
	}{
		{nil, ""},
		{[]string{}, ""},
		{[]string{"project_123", "Project-1.2", "_leading", "-", long}, ""},
		{eleven[:engine.MaxChannels], ""},
		{eleven, "channels"},
		{[]string{"ok", ""}, "channels[1]"},
		{[]string{"ok", "ok2", "with space"}, "channels[2]"},
		{[]string{long + "x"}, "channels[0]"},
		{[]string{"é"}, "channels[0]"},
		{[]string{"a/b"}, "channels[0]"},
		{[]string{"a", "b", "a"}, "channels[2]"},
	}
	for _, tt := range tests {
		err := engine.ValidateChannels("channels", tt.channels)
		if tt.wantField == "" {
			if err != nil {
				t.Errorf("ValidateChannels(%q) = %v, want nil", tt.channels, err)
			}
			continue
		}
		if engine.ErrorCode(err) != engine.CodeInvalidField || errorField(err) != tt.wantField {
			t.Errorf("ValidateChannels(%q) = %v (field %q), want invalid_field naming %s", tt.channels, err, errorField(err), tt.wantField)
		}
	}
}

// TestPrepareEvent_ChannelsHash: the idempotency hash covers the
// channels as a set, and a request without channels hashes as before
// channels existed.
func TestPrepareEvent_ChannelsHash(t *testing.T) {
	hash := func(in engine.IngestInput) [32]byte {
		t.Helper()
		in.Type, in.Data = "order.created", json.RawMessage(`{"a":1}`)
		ne, err := engine.PrepareEvent("acme", in, engine.IngestOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ne.RequestHash
	}
	none := hash(engine.IngestInput{})
	if hash(engine.IngestInput{Channels: []string{}}) != none {
		t.Error("channels [] hash unlike no channels")
	}
	ab := hash(engine.IngestInput{Channels: []string{"a", "b"}})
	if ab == none {
		t.Error("channels [a b] hash like none")
	}
	if hash(engine.IngestInput{Channels: []string{"b", "a"}}) != ab {
		t.Error("channels [b a] hash unlike [a b]: they are a set")
	}
	if hash(engine.IngestInput{Channels: []string{"a"}}) == ab {
		t.Error("channels [a] hash like [a b]")
	}
	if hash(engine.IngestInput{Channels: []string{"k"}}) == hash(engine.IngestInput{OrderingKey: "k"}) {
		t.Error("channel k hashes like ordering key k")
	}
	if hash(engine.IngestInput{Channels: []string{"ab"}}) == ab {
		t.Error("channel ab hashes like channels a, b")
	}
}

// TestService_IngestChannels: ingest keeps the event's channels out of
// the envelope, refuses bad ones naming the channel, fans out by them,
// and a retry with other channels is an idempotency conflict.
func TestService_IngestChannels(t *testing.T) {
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
	if _, _, err := svc.PutEventType(ctx, "invoice.paid", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	create := func(chs []string) engine.Endpoint {
		t.Helper()
		ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/x", EventTypes: []string{"*"}, Channels: chs})
		if err != nil {
			t.Fatal(err)
		}
		return ep
	}
	a, all := create([]string{"a"}), create([]string{})
	if a.Channels == nil || all.Channels != nil {
		t.Fatalf("created endpoints with channels %q and %q, want [a] and nil", a.Channels, all.Channels)
	}
	if _, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/x", EventTypes: []string{"*"}, Channels: []string{"a", "a"}}); errorField(err) != "channels[1]" {
		t.Errorf("an endpoint with a channel twice: %v, want channels[1] refused", err)
	}

	in := engine.IngestInput{Type: "invoice.paid", Data: json.RawMessage(`{}`), Channels: []string{"a", "x"}, IdempotencyKey: "k1"}
	res, err := svc.Ingest(ctx, "acme", in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Event.Channels, in.Channels) || strings.Contains(string(res.Event.Body), "channels") {
		t.Errorf("stored event: channels %q, body %s; want [a x], not in the body", res.Event.Channels, res.Event.Body)
	}
	if len(res.Deliveries) != 2 {
		t.Errorf("event on [a x]: %d deliveries, want 2 (a's and the unfiltered one's)", len(res.Deliveries))
	}

	in.Channels = []string{"x", "a"}
	if dup, err := svc.Ingest(ctx, "acme", in); err != nil || !dup.Duplicate || dup.Event.ID != res.Event.ID {
		t.Errorf("the retry with its channels reordered: %+v, %v; want the duplicate", dup, err)
	}
	for _, chs := range [][]string{nil, {"a"}, {"a", "x", "y"}} {
		in.Channels = chs
		if _, err := svc.Ingest(ctx, "acme", in); engine.ErrorCode(err) != engine.CodeIdempotencyConflict {
			t.Errorf("the retry on channels %q: %v, want an idempotency conflict", chs, err)
		}
	}

	_, err = svc.Ingest(ctx, "acme", engine.IngestInput{Type: "invoice.paid", Data: json.RawMessage(`{}`), Channels: []string{"ok", "not ok"}})
	if engine.ErrorCode(err) != engine.CodeInvalidField || errorField(err) != "channels[1]" {
		t.Errorf("ingest on a bad channel: %v, want invalid_field channels[1]", err)
	}

	up, err := svc.UpdateEndpoint(ctx, "acme", all.ID, engine.EndpointPatch{Channels: &[]string{"b"}})
	if err != nil || !slices.Equal(up.Channels, []string{"b"}) {
		t.Fatalf("patch channels [b]: %q, %v", up.Channels, err)
	}
	if _, err := svc.UpdateEndpoint(ctx, "acme", all.ID, engine.EndpointPatch{Channels: &[]string{"b", "c d"}}); errorField(err) != "channels[1]" {
		t.Errorf("patch with a bad channel: %v, want channels[1] refused", err)
	}
	up, err = svc.UpdateEndpoint(ctx, "acme", all.ID, engine.EndpointPatch{Channels: &[]string{}})
	if err != nil || up.Channels != nil {
		t.Fatalf("patch channels []: %q, %v; want none", up.Channels, err)
	}

	if _, _, err := svc.ListDeliveries(ctx, "acme", engine.DeliveryFilter{Channel: "no such"}); errorField(err) != "channel" {
		t.Errorf("listing deliveries by a bad channel: %v, want channel refused", err)
	}
	if _, _, err := svc.ListEvents(ctx, "acme", engine.EventFilter{Channel: "a/b"}); errorField(err) != "channel" {
		t.Errorf("listing events by a bad channel: %v, want channel refused", err)
	}
}

// errorField is the field an *engine.Error names ("" for another error).
func errorField(err error) string {
	if e, ok := errors.AsType[*engine.Error](err); ok {
		return e.Field
	}
	return ""
}
