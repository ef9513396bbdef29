package postgres

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/sealing"
)

// goldenKey is the secret key the sealed golden secrets are sealed with.
var goldenKey = []byte("0123456789abcdef0123456789abcdef")

// The values of the golden documents in testdata/documents, each written
// by the code of the release that first stored it. A document in a golden
// file must always decode to its value here and encode back to its bytes:
// a change that breaks that changes what is on disk, and needs a new
// format (and a migration) instead.
var (
	goldenT0 = time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	goldenT1 = goldenT0.Add(90*time.Minute + 7*time.Nanosecond)
	goldenT2 = goldenT0.Add(26 * time.Hour)

	goldenTenant = engine.Tenant{
		ID: "acme.eu", Name: "Acme <EU> & Co \u2028 \"quoted\"", Environment: engine.EnvironmentTest,
		Created: goldenT0, Updated: goldenT1,
	}
	// goldenDeletedTenant is what Import writes for a deleted tenant.
	goldenDeletedTenant = engine.Tenant{ID: "gone", Environment: engine.EnvironmentLive}

	goldenEventType = engine.EventType{
		Name: "order.created", Description: "An order was placed — at the till or online.",
		// As it comes back: encoding/json escapes <, > and & in the
		// example it stores.
		Example: json.RawMessage(`{"order":"o_1","lines":[{"sku":"A-1","qty":2}],"total":12.5,"note":"\u003cb\u003e\u0026\u003c/b\u003e"}`),
		Created: goldenT0, Updated: goldenT1,
	}
	goldenEventTypePlain = engine.EventType{Name: "order.shipped", Created: goldenT0, Updated: goldenT0}
	// goldenEventTypeSchema is goldenEventType deprecated, with a
	// schema (added in a later release: the older documents have no
	// "status" and no "schema"). As it comes back: encoding/json
	// escapes <, > and & in the schema too.
	goldenEventTypeSchema = func() engine.EventType {
		et := goldenEventType
		et.Status = engine.EventTypeDeprecated
		et.Schema = json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","required":["order","lines"],"properties":{"order":{"type":"string","pattern":"^o_"},"lines":{"type":"array","items":{"$ref":"#/$defs/line"}},"note":{"description":"free text, \u003cb\u003e allowed"}},"$defs":{"line":{"type":"object","required":["sku"],"properties":{"sku":{"type":"string"},"qty":{"type":"integer","minimum":1}}}}}`)
		return et
	}()

	// goldenEndpoint has every field set: health, a disabling, a
	// verification and ordering.
	goldenEndpoint = engine.Endpoint{
		ID: "ep_01JH0000000000000000000001", TenantID: "acme", URL: "https://hooks.example.com/acme?x=1&y=<2>",
		EventTypes: []string{"order.created", "order.shipped"}, Description: "Orders — main",
		Disabled: true, DisabledReason: "failing every attempt since 2030-01-02T03:04:05Z", DisabledAt: goldenT2,
		FailingSince: goldenT0, LastFailure: "HTTP 503: upstream \"busy\"", LastFailureAt: goldenT1,
		Created: goldenT0, Updated: goldenT2,
		VerificationRequired: true, Verified: goldenT1,
		Ordering: engine.OrderingKey, OnDead: engine.OnDeadBlock,
	}
	// goldenEndpointRevealed is goldenEndpoint after its secrets were
	// revealed twice (the audit trail, added in a later release: the
	// older documents have no "secret_reveals").
	goldenEndpointRevealed = func() engine.Endpoint {
		ep := goldenEndpoint
		ep.SecretReveals = []engine.SecretReveal{{At: goldenT1, By: "admin"}, {At: goldenT2, By: "token tok_01JH0000000000000000000003"}}
		return ep
	}()
	// goldenEndpointChannels is goldenEndpointNew with a channel filter
	// (added in a later release: the older documents have no
	// "channels").
	goldenEndpointChannels = func() engine.Endpoint {
		ep := goldenEndpointNew
		ep.ID, ep.Channels = "ep_01JH0000000000000000000009", []string{"project_123", "Org-7.eu"}
		return ep
	}()
	// goldenEndpointLimited is goldenEndpointRevealed with a rate limit
	// of its own (added in a later release: the older documents have no
	// "rate_limit").
	goldenEndpointLimited = func() engine.Endpoint {
		ep := goldenEndpointRevealed
		ep.RateLimit = engine.RateLimit{PerSecond: 2.5, Burst: 4}
		return ep
	}()
	// goldenEndpointOperational is an operational endpoint, which says
	// who manages it (added in a later release: the older documents
	// have no "source").
	goldenEndpointOperational = func() engine.Endpoint {
		ep := goldenEndpointNew
		ep.ID, ep.TenantID, ep.Source = "ep_01JH000000000000000000000E", engine.OperatorTenant, engine.SourceConfig
		ep.EventTypes = []string{engine.OpEndpointFailing, engine.OpEndpointDisabled, engine.OpDeliveryDead}
		return ep
	}()
	// goldenEndpointTraceparent is goldenEndpointNew that sends each
	// attempt's traceparent (added in a later release: the older
	// documents have no "send_traceparent").
	goldenEndpointTraceparent = func() engine.Endpoint {
		ep := goldenEndpointNew
		ep.ID, ep.SendTraceparent = "ep_01JH000000000000000000000F", true
		return ep
	}()
	// goldenEndpointNew is an endpoint as created: no health, the
	// default ordering and on_dead.
	goldenEndpointNew = engine.Endpoint{
		ID: "ep_01JH0000000000000000000002", TenantID: "acme", URL: "https://hooks.example.com/all",
		EventTypes: []string{"*"}, Created: goldenT0, Updated: goldenT0,
	}
	// goldenSecrets are goldenEndpoint's secrets, in plain: the current
	// one, and an old one in its grace window.
	goldenSecrets = []engine.Secret{
		{Key: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		{Key: "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD", Expires: goldenT2},
	}

	// goldenEndpointSecrets are the secrets of an endpoint with custom
	// headers (the secrets document's format 2, added in a later
	// release), in plain: goldenSecrets and three headers, one of whose
	// values reads like a sealed one.
	goldenEndpointSecrets = endpointSecrets{Keys: goldenSecrets, Headers: engine.CustomHeaders{
		{Name: "Authorization", Value: "Bearer eyJhbGciOiJIUzI1NiJ9.e30.<sig>&\"q\""},
		{Name: "X-Odd", Value: "sealed:v1:a plain value"},
		{Name: "X-Tenant", Value: "acme-eu"},
	}}

	goldenToken = engine.AccessToken{
		ID: "tok_01JH0000000000000000000003", TenantID: "acme", Environment: engine.EnvironmentLive,
		Created: goldenT0, Expires: goldenT2, Revoked: goldenT1,
		Purpose: "portal", ReturnURL: "https://app.example.com/settings/webhooks?tab=1&x=2",
	}
	goldenTokenPlain = engine.AccessToken{
		ID: "tok_01JH0000000000000000000004", TenantID: "acme", Environment: engine.EnvironmentTest,
		Created: goldenT0, Expires: goldenT2,
	}

	// goldenDelivery has every field set: an ordered delivery of a test
	// event, dead at its line's head after attempts in two cycles, a
	// replay and a skip.
	goldenDelivery = engine.Delivery{
		ID: "dlv_01JH0000000000000000000005", TenantID: "acme", EventID: "evt_01JH0000000000000000000006",
		EventType: "order.created", EndpointID: "ep_01JH0000000000000000000001", State: engine.StateDead,
		Sequence: 42, Line: engine.LineKeyPrefix + "order-17", PreviousSequence: 41, Test: true,
		Cycle: 2, CycleStart: goldenT1, CycleAttempts: 2,
		LastStatus: 410, Reason: "HTTP 410 Gone", DeadAt: goldenT2, Created: goldenT0, Updated: goldenT2,
		Attempts: []engine.Attempt{
			{Cycle: 1, Number: 1, Start: goldenT0, Duration: 1500 * time.Millisecond, Error: "dial tcp 192.0.2.1:443: connect: connection refused", Outcome: engine.OutcomeRetry},
			{Cycle: 1, Number: 2, Start: goldenT0.Add(time.Minute), Duration: 250 * time.Millisecond, Status: 503, Response: "<html>busy\x00 & \"later\" \u00e9\u2029</html>", Outcome: engine.OutcomeRetry, RetryAfter: 30 * time.Second},
			{Cycle: 2, Number: 1, Start: goldenT1, Duration: 12 * time.Millisecond, Status: 200, Response: "ok", Outcome: engine.OutcomeSuccess},
			{Cycle: 2, Number: 2, Start: goldenT2, Duration: 9 * time.Millisecond, Status: 410, Error: "HTTP 410 Gone", Outcome: engine.OutcomePermanent},
		},
		Replays: []engine.Replay{{At: goldenT1, By: "admin", Cycle: 2}},
		Skips:   []engine.Skip{{At: goldenT2, By: engine.SkipByOnDead, Cycle: 2}},
	}
	// goldenDeliveryHeaders is a delivery whose attempts kept response
	// headers (engine.KeepResponseHeaders), beside one that kept none.
	goldenDeliveryHeaders = engine.Delivery{
		ID: "dlv_01JH0000000000000000000009", TenantID: "acme", EventID: "evt_01JH000000000000000000000A",
		EventType: "order.created", EndpointID: "ep_01JH0000000000000000000001", State: engine.StateSucceeded,
		Cycle: 1, CycleStart: goldenT0, CycleAttempts: 2, LastStatus: 204, Created: goldenT0, Updated: goldenT1,
		Attempts: []engine.Attempt{
			{Cycle: 1, Number: 1, Start: goldenT0, Duration: 10 * time.Second, Error: "timeout: no answer in 10s", Outcome: engine.OutcomeRetry},
			{Cycle: 1, Number: 2, Start: goldenT1, Duration: 8 * time.Millisecond, Status: 204, Outcome: engine.OutcomeSuccess,
				ResponseHeaders: []engine.Header{
					{Name: "Date", Value: "Wed, 02 Jan 2030 04:34:05 GMT"},
					{Name: "Link", Value: "<https://example.com/é>; rel=\"next\""},
					{Name: "Server", Value: "hooks/1.0 ☃"},
					{Name: "X-Empty", Value: ""},
				}},
		},
		Replays: []engine.Replay{},
	}
	// goldenDeliveryPending is a delivery as an ingest makes it: no
	// attempt yet.
	goldenDeliveryPending = engine.Delivery{
		ID: "dlv_01JH0000000000000000000007", TenantID: "acme", EventID: "evt_01JH0000000000000000000008",
		EventType: "order.shipped", EndpointID: "ep_01JH0000000000000000000002", State: engine.StatePending,
		Cycle: 1, CycleStart: goldenT0, NextAttemptAt: goldenT0, Created: goldenT0, Updated: goldenT0,
	}
	// goldenDeliveryChannels is goldenDeliveryPending's kind of delivery
	// of an event on channels.
	goldenDeliveryChannels = func() engine.Delivery {
		d := goldenDeliveryPending
		d.ID, d.EventID, d.Channels = "dlv_01JH000000000000000000000A", "evt_01JH000000000000000000000B", []string{"project_123", "Org-7.eu"}
		return d
	}()
	// goldenTenantRetryPolicy, goldenEndpointRetryPolicy and
	// goldenDeliveryRetryPolicy name a retry policy (added in a later
	// release: the older documents have no "retry_policy").
	goldenTenantRetryPolicy = func() engine.Tenant {
		t := goldenTenant
		t.RetryPolicy = "extended"
		return t
	}()
	goldenEndpointRetryPolicy = func() engine.Endpoint {
		ep := goldenEndpointNew
		ep.RetryPolicy = "nightly-long"
		return ep
	}()
	goldenDeliveryRetryPolicy = func() engine.Delivery {
		d := goldenDeliveryPending
		d.RetryPolicy = "extended"
		return d
	}()
	// goldenDeliveryBackfill is a delivery a backfill made: of an event
	// created at goldenT0, its cycle started at goldenT1 by a tenant
	// token (engine.Backfill).
	goldenDeliveryBackfill = engine.Delivery{
		ID: "dlv_01JH000000000000000000000C", TenantID: "acme", EventID: "evt_01JH000000000000000000000D",
		EventType: "order.shipped", EndpointID: "ep_01JH0000000000000000000002", State: engine.StatePending,
		Sequence: 3, Channels: []string{"project_123"},
		Cycle: 1, CycleStart: goldenT1, NextAttemptAt: goldenT1, Created: goldenT0, Updated: goldenT1,
		Attempts: []engine.Attempt{}, Replays: []engine.Replay{},
		Backfill: &engine.Backfill{At: goldenT1, By: "token tok_01JH0000000000000000000003"},
	}
	// goldenDeliveryScheduled is a delivery of a scheduled event
	// (deliver_at, added in a later release): its cycle, and its first
	// attempt, at goldenT1.
	goldenDeliveryScheduled = func() engine.Delivery {
		d := goldenDeliveryPending
		d.CycleStart, d.NextAttemptAt, d.DeliverAt = goldenT1, goldenT1, goldenT1
		return d
	}()
	// goldenTask is a backfill task that failed after a resume, with
	// every field set (tasks, added in a later release).
	goldenTask = func() engine.Task {
		total := 12
		return engine.Task{
			ID: "task_01JH000000000000000000000E", Tenant: "acme", Kind: engine.TaskBackfill, State: engine.TaskFailed,
			Params: engine.TaskParams{Since: goldenT0, Until: goldenT1, Endpoint: "ep_01JH0000000000000000000002"},
			Done:   10, Skipped: 2, Total: &total, Waiting: "pending_per_tenant",
			Errors: []engine.TaskError{{At: goldenT1, Message: "the database cannot take writes now; retry later"}},
			Error:  "no such endpoint", By: "token tok_01JH0000000000000000000003", Resumed: 1,
			Started: goldenT0, Updated: goldenT2, Finished: goldenT2,
			Cursor: "8589934592", Owner: "node_01JH000000000000000000000F", LeaseUntil: goldenT2,
		}
	}()
	// goldenTaskPurge is the operator's purge of a tenant, running, as
	// made.
	goldenTaskPurge = engine.Task{
		ID: "task_01JH000000000000000000000G", Kind: engine.TaskPurge, State: engine.TaskRunning,
		Params: engine.TaskParams{Tenant: "gone", Force: true}, Errors: []engine.TaskError{},
		By: "admin", Started: goldenT0, Updated: goldenT0,
		Owner: "node_01JH000000000000000000000F", LeaseUntil: goldenT1,
	}
	// goldenSequence is the Sequence the one-round-trip ingest puts in
	// front of goldenDeliveryPending's document (insertDeliveriesSQL,
	// sequencedDoc).
	goldenSequence uint64 = 7
)

// readGolden returns testdata/documents/name.json without the file's
// final newline (a document has none).
func readGolden(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "documents", name+".json"))
	if err != nil {
		tb.Fatal(err)
	}
	return bytes.TrimSuffix(b, []byte("\n"))
}

