package bench

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apiclient "github.com/webhookd/webhookd/client"
)

// ingest-only's -schema comparison: what an event type's JSON Schema
// costs durable ingest. The same events (a typical order, of the run's
// event size) are ingested into one webhookd in alternating rounds, to a
// type without a schema and to a type with benchSchema, each side first
// in half of them, so that the database's growth and the machine's drift
// fall on both sides alike; each side's rate is its events over the time
// of its own rounds.

// Event types of the comparison.
const (
	plainType   = "bench.order_plain"
	checkedType = "bench.order_checked"
)

// schemaRounds is how many rounds each side of the comparison runs: at
// the default 50 000 events, rounds of 6 250 events, about half a
// second each here, long enough that a round is not a few commits' luck.
const schemaRounds = 8

// benchSchema is a typical event type's schema, draft 2020-12: a
// required amount, a currency by pattern, a customer object, order lines
// through a $ref, no other member.
const benchSchema = `{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type": "object",
	"required": ["amount", "currency", "customer", "lines"],
	"properties": {
		"amount": {"type": "integer", "minimum": 1},
		"currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
		"customer": {
			"type": "object",
			"required": ["id", "email"],
			"properties": {
				"id": {"type": "string", "pattern": "^cus_[0-9A-Z]{26}$"},
				"email": {"type": "string", "format": "email", "maxLength": 254}
			}
		},
		"lines": {"type": "array", "minItems": 1, "maxItems": 100, "items": {"$ref": "#/$defs/line"}},
		"note": {"type": "string", "maxLength": 65536},
		"created": {"type": "string"}
	},
	"additionalProperties": false,
	"$defs": {
		"line": {
			"type": "object",
			"required": ["sku", "qty"],
			"properties": {
				"sku": {"type": "string", "pattern": "^[A-Z]-[0-9]+$"},
				"qty": {"type": "integer", "minimum": 1},
				"name": {"type": "string"}
			}
		}
	}
}`

// orderBody is an ingest request body of size bytes (at least the
// order without a note) of an event of typ whose data benchSchema
// takes: the order, padded with its note.
func orderBody(size int, typ string) []byte {
	head := `{"type":"` + typ + `","data":{"amount":4200,"currency":"EUR","customer":{"id":"cus_01JH0000000000000000000001","email":"jane@example.com"},` +
		`"lines":[{"sku":"A-100","qty":2,"name":"Blue mug"},{"sku":"B-200","qty":1,"name":"Teapot, large"},{"sku":"C-300","qty":6,"name":"Saucer"}],` +
		`"created":"2030-01-02T03:04:05.123Z","note":"`
	const tail = `"}}`
	pad := max(0, size-len(head)-len(tail))
	return []byte(head + strings.Repeat("x", pad) + tail)
}

// SchemaStats is ingest-only's -schema comparison.
type SchemaStats struct {
	Rounds  int          `json:"rounds"`
	Without *IngestStats `json:"without_schema"`
	With    *IngestStats `json:"with_schema"`
	// Ratio is With.Rate / Without.Rate.
	Ratio float64 `json:"ratio"`
}

// schemaTarget is the share of the rate without a schema that ingest
// with a typical one must keep (issue 33: within 10%).
const schemaTarget = 0.90

// schemaComparison runs the comparison on in, with the run's clients and
// events (each side all of them, in schemaRounds rounds).
func (r *runner) schemaComparison(in *instance) error {
	c, err := in.api.client()
	if err != nil {
		return err
	}
	for typ, schema := range map[string]json.RawMessage{plainType: nil, checkedType: json.RawMessage(benchSchema)} {
		if _, _, err := c.PutEventTypeWith(r.ctx, typ, apiclient.EventTypeInput{Description: "webhookd bench", Schema: schema}); err != nil {
			return fmt.Errorf("create event type %s: %w", typ, err)
		}
	}
	per := max(100, r.o.Events/schemaRounds)
	var without, with []loadResult
	type side struct {
		typ  string
		into *[]loadResult
	}
	for i := range schemaRounds {
		sides := []side{{plainType, &without}, {checkedType, &with}}
		if i%2 == 1 { // each side goes first in half the rounds
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, side := range sides {
			spec := loadSpec{tenant: r.tenant, clients: r.o.Clients, rate: r.o.Rate, events: per, duration: r.o.Duration, body: orderBody(r.o.EventSize, side.typ)}
			lr := runLoad(r.ctx, in.api, spec, &r.sent)
			if len(lr.acks) == 0 {
				return fmt.Errorf("schema comparison, %s: no event acknowledged: %v", side.typ, lr.firstErr)
			}
			*side.into = append(*side.into, lr)
		}
	}
	s := &SchemaStats{Rounds: schemaRounds, Without: r.roundsStats(without), With: r.roundsStats(with)}
	if s.Without.Rate > 0 {
		s.Ratio = s.With.Rate / s.Without.Rate
	}
	r.res.Schema = s
	r.res.target("ingest with a typical schema", fmt.Sprintf("≥ %.0f%% of the rate without", 100*schemaTarget),
		fmt.Sprintf("%.1f%% (%s vs %s ev/s)", 100*s.Ratio, num(s.With.Rate), num(s.Without.Rate)), s.Ratio >= schemaTarget)
	return nil
}

// roundsStats is the ingest stats of rounds taken as one load: their
// events over the sum of their times, the latencies of them all.
func (r *runner) roundsStats(rounds []loadResult) *IngestStats {
	var lat latencies
	var secs, wall float64
	var cpu time.Duration
	s := &IngestStats{Clients: r.o.Clients}
	for _, lr := range rounds {
		one := r.ingestStats(lr, r.o.Clients)
		secs += one.Seconds
		wall += lr.end.Sub(lr.start).Seconds()
		cpu += lr.cpu
		s.Events += one.Events
		s.Errors += one.Errors
		s.Throttled += one.Throttled
		if s.FirstErr == "" {
			s.FirstErr = one.FirstErr
		}
		for _, a := range lr.acks {
			lat = append(lat, a.acked.Sub(a.sent))
		}
	}
	s.Seconds, s.Latency = secs, lat.summary()
	if secs > 0 {
		s.Rate = float64(s.Events) / secs
	}
	if wall > 0 {
		s.CPU = cpu.Seconds() / wall
	}
	if f := r.res.Baselines.DurableFloor; f > 0 {
		s.FloorRatio = s.Rate / f
	}
	return s
}
