package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/engine/memstore"
)

// textChars are characters no identifier-like text may hold: controls
// (Unicode category Cc: C0, DEL, C1 with NEL and CSI), invisible
// formatting (Cf: soft hyphen, bidi marks, embeddings, overrides and
// isolates, zero-width characters, the BOM, tags), the line and paragraph
// separators, noncharacters, and bytes that are not UTF-8. free marks the
// few free text may hold: tab, line breaks and the zero-width joiners
// that emoji sequences and some scripts need.
var textChars = []struct {
	name string
	s    string
	free bool
}{
	{"NUL", "\x00", false},
	{"tab", "\t", true},
	{"LF", "\n", true},
	{"CR", "\r", true},
	{"ESC", "\x1b", false},
	{"DEL", "\x7f", false},
	{"U+0080", "\u0080", false},
	{"NEL U+0085", "\u0085", false},
	{"CSI U+009B", "\u009b", false},
	{"U+009F", "\u009f", false},
	{"soft hyphen U+00AD", "\u00ad", false},
	{"ALM U+061C", "\u061c", false},
	{"ZWSP U+200B", "\u200b", false},
	{"ZWNJ U+200C", "\u200c", true},
	{"ZWJ U+200D", "\u200d", true},
	{"LRM U+200E", "\u200e", false},
	{"LRE U+202A", "\u202a", false},
	{"RLO U+202E", "\u202e", false},
	{"LRI U+2066", "\u2066", false},
	{"PDI U+2069", "\u2069", false},
	{"line separator U+2028", "\u2028", false},
	{"paragraph separator U+2029", "\u2029", false},
	{"BOM U+FEFF", "\ufeff", false},
	{"annotation anchor U+FFF9", "\ufff9", false},
	{"tag U+E0001", "\U000e0001", false},
	{"noncharacter U+FDD0", "\ufdd0", false},
	{"noncharacter U+FFFE", "\ufffe", false},
	{"noncharacter U+FFFF", "\uffff", false},
	{"noncharacter U+1FFFE", "\U0001fffe", false},
	{"noncharacter U+10FFFF", "\U0010ffff", false},
	{"not UTF-8", "\xff", false},
	{"a surrogate in UTF-8", "\xed\xa0\x80", false},
}

// textField is one text a request gives the Service: set stores s in it
// (around a valid value), free is whether it is free text.
type textField struct {
	name  string // the field a refusal names
	free  bool
	set   func(ctx context.Context, s string) error
	valid string // a value the field takes: set(valid) succeeds
}

// textFields is every text field the API takes that is not a strict
// ASCII identifier (tenant IDs, event types and IDs are; see
// ValidateTenantID, ValidateEventType), each on every path that sets it.
func textFields(t *testing.T, svc *engine.Service, epID string) []textField {
	t.Helper()
	n := 0
	ingest := func(in engine.IngestInput) error {
		n++
		in.Type, in.Data = "order.created", json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))
		_, err := svc.Ingest(context.Background(), "acme", in)
		return err
	}
	return []textField{
		{"name", false, func(ctx context.Context, s string) error {
			_, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme " + s})
			return err
		}, "Acme Ünïcode 株式会社 😀"},
		{"description", true, func(ctx context.Context, s string) error {
			_, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{Description: "An order " + s})
			return err
		}, "An order was placed — 注文"},
		{"description", true, func(ctx context.Context, s string) error {
			_, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/in", EventTypes: []string{"*"}, Description: "Orders " + s})
			return err
		}, "Orders, ERP ❤️"},
		{"description", true, func(ctx context.Context, s string) error {
			d := "Orders " + s
			_, err := svc.UpdateEndpoint(ctx, "acme", epID, engine.EndpointPatch{Description: &d})
			return err
		}, "Orders (new)"},
		{"url", false, func(ctx context.Context, s string) error {
			_, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/in/" + s, EventTypes: []string{"*"}})
			return err
		}, "é"},
		{"url", false, func(ctx context.Context, s string) error {
			u := "http://127.0.0.1:9/in/" + s
			_, err := svc.UpdateEndpoint(ctx, "acme", epID, engine.EndpointPatch{URL: &u})
			return err
		}, "ü"},
		{"return_url", false, func(ctx context.Context, s string) error {
			_, _, err := svc.IssuePortalLink(ctx, "acme", engine.PortalLinkInput{ReturnURL: "https://app.example.com/back/" + s})
			return err
		}, "settings"},
		{"ordering_key", false, func(_ context.Context, s string) error {
			return ingest(engine.IngestInput{OrderingKey: "order " + s})
		}, "order é 1001"},
		{"api_version", false, func(_ context.Context, s string) error {
			return ingest(engine.IngestInput{APIVersion: "2026-12-01" + s})
		}, "2026-12-01.β"},
		{"Idempotency-Key", false, func(_ context.Context, s string) error {
			return ingest(engine.IngestInput{IdempotencyKey: "key-" + s})
		}, "clé-1"},
	}
}

