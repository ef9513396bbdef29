package storage

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// Samples of every record kind, with every field set.
var (
	sampleTenant    = engine.Tenant{ID: "acme", Name: "Acme — Ünïcode", Environment: engine.EnvironmentTest, Created: t0, Updated: t0.Add(time.Hour)}
	sampleEventType = engine.EventType{Name: "order.created", Description: "An order was created.", Created: t0, Updated: t0}
	// sampleEventTypeSchema has a status and a schema (a later release:
	// the older records have neither).
	sampleEventTypeSchema = engine.EventType{Name: "order.created", Description: "An order was created.", Created: t0, Updated: t0,
		Status: engine.EventTypeDeprecated, Schema: []byte(`{"type":"object","required":["id"]}`), Example: []byte(`{"id":"o_1"}`)}
	sampleEndpoint = engine.Endpoint{
		ID: "ep_01hzzzzzzzzzzzzzzzzzzzzzzz", TenantID: "acme", URL: "https://example.com/hook?x=1",
		EventTypes: []string{"order.created", "order.shipped"}, Description: "main", Disabled: true,
		Created: t0, Updated: t0.Add(time.Second),
		VerificationRequired: true, Verified: t0.Add(2 * time.Second),
		Secrets:         []engine.Secret{{Key: "whsec_new"}, {Key: "whsec_old", Expires: t0.Add(24 * time.Hour)}},
		SecretReveals:   []engine.SecretReveal{{At: t0.Add(3 * time.Second), By: "admin"}, {At: t0.Add(4*time.Second + time.Nanosecond), By: "token tok_1"}},
		Headers:         engine.CustomHeaders{{Name: "Authorization", Value: "sealed:v1:AAAA", Sealed: true}, {Name: "X-Tenant", Value: "sealed:v1:looks sealed, is plain"}},
		RateLimit:       engine.RateLimit{PerSecond: 2.5, Burst: 4},
		SendTraceparent: true,
	}
	sampleEvent = engine.Event{
		ID: "evt_01hzzzzzzzzzzzzzzzzzzzzzzz", TenantID: "acme", Type: "order.created",
		Created: t0.Add(123 * time.Millisecond), APIVersion: "v1", Sequence: 1 << 40, OrderingKey: "order 7 é",
		Body: []byte("{\"id\":\"evt_1\",  \"data\":{\"a\":\"\\u00e9\"}}\n\xff"),
	}
	sampleDelivery = engine.Delivery{
		ID: "dlv_01hzzzzzzzzzzzzzzzzzzzzzzz", TenantID: "acme", EventID: sampleEvent.ID,
		EventType: "order.created", EndpointID: sampleEndpoint.ID, State: engine.StateDead,
		Cycle: 2, CycleStart: t0.Add(time.Hour), CycleAttempts: 3, NextAttemptAt: t0.Add(2 * time.Hour),
		LastStatus: 503, Reason: "HTTP 503", DeadAt: t0.Add(3 * time.Hour),
		Created: t0, Updated: t0.Add(3 * time.Hour),
		Attempts: []engine.Attempt{{
			Cycle: 1, Number: 1, Start: t0.Add(time.Nanosecond), Duration: 1500 * time.Microsecond,
			Status: 503, Error: "service unavailable", Response: "try later", Outcome: engine.OutcomeRetry,
			RetryAfter: 30 * time.Second,
		}, {Cycle: 2, Number: 1, Start: t0.Add(time.Hour), Outcome: engine.OutcomeRetry}},
		Replays: []engine.Replay{{At: t0.Add(time.Hour), By: "admin", Cycle: 2}},
	}
	// sampleDeliveryHeaders has attempts with response headers, none
	// (nil) and an empty list: formatV6.
	sampleDeliveryHeaders = func() engine.Delivery {
		d := sampleDelivery
		d.Attempts = []engine.Attempt{d.Attempts[0], d.Attempts[1], d.Attempts[1]}
		d.Attempts[0].ResponseHeaders = []engine.Header{{Name: "Content-Type", Value: "text/plain"}, {Name: "Server", Value: "Ünïcode ☃"}, {Name: "X-Empty"}}
		d.Attempts[2].ResponseHeaders = []engine.Header{}
		return d
	}()
	// sampleChannels are the channels of the samples of an event on
	// channels, its delivery and an endpoint that filters on them.
	sampleChannels      = []string{"project_123", "Org-7.eu"}
	sampleEventChannels = func() engine.Event { ev := sampleEvent; ev.Channels = sampleChannels; return ev }()
	// sampleEventTraced is sampleEvent whose ingest was traced, and
	// scheduled: the trace after the deliver_at (formatV4).
	sampleEventTraced = func() engine.Event {
		ev := sampleEvent
		ev.DeliverAt = t0.Add(time.Hour)
		ev.IngestTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		return ev
	}()
	sampleDeliveryChannels = func() engine.Delivery { d := sampleDelivery; d.Channels = sampleChannels; return d }()
	sampleEndpointChannels = func() engine.Endpoint { ep := sampleEndpoint; ep.Channels = sampleChannels; return ep }()
	sampleIdempotency      = idempotencyRecord{EventID: sampleEvent.ID, RequestHash: [32]byte{1, 2, 3, 31: 0xff}, Expires: t0.Add(24 * time.Hour)}
	// sampleDeliveryBoth is on channels with response headers: the
	// channels after the flags, then the headers (formatV6).
	sampleDeliveryBoth = func() engine.Delivery { d := sampleDeliveryHeaders; d.Channels = sampleChannels; return d }()
	// sampleTestDelivery is sampleDelivery of a test event, ordered
	// (formatV5); samplePolicyDelivery that following a retry policy
	// other than the standard one (formatV7), samplePolicyHeaders the
	// same with response headers.
	sampleTestDelivery = func() engine.Delivery {
		d := sampleDelivery
		d.Sequence, d.Line, d.PreviousSequence, d.Test = 7, "key:o", 6, true
		return d
	}()
	samplePolicyDelivery = func() engine.Delivery {
		d := sampleTestDelivery
		d.RetryPolicy = "extended"
		return d
	}()
	samplePolicyHeaders = func() engine.Delivery {
		d := sampleDeliveryHeaders
		d.RetryPolicy = "nightly-long"
		return d
	}()
	samplePolicyTenant = func() engine.Tenant {
		t := sampleTenant
		t.RetryPolicy = "nightly-long"
		return t
	}()
	// sampleOperationalEndpoint is an operational endpoint, which says
	// who manages it (engine.Endpoint.Source).
	sampleOperationalEndpoint = func() engine.Endpoint {
		ep := sampleEndpoint
		ep.TenantID, ep.Source = engine.OperatorTenant, engine.SourceAPI
		return ep
	}()
	samplePolicyEndpoint = func() engine.Endpoint {
		ep := sampleEndpoint
		ep.RetryPolicy = "extended"
		return ep
	}()
	// sampleDeliveryBackfill was made by a backfill (formatV5, its
	// record after the flags); sampleDeliveryBackfillAll also on
	// channels, with response headers (formatV6: channels, backfill,
	// headers).
	sampleDeliveryBackfill = func() engine.Delivery {
		d := sampleDelivery
		d.Backfill = &engine.Backfill{At: t0.Add(2*time.Hour + time.Nanosecond), By: "token tok_1 ☃"}
		return d
	}()
	sampleDeliveryBackfillAll = func() engine.Delivery {
		d := sampleDeliveryBoth
		d.Backfill = sampleDeliveryBackfill.Backfill
		return d
	}()
	// sampleDeliveryBackfillPolicy is sampleDeliveryBackfillAll
	// following a retry policy (formatV7: the policy after the headers).
	sampleDeliveryBackfillPolicy = func() engine.Delivery {
		d := sampleDeliveryBackfillAll
		d.RetryPolicy = "extended"
		return d
	}()
)

