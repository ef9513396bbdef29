package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/webhookd/webhookd/client"
)

// ledger is what a test acknowledged, kept apart from what webhookd says:
// every event that got a 202, with the endpoints its tenant had
// subscribed to its type, and each delivery as the test last read it. Its
// audit says where each acknowledged event must be: delivered, dead,
// paused, waiting, pending, or gone by a policy the test can name
// (retention, its tenant's deletion); never silently gone.
type ledger struct {
	succeeded, dead time.Duration // [retention]
	// slack is how much earlier than its retention ends an event may be
	// seen gone: the test's reading of when a delivery finished (its
	// receiver's 2xx) comes a moment before webhookd records it.
	slack time.Duration

	mu     sync.Mutex
	events map[string]*ackedEvent
	order  []*ackedEvent
	seen   map[string]seenDelivery // by delivery ID
	died   map[string]bool         // deliveries ever seen dead
	listed map[string]time.Time    // event ID → when a delivery of it was last read
}

// ackedEvent is one event that got a 202.
type ackedEvent struct {
	id, tenant, typ string
	acked           time.Time
	// created is the event's created as the 202 gave it: when its ingest
	// began, which retention reads for an event without deliveries (an
	// ingest that waited for a lock commits an event older than its 202).
	created time.Time
	// endpoints are the endpoints subscribed to typ when it was sent, by
	// ID, each with its receiver.
	endpoints map[string]*eventReceiver
	// deliveries are the 202's, by endpoint ID.
	deliveries map[string]string
	// tenantDeleted: its tenant was deleted after it was acknowledged.
	tenantDeleted bool
}

// seenDelivery is a delivery as the test last read it, and when.
type seenDelivery struct {
	client.Delivery
	at time.Time
}

func newLedger(succeeded, dead, slack time.Duration) *ledger {
	return &ledger{succeeded: succeeded, dead: dead, slack: slack, events: map[string]*ackedEvent{}, seen: map[string]seenDelivery{}, died: map[string]bool{}, listed: map[string]time.Time{}}
}

// ack records the 202 res of an ingest to tenant of typ, whose subscribed
// endpoints were endpoints (ID → receiver); it returns a problem when the
// 202 did not name one delivery for each of them.
func (l *ledger) ack(tenant, typ string, res client.IngestResult, endpoints map[string]*eventReceiver) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.events[res.ID]; ok {
		return fmt.Sprintf("event %s acknowledged twice as new (a second 202 without Idempotent-Replayed)", res.ID)
	}
	ev := &ackedEvent{id: res.ID, tenant: tenant, typ: typ, acked: time.Now(), created: res.Created, endpoints: endpoints, deliveries: map[string]string{}}
	for _, d := range res.Deliveries {
		ev.deliveries[d.EndpointID] = d.ID
	}
	l.events[res.ID] = ev
	l.order = append(l.order, ev)
	if len(ev.deliveries) != len(res.Deliveries) || !sameKeys(ev.deliveries, endpoints) {
		return fmt.Sprintf("event %s of %s (%s): the 202 named deliveries to %v, the subscribed endpoints are %v", res.ID, tenant, typ, keys(ev.deliveries), keys(endpoints))
	}
	return ""
}

// tenantDeleted marks every event of tenant acknowledged so far as gone
// with it.
func (l *ledger) tenantDeleted(tenant string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range l.order {
		if ev.tenant == tenant {
			ev.tenantDeleted = true
		}
	}
}

// observe records deliveries as read at at.
func (l *ledger) observe(ds []client.Delivery, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range ds {
		l.seen[d.ID] = seenDelivery{d, at}
		l.listed[d.EventID] = at
		if d.State == client.StateDead {
			l.died[d.ID] = true
		}
	}
}

// lastListed returns when a delivery of event id was last read.
func (l *ledger) lastListed(id string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.listed[id]
	return t, ok
}

// sawDead reports whether delivery id was ever seen dead.
func (l *ledger) sawDead(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.died[id]
}

