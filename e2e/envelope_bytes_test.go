package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"regexp"
	"testing"
	"unicode/utf8"
)

// TestDelivery_BodyIsTheFeedsEnvelope: an event whose data holds what an
// HTML-safe encoder rewrites (<, >, &, U+2028) and non-ASCII text, raw and
// escaped, reaches a loopback receiver as bytes that the official
// libraries verify, and the events feed and GET event show the envelope as
// exactly those bytes: a reconciler that hashes the feed's envelope gets
// the delivered body's SHA-256. Its created has three fraction digits.
func TestDelivery_BodyIsTheFeedsEnvelope(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	rc := newReceiver(t, status(200))
	ep := in.createEndpoint(rc.srv.URL, "*")
	rc.setSecret(ep.Secret)

	data := `{"html":"<b>Tom & Jerry</b>","sep":"a` + "\u2028" + `b","raw":"é 中 😀","esc":"\u00e9 \ud83d\ude00 \u003c","n":[1.50,-0,1E3]}`
	ev := in.ingest("payment.succeeded", data)
	in.waitState(ev.Deliveries[0].ID, "succeeded")
	rc.checkSignatures()
	got := rc.got()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(got))
	}
	delivered := got[0].body
	if !utf8.Valid(delivered) || !json.Valid(delivered) {
		t.Fatalf("delivered body is not UTF-8 JSON: %q", delivered)
	}
	if !bytes.Contains(delivered, []byte(`"data":`+data+`}`)) {
		t.Errorf("delivered body %s does not hold the data as sent", delivered)
	}
	if !regexp.MustCompile(`"created":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"`).Match(delivered) {
		t.Errorf("delivered created is not in the fixed form: %s", delivered)
	}

	feedRaw := in.adminGet("/v1/tenants/acme/events")
	var feed struct {
		Data []struct {
			Event json.RawMessage `json:"event"`
		} `json:"data"`
	}
	if err := json.Unmarshal(feedRaw, &feed); err != nil || len(feed.Data) != 1 {
		t.Fatalf("feed %s: %v", feedRaw, err)
	}
	var one struct {
		Event json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal(in.adminGet("/v1/tenants/acme/events/"+ev.ID), &one); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(delivered)
	for what, env := range map[string][]byte{"feed": feed.Data[0].Event, "GET event": one.Event} {
		if !bytes.Equal(env, delivered) {
			t.Errorf("%s envelope\n%s\ndelivered body\n%s", what, env, delivered)
		}
		if sha256.Sum256(env) != want {
			t.Errorf("%s envelope's SHA-256 differs from the delivered body's", what)
		}
	}
}

// adminGet answers the raw body of a GET with the admin token, failing
// unless it is a 200.
func (in *instance) adminGet(path string) []byte {
	in.t.Helper()
	req, err := http.NewRequest("GET", in.base+path, nil)
	if err != nil {
		in.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, b := doRequest(in.t, req)
	if resp.StatusCode != 200 {
		in.t.Fatalf("GET %s = %d %s", path, resp.StatusCode, b)
	}
	return b
}
