package verify_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/verify"
	"github.com/webhookd/webhookd/verify/boltinbox"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// openInbox opens a boltinbox.Inbox on a new file in tb.TempDir() and, at
// cleanup, checks the file's consistency and closes it.
func openInbox(tb testing.TB) *boltinbox.Inbox {
	tb.Helper()
	in, err := boltinbox.Open(filepath.Join(tb.TempDir(), "inbox.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		err := in.DB().View(func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				return err
			}
			return nil
		})
		if err != nil {
			tb.Errorf("bbolt check: %v", err)
		}
		if err := in.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return in
}

func TestHandler(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var (
		mu      sync.Mutex
		handled []verify.Message
		failing bool
	)
	in := openInbox(t)
	logs := &syncBuffer{}
	rc := verify.Handler([]string{verify.TestSecret}, in, func(ctx context.Context, tx verify.Tx, m verify.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return errors.New("database of the receiver is down")
		}
		handled = append(handled, m)
		_, err := tx.EnqueueTask("email", nil)
		return err
	})
	rc.Sender = "acme"
	rc.Verifier.Now = func() time.Time { return now }
	rc.MaxBodyBytes = 4 << 10
	rc.Logger = slog.New(slog.NewTextHandler(logs, nil))
	srv := httptest.NewServer(rc)
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Logf("server on %s", srv.URL)
	}

	envelope := func(id string) []byte {
		return []byte(`{"id":"` + id + `","type":"invoice.paid","created":"2023-11-14T22:13:20Z","api_version":"1","data":{}}`)
	}
	signed := func(id string, body []byte, mutate ...func(http.Header)) http.Header {
		h, err := verify.Sign([]string{verify.TestSecret}, id, now, body)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mutate {
			m(h)
		}
		return h
	}
	post := func(method string, h http.Header, body []byte) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+"/webhooks", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range h {
			req.Header[k] = vs
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	stripeOnly := func(h http.Header) { verify.DelStd(h) }

	tests := []struct {
		name       string
		method     string // "": POST
		header     http.Header
		body       []byte
		failing    bool
		wantStatus int
		wantBody   string
	}{
		{name: "processed", header: signed("evt_1", envelope("evt_1")), body: envelope("evt_1"), wantStatus: 200, wantBody: "processed"},
		{name: "duplicate", header: signed("evt_1", envelope("evt_1")), body: envelope("evt_1"), wantStatus: 200, wantBody: "already processed"},
		{name: "x-signature only", header: signed("evt_2", envelope("evt_2"), stripeOnly), body: envelope("evt_2"), wantStatus: 200, wantBody: "processed"},
		{name: "x-signature with matching webhook-id", header: signed("evt_3", envelope("evt_3"), func(h http.Header) {
			h.Del(verify.HeaderSignature)
		}), body: envelope("evt_3"), wantStatus: 200, wantBody: "processed"},
		{name: "x-signature with other webhook-id", header: signed("evt_4", envelope("evt_4"), func(h http.Header) {
			h.Del(verify.HeaderSignature)
			h.Set(verify.HeaderID, "evt_other")
		}), body: envelope("evt_4"), wantStatus: 400},

		{name: "bad signature", header: signed("evt_5", envelope("evt_5")), body: envelope("evt_6"), wantStatus: 401, wantBody: "invalid signature"},
		{name: "no signature", header: http.Header{}, body: envelope("evt_5"), wantStatus: 401, wantBody: "invalid signature"},
		{name: "stale", header: func() http.Header {
			h, _ := verify.Sign([]string{verify.TestSecret}, "evt_5", now.Add(-time.Hour), envelope("evt_5"))
			return h
		}(), body: envelope("evt_5"), wantStatus: 401, wantBody: "invalid signature"},
		{name: "malformed", header: signed("evt_5", envelope("evt_5"), func(h http.Header) { h.Set(verify.HeaderTimestamp, "soon") }),
			body: envelope("evt_5"), wantStatus: 401, wantBody: "invalid signature"},

		{name: "not JSON", header: signed("evt_7", []byte("hello")), body: []byte("hello"), wantStatus: 400},
		{name: "JSON array", header: signed("evt_7", []byte(`[1]`)), body: []byte(`[1]`), wantStatus: 400},
		{name: "no id", header: signed("evt_7", []byte(`{"type":"x"}`)), body: []byte(`{"type":"x"}`), wantStatus: 400},
		{name: "numeric id", header: signed("evt_7", []byte(`{"id":7}`)), body: []byte(`{"id":7}`), wantStatus: 400},
		{name: "id differs from webhook-id", header: signed("evt_7", envelope("evt_8")), body: envelope("evt_8"), wantStatus: 400},
		{name: "id reused with another body", header: signed("evt_1", []byte(`{"id":"evt_1","x":1}`)), body: []byte(`{"id":"evt_1","x":1}`), wantStatus: 400},
		{name: "id too long", header: signed(strings.Repeat("x", verify.MaxKeyLen+1), envelope(strings.Repeat("x", verify.MaxKeyLen+1))),
			body: envelope(strings.Repeat("x", verify.MaxKeyLen+1)), wantStatus: 400},

		{name: "fn fails", header: signed("evt_9", envelope("evt_9")), body: envelope("evt_9"), failing: true, wantStatus: 500, wantBody: "internal error"},
		{name: "redelivery after failure", header: signed("evt_9", envelope("evt_9")), body: envelope("evt_9"), wantStatus: 200, wantBody: "processed"},

		{name: "too large", header: signed("evt_10", bytes.Repeat([]byte("x"), 5<<10)), body: bytes.Repeat([]byte("x"), 5<<10), wantStatus: 413},
		{name: "GET", method: http.MethodGet, header: http.Header{}, wantStatus: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			failing = tt.failing
			mu.Unlock()
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			status, body := post(method, tt.header, tt.body)
			if status != tt.wantStatus || tt.wantBody != "" && body != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", status, body, tt.wantStatus, tt.wantBody)
			}
		})
	}

	mu.Lock()
	var ids []string
	for _, m := range handled {
		ids = append(ids, m.ID)
	}
	mu.Unlock()
	if got, want := strings.Join(ids, ","), "evt_1,evt_2,evt_3,evt_9"; got != want {
		t.Errorf("handled %s, want %s", got, want)
	}
	// The typed errors reach the log, never the sender, and neither holds
	// the secret.
	l := logs.String()
	for _, want := range []string{"timestamp too old", "no signature header", "no signature matches", "malformed", "database of the receiver is down"} {
		if !strings.Contains(l, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	for _, f := range verify.ExpectedSignatures(verify.TestSecret, "evt_5", now.Unix(), envelope("evt_6")) {
		if strings.Contains(l, f) {
			t.Errorf("log holds secret material %q", f)
		}
	}
	// The task enqueued with evt_1 is queued, not done.
	if tk, err := in.Task(t.Context(), "acme", "evt_1", "email"); err != nil || tk.State != verify.TaskPending {
		t.Errorf("task: %v, %v", tk.State, err)
	}
}

func TestHandler_misconfigured(t *testing.T) {
	body := []byte(`{"id":"evt_1"}`)
	h, _ := verify.Sign([]string{verify.TestSecret}, "evt_1", time.Now(), body)
	for _, secrets := range [][]string{nil, {"not base64!"}} {
		rc := verify.Handler(secrets, openInbox(t), nil)
		rc.Logger = slog.New(slog.DiscardHandler)
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header = h.Clone()
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, req)
		if w.Code != 500 {
			t.Errorf("secrets %q: %d, want 500", secrets, w.Code)
		}
	}
}