// encodeEventV2 encodes ev as a webhookd of schema 3 wrote it
// (formatV2): no sequence, no ordering key.
func encodeEventV2(ev engine.Event) []byte {
	b := []byte{formatV2}
	b = appendString(b, ev.ID)
	b = appendString(b, ev.TenantID)
	b = appendString(b, ev.Type)
	b = appendTime(b, ev.Created)
	b = appendString(b, ev.APIVersion)
	return append(b, ev.Body...)
}

// TestDecodeEvent_formatV2 reads an event record written before schema
// 4: no sequence, no ordering key, the same body.
func TestDecodeEvent_formatV2(t *testing.T) {
	b := encodeEventV2(sampleEvent)
	want := sampleEvent
	want.Sequence, want.OrderingKey = 0, ""
	got, err := decodeEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decodeEvent(formatV2) =\n%+v\nwant\n%+v", got, want)
	}
	if body, err := eventBody(b); err != nil || !bytes.Equal(body, want.Body) {
		t.Errorf("eventBody(formatV2) = %q, %v", body, err)
	}
}

func TestEncoding_roundTrip(t *testing.T) {
	tests := []struct {
		name    string
		version byte
		rawTail bool // the record ends with raw bytes: cut short, it may still decode
		value   any
		encode  func() ([]byte, error)
		decode  func([]byte) (any, error)
	}{
		{"tenant", formatV1, false, sampleTenant,
			func() ([]byte, error) { return encodeTenant(sampleTenant) },
			func(b []byte) (any, error) { return decodeTenant(b) }},
		{"event type", formatV1, false, sampleEventType,
			func() ([]byte, error) { return encodeEventType(sampleEventType) },
			func(b []byte) (any, error) { return decodeEventType(b) }},
		{"event type with a status and a schema", formatV1, false, sampleEventTypeSchema,
			func() ([]byte, error) { return encodeEventType(sampleEventTypeSchema) },
			func(b []byte) (any, error) { return decodeEventType(b) }},
		{"endpoint", formatV1, false, sampleEndpoint,
			func() ([]byte, error) { return encodeEndpoint(sampleEndpoint) },
			func(b []byte) (any, error) { return decodeEndpoint(b) }},
		{"event", formatV3, true, sampleEvent,
			func() ([]byte, error) { return encodeEvent(sampleEvent) },
			func(b []byte) (any, error) { return decodeEvent(b) }},
		{"event with empty body", formatV3, true, engine.Event{ID: "e", TenantID: "t", Body: []byte{}},
			func() ([]byte, error) { return encodeEvent(engine.Event{ID: "e", TenantID: "t"}) },
			func(b []byte) (any, error) { return decodeEvent(b) }},
		{"delivery", formatV2, false, sampleDelivery,
			func() ([]byte, error) { return encodeDelivery(sampleDelivery) },
			func(b []byte) (any, error) { return decodeDelivery(b) }},
		{"delivery with response headers", formatV6, false, sampleDeliveryHeaders,
			func() ([]byte, error) { return encodeDelivery(sampleDeliveryHeaders) },
			func(b []byte) (any, error) { return decodeDelivery(b) }},
		{"event on channels", formatV4, true, sampleEventChannels,
			func() ([]byte, error) { return encodeEvent(sampleEventChannels) },
			func(b []byte) (any, error) { return decodeEvent(b) }},
		{"event traced", formatV4, true, sampleEventTraced,
			func() ([]byte, error) { return encodeEvent(sampleEventTraced) },
			func(b []byte) (any, error) { return decodeEvent(b) }},
		{"delivery on channels", formatV5, false, sampleDeliveryChannels,
			func() ([]byte, error) { return encodeDelivery(sampleDeliveryChannels) },
			func(b []byte) (any, error) { return decodeDelivery(b) }},
		{"endpoint with channels", formatV1, false, sampleEndpointChannels,
			func() ([]byte, error) { return encodeEndpoint(sampleEndpointChannels) },
			func(b []byte) (any, error) { return decodeEndpoint(b) }},
		{"delivery on channels with response headers", formatV6, false, sampleDeliveryBoth,
			func() ([]byte, error) { return encodeDelivery(sampleDeliveryBoth) },
			func(b []byte) (any, error) { return decodeDelivery(b) }},
		{"delivery of a test event", formatV5, false, sampleTestDelivery,
			func() ([]byte, error) { return encodeDelivery(sampleTestDelivery) },
			func(b []byte) (any, error) { return decodeDelivery(b) }},
		{"delivery following a retry policy", formatV7, false, samplePolicyDelivery,
			func() ([]byte, error) { return encodeDelivery(samplePolicyDelivery) },
			func(b []byte) (any, error) { return decodeDelivery(b) }},
		{"delivery with response headers following a retry policy", formatV7, false, samplePolicyHeaders,
			func() ([]byte, error) { return encodeDelivery(samplePolicyHeaders) },
			func(b []byte) (any, error) { return decodeDelivery(b) }},
		{"tenant with a retry policy", formatV1, false, samplePolicyTenant,
			func() ([]byte, error) { return encodeTenant(samplePolicyTenant) },
			func(b []byte) (any, error) { return decodeTenant(b) }},
		{"endpoint with a retry policy", formatV1, false, samplePolicyEndpoint,
			func() ([]byte, error) { return encodeEndpoint(samplePolicyEndpoint) },
			func(b []byte) (any, error) { return decodeEndpoint(b) }},
		{"operational endpoint", formatV1, false, sampleOperationalEndpoint,
			func() ([]byte, error) { return encodeEndpoint(sampleOperationalEndpoint) },
			func(b []byte) (any, error) { return decodeEndpoint(b) }},
		{"delivery made by a backfill", formatV5, false, sampleDeliveryBackfill,
			func() ([]byte, error) { return encodeDelivery(sampleDeliveryBackfill) },
			func(b []byte) (any, error) { return decodeDelivery(b) }},
		{"backfilled delivery on channels with response headers", formatV6, false, sampleDeliveryBackfillAll,
			func() ([]byte, error) { return encodeDelivery(sampleDeliveryBackfillAll) },
			func(b []byte) (any, error) { return decodeDelivery(b) }},
		{"backfilled delivery following a retry policy", formatV7, false, sampleDeliveryBackfillPolicy,
			func() ([]byte, error) { return encodeDelivery(sampleDeliveryBackfillPolicy) },
			func(b []byte) (any, error) { return decodeDelivery(b) }},
		{"idempotency", formatV1, false, sampleIdempotency,
			func() ([]byte, error) { return encodeIdempotency(sampleIdempotency), nil },
			func(b []byte) (any, error) { return decodeIdempotency(b) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.encode()
			if err != nil {
				t.Fatal(err)
			}
			if b[0] != tt.version {
				t.Errorf("version byte = %d, want %d", b[0], tt.version)
			}
			got, err := tt.decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.value) {
				t.Errorf("decode(encode(x)) =\n%+v\nwant\n%+v", got, tt.value)
			}
			bad := [][]byte{nil, {}, {9}, append([]byte{9}, b[1:]...)}
			if !tt.rawTail {
				bad = append(bad, b[:len(b)/2])
			}
			for _, data := range bad {
				if _, err := tt.decode(data); err == nil {
					t.Errorf("decode(%q) succeeded", data)
				}
			}
		})
	}
}

