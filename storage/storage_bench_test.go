package storage

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// Benchmarks of the write path: every write is a real fsynced commit on
// the test's temporary directory, so their absolute numbers are the disk's.
// Run them one at a time on a quiet machine:
//
//	go test ./storage -run '^$' -bench . -benchmem

// benchBody is a 1 KiB event envelope.
var benchBody = `{"id":"evt_x","type":"order.created","created":"2030-01-02T03:04:05.000Z","api_version":"v1","data":{"pad":"` +
	strings.Repeat("x", 1024-110) + `"}}`

// reportCommits adds the commit loop's batching to b's results.
func reportCommits(b *testing.B, db *DB, before Stats) {
	s := db.Stats()
	if c := s.Commits - before.Commits; c > 0 {
		b.ReportMetric(float64(s.Ops-before.Ops)/float64(c), "writes/commit")
		b.ReportMetric(float64(s.CommitTime-before.CommitTime)/float64(c)/1e6, "ms/commit")
	}
}

// BenchmarkDB_CommitBatching is durable ingest of a 1 KiB event with no
// endpoint, from 1 and from 64 concurrent writers: the group commit turns
// the 64 writers' fsyncs into shared ones (writes/commit).
func BenchmarkDB_CommitBatching(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run("writers="+strconv.Itoa(writers), func(b *testing.B) {
			db := MustOpenDB(b)
			mustTenant(b, db, "acme")
			mustEventType(b, db, "order.created")
			before := db.Stats()
			b.ResetTimer()
			runWriters(b.N, writers, func() {
				if _, err := db.AppendEvent(context.Background(), newEvent("acme", "order.created", benchBody)); err != nil {
					b.Error(err)
				}
			})
			b.StopTimer()
			reportCommits(b, db, before)
		})
	}
}

// BenchmarkDB_RecordAttempt is recording a successful attempt, from 64
// concurrent writers (as the dispatcher's workers do).
func BenchmarkDB_RecordAttempt(b *testing.B) {
	db := MustOpenDB(b)
	mustTenant(b, db, "acme")
	mustEventType(b, db, "order.created")
	mustEndpoint(b, db, "acme", "order.created")
	ds := make([]engine.Delivery, b.N)
	var next atomic.Int64
	runWriters(b.N, 64, func() {
		res := mustAppend(b, db, newEvent("acme", "order.created", `{"n":1}`))
		ds[next.Add(1)-1] = res.Deliveries[0]
	})
	next.Store(0)
	before := db.Stats()
	b.ResetTimer()
	runWriters(b.N, 64, func() {
		d := ds[next.Add(1)-1]
		_, err := recordAttempt(context.Background(), db, engine.AttemptRecord{
			DeliveryID: d.ID, Cycle: d.Cycle,
			Attempt: engine.Attempt{Cycle: 1, Number: 1, Start: t0, Duration: time.Millisecond, Status: 204, Outcome: engine.OutcomeSuccess},
			State:   engine.StateSucceeded, LastStatus: 204, At: t0,
		})
		if err != nil {
			b.Error(err)
		}
	})
	b.StopTimer()
	reportCommits(b, db, before)
}

