package httpapi

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/webhookd/webhookd/engine"
)

// The console's forms that change something: each is a POST that
// consoleSession has checked (session, CSRF token, origin). Each acts as
// the logged-in principal (a replay is recorded "by" its name) and then
// redirects to a page (POST/redirect/GET), except a rotation, which shows
// the new secret once.

// redirectNotice sends the browser to path with notice m (and count n).
func redirectNotice(w http.ResponseWriter, r *http.Request, path, m string, n int) {
	q := url.Values{"m": {m}}
	if n >= 0 {
		q.Set("n", strconv.Itoa(n))
	}
	http.Redirect(w, r, path+"?"+q.Encode(), http.StatusSeeOther)
}

// handleConsoleResend replays one delivery: a new cycle, now.
func (s *server) handleConsoleResend(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	d, err := s.svc.Replay(r.Context(), v.tenant.ID, ps.ByName("id"), v.p.name)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	m := "resent"
	if ep, err := s.svc.Endpoint(r.Context(), v.tenant.ID, d.EndpointID); err == nil && ep.Disabled {
		m = "resent-held" // the dispatcher holds the new cycle until the endpoint is enabled
	}
	redirectNotice(w, r, tenantPath(v.tenant.ID, "deliveries", d.ID), m, -1)
}

// handleConsoleReplaySelected replays the deliveries ticked on a list
// (form field id, repeated) and goes back to the list it came from
// (back: a path of this tenant's console, else the deliveries).
func (s *server) handleConsoleReplaySelected(w http.ResponseWriter, r *http.Request, _ httprouter.Params, v *visit) {
	ds, err := s.svc.ReplaySelected(r.Context(), v.tenant.ID, r.PostForm["id"], v.p.name)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	back := r.PostForm.Get("back")
	if !strings.HasPrefix(back, tenantPath(v.tenant.ID)+"/") || strings.ContainsAny(back, "?#\\") {
		back = tenantPath(v.tenant.ID, "deliveries")
	}
	redirectNotice(w, r, back, "replayed-selected", len(ds))
}

// handleConsoleCreateTenant creates a tenant from the tenants page's
// form (id, name, environment), as PUT /v1/tenants/{id} would for the
// logged-in token (a test token creates test tenants only), but never
// changes one that exists.
func (s *server) handleConsoleCreateTenant(w http.ResponseWriter, r *http.Request, _ httprouter.Params, v *visit) {
	ctx := r.Context()
	id := strings.TrimSpace(r.PostForm.Get("id"))
	in := engine.TenantInput{Name: strings.TrimSpace(r.PostForm.Get("name")), Environment: engine.Environment(r.PostForm.Get("environment"))}
	if err := s.allow(ctx, v.p, scopeAdmin, id); err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	if v.p.env == engine.EnvironmentTest && in.Environment != engine.EnvironmentTest {
		s.consoleError(w, r, v, engine.Errorf(engine.CodeForbidden, "environment", "a test token creates test tenants only"))
		return
	}
	if _, err := s.svc.Tenant(ctx, id); err == nil {
		s.consoleError(w, r, v, engine.Errorf(engine.CodeInvalidField, "id", "a tenant %q exists already: pick another ID", id))
		return
	}
	t, _, err := s.svc.PutTenant(ctx, id, in)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	redirectNotice(w, r, tenantPath(t.ID, "endpoints"), "tenant-created", -1)
}

// handleConsoleSkip lets the line of a dead delivery that blocks it go
// on without it.
func (s *server) handleConsoleSkip(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	d, err := s.svc.Skip(r.Context(), v.tenant.ID, ps.ByName("id"), v.p.name)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	redirectNotice(w, r, tenantPath(v.tenant.ID, "deliveries", d.ID), "skipped", -1)
}

// handleConsoleReplayRange starts the replay of the dead letters that
// died in [since, until) (until empty: now), of one endpoint when
// chosen, and goes to its task's page.
func (s *server) handleConsoleReplayRange(w http.ResponseWriter, r *http.Request, _ httprouter.Params, v *visit) {
	since, err := parseFormTime("since", r.PostForm.Get("since"))
	if err == nil && since.IsZero() {
		err = engine.Errorf(engine.CodeInvalidField, "since", "since is required")
	}
	var until time.Time
	if err == nil {
		until, err = parseFormTime("until", r.PostForm.Get("until"))
	}
	var t engine.Task
	if err == nil {
		t, err = s.svc.StartReplay(r.Context(), v.tenant.ID, since, until, r.PostForm.Get("endpoint"), v.p.name)
	}
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	s.logTaskStarted(r, "dead letters replay started", t)
	redirectNotice(w, r, tenantPath(v.tenant.ID, "tasks", t.ID), "replay-started", -1)
}