// goldenCase is a golden document and its value, with the pair that
// decodes and encodes it.
type goldenCase struct {
	file   string
	want   any
	decode func([]byte) (any, error)
	encode func(any) ([]byte, error)
}

// docPair adapts a typed encode/decode pair to goldenCase's.
func docPair[T any](decode func([]byte) (T, error), encode func(T) ([]byte, error)) (func([]byte) (any, error), func(any) ([]byte, error)) {
	return func(b []byte) (any, error) { return decode(b) },
		func(v any) ([]byte, error) { return encode(v.(T)) }
}

func goldenCases() []goldenCase {
	var cases []goldenCase
	add := func(file string, want any, dec func([]byte) (any, error), enc func(any) ([]byte, error)) {
		cases = append(cases, goldenCase{file, want, dec, enc})
	}
	dec, enc := docPair(decodeTenant, encodeTenant)
	add("tenant", goldenTenant, dec, enc)
	add("tenant-deleted", goldenDeletedTenant, dec, enc)
	add("tenant-retry-policy", goldenTenantRetryPolicy, dec, enc)
	dec, enc = docPair(decodeEventType, encodeEventType)
	add("event-type", goldenEventType, dec, enc)
	add("event-type-plain", goldenEventTypePlain, dec, enc)
	add("event-type-schema", goldenEventTypeSchema, dec, enc)
	dec, enc = docPair(decodeEndpoint, encodeEndpoint)
	add("endpoint", goldenEndpoint, dec, enc)
	add("endpoint-new", goldenEndpointNew, dec, enc)
	add("endpoint-revealed", goldenEndpointRevealed, dec, enc)
	add("endpoint-channels", goldenEndpointChannels, dec, enc)
	add("endpoint-retry-policy", goldenEndpointRetryPolicy, dec, enc)
	add("endpoint-limited", goldenEndpointLimited, dec, enc)
	add("endpoint-operational", goldenEndpointOperational, dec, enc)
	add("endpoint-traceparent", goldenEndpointTraceparent, dec, enc)
	dec, enc = docPair(decodeSecrets, encodeSecrets)
	add("secrets", goldenSecrets, dec, enc)
	add("secrets-none", []engine.Secret(nil), dec, enc)
	dec, enc = docPair(decodeEndpointSecrets, encodeEndpointSecrets)
	add("secrets-headers", goldenEndpointSecrets, dec, enc)
	add("secrets", endpointSecrets{Keys: goldenSecrets}, dec, enc) // format 1, as before headers
	add("secrets-none", endpointSecrets{}, dec, enc)
	dec, enc = docPair(decodeAccessToken, encodeAccessToken)
	add("access-token", goldenToken, dec, enc)
	add("access-token-plain", goldenTokenPlain, dec, enc)
	dec, enc = docPair(decodeDelivery, encodeDelivery)
	add("delivery", goldenDelivery, dec, enc)
	add("delivery-pending", goldenDeliveryPending, dec, enc)
	add("delivery-headers", goldenDeliveryHeaders, dec, enc)
	add("delivery-channels", goldenDeliveryChannels, dec, enc)
	add("delivery-scheduled", goldenDeliveryScheduled, dec, enc)
	add("delivery-retry-policy", goldenDeliveryRetryPolicy, dec, enc)
	add("delivery-backfill", goldenDeliveryBackfill, dec, enc)
	dec, enc = docPair(decodeTask, encodeTask)
	add("task", goldenTask, dec, enc)
	add("task-purge", goldenTaskPurge, dec, enc)
	return cases
}