func TestHandler_nilHandleRecords(t *testing.T) {
	in := openInbox(t)
	rc := verify.Handler([]string{verify.TestSecret}, in, nil)
	rc.Logger = slog.New(slog.DiscardHandler)
	body := []byte(`{"id":"evt_1"}`)
	for _, want := range []string{"processed", "already processed"} {
		h, _ := verify.Sign([]string{verify.TestSecret}, "evt_1", time.Now(), body)
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header = h
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, req)
		if w.Code != 200 || strings.TrimSpace(w.Body.String()) != want {
			t.Errorf("%d %q, want 200 %q", w.Code, w.Body, want)
		}
	}
}

// TestHandler_AnswersChallenge checks the endpoint-verification answer
// against the official library's.
func TestHandler_AnswersChallenge(t *testing.T) {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	inbox := openInbox(t)
	srv := httptest.NewServer(verify.Handler([]string{secret}, inbox, func(context.Context, verify.Tx, verify.Message) error {
		t.Error("a challenge ran the event handler")
		return nil
	}))
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL, nil)
	req.Header.Set(verify.HeaderChallenge, "Zm9vYmFy")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	wh, _ := standardwebhooks.NewWebhook(secret)
	if want := wh.EndpointVerificationResponse("Zm9vYmFy"); resp.StatusCode != 200 || resp.Header.Get(verify.HeaderChallengeResponse) != want {
		t.Errorf("answered %d %q, want 200 %q", resp.StatusCode, resp.Header.Get(verify.HeaderChallengeResponse), want)
	}
}
