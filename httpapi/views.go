package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"
	"github.com/webhookd/webhookd/engine"
)

// The subscriber's views: the delivery log with filters, the
// reconciliation feed of events, range replay of dead letters and the
// delivery report.

// query reads typed query parameters, remembering the first bad one.
type query struct {
	v   url.Values
	err error
}

func (q *query) str(name string) string { return q.v.Get(name) }

func (q *query) int(name string) int {
	v := q.v.Get(name)
	if v == "" || q.err != nil {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		q.err = engine.Errorf(engine.CodeInvalidField, name, "%s must be a positive integer", name)
	}
	return n
}

func (q *query) bool(name string) bool {
	switch v := q.v.Get(name); {
	case q.err != nil, v == "", v == "false":
		return false
	case v == "true":
		return true
	}
	q.err = engine.Errorf(engine.CodeInvalidField, name, "%s must be true or false", name)
	return false
}

func (q *query) time(name string) time.Time {
	v := q.v.Get(name)
	if v == "" || q.err != nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		q.err = engine.Errorf(engine.CodeInvalidField, name, "%s must be an RFC 3339 time, like 2026-12-02T14:00:00Z", name)
	}
	return t
}

// handleListDeliveries: GET /v1/tenants/:tenant/deliveries?state=&type=&endpoint=&status=&since=&until=&limit=&cursor=
func (s *server) handleListDeliveries(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	q := &query{v: r.URL.Query()}
	f := engine.DeliveryFilter{
		State: engine.State(q.str("state")), Type: q.str("type"), EndpointID: q.str("endpoint"),
		Status: engine.StatusClass(q.str("status")),
		Since:  q.time("since"), Until: q.time("until"), Limit: q.int("limit"), Cursor: q.str("cursor"),
		Channel: q.str("channel"),
	}
	if q.err != nil {
		s.writeError(w, r, q.err)
		return
	}
	ds, next, err := s.svc.ListDeliveries(r.Context(), ps.ByName("tenant"), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, list(deliveriesJSON(ds), next))
}

// storedEnvelope is an event's stored envelope as the feed, GET event and
// the console show it: the bytes that were signed and delivered, as they
// are, so that a reconciler's hash of it is the delivered body's. Events
// stored before ingest refused invalid UTF-8 may hold some; those bytes are
// shown as U+FFFD so that every answer is UTF-8 (receivers that decode the
// body as text could not verify such a delivery anyway).
func storedEnvelope(body []byte) json.RawMessage {
	if utf8.Valid(body) {
		return body
	}
	return bytes.ToValidUTF8(body, []byte("\uFFFD"))
}

// feedEvent is one entry of the reconciliation feed: the envelope exactly
// as delivered (storedEnvelope), and the cursor to resume after it.
type feedEvent struct {
	Cursor string          `json:"cursor"`
	Event  json.RawMessage `json:"event"`
	Test   bool            `json:"test,omitempty"` // a test event, sent to one endpoint only (engine.Event.Test)
	// Channels are the event's channels (engine.Event.Channels), which
	// are not in its envelope; absent when none.
	Channels []string `json:"channels,omitempty"`
	// DeliverAt is when the event was scheduled for (engine.Event.DeliverAt);
	// absent when not scheduled.
	DeliverAt time.Time `json:"deliver_at,omitzero"`
}

// handleListEvents: GET /v1/tenants/:tenant/events?cursor=&type=&since=&limit=&channel=
func (s *server) handleListEvents(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	q := &query{v: r.URL.Query()}
	f := engine.EventFilter{After: q.str("cursor"), Type: q.str("type"), Since: q.time("since"), Limit: q.int("limit"), Channel: q.str("channel")}
	if q.err != nil {
		s.writeError(w, r, q.err)
		return
	}
	evs, next, err := s.svc.ListEvents(r.Context(), ps.ByName("tenant"), f)
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Field == "after" { // the store's name for the cursor
		err = engine.Errorf(ee.Code, "cursor", "cursor is not one this feed returned")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	more := next != ""
	out := make([]feedEvent, len(evs))
	for i, ev := range evs {
		out[i] = feedEvent{Cursor: strconv.FormatUint(ev.Seq, 10), Event: storedEnvelope(ev.Body), Test: ev.Test, Channels: ev.Channels, DeliverAt: ev.DeliverAt}
	}
	if next == "" && len(out) > 0 {
		// The end of the log for now: resume after the last one.
		next = out[len(out)-1].Cursor
	}
	if next == "" {
		next = f.After
	}
	s.writeJSON(w, r, http.StatusOK, struct {
		Data    []feedEvent `json:"data"`
		Next    string      `json:"next_cursor"`
		HasMore bool        `json:"has_more"`
	}{out, next, more})
}

// replayRangeInput is the body of POST .../dead-letters/replay.
type replayRangeInput struct {
	Since    time.Time `json:"since"`
	Until    time.Time `json:"until"`
	Endpoint string    `json:"endpoint"`
}

// handleReplayDeadLetters: POST /v1/tenants/:tenant/dead-letters/replay
func (s *server) handleReplayDeadLetters(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var in replayRangeInput
	if err := decodeJSON(w, r, s.maxBody, &in, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	t, err := s.svc.StartReplay(r.Context(), ps.ByName("tenant"), in.Since, in.Until, in.Endpoint, replayedBy(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.logTaskStarted(r, "dead letters replay started", t)
	s.writeTask(w, r, t)
}

// backfillInput is the body of POST .../endpoints/:id/backfill.
type backfillInput struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
}

// handleBackfill: POST /v1/tenants/:tenant/endpoints/:id/backfill
func (s *server) handleBackfill(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var in backfillInput
	if err := decodeJSON(w, r, s.maxBody, &in, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	t, err := s.svc.StartBackfill(r.Context(), ps.ByName("tenant"), ps.ByName("id"), in.Since, in.Until, replayedBy(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.logTaskStarted(r, "endpoint backfill started", t)
	s.writeTask(w, r, t)
}

// handleReport: GET /v1/tenants/:tenant/report?last=1000
func (s *server) handleReport(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	q := &query{v: r.URL.Query()}
	last := q.int("last")
	if q.err != nil {
		s.writeError(w, r, q.err)
		return
	}
	rep, err := s.svc.Report(r.Context(), ps.ByName("tenant"), last)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, rep)
}
