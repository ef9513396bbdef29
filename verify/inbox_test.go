package verify

import "testing"

func TestIdempotencyKey(t *testing.T) {
	k := IdempotencyKey("acme", "evt_1", "charge")
	if len(k) != 64 || k != IdempotencyKey("acme", "evt_1", "charge") {
		t.Errorf("IdempotencyKey = %q", k)
	}
	for _, other := range [][3]string{{"acme", "evt_1", "email"}, {"acme", "evt_2", "charge"}, {"acm", "eevt_1", "charge"}, {"", "acmeevt_1", "charge"}} {
		if IdempotencyKey(other[0], other[1], other[2]) == k {
			t.Errorf("IdempotencyKey%q collides", other)
		}
	}
}