// handleConsoleBackfill starts the backfill of an endpoint over [since,
// until) (until empty: now) and goes to its task's page.
func (s *server) handleConsoleBackfill(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	since, err := parseFormTime("since", r.PostForm.Get("since"))
	if err == nil && since.IsZero() {
		err = engine.Errorf(engine.CodeInvalidField, "since", "since is required")
	}
	var until time.Time
	if err == nil {
		until, err = parseFormTime("until", r.PostForm.Get("until"))
	}
	var t engine.Task
	if err == nil {
		t, err = s.svc.StartBackfill(r.Context(), v.tenant.ID, ps.ByName("id"), since, until, v.p.name)
	}
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	s.logTaskStarted(r, "endpoint backfill started", t)
	redirectNotice(w, r, tenantPath(v.tenant.ID, "tasks", t.ID), "backfill-started", -1)
}

// rotatedData is the page that shows a rotated secret, once.
type rotatedData struct {
	Created         bool // a new endpoint's first secret, not a rotation
	Endpoint        engine.Endpoint
	Secret          string
	Environment     engine.Environment
	PreviousExpires time.Time
}

// handleConsoleRotate gives an endpoint a new secret and shows it, this
// once (the page is no-store, like every console page); the previous
// secret keeps signing for the chosen grace ("0s": stops at once).
func (s *server) handleConsoleRotate(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	res, err := s.svc.RotateSecret(r.Context(), v.tenant.ID, ps.ByName("id"), engine.RotateInput{Grace: r.PostForm.Get("grace")})
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	p := s.newPage(v, "New secret", "endpoints")
	p.Data = rotatedData{Endpoint: res.Endpoint, Secret: res.Secret, Environment: res.Environment, PreviousExpires: res.PreviousExpires}
	s.render(w, r, http.StatusOK, "rotated", p)
}

// endpointForm reads the endpoint form's fields: url, description, and
// the subscribed types (type, repeated; "*" for every type).
func endpointForm(r *http.Request) (url, description string, types []string) {
	types = r.PostForm["type"]
	if slices.Contains(types, engine.AllEventTypes) {
		types = []string{engine.AllEventTypes}
	}
	return strings.TrimSpace(r.PostForm.Get("url")), strings.TrimSpace(r.PostForm.Get("description")), types
}

// channelsForm reads the endpoint form's channels field: names separated
// by commas (spaces around them ignored; empty: none), which the engine
// then checks as the API's channels (an error names channels[i]).
func channelsForm(r *http.Request) []string {
	chs := []string{}
	for ch := range strings.SplitSeq(r.PostForm.Get("channels"), ",") {
		if ch = strings.TrimSpace(ch); ch != "" {
			chs = append(chs, ch)
		}
	}
	return chs
}

// headersForm reads the custom headers of an endpoint form: the rows of
// header_name and header_value (a row with neither is left out), and
// header_remove, the names the edit form's boxes tick. Names and values
// are trimmed (no value may start or end with a space); engine validates
// the rest. A value without its name, or a name given twice, is an
// error that shows no value.
func headersForm(r *http.Request) (set map[string]string, remove []string, err error) {
	names, values := r.PostForm["header_name"], r.PostForm["header_value"]
	for i := range max(len(names), len(values)) {
		var name, value string
		if i < len(names) {
			name = strings.TrimSpace(names[i])
		}
		if i < len(values) {
			value = strings.TrimSpace(values[i])
		}
		switch {
		case name == "" && value == "":
			continue
		case name == "":
			return nil, nil, engine.Errorf(engine.CodeInvalidField, "headers", "a header value was given without its name")
		}
		if set == nil {
			set = map[string]string{}
		}
		if _, twice := set[name]; twice {
			return nil, nil, engine.Errorf(engine.CodeInvalidField, engine.HeaderField(name), "header %s is given twice", name)
		}
		set[name] = value
	}
	for _, name := range r.PostForm["header_remove"] {
		if name = strings.TrimSpace(name); name != "" {
			remove = append(remove, name)
		}
	}
	return set, remove, nil
}

