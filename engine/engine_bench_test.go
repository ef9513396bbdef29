package engine

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/verify"
)

// Benchmarks of the dispatcher's hot paths that need no disk or network:
//
//	go test ./engine -run '^$' -bench . -benchmem

// benchData is the data of a 1 KiB event.
var benchData = json.RawMessage(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)

// BenchmarkEnvelope_Encode is what ingest does to an event's data before
// it is stored: compact it and encode the envelope around it.
func BenchmarkEnvelope_Encode(b *testing.B) {
	created := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	id := NewID("evt")
	b.ReportAllocs()
	b.SetBytes(int64(len(benchData)))
	for b.Loop() {
		var data bytes.Buffer
		if err := json.Compact(&data, benchData); err != nil {
			b.Fatal(err)
		}
		encodeEnvelope(id, "order.created", created, "v1", data.Bytes())
	}
}

// BenchmarkEndpoint_Sign is what each attempt does before its request:
// pick the endpoint's signing keys and sign the stored body with them.
func BenchmarkEndpoint_Sign(b *testing.B) {
	ep := Endpoint{Secrets: []Secret{{Key: NewSecret()}}}
	body := []byte(`{"id":"evt_x","type":"order.created","data":` + string(benchData) + `}`)
	now := time.Now()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := verify.Sign(ep.SigningKeys(now), "evt_x", now, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTimerQueue_Insert inserts new deliveries at random times in the
// next hour into a queue that already holds size of them (a retry after a
// failed attempt, or recovery at start).
func BenchmarkTimerQueue_Insert(b *testing.B) {
	for _, size := range []int{1000, 1000000} {
		b.Run("size="+strconv.Itoa(size), func(b *testing.B) {
			q := newTimerQueue()
			base := time.Now()
			r := rand.New(rand.NewPCG(1, 2))
			for i := range size {
				q.set("dlv_"+strconv.Itoa(i), "ep", base.Add(time.Duration(r.Int64N(int64(time.Hour)))))
			}
			ids := make([]string, 1<<16)
			for i := range ids {
				ids[i] = NewID("dlv")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				id := ids[i%len(ids)]
				q.set(id, "ep", base.Add(time.Duration(r.Int64N(int64(time.Hour)))))
				if i%len(ids) == len(ids)-1 {
					b.StopTimer()
					for _, id := range ids {
						q.remove(id)
					}
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkTimerQueue_Advance pops due deliveries in time order, as the
// timer loop does when their time comes, from a queue of a million.
func BenchmarkTimerQueue_Advance(b *testing.B) {
	const size = 1000000
	q := newTimerQueue()
	base := time.Now()
	r := rand.New(rand.NewPCG(1, 2))
	fill := func() {
		for i := range size {
			q.set("dlv_"+strconv.Itoa(i), "ep", base.Add(time.Duration(r.Int64N(int64(time.Hour)))))
		}
	}
	fill()
	end := base.Add(2 * time.Hour)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, ok := q.popDue(end); !ok {
			b.StopTimer()
			fill()
			b.StartTimer()
		}
	}
}
