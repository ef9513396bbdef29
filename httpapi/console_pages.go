package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/webhookd/webhookd/engine"
)

// The console's pages (GET). Each reads through the engine.Service, as
// the API does; console_actions.go has the forms that change something.

// noticeMessages are the notices a page shows for ?m= after an action
// redirected to it: fixed texts, with at most the number in ?n=, so a
// link can never put words in the console's mouth.
var noticeMessages = map[string]string{
	"resent":            "Resent: a new delivery cycle has started. This page shows its attempts as they are made.",
	"resent-held":       "Resent, and held: its endpoint is disabled, so the new cycle waits (paused) until the endpoint is enabled again.",
	"skipped":           "Skipped: its line goes on without it; the next delivery of the line is sent now.",
	"endpoint-updated":  "Endpoint saved.",
	"tenant-created":    "Tenant created. Add its endpoints with POST /v1/tenants/{tenant}/endpoints; give its people a portal link or an access token.",
	"replay-started":    "Range replay started: this page shows how far it got as it goes. Each dead letter of the range starts a new delivery cycle; one replayed is no longer dead, so starting it twice sends nothing twice.",
	"replayed-selected": "Replayed the selected deliveries: %d, each in a new delivery cycle (one of an ordered line in its line's order).",
	"disabled":          "Endpoint disabled: its deliveries are held (paused) until it is enabled again.",
	"enabled-held":      "Endpoint enabled: held deliveries queued for delivery: %d.",
	"enabled-new":       "Endpoint enabled from now on: held deliveries moved to the dead letters, where each can still be replayed: %d.",
	"endpoint-deleted":  "Endpoint deleted: its deliveries that were not finished end dead, \"endpoint deleted\"; its delivery history stays.",
	"test-sent":         "Test event sent to this endpoint only, through the normal path: signed, retried, and marked test here and in the API.",
	"op-disabled":       "Operational endpoint disabled: its events are held until it is enabled again.",
	"op-enabled":        "Operational endpoint enabled.",
	"op-deleted":        "Operational endpoint deleted: its events not yet delivered end dead, \"endpoint deleted\".",
	"backfill-started":  "Backfill started: this page shows how far it got as it goes. It makes a delivery for each event of the range the endpoint had none for, each starting a delivery cycle; starting it twice makes none twice.",
}

// notice returns the notice for r's ?m= and ?n=, "" when there is none.
func notice(r *http.Request) string {
	q := r.URL.Query()
	msg, ok := noticeMessages[q.Get("m")]
	if !ok {
		return ""
	}
	n, _ := strconv.Atoi(q.Get("n"))
	if n < 0 {
		n = 0
	}
	if strings.Contains(msg, "%d") {
		return fmt.Sprintf(msg, n)
	}
	return msg
}

// endpointRow is one endpoint on the endpoints page.
type endpointRow struct {
	engine.Endpoint
	Attempts  int // attempts in the stats window
	Successes int
	Rate      float64
}

// endpointsData is the endpoints page's data.
type endpointsData struct {
	Endpoints []endpointRow
	Types     []engine.EventType // the catalogue, for the new endpoint's form
	// Policies are the retry policies a new endpoint may choose;
	// TenantPolicy is the tenant's, which it follows when it chooses none.
	Policies     []policyOption
	TenantPolicy policyOption
	// StatsTruncated: the window held more deliveries than the stats read.
	StatsTruncated bool
	StatsLimit     int
}

// handleEndpointsPage lists the tenant's endpoints with their success rate
// over the last 24 hours: the attempts made in that window, of the newest
// consoleStatsLimit deliveries created in it (one listing read).
func (s *server) handleEndpointsPage(w http.ResponseWriter, r *http.Request, _ httprouter.Params, v *visit) {
	ctx := r.Context()
	eps, err := s.svc.Endpoints(ctx, v.tenant.ID)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	since := time.Now().Add(-consoleStatsWindow)
	ds, next, err := s.svc.ListDeliveries(ctx, v.tenant.ID, engine.DeliveryFilter{Since: since, Limit: consoleStatsLimit})
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	type tally struct{ attempts, successes int }
	stats := map[string]*tally{}
	for _, d := range ds {
		t := stats[d.EndpointID]
		if t == nil {
			t = &tally{}
			stats[d.EndpointID] = t
		}
		for _, a := range d.Attempts {
			if a.Start.Before(since) {
				continue
			}
			t.attempts++
			if a.Outcome == engine.OutcomeSuccess {
				t.successes++
			}
		}
	}
	types, err := s.svc.EventTypes(ctx)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	data := endpointsData{StatsTruncated: next != "", StatsLimit: consoleStatsLimit, Types: types,
		Policies: s.policyOptions(), TenantPolicy: s.policyOption(v.tenant.RetryPolicy)}
	for _, ep := range eps {
		row := endpointRow{Endpoint: ep}
		if t := stats[ep.ID]; t != nil && t.attempts > 0 {
			row.Attempts, row.Successes = t.attempts, t.successes
			row.Rate = float64(t.successes) / float64(t.attempts)
		}
		data.Endpoints = append(data.Endpoints, row)
	}
	p := s.newPage(v, "Endpoints", "endpoints")
	p.Notice = notice(r)
	p.Data = data
	s.render(w, r, http.StatusOK, "endpoints", p)
}

