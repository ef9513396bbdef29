package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres"
	"github.com/webhookd/webhookd/postgres/pgtest"
	"github.com/webhookd/webhookd/storage"
)

// migrateT0 is the clock of the migration's source file.
var migrateT0 = time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)

// source is what a bbolt file holds, as the bbolt store reads it back.
type source struct {
	tenants   []engine.Tenant
	types     []engine.EventType
	endpoints map[string][]engine.Endpoint
	events    map[string][]engine.Event // per tenant, in log order
	dlvs      map[string][]engine.Delivery
	tokens    map[[sha256.Size]byte]engine.AccessToken
	idem      []engine.NewEvent // ingests with an Idempotency-Key
	pending   []string          // IDs of the pending deliveries
	tasks     []engine.Task     // every task, in ID order
}

// writeSource makes a bbolt file at path through the bbolt store, with
// secrets sealed with key: tenants, a deleted tenant not yet purged,
// endpoints (one filtering on channels), the operator's tenant with its
// operational endpoints and an event, events (some on channels) with
// deliveries in every state (pending, with and
// without attempts; succeeded; dead with attempts and a replay; paused),
// access tokens (one revoked), Idempotency-Keys, tasks (running and
// finished, a tenant's and the operator's), and an endpoint made
// after the events and backfilled.
func writeSource(t *testing.T, path string, key []byte) source {
	t.Helper()
	ctx := context.Background()
	db, err := storage.Open(path, storage.Options{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"acme", "beta", "gone"} {
		tn := engine.Tenant{ID: id, Name: "Tenant " + id, Created: migrateT0, Updated: migrateT0}
		if id == "beta" {
			tn.RetryPolicy = "extended" // its deliveries follow it
		}
		_, _, err := db.PutTenant(ctx, tn)
		must(err)
	}
	for _, name := range []string{"order.created", "invoice.paid"} {
		et := engine.EventType{Name: name, Description: "d " + name, Created: migrateT0, Updated: migrateT0}
		if name == "invoice.paid" { // a schema and a status travel with their type
			et.Status, et.Schema, et.Example = engine.EventTypeDeprecated, []byte(`{"type":"object","required":["id"]}`), []byte(`{"id":"in_1"}`)
		}
		_, _, err := db.PutEventType(ctx, et)
		must(err)
	}
	for i, tenant := range []string{"acme", "acme", "beta", "gone"} {
		ep := engine.Endpoint{
			ID: engine.NewID("ep"), TenantID: tenant, URL: fmt.Sprintf("https://example.com/hook/%d", i),
			EventTypes: []string{"order.created"}, Created: migrateT0, Updated: migrateT0,
			Secrets:       []engine.Secret{{Key: engine.NewSecret()}, {Key: engine.NewSecret(), Expires: migrateT0.Add(time.Hour)}},
			SecretReveals: []engine.SecretReveal{{At: migrateT0.Add(time.Duration(i) * time.Minute), By: "admin"}},
		}
		if i == 1 {
			ep.Channels = []string{"project_1", "b"}                  // receives the events on either
			ep.RetryPolicy = "nightly-long"                           // its deliveries follow it
			ep.RateLimit = engine.RateLimit{PerSecond: 2.5, Burst: 4} // migrated like every other field
			ep.SendTraceparent = true
		}
		if i%2 == 0 { // custom headers, sealed like the secrets: they travel in plain and are sealed again
			ep.Headers = engine.CustomHeaders{{Name: "Authorization", Value: fmt.Sprintf("Bearer migrated-%d-0123456789", i)}, {Name: "X-Tenant", Value: tenant}}
		}
		must(db.CreateEndpoint(ctx, ep, 0))
	}
	// The operator's tenant, its operational endpoints (one from the
	// API, one [alerts] endpoint stored before sources were) and one of
	// its events, of a type in no catalogue.
	_, _, err = db.PutTenant(ctx, engine.Tenant{ID: engine.OperatorTenant, Name: "webhookd operator", Created: migrateT0, Updated: migrateT0})
	must(err)
	for _, source := range []engine.EndpointSource{engine.SourceAPI, ""} {
		must(db.CreateEndpoint(ctx, engine.Endpoint{
			ID: engine.NewID("ep"), TenantID: engine.OperatorTenant, URL: "https://ops.example.com/" + string(source),
			EventTypes: []string{"*"}, Created: migrateT0, Updated: migrateT0, Source: source,
			Secrets: []engine.Secret{{Key: engine.NewSecret()}},
		}, 0))
	}
	_, err = db.AppendEvent(ctx, engine.NewEvent{Event: engine.Event{
		ID: engine.NewID("evt"), TenantID: engine.OperatorTenant, Type: engine.OpEndpointCreated, Created: migrateT0,
		APIVersion: "2030-01-01", Body: []byte(`{"type":"endpoint.created","data":{"tenant":"acme"}}`), OrderingKey: "order-1",
	}})
	must(err)
	var ingests []engine.NewEvent
	for i := range 8 {
		tenant := []string{"acme", "beta"}[i%2]
		if i == 7 {
			tenant = "gone"
		}
		in := engine.NewEvent{Event: engine.Event{
			ID: engine.NewID("evt"), TenantID: tenant, Type: "order.created", Created: migrateT0.Add(time.Duration(i) * time.Millisecond),
			APIVersion: "2030-01-01", Body: []byte(fmt.Sprintf("{\"n\": %d,\n \"raw\":\"\\u00e9\"}\n", i)),
		}}
		in.Event.OrderingKey = "order-1" // each delivery names the previous one at its endpoint
		if i%4 == 0 {
			in.Event.Channels = []string{"project_1"} // to both of acme's endpoints
		}
		if i == 4 {
			in.Event.DeliverAt = migrateT0.Add(2 * time.Hour) // scheduled: its deliveries carry it too
		}
		if i%2 == 0 { // traced: its attempts' spans link to its ingest's, after the migration too
			in.Event.IngestTrace = fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)
		}
		if i%3 == 0 {
			in.IdempotencyKey = fmt.Sprintf("key-%d", i)
			in.RequestHash = sha256.Sum256([]byte(in.IdempotencyKey))
			in.IdempotencyExpires = migrateT0.Add(24 * time.Hour)
		}
		res, err := db.AppendEvent(ctx, in)
		must(err)
		if in.IdempotencyKey != "" && tenant != "gone" {
			ingests = append(ingests, in)
		}
		// The deliveries through every state.
		for j, d := range res.Deliveries {
			var fn func(engine.Delivery) engine.Delivery
			switch (i + j) % 5 {
			case 1: // retried, pending again
				fn = func(d engine.Delivery) engine.Delivery {
					return engine.RecordAttempt(d, attemptRecord(d, engine.StatePending, 503, migrateT0.Add(time.Hour)))
				}
			case 2:
				fn = func(d engine.Delivery) engine.Delivery {
					return engine.RecordAttempt(d, attemptRecord(d, engine.StateSucceeded, 200, time.Time{}))
				}
			case 3: // dead, replayed and dead again
				fn = func(d engine.Delivery) engine.Delivery {
					d = engine.RecordAttempt(d, attemptRecord(d, engine.StateDead, 410, time.Time{}))
					d.Replays = append(d.Replays, engine.Replay{At: migrateT0.Add(time.Minute), By: "tok_x", Cycle: 2})
					d.Cycle, d.State, d.NextAttemptAt, d.DeadAt = 2, engine.StatePending, migrateT0.Add(time.Minute), time.Time{}
					return engine.RecordAttempt(d, attemptRecord(d, engine.StateDead, 410, time.Time{}))
				}
			case 4:
				fn = func(d engine.Delivery) engine.Delivery {
					d.State, d.NextAttemptAt, d.Reason = engine.StatePaused, time.Time{}, engine.ReasonPaused
					return d
				}
			}
			if fn != nil {
				_, err := db.UpdateDelivery(ctx, d.ID, func(d engine.Delivery) (engine.Delivery, error) { return fn(d), nil })
				must(err)
			}
		}
	}
	// An endpoint of acme's made after the events, backfilled: its
	// deliveries record the backfill.
	late := engine.Endpoint{
		ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/hook/late",
		EventTypes: []string{"order.created"}, Created: migrateT0, Updated: migrateT0,
		Secrets: []engine.Secret{{Key: engine.NewSecret()}},
	}
	must(db.CreateEndpoint(ctx, late, 0))
	bf, err := db.Backfill(ctx, engine.BackfillStep{Tenant: "acme", EndpointID: late.ID, Since: migrateT0, Until: migrateT0.Add(time.Hour),
		Scan: 100, Max: 100, At: migrateT0.Add(2 * time.Minute), By: "token tok_x"})
	must(err)
	if len(bf.Created) == 0 {
		t.Fatal("the backfill of the late endpoint made no delivery")
	}
	for i, tenant := range []string{"acme", "beta"} {
		tok := engine.AccessToken{ID: engine.NewID("tok"), TenantID: tenant, Environment: engine.EnvironmentLive, Created: migrateT0, Expires: migrateT0.Add(24 * time.Hour)}
		hash := sha256.Sum256([]byte("whk_" + tenant))
		must(db.CreateAccessToken(ctx, hash, tok))
		if i == 1 {
			_, _, err := db.RevokeAccessToken(ctx, tenant, tok.ID, migrateT0.Add(time.Minute))
			must(err)
		}
	}
	// Tasks: a running backfill part way (its cursor and lease), a
	// finished replay, and the operator's purge of gone, running.
	total := 3
	tasks := []engine.Task{
		{ID: engine.NewID("task"), Tenant: "acme", Kind: engine.TaskBackfill, State: engine.TaskRunning,
			Params: engine.TaskParams{Since: migrateT0, Until: migrateT0.Add(time.Hour), Endpoint: late.ID}, Done: 4, Skipped: 1,
			Errors: []engine.TaskError{{At: migrateT0.Add(time.Second), Message: "storage cannot write now; retry later"}},
			By:     "admin", Started: migrateT0, Updated: migrateT0.Add(time.Minute), Cursor: "17", Owner: "node_x", LeaseUntil: migrateT0.Add(2 * time.Minute)},
		{ID: engine.NewID("task"), Tenant: "beta", Kind: engine.TaskReplay, State: engine.TaskSucceeded,
			Params: engine.TaskParams{Since: migrateT0}, Done: 3, Total: &total, Errors: []engine.TaskError{},
			By: "token tok_x", Started: migrateT0, Updated: migrateT0.Add(time.Minute), Finished: migrateT0.Add(time.Minute)},
		{ID: engine.NewID("task"), Kind: engine.TaskPurge, State: engine.TaskRunning, Params: engine.TaskParams{Tenant: "gone"},
			Errors: []engine.TaskError{}, By: "admin", Started: migrateT0.Add(time.Hour), Updated: migrateT0.Add(time.Hour)},
	}
	for _, tk := range tasks {
		must(db.CreateTask(ctx, tk, 0))
	}
	must(db.DeleteTenant(ctx, "gone", migrateT0.Add(time.Hour)))

	src := source{tasks: tasks, endpoints: map[string][]engine.Endpoint{}, events: map[string][]engine.Event{}, dlvs: map[string][]engine.Delivery{},
		tokens: map[[sha256.Size]byte]engine.AccessToken{}, idem: ingests}
	states := map[engine.State]int{}
	policies := map[engine.RetryPolicyName]int{}
	defer func() {
		for _, s := range []engine.State{engine.StatePending, engine.StateSucceeded, engine.StateDead, engine.StatePaused} {
			if states[s] == 0 {
				t.Fatalf("the source has no %s delivery: %v", s, states)
			}
		}
		for _, p := range []engine.RetryPolicyName{"", "extended", "nightly-long"} {
			if policies[p] == 0 {
				t.Fatalf("the source has no delivery following retry policy %q: %v", p, policies)
			}
		}
	}()
	src.tenants, err = db.Tenants(ctx)
	must(err)
	for _, tn := range src.tenants {
		src.endpoints[tn.ID], err = db.Endpoints(ctx, tn.ID)
		must(err)
		evs, _, err := db.ListEvents(ctx, tn.ID, engine.EventFilter{Limit: 1000})
		must(err)
		for _, ev := range evs {
			ev, ds, err := db.Event(ctx, tn.ID, ev.ID)
			must(err)
			src.events[tn.ID] = append(src.events[tn.ID], ev)
			src.dlvs[ev.ID] = ds
			for _, d := range ds {
				states[d.State]++
				policies[d.RetryPolicy]++
				if d.State == engine.StateDead && (len(d.Attempts) < 2 || len(d.Replays) == 0) {
					t.Fatalf("dead delivery %s without attempts and a replay", d.ID)
				}
				if d.State == engine.StatePending {
					src.pending = append(src.pending, d.ID)
				}
			}
		}
		toks, err := db.AccessTokens(ctx, tn.ID)
		must(err)
		for _, tok := range toks {
			src.tokens[sha256.Sum256([]byte("whk_"+tn.ID))] = tok
		}
	}
	types, err := db.EventTypes(ctx)
	must(err)
	src.types = types
	return src
}