// TestService_TextFields: one rule for every text field, on every path
// that sets it: no control character, no invisible formatting, no line
// or paragraph separator, no noncharacter, valid UTF-8; free text
// (descriptions) may also hold tab, line breaks and zero-width joiners.
// A refusal is invalid_field naming the field, and stores nothing.
func TestService_TextFields(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	svc := engine.NewService(store, nil, engine.ServiceOptions{Targets: engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}})
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/in", EventTypes: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	state := func() string {
		tn, _ := svc.Tenant(ctx, "acme")
		ets, _ := svc.EventTypes(ctx)
		eps, _ := svc.Endpoints(ctx, "acme")
		toks, _ := svc.AccessTokens(ctx, "acme")
		evs, _, _ := svc.ListEvents(ctx, "acme", engine.EventFilter{})
		return fmt.Sprintf("%+v\n%+v\n%+v\n%d tokens, %d events", tn, ets, eps, len(toks), len(evs))
	}
	for i, f := range textFields(t, svc, ep.ID) {
		t.Run(fmt.Sprintf("%d %s", i, f.name), func(t *testing.T) {
			for _, c := range textChars {
				before := state()
				err := f.set(ctx, c.s)
				if c.free && f.free {
					if err != nil {
						t.Errorf("%s in free text: %v, want it taken", c.name, err)
					}
					continue
				}
				e, ok := err.(*engine.Error)
				if !ok || e.Code != engine.CodeInvalidField || e.Field != f.name {
					t.Errorf("%s: error %v, want invalid_field %s", c.name, err, f.name)
					continue
				}
				if after := state(); after != before {
					t.Errorf("%s: a refusal changed the state:\n%s\nwas\n%s", c.name, after, before)
				}
			}
			if err := f.set(ctx, f.valid); err != nil {
				t.Errorf("%q: %v, want it taken", f.valid, err)
			}
		})
	}
}

// TestService_TextLengths: a text's bound counts characters (Unicode
// code points), as JSON Schema's maxLength in openapi.json does, not
// bytes: a text of the bound's number of characters that UTF-8 writes in
// two, three or four bytes each is taken, and one more character is
// refused, invalid_field naming the field, on every path that sets it.
func TestService_TextLengths(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	svc := engine.NewService(store, nil, engine.ServiceOptions{Targets: engine.TargetPolicy{AllowHTTP: true, AllowPrivate: true}})
	if _, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{}); err != nil {
		t.Fatal(err)
	}
	ep, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: "http://127.0.0.1:9/in", EventTypes: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	op, err := svc.CreateOperationalEndpoint(ctx, engine.OperationalEndpointInput{URL: "http://127.0.0.1:9/ops", EventTypes: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ingest := func(in engine.IngestInput) error {
		n++
		in.Type, in.Data = "order.created", json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))
		_, err := svc.Ingest(ctx, "acme", in)
		return err
	}
	const url = "http://127.0.0.1:9/"
	for _, f := range []struct {
		field  string
		max    int
		prefix string // ASCII the value starts with
		set    func(s string) error
	}{
		{"name", engine.MaxTenantNameLen, "", func(s string) error {
			_, _, err := svc.PutTenant(ctx, "acme", engine.TenantInput{Name: s})
			return err
		}},
		{"description", engine.MaxDescriptionLen, "", func(s string) error {
			_, _, err := svc.PutEventType(ctx, "order.created", engine.EventTypeInput{Description: s})
			return err
		}},
		{"description", engine.MaxDescriptionLen, "", func(s string) error {
			_, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: url, EventTypes: []string{"*"}, Description: s})
			return err
		}},
		{"description", engine.MaxDescriptionLen, "", func(s string) error {
			_, err := svc.UpdateEndpoint(ctx, "acme", ep.ID, engine.EndpointPatch{Description: &s})
			return err
		}},
		{"description", engine.MaxDescriptionLen, "", func(s string) error {
			_, err := svc.UpdateOperationalEndpoint(ctx, op.Endpoint.ID, engine.OperationalEndpointPatch{Description: &s})
			return err
		}},
		{"url", engine.MaxURLLen, url, func(s string) error {
			_, _, err := svc.CreateEndpoint(ctx, "acme", engine.EndpointInput{URL: s, EventTypes: []string{"*"}})
			return err
		}},
		{"url", engine.MaxURLLen, url, func(s string) error {
			_, err := svc.UpdateEndpoint(ctx, "acme", ep.ID, engine.EndpointPatch{URL: &s})
			return err
		}},
		{"url", engine.MaxURLLen, url, func(s string) error {
			_, err := svc.UpdateOperationalEndpoint(ctx, op.Endpoint.ID, engine.OperationalEndpointPatch{URL: &s})
			return err
		}},
		{"return_url", engine.MaxReturnURL, url, func(s string) error {
			_, _, err := svc.IssuePortalLink(ctx, "acme", engine.PortalLinkInput{ReturnURL: s})
			return err
		}},
		{"ordering_key", engine.MaxOrderingKey, "", func(s string) error { return ingest(engine.IngestInput{OrderingKey: s}) }},
		{"api_version", engine.MaxAPIVersionLen, "", func(s string) error { return ingest(engine.IngestInput{APIVersion: s}) }},
		{"Idempotency-Key", engine.MaxIdempotencyKey, "", func(s string) error { return ingest(engine.IngestInput{IdempotencyKey: s}) }},
	} {
		for _, char := range []string{"é", "株", "😀"} {
			t.Run(f.field+" "+char, func(t *testing.T) {
				text := func(chars int) string { return f.prefix + strings.Repeat(char, chars-len(f.prefix)) }
				if err := f.set(text(f.max)); err != nil {
					t.Errorf("%d characters (%d bytes): %v, want it taken", f.max, len(text(f.max)), err)
				}
				err := f.set(text(f.max + 1))
				if e, ok := err.(*engine.Error); !ok || e.Code != engine.CodeInvalidField || e.Field != f.field {
					t.Errorf("%d characters: error %v, want invalid_field %s", f.max+1, err, f.field)
				} else if !strings.Contains(e.Message, fmt.Sprintf("%d characters", f.max)) {
					t.Errorf("%d characters: %q does not say the bound in characters", f.max+1, e.Message)
				}
			})
		}
	}
}
