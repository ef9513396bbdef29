package client_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/client"
	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/storage"
)

// TestClient_EveryRoute calls every method of the client against the
// real server, in the order a sender would: set up, ingest, read what
// happened, replay, hand a tenant its own token, back up, tear down.
func TestClient_EveryRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client("", client.Options{})
	ctx := t.Context()

	if err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}

	// Tenants and the catalogue.
	tn, created, err := c.PutTenant(ctx, "acme", client.TenantInput{Name: "Acme", Environment: client.EnvironmentLive})
	if err != nil || !created || tn.ID != "acme" || tn.Name != "Acme" || tn.Created.IsZero() {
		t.Fatalf("PutTenant = %+v, %v, %v; want acme, created", tn, created, err)
	}
	if _, created, err := c.PutTenant(ctx, "acme", client.TenantInput{Name: "Acme Inc"}); err != nil || created {
		t.Fatalf("PutTenant again: created %v, %v; want an update", created, err)
	}
	if got, err := c.Tenant(ctx, "acme"); err != nil || got.Name != "Acme Inc" || got.Environment != client.EnvironmentLive {
		t.Fatalf("Tenant = %+v, %v", got, err)
	}
	et, created, err := c.PutEventType(ctx, "invoice.paid", "An invoice was paid.")
	if err != nil || !created || et.Name != "invoice.paid" || et.Description != "An invoice was paid." {
		t.Fatalf("PutEventType = %+v, %v, %v", et, created, err)
	}
	if _, _, err := c.PutEventType(ctx, "invoice.voided", ""); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, c.EventTypes(ctx, client.ListOptions{})); len(got) != 2 || got[0].Name != "invoice.paid" {
		t.Fatalf("EventTypes = %+v", got)
	}

	// Endpoints: one that takes deliveries, one that refuses them.
	ok, err := c.CreateEndpoint(ctx, "acme", client.EndpointInput{URL: e.receiver.URL + "/ok", EventTypes: []string{"invoice.paid"}, Description: "takes them"})
	if err != nil || ok.ID == "" || ok.Secret == "" || ok.Tenant != "acme" || ok.Environment != client.EnvironmentLive {
		t.Fatalf("CreateEndpoint = %+v, %v", ok, err)
	}
	bad, err := c.CreateEndpoint(ctx, "acme", client.EndpointInput{URL: e.receiver.URL + "/refuses", EventTypes: []string{client.AllEventTypes}})
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, c.Endpoints(ctx, "acme", client.ListOptions{})); len(got) != 2 {
		t.Fatalf("Endpoints = %+v, want 2", got)
	}
	desc := "takes them all"
	upd, err := c.UpdateEndpoint(ctx, "acme", ok.ID, client.EndpointPatch{Description: &desc})
	if err != nil || upd.Description != desc || upd.URL != ok.URL {
		t.Fatalf("UpdateEndpoint = %+v, %v", upd, err)
	}
	if got, err := c.Endpoint(ctx, "acme", ok.ID); err != nil || got.Description != desc || !slices.Equal(got.EventTypes, []string{"invoice.paid"}) {
		t.Fatalf("Endpoint = %+v, %v", got, err)
	}
	rot, err := c.RotateSecret(ctx, "acme", ok.ID, time.Hour)
	if err != nil || rot.Secret == "" || rot.Secret == ok.Secret || rot.PreviousSecretExpires.Before(time.Now().Add(59*time.Minute)) {
		t.Fatalf("RotateSecret(1h) = %+v, %v; want a new secret, the old one for an hour", rot, err)
	}
	shown, err := c.RevealSecret(ctx, "acme", ok.ID)
	if err != nil || shown.Secret != rot.Secret || len(shown.Previous) != 1 || shown.Previous[0].Secret != ok.Secret || !shown.Previous[0].Expires.Equal(rot.PreviousSecretExpires) || shown.Environment != client.EnvironmentLive {
		t.Fatalf("RevealSecret = %+v, %v; want the new secret, the old one until %v", shown, err, rot.PreviousSecretExpires)
	}
	if got, err := c.Endpoint(ctx, "acme", ok.ID); err != nil || len(got.SecretReveals) != 1 || got.SecretReveals[0].By != "admin" || got.SecretReveals[0].At.IsZero() {
		t.Fatalf("Endpoint after a reveal = %+v, %v; want one reveal by admin", got, err)
	}
	if rot, err := c.RotateSecret(ctx, "acme", ok.ID, 0); err != nil || !rot.PreviousSecretExpires.IsZero() {
		t.Fatalf("RotateSecret(0) = %+v, %v; want the old one dropped at once", rot, err)
	}
	if rot, err := c.RotateSecret(ctx, "acme", ok.ID, client.DefaultGrace); err != nil || rot.PreviousSecretExpires.Before(time.Now().Add(23*time.Hour)) {
		t.Fatalf("RotateSecret(DefaultGrace) = %+v, %v; want the server's 24h", rot, err)
	}
	rev, err := c.RevokeSecret(ctx, "acme", ok.ID)
	if err != nil || rev.Secret == "" || !rev.PreviousSecretExpires.IsZero() {
		t.Fatalf("RevokeSecret = %+v, %v", rev, err)
	}
	// The receiver does not answer the challenge: not verified, no error.
	v, err := c.VerifyEndpoint(ctx, "acme", bad.ID)
	if err != nil || v.Verified || v.Reason == "" || v.Endpoint.ID != bad.ID {
		t.Fatalf("VerifyEndpoint = %+v, %v; want not verified, with a reason", v, err)
	}

	// Ingest, and what became of it.
	res, err := c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]any{"invoice": "in_1"}})
	if err != nil || res.ID == "" || len(res.Deliveries) != 2 || res.IdempotencyKey == "" || res.Replayed {
		t.Fatalf("Ingest = %+v, %v; want 2 deliveries and a generated key", res, err)
	}
	again, err := c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]any{"invoice": "in_1"}, IdempotencyKey: res.IdempotencyKey})
	if err != nil || again.ID != res.ID || !again.Replayed {
		t.Fatalf("Ingest with the same key = %+v, %v; want event %s replayed", again, err, res.ID)
	}
	ev, err := c.Event(ctx, "acme", res.ID)
	if err != nil || ev.Event.ID != res.ID || ev.Event.Type != "invoice.paid" || string(ev.Event.Data) != `{"invoice":"in_1"}` || len(ev.Deliveries) != 2 {
		t.Fatalf("Event = %+v, %v", ev, err)
	}
	var deadID string
	for _, ref := range res.Deliveries {
		d := waitDelivery(t, c, ref.ID)
		switch ref.EndpointID {
		case ok.ID:
			if d.State != client.StateSucceeded || len(d.Attempts) != 1 || d.Attempts[0].Status != 200 || d.Attempts[0].Outcome != client.OutcomeSuccess {
				t.Fatalf("delivery to /ok = %+v", d)
			}
			if d.Attempts[0].Duration < 0 || d.Attempts[0].Duration%time.Millisecond != 0 {
				t.Errorf("attempt duration %v, want whole milliseconds", d.Attempts[0].Duration)
			}
		case bad.ID:
			if d.State != client.StateDead || d.DeadAt.IsZero() || d.Attempts[0].Outcome != client.OutcomePermanent {
				t.Fatalf("delivery to /refuses = %+v", d)
			}
			deadID = d.ID
		}
	}
	if got := collect(t, c.Deliveries(ctx, "acme", client.DeliveryFilter{State: client.StateDead, Type: "invoice.paid", Endpoint: bad.ID, Since: time.Now().Add(-time.Hour), Until: time.Now().Add(time.Hour)})); len(got) != 1 || got[0].ID != deadID {
		t.Fatalf("Deliveries(dead) = %+v, want %s", got, deadID)
	}
	// By the class of the last attempt's status; the attempt's
	// response headers as kept.
	if got := collect(t, c.Deliveries(ctx, "acme", client.DeliveryFilter{Status: client.Status4xx})); len(got) != 1 || got[0].ID != deadID {
		t.Fatalf("Deliveries(4xx) = %+v, want %s", got, deadID)
	} else if h := got[0].Attempts[0].ResponseHeaders; h["Content-Type"] != "text/plain; charset=utf-8" || h["X-Content-Type-Options"] != "nosniff" {
		t.Fatalf("the 400's response headers = %v, want its Content-Type and X-Content-Type-Options", h)
	}
	if got := collect(t, c.Deliveries(ctx, "acme", client.DeliveryFilter{Status: client.StatusNone})); len(got) != 0 {
		t.Fatalf("Deliveries(none) = %+v, want none: every attempt got an answer", got)
	}
	var listErr error
	for _, err := range c.Deliveries(ctx, "acme", client.DeliveryFilter{Status: "4XX"}) {
		if listErr = err; err != nil {
			break
		}
	}
	if client.CodeOf(listErr) != client.CodeInvalidField {
		t.Fatalf("Deliveries(4XX): %v, want invalid_field", listErr)
	}
	if got := collect(t, c.DeadLetters(ctx, "acme", client.ListOptions{})); len(got) != 1 || got[0].ID != deadID {
		t.Fatalf("DeadLetters = %+v, want %s", got, deadID)
	}
	rep, err := c.Replay(ctx, "acme", deadID)
	if err != nil || rep.Cycle != 2 || len(rep.Replays) != 1 || rep.Replays[0].By != "admin" {
		t.Fatalf("Replay = %+v, %v; want cycle 2, replayed by admin", rep, err)
	}
	if d := waitDelivery(t, c, deadID); d.State != client.StateDead || d.Cycle != 2 {
		t.Fatalf("replayed delivery = %+v, want dead again in cycle 2", d)
	}
	task, err := c.ReplayDeadLetters(ctx, "acme", client.DeadLetterRange{Since: time.Now().Add(-time.Hour), Endpoint: bad.ID})
	if err != nil || task.Kind != client.TaskReplay || task.State != client.TaskRunning || task.Tenant != "acme" || task.Params.Endpoint != bad.ID {
		t.Fatalf("ReplayDeadLetters = %+v, %v; want its task, running", task, err)
	}
	if task, err = c.WaitTask(ctx, task, 10*time.Millisecond); err != nil || task.State != client.TaskSucceeded || task.Done != 1 || task.Total == nil || *task.Total != 1 {
		t.Fatalf("WaitTask = %+v, %v; want 1 replayed", task, err)
	}
	waitDelivery(t, c, deadID)

	// The feed: one event, then the end of the log; resumed later, the next.
	feed := c.Feed("acme", client.FeedFilter{})
	got := collect(t, feed.Events(ctx))
	if len(got) != 1 || got[0].Event.ID != res.ID || !bytes.Equal(got[0].Event.Raw, ev.Event.Raw) || feed.Cursor() != got[0].Cursor {
		t.Fatalf("Feed = %+v, cursor %q; want event %s and its cursor", got, feed.Cursor(), res.ID)
	}
	var raw struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(got[0].Event.Raw, &raw); err != nil || string(raw.Data) != `{"invoice":"in_1"}` {
		t.Fatalf("envelope %s: %v", got[0].Event.Raw, err)
	}
	if got[0].Event.Sequence != 1 || got[0].Event.OrderingKey != "" {
		t.Fatalf("the tenant's first event: sequence %d, ordering key %q; want 1 and none", got[0].Event.Sequence, got[0].Event.OrderingKey)
	}
	res2, err := c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.voided", Data: json.RawMessage(`{"invoice":"in_1"}`), OrderingKey: "in_1"})
	if err != nil || len(res2.Deliveries) != 1 {
		t.Fatalf("Ingest(invoice.voided) = %+v, %v", res2, err)
	}
	if got := collect(t, c.Feed("acme", client.FeedFilter{Cursor: feed.Cursor()}).Events(ctx)); len(got) != 1 || got[0].Event.ID != res2.ID ||
		got[0].Event.Sequence != 2 || got[0].Event.OrderingKey != "in_1" {
		t.Fatalf("Feed from the cursor = %+v, want only %s, sequence 2, ordering key in_1", got, res2.ID)
	}

	r, err := c.Report(ctx, "acme", 10)
	if err != nil || r.Events != 2 || r.Deliveries != 3 || r.FirstAttemptSuccesses != 1 || len(r.Checks) == 0 {
		t.Fatalf("Report = %+v, %v", r, err)
	}
	all, err := c.ReportAll(ctx, 0)
	if err != nil || len(all.Tenants) != 1 || all.Total.Events != 2 {
		t.Fatalf("ReportAll = %+v, %v", all, err)
	}

	// A test event: the type's example, to one endpoint, marked test in
	// the feed and the delivery log.
	if et, _, err := c.PutEventTypeWith(ctx, "invoice.paid", client.EventTypeInput{Description: "An invoice was paid.", Example: json.RawMessage(`{"invoice": "in_example"}`)}); err != nil || string(et.Example) != `{"invoice":"in_example"}` {
		t.Fatalf("PutEventTypeWith = %+v, %v; want the example compacted", et, err)
	}
	te, err := c.SendTestEvent(ctx, "acme", ok.ID, "")
	if err != nil || te.Type != "invoice.paid" || len(te.Deliveries) != 1 || te.Deliveries[0].EndpointID != ok.ID {
		t.Fatalf("SendTestEvent = %+v, %v; want invoice.paid to %s only", te, err, ok.ID)
	}
	if d := waitDelivery(t, c, te.Deliveries[0].ID); d.State != client.StateSucceeded || !d.Test {
		t.Fatalf("the test event's delivery = %+v, want succeeded and marked test", d)
	}
	if got := collect(t, c.Feed("acme", client.FeedFilter{Cursor: feed.Cursor()}).Events(ctx)); len(got) != 2 || got[1].Event.ID != te.ID || !got[1].Test || got[0].Test ||
		string(got[1].Event.Data) != `{"invoice":"in_example"}` {
		t.Fatalf("Feed after a test event = %+v, want it last, marked test, with the example", got)
	}
	if _, err := c.SendTestEvent(ctx, "acme", ok.ID, "invoice.voided"); client.CodeOf(err) != client.CodeInvalidField {
		t.Fatalf("SendTestEvent of a type the endpoint does not take: %v, want invalid_field", err)
	}

	// A tenant's own token: its routes only, until revoked.
	tok, err := c.IssueAccessToken(ctx, "acme", time.Hour)
	if err != nil || tok.Token == "" || tok.ID == "" || tok.Expires.Sub(tok.Created) != time.Hour {
		t.Fatalf("IssueAccessToken = %+v, %v", tok, err)
	}
	tc := e.client("", client.Options{Token: tok.Token})
	if _, err := tc.Tenant(ctx, "acme"); err != nil {
		t.Fatalf("Tenant with the tenant token: %v", err)
	}
	if _, err := tc.ReportAll(ctx, 0); client.CodeOf(err) != client.CodeForbidden {
		t.Fatalf("ReportAll with the tenant token: %v, want forbidden", err)
	}
	if got := collect(t, c.AccessTokens(ctx, "acme", client.ListOptions{})); len(got) != 1 || got[0].ID != tok.ID || !got[0].Revoked.IsZero() {
		t.Fatalf("AccessTokens = %+v", got)
	}
	if err := c.RevokeAccessToken(ctx, "acme", tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Tenant(ctx, "acme"); client.CodeOf(err) != client.CodeUnauthorized {
		t.Fatalf("Tenant with a revoked token: %v, want unauthorized", err)
	}

	// A portal link: a one-time console URL, listed with the tokens.
	link, err := c.CreatePortalLink(ctx, "acme", 5*time.Minute, "https://app.example.com/hooks")
	if err != nil || !strings.Contains(link.URL, "/console/portal/whk_t_") || link.ReturnURL != "https://app.example.com/hooks" || time.Until(link.Expires) > 5*time.Minute {
		t.Fatalf("CreatePortalLink = %+v, %v", link, err)
	}
	if got := collect(t, c.AccessTokens(ctx, "acme", client.ListOptions{})); len(got) != 2 || got[1].ID != link.ID || got[1].Purpose != "portal_link" {
		t.Fatalf("AccessTokens after a portal link = %+v", got)
	}
	if _, err := c.CreatePortalLink(ctx, "acme", 2*time.Hour, ""); client.CodeOf(err) != client.CodeInvalidField {
		t.Fatalf("CreatePortalLink(2h) = %v, want invalid_field", err)
	}

	// A backup is a database webhookd can open.
	var buf bytes.Buffer
	if n, err := c.Backup(ctx, &buf); err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("Backup = %d, %v (%d bytes written)", n, err, buf.Len())
	}
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatalf("open the backup: %v", err)
	}
	if _, err := db.Tenant(ctx, "acme"); err != nil {
		t.Errorf("the backup has no tenant acme: %v", err)
	}
	db.Close()

	// Tear down.
	if err := c.DeleteEndpoint(ctx, "acme", bad.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Endpoint(ctx, "acme", bad.ID); client.CodeOf(err) != client.CodeEndpointNotFound {
		t.Fatalf("Endpoint after delete: %v, want endpoint_not_found", err)
	}
	if err := c.DeleteEventType(ctx, "invoice.voided"); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, c.Tenants(ctx, client.ListOptions{})); len(got) != 1 || got[0].ID != "acme" {
		t.Fatalf("Tenants = %+v", got)
	}
	purge, err := c.DeleteTenant(ctx, "acme", true)
	if err != nil || purge.Kind != client.TaskPurge || purge.Tenant != "" || purge.Params.Tenant != "acme" || !purge.Params.Force {
		t.Fatalf("DeleteTenant = %+v, %v; want its purge, the operator's", purge, err)
	}
	if _, err := c.Tenant(ctx, "acme"); client.CodeOf(err) != client.CodeTenantNotFound && client.CodeOf(err) != client.CodeTenantDeleting {
		t.Fatalf("Tenant after delete: %v, want tenant_not_found", err)
	}
	if purge, err = c.WaitTask(ctx, purge, 10*time.Millisecond); err != nil || purge.State != client.TaskSucceeded {
		t.Fatalf("the purge = %+v, %v; want succeeded", purge, err)
	}
	if got := collect(t, c.Tasks(ctx, client.ListOptions{Limit: 1})); len(got) == 0 || got[0].ID != purge.ID {
		t.Fatalf("Tasks = %+v, want the purge first", got)
	}
}

