package engine

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"
)

// DeliveryFilter selects deliveries of a tenant for a listing.
type DeliveryFilter struct {
	State      State       // "": any; StateDelivering matches pending
	Type       string      // event type; "": any
	EndpointID string      // "": any
	Status     StatusClass // the class of the last attempt's status; "": any
	Since      time.Time   // created at or after; zero: no bound
	Until      time.Time   // created before; zero: no bound
	Limit      int         // page size
	Cursor     string      // from a previous page; "": the newest

	Channel string // one of its event's channels; "": any
}

// StatusClass selects deliveries by what their last attempt got: the
// class of its HTTP status, or no response at all. The last attempt is
// the one whose status is the delivery's LastStatus: the latest that
// moved its state (an attempt of an older cycle, recorded after a
// replay, is only logged). A delivery never attempted is in no class; a
// replayed one is in its last attempt's until the new cycle's first.
type StatusClass string

const (
	Status2xx StatusClass = "2xx" // LastStatus 200–299
	Status3xx StatusClass = "3xx" // 300–399
	Status4xx StatusClass = "4xx" // 400–499
	Status5xx StatusClass = "5xx" // 500–599
	// StatusNone: attempted, and the last attempt read no status: a
	// timeout, a connection or TLS error, a refused target, or no request
	// made (the endpoint deleted, not verified in time).
	StatusNone StatusClass = "none"
)

// StatusClasses are the classes a filter may name, in the order a form
// lists them.
var StatusClasses = []StatusClass{Status2xx, Status3xx, Status4xx, Status5xx, StatusNone}

// Range returns the LastStatus values of the attempted deliveries in c:
// [lo, hi]; [0, 0] for StatusNone. ok is false when c is no class
// (including "").
func (c StatusClass) Range() (lo, hi int, ok bool) {
	switch c {
	case Status2xx, Status3xx, Status4xx, Status5xx:
		lo = int(c[0]-'0') * 100
		return lo, lo + 99, true
	case StatusNone:
		return 0, 0, true
	}
	return 0, 0, false
}

// Matches reports whether d is in class c; every delivery is in "".
func (c StatusClass) Matches(d Delivery) bool {
	if c == "" {
		return true
	}
	lo, hi, ok := c.Range()
	return ok && len(d.Attempts) > 0 && d.LastStatus >= lo && d.LastStatus <= hi
}

// Matches reports whether d passes f's state, type, endpoint, status
// class, time bounds and channel.
func (f DeliveryFilter) Matches(d Delivery) bool {
	state := f.State
	if state == StateDelivering {
		state = StatePending
	}
	return (state == "" || d.State == state) &&
		(f.Type == "" || d.EventType == f.Type) &&
		(f.EndpointID == "" || d.EndpointID == f.EndpointID) &&
		f.Status.Matches(d) &&
		(f.Since.IsZero() || !d.Created.Before(f.Since)) &&
		(f.Until.IsZero() || d.Created.Before(f.Until)) &&
		(f.Channel == "" || slices.Contains(d.Channels, f.Channel))
}

// EventFilter selects a tenant's events for the reconciliation feed.
type EventFilter struct {
	After string    // cursor from a previous page; "": from the start of the log
	Type  string    // "": any
	Since time.Time // created at or after; zero: no bound
	Limit int

	Channel string // one of its channels; "": any
}

// Matches reports whether ev passes f's type, time bound and channel.
func (f EventFilter) Matches(ev Event) bool {
	return (f.Type == "" || ev.Type == f.Type) &&
		(f.Since.IsZero() || !ev.Created.Before(f.Since)) &&
		(f.Channel == "" || slices.Contains(ev.Channels, f.Channel))
}

// EventDeliveries is an event with its deliveries.
type EventDeliveries struct {
	Event      Event
	Deliveries []Delivery
}

