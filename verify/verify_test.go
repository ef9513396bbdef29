package verify

import (
	"errors"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	testSecret  = "whsec_x8hqa3tG2IlVRg7G2VT9HAz6c0qzMLdgpqKyjZTalaA="
	testSecret2 = "whsec_l/5cHAwnQnFAJkHg7WNkCCLTrpwUnhwStO2VBTTGffM="
	otherSecret = "whsec_G75kzSqUobEl19a0OyPmzKwrqWv7485AVbexZVmEHLE="
)

// expectedSignatures lists what must never appear in an error for a
// message checked against secret: the secret, its key part, and the
// signatures it would produce (Standard base64 when id is set, Stripe hex).
func expectedSignatures(secret, id string, ts int64, body []byte) []string {
	out := []string{secret, strings.TrimPrefix(secret, SecretPrefix), StripeSignature(secret, ts, body)}
	if key, err := StandardKey(secret); err == nil && id != "" {
		out = append(out, strings.TrimPrefix(StandardSignature(key, id, ts, body), "v1,"))
	}
	return out
}

// assertNoLeak fails if err's text holds any forbidden string or any
// signature-looking token of the received header.
func assertNoLeak(tb testing.TB, err error, header string, forbidden ...[]string) {
	tb.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	var all []string
	for _, f := range forbidden {
		all = append(all, f...)
	}
	for _, tok := range strings.FieldsFunc(header, func(r rune) bool { return r == ' ' || r == ',' || r == '=' }) {
		if len(tok) >= 16 {
			all = append(all, tok)
		}
	}
	for _, f := range all {
		if f != "" && strings.Contains(msg, f) {
			tb.Errorf("error %q contains secret material %q", msg, f)
		}
	}
}

