package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/webhookd/webhookd/tracing"
)

// TracingConfig is the [tracing] section: OpenTelemetry traces of each
// ingest, each attempt and each commit of the bbolt file, exported over
// OTLP/HTTP to a collector (package tracing; docs/operations.md). Off by
// default.
type TracingConfig struct {
	// Enabled turns tracing on. False: nothing is traced, exported or
	// stored, and no request's traceparent is read.
	Enabled bool `toml:"enabled"`
	// Endpoint is the collector's OTLP/HTTP traces URL, path included
	// (an OpenTelemetry Collector listens on port 4318, path
	// /v1/traces). http or https, with no user info: credentials go in
	// Headers.
	Endpoint string `toml:"endpoint"`
	// Headers are sent with every export, name to value (the API key of
	// a hosted collector: [tracing.headers] "x-api-key" = "…"). The
	// values are secrets: no error or log shows them.
	Headers map[string]string `toml:"headers"`
	// Sampler decides which traces are kept, by the OpenTelemetry
	// names (tracing.Samplers). The default, parentbased_traceidratio,
	// follows the caller's decision for an ingest that continues its
	// trace and keeps SamplerRatio of the traces webhookd starts (the
	// attempts', the commits', an ingest's without a traceparent).
	Sampler string `toml:"sampler"`
	// SamplerRatio is the fraction of traces a ratio sampler keeps,
	// from 0 to 1.
	SamplerRatio float64 `toml:"sampler_ratio"`
	// ServiceName is the service.name of the spans' resource.
	ServiceName string `toml:"service_name"`
}

// DefaultTracingRatio is [tracing] sampler_ratio by default: a tenth
// of the events webhookd starts a trace for (those whose ingest carries
// no traceparent) is traced, each whole (its ingest and every attempt,
// tracing.followIngest), and every event a caller traces is, whatever
// the ratio. At 1, tracing cost a CPU-bound node 7% of its ingest rate
// and 13% of its delivery rate on the bench, and sent the collector
// about 12 MB of spans a second at 30 000 deliveries a second; at 0.1,
// 0.5% and 5.4% (docs/performance.md#tracing). An operator who wants
// every event traced sets 1.
const DefaultTracingRatio = 0.1

// defaultTracing is [tracing] by default: off, with what a local
// OpenTelemetry Collector's defaults want when it is turned on.
func defaultTracing() TracingConfig {
	return TracingConfig{
		Enabled:      false,
		Endpoint:     "http://localhost:4318/v1/traces",
		Headers:      map[string]string{},
		Sampler:      "parentbased_traceidratio",
		SamplerRatio: DefaultTracingRatio,
		ServiceName:  "webhookd",
	}
}

// validateTracing reports what of [tracing] webhookd cannot run with,
// on or off (a file turned on later must not fail then). It never shows
// a header's value.
func (c Config) validateTracing(v *configProblems) {
	t := c.Tracing
	if u, err := url.Parse(t.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add("tracing.endpoint", t.Endpoint, `must be an http or https URL, like "http://localhost:4318/v1/traces"`)
	} else if u.User != nil {
		v.addf("config %s: tracing.endpoint: must not hold user info: put credentials in [tracing.headers]", v.name)
	}
	for _, name := range slices.Sorted(maps.Keys(t.Headers)) {
		if !validHeaderName(name) {
			v.addf("config %s: tracing.headers: %q is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", v.name, name)
		}
		if strings.ContainsAny(t.Headers[name], "\r\n\x00") {
			v.addf("config %s: tracing.headers.%s: the value must be one line", v.name, name)
		}
	}
	if !slices.Contains(tracing.Samplers, t.Sampler) {
		v.add("tracing.sampler", t.Sampler, "must be one of "+strings.Join(tracing.Samplers, ", "))
	}
	if !(t.SamplerRatio >= 0 && t.SamplerRatio <= 1) {
		v.add("tracing.sampler_ratio", t.SamplerRatio, "must be from 0 to 1")
	}
	if strings.TrimSpace(t.ServiceName) == "" {
		v.add("tracing.service_name", t.ServiceName, "must name the service")
	}
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110's
// token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// startTracing returns the Tracer [tracing] asks for, or nil when it is
// off.
func startTracing(ctx context.Context, c TracingConfig, logger *slog.Logger) (*tracing.Tracer, error) {
	if !c.Enabled {
		return nil, nil
	}
	tr, err := tracing.New(ctx, tracing.Config{
		Endpoint: c.Endpoint, Headers: c.Headers,
		Sampler: c.Sampler, Ratio: c.SamplerRatio,
		ServiceName: c.ServiceName, ServiceVersion: versionString(),
		Logger: logger,
	})
	if err != nil {
		return nil, fmt.Errorf("[tracing]: %w", err)
	}
	return tr, nil
}