// TestClient_Pagination walks listings of several pages: every item once,
// in order, one request per page.
func TestClient_Pagination(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	counter := &countingTransport{}
	c := e.client("", client.Options{HTTPClient: &http.Client{Transport: counter}})
	ctx := t.Context()
	ep := e.setup(c, "/ok")

	var ingested []string
	for i := range 5 {
		res, err := c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]int{"n": i}})
		if err != nil {
			t.Fatal(err)
		}
		ingested = append(ingested, res.Deliveries[0].ID)
	}

	counter.n.Store(0)
	var ids []string
	for d, err := range c.Deliveries(ctx, "acme", client.DeliveryFilter{Endpoint: ep.ID, Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID)
	}
	slices.Reverse(ids) // the log is newest first
	if !slices.Equal(ids, ingested) {
		t.Errorf("Deliveries = %v, want %v reversed", ids, ingested)
	}
	if got, want := counter.n.Load(), int64(3); got != want {
		t.Errorf("Deliveries took %d requests, want %d (5 deliveries, 2 a page)", got, want)
	}

	// Breaking out of a walk sends no further request.
	counter.n.Store(0)
	for range c.Deliveries(ctx, "acme", client.DeliveryFilter{Limit: 2}) {
		break
	}
	if got := counter.n.Load(); got != 1 {
		t.Errorf("a walk broken off after one item took %d requests, want 1", got)
	}

	// The feed pages too, and stops at the end of the log.
	counter.n.Store(0)
	feed := c.Feed("acme", client.FeedFilter{Limit: 2})
	evs := collect(t, feed.Events(ctx))
	if len(evs) != 5 || feed.Cursor() != evs[4].Cursor {
		t.Fatalf("Feed = %d events, cursor %q", len(evs), feed.Cursor())
	}
	if got := counter.n.Load(); got != 3 {
		t.Errorf("the feed took %d requests, want 3", got)
	}
	if more := collect(t, feed.Events(ctx)); len(more) != 0 || feed.Cursor() != evs[4].Cursor {
		t.Errorf("the feed again = %d events, cursor %q; want none, the same cursor", len(more), feed.Cursor())
	}

	for _, id := range []string{"t1", "t2", "t3", "t4"} {
		if _, _, err := c.PutTenant(ctx, id, client.TenantInput{}); err != nil {
			t.Fatal(err)
		}
	}
	var tenants []string
	for tn, err := range c.Tenants(ctx, client.ListOptions{Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		tenants = append(tenants, tn.ID)
	}
	if want := []string{"acme", "t1", "t2", "t3", "t4"}; !slices.Equal(tenants, want) {
		t.Errorf("Tenants = %v, want %v", tenants, want)
	}
	if got := collect(t, c.Tenants(ctx, client.ListOptions{Limit: 2, Cursor: "t2"})); len(got) != 2 || got[0].ID != "t3" {
		t.Errorf("Tenants after t2 = %+v, want t3, t4", got)
	}
}

