package engine

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
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

// benchObject is the data of a 1 KiB event shaped like most: an object of
// short strings, numbers and small nested objects.
var benchObject = json.RawMessage(`{"object":"invoice","id":"in_1PqR2sT3uV4wX5yZ","amount_due":4200,"amount_paid":4200,` +
	`"currency":"eur","customer":{"id":"cus_Q1w2E3r4T5y6","email":"jane.doe@example.com","name":"Jane Doe",` +
	`"address":{"line1":"1 Main Street","city":"Dublin","postal_code":"D02 XY45","country":"IE"}},` +
	`"lines":[{"id":"il_1","description":"Pro plan (monthly)","quantity":1,"unit_amount":3500,"tax_rates":[0.23]},` +
	`{"id":"il_2","description":"Extra seats","quantity":2,"unit_amount":350,"tax_rates":[0.23]}],` +
	`"paid":true,"attempt_count":1,"status":"paid","period_start":1764672000,"period_end":1767350400,` +
	`"metadata":{"order_id":"ord_8842","channel":"web","campaign":null},"hosted_invoice_url":"https://pay.example.com/i/acct_1/in_1PqR2sT3uV4wX5yZ",` +
	`"status_transitions":{"finalized_at":1764672100,"paid_at":1764672160,"voided_at":null},"discount":null,"total":4200,"subtotal":4200}`)

// BenchmarkEnvelope_Encode is what ingest does to an event's data before
// it is stored: compact it and encode the envelope around it.
func BenchmarkEnvelope_Encode(b *testing.B) {
	created := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	id := NewID("evt")
	b.ReportAllocs()
	b.SetBytes(int64(len(benchData)))
	for b.Loop() {
		data, err := appendData(nil, benchData, "data")
		if err != nil {
			b.Fatal(err)
		}
		NewEvent{Event: Event{ID: id, Type: "order.created", Created: created, APIVersion: "v1", Body: encodeEnvelope(Event{ID: id, Type: "order.created", Created: created, APIVersion: "v1"}, data)}}.Sequenced(1042)
	}
}

// BenchmarkEndpoint_Sign is what each attempt does before its request:
// pick the endpoint's signing keys and sign the stored body with them
// into the request's header.
func BenchmarkEndpoint_Sign(b *testing.B) {
	ep := Endpoint{Secrets: []Secret{{Key: NewSecret()}}}
	body := []byte(`{"id":"evt_x","type":"order.created","data":` + string(benchData) + `}`)
	now := time.Now()
	h := http.Header{}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := verify.SignHeader(h, ep.SigningKeys(now), "evt_x", now, body); err != nil {
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