// TestDocuments holds the stored documents to their released bytes:
// each golden document decodes to its value and that value encodes back
// to the same bytes.
func TestDocuments(t *testing.T) {
	for _, tt := range goldenCases() {
		t.Run(tt.file, func(t *testing.T) {
			doc := readGolden(t, tt.file)
			got, err := tt.decode(doc)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("decoded\n\t%+v\nwant\n\t%+v", got, tt.want)
			}
			again, err := tt.encode(tt.want)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if !bytes.Equal(again, doc) {
				t.Errorf("encoded\n\t%s\nwant the golden\n\t%s", again, doc)
			}
		})
	}

	t.Run("delivery-sequenced", func(t *testing.T) {
		// The one-round-trip ingest's form: "sequence" put in front of
		// the document made without one.
		doc := readGolden(t, "delivery-sequenced")
		got, err := decodeDelivery(doc)
		if err != nil {
			t.Fatal(err)
		}
		want := goldenDeliveryPending
		want.Sequence = goldenSequence
		if !reflect.DeepEqual(got, want) {
			t.Errorf("decoded\n\t%+v\nwant\n\t%+v", got, want)
		}
		made, err := encodeDelivery(goldenDeliveryPending)
		if err != nil {
			t.Fatal(err)
		}
		if made = sequencedDoc(made, goldenSequence); !bytes.Equal(made, doc) {
			t.Errorf("sequencedDoc =\n\t%s\nwant the golden\n\t%s", made, doc)
		}
	})

	t.Run("secrets-sealed", func(t *testing.T) {
		// Sealed with goldenKey (the nonce is random, so the value is
		// read, not written here): the documents carry sealed keys as
		// they are, and they open to the plain secrets.
		doc := readGolden(t, "secrets-sealed")
		secs, err := decodeSecrets(doc)
		if err != nil {
			t.Fatal(err)
		}
		again, err := encodeSecrets(secs)
		if err != nil || !bytes.Equal(again, doc) {
			t.Errorf("encoded\n\t%s (%v)\nwant the golden\n\t%s", again, err, doc)
		}
		sealer, err := sealing.New(goldenKey)
		if err != nil {
			t.Fatal(err)
		}
		ep := goldenEndpoint
		ep.Secrets = secs
		for i, s := range secs {
			if !sealing.Sealed(s.Key) {
				t.Errorf("secret %d is not sealed", i)
			}
		}
		if err := sealer.OpenSecrets(&ep); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ep.Secrets, goldenSecrets) {
			t.Errorf("opened %+v, want %+v", ep.Secrets, goldenSecrets)
		}
	})

	t.Run("secrets-headers-sealed", func(t *testing.T) {
		// Sealed with goldenKey, keys and header values: the document
		// carries them as they are, and they open to the plain ones.
		doc := readGolden(t, "secrets-headers-sealed")
		es, err := decodeEndpointSecrets(doc)
		if err != nil {
			t.Fatal(err)
		}
		again, err := encodeEndpointSecrets(es)
		if err != nil || !bytes.Equal(again, doc) {
			t.Errorf("encoded\n\t%s (%v)\nwant the golden\n\t%s", again, err, doc)
		}
		for _, h := range es.Headers {
			if !h.Sealed || !sealing.Sealed(h.Value) {
				t.Errorf("header %s is not sealed: %+v", h.Name, h)
			}
		}
		sealer, err := sealing.New(goldenKey)
		if err != nil {
			t.Fatal(err)
		}
		ep := goldenEndpoint
		ep.Secrets, ep.Headers = es.Keys, es.Headers
		if err := sealer.OpenSecrets(&ep); err != nil {
			t.Fatal(err)
		}
		if got := (endpointSecrets{Keys: ep.Secrets, Headers: ep.Headers}); !reflect.DeepEqual(got, goldenEndpointSecrets) {
			t.Errorf("opened %+v, want %+v", got, goldenEndpointSecrets)
		}
	})

	t.Run("a secrets document of a newer format is refused", func(t *testing.T) {
		doc := readGolden(t, "secrets-headers")
		newer := bytes.Replace(doc, []byte(`{"v":2,`), []byte(`{"v":3,`), 1)
		if _, err := decodeEndpointSecrets(newer); err == nil || !strings.Contains(err.Error(), "format 3") {
			t.Errorf("secrets in format 3: %v, want refused", err)
		}
		if _, err := decodeSecrets(doc); err == nil {
			t.Error("the format 1 decoder took a format 2 document")
		}
		for _, bad := range []string{
			`{"v":2,"keys":[],"headers":[{"name":"X-A"}]}`,
			`{"v":2,"keys":[],"headers":[{"name":"X-A","value":"a","sealed":"sealed:v1:AAAA"}]}`,
		} {
			if _, err := decodeEndpointSecrets([]byte(bad)); err == nil {
				t.Errorf("decodeEndpointSecrets(%s) took a header with no value, or two", bad)
			}
		}
	})

	t.Run("a newer format is refused", func(t *testing.T) {
		for _, tt := range goldenCases() {
			doc := readGolden(t, tt.file)
			if doc[0] != '{' || strings.HasPrefix(tt.file, "secrets") {
				continue // the secrets document: see above
			}
			newer := append([]byte(`{"v":2,`), doc[1:]...)
			if _, err := tt.decode(newer); err == nil || !strings.Contains(err.Error(), "format 2") {
				t.Errorf("%s in format 2: %v, want refused", tt.file, err)
			}
			v1 := append([]byte(`{"v":1,`), doc[1:]...)
			if got, err := tt.decode(v1); err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s with \"v\":1 = %+v, %v; want its value", tt.file, got, err)
			}
		}
	})
}

