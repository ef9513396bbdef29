package verify

import (
	"testing"
	"time"
)

func TestParseEnvelope(t *testing.T) {
	env, err := ParseEnvelope([]byte(`{"id":"evt_1","type":"payment.succeeded","created":"2026-12-02T14:35:10.123Z","api_version":"v1","data":{"amount":4200}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 12, 2, 14, 35, 10, 123e6, time.UTC)
	if env.ID != "evt_1" || env.Type != "payment.succeeded" || !env.Created.Equal(want) || env.APIVersion != "v1" || string(env.Data) != `{"amount":4200}` {
		t.Errorf("got %+v", env)
	}
	for _, bad := range []string{``, `[]`, `{"type":"x"}`, `{"id":""}`, `{"id":"e","created":"yesterday"}`} {
		if _, err := ParseEnvelope([]byte(bad)); err == nil {
			t.Errorf("ParseEnvelope(%q): no error", bad)
		}
	}
}