// ListDeliveries pages through tenant's deliveries, newest first.
func (s *Service) ListDeliveries(ctx context.Context, tenant string, f DeliveryFilter) ([]Delivery, string, error) {
	if _, err := s.Tenant(ctx, tenant); err != nil {
		return nil, "", err
	}
	switch f.State {
	case "", StatePending, StateDelivering, StateSucceeded, StateDead, StatePaused, StateWaiting:
	default:
		return nil, "", Errorf(CodeInvalidField, "state", "state must be pending, delivering, succeeded, dead, paused or waiting")
	}
	if f.EndpointID != "" && !validID(f.EndpointID) {
		return nil, "", Errorf(CodeInvalidField, "endpoint", "endpoint is not an endpoint id")
	}
	if _, _, ok := f.Status.Range(); !ok && f.Status != "" {
		return nil, "", Errorf(CodeInvalidField, "status", "status must be 2xx, 3xx, 4xx, 5xx or none (no response)")
	}
	// A well-formed type not in the catalogue is a filter like any other:
	// deliveries of a type removed from it since stay listable.
	if f.Type != "" {
		if err := ValidateEventType("type", f.Type); err != nil {
			return nil, "", err
		}
	}
	if f.Channel != "" {
		if err := ValidateChannel("channel", f.Channel); err != nil {
			return nil, "", err
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		// [Since, Until) holds nothing: bounds given the wrong way round,
		// which an empty page would not tell.
		return nil, "", Errorf(CodeInvalidField, "until", "until must be after since")
	}
	if f.Limit, _ = pageLimit(f.Limit); f.Limit == 0 {
		return nil, "", Errorf(CodeInvalidField, "limit", "limit must be from 1 to %d", MaxPageLimit)
	}
	if f.State == StateDelivering {
		return s.listDelivering(ctx, tenant, f)
	}
	if err := s.settled(ctx, tenant); err != nil {
		return nil, "", err
	}
	ds, next, err := s.store.ListDeliveries(ctx, tenant, f)
	if err != nil {
		return nil, "", err
	}
	for i := range ds {
		s.overlay(&ds[i])
	}
	return ds, next, nil
}

// listDelivering is ListDeliveries of the deliveries whose attempt is in
// flight here, StateDelivering: not a stored state, so not the store's
// to page. They are few (at most the dispatcher's workers and the
// outcomes waiting to be recorded), so they are all read and paged here,
// in the log's order, newest first, by (Sequence, ID); the cursor is the
// page's last one's place, and comes only when another follows.
func (s *Service) listDelivering(ctx context.Context, tenant string, f DeliveryFilter) ([]Delivery, string, error) {
	var after *Delivery // the cursor's place
	if f.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(f.Cursor)
		if err != nil || len(b) < 9 {
			return nil, "", InvalidCursor()
		}
		after = &Delivery{Sequence: binary.BigEndian.Uint64(b), ID: string(b[8:])}
	}
	newestFirst := func(a, b Delivery) int {
		if c := cmp.Compare(b.Sequence, a.Sequence); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	}
	var ids []string
	if s.disp != nil {
		ids = s.disp.InFlightIDs()
	}
	ds := []Delivery{}
	for _, id := range ids {
		d, err := s.store.Delivery(ctx, tenant, id)
		if ErrorCode(err) == CodeDeliveryNotFound {
			continue // another tenant's, or deleted
		}
		if err != nil {
			return nil, "", err
		}
		if !f.Matches(d) || after != nil && newestFirst(d, *after) <= 0 {
			continue
		}
		if s.overlay(&d); d.State == StateDelivering {
			ds = append(ds, d)
		}
	}
	slices.SortFunc(ds, newestFirst)
	if len(ds) <= f.Limit {
		return ds, "", nil
	}
	last := ds[f.Limit-1]
	return ds[:f.Limit], base64.RawURLEncoding.EncodeToString(append(binary.BigEndian.AppendUint64(nil, last.Sequence), last.ID...)), nil
}

// pageLimit returns limit, DefaultPageLimit for 0, or 0 when out of range.
func pageLimit(limit int) (int, bool) {
	switch {
	case limit == 0:
		return DefaultPageLimit, true
	case limit < 0 || limit > MaxPageLimit:
		return 0, false
	}
	return limit, true
}

// ListEvents is the reconciliation feed: tenant's events in log order.
func (s *Service) ListEvents(ctx context.Context, tenant string, f EventFilter) ([]Event, string, error) {
	if _, err := s.Tenant(ctx, tenant); err != nil {
		return nil, "", err
	}
	if f.Type != "" {
		if err := ValidateEventType("type", f.Type); err != nil {
			return nil, "", err
		}
	}
	if f.Channel != "" {
		if err := ValidateChannel("channel", f.Channel); err != nil {
			return nil, "", err
		}
	}
	if f.Limit, _ = pageLimit(f.Limit); f.Limit == 0 {
		return nil, "", Errorf(CodeInvalidField, "limit", "limit must be from 1 to %d", MaxPageLimit)
	}
	return s.store.ListEvents(ctx, tenant, f)
}

