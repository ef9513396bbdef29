package storage

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
)

// checkInvariants walks the records and indexes and reports where they
// disagree (at most maxCheckErrors problems):
//
//   - a delivery is in retry_index iff it is pending, under
//     (NextAttemptAt, ID) with its endpoint ID as the value;
//   - a delivery is in dead_letters iff it is dead, under
//     (tenant, DeadAt, ID);
//   - every delivery is listed in tenant_deliveries under its event's
//     tenant and place in the log, and every entry there names a stored
//     delivery of that event;
//   - every event decodes and event_ids maps its ID to its sequence;
//     its ingest's trace, when it has one, is a W3C traceparent
//     (engine.ValidTraceParent);
//   - a delivery has its event's channels and deliver_at (the time
//     its first attempt waits for); an event has at most one
//     delivery to an endpoint (ingest makes one, a backfill one where
//     there is none); a delivery a backfill made is not a test event's;
//   - a tenant's numbered events have Sequences that rise in log order,
//     each at most the tenant's tenant_sequences value (retention and
//     the purge delete events anywhere in the log: the Sequences of
//     those left may have gaps);
//   - every idempotency record has exactly its idempotency_expiry entry;
//   - every access token is in tenant_access_tokens under its tenant and
//     ID with its hash, and nothing else is;
//   - every task is in the indexes its tenant and state put it in, and
//     nothing else is (checkTasks);
//   - a delivery is in line_waiting iff it is waiting, and its line then
//     has a head; it is in line_heads, as its line's head, iff it holds
//     its line (engine.HoldsLine), so a line has at most one head;
//   - each tenant's held counts, and every tenant's, are its deliveries
//     in line_waiting, paused and (dead and blocking) line_heads
//     (checkHeld);
//   - a delivery's retry policy, when it names one, is a policy name
//     (engine.ValidRetryPolicyName; whether the configuration has it is
//     the dispatcher's to say);
//   - every owed fan-out's plan decodes, under an event of the log
//     that has no delivery stored yet, and names no stored delivery
//     (checkFanOuts);
//   - every endpoint decodes, its source is one the engine writes
//     (engine.CheckStoredSource), and its custom headers keep their
//     rules and are sealed iff the file has a key (checkEndpointHeaders).
func checkInvariants(tx *bolt.Tx) []error {
	var errs []error
	report := func(format string, args ...any) bool {
		errs = append(errs, fmt.Errorf("storage: check: "+format, args...))
		return len(errs) < maxCheckErrors
	}

	checkFanOuts(tx, report)
	if len(errs) >= maxCheckErrors {
		return errs
	}

	// Events and their ID index.
	ids := tx.Bucket(bucketEventIDs)
	nEvents := 0
	lastSequence := map[string]uint64{} // tenant → the Sequence of its last numbered event so far
	c := tx.Bucket(bucketEvents).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		nEvents++
		ev, err := decodeEvent(v)
		if err != nil {
			if !report("event %x: %v", k, err) {
				return errs
			}
			continue
		}
		if sv := ids.Get([]byte(ev.ID)); !bytes.Equal(sv, k) {
			if !report("event %s: event_ids has %x, want %x", ev.ID, sv, k) {
				return errs
			}
		}
		if ev.IngestTrace != "" && !engine.ValidTraceParent(ev.IngestTrace) {
			if !report("event %s: ingest trace %q is not a traceparent", ev.ID, ev.IngestTrace) {
				return errs
			}
		}
		if ev.Sequence != 0 {
			prev, seen := lastSequence[ev.TenantID]
			if seen && ev.Sequence <= prev {
				if !report("event %s of %s: Sequence %d after %d, not above it", ev.ID, ev.TenantID, ev.Sequence, prev) {
					return errs
				}
			}
			lastSequence[ev.TenantID] = ev.Sequence
			var counter uint64
			if v := tx.Bucket(bucketTenantSequences).Get([]byte(ev.TenantID)); v != nil {
				counter, _ = decodeSeq(v)
			}
			if ev.Sequence > counter {
				if !report("event %s of %s: Sequence %d above the tenant's last, %d", ev.ID, ev.TenantID, ev.Sequence, counter) {
					return errs
				}
			}
		}
		seq, _ := decodeSeq(k)
		if tx.Bucket(bucketTenantEvents).Get(tenantEventKey(ev.TenantID, seq)) == nil {
			if !report("event %s: not in tenant_events", ev.ID) {
				return errs
			}
		}
		endpoints := map[string]bool{}
		for _, id := range deliveryIDsOf(tx, ev.TenantID, seq) {
			v := tx.Bucket(bucketDeliveries).Get([]byte(id))
			if v == nil {
				if !report("tenant_deliveries lists delivery %s under event %s, but there is no such delivery", id, ev.ID) {
					return errs
				}
				continue
			}
			d, err := decodeDelivery(v)
			switch {
			case err != nil:
			case d.EventID != ev.ID:
				if !report("tenant_deliveries lists delivery %s under event %s, but it is of event %s", id, ev.ID, d.EventID) {
					return errs
				}
			case !slices.Equal(d.Channels, ev.Channels):
				if !report("delivery %s has channels %q, its event %s %q", id, d.Channels, ev.ID, ev.Channels) {
					return errs
				}
			case !d.DeliverAt.Equal(ev.DeliverAt):
				if !report("delivery %s has deliver_at %s, its event %s %s", id, fmtTime(d.DeliverAt), ev.ID, fmtTime(ev.DeliverAt)) {
					return errs
				}
			case endpoints[d.EndpointID]:
				if !report("event %s has more than one delivery to endpoint %s (one is %s)", ev.ID, d.EndpointID, id) {
					return errs
				}
			case d.Backfill != nil && d.Test:
				if !report("delivery %s of test event %s was made by a backfill", id, ev.ID) {
					return errs
				}
			}
			if err == nil {
				endpoints[d.EndpointID] = true
			}
		}
	}
	if n := tx.Bucket(bucketTenantEvents).Stats().KeyN; n != nEvents {
		if !report("%d events but %d tenant_events entries", nEvents, n) {
			return errs
		}
	}
	if n := ids.Stats().KeyN; n != nEvents {
		if !report("%d events but %d event_ids entries", nEvents, n) {
			return errs
		}
	}

	// Deliveries against the retry index, dead letters and event listing.
	retry := tx.Bucket(bucketRetryIndex)
	dead := tx.Bucket(bucketDeadLetters)
	byTenant := tx.Bucket(bucketTenantDeliveries)
	heads, waiting := tx.Bucket(bucketLineHeads), tx.Bucket(bucketLineWaiting)
	var nPending, nDead, nPaused, nDeliveries, nWaiting, nHeads int
	c = tx.Bucket(bucketDeliveries).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		nDeliveries++
		d, err := decodeDelivery(v)
		if err != nil {
			if !report("delivery %q: %v", k, err) {
				return errs
			}
			continue
		}
		if seq := ids.Get([]byte(d.EventID)); seq == nil {
			if !report("delivery %s: its event %s is not in event_ids", d.ID, d.EventID) {
				return errs
			}
		} else if s, err := decodeSeq(seq); err != nil || byTenant.Get(tenantDeliveryKey(d.TenantID, s, d.ID)) == nil {
			if !report("delivery %s: not listed in tenant_deliveries under event %s", d.ID, d.EventID) {
				return errs
			}
		}
		if d.RetryPolicy != "" && !engine.ValidRetryPolicyName(string(d.RetryPolicy)) {
			if !report("delivery %s: retry policy %q is not a policy name", d.ID, d.RetryPolicy) {
				return errs
			}
		}
		if engine.HoldsLine(d) {
			nHeads++
			if h := heads.Get(lineKey(d.EndpointID, d.Line)); string(h) != d.ID {
				if !report("delivery %s: holds line %q of %s, but line_heads has %q", d.ID, d.Line, d.EndpointID, h) {
					return errs
				}
			}
		}
		switch d.State {
		case engine.StateWaiting:
			nWaiting++
			if waiting.Get(lineWaitingKey(d.EndpointID, d.Line, d.Sequence, d.ID)) == nil {
				if !report("delivery %s: waiting but not in line_waiting", d.ID) {
					return errs
				}
			}
			if h := heads.Get(lineKey(d.EndpointID, d.Line)); h == nil || string(h) == d.ID {
				if !report("delivery %s: waiting in line %q of %s, whose head is %q", d.ID, d.Line, d.EndpointID, h) {
					return errs
				}
			}
		case engine.StatePending:
			nPending++
			if d.NextAttemptAt.IsZero() {
				if !report("delivery %s: pending without NextAttemptAt", d.ID) {
					return errs
				}
			}
			if ep := retry.Get(retryKey(d.NextAttemptAt, d.ID)); ep == nil || string(ep) != d.EndpointID {
				if !report("delivery %s: pending but retry index at %s has %q", d.ID, d.NextAttemptAt, ep) {
					return errs
				}
			}
		case engine.StatePaused:
			nPaused++
			if tx.Bucket(bucketPaused).Get(pausedKey(d.TenantID, d.EndpointID, d.ID)) == nil {
				if !report("delivery %s: paused but not in the paused index", d.ID) {
					return errs
				}
			}
		case engine.StateDead:
			nDead++
			if dead.Get(deadLetterKey(d.TenantID, d.DeadAt, d.ID)) == nil {
				if !report("delivery %s: dead but not in the dead letters at %s", d.ID, d.DeadAt) {
					return errs
				}
			}
		}
	}
	if n := retry.Stats().KeyN; n != nPending {
		if !report("%d pending deliveries but %d retry index entries", nPending, n) {
			return errs
		}
	}
	if n := waiting.Stats().KeyN; n != nWaiting {
		if !report("%d waiting deliveries but %d line_waiting entries", nWaiting, n) {
			return errs
		}
	}
	if n := heads.Stats().KeyN; n != nHeads {
		if !report("%d deliveries hold a line but %d line_heads entries", nHeads, n) {
			return errs
		}
	}
	if n := tx.Bucket(bucketPaused).Stats().KeyN; n != nPaused {
		if !report("%d paused deliveries but %d paused index entries", nPaused, n) {
			return errs
		}
	}
	if n := dead.Stats().KeyN; n != nDead {
		if !report("%d dead deliveries but %d dead letters", nDead, n) {
			return errs
		}
	}
	if n := tx.Bucket(bucketTenantDeliveries).Stats().KeyN; n != nDeliveries {
		if !report("%d deliveries but %d tenant_deliveries entries", nDeliveries, n) {
			return errs
		}
	}

	// Idempotency records against their expiry index.
	expiry := tx.Bucket(bucketIdempotencyIndex)
	nIdem := 0
	c = tx.Bucket(bucketIdempotency).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		nIdem++
		rec, err := decodeIdempotency(v)
		if err != nil {
			if !report("idempotency record %q: %v", k, err) {
				return errs
			}
			continue
		}
		i := bytes.IndexByte(k, sep)
		if i < 1 {
			if !report("idempotency key %q: no tenant", k) {
				return errs
			}
			continue
		}
		if expiry.Get(expiryKey(rec.Expires, string(k[:i]), string(k[i+1:]))) == nil {
			if !report("idempotency record %q: no expiry entry at %s", k, rec.Expires) {
				return errs
			}
		}
	}
	if n := expiry.Stats().KeyN; n != nIdem {
		if !report("%d idempotency records but %d expiry entries", nIdem, n) {
			return errs
		}
	}

	// Access tokens against their tenant index (tokens.go).
	checkAccessTokens(tx, report)
	// Tasks against their indexes (tasks.go).
	if len(errs) < maxCheckErrors {
		checkTasks(tx, report)
	}

	// Held counts against the indexes (held.go).
	if len(errs) < maxCheckErrors {
		checkHeld(tx, report)
	}
	if len(errs) < maxCheckErrors {
		checkEndpoints(tx, report)
	}
	if len(errs) < maxCheckErrors {
		checkEventTypes(tx, report)
	}
	return errs
}