// rateLimitForm reads the endpoint form's rate limit: rate_per_second
// (empty: none) and rate_burst (empty: the default). A burst without a
// rate, or a field that is not a number, is invalid_field naming its
// member of rate_limit, as the API's would be.
func rateLimitForm(r *http.Request) (*engine.RateLimitInput, error) {
	perSecond, burst := strings.TrimSpace(r.PostForm.Get("rate_per_second")), strings.TrimSpace(r.PostForm.Get("rate_burst"))
	if perSecond == "" {
		if burst != "" {
			return nil, engine.Errorf(engine.CodeInvalidField, "rate_limit.per_second", "a burst needs a rate: fill in the attempts per second, or empty both for no limit")
		}
		return nil, nil
	}
	in := new(engine.RateLimitInput)
	var err error
	if in.PerSecond, err = strconv.ParseFloat(perSecond, 64); err != nil {
		return nil, engine.Errorf(engine.CodeInvalidField, "rate_limit.per_second", "attempts per second must be a number, like 5 or 0.5")
	}
	if burst != "" {
		b, err := strconv.Atoi(burst)
		if err != nil {
			return nil, engine.Errorf(engine.CodeInvalidField, "rate_limit.burst", "the burst must be a whole number of attempts")
		}
		in.Burst = &b
	}
	return in, nil
}

// handleConsoleCreateEndpoint creates an endpoint from the endpoints
// page's form and shows its signing secret, this once.
func (s *server) handleConsoleCreateEndpoint(w http.ResponseWriter, r *http.Request, _ httprouter.Params, v *visit) {
	u, desc, types := endpointForm(r)
	headers, _, err := headersForm(r)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	limit, err := rateLimitForm(r)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	ep, secret, err := s.svc.CreateEndpoint(r.Context(), v.tenant.ID, engine.EndpointInput{URL: u, Description: desc, EventTypes: types, Channels: channelsForm(r), RetryPolicy: r.PostForm.Get("retry_policy"), Headers: headers, RateLimit: limit,
		SendTraceparent: !v.p.portal && r.PostForm.Get("send_traceparent") == "yes"}) // the app's choice, not its customer's: the portal has no such box
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	p := s.newPage(v, "New endpoint", "endpoints")
	p.Data = rotatedData{Created: true, Endpoint: ep, Secret: secret, Environment: v.tenant.Environment}
	s.render(w, r, http.StatusCreated, "rotated", p)
}

// editEndpointData is the endpoint form's data.
type editEndpointData struct {
	Endpoint engine.Endpoint
	Types    []engine.EventType
	All      bool            // subscribed to every type
	Chosen   map[string]bool // the types it subscribes to
	// TestTypes are the catalogue types it subscribes to, for the test
	// event form; TestDefault is the one sent when none is chosen.
	TestTypes   []engine.EventType
	TestDefault string
	// Revealed is set on the page that answers "Reveal secret": the keys
	// that sign now. Nil on every GET.
	Revealed *engine.RevealedSecret
	// Policies are the retry policies it may choose; TenantPolicy is its
	// tenant's, which it follows when it chooses none.
	Policies     []policyOption
	TenantPolicy policyOption
	// BackfillSince is the backfill form's since: a day before now.
	BackfillSince string
	// Effective is the bound the endpoint is held to: its own rate limit
	// within [delivery] endpoint_rate (zero: none).
	Effective engine.RateLimit
}

// RateCapped reports whether [delivery] endpoint_rate holds the endpoint
// below the rate limit it asks for.
func (d editEndpointData) RateCapped() bool {
	return !d.Endpoint.RateLimit.IsZero() && d.Effective != d.Endpoint.RateLimit
}

// policyOption is a retry policy as the console offers it: its name
// and a one-line summary ("8 attempts within 28 h").
type policyOption struct {
	Name    string
	Summary string
	Known   bool // false: the configuration no longer has it, and it is followed as standard
}

