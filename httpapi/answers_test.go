package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
)

// nonASCIIData is event data with every kind of non-ASCII text, raw and
// escaped, up to the last character that is not a noncharacter, and the
// characters an HTML-safe encoder would rewrite.
var nonASCIIData = []string{
	`{"two":"é ß ñ","three":"€ ✓ 中文 ` + "\u2028\u2029\ufeff\ufffc\ufffd" + `","four":"😀 ` + "\U0010FFFD" + `"}`,
	`{"escaped":"\u00e9 \u20ac \ud83d\ude00 \u2028 \u0000 \/ \" \\ \b\f\n\r\t","raw":"é","html":"<script>&amp;</script>"}`,
	`{"é":{"ключ":["значение",1,-0.5e+10,true,null]},"emoji 👍":"ok"}`,
	`["<",">","&","` + "\u2028" + `"]`,
	`"\uDBFF\uDFFD"`,
}

// TestEvents_FeedIsValidUTF8: after ingests of every kind of non-ASCII
// text and of the hostile bodies, and with an event stored before ingest
// refused invalid UTF-8, the events feed is valid UTF-8 JSON, and each
// ingested envelope in it is byte for byte the stored one (the delivered
// body) and GET event's, with the data as sent, compacted.
func TestEvents_FeedIsValidUTF8(t *testing.T) {
	e := newAPIEnv(t)
	e.fixture()
	var ids []string
	for _, data := range nonASCIIData {
		var res ingestJSON
		e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":` + data + `}`}, 202, &res)
		ids = append(ids, res.ID)
	}
	for _, tt := range hostileBodies {
		e.do(req{method: "POST", path: "/v1/tenants/acme/events", body: tt.body})
	}
	// An event stored before ingest refused invalid UTF-8 is shown with
	// U+FFFD in place of its bad bytes.
	legacyID := engine.NewID("evt")
	legacy := fmt.Sprintf("{\"id\":%q,\"type\":\"payment.succeeded\",\"created\":\"2026-12-02T14:35:10.12Z\",\"api_version\":\"v1\",\"data\":\"a\xff\xfeb\xed\xa0\x80\"}", legacyID)
	if _, err := e.db.AppendEvent(context.Background(), engine.NewEvent{
		Event: engine.Event{ID: legacyID, TenantID: "acme", Type: "payment.succeeded", Created: time.Now(), APIVersion: "v1", Body: []byte(legacy)},
	}); err != nil {
		t.Fatal(err)
	}

	r := e.must(req{method: "GET", path: "/v1/tenants/acme/events"}, 200, nil)
	if !utf8.Valid(r.body) || !json.Valid(r.body) {
		t.Fatalf("the feed is not valid UTF-8 JSON: %q", r.body)
	}
	var feed struct {
		Data []struct {
			Event json.RawMessage `json:"event"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.body, &feed); err != nil {
		t.Fatal(err)
	}
	if len(feed.Data) != len(ids)+1 {
		t.Fatalf("the feed holds %d events, want the %d good ones and the legacy one", len(feed.Data), len(ids))
	}
	if got, want := string(feed.Data[len(ids)].Event), strings.ToValidUTF8(legacy, "\uFFFD"); got != want {
		t.Errorf("legacy envelope in the feed\n%s\nwant\n%s", got, want)
	}
	var one struct {
		Event json.RawMessage `json:"event"`
	}
	if g := e.must(req{method: "GET", path: "/v1/tenants/acme/events/" + legacyID}, 200, &one); !utf8.Valid(g.body) || string(one.Event) != strings.ToValidUTF8(legacy, "\uFFFD") {
		t.Errorf("legacy envelope in GET event: %q", g.body)
	}
	for i, id := range ids {
		stored, _, err := e.db.Event(context.Background(), "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		if got := feed.Data[i].Event; !bytes.Equal(got, stored.Body) {
			t.Errorf("feed envelope\n%s\nstored (delivered) envelope\n%s", got, stored.Body)
		}
		var one struct {
			Event json.RawMessage `json:"event"`
		}
		g := e.must(req{method: "GET", path: "/v1/tenants/acme/events/" + id}, 200, &one)
		if !utf8.Valid(g.body) {
			t.Errorf("GET event is not valid UTF-8: %q", g.body)
		}
		if !bytes.Equal(one.Event, stored.Body) {
			t.Errorf("GET event envelope\n%s\nstored (delivered) envelope\n%s", one.Event, stored.Body)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(nonASCIIData[i])); err != nil {
			t.Fatal(err)
		}
		if want := `,"data":` + compact.String() + `}`; !strings.HasSuffix(string(stored.Body), want) {
			t.Errorf("stored envelope %s does not end with the data as sent, compacted: %s", stored.Body, want)
		}
	}
}

// TestAPI_TimesHaveThreeDigits: the envelope's created and every time in
// an API answer have exactly three fraction digits, in UTC, whatever the
// milliseconds.
func TestAPI_TimesHaveThreeDigits(t *testing.T) {
	var (
		mu  sync.Mutex
		now = time.Date(2026, 12, 2, 15, 35, 10, 0, time.FixedZone("UTC+1", 3600))
	)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	e := newSecurityEnv(t, engine.ServiceOptions{Now: clock}, httpapi.Options{})
	ep := e.fixture()
	timeText := regexp.MustCompile(`"(\d{4}-\d\d-\d\dT[^"]*)"`)
	fixed := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	checkTimes := func(what string, body []byte) {
		t.Helper()
		for _, m := range timeText.FindAllSubmatch(body, -1) {
			if !fixed.Match(m[1]) {
				t.Errorf("%s: time %q is not in the fixed form", what, m[1])
			}
		}
	}
	for _, ms := range []int{0, 100, 120, 123} {
		mu.Lock()
		now = now.Truncate(time.Second).Add(time.Duration(ms)*time.Millisecond + 456*time.Microsecond)
		mu.Unlock()
		want := now.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05") + fmt.Sprintf(".%03dZ", ms)
		r := e.must(req{method: "POST", path: "/v1/tenants/acme/events", body: `{"type":"payment.succeeded","data":{}}`}, 202, nil)
		var res struct {
			ID      string `json:"id"`
			Created string `json:"created"`
		}
		if err := json.Unmarshal(r.body, &res); err != nil {
			t.Fatal(err)
		}
		if res.Created != want {
			t.Errorf("ingest answered created %q, want %q", res.Created, want)
		}
		checkTimes("ingest", r.body)
		var one struct {
			Event struct {
				Created string `json:"created"`
			} `json:"event"`
		}
		g := e.must(req{method: "GET", path: "/v1/tenants/acme/events/" + res.ID}, 200, &one)
		if one.Event.Created != want {
			t.Errorf("the envelope's created %q, want %q", one.Event.Created, want)
		}
		checkTimes("GET event", g.body)
	}
	for _, p := range []string{"/v1/tenants/acme", "/v1/event-types", "/v1/tenants/acme/endpoints", "/v1/tenants/acme/endpoints/" + ep.ID, "/v1/tenants/acme/events", "/v1/tenants/acme/deliveries"} {
		checkTimes(p, e.must(req{method: "GET", path: p}, 200, nil).body)
	}
}
