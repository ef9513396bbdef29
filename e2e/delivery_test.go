package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestDelivery_EndToEnd sends one event to five loopback endpoints that
// behave differently and checks each delivery's log, the dead letters, the
// signatures (with the official libraries) and a replay.
func TestDelivery_EndToEnd(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()

	flaky := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= 2 {
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte("upstream down"))
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	hang := newReceiver(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // read the request, never answer
	})
	gone := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusGone)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	limited := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	other := newReceiver(t, status(http.StatusOK))

	eps := map[*receiver]endpointCreated{}
	for _, rc := range []*receiver{flaky, hang, gone, limited} {
		eps[rc] = in.createEndpoint(rc.srv.URL+"/hooks", "payment.succeeded")
		rc.setSecret(eps[rc].Secret)
	}
	eps[other] = in.createEndpoint(other.srv.URL, "invoice.paid")
	other.setSecret(eps[other].Secret)

	ev := in.ingest("payment.succeeded", `{"amount": 4200, "currency": "eur"}`)
	if !strings.HasPrefix(ev.ID, "evt_") || len(ev.Deliveries) != 4 {
		t.Fatalf("ingest answered %+v, want an evt_ id and 4 deliveries", ev)
	}
	byEndpoint := map[string]string{}
	for _, d := range ev.Deliveries {
		byEndpoint[d.EndpointID] = d.ID
	}
	if _, ok := byEndpoint[eps[other].ID]; ok {
		t.Fatal("an endpoint subscribed to invoice.paid got a delivery of payment.succeeded")
	}

	t.Run("502 twice then 200: delivered on attempt 3", func(t *testing.T) {
		d := in.waitState(byEndpoint[eps[flaky].ID], "succeeded")
		var got []int
		for _, a := range d.Attempts {
			got = append(got, a.Status)
		}
		if want := []int{502, 502, 200}; !equalInts(got, want) {
			t.Errorf("attempt statuses %v, want %v", got, want)
		}
		if d.Attempts[0].Response != "upstream down" || d.Attempts[0].Outcome != "retry" {
			t.Errorf("first attempt %+v, want outcome retry with the response excerpt", d.Attempts[0])
		}
		if !d.NextAttemptAt.IsZero() {
			t.Errorf("next_attempt_at %v on a succeeded delivery", d.NextAttemptAt)
		}
	})
	t.Run("no answer: timeouts retried until dead", func(t *testing.T) {
		d := in.waitState(byEndpoint[eps[hang].ID], "dead")
		if len(d.Attempts) != 4 || len(hang.got()) != 4 {
			t.Fatalf("%d attempts recorded, %d requests received, want 4 each", len(d.Attempts), len(hang.got()))
		}
		for _, a := range d.Attempts {
			if !strings.Contains(a.Error, "timeout") || a.Status != 0 {
				t.Errorf("attempt %+v, want a timeout", a)
			}
		}
		if !strings.Contains(d.Reason, "all 4 attempts failed") || !strings.Contains(d.Reason, "timeout") {
			t.Errorf("reason %q", d.Reason)
		}
	})
	t.Run("410: dead after one attempt", func(t *testing.T) {
		d := in.waitState(byEndpoint[eps[gone].ID], "dead")
		if len(d.Attempts) != 1 || d.LastStatus != 410 {
			t.Fatalf("%d attempts, last status %d, want 1 and 410", len(d.Attempts), d.LastStatus)
		}
		if !strings.Contains(d.Reason, "check endpoint configuration") {
			t.Errorf("reason %q does not say to check the endpoint", d.Reason)
		}
		var dl struct {
			Data []deliveryView `json:"data"`
		}
		in.mustCall(200, "GET", "/v1/tenants/acme/dead-letters", nil, &dl)
		found := false
		for _, x := range dl.Data {
			if x.ID == d.ID {
				found = x.Reason == d.Reason && x.LastStatus == 410 && len(x.Attempts) == 1
			}
		}
		if !found {
			t.Errorf("dead letters %+v do not list %s with its reason, status and attempt", dl.Data, d.ID)
		}
	})
	t.Run("429 with Retry-After: the next attempt waits for it", func(t *testing.T) {
		d := in.waitState(byEndpoint[eps[limited].ID], "succeeded")
		reqs := limited.got()
		if len(reqs) != 2 || len(d.Attempts) != 2 {
			t.Fatalf("%d requests, %d attempts, want 2", len(reqs), len(d.Attempts))
		}
		if gap := reqs[1].at.Sub(reqs[0].at); gap < 950*time.Millisecond {
			t.Errorf("second attempt came %s after the 429, want at least Retry-After (1s)", gap)
		}
		if d.Attempts[0].RetryAfter != time.Second.Milliseconds() {
			t.Errorf("retry_after_ms recorded %d, want 1000", d.Attempts[0].RetryAfter)
		}
	})
	t.Run("other type subscribed: gets nothing", func(t *testing.T) {
		if n := len(other.got()); n != 0 {
			t.Errorf("received %d requests", n)
		}
	})
	t.Run("every request carries the same stored body and event id, and verifies", func(t *testing.T) {
		var stored struct {
			Event json.RawMessage `json:"event"`
		}
		in.mustCall(200, "GET", "/v1/tenants/acme/events/"+ev.ID, nil, &stored)
		var env map[string]any
		if err := json.Unmarshal(stored.Event, &env); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"id", "type", "created", "api_version", "data"} {
			if _, ok := env[k]; !ok {
				t.Errorf("envelope lacks %q: %s", k, stored.Event)
			}
		}
		for _, rc := range []*receiver{flaky, hang, gone, limited} {
			rc.checkSignatures()
			for _, r := range rc.got() {
				if !bytes.Equal(r.body, stored.Event) {
					t.Errorf("received body %s, stored %s", r.body, stored.Event)
				}
				if r.id != ev.ID {
					t.Errorf("webhook-id %q, want %q", r.id, ev.ID)
				}
			}
		}
	})
	t.Run("replay of a dead delivery: same id and body, fresh signature", func(t *testing.T) {
		id := byEndpoint[eps[gone].ID]
		first := gone.got()[0]
		// The 410 disabled the endpoint: the owner enables it, then replays.
		var ep struct {
			Disabled       bool   `json:"disabled"`
			DisabledReason string `json:"disabled_reason"`
		}
		in.mustCall(200, "GET", "/v1/tenants/acme/endpoints/"+eps[gone].ID, nil, &ep)
		if !ep.Disabled || !strings.Contains(ep.DisabledReason, "410") {
			t.Errorf("after a 410 the endpoint is %+v, want disabled", ep)
		}
		in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+eps[gone].ID, `{"disabled": false}`, nil)
		afterSecond(t, first.timestamp) // so the timestamp can differ
		var d deliveryView
		in.mustCall(202, "POST", "/v1/tenants/acme/deliveries/"+id+"/replay", nil, &d)
		d = in.waitState(id, "succeeded")
		if len(d.Replays) != 1 || d.Replays[0].By != "admin" {
			t.Errorf("replays %+v, want one by admin", d.Replays)
		}
		if len(d.Attempts) != 2 || d.Attempts[1].Cycle != 2 || d.Attempts[1].Number != 1 {
			t.Errorf("attempts %+v, want the replay's as cycle 2 attempt 1", d.Attempts)
		}
		reqs := gone.got()
		second := reqs[len(reqs)-1]
		if second.id != first.id || !bytes.Equal(second.body, first.body) {
			t.Error("the replay changed the event id or body")
		}
		if second.timestamp == first.timestamp {
			t.Error("the replay reused the first timestamp")
		}
		gone.checkSignatures()
	})
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestIngest_IdempotencyKey(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	rc := newReceiver(t, status(200))
	ep := in.createEndpoint(rc.srv.URL, "*")
	rc.setSecret(ep.Secret)

	first := in.ingest("invoice.paid", `{"invoice":"inv_1"}`, "Idempotency-Key", "order-42")
	again := in.ingest("invoice.paid", `{"invoice":"inv_1"}`, "Idempotency-Key", "order-42")
	if again.ID != first.ID || len(again.Deliveries) != 1 || again.Deliveries[0].ID != first.Deliveries[0].ID {
		t.Fatalf("retry answered %+v, want the first event %+v", again, first)
	}
	var problem map[string]any
	if got := in.call("POST", "/v1/tenants/acme/events", `{"type":"invoice.paid","data":{"invoice":"inv_2"}}`, &problem, "Idempotency-Key", "order-42"); got != 409 {
		t.Fatalf("same key, other body: status %d, want 409", got)
	}
	if problem["code"] != "idempotency_conflict" {
		t.Errorf("problem %v", problem)
	}
	in.waitState(first.Deliveries[0].ID, "succeeded")
	other := in.ingest("invoice.paid", `{"invoice":"inv_1"}`, "Idempotency-Key", "order-43")
	in.waitState(other.Deliveries[0].ID, "succeeded")
	if got := len(rc.got()); got != 2 {
		t.Errorf("receiver got %d requests, want 2 (one per distinct key)", got)
	}
	rc.checkSignatures()
}