// TestEncodeEndpoint_headers: a custom header's value is stored under
// "sealed" when it is sealed and "value" when it is not, so that no
// value, whatever its text, is taken for the other; an endpoint without
// headers has no "headers", as before there were any.
func TestEncodeEndpoint_headers(t *testing.T) {
	b, err := encodeEndpoint(sampleEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	want := `"headers":[{"name":"Authorization","sealed":"sealed:v1:AAAA"},{"name":"X-Tenant","value":"sealed:v1:looks sealed, is plain"}]`
	if !strings.Contains(string(b), want) {
		t.Errorf("record %s\ndoes not hold %s", b, want)
	}
	none := sampleEndpoint
	none.Headers = nil
	if b, _ := encodeEndpoint(none); strings.Contains(string(b), "headers") {
		t.Errorf("an endpoint without headers is stored as %s", b)
	}
	for _, rec := range []string{
		`{"id":"ep_1","tenant":"acme","headers":[{"name":"X-A"}]}`,
		`{"id":"ep_1","tenant":"acme","headers":[{"name":"X-A","value":"a","sealed":"sealed:v1:AAAA"}]}`,
	} {
		if _, err := decodeEndpoint(append([]byte{formatV1}, rec...)); err == nil {
			t.Errorf("decodeEndpoint(%s) took a header with no value, or with two", rec)
		}
	}
}

func TestDecodeEvent_bodyVerbatim(t *testing.T) {
	b, err := encodeEvent(sampleEvent)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(b, sampleEvent.Body) {
		t.Errorf("record %q does not end with the body verbatim", b)
	}
	ev, err := decodeEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] = 'X' // the decoded body must not alias the record
	if !bytes.Equal(ev.Body, sampleEvent.Body) {
		t.Errorf("body = %q, want %q", ev.Body, sampleEvent.Body)
	}
}

