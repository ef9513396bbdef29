package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/postgres/pgtest"
)

var importT0 = time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)

// feedImport hands im a tenant, an event type and n events with one
// pending delivery each, sending a batch after every event when split.
func feedImport(t *testing.T, im *Import, n int, split bool) []string {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(im.Tenant(engine.Tenant{ID: "acme", Name: "Acme", Created: importT0, Updated: importT0}))
	must(im.EventType(engine.EventType{Name: "order.created", Created: importT0, Updated: importT0}))
	var ids []string
	for i := range n {
		ev := engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: importT0, APIVersion: "v1", Body: []byte(`{"n":` + string(rune('0'+i%10)) + `}`)}
		d := engine.Delivery{ID: engine.NewID("dlv"), TenantID: "acme", EventID: ev.ID, EventType: ev.Type, EndpointID: "ep_1",
			State: engine.StatePending, NextAttemptAt: importT0.Add(time.Duration(i) * time.Second), Created: importT0, Updated: importT0, CycleStart: importT0}
		must(im.Event(ev, []engine.Delivery{d}))
		if split {
			must(im.flushEvents())
		}
		ids = append(ids, ev.ID)
	}
	return ids
}

// TestImport covers what an import does with its target: it refuses a
// schema with data, starts an interrupted import over, keeps the log's
// order across batches below later ingests, leaves the schema running on
// a count mismatch and refuses a completed one.
func TestImport(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{Now: func() time.Time { return importT0.Add(time.Hour) }})

	// An interrupted import: some batches in, never finished.
	im, restarted, err := s.Import(ctx, "test")
	if err != nil || restarted {
		t.Fatalf("Import: %v, restarted %v", err, restarted)
	}
	if _, _, err := s.Import(ctx, "test"); err == nil || !strings.Contains(err.Error(), "another import") {
		t.Errorf("a second import at once: %v", err)
	}
	feedImport(t, im, 3, true)
	im.Close()

	im, restarted, err = s.Import(ctx, "test")
	if err != nil || !restarted {
		t.Fatalf("Import after an interrupted one: %v, restarted %v", err, restarted)
	}
	defer im.Close()
	ids := feedImport(t, im, 5, true)
	want := Counts{Tenants: 1, EventTypes: 1, Events: 5, Deliveries: 5}
	off := want
	off.Events++
	if _, err := im.Finish(off); !errors.Is(err, ErrCountMismatch) {
		t.Fatalf("Finish with other counts: %v, want ErrCountMismatch", err)
	}
	im.Close()

	// The mismatch left it running: a rerun starts over and completes.
	im, restarted, err = s.Import(ctx, "test")
	if err != nil || !restarted {
		t.Fatalf("Import after a mismatch: %v, restarted %v", err, restarted)
	}
	ids = feedImport(t, im, 5, true)
	if got, err := im.Finish(want); err != nil || got != want {
		t.Fatalf("Finish: %+v %v, want %+v", got, err, want)
	}
	im.Close()

	evs, _, err := s.ListEvents(ctx, "acme", engine.EventFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, ev := range evs {
		got = append(got, ev.ID)
		if i > 0 && ev.Seq <= evs[i-1].Seq {
			t.Errorf("seq %d after %d", ev.Seq, evs[i-1].Seq)
		}
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Errorf("feed %v, want the import's order %v", got, ids)
	}
	res, err := s.AppendEvent(ctx, engine.NewEvent{Event: engine.Event{ID: engine.NewID("evt"), TenantID: "acme", Type: "order.created", Created: importT0, Body: []byte("{}")}})
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1].Seq; res.Event.Seq <= last {
		t.Errorf("an ingest after the import got seq %d, not after the imported %d", res.Event.Seq, last)
	}
	var leased, off2 int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE lease_token IS NOT NULL),
		count(*) FILTER (WHERE due_at <> next_attempt_at) FROM deliveries`).Scan(&leased, &off2); err != nil {
		t.Fatal(err)
	}
	if leased != 0 || off2 != 0 {
		t.Errorf("%d imported deliveries leased, %d due at another time than their next attempt", leased, off2)
	}

	if _, _, err := s.Import(ctx, "again"); err == nil || !strings.Contains(err.Error(), "complete migration") {
		t.Errorf("Import into a completed schema: %v", err)
	}
	other := openTest(t, Options{})
	if _, _, err := other.PutTenant(ctx, engine.Tenant{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Import(ctx, "test"); err == nil || !strings.Contains(err.Error(), "not empty (tenants") {
		t.Errorf("Import into a schema with a tenant: %v", err)
	}
}

// TestImport_NodeRefusesUnfinished: a node does not start on a schema an
// import is still filling (or left half-filled); the import's rerun
// opens it.
func TestImport_NodeRefusesUnfinished(t *testing.T) {
	ctx := context.Background()
	url, schema := pgtest.URL(t), pgtest.Schema(t)
	s, err := Open(ctx, url, Options{Schema: schema, Importing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	im, _, err := s.Import(ctx, "bbolt:/tmp/old.db")
	if err != nil {
		t.Fatal(err)
	}
	im.Close()
	if node, err := Open(ctx, url, Options{Schema: schema}); err == nil || !strings.Contains(err.Error(), "did not finish") {
		if node != nil {
			node.Close()
		}
		t.Errorf("a node's Open of a half-imported schema: %v, want a refusal", err)
	}
	again, err := Open(ctx, url, Options{Schema: schema, Importing: true})
	if err != nil {
		t.Fatalf("the import's rerun cannot open it: %v", err)
	}
	again.Close()
}

// TestImport_RefusesWhatIngestRefuses: an event of the source that
// ingest would refuse (a name twice in its body, a lone surrogate, a
// noncharacter, a number no double holds, an ordering key with a bidi
// override, a malformed type) ends the import with ingest's error code,
// naming the event; none of it is written.
func TestImport_RefusesWhatIngestRefuses(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	for _, tc := range []struct {
		name string
		ev   engine.Event
		code engine.Code
		msg  string
	}{
		{"a name twice", engine.Event{Type: "order.created", Body: []byte(`{"data":{"a":1,"a":2}}`)}, engine.CodeInvalidJSON, `duplicate name "a"`},
		{"a name twice, nested", engine.Event{Type: "order.created", Body: []byte(`{"data":[{"k":1,"\u006b":2}]}`)}, engine.CodeInvalidJSON, `duplicate name "k"`},
		{"a lone surrogate", engine.Event{Type: "order.created", Body: []byte(`{"data":"\ud800"}`)}, engine.CodeInvalidJSON, "lone surrogate"},
		{"a noncharacter", engine.Event{Type: "order.created", Body: []byte(`{"data":"\uFFFE"}`)}, engine.CodeInvalidJSON, "noncharacter U+FFFE"},
		{"a number beyond a double", engine.Event{Type: "order.created", Body: []byte(`{"data":1e400}`)}, engine.CodeInvalidJSON, "number 1e400"},
		{"not JSON", engine.Event{Type: "order.created", Body: []byte(`{"data":`)}, engine.CodeInvalidJSON, ""},
		{"an ordering key with a bidi override", engine.Event{Type: "order.created", OrderingKey: "order\u202e1", Body: []byte(`{}`)}, engine.CodeInvalidField, "U+202E"},
		{"a malformed type", engine.Event{Type: "Order Created", Body: []byte(`{}`)}, engine.CodeInvalidField, "type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im, _, err := s.Import(ctx, "test")
			if err != nil {
				t.Fatal(err)
			}
			defer im.Close()
			feedImport(t, im, 1, false)
			ev := tc.ev
			ev.ID, ev.TenantID, ev.Created = engine.NewID("evt"), "acme", importT0
			err = im.Event(ev, nil)
			if engine.ErrorCode(err) != tc.code || !strings.Contains(err.Error(), ev.ID) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Import.Event: %v, want code %s naming %s and saying %q", err, tc.code, ev.ID, tc.msg)
			}
			if _, err := im.Finish(Counts{Tenants: 1, EventTypes: 1, Events: 1, Deliveries: 1}); err == nil {
				t.Fatal("Finish after a refused event succeeded")
			}
			var n int
			if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM events WHERE id = $1", ev.ID).Scan(&n); err != nil || n != 0 {
				t.Errorf("the refused event is in the schema: %d rows, %v", n, err)
			}
		})
	}
}

// TestImport_RefusesBadHeaders: an endpoint whose custom headers the API
// would refuse (a reserved name, a value with a line break) is refused
// by the import, naming the endpoint and never the value, and the
// import cannot finish.
func TestImport_RefusesBadHeaders(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	for _, h := range []engine.CustomHeaders{
		{{Name: "Webhook-Id", Value: "x"}},
		{{Name: "X-Tenant", Value: "acme\r\nX-Admin: yes"}},
	} {
		im, _, err := s.Import(ctx, "test")
		if err != nil {
			t.Fatal(err)
		}
		feedImport(t, im, 1, false)
		ep := engine.Endpoint{ID: engine.NewID("ep"), TenantID: "acme", URL: "https://example.com/in", EventTypes: []string{"*"},
			Created: importT0, Updated: importT0, Secrets: []engine.Secret{{Key: engine.NewSecret()}}, Headers: h}
		err = im.Endpoint(ep)
		if engine.ErrorCode(err) != engine.CodeInvalidField || !strings.Contains(err.Error(), ep.ID) || strings.Contains(err.Error(), "X-Admin") {
			t.Errorf("Import.Endpoint(%s) = %v, want invalid_field naming the endpoint, not the value", h[0].Name, err)
		}
		if _, err := im.Finish(Counts{Tenants: 1, EventTypes: 1, Endpoints: 1}); err == nil {
			t.Error("Finish after a refused endpoint succeeded")
		}
		im.Close()
	}
}
