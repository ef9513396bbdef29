package postgres

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/jsonschema"
	"github.com/webhookd/webhookd/postgres/pgtest"
)

// enqueueApp is an application beside webhookd on one database: its own
// schema with a table orders, and a connection whose search_path is that
// schema, as an application's would be.
type enqueueApp struct {
	s      *Store
	svc    *engine.Service // the HTTP route's Service over s, without a dispatcher
	url    string
	schema string // the application's schema
	path   string // its session's search_path
	conn   *pgx.Conn
	opts   EnqueueOptions
	eps    []string // the endpoints subscribed to order.created, in ID order
}

func newEnqueueApp(t *testing.T) *enqueueApp {
	t.Helper()
	ctx := context.Background()
	a := &enqueueApp{s: openTest(t, Options{}), url: pgtest.URL(t)}
	a.opts = EnqueueOptions{Schema: a.s.Schema()}
	a.svc = engine.NewService(a.s, nil, engine.ServiceOptions{Targets: engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}, Schemas: jsonschema.Compiler{}})
	if _, _, err := a.svc.PutTenant(ctx, "acme", engine.TenantInput{}); err != nil {
		t.Fatal(err)
	}
	for typ, in := range map[string]engine.EventTypeInput{
		"order.created": {},
		"other.type":    {},
		"order.checked": {Schema: json.RawMessage(`{"properties":{"n":{"type":"integer"}}}`)},
		"order.old":     {Status: engine.EventTypeArchived},
	} {
		if _, _, err := a.svc.PutEventType(ctx, typ, in); err != nil {
			t.Fatal(err)
		}
	}
	for _, types := range [][]string{{"*"}, {"order.created"}, {"other.type"}} {
		ep, _, err := a.svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/x", EventTypes: types})
		if err != nil {
			t.Fatal(err)
		}
		if types[0] != "other.type" {
			a.eps = append(a.eps, ep.ID)
		}
	}
	slices.Sort(a.eps)

	a.schema = pgtest.Schema(t)
	conn, err := pgx.Connect(ctx, a.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	app := pgx.Identifier{a.schema}.Sanitize()
	for _, sql := range []string{
		"CREATE SCHEMA " + app,
		"CREATE TABLE " + app + ".orders (id text PRIMARY KEY)",
		"SET search_path = " + app,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.QueryRow(ctx, "SELECT current_setting('search_path')").Scan(&a.path); err != nil {
		t.Fatal(err)
	}
	a.conn = conn
	return a
}

// count returns the one number sql selects.
func (a *enqueueApp) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := a.conn.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// events counts the events in webhookd's schema, deliveries its deliveries.
func (a *enqueueApp) events(t *testing.T) int {
	return a.count(t, "SELECT count(*) FROM "+pgx.Identifier{a.s.Schema(), "events"}.Sanitize())
}

func (a *enqueueApp) deliveries(t *testing.T) int {
	return a.count(t, "SELECT count(*) FROM "+pgx.Identifier{a.s.Schema(), "deliveries"}.Sanitize())
}

// searchPath fails t unless the application's session has its own
// search_path.
func (a *enqueueApp) searchPath(t *testing.T, q querier) {
	t.Helper()
	var got string
	if err := q.QueryRow(context.Background(), "SELECT current_setting('search_path')").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != a.path {
		t.Errorf("search_path = %s, want the application's %s", got, a.path)
	}
}

// placeOrder begins a transaction of the application, inserts order id
// and enqueues its event with key; the caller ends the transaction.
func (a *enqueueApp) placeOrder(t *testing.T, ctx context.Context, id, key string) (pgx.Tx, engine.IngestResult) {
	t.Helper()
	tx, err := a.conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES ($1)", id); err != nil {
		t.Fatal(err)
	}
	res, err := EnqueueTx(ctx, tx, "acme", orderIn(id, key), a.opts)
	if err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
	return tx, res
}

