package e2e

// The lifecycle's catalogue and fan-out over the month: event types
// whose schema and status change while their events are still retried,
// dead-lettered and replayed, and a bbolt node that leaves every
// fan-out owed in some phases (so kill -9, compaction, backups and
// retention meet events whose deliveries are written after their 202).

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/webhookd/webhookd/client"
)

// order.paid's schema: loose from the month's start, tight (a ref
// required) from day 9.5 to 29.5. Every order.paid carries a ref from
// day 9.4 of a month, so none is refused; the ones of days 9 to 9.4 at
// initech fail with its receiver and are replayed on day 13, when the
// schema they were taken under is gone.
const (
	orderPaidLoose = `{"type":"object","required":["n","day"],"properties":{"n":{"type":"integer","minimum":0},"day":{"type":"string"},"ref":{"type":"string"}}}`
	orderPaidTight = `{"type":"object","required":["n","day","ref"],"properties":{"n":{"type":"integer","minimum":0},"day":{"type":"string"},"ref":{"type":"string","pattern":"^ref-[0-9]+$"}}}`
)

// Within a month (simulated days from its start).
const (
	refFrom      = 9.4  // order.paid carries a ref from then on
	tightFrom    = 9.5  // order.paid's schema requires it
	looseFrom    = 29.5 // and no longer, for the next month
	deprecatedAt = 14.0 // audit.logged is deprecated
	archivedAt   = 26.0 // audit.logged is archived: its ingest refused
	activeAt     = 29.6 // and active again, for the next month
)

// catalogueSteps are the catalogue's changes of the month starting at
// day o.
func (lc *lifecycle) catalogueSteps(o float64, add func(float64, string, func())) {
	add(o+tightFrom, "order.paid's schema requires a ref", func() { lc.setOrderPaidSchema(true) })
	add(o+looseFrom, "order.paid's schema no longer requires a ref", func() { lc.setOrderPaidSchema(false) })
	add(o+deprecatedAt, "audit.logged is deprecated", func() { lc.setAuditStatus(client.EventTypeDeprecated) })
	add(o+archivedAt, "audit.logged is archived", func() { lc.setAuditStatus(client.EventTypeArchived) })
	add(o+activeAt, "audit.logged is active again", func() { lc.setAuditStatus(client.EventTypeActive) })
}

// putCatalogue puts the scenario's event types at setup: order.paid
// with its loose schema.
func (lc *lifecycle) putCatalogue() {
	for _, typ := range lifecycleTypes {
		in := client.EventTypeInput{Description: "lifecycle " + typ}
		if typ == "order.paid" {
			in.Schema = json.RawMessage(orderPaidLoose)
		}
		if _, _, err := lc.api.PutEventTypeWith(lc.ctx, typ, in); err != nil {
			lc.t.Fatal(err)
		}
	}
}

// setOrderPaidSchema puts order.paid's tight or loose schema. Once it is
// tight, an order.paid without a ref is refused with 422 naming the
// member at fault, and an idempotent repeat of one taken before is
// still answered with its event (repeatRecent judges those).
func (lc *lifecycle) setOrderPaidSchema(tight bool) {
	s := orderPaidLoose
	if tight {
		s = orderPaidTight
	}
	if _, _, err := lc.api.PutEventTypeWith(lc.ctx, "order.paid", client.EventTypeInput{Description: "lifecycle order.paid", Schema: json.RawMessage(s)}); err != nil {
		lc.note("an event type's schema can change while its events are delivered", "%v", err)
		return
	}
	lc.tight = tight
	if !tight {
		return
	}
	acme := lc.tenants["acme"]
	_, err := lc.api.Ingest(lc.ctx, acme.id, client.EventInput{Type: "order.paid", Data: map[string]any{"n": 1, "day": "old"}})
	var p *client.Problem
	switch {
	case errors.As(err, &p) && (p.Status == 429 || p.Status == 503):
	case !errors.As(err, &p) || p.Status != 422 || p.Code != client.CodeSchemaMismatch || p.Field != "data":
		lc.note("an event that does not match its type's schema is refused, naming the member at fault", "order.paid without a ref: %v", err)
	default:
		lc.stats["refused by a schema"]++
	}
}

// setAuditStatus sets audit.logged's status. Archived, its ingest is
// refused (traffic judges that); deprecated, it is taken as before.
func (lc *lifecycle) setAuditStatus(s client.EventTypeStatus) {
	if _, _, err := lc.api.PutEventTypeWith(lc.ctx, "audit.logged", client.EventTypeInput{Description: "lifecycle audit.logged", Status: s}); err != nil {
		lc.note("an event type can be deprecated and archived", "%s: %v", s, err)
		return
	}
	lc.auditStatus = s
	for et, err := range lc.api.EventTypes(lc.ctx, client.ListOptions{}) {
		if err != nil {
			lc.note("an event type can be deprecated and archived", "list the catalogue: %v", err)
			return
		}
		if et.Name == "audit.logged" && et.Status != s && !(s == client.EventTypeActive && et.Status == "") {
			lc.note("an event type can be deprecated and archived", "the catalogue lists audit.logged %q after it was set %q", et.Status, s)
		}
	}
}