// deliveriesData is the deliveries page's data.
type deliveriesData struct {
	Deliveries []engine.Delivery
	LineNotes  map[string]string // delivery ID → what it waits behind, or that it blocks its line (engine.Service.LineNote)
	Endpoints  endpointIndex     // for the table and the filter
	EventTypes []string
	States     []engine.State
	Statuses   []engine.StatusClass
	// The filter as given, to fill the form again.
	State, Type, Endpoint, Status, Since, Until string
	Channel                                     string
	// Older is the link to the next (older) page, "" on the last;
	// Newest is the link back to the first page when this is not it.
	Older, Newest string
}

// formTimeLayouts are the times a console form accepts: RFC 3339, or an
// <input type="datetime-local"> value, read as UTC.
var formTimeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

// parseFormTime reads a console time field; "" is the zero time.
func parseFormTime(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range formTimeLayouts {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, engine.Errorf(engine.CodeInvalidField, field, "%s must be a time like 2026-12-02T14:00 (UTC)", field)
}

// formTime shows t as a datetime-local value, in UTC.
func formTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05")
}

// handleDeliveriesPage is the delivery log, filtered by state, event
// type, endpoint, the class of the last attempt's status, creation time
// and channel, newest first, a page at a time.
func (s *server) handleDeliveriesPage(w http.ResponseWriter, r *http.Request, _ httprouter.Params, v *visit) {
	ctx := r.Context()
	q := r.URL.Query()
	data := deliveriesData{
		State: q.Get("state"), Type: q.Get("type"), Endpoint: q.Get("endpoint"), Status: q.Get("status"),
		Since: q.Get("since"), Until: q.Get("until"), Channel: strings.TrimSpace(q.Get("channel")),
		States:    []engine.State{engine.StatePending, engine.StateDelivering, engine.StateSucceeded, engine.StateDead, engine.StatePaused, engine.StateWaiting},
		Statuses:  engine.StatusClasses,
		LineNotes: map[string]string{},
	}
	p := s.newPage(v, "Deliveries", "deliveries")
	eps, err := s.svc.Endpoints(ctx, v.tenant.ID)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	data.Endpoints = indexEndpoints(eps)
	types, err := s.svc.EventTypes(ctx)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	for _, et := range types {
		data.EventTypes = append(data.EventTypes, et.Name)
	}

	f := engine.DeliveryFilter{
		State: engine.State(data.State), Type: data.Type, EndpointID: data.Endpoint, Status: engine.StatusClass(data.Status),
		Limit: consolePageSize, Cursor: q.Get("cursor"), Channel: data.Channel,
	}
	status := http.StatusOK
	var ferr error
	if f.Since, ferr = parseFormTime("since", data.Since); ferr == nil {
		f.Until, ferr = parseFormTime("until", data.Until)
	}
	if ferr == nil {
		var next string
		data.Deliveries, next, ferr = s.svc.ListDeliveries(ctx, v.tenant.ID, f)
		for _, d := range data.Deliveries {
			if note := s.svc.LineNote(ctx, d); note != "" {
				data.LineNotes[d.ID] = note
			}
		}
		if ferr == nil {
			if next != "" {
				data.Older = deliveriesLink(v.tenant.ID, q, next)
			}
			if f.Cursor != "" {
				data.Newest = deliveriesLink(v.tenant.ID, q, "")
			}
		}
	}
	if ferr != nil {
		e, ok := errors.AsType[*engine.Error](ferr)
		if !ok || e.Code != engine.CodeInvalidField {
			s.consoleError(w, r, v, ferr)
			return
		}
		status = http.StatusUnprocessableEntity
		p.Error = e.Message
	}
	p.Data = data
	s.render(w, r, status, "deliveries", p)
}