func TestIngest_BadInputChangesNothing(t *testing.T) {
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)
	in.setup()
	rc := newReceiver(t, status(200))
	ep := in.createEndpoint(rc.srv.URL, "*")
	rc.setSecret(ep.Secret)

	big := `{"type":"invoice.paid","data":"` + strings.Repeat("x", 300<<10) + `"}`
	tests := []struct {
		name, path, body string
		noAuth           bool
		want             int
		code, field      string
	}{
		{"malformed JSON", "/v1/tenants/acme/events", `{"type":"invoice.paid","data":`, false, 400, "invalid_json", ""},
		{"data not JSON", "/v1/tenants/acme/events", `{"type":"invoice.paid","data":nope}`, false, 400, "invalid_json", ""},
		{"unknown type", "/v1/tenants/acme/events", `{"type":"invoice.voided","data":{}}`, false, 422, "unknown_event_type", "type"},
		{"missing auth", "/v1/tenants/acme/events", `{"type":"invoice.paid","data":{}}`, true, 401, "unauthorized", ""},
		{"oversize body", "/v1/tenants/acme/events", big, false, 413, "body_too_large", ""},
		{"unknown tenant", "/v1/tenants/nobody/events", `{"type":"invoice.paid","data":{}}`, false, 404, "tenant_not_found", "tenant"},
		{"missing data", "/v1/tenants/acme/events", `{"type":"invoice.paid"}`, false, 422, "invalid_field", "data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", in.base+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			if !tt.noAuth {
				req.Header.Set("Authorization", "Bearer "+testToken)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var p struct {
				Code, Field, Detail string
			}
			json.NewDecoder(resp.Body).Decode(&p)
			if resp.StatusCode != tt.want || p.Code != tt.code || p.Field != tt.field {
				t.Errorf("got %d %q field %q (%s), want %d %q field %q", resp.StatusCode, p.Code, p.Field, p.Detail, tt.want, tt.code, tt.field)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
	// Nothing was stored or sent for any of them: the next good event is the
	// receiver's first request.
	ev := in.ingest("invoice.paid", `{"ok":true}`)
	in.waitState(ev.Deliveries[0].ID, "succeeded")
	if reqs := rc.got(); len(reqs) != 1 || reqs[0].id != ev.ID {
		t.Errorf("receiver got %d requests, want exactly the good event's", len(reqs))
	}
	in.mustCall(404, "GET", "/v1/tenants/nobody", nil, nil)
}

// TestRestart_ResumesPendingAndInFlight stops webhookd with deliveries
// waiting for a retry and one attempt in flight, starts it again on the same
// file, and expects every delivery to complete.
func TestRestart_ResumesPendingAndInFlight(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := strings.Replace(testConfig, `schedule = ["20ms", "40ms", "80ms"]`, `schedule = ["1s", "1s", "1s", "1s", "1s"]`, 1)
	cfg = strings.Replace(cfg, `shutdown_timeout = "2s"`, `shutdown_timeout = "200ms"`, 1)
	cfg = strings.Replace(cfg, `attempt_timeout = "300ms"`, `attempt_timeout = "5s"`, 1)
	// The second process below gives up on the file lock after this.
	cfg += "[storage]\nlock_timeout = \"100ms\"\n"

	var healthy atomic.Bool
	failing := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if healthy.Load() {
			w.WriteHeader(200)
			return
		}
		w.WriteHeader(503)
	})
	inFlight := make(chan struct{}, 1)
	slow := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if healthy.Load() {
			w.WriteHeader(200)
			return
		}
		select {
		case inFlight <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	})

	in := startInstance(t, dir, cfg)
	in.setup()
	epFail := in.createEndpoint(failing.srv.URL, "payment.succeeded")
	failing.setSecret(epFail.Secret)
	epSlow := in.createEndpoint(slow.srv.URL, "invoice.paid")
	slow.setSecret(epSlow.Secret)

	var pending []string
	for i := range 5 {
		ev := in.ingest("payment.succeeded", `{"n":`+strconv.Itoa(i)+`}`)
		pending = append(pending, ev.Deliveries[0].ID)
	}
	slowEv := in.ingest("invoice.paid", `{"slow":true}`)
	pending = append(pending, slowEv.Deliveries[0].ID)

	select {
	case <-inFlight:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow endpoint never got its request")
	}
	for _, id := range pending[:5] {
		waitFor(t, "the first attempt's 503", func() bool { return in.delivery(id).LastStatus == 503 })
	}
	if d := in.delivery(slowEv.Deliveries[0].ID); d.State != "delivering" {
		t.Errorf("the slow delivery is %q while its attempt is in flight, want delivering", d.State)
	}

	// A second process on the same file fails at once with a clear error
	// (bbolt's file lock: on postgres a second node is welcome, see
	// cluster_test.go).
	if !onPostgres {
		var logs syncBuffer
		second := launch(t, &logs, procWithin, "-config", filepath.Join(dir, "webhookd.toml"), "-listen", "127.0.0.1:0", "-db", filepath.Join(dir, "webhookd.db"))
		select {
		case <-second.exited:
			if second.err == nil || !strings.Contains(logs.String(), "in use") {
				t.Errorf("second process: %v (%s), want a clear 'in use' error", second.err, strings.TrimSpace(logs.String()))
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a second process on the same file hangs")
		}
	}

	in.stop()
	healthy.Store(true)
	in = startInstance(t, dir, cfg)
	for _, id := range pending {
		d := in.waitState(id, "succeeded")
		if last := d.Attempts[len(d.Attempts)-1]; last.Status != 200 {
			t.Errorf("delivery %s: last attempt %+v", id, last)
		}
	}
	failing.checkSignatures()
	slow.checkSignatures()
}