// TestProblem: an error answer is a *Problem with the server's code and
// the field at fault, through errors.As, from a method and from a walk.
func TestProblem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client("", client.Options{})
	ctx := t.Context()
	e.setup(c, "/ok")

	_, err := c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.payed", Data: map[string]any{}})
	var p *client.Problem
	if !errors.As(err, &p) {
		t.Fatalf("Ingest of an unknown type: %v, want a *Problem", err)
	}
	if p.Status != 422 || p.Code != client.CodeUnknownEventType || p.Field != "type" || !strings.Contains(p.Detail, `"invoice.paid"`) || p.Title == "" {
		t.Errorf("Problem = %+v, want 422 unknown_event_type on type naming invoice.paid", p)
	}
	if !strings.Contains(err.Error(), "unknown_event_type") {
		t.Errorf("Error() = %q, want the code", err)
	}

	for _, err := range c.Deliveries(ctx, "acme", client.DeliveryFilter{Limit: 5000}) {
		if !errors.As(err, &p) || p.Code != client.CodeInvalidField || p.Field != "limit" || p.Status != 422 {
			t.Errorf("Deliveries(limit 5000): %v, want invalid_field on limit", err)
		}
	}

	bad := e.client("", client.Options{Token: "wrong"})
	if err := bad.Health(ctx); err != nil {
		t.Errorf("Health needs no token: %v", err)
	}
	if _, err := bad.Tenant(ctx, "acme"); !errors.As(err, &p) || p.Code != client.CodeUnauthorized || p.Status != 401 {
		t.Errorf("a wrong token: %v, want unauthorized", err)
	}
	if _, err := c.Tenant(ctx, "nobody"); !errors.As(err, &p) || p.Code != client.CodeTenantNotFound || p.Status != 404 {
		t.Errorf("Tenant(nobody): %v, want tenant_not_found", err)
	}
}