// deliveriesLink is the deliveries page with q's filter and cursor.
func deliveriesLink(tenant string, q url.Values, cursor string) string {
	return listLink(tenantPath(tenant, "deliveries"), q, cursor, "state", "type", "endpoint", "status", "since", "until", "channel")
}

// listLink is the link to the page at cursor ("": the first) of the list
// at path with the filters named keys of q.
func listLink(path string, q url.Values, cursor string, keys ...string) string {
	keep := url.Values{}
	for _, k := range keys {
		if v := q.Get(k); v != "" {
			keep.Set(k, v)
		}
	}
	if cursor != "" {
		keep.Set("cursor", cursor)
	}
	link := path
	if len(keep) > 0 {
		link += "?" + keep.Encode()
	}
	return link
}

// deliveryData is the delivery page's data.
type deliveryData struct {
	D           engine.Delivery
	EndpointURL string       // "" when the endpoint was deleted
	Envelope    []byte       // the stored envelope, as sent (the page shows it indented too)
	Event       engine.Event // its Sequence and OrderingKey; zero when the event is no longer stored
	InFlight    bool         // delivering, or an attempt due within 30s: the page reloads itself (console.js)
	LineNote    string       // what an ordered delivery waits for, or that it blocks its line (engine.Service.LineNote)
	LastAttempt *engine.Attempt
	// Policy is the retry policy its cycle follows; AttemptsLeft how
	// many attempts that leaves the cycle, while it is pending (else -1).
	Policy       policyOption
	AttemptsLeft int
	// Headers are the endpoint's custom headers as they are now (not
	// kept per attempt), shown masked (engine.CustomHeader.Masked).
	Headers engine.CustomHeaders
}

// handleDeliveryPage shows one delivery: every attempt (time, duration,
// status or error, the response excerpt as text), the next attempt time,
// the replay history, the envelope, and the Resend button; for an
// ordered delivery its line and what it waits for, and the Skip button
// on a dead head blocking its line.
func (s *server) handleDeliveryPage(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	ctx := r.Context()
	d, err := s.svc.Delivery(ctx, v.tenant.ID, ps.ByName("id"))
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	data := deliveryData{D: d, InFlight: d.State == engine.StateDelivering ||
		d.State == engine.StatePending && time.Until(d.NextAttemptAt) < 30*time.Second,
		LineNote: s.svc.LineNote(ctx, d), Policy: s.policyOption(d.RetryPolicy), AttemptsLeft: -1}
	if d.State == engine.StatePending || d.State == engine.StateDelivering {
		p, _ := s.svc.RetryPolicy(d.RetryPolicy)
		data.AttemptsLeft = max(0, p.MaxAttempts()-d.CycleAttempts)
	}
	if n := len(d.Attempts); n > 0 {
		data.LastAttempt = &d.Attempts[n-1]
	}
	if ep, err := s.svc.Endpoint(ctx, v.tenant.ID, d.EndpointID); err == nil {
		data.EndpointURL, data.Headers = ep.URL, ep.Headers
	}
	if ev, _, err := s.svc.Event(ctx, v.tenant.ID, d.EventID); err == nil {
		data.Envelope, data.Event = storedEnvelope(ev.Body), ev
	}
	p := s.newPage(v, "Delivery "+d.ID, "deliveries")
	p.Notice = notice(r)
	p.Data = data
	s.render(w, r, http.StatusOK, "delivery", p)
}

// deadLettersData is the dead-letters page's data.
type deadLettersData struct {
	Deliveries []engine.Delivery
	Endpoints  endpointIndex
	// The filter: an endpoint's ID and the class of the last attempt's
	// status ("" each: any), and the classes to choose from.
	Endpoint, Status string
	Statuses         []engine.StatusClass
	Older            string // link to the next page, "" on the last
	Newest           string // link to the first page when this is not it
	// The replay form's defaults: the last 24 hours, up to now.
	Since, Until string
}