// policyOptions returns the server's retry policies, standard first, the
// others by name.
func (s *server) policyOptions() []policyOption {
	ps := s.svc.RetryPolicies()
	names := slices.Sorted(maps.Keys(ps))
	out := []policyOption{{Name: engine.StandardRetryPolicy, Summary: ps[engine.StandardRetryPolicy].Summary(), Known: true}}
	for _, name := range names {
		if name != engine.StandardRetryPolicy {
			out = append(out, policyOption{Name: name, Summary: ps[name].Summary(), Known: true})
		}
	}
	return out
}

// policyOption returns the option of the policy named name ("":
// standard), Known false when the configuration no longer has it (its
// summary is then the standard policy's, which it follows).
func (s *server) policyOption(name engine.RetryPolicyName) policyOption {
	p, known := s.svc.RetryPolicy(name)
	shown, _ := name.MarshalText()
	return policyOption{Name: string(shown), Summary: p.Summary(), Known: known}
}

// LastReveal is the endpoint's latest secret reveal; zero when none.
func (d editEndpointData) LastReveal() engine.SecretReveal {
	if n := len(d.Endpoint.SecretReveals); n > 0 {
		return d.Endpoint.SecretReveals[n-1]
	}
	return engine.SecretReveal{}
}

// MaxChannels is how many channels an endpoint's filter may hold.
func (editEndpointData) MaxChannels() int { return engine.MaxChannels }

// MaxReveals is how many reveals an endpoint keeps.
func (editEndpointData) MaxReveals() int { return engine.MaxSecretReveals }

// RevealsKept reports whether the endpoint keeps as many reveals as it
// may (engine.MaxSecretReveals): older ones may have been dropped, so
// the count is a lower bound.
func (d editEndpointData) RevealsKept() bool {
	return len(d.Endpoint.SecretReveals) >= engine.MaxSecretReveals
}

// handleEditEndpointPage shows an endpoint's form: URL, description,
// subscribed types from the catalogue, ordering, on_dead and custom
// headers (masked); its test event, secret and delete forms.
func (s *server) handleEditEndpointPage(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	ep, err := s.svc.Endpoint(r.Context(), v.tenant.ID, ps.ByName("id"))
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	s.renderEndpointPage(w, r, v, ep, nil)
}

// handleConsoleReveal reveals an endpoint's secrets, as POST
// …/secret/reveal does (recorded by the session's principal, logged), and
// shows them on the endpoint's page, this answer only (no-store, like
// every console page; a reload asks again).
func (s *server) handleConsoleReveal(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	res, err := s.revealSecret(r.Context(), v.tenant.ID, ps.ByName("id"), v.p.name)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	s.renderEndpointPage(w, r, v, res.Endpoint, &res)
}

// renderEndpointPage renders ep's page, with revealed's keys when set.
func (s *server) renderEndpointPage(w http.ResponseWriter, r *http.Request, v *visit, ep engine.Endpoint, revealed *engine.RevealedSecret) {
	types, err := s.svc.EventTypes(r.Context())
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	data := editEndpointData{Endpoint: ep, Types: types, Chosen: map[string]bool{}, Revealed: revealed,
		Policies: s.policyOptions(), TenantPolicy: s.policyOption(v.tenant.RetryPolicy),
		BackfillSince: formTime(time.Now().Add(-24 * time.Hour).Truncate(time.Minute)), Effective: s.svc.EffectiveRateLimit(ep)}
	for _, t := range ep.EventTypes {
		data.Chosen[t] = true
	}
	data.All = data.Chosen[engine.AllEventTypes]
	for _, et := range types {
		if ep.Subscribes(et.Name) && et.Status != engine.EventTypeArchived {
			data.TestTypes = append(data.TestTypes, et)
		}
	}
	if et, err := engine.TestEventType(ep, types, ""); err == nil {
		data.TestDefault = et.Name
	}
	p := s.newPage(v, "Edit endpoint", "endpoints")
	p.Notice = notice(r)
	p.Data = data
	s.render(w, r, http.StatusOK, "endpoint", p)
}