// TestClient_Ready: a server that is not ready answers a Problem at once
// (a readiness check is not retried); one without a backup source
// answers Backup with not_found and writes nothing.
func TestClient_Ready(t *testing.T) {
	t.Parallel()
	h := httpapi.New(engine.NewService(openDB(t), nil, engine.ServiceOptions{}), httpapi.Options{
		Tokens: []string{adminToken},
		Ready:  func() error { return errors.New("draining") },
	})
	counter := &countingTransport{}
	api := httptest.NewServer(h)
	t.Cleanup(api.Close)
	c, err := client.New(api.URL, client.Options{Token: adminToken, HTTPClient: &http.Client{Transport: counter}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Ready(t.Context())
	if p := wantProblem(t, err, 503, client.CodeUnavailable); !strings.Contains(p.Detail, "draining") || p.RetryAfter != time.Second {
		t.Errorf("Ready: %+v, want why, and Retry-After 1s", p)
	}
	if n := counter.n.Load(); n != 1 {
		t.Errorf("Ready sent %d requests, want 1", n)
	}
	var buf bytes.Buffer
	if _, err := c.Backup(t.Context(), &buf); client.CodeOf(err) != client.CodeNotFound || buf.Len() != 0 {
		t.Errorf("Backup without a source: %v, %d bytes; want not_found and nothing", err, buf.Len())
	}
}

// TestClient_Skip: an endpoint asking for ordering answers it; a dead
// head blocks its line (the next delivery waits behind it) until Skip,
// and a second Skip is not_blocking.
func TestClient_Skip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client("", client.Options{})
	ctx := t.Context()
	e.setup(c, "/ok")
	ep, err := c.CreateEndpoint(ctx, "acme", client.EndpointInput{URL: e.receiver.URL + "/refuses", EventTypes: []string{"invoice.paid"},
		Ordering: client.OrderingEndpoint, OnDead: client.OnDeadBlock})
	if err != nil || ep.Ordering != client.OrderingEndpoint || ep.OnDead != client.OnDeadBlock {
		t.Fatalf("CreateEndpoint = %+v, %v", ep, err)
	}
	var ids []string
	for range 2 {
		res, err := c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range res.Deliveries {
			if d.EndpointID == ep.ID {
				ids = append(ids, d.ID)
			}
		}
	}
	head := waitDelivery(t, c, ids[0])
	if head.State != client.StateDead || head.Line != "endpoint" || head.Sequence == 0 {
		t.Fatalf("head = %+v, want dead in line endpoint", head)
	}
	if next, err := c.Delivery(ctx, "acme", ids[1]); err != nil || next.State != client.StateWaiting || next.WaitingBehind != ids[0] {
		t.Fatalf("next = %+v, %v; want waiting behind %s", next, err, ids[0])
	}
	skipped, err := c.Skip(ctx, "acme", ids[0])
	if err != nil || len(skipped.Skips) != 1 || skipped.Skips[0].By != "admin" {
		t.Fatalf("Skip = %+v, %v; want one skip by admin", skipped.Skips, err)
	}
	_, err = c.Skip(ctx, "acme", ids[0])
	var p *client.Problem
	if !errors.As(err, &p) || p.Code != client.CodeNotBlocking || p.Status != http.StatusConflict {
		t.Fatalf("Skip again: %v, want 409 not_blocking", err)
	}
	if d := waitDelivery(t, c, ids[1]); d.State != client.StateDead {
		t.Fatalf("the line's next = %+v, want attempted (and refused)", d)
	}
}

// TestClient_RefusedData: data the client sends as it is (a
// json.RawMessage) with a name twice, a lone surrogate, a noncharacter or
// a number no double holds, and an ordering key with a bidi override,
// come back as the server's problem, with the codes and fields every way
// in gives (HTTP, postgres.EnqueueTx, migrate), and store nothing.
func TestClient_RefusedData(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client("", client.Options{})
	e.setup(c, "/ok")
	ctx := t.Context()
	for _, tt := range []struct {
		name  string
		in    client.EventInput
		code  client.Code
		field string
	}{
		{"a name twice", client.EventInput{Data: json.RawMessage(`{"a":1,"a":2}`)}, "invalid_json", "data"},
		{"a lone surrogate", client.EventInput{Data: json.RawMessage(`{"s":"\ud800"}`)}, "invalid_json", "data"},
		{"a noncharacter", client.EventInput{Data: json.RawMessage(`{"s":"\uffff"}`)}, "invalid_json", "data"},
		{"a number beyond a double", client.EventInput{Data: json.RawMessage(`{"n":1e400}`)}, "invalid_json", "data"},
		{"an ordering key with a bidi override", client.EventInput{Data: json.RawMessage(`{}`), OrderingKey: "order\u202e1"}, "invalid_field", "ordering_key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Type = "invoice.paid"
			_, err := c.Ingest(ctx, "acme", tt.in)
			p, ok := errors.AsType[*client.Problem](err)
			if !ok || p.Code != tt.code || p.Field != tt.field || !strings.Contains(p.Detail, "byte offset") {
				t.Fatalf("Ingest: %v, want %s naming %s and an offset", err, tt.code, tt.field)
			}
		})
	}
	if got := collect(t, c.Feed("acme", client.FeedFilter{}).Events(ctx)); len(got) != 0 {
		t.Errorf("the feed holds %d events after refused ingests", len(got))
	}
}

