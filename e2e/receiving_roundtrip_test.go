package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/client"
)

// Field kinds of the varied bodies: what senders put in data. The common
// ones survive a JSON round trip byte for byte; the rare ones are the
// forms a decoder reads as the same value and an encoder writes another
// way (or, for 2^53+1, as another value).
var (
	commonFields = []string{
		`"id":"in_%d"`, `"amount":%d`, `"currency":"eur"`, `"paid":true`, `"note":null`,
		`"customer":{"id":"cus_%d","email":"ana@example.com"}`, `"items":[{"sku":"A-%d","qty":2},{"sku":"B","qty":1}]`,
		`"name":"Zoë Ødegård"`, `"emoji":"🎉"`, `"ratio":0.25`, `"tags":["new","vip"]`, `"quote":"say \"hi\"\n"`,
	}
	rareFields = []string{
		`"city":"Z\u00fcrich"`,             // an escape of a character JSON does not need escaped
		`"url":"https:\/\/example.com\/x"`, // an escaped solidus
		`"order_id":9007199254740993`,      // above 2^53: a double holds another value
		`"price":10.50`,                    // a trailing zero
		`"total":1e3`,                      // an exponent
		`"balance":-0`,                     // negative zero
		`"by_day":{"mon":1,"10":2}`,        // an integer-like key, which JavaScript moves first
		`"sep":"\u2028"`,                   // U+2028 escaped, which JSON.stringify writes raw
		`"tab":"a\u0009b"`,                 // an escape JSON.stringify writes as \t
	}
)

// variedBodies returns n event bodies (JSON objects as ingest takes them),
// the same for the same seed: each of 2 to 5 fields, a field a common kind
// 9 times in 10 and a rare kind otherwise; a third of them pretty-printed,
// which webhookd compacts.
func variedBodies(n int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 34))
	bodies := make([]string, n)
	for i := range bodies {
		var fields []string
		seen := map[string]bool{}
		for len(fields) < 2+r.IntN(4) {
			pool := commonFields
			if r.IntN(10) == 0 {
				pool = rareFields
			}
			f := pool[r.IntN(len(pool))]
			name, _, _ := strings.Cut(f, ":")
			if seen[name] {
				continue // a name twice is refused
			}
			seen[name] = true
			if strings.Contains(f, "%d") {
				f = fmt.Sprintf(f, r.IntN(100000))
			}
			fields = append(fields, f)
		}
		if i%3 == 0 {
			bodies[i] = "{\n  " + strings.Join(fields, ",\n  ") + "\n}"
		} else {
			bodies[i] = "{" + strings.Join(fields, ",") + "}"
		}
	}
	return bodies
}

// TestReceiving_RoundTrip measures what docs/receiving.md says of
// JSON.stringify(JSON.parse(body)): webhookd delivers 200 varied bodies
// (variedBodies), and Node counts how many of the delivered bodies the
// round trip changes, each of which would fail its signature. The doc
// must state that count.
func TestReceiving_RoundTrip(t *testing.T) {
	t.Parallel()
	node := toolOrSkip(t, "node", "install Node 18 or later (Debian: apt-get install nodejs)")
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	rc := newReceiver(t, status(200))
	ep := in.createEndpoint(rc.srv.URL, "payment.succeeded")
	rc.setSecret(ep.Secret)
	a := newAPI(in.base, testToken)
	const n = 200
	sent := variedBodies(n, 1)
	for _, b := range sent {
		if _, err := a.Ingest(context.Background(), "acme", client.EventInput{Type: "payment.succeeded", Data: json.RawMessage(b)}); err != nil {
			t.Fatalf("ingest %s: %v", b, err)
		}
	}
	waitFor(t, "200 deliveries", func() bool { return len(rc.got()) >= n })
	rc.checkSignatures()
	var bodies []string
	for _, r := range rc.got() {
		bodies = append(bodies, string(r.body))
	}
	file := filepath.Join(t.TempDir(), "bodies.json")
	raw, err := json.Marshal(bodies)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "roundtrip.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(runTool(t, time.Minute, t.TempDir(), nil, node, script, file))
	if !regexp.MustCompile(`^\d+ of 200$`).MatchString(got) {
		t.Fatalf("roundtrip.mjs printed %q", got)
	}
	t.Logf("JSON.stringify(JSON.parse(body)) changed %s delivered bodies", got)
	doc, err := os.ReadFile(filepath.Join("..", "docs", "receiving.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "changed " + got + " delivered bodies"; !strings.Contains(string(doc), want) {
		t.Errorf("docs/receiving.md does not say %q, what this run measured", want)
	}
}