func TestVerifier_Verify(t *testing.T) {
	const id = "evt_0001"
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"evt_0001","type":"invoice.paid","data":{"amount":4200}}`)
	sign := func(secrets ...string) http.Header {
		h, err := Sign(secrets, id, now, body)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	stdSig := sign(testSecret).Get(HeaderSignature)
	xSig := sign(testSecret).Get(HeaderStripeSignature)

	tests := []struct {
		name    string
		header  func() http.Header // nil: sign(testSecret)
		body    string             // "": body
		secrets []string           // nil: testSecret
		tol     time.Duration
		offset  time.Duration // clock minus timestamp
		want    error
		scheme  Scheme // on success
	}{
		{name: "standard", scheme: SchemeStandard},
		{name: "x-signature only", header: func() http.Header { h := sign(testSecret); delStd(h); return h }, scheme: SchemeStripe},
		{name: "standard preferred over broken x-signature", header: func() http.Header {
			h := sign(testSecret)
			h.Set(HeaderStripeSignature, "garbage")
			return h
		}, scheme: SchemeStandard},
		{name: "no fallback to x-signature", header: func() http.Header {
			h := sign(testSecret)
			h.Set(HeaderSignature, "v1,"+strings.Repeat("A", 43)+"=")
			return h
		}, want: ErrBadSignature},
		{name: "lower-case keys as a map literal has them", header: func() http.Header {
			return http.Header{"webhook-id": {id}, "webhook-timestamp": {ts}, "webhook-signature": {stdSig}}
		}, scheme: SchemeStandard},
		{name: "no headers", header: func() http.Header { return http.Header{} }, want: ErrNoSignature},
		{name: "id and timestamp without signature", header: func() http.Header {
			h := sign(testSecret)
			h.Del(HeaderSignature)
			h.Del(HeaderStripeSignature)
			return h
		}, want: ErrNoSignature},

		{name: "tampered body", body: strings.Replace(string(body), "4200", "9200", 1), want: ErrBadSignature},
		{name: "tampered body x-signature", header: func() http.Header { h := sign(testSecret); delStd(h); return h },
			body: strings.Replace(string(body), "4200", "9200", 1), want: ErrBadSignature},
		{name: "body with trailing newline", body: string(body) + "\n", want: ErrBadSignature},
		{name: "wrong secret", secrets: []string{otherSecret}, want: ErrBadSignature},
		{name: "wrong secret x-signature", header: func() http.Header { h := sign(testSecret); delStd(h); return h },
			secrets: []string{otherSecret}, want: ErrBadSignature},
		{name: "other id", header: func() http.Header { h := sign(testSecret); h.Set(HeaderID, "evt_0002"); return h }, want: ErrBadSignature},

		{name: "rotation: both signatures, old secret", header: func() http.Header { return sign(testSecret2, testSecret) }, scheme: SchemeStandard},
		{name: "rotation: both signatures, new secret", header: func() http.Header { return sign(testSecret2, testSecret) },
			secrets: []string{testSecret2}, scheme: SchemeStandard},
		{name: "rotation: receiver holds both", secrets: []string{testSecret2, testSecret}, scheme: SchemeStandard},
		{name: "rotation x-signature", header: func() http.Header { h := sign(testSecret2, testSecret); delStd(h); return h },
			secrets: []string{testSecret2}, scheme: SchemeStripe},
		{name: "rotation, neither secret", header: func() http.Header { return sign(testSecret2, testSecret) },
			secrets: []string{otherSecret}, want: ErrBadSignature},

		{name: "at the old edge", offset: DefaultTolerance, scheme: SchemeStandard},
		{name: "stale", offset: DefaultTolerance + time.Second, want: ErrTimestampTooOld},
		{name: "at the future edge", offset: -DefaultTolerance, scheme: SchemeStandard},
		{name: "future", offset: -DefaultTolerance - time.Second, want: ErrTimestampInFuture},
		{name: "stale x-signature", header: func() http.Header { h := sign(testSecret); delStd(h); return h },
			offset: time.Hour, want: ErrTimestampTooOld},
		{name: "future x-signature", header: func() http.Header { h := sign(testSecret); delStd(h); return h },
			offset: -time.Hour, want: ErrTimestampInFuture},
		{name: "custom tolerance", tol: time.Minute, offset: 61 * time.Second, want: ErrTimestampTooOld},
		{name: "stale and wrong secret", secrets: []string{otherSecret}, offset: time.Hour, want: ErrBadSignature},

		{name: "truncated signature", header: replace(sign(testSecret), HeaderSignature, stdSig[:len(stdSig)-2]), want: ErrBadSignature},
		{name: "signature without value", header: replace(sign(testSecret), HeaderSignature, "v1,"), want: ErrBadSignature},
		{name: "signature without comma", header: replace(sign(testSecret), HeaderSignature, "v1"), want: ErrMalformedHeader},
		{name: "signature without version", header: replace(sign(testSecret), HeaderSignature, strings.TrimPrefix(stdSig, "v1")), want: ErrMalformedHeader},
		{name: "empty signature", header: replace(sign(testSecret), HeaderSignature, ""), want: ErrMalformedHeader},
		{name: "blank signature", header: replace(sign(testSecret), HeaderSignature, "   "), want: ErrMalformedHeader},
		{name: "missing id", header: func() http.Header { h := sign(testSecret); h.Del(HeaderID); return h }, want: ErrMalformedHeader},
		{name: "empty id", header: replace(sign(testSecret), HeaderID, ""), want: ErrMalformedHeader},
		{name: "missing timestamp", header: func() http.Header { h := sign(testSecret); h.Del(HeaderTimestamp); return h }, want: ErrMalformedHeader},
		{name: "truncated timestamp", header: replace(sign(testSecret), HeaderTimestamp, ts[:len(ts)-1]), want: ErrBadSignature},
		{name: "fractional timestamp", header: replace(sign(testSecret), HeaderTimestamp, ts+".5"), want: ErrMalformedHeader},
		{name: "signed timestamp", header: replace(sign(testSecret), HeaderTimestamp, "+"+ts), want: ErrMalformedHeader},
		{name: "zero-padded timestamp", header: replace(sign(testSecret), HeaderTimestamp, "0"+ts), want: ErrMalformedHeader},
		{name: "millisecond timestamp", header: replace(sign(testSecret), HeaderTimestamp, ts+"000"), want: ErrBadSignature},

		{name: "duplicated signature header", header: func() http.Header { h := sign(testSecret); h.Add(HeaderSignature, stdSig); return h }, want: ErrMalformedHeader},
		{name: "duplicated id header", header: func() http.Header { h := sign(testSecret); h.Add(HeaderID, id); return h }, want: ErrMalformedHeader},
		{name: "duplicated timestamp header", header: func() http.Header { h := sign(testSecret); h.Add(HeaderTimestamp, ts); return h }, want: ErrMalformedHeader},
		{name: "duplicated id across spellings", header: func() http.Header { h := sign(testSecret); h["webhook-id"] = []string{"evt_x"}; return h }, want: ErrMalformedHeader},
		{name: "duplicated entry", header: replace(sign(testSecret), HeaderSignature, stdSig+" "+stdSig), scheme: SchemeStandard},
		{name: "unknown versions beside v1", header: replace(sign(testSecret), HeaderSignature, "v2,abc  "+stdSig+" v1a,xyz"), scheme: SchemeStandard},
		{name: "only unknown version", header: replace(sign(testSecret), HeaderSignature, "v1a"+strings.TrimPrefix(stdSig, "v1")), want: ErrBadSignature},
		{name: "duplicated x-signature header", header: func() http.Header {
			h := sign(testSecret)
			delStd(h)
			h.Add(HeaderStripeSignature, xSig)
			return h
		}, want: ErrMalformedHeader},
		{name: "x-signature t repeated", header: xOnly(sign(testSecret), xSig+",t="+ts), want: ErrMalformedHeader},
		{name: "x-signature v1 repeated", header: xOnly(sign(testSecret), xSig+","+xSig[strings.Index(xSig, "v1="):]), scheme: SchemeStripe},
		{name: "x-signature without t", header: xOnly(sign(testSecret), xSig[strings.Index(xSig, "v1="):]), want: ErrMalformedHeader},
		{name: "x-signature without v1", header: xOnly(sign(testSecret), "t="+ts), want: ErrBadSignature},
		{name: "x-signature truncated hex", header: xOnly(sign(testSecret), xSig[:len(xSig)-1]), want: ErrBadSignature},
		{name: "x-signature trailing comma", header: xOnly(sign(testSecret), xSig+","), want: ErrMalformedHeader},
		{name: "x-signature empty", header: xOnly(sign(testSecret), ""), want: ErrMalformedHeader},
		{name: "x-signature spaces", header: xOnly(sign(testSecret), strings.ReplaceAll(xSig, ",", ", ")), want: ErrBadSignature},
		{name: "x-signature v0 only", header: xOnly(sign(testSecret), strings.Replace(xSig, "v1=", "v0=", 1)), want: ErrBadSignature},
		{name: "x-signature t not integer", header: xOnly(sign(testSecret), strings.Replace(xSig, "t="+ts, "t=x", 1)), want: ErrMalformedHeader},

		{name: "no secrets", secrets: []string{}, want: ErrNoSecrets},
		{name: "bad secret", secrets: []string{testSecret, "whsec_not base64!"}, want: ErrBadSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := sign(testSecret)
			if tt.header != nil {
				h = tt.header()
			}
			b := body
			if tt.body != "" {
				b = []byte(tt.body)
			}
			secrets := []string{testSecret}
			if tt.secrets != nil {
				secrets = tt.secrets
			}
			v := Verifier{Secrets: secrets, Tolerance: tt.tol, Now: func() time.Time { return now.Add(tt.offset) }}
			m, err := v.Verify(h, b)
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("Verify: %v, want %v", err, tt.want)
				}
				var fb []string
				for _, s := range append(secrets, testSecret, testSecret2) {
					fb = append(fb, expectedSignatures(s, id, now.Unix(), b)...)
				}
				assertNoLeak(t, err, h.Get(HeaderSignature)+" "+h.Get(HeaderStripeSignature), fb)
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got, want := m.Scheme, tt.scheme; got != want {
				t.Errorf("Scheme = %v, want %v", got, want)
			}
			wantID := id
			if m.Scheme == SchemeStripe {
				wantID = ""
			}
			if m.ID != wantID || !m.Timestamp.Equal(now) || string(m.Body) != string(b) {
				t.Errorf("Verify = {%q %v %q}, want {%q %v body}", m.ID, m.Timestamp, m.Body, wantID, now)
			}
		})
	}
}

func delStd(h http.Header) {
	h.Del(HeaderID)
	h.Del(HeaderTimestamp)
	h.Del(HeaderSignature)
}

func replace(h http.Header, name, value string) func() http.Header {
	return func() http.Header {
		h.Set(name, value)
		return h
	}
}

func xOnly(h http.Header, value string) func() http.Header {
	return func() http.Header {
		delStd(h)
		h.Set(HeaderStripeSignature, value)
		return h
	}
}

func TestVerifier_Verify_defaultClock(t *testing.T) {
	body := []byte(`{"id":"evt_now"}`)
	h, err := Sign([]string{testSecret}, "evt_now", time.Now(), body)
	if err != nil {
		t.Fatal(err)
	}
	v := Verifier{Secrets: []string{testSecret}}
	if _, err := v.Verify(h, body); err != nil {
		t.Fatalf("Verify with time.Now: %v", err)
	}
	h, _ = Sign([]string{testSecret}, "evt_now", time.Now().Add(-time.Hour), body)
	if _, err := v.Verify(h, body); !errors.Is(err, ErrTimestampTooOld) {
		t.Fatalf("Verify an hour old: %v", err)
	}
}

func TestSign(t *testing.T) {
	body := []byte(`{"id":"evt_1"}`)
	at := time.Unix(1674087231, 0)
	h, err := Sign([]string{testSecret, testSecret2}, "evt_1", at, body)
	if err != nil {
		t.Fatal(err)
	}
	k1, _ := StandardKey(testSecret)
	k2, _ := StandardKey(testSecret2)
	tests := []struct{ name, got, want string }{
		{HeaderID, h.Get(HeaderID), "evt_1"},
		{HeaderTimestamp, h.Get(HeaderTimestamp), "1674087231"},
		{HeaderSignature, h.Get(HeaderSignature), StandardSignature(k1, "evt_1", 1674087231, body) + " " + StandardSignature(k2, "evt_1", 1674087231, body)},
		{HeaderStripeSignature, h.Get(HeaderStripeSignature), "t=1674087231,v1=" + StripeSignature(testSecret, 1674087231, body) + ",v1=" + StripeSignature(testSecret2, 1674087231, body)},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	for _, bad := range []struct {
		name    string
		secrets []string
		id      string
		want    error
	}{
		{"no secrets", nil, "evt_1", ErrNoSecrets},
		{"bad secret", []string{"whsec_%%%"}, "evt_1", ErrBadSecret},
		{"empty secret", []string{""}, "evt_1", ErrBadSecret},
		{"no id", []string{testSecret}, "", nil},
	} {
		_, err := Sign(bad.secrets, bad.id, at, body)
		if err == nil || bad.want != nil && !errors.Is(err, bad.want) {
			t.Errorf("Sign %s: %v, want %v", bad.name, err, bad.want)
		}
		assertNoLeak(t, err, "", bad.secrets)
	}
}

// TestSignHeader: SignHeader sets exactly Sign's headers on a request's
// header, replaces stale ones, keeps the others, and on error changes
// nothing, so a second secret's fault cannot leave half a signature.
func TestSignHeader(t *testing.T) {
	body := []byte(`{"id":"evt_1"}`)
	at := time.Unix(1674087231, 0)
	secrets := []string{testSecret, testSecret2}
	want, err := Sign(secrets, "evt_1", at, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(HeaderSignature, "v1,stale")
	h.Set(HeaderID, "evt_old")
	if err := SignHeader(h, secrets, "evt_1", at, body); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{HeaderID, HeaderTimestamp, HeaderSignature, HeaderStripeSignature} {
		if got, w := h.Values(k), want.Values(k); len(got) != 1 || got[0] != w[0] {
			t.Errorf("%s = %q, want %q", k, got, w)
		}
	}
	if got := h.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q, want it kept", got)
	}
	if len(h) != 5 {
		t.Errorf("header has %d keys, want 5: %v", len(h), h)
	}
	// Appending to one value must not write into another's backing array.
	h[http.CanonicalHeaderKey(HeaderID)] = append(h[http.CanonicalHeaderKey(HeaderID)], "x")
	if got := h.Get(HeaderTimestamp); got != "1674087231" {
		t.Errorf("after appending to webhook-id, webhook-timestamp = %q", got)
	}

	before := h.Clone()
	if err := SignHeader(h, []string{testSecret, "whsec_%%%"}, "evt_2", at, body); !errors.Is(err, ErrBadSecret) {
		t.Fatalf("SignHeader with a bad second secret: %v, want ErrBadSecret", err)
	}
	for k, v := range before {
		if strings.Join(h[k], "|") != strings.Join(v, "|") {
			t.Errorf("after a failed SignHeader, %s = %q, want %q unchanged", k, h[k], v)
		}
	}
}

// TestImports enforces that verify imports only the standard library, so
// a receiver can use it alone and engine, which shares its signing, pulls
// in no infrastructure through it. Its tests may use the bbolt inbox of
// verify/boltinbox, and nothing else of webhookd.
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	const mod = "github.com/webhookd/webhookd"
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if strings.HasSuffix(f, "_test.go") {
				if strings.HasPrefix(p, mod) && p != mod+"/verify" && p != mod+"/verify/boltinbox" {
					t.Errorf("%s imports %s", f, p)
				}
			} else if strings.Contains(strings.SplitN(p, "/", 2)[0], ".") {
				t.Errorf("%s imports %s, outside the standard library", f, p)
			}
		}
	}
}
