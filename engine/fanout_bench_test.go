package engine_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// BenchmarkNewDeliveries_FanOut10 is ingest's fan-out of an event on no
// channel to 10 endpoints without a channel filter: what every event
// pays when no one uses channels.
func BenchmarkNewDeliveries_FanOut10(b *testing.B) {
	eps := make([]engine.Endpoint, 10)
	for i := range eps {
		eps[i] = engine.Endpoint{ID: "ep_" + strconv.Itoa(i), TenantID: "acme", EventTypes: []string{"order.created", "order.shipped"}}
	}
	ev := engine.Event{ID: "evt_1", TenantID: "acme", Type: "order.created", Created: time.Unix(1, 0).UTC(), Sequence: 7}
	ids := [10]string{"dlv_0", "dlv_1", "dlv_2", "dlv_3", "dlv_4", "dlv_5", "dlv_6", "dlv_7", "dlv_8", "dlv_9"}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		ds := engine.NewDeliveries(ev, "", eps, func(string) string { n++; return ids[n-1] })
		if len(ds) != 10 {
			b.Fatal(len(ds))
		}
	}
}

// BenchmarkPrepareEvent is ingest's validation, hash and envelope of a
// 1 KiB event on no channel.
func BenchmarkPrepareEvent(b *testing.B) {
	in := engine.IngestInput{Type: "order.created", Data: []byte(`{"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx","n":42,"ok":true}`), IdempotencyKey: "k-1"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := engine.PrepareEvent("acme", in, engine.IngestOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