// attemptRecord is an attempt of d now that moves it to state.
func attemptRecord(d engine.Delivery, state engine.State, status int, next time.Time) engine.AttemptRecord {
	at := migrateT0.Add(time.Second)
	outcome := map[engine.State]engine.Outcome{engine.StatePending: engine.OutcomeRetry, engine.StateSucceeded: engine.OutcomeSuccess, engine.StateDead: engine.OutcomePermanent}[state]
	return engine.AttemptRecord{
		DeliveryID: d.ID, Cycle: d.Cycle, At: at, State: state, NextAttemptAt: next, LastStatus: status, Reason: "status " + strconv.Itoa(status),
		Attempt: engine.Attempt{Cycle: d.Cycle, Number: d.CycleAttempts + 1, Start: at, Duration: 3 * time.Millisecond, Status: status, Response: "body\x00 of the response", Outcome: outcome},
	}
}

// runMigrateCmd runs webhookd migrate with env as the environment.
func runMigrateCmd(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var out, errs strings.Builder
	err := run(context.Background(), append([]string{"migrate"}, args...), func(k string) string { return env[k] }, &out, &errs)
	return out.String() + errs.String(), err
}

// migrateEnv returns the test server's URL with a password added (the
// server trusts loopback, so it is not checked: the output must not show
// it), and an environment with key as the secret key.
func migrateEnv(t *testing.T, key []byte) (string, map[string]string) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "hunter2-secret")
	return u.String(), map[string]string{secretKeyEnv: base64.StdEncoding.EncodeToString(key)}
}