// TestEventBody: the body an attempt reads without decoding the header is
// decodeEventHeader's, for both formats and every truncation of a record;
// a record whose header is cut short is refused by both.
func TestEventBody(t *testing.T) {
	v2, err := encodeEvent(sampleEvent)
	if err != nil {
		t.Fatal(err)
	}
	h := []byte(`{"id":"` + sampleEvent.ID + `","tenant":"acme","type":"order.created","created":"2030-01-02T03:04:05Z","api_version":"v1"}`)
	v1 := append([]byte{formatV1, 0, 0, 0, byte(len(h))}, h...)
	v1 = append(v1, sampleEvent.Body...)
	for name, rec := range map[string][]byte{"v2": v2, "v1": v1} {
		for n := 0; n <= len(rec); n++ {
			_, want, werr := decodeEventHeader(rec[:n])
			got, gerr := eventBody(rec[:n])
			if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
				t.Errorf("%s cut to %d bytes: eventBody = %q, %v; decodeEventHeader = %q, %v", name, n, got, gerr, want, werr)
			}
		}
		if got, _ := eventBody(rec); !bytes.Equal(got, sampleEvent.Body) {
			t.Errorf("%s: body = %q, want %q", name, got, sampleEvent.Body)
		}
	}
}

// TestEventAttempt: what an attempt reads of an event record is its
// body and its ingest's trace, as decodeEventHeader reads them, in every
// format, cut short or not.
func TestEventAttempt(t *testing.T) {
	for _, ev := range []engine.Event{sampleEvent, sampleEventChannels, sampleEventTraced} {
		rec, err := encodeEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n <= len(rec); n++ {
			whole, want, werr := decodeEventHeader(rec[:n])
			got, trace, gerr := eventAttempt(rec[:n])
			if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) || trace != whole.IngestTrace {
				t.Errorf("format %d cut to %d bytes: eventAttempt = %q, %q, %v; decodeEventHeader = %q, %q, %v", rec[0], n, got, trace, gerr, want, whole.IngestTrace, werr)
			}
		}
		if body, trace, err := eventAttempt(rec); err != nil || !bytes.Equal(body, ev.Body) || trace != ev.IngestTrace {
			t.Errorf("eventAttempt = %q, %q, %v; want %q, %q", body, trace, err, ev.Body, ev.IngestTrace)
		}
	}
}

