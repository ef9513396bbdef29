package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/client"
	"github.com/webhookd/webhookd/storage"
)

// TestOwedFanOut_BurstThenReads: a burst of 200 events from 32 clients
// to ten endpoints, every fan-out owed ([storage] owed_fanout_above 0),
// while one endpoint is disabled, one takes another type, one is deleted
// and one is created. Right after each 202 its deliveries are there by
// ID and on the event's page, and the same Idempotency-Key answers the
// same event and deliveries, and a replay finds its delivery; right after the burst the delivery log (all
// of it, by endpoint, by state), the report, the reconciliation feed and
// the dead letters show each delivery a 202 named once and no other;
// enabling the disabled endpoint sends what it held, and every delivery
// reaches its receiver. On PostgreSQL (deliveries written with the
// event) the same holds.
func TestOwedFanOut_BurstThenReads(t *testing.T) {
	t.Parallel()
	const events, clients = 200, 32
	dir := t.TempDir()
	in := startInstance(t, dir, configWith(t, testConfig, map[string]any{
		"storage.owed_fanout_above": 0, // every fan-out owed
		"log.level":                 "warn",
	}))
	in.setup()
	a := newAPI(in.base, testToken)
	ctx := context.Background()

	var mu sync.Mutex
	received := map[crashPair]int{} // (webhook-id, path) → requests
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received[crashPair{r.Header.Get("webhook-id"), r.URL.Path}]++
		mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	path := map[string]string{} // endpoint ID → receiver path
	endpoint := func(i int) string {
		ep := in.createEndpoint(fmt.Sprintf("%s/ep/%d", rc.URL, i), "*")
		path[ep.ID] = fmt.Sprintf("/ep/%d", i)
		return ep.ID
	}
	eps := make([]string, 10)
	for i := range eps {
		eps[i] = endpoint(i)
	}
	disabled, retyped, deleted := eps[7], eps[8], eps[9]

	// The burst. Each client checks its own answers at once.
	var (
		next, acked atomic.Int64
		errsMu      sync.Mutex
		errs        []string
		named       = map[string]ingestResponse{} // event ID → its 202
	)
	fail := func(format string, args ...any) {
		errsMu.Lock()
		defer errsMu.Unlock()
		if len(errs) < 20 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	do := func(method, path, body string, out any, header ...string) (int, http.Header) {
		req, _ := http.NewRequest(method, in.base+path, bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+testToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fail("%s %s: %v", method, path, err)
			return 0, nil
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if out != nil && resp.StatusCode/100 == 2 {
			if err := json.Unmarshal(raw, out); err != nil {
				fail("%s %s: %v", method, path, err)
			}
		}
		return resp.StatusCode, resp.Header
	}
	ids := func(r ingestResponse) []string {
		var s []string
		for _, d := range r.Deliveries {
			s = append(s, d.ID)
		}
		slices.Sort(s)
		return s
	}
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for i := next.Add(1); i <= events; i = next.Add(1) {
				key, body := fmt.Sprintf("burst-%d", i), fmt.Sprintf(`{"type":"payment.succeeded","data":{"n":%d}}`, i)
				var res ingestResponse
				if code, _ := do("POST", "/v1/tenants/acme/events", body, &res, "Idempotency-Key", key); code != 202 {
					fail("ingest %d: %d", i, code)
					continue
				}
				acked.Add(1)
				if i%4 == 0 && len(res.Deliveries) > 0 {
					if code, _ := do("POST", "/v1/tenants/acme/deliveries/"+res.Deliveries[0].ID+"/replay", "", nil); code != 202 {
						fail("replay of delivery %s right after its 202: %d", res.Deliveries[0].ID, code)
					}
				}
				for _, d := range res.Deliveries {
					var v deliveryView
					if code, _ := do("GET", "/v1/tenants/acme/deliveries/"+d.ID, "", &v); code != 200 || v.EventID != res.ID || v.EndpointID != d.EndpointID {
						fail("GET delivery %s of event %s right after its 202: %d, %+v", d.ID, res.ID, code, v)
					}
				}
				var ev struct {
					Deliveries []struct {
						ID string `json:"id"`
					} `json:"deliveries"`
				}
				do("GET", "/v1/tenants/acme/events/"+res.ID, "", &ev)
				var onPage []string
				for _, d := range ev.Deliveries {
					onPage = append(onPage, d.ID)
				}
				slices.Sort(onPage)
				if !slices.Equal(onPage, ids(res)) {
					fail("event %s right after its 202: page shows deliveries %v, the 202 named %v", res.ID, onPage, ids(res))
				}
				var again ingestResponse
				code, h := do("POST", "/v1/tenants/acme/events", body, &again, "Idempotency-Key", key)
				if code != 202 || h.Get("Idempotent-Replayed") != "true" || again.ID != res.ID || !slices.Equal(ids(again), ids(res)) {
					fail("ingest %d again with its key: %d replayed %q, %s %v; first %s %v", i, code, h.Get("Idempotent-Replayed"), again.ID, ids(again), res.ID, ids(res))
				}
				errsMu.Lock()
				named[res.ID] = res
				errsMu.Unlock()
			}
		})
	}
	// Mid-burst, the endpoints change.
	if !poll(15*time.Second, func() bool { return acked.Load() >= 50 }) {
		t.Fatalf("%d events acknowledged in 15s, want 50: %q", acked.Load(), errs)
	}
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+disabled, `{"disabled": true}`, nil)
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+retyped, `{"event_types": ["invoice.paid"]}`, nil)
	in.mustCall(204, "DELETE", "/v1/tenants/acme/endpoints/"+deleted, nil, nil)
	created := endpoint(10)
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	if len(named) != events {
		t.Fatalf("%d events acknowledged, want %d", len(named), events)
	}

	// Right after the burst: each listing shows each named delivery once.
	want := map[string]string{} // delivery ID → endpoint ID
	byEndpoint := map[string]int{}
	for _, r := range named {
		for _, d := range r.Deliveries {
			if _, twice := want[d.ID]; twice {
				t.Errorf("delivery %s named by two 202s", d.ID)
			}
			want[d.ID] = d.EndpointID
			byEndpoint[d.EndpointID]++
		}
	}
	checkListed := func(what string, ds []client.Delivery, of func(endpoint string) bool) {
		t.Helper()
		seen := map[string]bool{}
		for _, d := range ds {
			if seen[d.ID] {
				t.Errorf("%s lists delivery %s twice", what, d.ID)
			}
			seen[d.ID] = true
			if ep, ok := want[d.ID]; !ok || ep != d.EndpointID || !of(ep) {
				t.Errorf("%s lists delivery %s (endpoint %s), which no 202 named there", what, d.ID, d.EndpointID)
			}
		}
		for id, ep := range want {
			if of(ep) && !seen[id] {
				t.Errorf("%s lacks delivery %s the 202 named", what, id)
			}
		}
	}
	all, _, err := a.deliveries(ctx, "acme", url.Values{"limit": {"37"}})
	if err != nil {
		t.Fatal(err)
	}
	checkListed("the delivery log", all, func(string) bool { return true })
	for _, ep := range append(eps, created) {
		ds, _, err := a.deliveries(ctx, "acme", url.Values{"endpoint": {ep}})
		if err != nil {
			t.Fatal(err)
		}
		checkListed("the log of endpoint "+path[ep], ds, func(e string) bool { return e == ep })
	}
	rep, err := a.tenantReport(ctx, "acme", events)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Deliveries != len(want) || rep.buckets() != len(want) {
		t.Errorf("report right after the burst: %d deliveries in buckets adding up to %d, want %d", rep.Deliveries, rep.buckets(), len(want))
	}
	feed, _, err := listAll[client.FeedEvent](ctx, a, "/v1/tenants/acme/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	inFeed := map[string]int{}
	for _, e := range feed {
		inFeed[e.Event.ID]++
	}
	for id := range named {
		if inFeed[id] != 1 {
			t.Errorf("event %s is %d times in the reconciliation feed", id, inFeed[id])
		}
	}
	if len(feed) != events {
		t.Errorf("the reconciliation feed has %d events, want %d", len(feed), events)
	}

	// The endpoints of the moment of each 202: the one created after the
	// first 50 events has none of them, the retyped one none after it.
	if byEndpoint[created] == 0 || byEndpoint[created] > events-50 {
		t.Errorf("the endpoint created after 50 of %d events has %d deliveries", events, byEndpoint[created])
	}
	for _, ep := range eps[:7] {
		if byEndpoint[ep] != events {
			t.Errorf("endpoint %s has %d deliveries, want %d", path[ep], byEndpoint[ep], events)
		}
	}
	for _, ep := range []string{disabled, retyped, deleted} {
		if n := byEndpoint[ep]; n < 50 || n == events && ep != disabled {
			t.Errorf("endpoint %s changed after 50 events has %d deliveries", path[ep], n)
		}
	}

	// Once nothing is pending: the states partition the log, the
	// disabled endpoint's are paused, the deleted one's dead or sent.
	waitFor(t, "nothing pending", func() bool {
		ds, _, err := a.deliveries(ctx, "acme", url.Values{"state": {"pending"}})
		return err == nil && len(ds) == 0
	})
	stateOf := map[string]string{}
	for _, st := range []string{"pending", "delivering", "succeeded", "dead", "paused", "waiting"} {
		ds, _, err := a.deliveries(ctx, "acme", url.Values{"state": {st}})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if prev, twice := stateOf[d.ID]; twice {
				t.Errorf("delivery %s listed as %s and as %s", d.ID, prev, st)
			}
			stateOf[d.ID] = st
		}
	}
	dead, _, err := listAll[client.Delivery](ctx, a, "/v1/tenants/acme/dead-letters", nil)
	if err != nil {
		t.Fatal(err)
	}
	deadLetters := map[string]bool{}
	for _, d := range dead {
		deadLetters[d.ID] = true
		if d.EndpointID != deleted || d.Reason != "endpoint deleted" {
			t.Errorf("dead letter %s of endpoint %s (%s): only the deleted endpoint's should die", d.ID, path[d.EndpointID], d.Reason)
		}
	}
	paused := 0
	for id, ep := range want {
		st := stateOf[id]
		switch {
		case st == "" && ep != deleted:
			t.Errorf("delivery %s is in no state's listing", id)
		case st == "paused" && ep != disabled, st == "dead" && ep != deleted:
			t.Errorf("delivery %s of endpoint %s is %s", id, path[ep], st)
		case st != "dead" && deadLetters[id], st == "dead" && !deadLetters[id]:
			t.Errorf("delivery %s is %s, dead letter %v", id, st, deadLetters[id])
		}
		if st == "paused" {
			paused++
		}
	}
	if len(stateOf) != len(want) {
		t.Errorf("the state listings hold %d deliveries, want %d", len(stateOf), len(want))
	}
	if rep, err := a.tenantReport(ctx, "acme", events); err != nil || rep.Paused != paused || rep.buckets() != len(want) {
		t.Errorf("report once settled: %d paused (want %d), buckets %d (want %d), %v", rep.Paused, paused, rep.buckets(), len(want), err)
	}

	// The held ones go once the endpoint is enabled; each delivery not
	// dead reached its receiver.
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+disabled, `{"disabled": false, "deliver_held": true}`, nil)
	waitFor(t, "every delivery but the deleted endpoint's received", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range named {
			for _, d := range r.Deliveries {
				if !deadLetters[d.ID] && received[crashPair{r.ID, path[d.EndpointID]}] == 0 {
					return false
				}
			}
		}
		return true
	})
	in.stop()
	if !onPostgres {
		db, err := storage.Open(filepath.Join(dir, "webhookd.db"), storage.Options{LockTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.Check(); err != nil {
			t.Errorf("Check: %v", err)
		}
	}
}

// TestOwedFanOut_HotBackupCompactAndStart: a hot backup taken while
// eight clients ingest with every fan-out owed ([storage]
// owed_fanout_above 0) copies the events whose deliveries are not
// written yet with their plans; compacting the copy keeps the plans; a
// webhookd started on the compacted copy stores them as planned. So
// every event acknowledged before the backup began has, in the copy,
// exactly the deliveries its 202 named (by ID, to the endpoints of the
// moment of the 202: one unordered, one disabled, one ordered by key),
// each delivered but the disabled endpoint's, which are held, and the
// copy passes its check.
func TestOwedFanOut_HotBackupCompactAndStart(t *testing.T) {
	skipOnPostgres(t, "the hot backup and compact of the bbolt file, whose fan-outs may be owed (postgres owes none)")
	t.Parallel()
	config := configWith(t, testConfig, map[string]any{"storage.owed_fanout_above": 0, "log.level": "warn"})
	in := startInstance(t, t.TempDir(), config)
	in.setup()
	var mu sync.Mutex
	received := map[crashPair]int{} // (webhook-id, path) → requests
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received[crashPair{r.Header.Get("webhook-id"), r.URL.Path}]++
		mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	plain := in.createEndpoint(rc.URL+"/plain", "*")
	held := in.createEndpoint(rc.URL+"/held", "*")
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+held.ID, `{"disabled": true}`, nil)
	var ordered endpointCreated
	in.mustCall(201, "POST", "/v1/tenants/acme/endpoints", map[string]any{"url": rc.URL + "/ordered", "event_types": []string{"*"}, "ordering": "key"}, &ordered)
	path := map[string]string{plain.ID: "/plain", held.ID: "/held", ordered.ID: "/ordered"}

	var (
		ackMu sync.Mutex
		acked []ingestResponse
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	for c := range 8 {
		wg.Go(func() {
			for i := 0; i < 1000 && !stop.Load(); i++ {
				body := fmt.Sprintf(`{"type":"invoice.paid","data":{"c":%d,"n":%d}}`, c, i)
				if i%4 == 0 { // a keyed event is stored with its deliveries
					body = fmt.Sprintf(`{"type":"invoice.paid","ordering_key":"k%d","data":{"c":%d,"n":%d}}`, c, c, i)
				}
				resp, raw := in.postEventTo("acme", body)
				var ing ingestResponse
				if resp.StatusCode != 202 || json.Unmarshal(raw, &ing) != nil {
					t.Errorf("ingest: %d %s", resp.StatusCode, raw)
					return
				}
				ackMu.Lock()
				acked = append(acked, ing)
				ackMu.Unlock()
			}
		})
	}
	waitFor(t, "100 events acknowledged", func() bool { ackMu.Lock(); defer ackMu.Unlock(); return len(acked) >= 100 })
	// A plan lives a commit or two: up to ten backups, until one copies
	// some.
	dir := t.TempDir()
	var (
		before []ingestResponse
		backup string
		owed   int
	)
	for i := 0; i < 10 && owed == 0; i++ {
		ackMu.Lock()
		before = slices.Clone(acked)
		ackMu.Unlock()
		backup = filepath.Join(dir, fmt.Sprintf("backup%d.db", i))
		if msg, err := command(t, "backup", "-o", backup, "-url", in.base, "-token", testToken); err != nil {
			t.Fatalf("backup: %v\n%s", err, msg)
		}
		owed = owedFanOuts(t, backup)
	}
	stop.Store(true)
	wg.Wait()
	compacted := filepath.Join(dir, "compacted.db")
	if msg, err := command(t, "compact", "-o", compacted, "-db", backup); err != nil {
		t.Fatalf("compact of the copy: %v\n%s", err, msg)
	}
	if got := owedFanOuts(t, compacted); got != owed {
		t.Errorf("the compacted copy owes %d fan-outs, the copy %d", got, owed)
	}
	t.Logf("%d events acknowledged before the backup began; the copy owes %d fan-outs", len(before), owed)

	started := t.TempDir()
	if err := os.Rename(compacted, filepath.Join(started, "webhookd.db")); err != nil {
		t.Fatal(err)
	}
	in.stop() // its attempts are not the copy's
	in2 := startInstance(t, started, config)
	ids := func(ds []deliveryView) []string {
		var s []string
		for _, d := range ds {
			s = append(s, d.ID+" "+d.EndpointID)
		}
		slices.Sort(s)
		return s
	}
	for _, r := range before {
		var want []deliveryView
		for _, d := range r.Deliveries {
			want = append(want, deliveryView{ID: d.ID, EndpointID: d.EndpointID})
		}
		var got struct {
			Deliveries []deliveryView `json:"deliveries"`
		}
		if code := in2.call("GET", "/v1/tenants/acme/events/"+r.ID, nil, &got); code != 200 {
			t.Errorf("event %s acknowledged before the backup: %d in the copy", r.ID, code)
			continue
		}
		if g, w := ids(got.Deliveries), ids(want); !slices.Equal(g, w) {
			t.Errorf("event %s in the copy has deliveries %v, its 202 named %v", r.ID, g, w)
		}
		for _, d := range got.Deliveries {
			if d.EndpointID == held.ID && d.State != "paused" {
				t.Errorf("delivery %s of the disabled endpoint is %s in the copy, want paused", d.ID, d.State)
			}
		}
	}
	for _, r := range before {
		for _, d := range r.Deliveries {
			if d.EndpointID == held.ID {
				continue
			}
			if v := in2.waitState(d.ID, "succeeded"); v.EventID != r.ID {
				t.Errorf("delivery %s is of event %s in the copy, its 202 was %s's", d.ID, v.EventID, r.ID)
			}
			mu.Lock()
			n := received[crashPair{r.ID, path[d.EndpointID]}]
			mu.Unlock()
			if n == 0 {
				t.Errorf("delivery %s of event %s succeeded, but the receiver at %s never got the event", d.ID, r.ID, path[d.EndpointID])
			}
		}
	}
	in2.stop()
	db, err := storage.Open(filepath.Join(started, "webhookd.db"), storage.Options{LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Check(); err != nil {
		t.Errorf("Check of the started copy: %v", err)
	}
}