// sawDeadOf reports whether a delivery of tenant was ever seen dead.
func (l *ledger) sawDeadOf(tenant string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.died {
		if l.seen[id].Tenant == tenant {
			return true
		}
	}
	return false
}

// diedAt returns the deliveries to endpoint ever seen dead.
func (l *ledger) diedAt(endpoint string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for id := range l.died {
		if l.seen[id].EndpointID == endpoint {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// eventsOf returns the events of tenant of typ acknowledged as created
// in [since, until), by ID.
func (l *ledger) eventsOf(tenant, typ string, since, until time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, ev := range l.order {
		if ev.tenant == tenant && ev.typ == typ && !ev.created.Before(since) && ev.created.Before(until) {
			out = append(out, ev.id)
		}
	}
	return out
}

// expect adds delivery id of event to endpoint, made after the event's
// 202 (a backfill), to what the audit expects of the event; rc is the
// endpoint's receiver. It is a no-op for an event not acknowledged here.
func (l *ledger) expect(event, endpoint, id string, rc *eventReceiver) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ev := l.events[event]; ev != nil {
		ev.endpoints[endpoint] = rc
		ev.deliveries[endpoint] = id
	}
}

// tenantGone reports whether tenant was deleted after some of its events
// were acknowledged.
func (l *ledger) tenantGone(tenant string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range l.order {
		if ev.tenant == tenant && ev.tenantDeleted {
			return true
		}
	}
	return false
}

// acked returns the events acknowledged so far, in order.
func (l *ledger) acked() []*ackedEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.order)
}

// finding is one broken promise: which check, and what was seen.
type finding struct {
	check, detail string
}

// audit checks every acknowledged event against listed, the deliveries
// of every tenant read just before (at at), and returns what does not
// hold. gone reports whether an event that is not listed is really not
// there (GET of the event answers 404).
func (l *ledger) audit(listed map[string][]client.Delivery, at time.Time, gone func(tenant, id string) bool) []finding {
	byEvent := map[string][]client.Delivery{}
	for _, ds := range listed {
		for _, d := range ds {
			byEvent[d.EventID] = append(byEvent[d.EventID], d)
		}
	}
	var out []finding
	add := func(check, format string, args ...any) {
		out = append(out, finding{check, fmt.Sprintf(format, args...)})
	}
	for _, ev := range l.acked() {
		ds := byEvent[ev.id]
		if ev.tenantDeleted {
			if len(ds) > 0 {
				add("a deleted tenant's events are gone", "event %s of %s is still listed (%d deliveries)", ev.id, ev.tenant, len(ds))
			}
			continue
		}
		if len(ds) == 0 {
			// The GET, not the listing, saw it gone: retention may have
			// deleted it up to the GET's answer, however late that came.
			g := gone(ev.tenant, ev.id)
			seenGone := time.Now()
			switch {
			case !g && len(ev.endpoints) > 0:
				add("every acknowledged event is listed", "event %s of %s: GET finds it, the delivery listing does not", ev.id, ev.tenant)
			case !g: // stored, with no delivery to list
			default:
				if why := l.prunable(ev, seenGone); why != "" {
					if last, ok := l.lastListed(ev.id); ok {
						why += fmt.Sprintf(" (last listed %s before)", seenGone.Sub(last).Round(time.Millisecond))
					} else {
						why += " (never listed)"
					}
					add("no acknowledged event is silently gone", "event %s of %s (%s, acknowledged %s ago) is gone: %s", ev.id, ev.tenant, ev.typ, seenGone.Sub(ev.acked).Round(time.Millisecond), why)
				}
			}
			continue
		}
		byEndpoint := map[string]client.Delivery{}
		for _, d := range ds {
			byEndpoint[d.EndpointID] = d
		}
		for epID, rc := range ev.endpoints {
			d, ok := byEndpoint[epID]
			if !ok {
				add("every acknowledged event has each subscribed endpoint's delivery", "event %s of %s: no delivery to %s", ev.id, ev.tenant, epID)
				continue
			}
			switch d.State {
			case client.StateSucceeded:
				if _, ok := rc.acknowledged(ev.id); !ok {
					add("a succeeded delivery was received", "delivery %s (event %s) succeeded, but %s never answered it 2xx", d.ID, ev.id, rc.name)
				}
			case client.StateDead:
				if d.Reason == "" {
					add("a dead letter has a reason", "delivery %s: dead without a reason", d.ID)
				}
			case client.StatePending, client.StateDelivering, client.StateWaiting, client.StatePaused:
			default:
				add("a delivery's state is known", "delivery %s: state %q", d.ID, d.State)
			}
		}
	}
	return out
}