func TestKeys(t *testing.T) {
	t.Run("retry key order", func(t *testing.T) {
		keys := [][]byte{
			retryKey(time.Unix(0, -5), "dlv_a"), // before 1970: clamped to 0
			retryKey(time.Unix(0, 0), "dlv_b"),
			retryKey(t0, "dlv_a"),
			retryKey(t0, "dlv_b"),
			retryKey(t0.Add(time.Nanosecond), "dlv_a"),
			retryKey(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), "dlv_a"), // after 2262: clamped
		}
		for i := 1; i < len(keys); i++ {
			if bytes.Compare(keys[i-1], keys[i]) >= 0 {
				t.Errorf("key %d %x does not sort before key %d %x", i-1, keys[i-1], i, keys[i])
			}
		}
		due, id, err := decodeRetryKey(retryKey(t0, "dlv_x"))
		if err != nil || due != t0 || id != "dlv_x" {
			t.Errorf("decodeRetryKey = %v, %q, %v", due, id, err)
		}
	})
	t.Run("tenant prefixes do not overlap", func(t *testing.T) {
		if bytes.HasPrefix(endpointKey("ab", "ep_1"), tenantPrefix("a")) {
			t.Error(`tenant "ab"'s key has tenant "a"'s prefix`)
		}
	})
	t.Run("cursor", func(t *testing.T) {
		s := deadLetterSuffix(t0, "dlv_1")
		got, err := decodeCursor(encodeCursor(s))
		if err != nil || !bytes.Equal(got, s) {
			t.Errorf("decodeCursor = %x, %v; want %x", got, err, s)
		}
		for _, bad := range []string{"***", encodeCursor([]byte("short"))} {
			if _, err := decodeCursor(bad); err == nil {
				t.Errorf("decodeCursor(%q) succeeded", bad)
			}
		}
	})
	t.Run("expiry key", func(t *testing.T) {
		exp, ik, err := decodeExpiryKey(expiryKey(t0, "acme", "key\x01"))
		if err != nil || keyTime(exp) != t0 || !bytes.Equal(ik, idempotencyKey("acme", "key\x01")) {
			t.Errorf("decodeExpiryKey = %v, %q, %v", keyTime(exp), ik, err)
		}
	})
}

