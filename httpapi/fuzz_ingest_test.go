package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/webhookd/webhookd/engine"
)

// appendOnlyStore is the one Store method ingest reaches once its input
// is valid; any other call panics (the embedded Store is nil).
type appendOnlyStore struct {
	engine.Store
	last engine.NewEvent
}

func (s *appendOnlyStore) AppendEvent(_ context.Context, in engine.NewEvent) (engine.IngestResult, error) {
	s.last = in
	return engine.IngestResult{Event: in.Event}, nil
}

// FuzzDecodeIngest runs hostile bodies through the whole ingest input
// path: the one request decoder, then the engine's validation, up to the
// store. Every refusal is a coded client error (never a 500), and what
// reaches the store is an envelope that is I-JSON (RFC 7493) in full:
// the decoder's own rules (valid UTF-8, no lone surrogate, each name
// once), and no noncharacter and no number beyond a double (checked here
// token by token); its created has three fraction digits and its data is
// the request's data, compacted and at most engine.MaxDataDepth deep.
// Its seed corpus is in testdata/fuzz/FuzzDecodeIngest.
func FuzzDecodeIngest(f *testing.F) {
	f.Add("application/json", []byte(`{"type":"payment.succeeded","data":{"amount":4200,"currency":"eur"}}`))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		coded := func(err error) {
			t.Helper()
			code := engine.ErrorCode(err)
			if _, ok := statusTable[code]; !ok || code == engine.CodeInternal {
				t.Fatalf("uncoded error for %q: %v", body, err)
			}
		}
		var in engine.IngestInput
		if err := decodeBody(contentType, body, &in, true); err != nil {
			coded(err)
			return
		}
		store := &appendOnlyStore{}
		svc := engine.NewService(store, nil, engine.ServiceOptions{})
		res, err := svc.Ingest(context.Background(), "acme", in)
		if err != nil {
			coded(err)
			return
		}
		var env struct {
			ID      string          `json:"id"`
			Type    string          `json:"type"`
			Created string          `json:"created"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(res.Event.Body, &env); err != nil {
			t.Fatalf("stored envelope is not JSON: %v: %q", err, res.Event.Body)
		}
		compact := jsontext.Value(bytes.Clone(res.Event.Body))
		if !compact.IsValid() || compact.Compact() != nil || !bytes.Equal(compact, res.Event.Body) {
			t.Fatalf("stored envelope is not I-JSON (RFC 7493), compacted: %q", res.Event.Body)
		}
		if tok, ok := outsideIJSON(res.Event.Body); ok {
			t.Fatalf("stored envelope holds %q, which I-JSON does not allow: %q", tok, res.Event.Body)
		}
		if len(env.Created) != len("2026-12-02T14:35:10.120Z") {
			t.Fatalf("created %q is not in engine.TimeFormat", env.Created)
		}
		var want bytes.Buffer
		if err := json.Compact(&want, in.Data); err != nil || !bytes.Equal(env.Data, want.Bytes()) {
			t.Fatalf("stored data %q, want %q compacted", env.Data, in.Data)
		}
		if env.Type != in.Type || env.ID != res.Event.ID || store.last.Event.ID != res.Event.ID {
			t.Fatalf("envelope %+v does not match the event %+v", env, res.Event)
		}
		depth, deepest := 0, 0
		inString, escaped := false, false
		for _, c := range env.Data {
			switch {
			case inString && escaped:
				escaped = false
			case inString && c == '\\':
				escaped = true
			case c == '"':
				inString = !inString
			case !inString && (c == '{' || c == '['):
				depth++
				deepest = max(deepest, depth)
			case !inString && (c == '}' || c == ']'):
				depth--
			}
		}
		if deepest > engine.MaxDataDepth {
			t.Fatalf("data %d deep was accepted", deepest)
		}
	})
}

// outsideIJSON returns the first string or number token of the valid JSON
// b that I-JSON refuses beyond what jsontext does: a string or name with a
// noncharacter, a number whose value a double cannot hold.
func outsideIJSON(b []byte) (string, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return "", false
		}
		switch tok.Kind() {
		case '"':
			for _, r := range tok.String() {
				if 0xFDD0 <= r && r <= 0xFDEF || r&0xFFFE == 0xFFFE {
					return tok.String(), true
				}
			}
		case '0':
			if f, _ := strconv.ParseFloat(tok.String(), 64); math.IsInf(f, 0) {
				return tok.String(), true
			}
		}
	}
}