// orderIn is an ingest of order id.
func orderIn(id, key string) engine.IngestInput {
	return engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{"order": "` + id + `"}`), IdempotencyKey: key}
}

// TestEnqueueTx_Commit: committed, the event and its deliveries are in
// the store with the application's row, the nodes' scheduler is woken
// and claims the deliveries, and the session's search_path is the
// application's again.
func TestEnqueueTx_Commit(t *testing.T) {
	a := newEnqueueApp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A scheduler that would sleep a minute without a wake-up, listening
	// before the ingest.
	sched := a.s.Scheduler(SchedulerOptions{Poll: time.Minute})
	if _, err := sched.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	defer sched.Close()
	listen := "LISTEN " + pgx.Identifier{a.s.channel()}.Sanitize()
	end, _ := ctx.Deadline()
	if !poll(time.Until(end), func() bool {
		return a.count(t, "SELECT count(*) FROM pg_stat_activity WHERE query = $1", listen) > 0
	}) {
		t.Fatal("the scheduler did not LISTEN")
	}
	claimed := make(chan []engine.Work, 1)
	go func() {
		ws, _ := sched.Claim(ctx, 0)
		claimed <- ws
	}()

	tx, res := a.placeOrder(t, ctx, "o1", "k1")
	a.searchPath(t, tx)
	if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES ('o2')"); err != nil {
		t.Fatalf("the application's own table after EnqueueTx: %v", err)
	}
	if res.Duplicate || res.Event.ID == "" || len(res.Deliveries) != 2 {
		t.Fatalf("EnqueueTx = %+v, want a new event with 2 deliveries", res)
	}
	if _, _, err := a.s.Event(ctx, "acme", res.Event.ID); engine.ErrorCode(err) != engine.CodeEventNotFound {
		t.Errorf("Event before the commit: %v, want %s", err, engine.CodeEventNotFound)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	a.searchPath(t, a.conn)

	ev, ds, err := a.s.Event(ctx, "acme", res.Event.ID)
	if err != nil {
		t.Fatalf("Event after the commit: %v", err)
	}
	if string(ev.Body) != string(res.Event.Body) || ev.Type != "order.created" || ev.APIVersion != engine.DefaultAPIVersion {
		t.Errorf("stored event %+v, want %+v", ev, res.Event)
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.EndpointID)
		if d.State != engine.StatePending {
			t.Errorf("delivery %s is %s, want pending", d.ID, d.State)
		}
	}
	if !slices.Equal(got, a.eps) {
		t.Errorf("deliveries to %v, want to the subscribed endpoints %v", got, a.eps)
	}
	if n := a.count(t, "SELECT count(*) FROM orders"); n != 2 {
		t.Errorf("%d orders, want 2", n)
	}

	var ws []engine.Work
	select {
	case ws = <-claimed:
	case <-ctx.Done():
		t.Fatal("the scheduler was not woken by the commit")
	}
	var ids []string
	for _, w := range ws {
		ids = append(ids, w.DeliveryID)
	}
	slices.Sort(ids)
	if want := []string{res.Deliveries[0].ID, res.Deliveries[1].ID}; !slices.Equal(ids, want) {
		t.Errorf("claimed %v, want %v", ids, want)
	}
}

// TestEnqueueTx_Rollback: rolled back, neither the event, its deliveries,
// its idempotency key nor the application's row ever existed.
func TestEnqueueTx_Rollback(t *testing.T) {
	a := newEnqueueApp(t)
	ctx := context.Background()
	tx, res := a.placeOrder(t, ctx, "o1", "k1")
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.s.Event(ctx, "acme", res.Event.ID); engine.ErrorCode(err) != engine.CodeEventNotFound {
		t.Errorf("Event after the rollback: %v, want %s", err, engine.CodeEventNotFound)
	}
	if n, m, o := a.events(t), a.deliveries(t), a.count(t, "SELECT count(*) FROM orders"); n+m+o != 0 {
		t.Errorf("after the rollback: %d events, %d deliveries, %d orders; want none", n, m, o)
	}
	// The key was never used: the same request is a new event.
	again, err := a.svc.Ingest(ctx, "acme", orderIn("o1", "k1"))
	if err != nil || again.Duplicate {
		t.Errorf("ingest with the rolled-back key: %+v, %v; want a new event", again, err)
	}
}

// TestEnqueueTx_Idempotency: a key reused in a second transaction, or
// after an ingest through the HTTP route's Service, is a duplicate with
// the first event's result and writes nothing; with another request it is
// a conflict. Neither aborts the caller's transaction.
func TestEnqueueTx_Idempotency(t *testing.T) {
	a := newEnqueueApp(t)
	ctx := context.Background()
	orders := 0
	enqueue := func(order, key string) (engine.IngestResult, error) {
		t.Helper()
		orders++
		tx, err := a.conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		res, err := EnqueueTx(ctx, tx, "acme", orderIn(order, key), a.opts)
		if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES ($1)", fmt.Sprint(orders)); err != nil {
			t.Fatalf("the caller's transaction after EnqueueTx: %v", err)
		}
		a.searchPath(t, tx)
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return res, err
	}

	first, err := enqueue("o1", "k1")
	if err != nil || first.Duplicate {
		t.Fatalf("first: %+v, %v", first, err)
	}
	dup, err := enqueue("o1", "k1")
	if err != nil || !dup.Duplicate || dup.Event.ID != first.Event.ID || len(dup.Deliveries) != len(first.Deliveries) {
		t.Errorf("second transaction, same key: %+v, %v; want a duplicate of %s", dup, err, first.Event.ID)
	}
	if _, err := enqueue("o2", "k1"); engine.ErrorCode(err) != engine.CodeIdempotencyConflict {
		t.Errorf("same key, another request: %v, want %s", err, engine.CodeIdempotencyConflict)
	}

	// The HTTP route first, then EnqueueTx: hashed alike.
	viaHTTP, err := a.svc.Ingest(ctx, "acme", orderIn("o3", "k2"))
	if err != nil {
		t.Fatal(err)
	}
	dup, err = enqueue("o3", "k2")
	if err != nil || !dup.Duplicate || dup.Event.ID != viaHTTP.Event.ID {
		t.Errorf("EnqueueTx after the HTTP route with its key: %+v, %v; want a duplicate of %s", dup, err, viaHTTP.Event.ID)
	}
	if n := a.events(t); n != 2 {
		t.Errorf("%d events, want 2", n)
	}
	if n := a.count(t, "SELECT count(*) FROM orders"); n != 4 {
		t.Errorf("%d orders, want the caller's 4", n)
	}
}

// TestEnqueueTx_Refused: what the HTTP route refuses EnqueueTx refuses
// with the same code, and the caller's transaction goes on: it commits
// its own row without the event.
func TestEnqueueTx_Refused(t *testing.T) {
	a := newEnqueueApp(t)
	ctx := context.Background()
	for i, tc := range []struct {
		name   string
		tenant string
		in     engine.IngestInput
		opts   EnqueueOptions
		code   engine.Code
		msg    string
	}{
		{"unknown type", "acme", engine.IngestInput{Type: "no.such.type", Data: json.RawMessage(`{}`)}, a.opts, engine.CodeUnknownEventType, ""},
		{"bad data", "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{"a":`)}, a.opts, engine.CodeInvalidJSON, ""},
		{"no data", "acme", engine.IngestInput{Type: "order.created"}, a.opts, engine.CodeInvalidField, ""},
		// The checks of HTTP ingest's strict decoder (issue 29).
		{"a name twice", "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{"a":1,"a":2}`)}, a.opts, engine.CodeInvalidJSON, `duplicate name "a"`},
		{"a name twice, nested and escaped", "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{"x":[{"k":1,"\u006b":2}]}`)}, a.opts, engine.CodeInvalidJSON, `duplicate name "k"`},
		{"a lone surrogate", "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(`"\ud800"`)}, a.opts, engine.CodeInvalidJSON, `lone surrogate`},
		{"invalid UTF-8", "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage("{\"s\":\"\xff\"}")}, a.opts, engine.CodeInvalidJSON, "UTF-8"},
		{"a noncharacter", "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{"s":"\uffff"}`)}, a.opts, engine.CodeInvalidJSON, "noncharacter U+FFFF"},
		{"a number beyond a double", "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{"n":1e400}`)}, a.opts, engine.CodeInvalidJSON, "number 1e400"},
		{"an ordering key with a bidi override", "acme", engine.IngestInput{Type: "order.created", Data: json.RawMessage(`{}`), OrderingKey: "order\u202e1"}, a.opts, engine.CodeInvalidField, "U+202E"},
		// The catalogue's say, with webhookd's own schema compiler when
		// the options name none.
		{"a schema mismatch", "acme", engine.IngestInput{Type: "order.checked", Data: json.RawMessage(`{"n":"x"}`)}, a.opts, engine.CodeSchemaMismatch, "data/n"},
		{"an archived type", "acme", engine.IngestInput{Type: "order.old", Data: json.RawMessage(`{}`)}, a.opts, engine.CodeEventTypeArchived, "archived"},
		{"unknown tenant", "nobody", orderIn("o", ""), a.opts, engine.CodeTenantNotFound, ""},
		{"invalid tenant", "../x", orderIn("o", ""), a.opts, engine.CodeTenantNotFound, ""},
		{"no webhookd tables", "acme", orderIn("o", ""), EnqueueOptions{Schema: a.schema}, "", "has no webhookd tables"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := a.conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			_, err = EnqueueTx(ctx, tx, tc.tenant, tc.in, tc.opts)
			if err == nil || (tc.code != "" && engine.ErrorCode(err) != tc.code) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("EnqueueTx: %v, want code %q and %q", err, tc.code, tc.msg)
			}
			a.searchPath(t, tx)
			if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES ($1)", tc.name); err != nil {
				t.Fatalf("the caller's transaction after the refusal: %v", err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if n := a.count(t, "SELECT count(*) FROM orders"); n != i+1 {
				t.Errorf("%d orders, want %d", n, i+1)
			}
			if tc.code != "" {
				if _, err := a.svc.Ingest(ctx, tc.tenant, tc.in); engine.ErrorCode(err) != tc.code {
					t.Errorf("the HTTP route's Ingest: %v, want code %q", err, tc.code)
				}
			}
			if n := a.events(t); n != 0 {
				t.Errorf("%d events, want none", n)
			}
		})
	}
}

// TestEnqueueTx_Privileges: the grants docs/cluster.md gives the
// application's role are enough, for a new event and a duplicate.
func TestEnqueueTx_Privileges(t *testing.T) {
	a := newEnqueueApp(t)
	ctx := context.Background()
	var b [6]byte
	rand.Read(b[:])
	role := pgx.Identifier{"enqueue_app_" + hex.EncodeToString(b[:])}.Sanitize()
	wh := func(table string) string { return pgx.Identifier{a.s.Schema(), table}.Sanitize() }
	for _, sql := range []string{
		"CREATE ROLE " + role,
		"GRANT USAGE ON SCHEMA " + pgx.Identifier{a.schema}.Sanitize() + " TO " + role,
		"GRANT INSERT ON orders TO " + role,
		// As docs/cluster.md, "Enqueue inside your transaction".
		"GRANT USAGE ON SCHEMA " + pgx.Identifier{a.s.Schema()}.Sanitize() + " TO " + role,
		"GRANT SELECT ON " + wh("schema_version") + ", " + wh("event_types") + " TO " + role,
		"GRANT SELECT (tenant_id, id, doc) ON " + wh("endpoints") + " TO " + role, // not secrets
		"GRANT SELECT ON " + wh("tenants") + " TO " + role,
		"GRANT SELECT, INSERT ON " + wh("events") + ", " + wh("deliveries") + " TO " + role,
		"GRANT SELECT, INSERT, UPDATE (request_hash, event_id, expires) ON " + wh("idempotency") + " TO " + role,
		"GRANT SELECT, INSERT, UPDATE ON " + wh("tenant_sequences") + ", " + wh("key_tails") + " TO " + role,
	} {
		if _, err := a.conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	t.Cleanup(func() {
		for _, sql := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := a.conn.Exec(context.Background(), sql); err != nil {
				t.Errorf("%s: %v", sql, err)
			}
		}
	})
	for i, want := range []bool{false, true} {
		tx, err := a.conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) // before the cleanup drops the role
		if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+role); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES ($1)", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
		in := orderIn("o1", "k1")
		in.OrderingKey = "order_1" // reads and writes key_tails
		res, err := EnqueueTx(ctx, tx, "acme", in, a.opts)
		if err != nil || res.Duplicate != want {
			t.Fatalf("EnqueueTx as the application's role: %+v, %v; want duplicate %v", res, err, want)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Environment of the killed application's process (TestEnqueueTx_Killed).
const (
	envKilledApp     = "WEBHOOKD_TEST_ENQUEUE_APP"      // the application's schema; set: be that process
	envKilledWebhook = "WEBHOOKD_TEST_ENQUEUE_WEBHOOKD" // webhookd's schema
)

// TestEnqueueTx_Killed: an application killed with SIGKILL between
// EnqueueTx and COMMIT leaves nothing: PostgreSQL rolls back its
// session's transaction, the row and the event with it, and frees the
// idempotency key and the tenant's row for the next ingest.
func TestEnqueueTx_Killed(t *testing.T) {
	if os.Getenv(envKilledApp) != "" {
		killedApp(t)
		return
	}
	a := newEnqueueApp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestEnqueueTx_Killed$", "-test.count=1")
	cmd.Env = append(os.Environ(), envKilledApp+"="+a.schema, envKilledWebhook+"="+a.s.Schema())
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var pid int
	var eventID string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "enqueued %s backend %d", &eventID, &pid); err == nil {
			break
		}
	}
	if pid == 0 {
		t.Fatalf("the application did not enqueue: %v", sc.Err())
	}
	if n := a.count(t, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'idle in transaction'", pid); n != 1 {
		t.Fatalf("the application's session is not idle in its transaction")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	end, _ := ctx.Deadline()
	if !poll(time.Until(end), func() bool {
		return a.count(t, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid) == 0
	}) {
		t.Fatal("the killed application's session is still there")
	}

	if _, _, err := a.s.Event(ctx, "acme", eventID); engine.ErrorCode(err) != engine.CodeEventNotFound {
		t.Errorf("Event %s: %v, want %s", eventID, err, engine.CodeEventNotFound)
	}
	if n, m, o := a.events(t), a.deliveries(t), a.count(t, "SELECT count(*) FROM orders"); n+m+o != 0 {
		t.Errorf("after the kill: %d events, %d deliveries, %d orders; want none", n, m, o)
	}
	// The server goes on: the key is free and the tenant can be written.
	tx, err := a.conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	res, err := EnqueueTx(ctx, tx, "acme", orderIn("o1", "k1"), a.opts)
	if err != nil || res.Duplicate {
		t.Fatalf("EnqueueTx after the kill: %+v, %v; want a new event", res, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.s.Event(ctx, "acme", res.Event.ID); err != nil {
		t.Errorf("Event after the kill: %v", err)
	}
}

// killedApp is TestEnqueueTx_Killed's application: it inserts its row and
// enqueues the event in one transaction, says so, and waits to be killed.
func killedApp(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+pgx.Identifier{os.Getenv(envKilledApp), "orders"}.Sanitize()+" VALUES ('o1')"); err != nil {
		t.Fatal(err)
	}
	res, err := EnqueueTx(ctx, tx, "acme", orderIn("o1", "k1"), EnqueueOptions{Schema: os.Getenv(envKilledWebhook)})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("enqueued %s backend %d\n", res.Event.ID, conn.PgConn().PID())
	time.Sleep(time.Minute) // a real process, waiting to be killed: the test kills it long before
	t.Fatal("not killed within a minute")
}

// TestEnqueueTx_OrderedLine: an event enqueued in an application's
// transaction is settled in its lines as an ingest is: its delivery to an
// ordered endpoint waits behind the line's head, its other delivery is
// pending.
func TestEnqueueTx_OrderedLine(t *testing.T) {
	a := newEnqueueApp(t)
	ctx := t.Context()
	ordered := a.eps[0]
	if _, err := a.s.UpdateEndpoint(ctx, "acme", ordered, func(ep *engine.Endpoint) error {
		ep.Ordering = engine.OrderingEndpoint
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var head string
	for i, id := range []string{"o1", "o2"} {
		tx, res := a.placeOrder(t, ctx, id, "")
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		for _, d := range res.Deliveries {
			want := engine.StatePending
			switch {
			case d.EndpointID == ordered && i == 0:
				head = d.ID
			case d.EndpointID == ordered:
				want = engine.StateWaiting
			}
			got, err := a.s.Delivery(ctx, "acme", d.ID)
			if err != nil || got.State != want || got.State == engine.StateWaiting && got.WaitingBehind != head {
				t.Errorf("%s: delivery to %s is %s behind %q (%v), want %s", id, d.EndpointID, got.State, got.WaitingBehind, err, want)
			}
		}
	}
	checkLines(t, a.s)
}

// TestEnqueueTx_EndpointEnabledBeforeCommit: an event enqueued while one
// of its endpoints is disabled makes a paused delivery there; the
// endpoint is enabled, with its held deliveries, before the
// application's transaction commits. The enabling waits for that
// transaction, and resumes the delivery once it is committed, rather
// than finding nothing paused yet and leaving it paused for good under
// an enabled endpoint.
func TestEnqueueTx_EndpointEnabledBeforeCommit(t *testing.T) {
	a := newEnqueueApp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep := a.eps[0]
	if _, _, err := a.svc.SetEndpointEnabled(ctx, "acme", ep, false, false, "test"); err != nil {
		t.Fatal(err)
	}
	tx, res := a.placeOrder(t, ctx, "o1", "k1")
	var held string
	for _, d := range res.Deliveries {
		if d.EndpointID == ep {
			held = d.ID
			if d.State != engine.StatePaused {
				t.Fatalf("the delivery to the disabled endpoint is %s, want paused", d.State)
			}
		}
	}
	type enabled struct {
		n   int
		err error
	}
	done := make(chan enabled, 1)
	go func() {
		_, n, err := a.svc.SetEndpointEnabled(ctx, "acme", ep, true, true, "test")
		done <- enabled{n, err}
	}()
	select {
	case e := <-done:
		t.Logf("the enabling ended before the commit: %d resumed, %v", e.n, e.err)
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		done <- e
	case <-time.After(500 * time.Millisecond): // it waits for the transaction
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	e := <-done
	if e.err != nil {
		t.Fatal(e.err)
	}
	d, err := a.s.Delivery(ctx, "acme", held)
	if err != nil {
		t.Fatal(err)
	}
	if e.n != 1 || d.State != engine.StatePending {
		t.Errorf("enabled while the enqueue was not committed: %d resumed, its delivery %s (%s); want 1, pending", e.n, d.State, d.Reason)
	}
}