// TestClient_Channels: an endpoint's channel filter and an event's
// channels go through the client, come back in its answers, and the
// delivery log and the feed filter by channel.
func TestClient_Channels(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client("", client.Options{})
	ctx := t.Context()
	plain := e.setup(c, "/ok")
	ep, err := c.CreateEndpoint(ctx, "acme", client.EndpointInput{URL: e.receiver.URL + "/ok", EventTypes: []string{"invoice.paid"}, Channels: []string{"project_1"}})
	if err != nil || !slices.Equal(ep.Channels, []string{"project_1"}) {
		t.Fatalf("CreateEndpoint with channels = %+v, %v", ep.Channels, err)
	}
	on, err := c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]any{}, Channels: []string{"project_1"}})
	if err != nil || len(on.Deliveries) != 2 {
		t.Fatalf("Ingest on project_1 = %+v, %v; want deliveries to both endpoints", on, err)
	}
	off, err := c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]any{}})
	if err != nil || len(off.Deliveries) != 1 || off.Deliveries[0].EndpointID != plain.ID {
		t.Fatalf("Ingest on no channel = %+v, %v; want the plain endpoint only", off, err)
	}
	ev, err := c.Event(ctx, "acme", on.ID)
	if err != nil || !slices.Equal(ev.Channels, []string{"project_1"}) || !slices.Equal(ev.Deliveries[0].Channels, ev.Channels) {
		t.Fatalf("Event = %+v, %v", ev, err)
	}
	if got := collect(t, c.Deliveries(ctx, "acme", client.DeliveryFilter{Channel: "project_1"})); len(got) != 2 || got[0].EventID != on.ID {
		t.Errorf("Deliveries on project_1 = %+v", got)
	}
	feed := collect(t, c.Feed("acme", client.FeedFilter{Channel: "project_1"}).Events(ctx))
	if len(feed) != 1 || feed[0].Event.ID != on.ID || !slices.Equal(feed[0].Channels, []string{"project_1"}) {
		t.Errorf("Feed on project_1 = %+v", feed)
	}
	none := []string{}
	if upd, err := c.UpdateEndpoint(ctx, "acme", ep.ID, client.EndpointPatch{Channels: &none}); err != nil || upd.Channels != nil {
		t.Errorf("UpdateEndpoint removing channels = %+v, %v", upd.Channels, err)
	}
	_, err = c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]any{}, Channels: []string{"ok", "not ok"}})
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != http.StatusUnprocessableEntity || p.Field != "channels[1]" {
		t.Errorf("Ingest on a bad channel: %v, want 422 naming channels[1]", err)
	}
}