// handleDeadLettersPage lists the tenant's dead letters newest first,
// like every list of the console (the API's dead-letter queue, GET
// …/dead-letters, stays oldest death first: the order to work through
// it), filtered by endpoint and by the class of the last attempt's
// status as the delivery log is, with the range replay form.
func (s *server) handleDeadLettersPage(w http.ResponseWriter, r *http.Request, _ httprouter.Params, v *visit) {
	ctx := r.Context()
	q := r.URL.Query()
	cursor := q.Get("cursor")
	eps, err := s.svc.Endpoints(ctx, v.tenant.ID)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	now := time.Now()
	data := deadLettersData{Endpoints: indexEndpoints(eps), Since: formTime(now.Add(-24 * time.Hour).Truncate(time.Minute)),
		Endpoint: q.Get("endpoint"), Status: q.Get("status"), Statuses: engine.StatusClasses}
	p := s.newPage(v, "Dead letters", "dead-letters")
	status := http.StatusOK
	ds, next, err := s.svc.ListDeliveries(ctx, v.tenant.ID, engine.DeliveryFilter{State: engine.StateDead, EndpointID: data.Endpoint,
		Status: engine.StatusClass(data.Status), Limit: consolePageSize, Cursor: cursor})
	if err != nil {
		e, ok := errors.AsType[*engine.Error](err)
		if !ok || e.Code != engine.CodeInvalidField {
			s.consoleError(w, r, v, err)
			return
		}
		status = http.StatusUnprocessableEntity
		p.Error = e.Message
	}
	data.Deliveries = ds
	base := tenantPath(v.tenant.ID, "dead-letters")
	if next != "" {
		data.Older = listLink(base, q, next, "endpoint", "status")
	}
	if cursor != "" {
		data.Newest = listLink(base, q, "", "endpoint", "status")
	}
	p.Notice = notice(r)
	p.Data = data
	s.render(w, r, status, "dead-letters", p)
}

// reportData is the report page's data.
type reportData struct {
	R      engine.Report
	Last   int
	Charts chartsData
}

// handleReportPage shows the delivery report over the tenant's last N
// events (?last=, default 1000).
func (s *server) handleReportPage(w http.ResponseWriter, r *http.Request, _ httprouter.Params, v *visit) {
	last := engine.DefaultReportWindow
	if s := r.URL.Query().Get("last"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			n = -1 // the engine names the field
		}
		last = n
	}
	rep, err := s.svc.Report(r.Context(), v.tenant.ID, last)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	charts, err := s.charts(r, v)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	p := s.newPage(v, "Report", "report")
	p.Data = reportData{R: rep, Last: last, Charts: charts}
	s.render(w, r, http.StatusOK, "report", p)
}

// handleCataloguePage lists the event catalogue: each type an endpoint
// may subscribe to, what it means and an example of its data, as the
// operator published them (PUT /v1/event-types/{type}).
func (s *server) handleCataloguePage(w http.ResponseWriter, r *http.Request, _ httprouter.Params, v *visit) {
	types, err := s.svc.EventTypes(r.Context())
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	p := s.newPage(v, "Event types", "event-types")
	p.Data = types
	s.render(w, r, http.StatusOK, "event-types", p)
}

// handleSearch finds an event or a delivery of the tenant by its ID:
// it sends the browser to its page, or says nothing matched.
func (s *server) handleSearch(w http.ResponseWriter, r *http.Request, _ httprouter.Params, v *visit) {
	ctx := r.Context()
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if strings.HasPrefix(q, "dlv_") {
		if d, err := s.svc.Delivery(ctx, v.tenant.ID, q); err == nil {
			http.Redirect(w, r, tenantPath(v.tenant.ID, "deliveries", d.ID), http.StatusSeeOther)
			return
		}
	} else if q != "" {
		if ev, _, err := s.svc.Event(ctx, v.tenant.ID, q); err == nil {
			http.Redirect(w, r, tenantPath(v.tenant.ID, "events", ev.ID), http.StatusSeeOther)
			return
		}
	}
	p := s.newPage(v, "Not found", "")
	p.Error = "No event or delivery of this tenant has the ID " + strconv.Quote(shorten(q, 120)) + ": give a whole evt_… or dlv_… ID."
	p.Data = struct{ Status int }{http.StatusNotFound}
	s.render(w, r, http.StatusNotFound, "error", p)
}

// eventsData is the events page's data.
type eventsData struct {
	Events    []engine.EventDeliveries
	Last      int   // how many were asked for
	Choices   []int // the page's choices of Last
	Endpoints endpointIndex
}

// consoleEventChoices are the events page's choices of how many recent
// events to list; the first is the default.
var consoleEventChoices = []int{50, 200, 1000}