// checkEndpoints reports an endpoint whose custom headers break their
// rules (engine.CheckStoredHeaders: canonical, unreserved names, in
// order, within the count) or the file's key: every value sealed when
// the meta bucket names a key, none when it does not; and one whose rate
// limit the API would refuse (engine.CheckStoredRateLimit), or a source
// the engine never writes (engine.CheckStoredSource). It never
// shows a header's value.
func checkEndpoints(tx *bolt.Tx, report func(string, ...any) bool) {
	keyed := tx.Bucket(bucketMeta).Get(keySecretKeyID) != nil
	c := tx.Bucket(bucketEndpoints).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		ep, err := decodeEndpoint(v)
		if err != nil {
			if !report("endpoint %q: %v", k, err) {
				return
			}
			continue
		}
		if err := engine.CheckStoredHeaders(ep.Headers); err != nil {
			if !report("endpoint %s: custom headers: %v", ep.ID, err) {
				return
			}
		}
		if err := engine.CheckStoredRateLimit(ep.RateLimit); err != nil {
			if !report("endpoint %s: %v", ep.ID, err) {
				return
			}
		}
		if err := engine.CheckStoredSource(ep); err != nil {
			if !report("endpoint %s: %v", ep.ID, err) {
				return
			}
		}
		for _, h := range ep.Headers {
			if h.Sealed != keyed {
				if !report("endpoint %s: custom header %s is stored sealed=%t, but the file's secrets are sealed=%t", ep.ID, h.Name, h.Sealed, keyed) {
					return
				}
			}
		}
	}
}

// checkEventTypes reports a catalogue entry that does not decode, or
// whose status, schema or example the API would refuse
// (engine.CheckStoredEventType).
func checkEventTypes(tx *bolt.Tx, report func(string, ...any) bool) {
	c := tx.Bucket(bucketEventTypes).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		et, err := decodeEventType(v)
		if err == nil {
			err = engine.CheckStoredEventType(et)
		}
		if err != nil && !report("event type %q: %v", k, err) {
			return
		}
	}
}

// deliveryIDsOf lists the delivery IDs of the event at log position seq
// of tenant (eventDeliveries), collected, so that the caller may delete
// them as it goes.
func deliveryIDsOf(tx *bolt.Tx, tenant string, seq uint64) []string {
	var ids []string
	_ = eventDeliveries(tx.Bucket(bucketTenantDeliveries).Cursor(), tenant, seq, func(id string) error {
		ids = append(ids, id)
		return nil
	})
	return ids
}

// fmtTime is t for a check's report: "none" when zero.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.UTC().Format(engine.TimeFormat)
}