// fuzzRecord checks that decode never panics and that what it accepts
// encodes to a record that decodes and encodes to the same bytes again.
func fuzzRecord[T any](f *testing.F, seeds [][]byte, decode func([]byte) (T, error), encode func(T) ([]byte, error)) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add([]byte{})
	f.Add([]byte{formatV1})
	f.Add([]byte{formatV1, '{', '}'})
	f.Add([]byte{formatV1, 0, 0, 0, 2, '{', '}'})
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := decode(data)
		if err != nil {
			return
		}
		b1, err := encode(v)
		if err != nil {
			return // e.g. a time that moves out of years 0-9999 in UTC
		}
		v2, err := decode(b1)
		if err != nil {
			t.Fatalf("decode(encode(decode(%q))): %v", data, err)
		}
		b2, err := encode(v2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("encoding is not stable: %q then %q (%v)", b1, b2, err)
		}
	})
}

func seed[T any](v T, encode func(T) ([]byte, error)) [][]byte {
	b, err := encode(v)
	if err != nil {
		panic(err)
	}
	return [][]byte{b}
}

func FuzzDecodeTenant(f *testing.F) {
	fuzzRecord(f, append(seed(sampleTenant, encodeTenant), seed(samplePolicyTenant, encodeTenant)...), decodeTenant, encodeTenant)
}

// TestTenantRetryPolicy: ingest's shortcut to a tenant record's retry
// policy reads what decodeTenant reads, for a tenant with one, one
// without, and one whose name holds the field's name.
func TestTenantRetryPolicy(t *testing.T) {
	tricky := sampleTenant
	tricky.Name = `"retry_policy": "extended"`
	for _, tn := range []engine.Tenant{sampleTenant, samplePolicyTenant, tricky} {
		b, err := encodeTenant(tn)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tenantRetryPolicy(b)
		if err != nil || got != tn.RetryPolicy {
			t.Errorf("tenantRetryPolicy(%s) = %q, %v; want %q", b, got, err, tn.RetryPolicy)
		}
	}
	if _, err := tenantRetryPolicy([]byte{formatV1, '{', '"', 'r'}); err != nil {
		t.Errorf("a record that does not name the field: %v, want no error (it is not read)", err)
	}
	if _, err := tenantRetryPolicy(append([]byte{formatV1}, `{"retry_policy":1}`...)); err == nil {
		t.Error("a record whose retry_policy does not decode: no error")
	}
}

func FuzzDecodeEventType(f *testing.F) {
	fuzzRecord(f, append(seed(sampleEventType, encodeEventType), seed(sampleEventTypeSchema, encodeEventType)...), decodeEventType, encodeEventType)
}

func FuzzDecodeEndpoint(f *testing.F) {
	seeds := append(seed(sampleEndpoint, encodeEndpoint), seed(sampleEndpointChannels, encodeEndpoint)...)
	fuzzRecord(f, append(seeds, seed(samplePolicyEndpoint, encodeEndpoint)...), decodeEndpoint, encodeEndpoint)
}

func FuzzDecodeEvent(f *testing.F) {
	fuzzRecord(f, slices.Concat(seed(sampleEvent, encodeEvent), seed(sampleEventChannels, encodeEvent), seed(sampleEventTraced, encodeEvent)), decodeEvent, encodeEvent)
}