// sendAudit sends acme an audit.logged: taken unless the type is
// archived, when the refusal must say so and store nothing.
func (lc *lifecycle) sendAudit() {
	acme := lc.tenants["acme"]
	if lc.auditStatus != client.EventTypeArchived {
		lc.send(acme, lc.event(acme, "audit.logged"))
		if lc.auditStatus == client.EventTypeDeprecated {
			lc.stats["deprecated events taken"]++
		}
		return
	}
	_, err := lc.api.Ingest(lc.ctx, acme.id, lc.event(acme, "audit.logged"))
	var p *client.Problem
	switch {
	case errors.As(err, &p) && (p.Status == 429 || p.Status == 503):
	case !errors.As(err, &p) || p.Status != 422 || p.Code != client.CodeEventTypeArchived:
		lc.note("an archived event type's ingest is refused", "audit.logged: %v", err)
	default:
		lc.stats["refused as archived"]++
	}
}

// withRef gives data of typ its ref from day refFrom of each month.
func (lc *lifecycle) withRef(typ string, n int, data map[string]any) {
	if typ == "order.paid" && math.Mod(lc.clock.now(), 30) >= refFrom {
		data["ref"] = fmt.Sprintf("ref-%d", n)
	}
}

// lacksRef reports whether in is an order.paid without a ref: one the
// tight schema refuses.
func lacksRef(in client.EventInput) bool {
	data, ok := in.Data.(map[string]any)
	_, hasRef := data["ref"]
	return in.Type == "order.paid" && ok && !hasRef
}

// refusedNow reports whether in, taken earlier, would be refused now: an
// order.paid without a ref under the tight schema, an audit.logged once
// archived (repeatExpired sends such an input again as a new event).
func (lc *lifecycle) refusedNow(in client.EventInput) bool {
	return lc.tight && lacksRef(in) || in.Type == "audit.logged" && lc.auditStatus == client.EventTypeArchived
}

// noteUnderOldSchema keeps the order.paid events without a ref initech
// took after its receiver went down: they are dead-lettered and replayed
// under the tight schema, and must reach it all the same.
func (lc *lifecycle) noteUnderOldSchema(tn *tenant, in client.EventInput, id string) {
	if tn.name != "initech" || !lacksRef(in) {
		return
	}
	if d := math.Mod(lc.clock.now(), 30); d >= initechOutages[0].from && d < tightFrom {
		lc.oldSchema[id] = lc.clock.now()
	}
}

// checkOldSchema checks, once initech's dead letters were replayed, that
// every event it took under the loose schema reached its receiver.
func (lc *lifecycle) checkOldSchema(day float64) {
	tn := lc.tenants["initech"]
	ep := tn.endpoint("initech-i")
	if ep == nil {
		return
	}
	got := ep.rc.received()
	for id, at := range lc.oldSchema {
		if day < at-math.Mod(at, 30)+13.5 {
			continue // not replayed yet
		}
		if _, ok := got[id]; !ok {
			lc.note("an event taken under a schema since tightened is still delivered and replayed", "initech's order.paid %s of day %.2f never reached its receiver", id, at)
			continue
		}
		lc.stats["replayed under a tightened schema"]++
		delete(lc.oldSchema, id)
	}
	if math.Mod(day, 30) >= 18 && lc.stats["replayed under a tightened schema"] == 0 && len(lc.oldSchema) == 0 {
		lc.note("an event taken under a schema since tightened is still delivered and replayed", "initech took no order.paid without a ref during its outage: the scenario no longer tries it")
	}
}

// setOwed makes the next start of a bbolt node leave every fan-out owed
// (owed_fanout_above = 0) or only a busy commit's (the default). The
// phases that start on days 4, 12 and 24 owe all of them: their ends
// kill -9 the node (8, 18, 30), compact the file (8) and take hot
// backups, while deliveries may still be owed.
func (lc *lifecycle) setOwed(day float64) {
	if lc.st.driver == postgreSQL {
		return // the driver writes an event's deliveries with it (docs/performance.md)
	}
	d := math.Mod(day, 30)
	owe := d == 4 || d == 12 || d == 24
	if owe {
		lc.cfg.set("storage", "owed_fanout_above", 0)
		lc.stats["phases with every fan-out owed"]++
	} else {
		lc.cfg.set("storage", "owed_fanout_above", 16)
	}
	lc.cfg.write(lc.t, lc.configPath())
}
