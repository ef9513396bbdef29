package engine

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

func TestTimerQueue(t *testing.T) {
	q := newTimerQueue()
	base := time.Now()
	r := rand.New(rand.NewPCG(1, 2))
	want := make(map[string]time.Time)
	for i := range 1000 {
		id := "dlv_" + string(rune('a'+i%26)) + time.Duration(i).String()
		at := base.Add(time.Duration(r.IntN(10000)) * time.Millisecond)
		q.set(id, "ep", at)
		want[id] = at
	}
	// Moving an entry keeps one entry per id.
	q.set("dlv_a0s", "ep", base.Add(-time.Second))
	want["dlv_a0s"] = base.Add(-time.Second)
	q.remove("dlv_b1ns")
	delete(want, "dlv_b1ns")
	if q.len() != len(want) {
		t.Fatalf("len %d, want %d", q.len(), len(want))
	}
	var got []time.Time
	for {
		e, ok := q.popDue(base.Add(time.Hour))
		if !ok {
			break
		}
		if e.at != want[e.id] {
			t.Fatalf("%s at %v, want %v", e.id, e.at, want[e.id])
		}
		got = append(got, e.at)
	}
	if len(got) != len(want) {
		t.Fatalf("popped %d, want %d", len(got), len(want))
	}
	if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i].Before(got[j]) }) {
		t.Error("not popped in due order")
	}
	if got[0] != base.Add(-time.Second) {
		t.Error("the moved entry did not come first")
	}
}

func TestTimerQueue_PopDueOnlyWhenDue(t *testing.T) {
	q := newTimerQueue()
	now := time.Now()
	if first := q.set("a", "ep", now.Add(time.Minute)); !first {
		t.Error("the only entry is the earliest")
	}
	if first := q.set("b", "ep", now.Add(2*time.Minute)); first {
		t.Error("b is not the earliest")
	}
	if _, ok := q.popDue(now); ok {
		t.Fatal("popped an entry that is not due")
	}
	if e, ok := q.popDue(now.Add(time.Minute)); !ok || e.id != "a" {
		t.Fatalf("got %v %v, want a", e, ok)
	}
	if next, ok := q.next(); !ok || !next.Equal(now.Add(2*time.Minute)) {
		t.Errorf("next %v %v", next, ok)
	}
}

func BenchmarkTimerQueue_SetPop(b *testing.B) {
	q := newTimerQueue()
	base := time.Now()
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]string, 100000)
	for i := range ids {
		ids[i] = NewID("dlv")
		q.set(ids[i], "ep", base.Add(time.Duration(r.IntN(3600))*time.Second))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		id := ids[i%len(ids)]
		q.set(id, "ep", base.Add(time.Duration(r.IntN(3600))*time.Second))
	}
}
