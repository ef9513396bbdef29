package storage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// recordingSink is an ExportSink that keeps what it is given.
type recordingSink struct {
	tenants     []engine.Tenant
	deleted     map[string]time.Time
	sequences   map[string]uint64
	types       []engine.EventType
	endpoints   []engine.Endpoint
	tokens      map[[sha256.Size]byte]engine.AccessToken
	tasks       []engine.Task
	events      []engine.Event
	deliveries  map[string][]engine.Delivery
	idempotency []idemRow
}

type idemRow struct {
	tenant, key, eventID string
	hash                 [sha256.Size]byte
	expires              time.Time
}

func newRecordingSink() *recordingSink {
	return &recordingSink{deleted: map[string]time.Time{}, sequences: map[string]uint64{}, tokens: map[[sha256.Size]byte]engine.AccessToken{}, deliveries: map[string][]engine.Delivery{}}
}

func (r *recordingSink) Tenant(t engine.Tenant) error { r.tenants = append(r.tenants, t); return nil }
func (r *recordingSink) DeletedTenant(id string, at time.Time) error {
	r.deleted[id] = at
	return nil
}
func (r *recordingSink) Sequence(tenant string, last uint64) error {
	r.sequences[tenant] = last
	return nil
}
func (r *recordingSink) EventType(et engine.EventType) error {
	r.types = append(r.types, et)
	return nil
}
func (r *recordingSink) Endpoint(ep engine.Endpoint) error {
	r.endpoints = append(r.endpoints, ep)
	return nil
}
func (r *recordingSink) AccessToken(h [sha256.Size]byte, t engine.AccessToken) error {
	r.tokens[h] = t
	return nil
}
func (r *recordingSink) Task(t engine.Task) error {
	r.tasks = append(r.tasks, t)
	return nil
}
func (r *recordingSink) Event(ev engine.Event, ds []engine.Delivery) error {
	r.events = append(r.events, ev)
	r.deliveries[ev.ID] = ds
	return nil
}
func (r *recordingSink) Idempotency(tenant, key string, hash [sha256.Size]byte, eventID string, expires time.Time) error {
	r.idempotency = append(r.idempotency, idemRow{tenant, key, eventID, hash, expires})
	return nil
}