// handleEventsPage lists the tenant's last events (?last=, one of
// consoleEventChoices), newest first, each with its deliveries' states.
func (s *server) handleEventsPage(w http.ResponseWriter, r *http.Request, _ httprouter.Params, v *visit) {
	data := eventsData{Last: consoleEventChoices[0], Choices: consoleEventChoices}
	if n, err := strconv.Atoi(r.URL.Query().Get("last")); err == nil && slices.Contains(consoleEventChoices, n) {
		data.Last = n
	}
	ctx := r.Context()
	events, err := s.svc.RecentEvents(ctx, v.tenant.ID, data.Last)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	data.Events = events
	if eps, err := s.svc.Endpoints(ctx, v.tenant.ID); err == nil {
		data.Endpoints = indexEndpoints(eps)
	}
	p := s.newPage(v, "Events", "events")
	p.Data = data
	s.render(w, r, http.StatusOK, "events", p)
}

// indentJSON is b indented for reading; b itself when it is not JSON.
func indentJSON(b []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return string(b)
	}
	return buf.String()
}

// eventData is the event page's data.
type eventData struct {
	Event      engine.Event
	Pretty     string // the envelope, indented; the stored bytes when it is not JSON
	Deliveries []engine.Delivery
	Endpoints  endpointIndex
}

// handleEventPage shows one event: its envelope pretty-printed and its
// deliveries, each linked to its page.
func (s *server) handleEventPage(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	ctx := r.Context()
	ev, ds, err := s.svc.Event(ctx, v.tenant.ID, ps.ByName("id"))
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	data := eventData{Event: ev, Deliveries: ds}
	data.Pretty = indentJSON(storedEnvelope(ev.Body))
	if eps, err := s.svc.Endpoints(ctx, v.tenant.ID); err == nil {
		data.Endpoints = indexEndpoints(eps)
	}
	p := s.newPage(v, "Event "+ev.ID, "")
	p.Data = data
	s.render(w, r, http.StatusOK, "event", p)
}

// charts reads the attempts of the deliveries created in the window the
// query names (?window=24h or 7d; 24h by default), of one endpoint when
// ?endpoint= names one, and draws them per hour.
func (s *server) charts(r *http.Request, v *visit) (chartsData, error) {
	ctx := r.Context()
	q := r.URL.Query()
	data := chartsData{Window: q.Get("window"), Endpoint: q.Get("endpoint"), Limit: consoleChartLimit}
	window, ok := chartWindows[data.Window]
	if !ok {
		data.Window, window = "24h", chartWindows["24h"]
	}
	eps, err := s.svc.Endpoints(ctx, v.tenant.ID)
	if err != nil {
		return data, err
	}
	data.Endpoints = indexEndpoints(eps)
	if data.Endpoints.ByID[data.Endpoint] == nil {
		data.Endpoint = ""
	}
	now := time.Now().UTC()
	end := now.Truncate(time.Hour).Add(time.Hour) // the current hour is the last point
	from := end.Add(-window)
	var ds []engine.Delivery
	f := engine.DeliveryFilter{Since: from, EndpointID: data.Endpoint, Limit: engine.MaxPageLimit}
	for {
		page, next, err := s.svc.ListDeliveries(ctx, v.tenant.ID, f)
		if err != nil {
			return data, err
		}
		ds = append(ds, page...)
		if next == "" {
			break
		}
		if len(ds) >= consoleChartLimit {
			data.Truncated = true
			break
		}
		f.Cursor = next
	}
	points := engine.AttemptSeries(ds, from, time.Hour, int(window/time.Hour), data.Endpoint)
	data.Rate, data.Latency = makeCharts(points, time.Hour)
	for _, p := range points {
		if p.Attempts > 0 {
			data.Points = append(data.Points, p)
		}
	}
	return data, nil
}

// endpointIndex names a tenant's endpoints where a page shows a
// delivery's endpoint, and offers them in an endpoint filter: by ID, and
// in the tenant's order.
type endpointIndex struct {
	ByID map[string]*engine.Endpoint
	List []*engine.Endpoint
}

// indexEndpoints indexes eps.
func indexEndpoints(eps []engine.Endpoint) endpointIndex {
	x := endpointIndex{ByID: make(map[string]*engine.Endpoint, len(eps))}
	for i := range eps {
		x.ByID[eps[i].ID] = &eps[i]
		x.List = append(x.List, &eps[i])
	}
	return x
}

// endpointRef is what the "endpoint" template shows for an endpoint ID:
// the endpoint, or its ID when it was deleted.
type endpointRef struct {
	ID string
	E  *engine.Endpoint // nil: deleted
}

// Ref is the endpoint of id, for the "endpoint" template.
func (x endpointIndex) Ref(id string) endpointRef { return endpointRef{id, x.ByID[id]} }
