package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/webhookd/webhookd/engine"
)

// listResponse is the body of every listing: a page of data ([] when
// empty, never null), the cursor of the next page (null on the last),
// and whether there is a next page. The reconciliation feed's is the
// same but for next_cursor, which it always gives (where to resume).
type listResponse[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"next_cursor"`
	HasMore    bool    `json:"has_more"`
}

// list returns the listResponse of a page and the next page's cursor
// ("": none).
func list[T any](data []T, next string) listResponse[T] {
	if data == nil {
		data = []T{}
	}
	res := listResponse[T]{Data: data}
	if next != "" {
		res.NextCursor, res.HasMore = &next, true
	}
	return res
}

// pageOf returns the page of items that ?cursor= and ?limit= ask for,
// in the order of key, and the next page's cursor: the key of its last
// item ("" on the last page). For the listings whose store answers with
// all of them at once (a tenant's endpoints and tokens, the catalogue,
// the tenants), which are bounded by limits of their own.
func pageOf[T any](q *query, items []T, key func(T) string) ([]T, string, error) {
	limit, cursor := q.int("limit"), q.str("cursor")
	if q.err != nil {
		return nil, "", q.err
	}
	switch {
	case limit == 0:
		limit = engine.DefaultPageLimit
	case limit > engine.MaxPageLimit:
		return nil, "", engine.Errorf(engine.CodeInvalidField, "limit", "limit must be from 1 to %d", engine.MaxPageLimit)
	}
	items = slices.Clone(items)
	slices.SortFunc(items, func(a, b T) int { return strings.Compare(key(a), key(b)) })
	start, _ := slices.BinarySearchFunc(items, cursor, func(it T, c string) int {
		if key(it) <= c {
			return -1
		}
		return 1
	})
	if cursor == "" {
		start = 0
	}
	end := min(start+limit, len(items))
	next := ""
	if end < len(items) {
		next = key(items[end-1])
	}
	return items[start:end], next, nil
}

// createdEndpoint is the body of a successful endpoint create: the endpoint
// plus its signing secret and the tenant's environment (secrets carry no
// environment prefix). With the secret rotation, revocation and reveal
// answers (security.go), it is the only response that carries a secret.
type createdEndpoint struct {
	engine.Endpoint
	Secret      string             `json:"secret"`
	Environment engine.Environment `json:"environment,omitempty"`
}

// ingestResponse is the body of POST .../events.
type ingestResponse struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	// DeliverAt is when the event is scheduled for (engine.Event.DeliverAt);
	// absent when it is delivered at once.
	DeliverAt  time.Time     `json:"deliver_at,omitzero"`
	Deliveries []deliveryRef `json:"deliveries"`
}

// deliveryRef names one delivery an ingest created.
type deliveryRef struct {
	ID         string       `json:"id"`
	EndpointID string       `json:"endpoint_id"`
	State      engine.State `json:"state"`
}

// eventResponse is the body of GET .../events/:id: the envelope exactly as
// stored, signed and delivered (storedEnvelope), and the event's
// deliveries.
type eventResponse struct {
	Event      json.RawMessage `json:"event"`
	Test       bool            `json:"test,omitempty"` // a test event (engine.Event.Test)
	Deliveries []deliveryView  `json:"deliveries"`
	// Channels are the event's channels, which are not in the envelope
	// (engine.Event.Channels); absent when none.
	Channels []string `json:"channels,omitempty"`
	// DeliverAt is when the event was scheduled for, which is not in the
	// envelope (engine.Event.DeliverAt); absent when not scheduled.
	DeliverAt time.Time `json:"deliver_at,omitzero"`
}

// testEventResponse is the body of POST …/endpoints/:id/test-events:
// the ingest's answer, with the type that was sent.
type testEventResponse struct {
	ingestResponse
	Type string `json:"type"`
	Test bool   `json:"test"` // always true
}

// deliveryView is a delivery as the API shows it: as stored, with empty
// attempt and replay logs as [] rather than null, and each attempt's
// durations in whole milliseconds with the unit in the name.
type deliveryView struct {
	engine.Delivery
	Attempts []attemptView `json:"attempts"`
}

// attemptView is an attempt as the API shows it (engine.Attempt keeps
// nanoseconds, as stored).
type attemptView struct {
	Cycle        int            `json:"cycle"`
	Number       int            `json:"number"`
	Start        time.Time      `json:"start"`
	DurationMS   int64          `json:"duration_ms"`
	Status       int            `json:"status,omitempty"`
	Error        string         `json:"error,omitempty"`
	Response     string         `json:"response,omitempty"`
	Outcome      engine.Outcome `json:"outcome"`
	RetryAfterMS int64          `json:"retry_after_ms,omitempty"`
	// ResponseHeaders are the headers the attempt kept, by name (unique:
	// each holds its values joined); JSON writes them in name order.
	ResponseHeaders map[string]string `json:"response_headers,omitempty"`
}

// deliveryJSON returns d as the API shows it.
func deliveryJSON(d engine.Delivery) deliveryView {
	if d.Replays == nil {
		d.Replays = []engine.Replay{}
	}
	v := deliveryView{Delivery: d, Attempts: make([]attemptView, len(d.Attempts))}
	for i, a := range d.Attempts {
		v.Attempts[i] = attemptView{
			Cycle: a.Cycle, Number: a.Number, Start: a.Start, DurationMS: a.Duration.Milliseconds(),
			Status: a.Status, Error: a.Error, Response: a.Response, Outcome: a.Outcome, RetryAfterMS: a.RetryAfter.Milliseconds(),
		}
		if len(a.ResponseHeaders) > 0 {
			hs := make(map[string]string, len(a.ResponseHeaders))
			for _, h := range a.ResponseHeaders {
				hs[h.Name] = h.Value
			}
			v.Attempts[i].ResponseHeaders = hs
		}
	}
	return v
}

func deliveriesJSON(ds []engine.Delivery) []deliveryView {
	out := make([]deliveryView, len(ds))
	for i, d := range ds {
		out[i] = deliveryJSON(d)
	}
	return out
}

func (s *server) handleHealth(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
}

// createdOrOK is the status of a PUT: 201 when it created the resource.
func createdOrOK(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

func (s *server) handlePutTenant(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var in engine.TenantInput
	if err := decodeJSON(w, r, s.maxBody, &in, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	t, created, err := s.svc.PutTenant(r.Context(), ps.ByName("tenant"), in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, createdOrOK(created), t)
}

// handleDeleteTenant: DELETE /v1/tenants/:tenant?force= → 202 {"task"}:
// the tenant is deleted, and the task purges what it left.
func (s *server) handleDeleteTenant(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	q := &query{v: r.URL.Query()}
	force := q.bool("force")
	if q.err != nil {
		s.writeError(w, r, q.err)
		return
	}
	t, err := s.svc.DeleteTenant(r.Context(), ps.ByName("tenant"), force, replayedBy(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.logTaskStarted(r, "tenant deleted", t)
	s.writeTask(w, r, t)
}

// handleListTenants: GET /v1/tenants?limit=&cursor= (admin), in ID order.
func (s *server) handleListTenants(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	ts, err := s.svc.Tenants(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, next, err := pageOf(&query{v: r.URL.Query()}, ts, func(t engine.Tenant) string { return t.ID })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, list(page, next))
}

func (s *server) handleGetTenant(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	t, err := s.svc.Tenant(r.Context(), ps.ByName("tenant"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, t)
}

func (s *server) handlePutEventType(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var in engine.EventTypeInput
	if err := decodeJSON(w, r, s.maxBody, &in, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	et, created, err := s.svc.PutEventType(r.Context(), ps.ByName("type"), in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, createdOrOK(created), et)
}

func (s *server) handleDeleteEventType(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	if err := s.svc.DeleteEventType(r.Context(), ps.ByName("type")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) handleListEventTypes(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	ets, err := s.svc.EventTypes(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, next, err := pageOf(&query{v: r.URL.Query()}, ets, func(et engine.EventType) string { return et.Name })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, list(page, next))
}

// retryPolicyView is a retry policy as GET /v1/retry-policies shows it:
// its durations in whole milliseconds, with the unit in the name.
type retryPolicyView struct {
	Name          string  `json:"name"`
	Summary       string  `json:"summary"`
	MaxAttempts   int     `json:"max_attempts"`
	ScheduleMS    []int64 `json:"schedule_ms"`
	Jitter        float64 `json:"jitter"`
	DeadlineMS    int64   `json:"deadline_ms"`
	RetryStatuses []int   `json:"retry_statuses"`
}

// handleListRetryPolicies: GET /v1/retry-policies?limit=&cursor=, in
// name order: what retry_policy may name.
func (s *server) handleListRetryPolicies(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var views []retryPolicyView
	for name, p := range s.svc.RetryPolicies() {
		v := retryPolicyView{Name: name, Summary: p.Summary(), MaxAttempts: p.MaxAttempts(), ScheduleMS: make([]int64, len(p.Schedule)),
			Jitter: p.Jitter, DeadlineMS: p.Deadline.Milliseconds(), RetryStatuses: append([]int{}, p.RetryStatuses...)}
		for i, wait := range p.Schedule {
			v.ScheduleMS[i] = wait.Milliseconds()
		}
		views = append(views, v)
	}
	page, next, err := pageOf(&query{v: r.URL.Query()}, views, func(v retryPolicyView) string { return v.Name })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, list(page, next))
}

func (s *server) handleCreateEndpoint(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var in engine.EndpointInput
	if err := decodeJSON(w, r, s.maxBody, &in, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	tenant := ps.ByName("tenant")
	ep, secret, err := s.svc.CreateEndpoint(r.Context(), tenant, in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Location", "/v1/tenants/"+url.PathEscape(tenant)+"/endpoints/"+url.PathEscape(ep.ID))
	h.Set("Cache-Control", "no-store") // the body carries the secret
	var env engine.Environment
	if t, err := s.svc.Tenant(r.Context(), tenant); err == nil {
		env = t.Environment
	}
	s.writeJSON(w, r, http.StatusCreated, createdEndpoint{Endpoint: ep, Secret: secret, Environment: env})
}

func (s *server) handleListEndpoints(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	eps, err := s.svc.Endpoints(r.Context(), ps.ByName("tenant"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, next, err := pageOf(&query{v: r.URL.Query()}, eps, func(ep engine.Endpoint) string { return ep.ID })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, list(page, next))
}

func (s *server) handleGetEndpoint(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	ep, err := s.svc.Endpoint(r.Context(), ps.ByName("tenant"), ps.ByName("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, ep)
}

func (s *server) handleUpdateEndpoint(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var p engine.EndpointPatch
	if err := decodeJSON(w, r, s.maxBody, &p, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	p.By = replayedBy(r)
	ep, err := s.svc.UpdateEndpoint(r.Context(), ps.ByName("tenant"), ps.ByName("id"), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, ep)
}

func (s *server) handleDeleteEndpoint(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	if err := s.svc.DeleteEndpoint(r.Context(), ps.ByName("tenant"), ps.ByName("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) handleIngest(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	key, err := idempotencyKey(r.Header)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var in engine.IngestInput
	if err := decodeJSON(w, r, s.maxBody, &in, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	in.IdempotencyKey = key
	tenant := ps.ByName("tenant")
	res, err := s.svc.Ingest(r.Context(), tenant, in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := ingestAnswer(res)
	h := w.Header()
	h.Set("Location", "/v1/tenants/"+url.PathEscape(tenant)+"/events/"+url.PathEscape(res.Event.ID))
	if res.Duplicate {
		h.Set("Idempotent-Replayed", "true")
	}
	if s.opts.ObserveIngest != nil {
		s.opts.ObserveIngest(res.Duplicate)
	}
	s.writeJSON(w, r, http.StatusAccepted, out)
}

// idempotencyKey returns h's Idempotency-Key, "" without one. The header
// given empty (a client's unset key variable) or more than once is an
// invalid_field error naming it: taken as no key, or as its first value,
// each retry of that client would store another event.
func idempotencyKey(h http.Header) (string, error) {
	vs := h.Values("Idempotency-Key")
	switch {
	case len(vs) > 1:
		return "", engine.Errorf(engine.CodeInvalidField, "Idempotency-Key", "the Idempotency-Key header is given %d times; give it once", len(vs))
	case len(vs) == 1 && strings.TrimSpace(vs[0]) == "":
		return "", engine.Errorf(engine.CodeInvalidField, "Idempotency-Key", "the Idempotency-Key header is empty: send a key, or no header for an event without one")
	case len(vs) == 1:
		return vs[0], nil
	}
	return "", nil
}

// ingestAnswer is the answer to an ingest that stored (or found) res.
func ingestAnswer(res engine.IngestResult) ingestResponse {
	out := ingestResponse{ID: res.Event.ID, Created: res.Event.Created, DeliverAt: res.Event.DeliverAt, Deliveries: make([]deliveryRef, len(res.Deliveries))}
	for i, d := range res.Deliveries {
		out.Deliveries[i] = deliveryRef{ID: d.ID, EndpointID: d.EndpointID, State: d.State}
	}
	return out
}

// handleSendTestEvent sends a test event to one endpoint
// (engine.Service.SendTestEvent): 202 with the event and its delivery.
func (s *server) handleSendTestEvent(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var in engine.TestEventInput
	if err := decodeJSON(w, r, s.maxBody, &in, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	tenant := ps.ByName("tenant")
	res, err := s.svc.SendTestEvent(r.Context(), tenant, ps.ByName("id"), in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/tenants/"+url.PathEscape(tenant)+"/events/"+url.PathEscape(res.Event.ID))
	s.writeJSON(w, r, http.StatusAccepted, testEventResponse{ingestResponse: ingestAnswer(res), Type: res.Event.Type, Test: true})
}

func (s *server) handleGetEvent(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	ev, ds, err := s.svc.Event(r.Context(), ps.ByName("tenant"), ps.ByName("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, eventResponse{Event: storedEnvelope(ev.Body), Test: ev.Test, Deliveries: deliveriesJSON(ds), Channels: ev.Channels, DeliverAt: ev.DeliverAt})
}

func (s *server) handleGetDelivery(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	d, err := s.svc.Delivery(r.Context(), ps.ByName("tenant"), ps.ByName("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, deliveryJSON(d))
}

func (s *server) handleReplay(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	d, err := s.svc.Replay(r.Context(), ps.ByName("tenant"), ps.ByName("id"), replayedBy(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusAccepted, deliveryJSON(d))
}

// handleSkip lets the line of a dead delivery that blocks it go on
// without it (409 not_blocking for any other delivery).
func (s *server) handleSkip(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	d, err := s.svc.Skip(r.Context(), ps.ByName("tenant"), ps.ByName("id"), replayedBy(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, deliveryJSON(d))
}

func (s *server) handleListDeadLetters(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	q := r.URL.Query()
	limit := 0 // the engine's default
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > engine.MaxPageLimit {
			s.writeError(w, r, engine.Errorf(engine.CodeInvalidField, "limit", "limit must be an integer from 1 to %d", engine.MaxPageLimit))
			return
		}
		limit = n
	}
	ds, next, err := s.svc.DeadLetters(r.Context(), ps.ByName("tenant"), q.Get("cursor"), limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, list(deliveriesJSON(ds), next))
}