// TestClient_Backfill: Backfill starts a task that makes a late
// endpoint's missing deliveries, WaitTask waits for it, a second one
// makes none, each delivery shows the backfill that made it, the
// tenant's tasks list both, and a bad range is a 422 naming since.
func TestClient_Backfill(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client("", client.Options{})
	ctx := t.Context()
	e.setup(c, "/ok")
	since := time.Now().Add(-time.Minute)
	for range 2 {
		if _, err := c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
	}
	late, err := c.CreateEndpoint(ctx, "acme", client.EndpointInput{URL: e.receiver.URL + "/ok", EventTypes: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Backfill(ctx, "acme", late.ID, since, time.Time{})
	if err != nil || first.Kind != client.TaskBackfill || first.Params.Endpoint != late.ID {
		t.Fatalf("Backfill = %+v, %v; want its task", first, err)
	}
	if got, err := c.WaitTask(ctx, first, 10*time.Millisecond); err != nil || got.State != client.TaskSucceeded || got.Done != 2 || got.Skipped != 0 {
		t.Fatalf("the backfill = %+v, %v; want 2 made", got, err)
	}
	second, err := c.Backfill(ctx, "acme", late.ID, since, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.WaitTask(ctx, second, 10*time.Millisecond); err != nil || got.Done != 0 || got.Skipped != 2 || *got.Total != 2 {
		t.Fatalf("the second backfill = %+v, %v; want 2 skipped", got, err)
	}
	if got := collect(t, c.TenantTasks(ctx, "acme", client.ListOptions{Limit: 1})); len(got) != 2 || got[0].ID != second.ID || got[1].ID != first.ID {
		t.Fatalf("TenantTasks = %+v, want both, newest first", got)
	}
	if got, err := c.TenantTask(ctx, "acme", first.ID); err != nil || got.ID != first.ID {
		t.Fatalf("TenantTask = %+v, %v", got, err)
	}
	if _, err := c.TenantTask(ctx, "acme", "task_nope"); client.CodeOf(err) != client.CodeTaskNotFound {
		t.Fatalf("TenantTask of no task: %v, want task_not_found", err)
	}
	ds := collect(t, c.Deliveries(ctx, "acme", client.DeliveryFilter{Endpoint: late.ID}))
	if len(ds) != 2 {
		t.Fatalf("%d deliveries to the late endpoint, want 2", len(ds))
	}
	for _, d := range ds {
		if d.Backfill == nil || d.Backfill.By == "" || d.Backfill.At.IsZero() {
			t.Errorf("delivery %s: Backfill %+v", d.ID, d.Backfill)
		}
	}
	_, err = c.Backfill(ctx, "acme", late.ID, time.Time{}, time.Time{})
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != http.StatusUnprocessableEntity || p.Field != "since" {
		t.Errorf("Backfill without since: %v, want 422 naming since", err)
	}
}

// TestClient_RateLimit: an endpoint created with a rate limit answers it
// with its burst; UpdateEndpoint changes it, leaves it when nil, and
// removes it with the zero limit; a limit out of bounds is invalid_field
// naming its member.
func TestClient_RateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client("", client.Options{})
	ctx := t.Context()
	e.setup(c, "/ok")
	ep, err := c.CreateEndpoint(ctx, "acme", client.EndpointInput{URL: e.receiver.URL + "/limited", EventTypes: []string{"invoice.paid"},
		RateLimit: &client.RateLimit{PerSecond: 5}})
	if err != nil || ep.RateLimit == nil || *ep.RateLimit != (client.RateLimit{PerSecond: 5, Burst: 5}) || ep.EffectiveRateLimit == nil || *ep.EffectiveRateLimit != *ep.RateLimit {
		t.Fatalf("CreateEndpoint = %+v (effective %+v), %v; want rate limit 5/s, burst 5, both", ep.RateLimit, ep.EffectiveRateLimit, err)
	}
	got, err := c.UpdateEndpoint(ctx, "acme", ep.ID, client.EndpointPatch{RateLimit: &client.RateLimit{PerSecond: 0.5, Burst: 3}})
	if err != nil || got.RateLimit == nil || *got.RateLimit != (client.RateLimit{PerSecond: 0.5, Burst: 3}) {
		t.Fatalf("UpdateEndpoint to 0.5/s burst 3 = %+v, %v", got.RateLimit, err)
	}
	desc := "orders"
	if got, err = c.UpdateEndpoint(ctx, "acme", ep.ID, client.EndpointPatch{Description: &desc}); err != nil || got.RateLimit == nil || got.RateLimit.PerSecond != 0.5 {
		t.Fatalf("UpdateEndpoint without a rate limit = %+v, %v; want it left", got.RateLimit, err)
	}
	_, err = c.UpdateEndpoint(ctx, "acme", ep.ID, client.EndpointPatch{RateLimit: &client.RateLimit{PerSecond: 5, Burst: 20000}})
	var p *client.Problem
	if !errors.As(err, &p) || p.Code != client.CodeInvalidField || p.Field != "rate_limit.burst" {
		t.Fatalf("UpdateEndpoint with burst 20000 = %v, want invalid_field naming rate_limit.burst", err)
	}
	if got, err = c.UpdateEndpoint(ctx, "acme", ep.ID, client.EndpointPatch{RateLimit: &client.RateLimit{}}); err != nil || got.RateLimit != nil {
		t.Fatalf("UpdateEndpoint with the zero limit = %+v, %v; want none", got.RateLimit, err)
	}
	if read, err := c.Endpoint(ctx, "acme", ep.ID); err != nil || read.RateLimit != nil {
		t.Fatalf("Endpoint after removing the limit = %+v, %v; want none", read.RateLimit, err)
	}
}

// TestClient_SendTraceparent: an endpoint is created with or without
// send_traceparent and answers it; UpdateEndpoint turns it off and on,
// and leaves it when nil.
func TestClient_SendTraceparent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client("", client.Options{})
	ctx := t.Context()
	e.setup(c, "/ok")
	ep, err := c.CreateEndpoint(ctx, "acme", client.EndpointInput{URL: e.receiver.URL + "/traced", EventTypes: []string{"invoice.paid"}, SendTraceparent: true})
	if err != nil || !ep.SendTraceparent {
		t.Fatalf("CreateEndpoint with SendTraceparent = %+v, %v", ep.Endpoint, err)
	}
	plain, err := c.CreateEndpoint(ctx, "acme", client.EndpointInput{URL: e.receiver.URL + "/plain", EventTypes: []string{"invoice.paid"}})
	if err != nil || plain.SendTraceparent {
		t.Fatalf("CreateEndpoint without SendTraceparent = %+v, %v", plain.Endpoint, err)
	}
	off, desc := false, "orders"
	for _, tc := range []struct {
		patch client.EndpointPatch
		want  bool
	}{{client.EndpointPatch{SendTraceparent: &off}, false}, {client.EndpointPatch{Description: &desc}, false}} {
		got, err := c.UpdateEndpoint(ctx, "acme", ep.ID, tc.patch)
		if err != nil || got.SendTraceparent != tc.want {
			t.Fatalf("UpdateEndpoint(%+v) = %v, %v; want %v", tc.patch, got.SendTraceparent, err, tc.want)
		}
	}
	on := true
	if got, err := c.UpdateEndpoint(ctx, "acme", ep.ID, client.EndpointPatch{SendTraceparent: &on}); err != nil || !got.SendTraceparent {
		t.Fatalf("UpdateEndpoint on = %v, %v", got.SendTraceparent, err)
	}
	if read, err := c.Endpoint(ctx, "acme", ep.ID); err != nil || !read.SendTraceparent {
		t.Fatalf("Endpoint = %v, %v; want on", read.SendTraceparent, err)
	}
}

// TestClient_DeliverAt: EventInput.DeliverAt schedules the event; the
// ingest, the event and its delivery answer it; a time in the past is a
// 422 naming deliver_at; a repeat of the key at another time conflicts.
func TestClient_DeliverAt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client("", client.Options{})
	ctx := t.Context()
	e.setup(c, "/ok")
	at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	res, err := c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]any{}, DeliverAt: at, IdempotencyKey: "sched"})
	if err != nil || !res.DeliverAt.Equal(at) || len(res.Deliveries) != 1 || res.Deliveries[0].State != client.StatePending {
		t.Fatalf("Ingest scheduled = %+v, %v; want deliver_at %v, one pending delivery", res, err, at)
	}
	ev, err := c.Event(ctx, "acme", res.ID)
	if err != nil || !ev.DeliverAt.Equal(at) || len(ev.Deliveries) != 1 || !ev.Deliveries[0].DeliverAt.Equal(at) || !ev.Deliveries[0].NextAttemptAt.Equal(at) {
		t.Fatalf("GetEvent = %+v, %v; want deliver_at %v on the event and its delivery, due then", ev, err, at)
	}
	var p *client.Problem
	_, err = c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]any{}, DeliverAt: time.Now().Add(-time.Hour)})
	if !errors.As(err, &p) || p.Status != http.StatusUnprocessableEntity || p.Field != "deliver_at" {
		t.Errorf("Ingest an hour ago: %v, want 422 naming deliver_at", err)
	}
	_, err = c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]any{}, DeliverAt: at.Add(time.Second), IdempotencyKey: "sched"})
	if !errors.As(err, &p) || p.Code != "idempotency_conflict" {
		t.Errorf("the key again at another time: %v, want idempotency_conflict", err)
	}
}