// replayBatch is how many dead letters one step of a range replay
// (replayStep) moves, in one transaction.
const replayBatch = 500

// timeRange checks the time range [since, until) of a request (a range
// replay, a backfill): since is required, until is now when zero and
// must be after since (CodeInvalidField naming since or until). It
// returns the range with until filled in.
func (s *Service) timeRange(since, until time.Time) (time.Time, time.Time, error) {
	if since.IsZero() {
		return since, until, Errorf(CodeInvalidField, "since", "since is required (RFC 3339)")
	}
	if until.IsZero() {
		until = s.now()
	}
	if !since.Before(until) {
		return since, until, Errorf(CodeInvalidField, "until", "until must be after since")
	}
	return since, until, nil
}

// Report is the delivery report over a tenant's last N events.
//
// Every delivery in it is in exactly one of seven buckets, so they sum to
// Deliveries (the check "every delivery is counted once" says whether
// they do): FirstAttemptSuccesses, RetrySuccesses, Replayed, Pending,
// Waiting, Paused and Dead. NewReport says which goes where.
type Report struct {
	Tenant                string  `json:"tenant,omitempty"`
	Events                int     `json:"events"`
	Deliveries            int     `json:"deliveries"`
	FirstAttemptSuccesses int     `json:"first_attempt_successes"`
	RetrySuccesses        int     `json:"retry_successes"`
	EffectiveDeliveryRate float64 `json:"effective_delivery_rate"` // (first + retry successes) / deliveries
	// Replayed counts the deliveries that succeeded only in a later
	// cycle than their first: after a replay, or a resume of a paused
	// one.
	Replayed int `json:"replayed"`
	// Pending counts the deliveries due or in flight, Waiting the ordered
	// ones waiting behind the head of their line, Paused those held for
	// their disabled endpoint, Dead the dead ones: each not delivered in
	// its first cycle (see NewReport).
	Pending int `json:"pending"`
	Waiting int `json:"waiting"`
	Paused  int `json:"paused"`
	Dead    int `json:"dead"`
	// DeadByReason splits Dead by reason; Blocking counts the dead ones
	// that hold their line (on_dead block), Skipped those their line
	// went on without (absent when zero).
	DeadByReason        map[string]int `json:"dead_by_reason"`
	Blocking            int            `json:"blocking,omitempty"`
	Skipped             int            `json:"skipped,omitempty"`
	DuplicateDeliveries int            `json:"duplicate_deliveries"`
	Target              float64        `json:"target"`
	MeetsTarget         bool           `json:"meets_target"`
	Checks              []ReportCheck  `json:"checks"`
}

// ReportCheck is one consistency check of the report.
type ReportCheck struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	Note string `json:"note,omitempty"`
}

// ReportTarget is the published goal: an effective delivery rate of 99%
// over the last 1000 events.
const ReportTarget = 0.99

