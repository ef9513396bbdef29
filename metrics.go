package main

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/webhookd/webhookd/engine"
)

// metrics are webhookd's Prometheus metrics, served at /metrics. Names
// follow the domain: event, delivery, attempt, dead letter.
//
// /metrics has no token, so no label carries anything a tenant made: no
// tenant, endpoint, event or delivery ID. A label names a route pattern,
// an outcome or a state; per-endpoint detail stays behind a token (the
// endpoint's health, the report, the console). The one event type label,
// of webhookd_deprecated_events_total, names a type the operator
// deprecated: the catalogue is the operator's, published to every tenant
// already, and the series are as many as the types deprecated.
type metrics struct {
	reg *prometheus.Registry

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	eventsStored    prometheus.Counter
	ingestRepeats   prometheus.Counter
	attempts        *prometheus.CounterVec
	attemptDuration *prometheus.HistogramVec
	deliveries      *prometheus.CounterVec
	deadLetters     prometheus.Counter
	endpointFails   prometheus.Counter
	commitBatch     prometheus.Histogram
	commitDuration  prometheus.Histogram
	deprecated      *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := promauto.With(m.reg)
	m.requests = f.NewCounterVec(prometheus.CounterOpts{Name: "webhookd_http_requests_total",
		Help: "API requests by method, route pattern and status code."}, []string{"method", "route", "code"})
	m.requestDuration = f.NewHistogramVec(prometheus.HistogramOpts{Name: "webhookd_http_request_duration_seconds",
		Help:    "API request latency by method and route pattern; POST /v1/tenants/:tenant/events is ingest.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}, []string{"method", "route"})
	m.eventsStored = f.NewCounter(prometheus.CounterOpts{Name: "webhookd_events_stored_total",
		Help: "Events stored by ingest (acknowledged 202 and new; idempotent repeats are not counted here)."})
	m.ingestRepeats = f.NewCounter(prometheus.CounterOpts{Name: "webhookd_ingest_repeats_total",
		Help: "Ingests acknowledged (202) as repeats of an event already stored under the same Idempotency-Key."})
	m.attempts = f.NewCounterVec(prometheus.CounterOpts{Name: "webhookd_attempts_total",
		Help: "Delivery attempts recorded, by outcome (success, retry, permanent)."}, []string{"outcome"})
	m.attemptDuration = f.NewHistogramVec(prometheus.HistogramOpts{Name: "webhookd_attempt_duration_seconds",
		Help: "Delivery attempt latency by outcome.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}, []string{"outcome"})
	m.deliveries = f.NewCounterVec(prometheus.CounterOpts{Name: "webhookd_deliveries_finished_total",
		Help: "Deliveries that reached a final state (succeeded, dead)."}, []string{"state"})
	m.deadLetters = f.NewCounter(prometheus.CounterOpts{Name: "webhookd_dead_letters_total",
		Help: "Deliveries moved to the dead letters."})
	m.endpointFails = f.NewCounter(prometheus.CounterOpts{Name: "webhookd_endpoint_failures_total",
		Help: "Failed attempts, of every endpoint (the endpoints' own are in their health, behind a token)."})
	m.commitBatch = f.NewHistogram(prometheus.HistogramOpts{Name: "webhookd_commit_batch_writes",
		Help: "Writes per storage commit (group commit).", Buckets: prometheus.ExponentialBuckets(1, 2, 12)})
	m.commitDuration = f.NewHistogram(prometheus.HistogramOpts{Name: "webhookd_commit_duration_seconds",
		Help: "Storage commit latency, fsync included.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)})
	m.deprecated = f.NewCounterVec(prometheus.CounterOpts{Name: "webhookd_deprecated_events_total",
		Help: "Events stored of an event type marked deprecated in the catalogue, by type: who still sends them (idempotent repeats are not counted)."}, []string{"type"})
	// Every known label value starts at 0, so that a dashboard or an alert
	// on dead deliveries sees a series before the first one, not "no data".
	for _, o := range []engine.Outcome{engine.OutcomeSuccess, engine.OutcomeRetry, engine.OutcomePermanent} {
		m.attempts.WithLabelValues(string(o))
		m.attemptDuration.WithLabelValues(string(o))
	}
	for _, s := range []engine.State{engine.StateSucceeded, engine.StateDead} {
		m.deliveries.WithLabelValues(string(s))
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// watch registers the gauges read at scrape time from the dispatcher and
// the store.
func (m *metrics) watch(disp *engine.Dispatcher, svc *engine.Service, be *backend) {
	gauge := func(name, help string, fn func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
	}
	gauge("webhookd_pending_deliveries", "Pending deliveries held by the dispatcher: waiting for their time, due, or in flight.", func() float64 {
		s := disp.Stats()
		return float64(s.Scheduled + s.Ready + s.InFlight)
	})
	gauge("webhookd_owed_deliveries", "Deliveries of acknowledged events not written yet: the bbolt store writes an ingest's deliveries in the commits after the one that acknowledges it.", func() float64 {
		return float64(svc.OwedDeliveries())
	})
	gauge("webhookd_due_deliveries", "Deliveries due now and waiting for a worker.", func() float64 { return float64(disp.Stats().Ready) })
	gauge("webhookd_inflight_attempts", "Attempts in flight.", func() float64 { return float64(disp.Stats().InFlight) })
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "webhookd_attempts_dropped_total",
		Help: "Attempts not made because the claim's lease had less than attempt_timeout left (a node resumed after a stall, cluster mode): the delivery was handed back to be claimed again."},
		func() float64 { return float64(disp.Dropped()) }))
	gauge("webhookd_oldest_pending_overdue_seconds", "How long the most overdue pending delivery has been due (0 when none is overdue).", func() float64 {
		due, ok, err := be.OldestDue(context.Background())
		if err != nil || !ok {
			return 0
		}
		return max(0, time.Since(due).Seconds())
	})
	if be.stalls != nil {
		counter := func(name, help string, fn func() float64) {
			m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, fn))
		}
		counter("webhookd_database_lock_timeouts_total", "Writes that waited lock_timeout for a lock another transaction held (a node stalled in a transaction, a long EnqueueTx) and were given up: answered 503 with Retry-After, or tried again.", func() float64 {
			return float64(be.stalls().LockTimeouts)
		})
		counter("webhookd_database_idle_transactions_ended_total", "Transactions of this node that the database ended because they sat idle for idle_in_transaction_session_timeout: this node was stalled mid-transaction.", func() float64 {
			return float64(be.stalls().EndedIdle)
		})
	}
	if be.size != nil {
		gauge("webhookd_database_bytes", "Size of the database file.", func() float64 { return float64(be.size()) })
	}
	if be.disk != nil {
		counter := func(name, help string, fn func() float64) {
			m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, fn))
		}
		counter("webhookd_commit_pages_written_total", "Pages the storage commits wrote to the database file.", func() float64 {
			pages, _ := be.disk()
			return float64(pages)
		})
		counter("webhookd_commit_write_seconds_total", "Time the storage commits spent writing pages and syncing the file: the disk's part of webhookd_commit_duration_seconds.", func() float64 {
			_, writing := be.disk()
			return writing.Seconds()
		})
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// observeRequest is httpapi's ObserveRequest.
func (m *metrics) observeRequest(method, route string, code int, d time.Duration) {
	m.requests.WithLabelValues(method, route, strconv.Itoa(code)).Inc()
	m.requestDuration.WithLabelValues(method, route).Observe(d.Seconds())
}

// observeIngest is httpapi's ObserveIngest.
func (m *metrics) observeIngest(repeat bool) {
	if repeat {
		m.ingestRepeats.Inc()
		return
	}
	m.eventsStored.Inc()
}

// observeDeprecated is the service's DeprecatedEvent.
func (m *metrics) observeDeprecated(eventType string) {
	m.deprecated.WithLabelValues(eventType).Inc()
}

// observeAttempt is the dispatcher's OnAttempt.
func (m *metrics) observeAttempt(_ string, a engine.Attempt, state engine.State) {
	m.attempts.WithLabelValues(string(a.Outcome)).Inc()
	m.attemptDuration.WithLabelValues(string(a.Outcome)).Observe(a.Duration.Seconds())
	if a.Outcome != engine.OutcomeSuccess {
		m.endpointFails.Inc()
	}
	switch state {
	case engine.StateSucceeded, engine.StateDead:
		m.deliveries.WithLabelValues(string(state)).Inc()
	}
	if state == engine.StateDead {
		m.deadLetters.Inc()
	}
}

// observeCommit is storage's OnCommit.
func (m *metrics) observeCommit(writes int, d time.Duration) {
	m.commitBatch.Observe(float64(writes))
	m.commitDuration.Observe(d.Seconds())
}
