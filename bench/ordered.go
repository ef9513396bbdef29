package bench

import (
	"fmt"
	"slices"
	"time"

	apiclient "github.com/webhookd/webhookd/client"
)

// orderedLatency is how long the ordered scenario's receivers take to
// answer: what one request in flight per line costs.
const orderedLatency = 2 * time.Millisecond

// orderedPhases are the ordered scenario's endpoint orderings, in the
// order they run; keys is how many distinct ordering keys the events
// carry, round-robin (0: none).
var orderedPhases = []struct {
	ordering apiclient.Ordering
	keys     int
}{
	{apiclient.OrderingNone, 0},
	{apiclient.OrderingKey, 1},
	{apiclient.OrderingKey, 10},
	{apiclient.OrderingKey, 100},
	{apiclient.OrderingKey, 1000},
	{apiclient.OrderingEndpoint, 0},
}

// orderedRuns is the order the phases run in, as indexes into
// orderedPhases: a palindrome, so that a drift of the machine's speed
// during the run falls alike on the phases that run twice, whose figures
// are pooled. The single-line phases (key with 1 key, endpoint), whose
// figures are far from any target and take the longest, run once, in the
// middle.
var orderedRuns = []int{0, 2, 3, 4, 1, 5, 4, 3, 2, 0}

// orderedProfiled is the number of keys of the phase the ordered
// scenario profiles (its last run) and reports in its summary line: the
// first that the throughput target covers.
const orderedProfiled = 100

// OrderedStats is the ordered scenario: the same load to endpoints with
// each ordering in turn, as ratios to ordering none.
type OrderedStats struct {
	ReceiverMs float64         `json:"receiver_latency_ms"`
	Phases     []*OrderedPhase `json:"phases"` // in orderedPhases' order
}

// OrderedPhase is one ordering's runs of the load, each on a fresh
// webhookd, pooled.
type OrderedPhase struct {
	Name       string `json:"name"`
	Ordering   string `json:"ordering"`
	Keys       int    `json:"keys,omitempty"`
	Runs       int    `json:"runs"`
	Expected   int64  `json:"expected"`
	Delivered  int64  `json:"delivered"` // counted by the receivers
	Duplicates int64  `json:"duplicates"`
	// Rate is the deliveries over the seconds from each run's first send
	// to its last delivery, summed; EndToEnd pools the runs' latencies
	// (ingest acknowledged → receiver got it).
	Rate       float64 `json:"deliveries_per_second"`
	EndToEnd   Latency `json:"end_to_end"`
	IngestRate float64 `json:"ingest_events_per_second"`
	CPU        float64 `json:"cpu_cores"` // process CPU time / wall time, harness included
	// Violations counts the arrivals at a receiver of an event after a
	// later event (a higher sequence) of its line: its ordering key, or
	// the whole endpoint when the events carry none. With ordering none,
	// where no order is promised, it shows how far the arrivals are from
	// sequence order.
	Violations int64 `json:"order_violations"`
	// RateRatio and P99Ratio are Rate and EndToEnd.P99 over ordering
	// none's.
	RateRatio float64 `json:"rate_ratio_to_none"`
	P99Ratio  float64 `json:"p99_ratio_to_none"`

	seconds, cpuSeconds, ingestSeconds float64
	ingested                           int
	lat                                latencies
}

// add pools one run into p.
func (p *OrderedPhase) add(in *IngestStats, d *DeliveryStats, violations int64) {
	p.Runs++
	p.Expected += d.Expected
	p.Delivered += d.Delivered
	p.Duplicates += d.Duplicates
	p.Violations += violations
	p.seconds += d.Seconds
	p.cpuSeconds += d.CPU * d.Seconds
	p.ingested += in.Events
	p.ingestSeconds += in.Seconds
	p.lat = append(p.lat, d.lat...)
	p.EndToEnd = p.lat.summary()
	if p.seconds > 0 {
		p.Rate, p.CPU = float64(p.Delivered)/p.seconds, p.cpuSeconds/p.seconds
	}
	if p.ingestSeconds > 0 {
		p.IngestRate = float64(p.ingested) / p.ingestSeconds
	}
}

