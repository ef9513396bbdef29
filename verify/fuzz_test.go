package verify

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func FuzzParseStandardSignature(f *testing.F) {
	vf := loadVectors(f)
	for _, v := range vf.Vectors {
		f.Add(v.Headers[HeaderSignature])
	}
	for _, v := range vf.NegativeVectors {
		f.Add(v.Headers[HeaderSignature])
	}
	for _, s := range []string{"", " ", "v1", "v1,", ",abc", "v1,a,b  v2,c", "\x00,\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		entries, err := parseStandardSignature(header)
		if err != nil {
			if !errors.Is(err, ErrMalformedHeader) {
				t.Fatalf("error %v is not ErrMalformedHeader", err)
			}
			return
		}
		if len(entries) == 0 {
			t.Fatal("no entries and no error")
		}
		for _, e := range entries {
			if e.version == "" || strings.Contains(e.version, ",") || strings.Contains(e.version+e.signature, " ") {
				t.Fatalf("bad entry %+v", e)
			}
		}
	})
}

func FuzzParseStripeHeader(f *testing.F) {
	vf := loadVectors(f)
	for _, v := range vf.StripeVectors {
		f.Add(v.Header)
	}
	for _, s := range []string{"", "t=", "t=1", "v1=", "t=1,v1=zz", "t=1,t=2,v1=00", "=,=", "t=1,v1=00=="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		ts, sigs, err := parseStripeHeader(header)
		if err != nil {
			if !errors.Is(err, ErrMalformedHeader) && !errors.Is(err, ErrBadSignature) {
				t.Fatalf("error %v is neither ErrMalformedHeader nor ErrBadSignature", err)
			}
			return
		}
		if len(sigs) == 0 {
			t.Fatal("no signatures and no error")
		}
		if !strings.Contains(","+header+",", ",t="+strconv.FormatInt(ts, 10)+",") {
			t.Fatalf("timestamp %d not in %q", ts, header)
		}
	})
}

// FuzzVerify feeds arbitrary headers and bodies to Verify: it never
// panics, accepts only what the secret signed, and its errors never hold
// the secret or the expected signatures.
func FuzzVerify(f *testing.F) {
	vf := loadVectors(f)
	for _, v := range vf.NegativeVectors {
		f.Add(v.Headers[HeaderID], v.Headers[HeaderTimestamp], v.Headers[HeaderSignature], "", []byte(v.SentPayload))
	}
	for _, v := range vf.StripeVectors {
		f.Add("", "", "", v.Header, []byte(v.SentPayload))
	}
	for _, v := range vf.Vectors {
		f.Add(v.Headers[HeaderID], v.Headers[HeaderTimestamp], v.Headers[HeaderSignature], "", []byte(v.PayloadBase64))
	}
	f.Fuzz(func(t *testing.T, id, ts, sig, xsig string, body []byte) {
		h := http.Header{}
		for k, v := range map[string]string{HeaderID: id, HeaderTimestamp: ts, HeaderSignature: sig, HeaderStripeSignature: xsig} {
			if v != "" {
				h.Set(k, v)
			}
		}
		v := Verifier{Secrets: []string{testSecret}, Tolerance: 1 << 62, Now: func() time.Time { return time.Unix(1674087241, 0) }}
		m, err := v.Verify(h, body)
		if err == nil {
			// Only a correct signature passes: recompute it.
			if m.Scheme == SchemeStandard {
				key, _ := StandardKey(testSecret)
				if !strings.Contains(" "+sig+" ", " "+StandardSignature(key, id, m.Timestamp.Unix(), body)+" ") {
					t.Fatalf("accepted %q without its signature", sig)
				}
			} else if !strings.Contains(xsig, "v1="+StripeSignature(testSecret, m.Timestamp.Unix(), body)) {
				t.Fatalf("accepted %q without its signature", xsig)
			}
			return
		}
		n, _ := strconv.ParseInt(ts, 10, 64)
		assertNoLeak(t, err, "", expectedSignatures(testSecret, id, n, body))
	})
}