// TestClient_Schema: an event type's schema and status go through
// PutEventTypeWith and come back in its answer and the catalogue; an
// event that does not match is a Problem with CodeSchemaMismatch naming
// the pointer, one of an archived type CodeEventTypeArchived.
func TestClient_Schema(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client("", client.Options{})
	ctx := t.Context()
	e.setup(c, "/ok")
	schema := json.RawMessage(`{"type": "object", "required": ["invoice"], "properties": {"invoice": {"type": "string"}}}`)
	et, _, err := c.PutEventTypeWith(ctx, "invoice.paid", client.EventTypeInput{Description: "An invoice was paid.", Status: client.EventTypeDeprecated, Schema: schema, Example: json.RawMessage(`{"invoice":"in_1"}`)})
	if err != nil || et.Status != client.EventTypeDeprecated || string(et.Schema) != `{"type":"object","required":["invoice"],"properties":{"invoice":{"type":"string"}}}` {
		t.Fatalf("PutEventTypeWith = %+v, %v; want deprecated with the schema compacted", et, err)
	}
	if _, err := c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]any{"invoice": "in_2"}}); err != nil {
		t.Fatalf("Ingest of a match: %v", err)
	}
	_, err = c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]any{"invoice": 2}})
	p, ok := errors.AsType[*client.Problem](err)
	if !ok || p.Code != client.CodeSchemaMismatch || p.Field != "data/invoice" || p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("Ingest of a mismatch: %v, want 422 schema_mismatch naming data/invoice", err)
	}
	if _, _, err := c.PutEventTypeWith(ctx, "invoice.paid", client.EventTypeInput{Status: client.EventTypeArchived}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Ingest(ctx, "acme", client.EventInput{Type: "invoice.paid", Data: map[string]any{}})
	if p, ok := errors.AsType[*client.Problem](err); !ok || p.Code != client.CodeEventTypeArchived || p.Field != "type" {
		t.Fatalf("Ingest of an archived type: %v, want event_type_archived naming type", err)
	}
	types := collect(t, c.EventTypes(ctx, client.ListOptions{}))
	if len(types) != 1 || types[0].Status != client.EventTypeArchived || types[0].Schema != nil {
		t.Errorf("EventTypes = %+v; want invoice.paid archived, without a schema", types)
	}
	if _, _, err := c.PutEventType(ctx, "invoice.paid", "back"); err != nil {
		t.Fatal(err)
	}
	if types := collect(t, c.EventTypes(ctx, client.ListOptions{})); types[0].Status != client.EventTypeActive {
		t.Errorf("after PutEventType the status is %q; want active", types[0].Status)
	}
}