func FuzzDecodeDelivery(f *testing.F) {
	seeds := seed(sampleDelivery, encodeDelivery)
	pending := sampleDelivery
	pending.State, pending.DeadAt, pending.Attempts, pending.Replays = engine.StatePending, time.Time{}, []engine.Attempt{}, nil
	seeds = append(seeds, seed(pending, encodeDelivery)...)
	seeds = append(seeds, seed(sampleDeliveryHeaders, encodeDelivery)...)
	seeds = append(seeds, seed(sampleDeliveryChannels, encodeDelivery)...)
	seeds = append(seeds, seed(sampleDeliveryBoth, encodeDelivery)...)
	seeds = append(seeds, seed(samplePolicyDelivery, encodeDelivery)...)
	seeds = append(seeds, seed(samplePolicyHeaders, encodeDelivery)...)
	seeds = append(seeds, seed(sampleDeliveryBackfill, encodeDelivery)...)
	seeds = append(seeds, seed(sampleDeliveryBackfillAll, encodeDelivery)...)
	seeds = append(seeds, seed(sampleDeliveryBackfillPolicy, encodeDelivery)...)
	fuzzRecord(f, seeds, decodeDelivery, encodeDelivery)
}

func FuzzDecodeIdempotency(f *testing.F) {
	enc := func(r idempotencyRecord) ([]byte, error) { return encodeIdempotency(r), nil }
	fuzzRecord(f, seed(sampleIdempotency, enc), decodeIdempotency, enc)
}

func FuzzDecodeRetryKey(f *testing.F) {
	f.Add(retryKey(t0, "dlv_1"))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, k []byte) {
		due, id, err := decodeRetryKey(k)
		if err != nil {
			return
		}
		if got := retryKey(due, id); len(got) != len(k) || !bytes.Equal(got[8:], k[8:]) {
			t.Fatalf("retryKey(decodeRetryKey(%x)) = %x", k, got)
		}
	})
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor(deadLetterSuffix(t0, "dlv_1")))
	f.Add("")
	f.Add("====")
	f.Fuzz(func(t *testing.T, cursor string) {
		s, err := decodeCursor(cursor)
		if err != nil {
			return
		}
		if _, _, err := decodeDeadLetterSuffix(s); err != nil {
			t.Fatalf("decodeCursor(%q) accepted a bad suffix %x", cursor, s)
		}
	})
}

func FuzzDecodeExpiryKey(f *testing.F) {
	f.Add(expiryKey(t0, "acme", "k"))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 'k'})
	f.Fuzz(func(t *testing.T, k []byte) {
		_, ik, err := decodeExpiryKey(k)
		if err != nil {
			return
		}
		if i := bytes.IndexByte(ik, sep); i < 1 {
			t.Fatalf("decodeExpiryKey(%x) accepted a key without a tenant: %q", k, ik)
		}
	})
}

func FuzzDecodeSeq(f *testing.F) {
	f.Add(u64(42))
	f.Fuzz(func(t *testing.T, v []byte) {
		n, err := decodeSeq(v)
		if err == nil && !bytes.Equal(u64(n), v) {
			t.Fatalf("decodeSeq(%x) = %d", v, n)
		}
	})
}