// TestExport writes a file with a sealed secret, a dead delivery with
// attempts and a replay, a token, an Idempotency-Key and a deleted tenant
// not yet purged, and finds all of it in the export as the DB reads it,
// secrets in plain, events in log order; the file is not changed.
func TestExport(t *testing.T) {
	ctx := context.Background()
	key := bytes.Repeat([]byte{7}, SecretKeySize)
	path := filepath.Join(t.TempDir(), "webhookd.db")
	db, err := Open(path, Options{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustTenant(t, db, "acme")
	mustTenant(t, db, "gone")
	mustEventType(t, db, "order.created")
	ep := mustEndpoint(t, db, "acme", "order.created")
	if _, err := db.UpdateEndpoint(context.Background(), "acme", ep.ID, func(e *engine.Endpoint) error {
		*e = engine.RecordSecretReveal(*e, engine.SecretReveal{At: t0, By: "admin"})                 // exported with the endpoint
		e.Headers = engine.CustomHeaders{{Name: "Authorization", Value: "Bearer exported-in-plain"}} // sealed here, given in plain
		e.RateLimit = engine.RateLimit{PerSecond: 2.5, Burst: 4}                                     // and so is this
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mustEndpoint(t, db, "gone", "order.created")
	var ids []string
	for i := range 3 {
		in := newEvent("acme", "order.created", `{"n":`+string(rune('0'+i))+`}`)
		if i == 1 {
			in.IdempotencyKey, in.RequestHash, in.IdempotencyExpires = "k-1", sha256.Sum256([]byte("req")), t0.Add(24*time.Hour)
		}
		ids = append(ids, mustAppend(t, db, in).Event.ID)
	}
	mustAppend(t, db, newEvent("gone", "order.created", `{}`))
	_, ds, err := db.Event(ctx, "acme", ids[0])
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.UpdateDelivery(ctx, ds[0].ID, func(d engine.Delivery) (engine.Delivery, error) {
		d.State, d.NextAttemptAt, d.DeadAt, d.Reason = engine.StateDead, time.Time{}, t0.Add(time.Hour), "gave up"
		d.Attempts = []engine.Attempt{{Cycle: 1, Number: 1, Start: t0, Duration: time.Second, Status: 500, Outcome: engine.OutcomeRetry, Response: "oops"}}
		d.Replays = []engine.Replay{{At: t0.Add(time.Minute), By: "tok_1", Cycle: 1}}
		return d, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	hash := sha256.Sum256([]byte("whk_tok"))
	tok := engine.AccessToken{ID: "tok_1", TenantID: "acme", Environment: engine.EnvironmentLive, Created: t0, Expires: t0.Add(time.Hour)}
	if err := db.CreateAccessToken(ctx, hash, tok); err != nil {
		t.Fatal(err)
	}
	running := sampleTask
	running.State, running.Finished, running.Error = engine.TaskRunning, time.Time{}, ""
	purge := engine.Task{ID: engine.NewID("task"), Kind: engine.TaskPurge, State: engine.TaskRunning, Params: engine.TaskParams{Tenant: "gone"},
		Started: t0, Updated: t0, Errors: []engine.TaskError{}}
	for _, tk := range []engine.Task{running, purge} {
		if err := db.CreateTask(ctx, tk, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.DeleteTenant(ctx, "gone", t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}

	// While the DB is open, the file is in use.
	if _, err := Export(path, Options{SecretKey: key, LockTimeout: 50 * time.Millisecond}, newRecordingSink()); !errors.Is(err, ErrInUse) {
		t.Fatalf("Export of an open file: %v, want ErrInUse", err)
	}
	wantTenants, _ := db.Tenants(ctx)
	wantEndpoints, _ := db.Endpoints(ctx, "acme")
	wantEvents := map[string][]engine.Delivery{}
	var wantLog []engine.Event
	for _, id := range ids {
		ev, ds, err := db.Event(ctx, "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		wantEvents[id] = ds
		wantLog = append(wantLog, ev)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)

	for _, k := range [][]byte{nil, bytes.Repeat([]byte{8}, SecretKeySize)} {
		if _, err := Export(path, Options{SecretKey: k}, newRecordingSink()); !errors.Is(err, ErrSecretKeyRequired) && !errors.Is(err, ErrSecretKeyMismatch) {
			t.Errorf("Export with key %x…: %v, want the key refused", k[:min(len(k), 2)], err)
		}
	}
	sink := newRecordingSink()
	n, err := Export(path, Options{SecretKey: key}, sink)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ExportCounts{Tenants: 1, DeletedTenants: 1, EventTypes: 1, Endpoints: 1, AccessTokens: 1, Events: 4, Deliveries: 4, IdempotencyKeys: 1, Tasks: 2}); n != want {
		t.Errorf("counts %+v, want %+v", n, want)
	}
	if !reflect.DeepEqual(sink.tenants, wantTenants) {
		t.Errorf("tenants %+v, want %+v", sink.tenants, wantTenants)
	}
	if at, ok := sink.deleted["gone"]; !ok || !at.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("deleted tenants %v", sink.deleted)
	}
	if want := map[string]uint64{"acme": 3, "gone": 1}; !reflect.DeepEqual(sink.sequences, want) {
		t.Errorf("sequences %v, want %v", sink.sequences, want)
	}
	if !reflect.DeepEqual(sink.endpoints, wantEndpoints) || sink.endpoints[0].Secrets[0].Key != ep.Secrets[0].Key ||
		len(sink.endpoints[0].Headers) != 1 || sink.endpoints[0].Headers[0].Value != "Bearer exported-in-plain" || sink.endpoints[0].RateLimit.IsZero() {
		t.Errorf("endpoints %+v, want %+v with its secret in plain", sink.endpoints, wantEndpoints)
	}
	if want := []engine.Task{running, purge}; !reflect.DeepEqual(sink.tasks, want) {
		t.Errorf("tasks %+v, want %+v, running as they were", sink.tasks, want)
	}
	if got := sink.tokens[hash]; !reflect.DeepEqual(got, tok) {
		t.Errorf("token %+v, want %+v", got, tok)
	}
	if got := sink.events[:3]; !reflect.DeepEqual(got, wantLog) {
		t.Errorf("events %+v, want %+v (log order, seq kept)", got, wantLog)
	}
	if sink.events[3].TenantID != "gone" {
		t.Errorf("the deleted tenant's event is not last: %+v", sink.events[3])
	}
	for id, want := range wantEvents {
		if got := sink.deliveries[id]; !reflect.DeepEqual(got, want) {
			t.Errorf("deliveries of %s: %+v, want %+v", id, got, want)
		}
	}
	wantIdem := []idemRow{{"acme", "k-1", ids[1], sha256.Sum256([]byte("req")), t0.Add(24 * time.Hour)}}
	if !reflect.DeepEqual(sink.idempotency, wantIdem) {
		t.Errorf("idempotency %+v, want %+v", sink.idempotency, wantIdem)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("Export changed the file")
	}

	stop := errors.New("stop")
	if _, err := Export(path, Options{SecretKey: key}, failingSink{newRecordingSink(), stop}); !errors.Is(err, stop) {
		t.Errorf("Export with a failing sink: %v, want its error", err)
	}
}

// failingSink fails at the first event.
type failingSink struct {
	*recordingSink
	err error
}

func (f failingSink) Event(engine.Event, []engine.Delivery) error { return f.err }