// NewReport computes the report over events (with their deliveries).
//
// Counting is per delivery (one event to one endpoint), each in one
// bucket:
//
//   - its first cycle succeeded: a first-attempt success when the first
//     attempt did, else a retry success. Whatever happened after (a
//     replay of a delivered event, pending or dead again) does not move
//     it: it was delivered, and its later successes are duplicates.
//   - otherwise succeeded (in a later cycle: after a replay, or the
//     resume of a paused delivery): replayed.
//   - otherwise by its state now: pending (due or in flight), waiting,
//     paused or dead.
//
// A duplicate delivery is any successful attempt after the delivery's
// first success (a replay of a delivered event, or a lost
// acknowledgement). The effective delivery rate is (first-attempt + retry
// successes) / deliveries; an event with no subscriber has no delivery
// and does not count. The checks: every delivery is in one bucket (a
// state the report does not know is in none), every dead delivery has a
// reason, every cycle after the first has its replay record.
func NewReport(events []EventDeliveries) Report {
	r := Report{Events: len(events), DeadByReason: map[string]int{}, Target: ReportTarget}
	deadWithoutReason, replaysWithoutRecord := 0, 0
	for _, e := range events {
		for _, d := range e.Deliveries {
			r.Deliveries++
			successes, firstCycleAttempts, firstCycleSuccess := 0, 0, 0
			for _, a := range d.Attempts {
				if a.Cycle == 1 {
					firstCycleAttempts++
				}
				if a.Outcome == OutcomeSuccess {
					successes++
					if a.Cycle == 1 && firstCycleSuccess == 0 {
						firstCycleSuccess = firstCycleAttempts
					}
				}
			}
			if successes > 1 {
				r.DuplicateDeliveries += successes - 1
			}
			if d.State == StateDead && d.Reason == "" {
				deadWithoutReason++
			}
			if d.Cycle != 1+len(d.Replays) {
				replaysWithoutRecord++
			}
			switch {
			case firstCycleSuccess == 1:
				r.FirstAttemptSuccesses++
			case firstCycleSuccess > 1:
				r.RetrySuccesses++
			case d.State == StateSucceeded:
				r.Replayed++
			case d.State == StatePending, d.State == StateDelivering:
				r.Pending++
			case d.State == StateWaiting:
				r.Waiting++
			case d.State == StatePaused:
				r.Paused++
			case d.State == StateDead:
				r.Dead++
				switch {
				case d.Blocking():
					r.Blocking++
				case d.Line != "" && len(d.Skips) > 0:
					r.Skipped++
				}
				reason := d.Reason
				if reason == "" {
					reason = "(none)"
				}
				r.DeadByReason[shortReason(reason)]++
			}
		}
	}
	if r.Deliveries > 0 {
		r.EffectiveDeliveryRate = float64(r.FirstAttemptSuccesses+r.RetrySuccesses) / float64(r.Deliveries)
	} else {
		r.EffectiveDeliveryRate = 1
	}
	r.MeetsTarget = r.EffectiveDeliveryRate >= r.Target
	r.Checks = []ReportCheck{
		r.countedOnce(),
		{Name: "every dead letter has a reason", OK: deadWithoutReason == 0, Note: countNote(deadWithoutReason, "dead letters without a reason")},
		{Name: "every replay is recorded", OK: replaysWithoutRecord == 0, Note: countNote(replaysWithoutRecord, "deliveries whose cycles outnumber their replay records")},
	}
	return r
}

// countedOnce is the check that r's buckets sum to its deliveries.
func (r Report) countedOnce() ReportCheck {
	sum := r.FirstAttemptSuccesses + r.RetrySuccesses + r.Replayed + r.Pending + r.Waiting + r.Paused + r.Dead
	c := ReportCheck{Name: "every delivery is counted once", OK: sum == r.Deliveries}
	if !c.OK {
		c.Note = fmt.Sprintf("the buckets hold %d of %d deliveries", sum, r.Deliveries)
	}
	return c
}

// shortReason groups dead reasons: the part before the first ':' ("HTTP
// 410 Gone", "all 6 attempts failed", "endpoint deleted").
func shortReason(reason string) string {
	for i, c := range reason {
		if c == ':' || c == ';' {
			return reason[:i]
		}
	}
	return reason
}

func countNote(n int, what string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d %s", n, what)
}

// DefaultReportWindow is how many recent events a report covers by default.
const DefaultReportWindow = 1000

// MaxRecentEvents is the most events RecentEvents and Report read.
const MaxRecentEvents = 100000

// RecentEvents returns tenant's last n events (0: DefaultReportWindow),
// newest first, each with its deliveries (StateDelivering while in
// flight). Errors: CodeTenantNotFound; CodeInvalidField "last" for n
// outside 1..MaxRecentEvents.
func (s *Service) RecentEvents(ctx context.Context, tenant string, n int) ([]EventDeliveries, error) {
	if _, err := s.Tenant(ctx, tenant); err != nil {
		return nil, err
	}
	if n == 0 {
		n = DefaultReportWindow
	}
	if n < 1 || n > MaxRecentEvents {
		return nil, Errorf(CodeInvalidField, "last", "last must be from 1 to %d", MaxRecentEvents)
	}
	if err := s.settled(ctx, tenant); err != nil {
		return nil, err
	}
	events, err := s.store.RecentEvents(ctx, tenant, n)
	if err != nil {
		return nil, err
	}
	for i := range events {
		for j := range events[i].Deliveries {
			s.overlay(&events[i].Deliveries[j])
		}
	}
	return events, nil
}

// Report computes the delivery report over tenant's last n events
// (RecentEvents).
func (s *Service) Report(ctx context.Context, tenant string, n int) (Report, error) {
	events, err := s.RecentEvents(ctx, tenant, n)
	if err != nil {
		return Report{}, err
	}
	r := NewReport(events)
	r.Tenant = tenant
	return r, nil
}