// TestDecode_formatV1 checks that deliveries and events written before
// formatV2, as JSON, still decode to what was written, and that every
// truncation of a formatV2 delivery is refused.
func TestDecode_formatV1(t *testing.T) {
	d := sampleDelivery
	r := deliveryRecord{
		ID: d.ID, TenantID: d.TenantID, EventID: d.EventID, EventType: d.EventType,
		EndpointID: d.EndpointID, State: string(d.State), Cycle: d.Cycle, CycleStart: d.CycleStart,
		CycleAttempts: d.CycleAttempts, NextAttemptAt: d.NextAttemptAt, LastStatus: d.LastStatus,
		Reason: d.Reason, DeadAt: d.DeadAt, Created: d.Created, Updated: d.Updated,
	}
	for _, a := range d.Attempts {
		r.Attempts = append(r.Attempts, attemptRecord{Cycle: a.Cycle, Number: a.Number, Start: a.Start,
			DurationNS: int64(a.Duration), Status: a.Status, Error: a.Error, Response: a.Response,
			Outcome: string(a.Outcome), RetryAfter: int64(a.RetryAfter)})
	}
	for _, rp := range d.Replays {
		r.Replays = append(r.Replays, replayRecord{At: rp.At, By: rp.By, Cycle: rp.Cycle})
	}
	v1, err := encodeJSON(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeDelivery(v1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, d) {
		t.Errorf("v1 delivery decoded as\n%+v\nwant\n%+v", got, d)
	}

	ev := sampleEvent
	ev.Sequence, ev.OrderingKey = 0, "" // written before events were numbered
	h := []byte(`{"id":"` + ev.ID + `","tenant":"acme","type":"order.created","created":"` +
		ev.Created.Format(time.RFC3339Nano) + `","api_version":"v1"}`)
	rec := append([]byte{formatV1, 0, 0, 0, byte(len(h))}, h...)
	rec = append(rec, ev.Body...)
	gotEv, err := decodeEvent(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotEv, ev) {
		t.Errorf("v1 event decoded as\n%+v\nwant\n%+v", gotEv, ev)
	}

	v2, err := encodeDelivery(d)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(v2) {
		if _, err := decodeDelivery(v2[:n]); err == nil {
			t.Errorf("delivery cut to %d of %d bytes decoded", n, len(v2))
		}
	}
	if _, err := decodeDelivery(append(v2, 0)); err == nil {
		t.Error("delivery with a trailing byte decoded")
	}
	v6, err := encodeDelivery(sampleDeliveryHeaders)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(v6) {
		if _, err := decodeDelivery(v6[:n]); err == nil {
			t.Errorf("formatV6 delivery cut to %d of %d bytes decoded", n, len(v6))
		}
	}
}

// TestEncodeDelivery_formats: a delivery is written in the oldest
// format that holds what it has, so that a record a webhookd of an older
// schema could read is written as it wrote it; one whose attempts kept
// response headers is formatV6, with its flags even when it has none.
func TestEncodeDelivery_formats(t *testing.T) {
	base := engine.Delivery{ID: "dlv_1", TenantID: "acme", State: engine.StatePending,
		Attempts: []engine.Attempt{{Cycle: 1, Number: 1, Status: 503, Outcome: engine.OutcomeRetry}}}
	withHeaders := func(d engine.Delivery) engine.Delivery {
		d.Attempts = slices.Clone(d.Attempts)
		d.Attempts[0].ResponseHeaders = []engine.Header{{Name: "Date", Value: "Mon, 02 Jan 2006 15:04:05 GMT"}}
		return d
	}
	test := base
	test.Test = true
	for _, tt := range []struct {
		name string
		d    engine.Delivery
		want byte
	}{
		{"plain", base, formatV2},
		{"a test delivery", test, formatV5},
		{"headers", withHeaders(base), formatV6},
		{"a test delivery with headers", withHeaders(test), formatV6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, err := encodeDelivery(tt.d)
			if err != nil {
				t.Fatal(err)
			}
			if v[0] != tt.want {
				t.Errorf("format %d, want %d", v[0], tt.want)
			}
			got, err := decodeDelivery(v)
			if err != nil || !reflect.DeepEqual(got, tt.d) {
				t.Errorf("decoded %+v, %v\nwant %+v", got, err, tt.d)
			}
		})
	}
}

// TestDecode_unknownFlags: a record with a flag this webhookd does not
// know is refused, not read as if the flag were not there.
func TestDecode_unknownFlags(t *testing.T) {
	ev := engine.Event{ID: "evt_1", TenantID: "acme", Type: "order.created", Created: t0, APIVersion: "v1", Test: true, Body: []byte(`{}`)}
	v, err := encodeEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeEvent(v); err != nil || !got.Test {
		t.Fatalf("decodeEvent of a test event: %+v, %v", got, err)
	}
	i := len(v) - len(ev.Body) - 1 // the flags, one byte
	v[i] = 4
	if _, err := decodeEvent(v); err == nil || !strings.Contains(err.Error(), "unknown flags") {
		t.Errorf("decodeEvent with flag 4: %v", err)
	}
	d := engine.Delivery{ID: "dlv_1", TenantID: "acme", State: engine.StatePending, Test: true}
	if v, err = encodeDelivery(d); err != nil {
		t.Fatal(err)
	}
	if got, err := decodeDelivery(v); err != nil || !got.Test {
		t.Fatalf("decodeDelivery of a test delivery: %+v, %v", got, err)
	}
	v[len(v)-1] = 17 // flagTest and 1<<4, an event's (flagTraced), never a delivery's
	if _, err := decodeDelivery(v); err == nil || !strings.Contains(err.Error(), "unknown flags") {
		t.Errorf("decodeDelivery with flags 17: %v", err)
	}
	// flagBackfill (4) is a delivery's, never an event's: above, an
	// event with it was refused.
}