// prunable says why ev, not found at at, may not have been deleted by
// retention ("" when it may): each of its deliveries must have been
// seen finished, succeeded at least [retention] succeeded or dead at
// least [retention] dead before at, less the slack; an event without
// subscribers counts as succeeded when it was created, as the store
// reads it.
func (l *ledger) prunable(ev *ackedEvent, at time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(ev.endpoints) == 0 {
		if age := at.Sub(ev.created); age < l.succeeded-l.slack {
			return fmt.Sprintf("it had no subscriber and was %s old, under [retention] succeeded %s", age.Round(time.Millisecond), l.succeeded)
		}
		return ""
	}
	for epID, rc := range ev.endpoints {
		seen, ok := l.seen[ev.deliveries[epID]]
		switch {
		case ok && seen.State == client.StateSucceeded:
			if age := at.Sub(seen.Updated); age < l.succeeded-l.slack {
				return fmt.Sprintf("its delivery %s succeeded %s before, under [retention] succeeded %s", seen.ID, age.Round(time.Millisecond), l.succeeded)
			}
		case ok && seen.State == client.StateDead:
			if age := at.Sub(seen.DeadAt); age < l.dead-l.slack {
				return fmt.Sprintf("its delivery %s died %s before, under [retention] dead %s", seen.ID, age.Round(time.Millisecond), l.dead)
			}
		case ok:
			// Last seen unfinished: it may have finished since, which
			// only its receiver can say.
			acked, got := rc.acknowledged(ev.id)
			if !got {
				return fmt.Sprintf("its delivery %s was last seen %s (%s before) and %s never acknowledged it", seen.ID, seen.State, at.Sub(seen.at).Round(time.Millisecond), rc.name)
			}
			if age := at.Sub(acked); age < l.succeeded-l.slack {
				return fmt.Sprintf("its delivery %s was acknowledged by %s %s before, under [retention] succeeded %s", seen.ID, rc.name, age.Round(time.Millisecond), l.succeeded)
			}
		default:
			acked, got := rc.acknowledged(ev.id)
			if !got {
				return fmt.Sprintf("its delivery to %s was never seen, and %s never acknowledged it", epID, rc.name)
			}
			if age := at.Sub(acked); age < l.succeeded-l.slack {
				return fmt.Sprintf("%s acknowledged it %s before, under [retention] succeeded %s", rc.name, age.Round(time.Millisecond), l.succeeded)
			}
		}
	}
	return ""
}

// findings groups fs by check, each with its count and up to three
// examples, in a stable order.
func findings(fs []finding) []string {
	byCheck := map[string][]string{}
	for _, f := range fs {
		d := strings.ReplaceAll(f.detail, "\n", " | ")
		if len(d) > 500 {
			d = d[:500] + "…"
		}
		byCheck[f.check] = append(byCheck[f.check], d)
	}
	var out []string
	for check, details := range byCheck {
		ex := details[:min(3, len(details))]
		out = append(out, fmt.Sprintf("%s: %d broken, e.g. %s", check, len(details), strings.Join(ex, "; ")))
	}
	sort.Strings(out)
	return out
}

// keys returns m's keys, sorted.
func keys[K ~string, V any](m map[K]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, string(k))
	}
	sort.Strings(ks)
	return ks
}

func sameKeys[A, B any](a map[string]A, b map[string]B) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}