// ordered runs the same load against a fresh webhookd and receivers that
// answer in orderedLatency, once or twice per ordering of orderedPhases
// (orderedRuns), checks the order the receivers got each line in, and
// compares throughput and end-to-end latency with ordering none.
func (r *runner) ordered() error {
	st := &OrderedStats{ReceiverMs: ms(orderedLatency)}
	r.res.Ordered = st
	for _, p := range orderedPhases {
		name := string(p.ordering)
		if p.keys > 0 {
			name = fmt.Sprintf("%s, %d key%s", p.ordering, p.keys, ifs(p.keys != 1, "s"))
		}
		st.Phases = append(st.Phases, &OrderedPhase{Name: name, Ordering: string(p.ordering), Keys: p.keys})
	}
	for i, n := range orderedRuns {
		ph, p := st.Phases[n], orderedPhases[n]
		profiled := p.keys == orderedProfiled && !slices.Contains(orderedRuns[i+1:], n)
		if profiled {
			r.startProfile()
		}
		in, d, violations, series, err := r.orderedRun(i, ph.Name, p.ordering, p.keys)
		if profiled {
			r.stopProfile()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", ph.Name, err)
		}
		ph.add(in, d, violations)
		if profiled {
			r.res.Ingest, r.res.Delivery, r.res.Series = in, d, series
		}
	}

	none := st.Phases[0]
	var violations int64
	for _, ph := range st.Phases {
		if none.Rate > 0 && none.EndToEnd.P99 > 0 {
			ph.RateRatio, ph.P99Ratio = ph.Rate/none.Rate, ph.EndToEnd.P99/none.EndToEnd.P99
		}
		if ph == none {
			continue
		}
		violations += ph.Violations
		if ph.Keys >= orderedProfiled {
			r.res.target(fmt.Sprintf("key ordering, %d keys, deliveries end to end", ph.Keys), "≥ 80% of none",
				fmt.Sprintf("%.1f%% (%s of %s /s)", 100*ph.RateRatio, num(ph.Rate), num(none.Rate)), ph.RateRatio >= 0.80)
		}
	}
	r.res.target("order violations in the ordered phases", "0", fmt.Sprint(violations), violations == 0)
	return nil
}

// orderedRun runs the scenario's load to endpoints with ordering, the
// events spread round-robin over keys ordering keys (0: none), on a
// fresh webhookd (file ordered-i.db), and waits for the deliveries until
// the run has taken -d. It returns the run's ingest and delivery, its
// order violations (see OrderedPhase), and its events ingested and
// delivered per second.
func (r *runner) orderedRun(i int, name string, ordering apiclient.Ordering, keys int) (*IngestStats, *DeliveryStats, int64, []Point, error) {
	rs, err := startReceivers(r.o.Endpoints, 0, r.faults, func(rc *receiver) {
		rc.delay, rc.logOrder = orderedLatency, true
	})
	if err != nil {
		return nil, nil, 0, nil, err
	}
	defer rs.close()
	in, err := r.open(fmt.Sprintf("ordered-%d.db", i), true, 0)
	if err != nil {
		return nil, nil, 0, nil, err
	}
	defer in.close(5 * time.Second)
	eps, err := r.endpoints(in, rs)
	if err != nil {
		return nil, nil, 0, nil, err
	}
	if err := r.setOrdering(in, eps, ordering); err != nil {
		return nil, nil, 0, nil, err
	}
	spec := r.spec(r.o.Clients, r.o.Events)
	spec.keyed = keyedBodies(r.o.EventSize, keys)

	stop := r.watch(name, in, rs)
	cpu := startCPU()
	lr := runLoad(r.ctx, in.api, spec, &r.sent)
	var expected int64
	for _, a := range lr.acks {
		expected += int64(len(a.deliveries))
	}
	r.drain(min(r.o.Drain, time.Until(lr.start.Add(r.o.Duration))), func() bool { return rs.delivered.Load() >= expected })
	cores := cpu()
	stop()
	if len(lr.acks) == 0 {
		return nil, nil, 0, nil, fmt.Errorf("no event acknowledged: %v", lr.firstErr)
	}
	d, ser := r.deliveryStats(rs, lr.acks, lr.start, all, true)
	d.CPU, d.PendingAtEnd = cores, max(0, int(expected-d.Delivered))
	if d.PendingAtEnd > 0 {
		r.res.note("%s: %d deliveries still pending after %s; its figures are of the %d delivered", name, d.PendingAtEnd, r.o.Duration, d.Delivered)
	}
	return r.ingestStats(lr, r.o.Clients), d, lineViolations(rs, lr), points(ingestSeries(lr.start, lr.acks), ser), nil
}

// setOrdering gives each of eps, endpoints of in, ordering (none: leaves
// them as they are).
func (r *runner) setOrdering(in *instance, eps []endpointInfo, ordering apiclient.Ordering) error {
	if ordering == apiclient.OrderingNone {
		return nil
	}
	c, err := in.api.client()
	if err != nil {
		return err
	}
	for _, ep := range eps {
		if _, err := c.UpdateEndpoint(r.ctx, r.tenant, ep.ID, apiclient.EndpointPatch{Ordering: &ordering}); err != nil {
			return fmt.Errorf("set ordering %s: %w", ordering, err)
		}
	}
	return nil
}

// keyedBodies are the bodies of events of size bytes over keys ordering
// keys (0: none), for loadSpec.keyed.
func keyedBodies(size, keys int) []keyedBody {
	var out []keyedBody
	for k := range keys {
		key := fmt.Sprintf("key-%04d", k)
		out = append(out, keyedBody{key: key, body: keyedEventBody(size, key)})
	}
	return out
}

// lineViolations counts the arrivals at the receivers of rs (which log
// their order) of an event of lr after a later event of its ordering key
// (see OrderedPhase.Violations). An event whose acknowledgement the load
// did not get (sent as it ended) is of no known key: a line of its own.
func lineViolations(rs *receiverSet, lr loadResult) int64 {
	keyOf := make(map[string]string, len(lr.acks))
	for _, a := range lr.acks {
		keyOf[a.id] = a.key
	}
	return rs.orderViolations(func(id string) string {
		if k, ok := keyOf[id]; ok {
			return k
		}
		return "\x00" + id
	})
}