// TestMigrate migrates a bbolt file into a schema of its own and reads
// everything back through the PostgreSQL store: equal tenants,
// endpoints with their secrets, events with their bodies and deliveries,
// tokens; the log in its order; an Idempotency-Key still makes a
// duplicate; the deleted tenant is still being purged; a Scheduler claims
// exactly the pending deliveries. Then it refuses to migrate again into
// the same schema, and a file held by a running store.
func TestMigrate(t *testing.T) {
	dbURL, env := migrateEnv(t, bytes.Repeat([]byte{9}, 32))
	key := bytes.Repeat([]byte{9}, 32)
	schema := pgtest.Schema(t)
	path := filepath.Join(t.TempDir(), "webhookd.db")
	src := writeSource(t, path, key)

	out, err := runMigrateCmd(t, env, "-from", "bbolt:"+path, "-to", dbURL, "-schema", schema)
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	t.Logf("migrate:\n%s", out)
	if strings.Contains(out, "hunter2") {
		t.Errorf("the output shows the URL's password:\n%s", out)
	}
	for _, want := range []string{
		"tenants  3  =  3", "deleted tenants (still being purged)  1  =  1", "endpoints  6  =  6",
		"events  9  =  9", "access tokens  2  =  2", "idempotency keys  3  =  3", "tasks  3  =  3", "migration complete",
	} {
		if !strings.Contains(squeeze(out), want) {
			t.Errorf("the output has no %q:\n%s", want, out)
		}
	}

	ctx := context.Background()
	far := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	pg, err := postgres.Open(ctx, dbURL, postgres.Options{Schema: schema, SecretKey: key, Now: func() time.Time { return far }})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if got, err := pg.Tenants(ctx); err != nil || !reflect.DeepEqual(got, src.tenants) {
		t.Errorf("tenants %+v %v, want %+v", got, err, src.tenants)
	}
	if got, err := pg.EventTypes(ctx); err != nil || !reflect.DeepEqual(got, src.types) || got[0].Schema == nil {
		t.Errorf("event types %+v %v, want %+v", got, err, src.types)
	}
	limited := 0
	for tenant, want := range src.endpoints {
		if got, err := pg.Endpoints(ctx, tenant); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("endpoints of %s: %+v %v, want %+v", tenant, got, err, want)
		}
		for _, ep := range want {
			if !ep.RateLimit.IsZero() {
				limited++
			}
		}
	}
	if limited != 1 {
		t.Errorf("the source has %d endpoints with a rate limit, want 1: the migration of rate limits is not tested", limited)
	}
	traced := 0
	for tenant, want := range src.events {
		feed, _, err := pg.ListEvents(ctx, tenant, engine.EventFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(feed) != len(want) {
			t.Fatalf("%s: %d events in the feed, want %d", tenant, len(feed), len(want))
		}
		for i, ev := range want {
			got, ds, err := pg.Event(ctx, tenant, ev.ID)
			if err != nil {
				t.Fatal(err)
			}
			if feed[i].ID != ev.ID {
				t.Errorf("%s: feed[%d] is %s, want %s (log order)", tenant, i, feed[i].ID, ev.ID)
			}
			if !feed[i].DeliverAt.Equal(ev.DeliverAt) {
				t.Errorf("%s: feed[%d] deliver_at %v, want %v", tenant, i, feed[i].DeliverAt, ev.DeliverAt)
			}
			got.Seq = ev.Seq // a new place in the log, in the same order
			if !reflect.DeepEqual(got, ev) {
				t.Errorf("event %+v, want %+v", got, ev)
			}
			if !reflect.DeepEqual(ds, src.dlvs[ev.ID]) {
				t.Errorf("deliveries of %s: %+v, want %+v", ev.ID, ds, src.dlvs[ev.ID])
			}
			if ev.IngestTrace != "" {
				traced++
				for _, d := range ds {
					if in, err := pg.AttemptInput(ctx, d.ID); err != nil || in.IngestTrace != ev.IngestTrace {
						t.Errorf("attempt input of %s: trace %q, %v; want %q", d.ID, in.IngestTrace, err, ev.IngestTrace)
					}
				}
			}
		}
	}
	if traced == 0 {
		t.Error("no event of the source has an ingest trace: the migration of traces is not tested")
	}
	for hash, want := range src.tokens {
		if got, ok, err := pg.AccessTokenByHash(ctx, hash); err != nil || !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("token %x: %+v %v %v, want %+v", hash[:4], got, ok, err, want)
		}
	}
	for _, want := range src.tasks {
		if got, err := pg.Task(ctx, want.ID); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("task %s: %+v %v, want %+v", want.ID, got, err, want)
		}
	}
	for _, in := range src.idem {
		first := in.Event.ID
		in.Event.ID = engine.NewID("evt")
		res, err := pg.AppendEvent(ctx, in)
		if err != nil || !res.Duplicate || res.Event.ID != first {
			t.Errorf("re-ingest with %s: %+v %v, want a duplicate of %s", in.IdempotencyKey, res.Event.ID, err, first)
		}
	}
	if _, _, err := pg.PutTenant(ctx, engine.Tenant{ID: "gone"}); engine.ErrorCode(err) != engine.CodeTenantDeleting {
		t.Errorf("PutTenant of the deleted tenant: %v, want %s", err, engine.CodeTenantDeleting)
	}
	purged := 0
	for range 10 {
		res, err := pg.PurgeDeletedTenants(ctx, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		purged += res.Events
		if res.Done {
			break
		}
	}
	if purged != 1 {
		t.Errorf("the purge of the deleted tenant took %d events, want its 1", purged)
	}

	sched := pg.Scheduler(postgres.SchedulerOptions{Batch: 1000})
	defer sched.Close()
	if _, err := sched.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ws, err := sched.Claim(cctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var claimed []string
	for _, w := range ws {
		claimed = append(claimed, w.DeliveryID)
	}
	slices.Sort(claimed)
	slices.Sort(src.pending)
	if len(src.pending) == 0 || !slices.Equal(claimed, src.pending) {
		t.Errorf("claimed %v, want the pending deliveries %v", claimed, src.pending)
	}

	// Each live tenant numbers its next event where the file left it.
	for _, tn := range src.tenants {
		want := src.events[tn.ID]
		if len(want) == 0 {
			continue
		}
		last := want[len(want)-1]
		res, err := pg.AppendEvent(ctx, engine.NewEvent{Event: engine.Event{ID: engine.NewID("evt"), TenantID: tn.ID, Type: last.Type, Created: far, APIVersion: "v1", Body: []byte(`{}`), OrderingKey: "order-1"}})
		if err != nil {
			t.Fatal(err)
		}
		if last.Sequence == 0 || res.Event.Sequence != last.Sequence+1 {
			t.Errorf("%s's next event after the migration: sequence %d, want %d", tn.ID, res.Event.Sequence, last.Sequence+1)
		}
		// And its key goes on where the file left it, at each endpoint.
		for _, d := range res.Deliveries {
			if d.PreviousSequence != last.Sequence {
				t.Errorf("%s's next event of its key after the migration: delivery to %s has previous sequence %d, want %d", tn.ID, d.EndpointID, d.PreviousSequence, last.Sequence)
			}
		}
	}

	if out, err := runMigrateCmd(t, env, "-from", "bbolt:"+path, "-to", dbURL, "-schema", schema); err == nil || !strings.Contains(err.Error(), "never merges") {
		t.Errorf("a second migrate into the schema: %v\n%s", err, out)
	}

	// A file held by a running store: refused, after [storage] lock_timeout.
	held, err := storage.Open(path, storage.Options{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	cfg := filepath.Join(t.TempDir(), "lock.toml")
	if err := os.WriteFile(cfg, []byte("[storage]\nlock_timeout = \"100ms\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runMigrateCmd(t, env, "-config", cfg, "-from", "bbolt:"+path, "-to", dbURL, "-schema", pgtest.Schema(t)); err == nil || !strings.Contains(err.Error(), "stop webhookd first") {
		t.Errorf("migrate of a file in use: %v\n%s", err, out)
	}
	if _, err := runMigrateCmd(t, env, "-from", path, "-to", dbURL); err == nil || !strings.Contains(err.Error(), "bbolt:PATH") {
		t.Errorf("migrate -from without bbolt: %v", err)
	}
}

// TestMigrate_OrderedLines migrates a bbolt file whose ordered lines
// are under way (a blocking dead head with two deliveries waiting behind
// it; a key's pending head with one waiting) and finds every delivery as
// it was through the PostgreSQL store, which then moves the lines on: a
// skip of the blocking head and the success of the pending one each
// promote the next.
func TestMigrate_OrderedLines(t *testing.T) {
	dbURL, env := migrateEnv(t, nil)
	schema := pgtest.Schema(t)
	path := filepath.Join(t.TempDir(), "webhookd.db")
	ctx := context.Background()
	db, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, _, err = db.PutTenant(ctx, engine.Tenant{ID: "acme", Created: migrateT0, Updated: migrateT0})
	must(err)
	_, _, err = db.PutEventType(ctx, engine.EventType{Name: "order.created", Created: migrateT0, Updated: migrateT0})
	must(err)
	byEndpoint := engine.Endpoint{ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/a", EventTypes: []string{"order.created"},
		Created: migrateT0, Updated: migrateT0, Secrets: []engine.Secret{{Key: engine.NewSecret()}}, Ordering: engine.OrderingEndpoint, OnDead: engine.OnDeadBlock}
	byKey := byEndpoint
	byKey.ID, byKey.URL, byKey.Ordering, byKey.OnDead = engine.NewID("ep"), "https://example.com/b", engine.OrderingKey, engine.OnDeadSkip
	must(db.CreateEndpoint(ctx, byEndpoint, 0))
	must(db.CreateEndpoint(ctx, byKey, 0))
	var line, keyLine []string // the deliveries of each line, in line order
	for i, key := range []string{"a", "a", "b"} {
		res, err := db.AppendEvent(ctx, engine.NewEvent{Event: engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created",
			Created: migrateT0.Add(time.Duration(i) * time.Millisecond), APIVersion: "v1", Body: []byte(`{}`), OrderingKey: key}})
		must(err)
		for _, d := range res.Deliveries {
			if d.EndpointID == byEndpoint.ID {
				line = append(line, d.ID)
			} else if key == "a" {
				keyLine = append(keyLine, d.ID)
			}
		}
	}
	_, err = db.UpdateDelivery(ctx, line[0], func(d engine.Delivery) (engine.Delivery, error) {
		return engine.RecordAttempt(d, attemptRecord(d, engine.StateDead, 410, time.Time{})), nil
	})
	must(err)
	want, err := db.RecentEvents(ctx, "acme", 10)
	must(err)
	must(db.Close())

	if out, err := runMigrateCmd(t, env, "-from", "bbolt:"+path, "-to", dbURL, "-schema", schema); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	pg, err := postgres.Open(ctx, dbURL, postgres.Options{Schema: schema})
	must(err)
	defer pg.Close()
	got, err := pg.RecentEvents(ctx, "acme", 10)
	must(err)
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	waiting := 0
	for i := range want {
		if !reflect.DeepEqual(got[i].Deliveries, want[i].Deliveries) {
			t.Errorf("deliveries of %s: %+v, want %+v", want[i].Event.ID, got[i].Deliveries, want[i].Deliveries)
		}
		for _, d := range want[i].Deliveries {
			if d.State == engine.StateWaiting {
				waiting++
			}
		}
	}
	if waiting != 3 {
		t.Fatalf("the source has %d waiting deliveries, want 3", waiting)
	}

	at := time.Now().UTC()
	if _, err := pg.UpdateDelivery(ctx, line[0], func(d engine.Delivery) (engine.Delivery, error) {
		return engine.SkipDelivery(d, engine.Skip{At: at, By: "admin"})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.UpdateDelivery(ctx, keyLine[0], func(d engine.Delivery) (engine.Delivery, error) {
		return engine.RecordAttempt(d, attemptRecord(d, engine.StateSucceeded, 200, time.Time{})), nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct{ endpoint, line, head, behind string }{
		{byEndpoint.ID, engine.LineEndpoint, line[1], line[2]},
		{byKey.ID, engine.LineKeyPrefix + "a", keyLine[1], ""},
	} {
		head, ok, err := pg.LineHead(ctx, l.endpoint, l.line)
		if err != nil || !ok || head.ID != l.head || head.State != engine.StatePending {
			t.Errorf("head of %s: %s %s %v %v, want %s pending", l.line, head.ID, head.State, ok, err, l.head)
		}
		if l.behind == "" {
			continue
		}
		if d, err := pg.Delivery(ctx, "acme", l.behind); err != nil || d.State != engine.StateWaiting || d.WaitingBehind != l.head {
			t.Errorf("delivery %s: %s behind %q %v, want waiting behind %s", l.behind, d.State, d.WaitingBehind, err, l.head)
		}
	}
}

// TestMigrate_RefusesWhatIngestRefuses: an event in the file whose
// data ingest refuses today (a name twice, written by a webhookd that
// did not check) stops the migration with ingest's code, naming the
// event; the schema is not marked complete, so no node starts on it.
func TestMigrate_RefusesWhatIngestRefuses(t *testing.T) {
	dbURL, env := migrateEnv(t, nil)
	schema := pgtest.Schema(t)
	path := filepath.Join(t.TempDir(), "webhookd.db")
	ctx := context.Background()
	db := openAcmeSource(t, path)
	bad := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: migrateT0, Body: []byte(`{"data":{"a":1,"a":2}}`)}
	if _, err := db.AppendEvent(ctx, engine.NewEvent{Event: bad}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := runMigrateCmd(t, env, "-from", "bbolt:"+path, "-to", dbURL, "-schema", schema)
	if engine.ErrorCode(err) != engine.CodeInvalidJSON || !strings.Contains(err.Error(), bad.ID) || !strings.Contains(err.Error(), `duplicate name "a"`) {
		t.Fatalf("migrate: %v, want invalid_json naming %s\n%s", err, bad.ID, out)
	}
	if node, err := postgres.Open(ctx, dbURL, postgres.Options{Schema: schema}); err == nil {
		node.Close()
		t.Error("a node opens the schema of a refused migration")
	}

	// With -keep-refused the same file migrates, the event copied as it
	// is stored and named in the output: nothing acknowledged is lost.
	out, err = runMigrateCmd(t, env, "-from", "bbolt:"+path, "-to", dbURL, "-schema", schema, "-keep-refused")
	if err != nil {
		t.Fatalf("migrate -keep-refused: %v\n%s", err, out)
	}
	if !strings.Contains(out, "kept event "+bad.ID) || !strings.Contains(out, "migration complete") {
		t.Errorf("migrate -keep-refused says:\n%s", out)
	}
	node, err := postgres.Open(ctx, dbURL, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	got, _, err := node.Event(ctx, "acme", bad.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Body) != string(bad.Body) {
		t.Errorf("kept event's body %s, want %s as stored", got.Body, bad.Body)
	}
}

// openAcmeSource opens a new bbolt file at path through the bbolt store,
// with tenant acme and event type order.created; the caller closes it.
func openAcmeSource(t *testing.T, path string) *storage.DB {
	t.Helper()
	ctx := context.Background()
	db, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.PutTenant(ctx, engine.Tenant{ID: "acme", Created: migrateT0}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.PutEventType(ctx, engine.EventType{Name: "order.created", Created: migrateT0}); err != nil {
		t.Fatal(err)
	}
	return db
}

// squeeze collapses runs of spaces to two, as the output's columns are
// padded.
func squeeze(s string) string {
	for strings.Contains(s, "   ") {
		s = strings.ReplaceAll(s, "   ", "  ")
	}
	return s
}

// TestMigrate_Volume migrates a file of many 1 KiB events, each with
// two deliveries (WEBHOOKD_MIGRATE_EVENTS of them; 2 500 by default, 300
// with -short: more than one batch), and logs how long it took.
func TestMigrate_Volume(t *testing.T) {
	n := 2500
	if testing.Short() {
		n = 300
	}
	if v := os.Getenv("WEBHOOKD_MIGRATE_EVENTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("WEBHOOKD_MIGRATE_EVENTS: %v", err)
		}
	}
	dbURL, env := migrateEnv(t, nil)
	path := filepath.Join(t.TempDir(), "webhookd.db")
	ctx := context.Background()
	db := openAcmeSource(t, path)
	for range 2 {
		ep := engine.Endpoint{ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/", Created: migrateT0, Secrets: []engine.Secret{{Key: engine.NewSecret()}}}
		if err := db.CreateEndpoint(ctx, ep, 0); err != nil {
			t.Fatal(err)
		}
	}
	body := []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 32 {
				ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: migrateT0, Body: body}
				if _, err := db.AppendEvent(ctx, engine.NewEvent{Event: ev}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d events to bbolt in %s", n, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	out, err := runMigrateCmd(t, env, "-from", "bbolt:"+path, "-to", dbURL, "-schema", pgtest.Schema(t))
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	took := time.Since(start)
	if want := fmt.Sprintf("events  %d  =  %d", n, n); !strings.Contains(squeeze(out), want) {
		t.Errorf("the output has no %q:\n%s", want, out)
	}
	t.Logf("migrated %d events (%d deliveries) in %s: %.0f events/s", n, 2*n, took.Round(time.Millisecond), float64(n)/took.Seconds())
}

// TestMigrate_RefusesOwedFanOuts: a file that a kill left with an
// event's fan-out owed (its deliveries not written yet) is refused, and
// the refusal gives the operator the commands that fix it: start
// webhookd on the file once, stop it, run the same migrate again. After
// a start and a stop, the same command migrates it, the deliveries
// included.
func TestMigrate_RefusesOwedFanOuts(t *testing.T) {
	dbURL, env := migrateEnv(t, nil)
	schema := pgtest.Schema(t)
	path := filepath.Join(t.TempDir(), "webhookd.db")
	ctx := context.Background()
	db := openAcmeSource(t, path)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := storage.Open(path, storage.Options{OwedFanOutAbove: -1}) // every fan-out owed
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := db.CreateEndpoint(ctx, engine.Endpoint{
			ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/hook", EventTypes: []string{"*"},
			Created: migrateT0, Updated: migrateT0, Secrets: []engine.Secret{{Key: engine.NewSecret()}},
		}, 0); err != nil {
			t.Fatal(err)
		}
	}
	res, err := db.AppendEvent(ctx, engine.NewEvent{Event: engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: migrateT0, Body: []byte(`{"data":{}}`)}})
	if err != nil || !res.Owed {
		t.Fatalf("append: owed %v, %v", res.Owed, err)
	}
	if err := db.Close(); err != nil { // no FanOut: as a kill leaves it
		t.Fatal(err)
	}

	args := []string{"-from", "bbolt:" + path, "-to", dbURL, "-schema", schema}
	out, err := runMigrateCmd(t, env, args...)
	if err == nil {
		t.Fatalf("migrate of a file with a fan-out owed succeeded:\n%s", out)
	}
	for _, want := range []string{"1 event", "webhookd -db " + path, "stop it", "webhookd migrate -from bbolt:" + path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}

	// The start the refusal asks for: Open writes what is owed.
	db, err = storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := runMigrateCmd(t, env, args...); err != nil || !strings.Contains(squeeze(out), "deliveries  2  =  2") {
		t.Fatalf("migrate after a start and a stop: %v\n%s", err, out)
	}
}

// TestMigrate_RefusesTheFileBeforeTheTarget: a file migrate cannot copy
// (held by a running webhookd, or with a fan-out owed) is refused with
// its own words before the target is connected to, so the target's
// schema is left as it was. The target here is a port where nothing
// listens: a refusal that came after connecting would be a connection
// error instead, and no "migrating" line is printed.
func TestMigrate_RefusesTheFileBeforeTheTarget(t *testing.T) {
	const nowhere = "postgres://webhookd:hunter2-secret@127.0.0.1:1/webhookd?sslmode=disable&connect_timeout=2"
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "webhookd.db")
	db := openAcmeSource(t, path)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	held, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "lock.toml")
	if err := os.WriteFile(cfg, []byte("[storage]\nlock_timeout = \"100ms\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runMigrateCmd(t, nil, "-config", cfg, "-from", "bbolt:"+path, "-to", nowhere)
	if err == nil || !strings.Contains(err.Error(), "stop webhookd first") || strings.Contains(out, "migrating") {
		t.Errorf("migrate of a file in use: %v\n%s", err, out)
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}

	owing, err := storage.Open(path, storage.Options{OwedFanOutAbove: -1}) // every fan-out owed
	if err != nil {
		t.Fatal(err)
	}
	if err := owing.CreateEndpoint(ctx, engine.Endpoint{
		ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/hook", EventTypes: []string{"*"},
		Created: migrateT0, Updated: migrateT0, Secrets: []engine.Secret{{Key: engine.NewSecret()}},
	}, 0); err != nil {
		t.Fatal(err)
	}
	if res, err := owing.AppendEvent(ctx, engine.NewEvent{Event: engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: migrateT0, Body: []byte(`{"data":{}}`)}}); err != nil || !res.Owed {
		t.Fatalf("append: owed %v, %v", res.Owed, err)
	}
	if err := owing.Close(); err != nil { // no FanOut: as a kill leaves it
		t.Fatal(err)
	}
	out, err = runMigrateCmd(t, nil, "-from", "bbolt:"+path, "-to", nowhere)
	if err == nil || !strings.Contains(err.Error(), "owed fan-outs") || strings.Contains(out, "migrating") {
		t.Errorf("migrate of a file with a fan-out owed: %v\n%s", err, out)
	}
	if strings.Contains(out+fmt.Sprint(err), "hunter2-secret") {
		t.Errorf("the refusal shows the target's password")
	}
}