// handleConsoleUpdateEndpoint saves the endpoint form, as PATCH
// …/endpoints/{id} would; its custom headers as a merge (headersForm).
func (s *server) handleConsoleUpdateEndpoint(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	u, desc, types := endpointForm(r)
	ordering, onDead := engine.Ordering(r.PostForm.Get("ordering")), engine.OnDead(r.PostForm.Get("on_dead"))
	if ordering == "none" {
		ordering = engine.OrderingNone
	}
	if onDead == "skip" {
		onDead = engine.OnDeadSkip
	}
	channels := channelsForm(r)
	policy := r.PostForm.Get("retry_policy") // "": the tenant's
	limit, err := rateLimitForm(r)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	patch := engine.EndpointPatch{URL: &u, Description: &desc, EventTypes: &types, Ordering: &ordering, OnDead: &onDead, Channels: &channels, RetryPolicy: &policy,
		RateLimit: engine.RateLimitPatch{Set: true, Limit: limit}} // empty fields: no limit
	if !v.p.portal { // the portal has no such box: a customer's save leaves it as it is
		send := r.PostForm.Get("send_traceparent") == "yes"
		patch.SendTraceparent = &send
	}
	set, remove, err := headersForm(r)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	if len(set) > 0 || len(remove) > 0 { // a merge: the headers not named stay
		patch.Headers = make(map[string]*string, len(set)+len(remove))
		for _, name := range remove {
			patch.Headers[name] = nil
		}
		for name, value := range set { // a header removed and set again is set
			patch.Headers[name] = &value
		}
	}
	if _, err := s.svc.UpdateEndpoint(r.Context(), v.tenant.ID, ps.ByName("id"), patch); err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	redirectNotice(w, r, tenantPath(v.tenant.ID, "endpoints"), "endpoint-updated", -1)
}

// handleConsoleDisable disables an endpoint: its deliveries are held.
func (s *server) handleConsoleDisable(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	if _, _, err := s.svc.SetEndpointEnabled(r.Context(), v.tenant.ID, ps.ByName("id"), false, false, v.p.name); err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	redirectNotice(w, r, tenantPath(v.tenant.ID, "endpoints"), "disabled", -1)
}

// handleConsoleDeleteEndpoint deletes an endpoint once the form's
// confirm box says the user read what it does (confirm=yes): without it,
// nothing changes. DELETE …/endpoints/{id} in the API needs no such box.
func (s *server) handleConsoleDeleteEndpoint(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	if r.PostForm.Get("confirm") != "yes" {
		s.consoleError(w, r, v, engine.Errorf(engine.CodeInvalidField, "confirm", "tick the box to confirm that the endpoint and what it has not delivered go"))
		return
	}
	if err := s.svc.DeleteEndpoint(r.Context(), v.tenant.ID, ps.ByName("id")); err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	redirectNotice(w, r, tenantPath(v.tenant.ID, "endpoints"), "endpoint-deleted", -1)
}

// handleConsoleEnable enables an endpoint. With deliver_held=1 its held
// deliveries are sent now ("Enable and deliver held"); otherwise they are
// dead-lettered ("Enable from now on").
func (s *server) handleConsoleEnable(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	var deliverHeld bool
	switch r.PostForm.Get("deliver_held") {
	case "1":
		deliverHeld = true
	case "0":
	default:
		s.consoleError(w, r, v, engine.Errorf(engine.CodeInvalidField, "deliver_held", "choose whether to deliver the held deliveries"))
		return
	}
	_, n, err := s.svc.SetEndpointEnabled(r.Context(), v.tenant.ID, ps.ByName("id"), true, deliverHeld, v.p.name)
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	m := "enabled-new"
	if deliverHeld {
		m = "enabled-held"
	}
	redirectNotice(w, r, tenantPath(v.tenant.ID, "endpoints"), m, n)
}

// handleConsoleTestEvent sends a test event to an endpoint (form field
// type: a catalogue type it subscribes to; "": the API's default), as
// POST …/endpoints/{id}/test-events would, and shows its delivery.
func (s *server) handleConsoleTestEvent(w http.ResponseWriter, r *http.Request, ps httprouter.Params, v *visit) {
	res, err := s.svc.SendTestEvent(r.Context(), v.tenant.ID, ps.ByName("id"), engine.TestEventInput{Type: r.PostForm.Get("type")})
	if err != nil {
		s.consoleError(w, r, v, err)
		return
	}
	if len(res.Deliveries) == 0 { // the endpoint changed its types between the check and the commit
		redirectNotice(w, r, tenantPath(v.tenant.ID, "events", res.Event.ID), "test-sent", -1)
		return
	}
	redirectNotice(w, r, tenantPath(v.tenant.ID, "deliveries", res.Deliveries[0].ID), "test-sent", -1)
}