// TestClient_GivenSecret: EndpointInput.Secret and RotateSecretTo send
// a secret of the caller's, which the endpoint then has; a bad one is a
// Problem naming secret.
func TestClient_GivenSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.client("", client.Options{})
	ctx := t.Context()
	e.setup(c, "/ok")
	mine := "whsec_" + base64.StdEncoding.EncodeToString([]byte("twenty-four bytes of key"))
	ep, err := c.CreateEndpoint(ctx, "acme", client.EndpointInput{URL: e.receiver.URL + "/moved", EventTypes: []string{"invoice.paid"}, Secret: mine})
	if err != nil || ep.Secret != mine {
		t.Fatalf("CreateEndpoint with Secret = %.10s…, %v; want the given secret", ep.Secret, err)
	}
	next := "whsec_" + base64.StdEncoding.EncodeToString([]byte("the key rotated to, 32 bytes....."))
	rot, err := c.RotateSecretTo(ctx, "acme", ep.ID, next, 0)
	if err != nil || rot.Secret != next {
		t.Fatalf("RotateSecretTo = %.10s…, %v; want the given secret", rot.Secret, err)
	}
	shown, err := c.RevealSecret(ctx, "acme", ep.ID)
	if err != nil || shown.Secret != next || len(shown.Previous) != 0 {
		t.Fatalf("RevealSecret after RotateSecretTo with no grace = %.10s…, %d previous, %v", shown.Secret, len(shown.Previous), err)
	}
	_, err = c.RotateSecretTo(ctx, "acme", ep.ID, "whsec_c2hvcnQ=", client.DefaultGrace)
	var p *client.Problem
	if !errors.As(err, &p) || p.Code != client.CodeInvalidField || p.Field != "secret" {
		t.Fatalf("RotateSecretTo a short secret = %v; want invalid_field naming secret", err)
	}
}