// fuzzDocument is the fuzz property of an encode/decode pair: decode
// never panics, and what it accepts encodes, and decodes again to a
// value that encodes to the same bytes.
func fuzzDocument[T any](f *testing.F, decode func([]byte) (T, error), encode func(T) ([]byte, error), seeds ...string) {
	for _, s := range seeds {
		f.Add(readGolden(f, s))
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		v, err := decode(doc)
		if err != nil {
			return
		}
		first, err := encode(v)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", v, err)
		}
		w, err := decode(first)
		if err != nil {
			t.Fatalf("encoded %s does not decode: %v", first, err)
		}
		second, err := encode(w)
		if err != nil || !bytes.Equal(first, second) {
			t.Fatalf("encode, decode, encode =\n\t%s (%v)\nwant\n\t%s", second, err, first)
		}
	})
}

func FuzzDecodeDelivery(f *testing.F) {
	fuzzDocument(f, decodeDelivery, encodeDelivery, "delivery", "delivery-pending", "delivery-sequenced", "delivery-headers", "delivery-channels", "delivery-retry-policy", "delivery-backfill", "delivery-scheduled")
}

func FuzzDecodeEndpoint(f *testing.F) {
	fuzzDocument(f, decodeEndpoint, encodeEndpoint, "endpoint", "endpoint-new", "endpoint-revealed", "endpoint-channels", "endpoint-retry-policy", "endpoint-limited")
}

func FuzzDecodeEndpointSecrets(f *testing.F) {
	fuzzDocument(f, decodeEndpointSecrets, encodeEndpointSecrets, "secrets", "secrets-none", "secrets-headers", "secrets-headers-sealed")
}

func FuzzDecodeTenant(f *testing.F) {
	fuzzDocument(f, decodeTenant, encodeTenant, "tenant", "tenant-deleted", "tenant-retry-policy")
}

func FuzzDecodeEventType(f *testing.F) {
	fuzzDocument(f, decodeEventType, encodeEventType, "event-type", "event-type-plain", "event-type-schema")
}

func FuzzDecodeAccessToken(f *testing.F) {
	fuzzDocument(f, decodeAccessToken, encodeAccessToken, "access-token", "access-token-plain")
}

func FuzzDecodeTask(f *testing.F) {
	fuzzDocument(f, decodeTask, encodeTask, "task", "task-purge")
}