// BenchmarkDB_AttemptInput is what a worker reads before an attempt: the
// delivery, its event's body and its endpoint, in one read transaction.
func BenchmarkDB_AttemptInput(b *testing.B) {
	db := MustOpenDB(b)
	mustTenant(b, db, "acme")
	mustEventType(b, db, "order.created")
	mustEndpoint(b, db, "acme", "order.created")
	const n = 1000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = mustAppend(b, db, newEvent("acme", "order.created", benchBody)).Deliveries[0].ID
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := db.AttemptInput(context.Background(), ids[i%n]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// runWriters makes n calls of fn from writers goroutines.
func runWriters(n, writers int, fn func()) {
	var left atomic.Int64
	left.Store(int64(n))
	done := make(chan struct{})
	for range writers {
		go func() {
			defer func() { done <- struct{}{} }()
			for left.Add(-1) >= 0 {
				fn()
			}
		}()
	}
	for range writers {
		<-done
	}
}

// BenchmarkEncodeDelivery and BenchmarkDecodeDelivery are the record
// codec of the dispatch path: every attempt decodes the delivery (to send
// it) and re-encodes it (to record the outcome).
func BenchmarkEncodeDelivery(b *testing.B) {
	d := benchDelivery()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeDelivery(d); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeDelivery(b *testing.B) {
	v, err := encodeDelivery(benchDelivery())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeDelivery(v); err != nil {
			b.Fatal(err)
		}
	}
}

// benchDelivery is a pending delivery after one failed attempt.
func benchDelivery() engine.Delivery {
	return engine.Delivery{
		ID: engine.NewID("dlv"), TenantID: "acme", EventID: engine.NewID("evt"), EventType: "order.created",
		EndpointID: engine.NewID("ep"), State: engine.StatePending, Cycle: 1, CycleStart: t0, CycleAttempts: 1,
		NextAttemptAt: t0.Add(5 * time.Second), LastStatus: 502, Reason: "HTTP 502",
		Created: t0, Updated: t0,
		Attempts: []engine.Attempt{{Cycle: 1, Number: 1, Start: t0, Duration: 3 * time.Millisecond, Status: 502, Error: "HTTP 502", Response: "bad gateway", Outcome: engine.OutcomeRetry}},
		Replays:  []engine.Replay{},
	}
}

// BenchmarkEncodeEvent is the event record of ingest: a header and the
// 1 KiB body verbatim.
func BenchmarkEncodeEvent(b *testing.B) {
	ev := newEvent("acme", "order.created", benchBody).Event
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeEvent(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStoredDelivery_matchesDecode checks the shortcut putDelivery takes:
// storedDelivery must return exactly what decodeDelivery reads back. The
// fixture sets every field, so that a field added to engine.Delivery but
// not stored fails here rather than going unnoticed.
func TestStoredDelivery_matchesDecode(t *testing.T) {
	local := time.FixedZone("UTC+2", 2*3600)
	full := engine.Delivery{
		ID: "dlv_1", TenantID: "acme", EventID: "evt_1", EventType: "order.created", EndpointID: "ep_1",
		State: engine.StateDead, Cycle: 2, CycleStart: time.Now(), CycleAttempts: 3,
		NextAttemptAt: time.Now().In(local), LastStatus: 502, Reason: "HTTP 502 <&>",
		DeadAt: time.Now(), Created: t0.In(local), Updated: time.Now(),
		Attempts: []engine.Attempt{{Cycle: 1, Number: 1, Start: time.Now().In(local), Duration: time.Millisecond,
			Status: 502, Error: "HTTP 502", Response: "bad \"gateway\"", Outcome: engine.OutcomeRetry, RetryAfter: time.Second,
			ResponseHeaders: []engine.Header{{Name: "Content-Type", Value: "text/html"}, {Name: "X-Empty"}}}},
		Replays:  []engine.Replay{{At: time.Now(), By: "admin", Cycle: 2}},
		Sequence: 42, Line: "key:order-1", WaitingBehind: "dlv_0", PreviousSequence: 41, Test: true, RetryPolicy: "extended",
		Skips:     []engine.Skip{{At: time.Now().In(local), By: "admin", Cycle: 2}},
		Channels:  []string{"project_1", "b"},
		Backfill:  &engine.Backfill{At: time.Now().In(local), By: "token tok_1"},
		DeliverAt: time.Now().Add(time.Hour).In(local),
	}
	for _, v := range []any{full, full.Attempts[0], full.Replays[0], full.Skips[0], *full.Backfill} {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			if rv.Field(i).IsZero() {
				t.Fatalf("fixture leaves %s.%s zero: set it", rv.Type().Name(), rv.Type().Field(i).Name)
			}
		}
	}
	badUTF8 := full
	badUTF8.Attempts = []engine.Attempt{{Cycle: 1, Number: 1, Error: "bad \xff byte", Outcome: engine.OutcomeRetry}}
	empty := full
	empty.Attempts, empty.Replays, empty.DeadAt, empty.NextAttemptAt = []engine.Attempt{}, nil, time.Time{}, time.Time{}
	headers := full // an attempt without headers beside one with none kept
	headers.Attempts = []engine.Attempt{{Cycle: 1, Number: 1, Outcome: engine.OutcomeRetry}, {Cycle: 1, Number: 2, Outcome: engine.OutcomeRetry, ResponseHeaders: []engine.Header{}}}
	for name, d := range map[string]engine.Delivery{"full": full, "invalid UTF-8": badUTF8, "empty and nil": empty, "headers nil and empty": headers} {
		v, err := encodeDelivery(d)
		if err != nil {
			t.Fatal(err)
		}
		want, err := decodeDelivery(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := storedDelivery(d)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: storedDelivery = %+v\nwant (decoded) %+v", name, got, want)
		}
	}
	bad := full
	bad.State = "delivering"
	if _, err := storedDelivery(bad); err == nil {
		t.Error("storedDelivery accepted state delivering, which decodeDelivery refuses")
	}
}

// BenchmarkStoredDelivery is what putDelivery pays to return a delivery as
// stored, against BenchmarkDecodeDelivery, what it paid before.
func BenchmarkStoredDelivery(b *testing.B) {
	d := benchDelivery()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := storedDelivery(d); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStoredEvent_matchesDecode is TestStoredDelivery_matchesDecode for
// events.
func TestStoredEvent_matchesDecode(t *testing.T) {
	full := engine.Event{Seq: 7, ID: "evt_1", TenantID: "acme", Type: "order.created", Sequence: 3, OrderingKey: "order_1", Test: true,
		Channels: []string{"project_1"}, DeliverAt: time.Now().Add(time.Hour).In(time.FixedZone("UTC+2", 2*3600)),
		IngestTrace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		Created:     time.Now().In(time.FixedZone("UTC+2", 2*3600)), APIVersion: "v1", Body: []byte(benchBody)}
	rv := reflect.ValueOf(full)
	for i := range rv.NumField() {
		if rv.Field(i).IsZero() {
			t.Fatalf("fixture leaves Event.%s zero: set it", rv.Type().Field(i).Name)
		}
	}
	bad := full
	bad.APIVersion = "v\xff"
	for name, ev := range map[string]engine.Event{"full": full, "invalid UTF-8": bad} {
		v, err := encodeEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		want, err := decodeEvent(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := storedEvent(ev, v)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: storedEvent = %+v\nwant (decoded) %+v", name, got, want)
		}
	}
}
