package engine_test

import (
	"testing"

	"github.com/webhookd/webhookd/engine"
)

func TestStatusClass_Matches(t *testing.T) {
	attempted := func(status int) engine.Delivery {
		return engine.Delivery{LastStatus: status, Attempts: []engine.Attempt{{Status: status}}}
	}
	tests := []struct {
		d    engine.Delivery
		want []engine.StatusClass // the classes d is in, besides ""
	}{
		{engine.Delivery{}, nil}, // never attempted
		{attempted(0), []engine.StatusClass{engine.StatusNone}},
		{attempted(100), nil},
		{attempted(200), []engine.StatusClass{engine.Status2xx}},
		{attempted(299), []engine.StatusClass{engine.Status2xx}},
		{attempted(300), []engine.StatusClass{engine.Status3xx}},
		{attempted(410), []engine.StatusClass{engine.Status4xx}},
		{attempted(500), []engine.StatusClass{engine.Status5xx}},
		{attempted(599), []engine.StatusClass{engine.Status5xx}},
		{attempted(600), nil},
		// Replayed after a 503, with no attempt in its new cycle yet.
		{engine.Delivery{Cycle: 2, LastStatus: 503, Attempts: []engine.Attempt{{Cycle: 1, Status: 503}}}, []engine.StatusClass{engine.Status5xx}},
	}
	for _, tt := range tests {
		if !engine.StatusClass("").Matches(tt.d) {
			t.Errorf(`"" does not match %+v`, tt.d)
		}
		for _, c := range append(engine.StatusClasses, "bogus", "4XX") {
			want := false
			for _, w := range tt.want {
				want = want || c == w
			}
			if got := c.Matches(tt.d); got != want {
				t.Errorf("%q.Matches(last status %d, %d attempts) = %v, want %v", c, tt.d.LastStatus, len(tt.d.Attempts), got, want)
			}
			if got := (engine.DeliveryFilter{Status: c}).Matches(tt.d); got != want {
				t.Errorf("DeliveryFilter{Status: %q}.Matches(last status %d) = %v, want %v", c, tt.d.LastStatus, got, want)
			}
		}
	}
}
