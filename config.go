package main

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/BurntSushi/toml"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/verify"
)

// Config is webhookd's configuration, read from the TOML file named by
// -config. The section and key names are part of webhookd's interface:
// operators' files must keep working across versions, so a key is never
// renamed or given a new meaning, only added.
//
// Every key is optional: a file is decoded on top of defaultConfig, so a key
// absent from the file keeps its default. config.example.toml lists every key
// with its default, and a test keeps the two equal.
type Config struct {
	Server    ServerConfig    `toml:"server"`
	Storage   StorageConfig   `toml:"storage"`
	API       APIConfig       `toml:"api"`
	Ingest    IngestConfig    `toml:"ingest"`
	Delivery  DeliveryConfig  `toml:"delivery"`
	Limits    LimitsConfig    `toml:"limits"`
	Log       LogConfig       `toml:"log"`
	Retention RetentionConfig `toml:"retention"`
	Alerts    AlertsConfig    `toml:"alerts"`
	Console   ConsoleConfig   `toml:"console"`
	Retry     RetryConfig     `toml:"retry"`
	Tracing   TracingConfig   `toml:"tracing"`
}

// RetryConfig is the [retry] section: the named retry policies that a
// tenant chooses among, and an endpoint too (retry_policy), beside the
// standard one.
type RetryConfig struct {
	// Policies are the policies by name ([retry.policies.NAME]): each
	// name 1 to 32 lowercase letters, digits, '_' and '-', starting with
	// a letter. "standard" is [delivery]'s schedule, jitter and deadline,
	// which its table may set instead (not both, unless equal), and its
	// retry_statuses. "extended" is built in (about Svix's schedule);
	// the keys its table sets replace the built-in ones. Any other name
	// is the operator's own, with schedule and deadline required.
	Policies map[string]RetryPolicyConfig `toml:"policies"`
}

// RetryPolicyConfig is one [retry.policies.NAME] table. A key it does
// not set is its base's: [delivery]'s for standard, the built-in one's
// for extended, and for a policy of the operator's own delivery.jitter
// and no retry_statuses (schedule and deadline it must set).
type RetryPolicyConfig struct {
	// Schedule holds the waits between attempts, as delivery.schedule:
	// at most 25, each positive; [] means one attempt only.
	Schedule []Duration `toml:"schedule"`
	// Jitter spreads each wait over ±Jitter of it, in [0, 1).
	Jitter *float64 `toml:"jitter"`
	// Deadline bounds a delivery cycle, from its first attempt: at least
	// delivery.attempt_timeout and (but for standard, whose deadline is
	// delivery.deadline) at least the schedule's total wait.
	Deadline *Duration `toml:"deadline"`
	// RetryStatuses are statuses that are permanent failures by default
	// (3xx, and 4xx but 408, 425 and 429) that this policy retries by its
	// schedule, like [404, 409]: each once, from 300 to 499, not 408, 425
	// or 429 (every policy retries those).
	RetryStatuses []int `toml:"retry_statuses"`
}

// ConsoleConfig is the [console] section: embedding the web console in the
// operator's own app through portal links (docs/portal.md).
type ConsoleConfig struct {
	// SessionTTL is how long a console session opened by a portal link
	// lasts, at most 720h.
	SessionTTL Duration `toml:"session_ttl"`
	// FrameAncestors are the origins allowed to show the console in a
	// frame, like "https://app.example.com" (scheme, host, optional port;
	// no path). Empty: no site may frame it.
	FrameAncestors []string `toml:"frame_ancestors"`
	// PublicURL is the base URL browsers reach webhookd at, which portal
	// links start with ("https://hooks.example.com"); "": the scheme and
	// host of the request asking for the link.
	PublicURL string `toml:"public_url"`
	// Brand white-labels the console for the operator's customers.
	Brand BrandConfig `toml:"brand"`
}

// BrandConfig is [console.brand]: how the console names and colours
// itself. Empty keys keep webhookd's own.
type BrandConfig struct {
	Name    string `toml:"name"`     // in the header and page titles, at most 60 characters
	Accent  string `toml:"accent"`   // links and buttons, "#rrggbb"
	LogoURL string `toml:"logo_url"` // an http(s) image before the name
}

// RetentionConfig is the [retention] section: how long finished events are
// kept. A background pruner deletes older ones in small transactions.
type RetentionConfig struct {
	// Succeeded is how long an event is kept after its last delivery
	// succeeded (an event without subscribers: after ingest). At least
	// ingest.idempotency_window, so an idempotency key never outlives its
	// event.
	Succeeded Duration `toml:"succeeded"`
	// Dead is how long an event is kept after its last delivery died,
	// counted from the death: its dead letter can be replayed until then.
	// At least ingest.idempotency_window.
	Dead Duration `toml:"dead"`
	// Interval is how long the pruner waits between two passes, from 1s
	// to 24h. A pass reads the events older than both retentions, so a
	// shorter interval costs reads, not writes.
	Interval Duration `toml:"interval"`
	// Tasks is how long a background task (a range replay, a backfill,
	// a tenant's purge) is kept after it ended, at least 1h: its answer
	// of GET …/tasks/{id} until then.
	Tasks Duration `toml:"tasks"`
}

// ServerConfig is the [server] section: the HTTP listener.
type ServerConfig struct {
	// Listen is the host:port to listen on. ":8080" listens on every
	// interface; port 0 picks a free port.
	Listen string `toml:"listen"`
	// ShutdownTimeout is how long SIGINT or SIGTERM waits for in-flight
	// requests and attempts before closing anyway. Zero: do not wait.
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
	// WriteTimeout bounds a request's answer: from the end of its headers
	// to the answer's last byte. The hot backup (GET /v1/admin/backup) is
	// exempt, being as large as the database: it is cut only when the
	// client takes more than WriteTimeout over one 256 KiB piece. Must be
	// positive.
	WriteTimeout Duration `toml:"write_timeout"`
	// IdleTimeout is how long a kept-alive connection waits for its next
	// request before it is closed. Must be positive.
	IdleTimeout Duration `toml:"idle_timeout"`
	// MemoryLimit is the memory budget of the Go heap (applyMemoryLimit):
	// the collector lets the heap grow to it instead of collecting each
	// time it doubles, so a busy webhookd spends less of its CPU on
	// collection and its latency has fewer collection pauses in the
	// tail. Zero: Go's defaults (collect at twice the live heap).
	// Otherwise at least minMemoryLimit(ingest.max_pending).
	MemoryLimit ByteSize `toml:"memory_limit"`
}

// pendingHeapBytes is the heap one pending delivery may take, with room:
// BenchmarkDispatcher_Recover measures 134 bytes each, and the backlog
// bench 156 MiB of heap for a million pending, the whole process included.
const pendingHeapBytes = 320

// minMemoryLimit is the least [server] memory_limit with maxPending
// deliveries pending at most: 128 MiB and pendingHeapBytes for each. A
// live heap near the limit would make the collector run all the time.
func minMemoryLimit(maxPending int) ByteSize {
	n := 128*MiB + ByteSize(maxPending)*pendingHeapBytes
	return (n + MiB - 1) / MiB * MiB // whole MiB, to read in the error
}

// StorageConfig is the [storage] section: where the state is kept.
type StorageConfig struct {
	// Driver is "bbolt" (one file, one node: the default) or "postgres"
	// (a PostgreSQL database shared by any number of nodes: cluster mode,
	// docs/cluster.md).
	Driver string `toml:"driver"`
	// URL is the PostgreSQL connection URL of the postgres driver (a
	// multi-host URL with target_session_attrs=read-write follows a
	// failover); the environment variable WEBHOOKD_DATABASE_URL may hold
	// it instead, which keeps a password out of the file. Never logged.
	URL string `toml:"url"`
	// Schema is the PostgreSQL schema of webhookd's tables, made at the
	// first start.
	Schema string `toml:"schema"`
	// Lease is how long a node's claim on a delivery lasts without
	// renewal (postgres): a node that dies has its deliveries offered to
	// the others at most this long after. Longer than
	// delivery.attempt_timeout.
	Lease Duration `toml:"lease"`
	// MaxConnections bounds a node's connections to PostgreSQL (postgres;
	// one more listens for wake-ups). Mind the server's max_connections
	// across all nodes. The default, 8, is small on purpose: an ingest or
	// a batch of records is one round trip, and the server does most
	// work with a few active connections per core: on a 2-core machine,
	// three nodes delivered 31% of one bbolt node's rate with 4
	// connections each, 30% with 8, 24% with 12 and 18% with 20 (bench
	// -scenario cluster, same hour). Raise it with the server's cores.
	MaxConnections int `toml:"max_connections"`
	// Path is the database file, relative to the working directory unless
	// absolute. Its directory is created (0700) if it is missing.
	Path string `toml:"path"`
	// LockTimeout is how long opening the database waits for the file lock
	// held by another process before giving up. Must be positive.
	LockTimeout Duration `toml:"lock_timeout"`
	// OwedFanOutAbove is how many ingests a commit acknowledges before it
	// leaves their fan-outs owed (bbolt): the commit then writes each
	// event and the plan of its deliveries, and the deliveries are written
	// by the commits after it (docs/performance.md, "Owed fan-out"). A
	// commit with fewer writes the deliveries with the events, a commit
	// sooner for the dispatcher. 0: every fan-out is owed.
	OwedFanOutAbove int `toml:"owed_fanout_above"`
	// SecretKeyFile names a file holding the master key that endpoint
	// secrets are encrypted with at rest (AES-256-GCM): the base64 of 32
	// random bytes, on one line. The environment variable
	// WEBHOOKD_SECRET_KEY may hold the same instead (setting both is an
	// error). "" and no variable: secrets are stored in plain, and a
	// database whose secrets are encrypted refuses to open.
	SecretKeyFile string `toml:"secret_key_file"`
}

// APIConfig is the [api] section: admin authentication.
type APIConfig struct {
	// Tokens are the admin bearer tokens; any one of them is accepted. Each
	// is at least 16 characters of printable ASCII without whitespace. Empty:
	// webhookd generates one token on first start and saves it to TokenFile.
	// Tokens are secrets: no error or log shows them.
	Tokens []string `toml:"tokens"`
	// TokenFile is where the generated admin token is kept when Tokens is
	// empty. "": a file named admin-token beside the database file (see
	// Config.adminTokenFile).
	TokenFile string `toml:"token_file"`
	// TestTokens are bearer tokens for the test environment: they act on
	// test tenants only (and may create them), and answer 403 on anything
	// live. Each is "whk_test_" followed by at least 16 printable ASCII
	// characters, or "sha256:" + the hex SHA-256 of such a token. A token in
	// Tokens is live and must not start with "whk_test_". Either list may
	// give a token as "sha256:<64 hex digits>", so the file need not hold it.
	TestTokens []string `toml:"test_tokens"`
	// DefaultEnvironment is the environment of a tenant created by a live
	// token without naming one: "live" or "test".
	DefaultEnvironment string `toml:"default_environment"`
	// IngestRate limits event ingest per token, in requests per second;
	// over it ingest answers 429 with Retry-After. Zero: unlimited.
	IngestRate float64 `toml:"ingest_rate"`
	// IngestBurst is how many ingests a token may make at once above
	// IngestRate, 0 to 1000000. Zero: IngestRate rounded up.
	IngestBurst int `toml:"ingest_burst"`
	// TenantTokenTTL is the lifetime of a tenant access token issued
	// without a "ttl" (POST /v1/tenants/{tenant}/access-tokens), more
	// than 0s and at most 720h (30 days, engine.MaxAccessTokenTTL, which
	// also bounds an explicit ttl).
	TenantTokenTTL Duration `toml:"tenant_token_ttl"`
}

// IngestConfig is the [ingest] section: accepting events.
type IngestConfig struct {
	// MaxBody is the largest event request body accepted, 1KiB to 64MiB.
	MaxBody ByteSize `toml:"max_body"`
	// IdempotencyWindow is how long an idempotency key is remembered.
	IdempotencyWindow Duration `toml:"idempotency_window"`
	// APIVersion is the api_version given to events whose ingest names
	// none; 1 to 64 characters.
	APIVersion string `toml:"api_version"`
	// MaxPending bounds the backlog: while this many deliveries or more are
	// not yet delivered or dead (pending: waiting for a retry, due, or
	// being attempted; or waiting behind their ordered line's head, held
	// for a disabled endpoint, or dead and blocking their line), ingest
	// answers 503 overloaded with Retry-After instead of storing the
	// event. Each pending delivery costs a few hundred bytes of memory.
	// Zero: no bound.
	MaxPending int `toml:"max_pending"`
}

// DeliveryConfig is the [delivery] section: attempts and retries.
type DeliveryConfig struct {
	// Schedule holds the waits between attempts: a delivery gets
	// len(Schedule)+1 attempts in all. At most 25 waits, each positive. An
	// empty schedule (schedule = []) means one attempt only, no retries.
	Schedule []Duration `toml:"schedule"`
	// Jitter spreads each wait uniformly over ±Jitter of it (0.2: ±20%), in
	// [0, 1). Zero: waits are exact.
	Jitter float64 `toml:"jitter"`
	// Deadline bounds a delivery's attempts, measured from its first
	// attempt; every attempt's own time counts. Must be positive.
	Deadline Duration `toml:"deadline"`
	// AttemptTimeout bounds one attempt (connect, TLS, request and
	// response). Positive and at most Deadline.
	AttemptTimeout Duration `toml:"attempt_timeout"`
	// Workers is how many attempts may run at once in all, 1 to 4096.
	Workers int `toml:"workers"`
	// EndpointConcurrency is how many attempts may run at once against one
	// endpoint, 1 to 4096.
	EndpointConcurrency int `toml:"endpoint_concurrency"`
	// TenantConcurrency is how many attempts may run at once for one
	// tenant, 0 to Workers: the workers a tenant whose receivers all hang
	// cannot take from the others. Zero: three quarters of Workers.
	TenantConcurrency int `toml:"tenant_concurrency"`
	// EndpointRate limits attempts per second per endpoint, and is the
	// ceiling of each endpoint's own rate_limit. Zero: unlimited (but
	// for the endpoints' own).
	EndpointRate float64 `toml:"endpoint_rate"`
	// RetryAfterMax caps the wait a 429 or 503 response asks for in its
	// Retry-After header. Must be positive.
	RetryAfterMax Duration `toml:"retry_after_max"`
	// AllowHTTP allows endpoints with plain http:// URLs. False: https only.
	AllowHTTP bool `toml:"allow_http"`
	// AllowPrivateTargets allows endpoints at every address. False: an
	// address that is not globally reachable by the IANA special-purpose
	// registries (loopback, private, link-local, multicast, CGNAT,
	// documentation, benchmarking, Teredo, ...; see engine.AddressClass),
	// or embeds such an IPv4 address, is refused when an endpoint is
	// created or changed, and when an attempt dials it (after DNS), so
	// that webhookd cannot be used to reach the network it runs in (SSRF).
	AllowPrivateTargets bool `toml:"allow_private_targets"`
	// Proxy, when set, is the egress proxy every attempt and challenge
	// goes through: "http://host:port", "https://…" or "socks5://…", the
	// proxy's credentials as user info ("http://user:pass@host:3128";
	// secret: never logged nor shown in an error). For a machine whose
	// only way out is a proxy. The environment's HTTP_PROXY is never
	// used. With a proxy the target check is made before each request on
	// what this machine resolves, not on the address dialled
	// (engine.TargetPolicy.Proxy; docs/security.md).
	Proxy string `toml:"proxy"`
	// RequireEndpointVerification makes endpoints created from now on
	// answer the Standard Webhooks challenge (webhook-challenge) before
	// their first delivery; until they do, their deliveries are held.
	RequireEndpointVerification bool `toml:"require_endpoint_verification"`
	// DisableAfter disables an endpoint that has failed every attempt for
	// this long; its deliveries are then held as paused. "0s": never for
	// that reason. A 410 Gone disables an endpoint at once regardless.
	DisableAfter Duration `toml:"disable_after"`
	// DisableOnGone disables an endpoint at once when it answers 410 Gone
	// (the Standard Webhooks recommendation). false: a 410 kills only that
	// delivery, like any other 4xx.
	DisableOnGone bool `toml:"disable_on_gone"`
}

// LimitsConfig is the [limits] section: what one tenant may take, so that
// it cannot make ingest or delivery fail or wait for the others. Each zero
// means no limit. The operator's alert tenant is exempt.
type LimitsConfig struct {
	// EndpointsPerTenant is the most endpoints a tenant may have; one more
	// is 409 limit_reached. It also bounds the requests one event makes.
	EndpointsPerTenant int `toml:"endpoints_per_tenant"`
	// PendingPerTenant bounds a tenant's backlog, counted as
	// ingest.max_pending counts it: at or over it, the tenant's ingest
	// answers 429 tenant_overloaded with Retry-After, while other
	// tenants' ingest goes on. It protects the others only when it is
	// well below ingest.max_pending, which stays the bound of them all.
	PendingPerTenant int `toml:"pending_per_tenant"`
	// IngestRatePerTenant limits ingest per tenant, in events per second,
	// whichever token sends them; over it 429 rate_limited with
	// Retry-After.
	IngestRatePerTenant float64 `toml:"ingest_rate_per_tenant"`
	// IngestBurstPerTenant is how many events a tenant may be sent at
	// once above IngestRatePerTenant, 0 to 1000000. Zero: the rate
	// rounded up.
	IngestBurstPerTenant int `toml:"ingest_burst_per_tenant"`
	// TasksPerTenant is the most background tasks (range replays,
	// backfills) a tenant may have running at once; one more is 409
	// limit_reached until one ends.
	TasksPerTenant int `toml:"tasks_per_tenant"`
}

// AlertsConfig is the [alerts] section: an optional operational endpoint
// (docs/operations.md, engine.EnsureOperatorEndpoint) made at every
// start, which receives webhookd's own signed events endpoint.failing,
// endpoint.disabled and delivery.dead (the API may change its types),
// delivered by the same engine as any other. Without it, a start deletes
// the one an earlier start made.
type AlertsConfig struct {
	// URL receives the alerts; "": no alerts.
	URL string `toml:"url"`
	// Secret signs them: "whsec_" + base64 of at least 24 bytes (make one
	// with: echo whsec_$(head -c 32 /dev/urandom | base64)). Required with
	// URL. It is a secret: no error or log shows it.
	Secret string `toml:"secret"`
}

// LogConfig is the [log] section.
type LogConfig struct {
	// Level is the least severe level logged: debug, info, warn or error.
	Level string `toml:"level"`
	// Format is text (logfmt-like, for people) or json (for collectors).
	Format string `toml:"format"`
}

// defaultConfig returns the configuration used for every key a file does not
// set. It returns fresh slices on every call: loadConfig decodes into them.
// config.example.toml must show the same values (a test checks it).
func defaultConfig() Config {
	return Config{
		Server: ServerConfig{
			Listen:          "127.0.0.1:8080",
			ShutdownTimeout: Duration{10 * time.Second},
			WriteTimeout:    Duration{time.Minute},
			IdleTimeout:     Duration{2 * time.Minute},
		},
		Storage: StorageConfig{
			Driver:          "bbolt",
			URL:             "",
			Schema:          "webhookd",
			Lease:           Duration{30 * time.Second},
			MaxConnections:  8,
			Path:            "data/webhookd.db",
			LockTimeout:     Duration{time.Second},
			OwedFanOutAbove: 16,
		},
		API: APIConfig{
			Tokens:             []string{},
			TokenFile:          "",
			TestTokens:         []string{},
			DefaultEnvironment: "live",
			IngestRate:         0,
			IngestBurst:        0,
			TenantTokenTTL:     Duration{24 * time.Hour},
		},
		Ingest: IngestConfig{
			MaxBody:           256 * KiB,
			IdempotencyWindow: Duration{24 * time.Hour},
			APIVersion:        "v1",
			MaxPending:        1_000_000,
		},
		Delivery: DeliveryConfig{
			Schedule: []Duration{
				{5 * time.Second},
				{30 * time.Second},
				{2 * time.Minute},
				{10 * time.Minute},
				{time.Hour},
			},
			Jitter:              0.2,
			Deadline:            Duration{75 * time.Minute},
			AttemptTimeout:      Duration{10 * time.Second},
			Workers:             64,
			EndpointConcurrency: 8,
			TenantConcurrency:   0,
			EndpointRate:        0,
			RetryAfterMax:       Duration{10 * time.Minute},

			AllowHTTP:                   false,
			AllowPrivateTargets:         false,
			RequireEndpointVerification: false,
			DisableAfter:                Duration{5 * 24 * time.Hour},
			DisableOnGone:               true,
		},
		Limits: LimitsConfig{
			EndpointsPerTenant:   100,
			PendingPerTenant:     250_000,
			IngestRatePerTenant:  1000,
			IngestBurstPerTenant: 0,
			TasksPerTenant:       4,
		},
		Log: LogConfig{
			Level:  "info",
			Format: "text",
		},
		Retention: RetentionConfig{
			Succeeded: Duration{30 * 24 * time.Hour},
			Dead:      Duration{30 * 24 * time.Hour},
			Interval:  Duration{time.Minute},
			Tasks:     Duration{30 * 24 * time.Hour},
		},
		Console: ConsoleConfig{
			SessionTTL:     Duration{time.Hour},
			FrameAncestors: []string{},
			PublicURL:      "",
			Brand:          BrandConfig{},
		},
		Retry: RetryConfig{
			Policies: map[string]RetryPolicyConfig{
				engine.ExtendedRetryPolicyName: policyConfig(engine.ExtendedRetryPolicy()),
			},
		},
		Tracing: defaultTracing(),
	}
}

// policyConfig is p as a [retry.policies.NAME] table that sets every key.
func policyConfig(p engine.RetryPolicy) RetryPolicyConfig {
	c := RetryPolicyConfig{Schedule: make([]Duration, len(p.Schedule)), Jitter: &p.Jitter, Deadline: &Duration{p.Deadline}, RetryStatuses: []int{}}
	for i, w := range p.Schedule {
		c.Schedule[i] = Duration{w}
	}
	c.RetryStatuses = append(c.RetryStatuses, p.RetryStatuses...)
	return c
}

// loadConfig returns the configuration in the TOML file at path, decoded on
// top of defaultConfig and validated; path "" returns the defaults. Errors
// start with "config PATH:" and name the line (syntax and type errors), the
// unknown key, or the key and value at fault (validation).
func loadConfig(path string) (Config, error) {
	cfg := defaultConfig()
	if path == "" {
		return cfg, cfg.validate("(defaults)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	text := string(data)

	// Parse once without a destination, so that a syntax error is reported
	// as such rather than as a problem with whatever key came last.
	var raw map[string]any
	if _, err := toml.Decode(text, &raw); err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return Config{}, fmt.Errorf("config %s: line %d: %s", path, perr.Position.Line, perr.Message)
		}
		return Config{}, fmt.Errorf("config %s: %s", path, strings.TrimPrefix(err.Error(), "toml: "))
	}
	if err := policiesAreTables(raw); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	md, err := toml.Decode(text, &cfg)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) { // a value our types reject, e.g. "5x" for a duration
			return Config{}, fmt.Errorf("config %s: line %d: %s: %s", path, perr.Position.Line, perr.LastKey, perr.Message)
		}
		return Config{}, fmt.Errorf("config %s: %s", path, strings.TrimPrefix(err.Error(), "toml: "))
	}
	if unknown := unknownConfigKeys(md); len(unknown) > 0 {
		noun := "key"
		if len(unknown) > 1 {
			noun = "keys"
		}
		return Config{}, fmt.Errorf("config %s: unknown %s %s", path, noun, strings.Join(unknown, ", "))
	}
	if err := cfg.mergeStandard(path, md); err != nil {
		return Config{}, err
	}
	return cfg, cfg.validate(path)
}

// policiesAreTables refuses a [retry] policies that is not a table of
// tables, which the decoder would leave out without a word.
func policiesAreTables(raw map[string]any) error {
	retry, _ := raw["retry"].(map[string]any)
	p, ok := retry["policies"]
	if !ok {
		return nil
	}
	policies, ok := p.(map[string]any)
	if !ok {
		return errors.New("retry.policies: must be a table of policies, [retry.policies.NAME]")
	}
	for _, name := range slices.Sorted(maps.Keys(policies)) {
		if _, ok := policies[name].(map[string]any); !ok {
			return fmt.Errorf("retry.policies.%s: must be a table, [retry.policies.%s]", name, name)
		}
	}
	return nil
}

// mergeStandard copies the schedule, jitter and deadline that
// [retry.policies.standard] sets into [delivery], where the standard
// policy is read from, and refuses a file that sets one of them in both
// places with different values. Both then hold the value, so that the
// configuration encodes to a file that loads back to it.
func (c *Config) mergeStandard(path string, md toml.MetaData) error {
	std, ok := c.Retry.Policies[engine.StandardRetryPolicy]
	if !ok {
		return nil
	}
	var errs []error
	conflict := func(key string, delivery, standard any) {
		errs = append(errs, fmt.Errorf("config %s: retry.policies.standard.%s = %s conflicts with delivery.%s = %s: both set the standard policy's %s; set it in one place (they are the same setting)",
			path, key, tomlValue(standard), key, tomlValue(delivery), key))
	}
	if std.Schedule != nil {
		if md.IsDefined("delivery", "schedule") && !slices.Equal(c.Delivery.Schedule, std.Schedule) {
			conflict("schedule", c.Delivery.Schedule, std.Schedule)
		}
		c.Delivery.Schedule = slices.Clone(std.Schedule)
	}
	if std.Jitter != nil {
		if md.IsDefined("delivery", "jitter") && c.Delivery.Jitter != *std.Jitter {
			conflict("jitter", c.Delivery.Jitter, *std.Jitter)
		}
		c.Delivery.Jitter = *std.Jitter
	}
	if std.Deadline != nil {
		if md.IsDefined("delivery", "deadline") && c.Delivery.Deadline != *std.Deadline {
			conflict("deadline", c.Delivery.Deadline, *std.Deadline)
		}
		c.Delivery.Deadline = *std.Deadline
	}
	return errors.Join(errs...)
}

// tomlValue shows v as TOML would: a duration or a list of them quoted.
func tomlValue(v any) string {
	switch v := v.(type) {
	case Duration:
		return strconv.Quote(v.String())
	case []Duration:
		q := make([]string, len(v))
		for i, d := range v {
			q[i] = strconv.Quote(d.String())
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// unknownConfigKeys returns the keys in md that Config does not have, in file
// order: those the decoder left undecoded, and those it matched only by
// ignoring case (the decoder does; we do not, so that a file has one
// spelling of each key). A key inside an unknown table is not listed again.
func unknownConfigKeys(md toml.MetaData) []string {
	known := configKeys()
	undecoded := make(map[string]bool)
	for _, k := range md.Undecoded() {
		undecoded[k.String()] = true
	}
	reported := make(map[string]bool)
	var unknown []string
	for _, k := range md.Keys() {
		name := k.String()
		if known[wildcardKey(k, known)] && !undecoded[name] {
			continue
		}
		reported[name] = true
		if insideReported(k, reported) {
			continue
		}
		if !undecoded[name] {
			name += " (keys are lower case)"
		}
		unknown = append(unknown, name)
	}
	return unknown
}

// insideReported reports whether a table enclosing k is in reported.
func insideReported(k toml.Key, reported map[string]bool) bool {
	for i := 1; i < len(k); i++ {
		if reported[k[:i].String()] {
			return true
		}
	}
	return false
}

// configKeys returns every key Config has ("server", "server.listen", …),
// spelled as in its toml tags. A table of named tables (a map, like
// [retry.policies.NAME]) has its names as "*": "retry.policies.*",
// "retry.policies.*.schedule" (wildcardKey).
func configKeys() map[string]bool {
	keys := make(map[string]bool)
	var add func(prefix string, t reflect.Type)
	add = func(prefix string, t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name := prefix + f.Tag.Get("toml")
			keys[name] = true
			switch ft := f.Type; {
			case ft.Kind() == reflect.Struct && ft.NumField() > 0 && ft.Field(0).Tag.Get("toml") != "":
				add(name+".", ft) // a table inside a section ([console.brand])
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				keys[name+".*"] = true // named tables ([retry.policies.NAME])
				add(name+".*.", ft.Elem())
			case ft.Kind() == reflect.Map:
				keys[name+".*"] = true // a table of the operator's own keys ([tracing.headers])
			}
		}
	}
	add("", reflect.TypeFor[Config]())
	return keys
}

// wildcardKey returns k as configKeys names it: with the name of a named
// table as "*" ("retry.policies.nightly.jitter" is
// "retry.policies.*.jitter").
func wildcardKey(k toml.Key, known map[string]bool) string {
	for i := 1; i < len(k); i++ {
		if prefix := k[:i].String() + ".*"; known[prefix] {
			if rest := k[i+1:]; len(rest) > 0 {
				return prefix + "." + rest.String()
			}
			return prefix
		}
	}
	return k.String()
}

// validate reports every value in c that webhookd cannot run with, one line
// each, as "config NAME: key = value: reason". It never shows a token.
func (c Config) validate(name string) error {
	v := &configProblems{name: name}

	if _, port, err := net.SplitHostPort(c.Server.Listen); err != nil || port == "" {
		v.add("server.listen", c.Server.Listen, `must be host:port, like "127.0.0.1:8080" (port 0: any free port)`)
	}
	if c.Server.ShutdownTimeout.Duration < 0 {
		v.add("server.shutdown_timeout", c.Server.ShutdownTimeout, "must not be negative")
	}
	v.positive("server.write_timeout", c.Server.WriteTimeout)
	v.positive("server.idle_timeout", c.Server.IdleTimeout)

	if c.Storage.Path == "" {
		v.add("storage.path", c.Storage.Path, "must name the database file")
	}
	v.positive("storage.lock_timeout", c.Storage.LockTimeout)
	if c.Storage.OwedFanOutAbove < 0 || c.Storage.OwedFanOutAbove > 1000 {
		v.add("storage.owed_fanout_above", c.Storage.OwedFanOutAbove, "must be from 0 to 1000")
	}
	switch c.Storage.Driver {
	case "bbolt":
	case "postgres":
		if c.Storage.Schema == "" {
			v.add("storage.schema", c.Storage.Schema, "must name a schema (default \"webhookd\")")
		}
		if c.Storage.MaxConnections < 2 || c.Storage.MaxConnections > 1000 {
			v.add("storage.max_connections", c.Storage.MaxConnections, "must be from 2 to 1000")
		}
		if c.Storage.Lease.Duration <= c.Delivery.AttemptTimeout.Duration {
			v.add("storage.lease", c.Storage.Lease, fmt.Sprintf("must be longer than delivery.attempt_timeout (%q): a claim must outlast its attempt", c.Delivery.AttemptTimeout))
		}
	default:
		v.add("storage.driver", c.Storage.Driver, `must be "bbolt" or "postgres"`)
	}

	for i, tok := range c.API.Tokens {
		if len(tok) < 16 || !printableASCII(tok) {
			// The value is a secret: say where it is, not what it is.
			v.addf("config %s: api.tokens[%d]: must be at least 16 characters of printable ASCII with no whitespace", name, i)
		}
	}
	c.validateSecurity(v)
	c.validateTracing(v)
	if ttl := c.API.TenantTokenTTL.Duration; ttl <= 0 || ttl > 720*time.Hour {
		v.add("api.tenant_token_ttl", c.API.TenantTokenTTL, "must be more than 0s and at most 720h (30 days)")
	}

	if c.Ingest.MaxBody < KiB || c.Ingest.MaxBody > 64*MiB {
		v.add("ingest.max_body", c.Ingest.MaxBody, "must be between 1KiB and 64MiB")
	}
	v.positive("ingest.idempotency_window", c.Ingest.IdempotencyWindow)
	if n := utf8.RuneCountInString(c.Ingest.APIVersion); n < 1 || n > 64 {
		v.add("ingest.api_version", c.Ingest.APIVersion, "must be 1 to 64 characters")
	}
	if c.Server.MemoryLimit != 0 && c.Server.MemoryLimit < minMemoryLimit(max(c.Ingest.MaxPending, 0)) {
		v.add("server.memory_limit", c.Server.MemoryLimit, fmt.Sprintf("must be 0 (Go's defaults) or at least %s with ingest.max_pending %d (128MiB and %d bytes per pending delivery): a backlog's heap near the limit would keep the collector running", minMemoryLimit(max(c.Ingest.MaxPending, 0)), c.Ingest.MaxPending, pendingHeapBytes))
	}
	if c.Ingest.MaxPending < 0 {
		v.add("ingest.max_pending", c.Ingest.MaxPending, "must be at least 0 (0: no bound)")
	}

	d := c.Delivery
	v.schedule(c.standardKey("schedule"), d.Schedule)
	if !(d.Jitter >= 0 && d.Jitter < 1) { // also rejects NaN
		v.add(c.standardKey("jitter"), d.Jitter, "must be at least 0 and below 1")
	}
	v.positive(c.standardKey("deadline"), d.Deadline)
	v.positive("delivery.attempt_timeout", d.AttemptTimeout)
	if d.Deadline.Duration > 0 && d.AttemptTimeout.Duration > d.Deadline.Duration {
		v.add("delivery.attempt_timeout", d.AttemptTimeout, fmt.Sprintf("must not exceed %s (%q)", c.standardKey("deadline"), d.Deadline))
	}
	c.validateRetry(v)
	if d.Workers < 1 || d.Workers > 4096 {
		v.add("delivery.workers", d.Workers, "must be 1 to 4096")
	}
	if d.EndpointConcurrency < 1 || d.EndpointConcurrency > 4096 {
		v.add("delivery.endpoint_concurrency", d.EndpointConcurrency, "must be 1 to 4096")
	}
	if d.TenantConcurrency < 0 || d.TenantConcurrency > d.Workers {
		v.add("delivery.tenant_concurrency", d.TenantConcurrency, fmt.Sprintf("must be 0 (three quarters of workers) to delivery.workers (%d)", d.Workers))
	}
	if !(d.EndpointRate >= 0) || math.IsInf(d.EndpointRate, 0) {
		v.add("delivery.endpoint_rate", d.EndpointRate, "must be a finite number, at least 0 (0: unlimited)")
	}
	v.positive("delivery.retry_after_max", d.RetryAfterMax)

	l := c.Limits
	if l.EndpointsPerTenant < 0 {
		v.add("limits.endpoints_per_tenant", l.EndpointsPerTenant, "must be at least 0 (0: no limit)")
	}
	if l.PendingPerTenant < 0 {
		v.add("limits.pending_per_tenant", l.PendingPerTenant, "must be at least 0 (0: no limit)")
	}
	if !(l.IngestRatePerTenant >= 0) || math.IsInf(l.IngestRatePerTenant, 0) {
		v.add("limits.ingest_rate_per_tenant", l.IngestRatePerTenant, "must be a finite number, at least 0 (0: unlimited)")
	}
	if l.IngestBurstPerTenant < 0 || l.IngestBurstPerTenant > 1_000_000 {
		v.add("limits.ingest_burst_per_tenant", l.IngestBurstPerTenant, "must be 0 to 1000000 (0: the rate rounded up)")
	}
	if l.TasksPerTenant < 0 || l.TasksPerTenant > 1000 {
		v.add("limits.tasks_per_tenant", l.TasksPerTenant, "must be 0 to 1000 (0: no limit)")
	}

	if c.Delivery.DisableAfter.Duration < 0 {
		v.add("delivery.disable_after", c.Delivery.DisableAfter, `must not be negative ("0s": never)`)
	}
	if _, err := parseProxy(c.Delivery.Proxy); err != nil {
		v.addf("config %s: delivery.proxy: %v", v.name, err)
	}
	if c.Alerts.URL != "" {
		if u, err := url.Parse(c.Alerts.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			v.add("alerts.url", c.Alerts.URL, "must be an http or https URL")
		}
		if key, err := verify.StandardKey(c.Alerts.Secret); err != nil || !strings.HasPrefix(c.Alerts.Secret, "whsec_") || len(key) < 24 {
			v.addf("config %s: alerts.secret: must be whsec_ + base64 of at least 24 random bytes when alerts.url is set", v.name)
		}
	}
	if ttl := c.Console.SessionTTL.Duration; ttl <= 0 || ttl > 720*time.Hour {
		v.add("console.session_ttl", c.Console.SessionTTL, "must be more than 0s and at most 720h (30 days)")
	}
	for i, o := range c.Console.FrameAncestors {
		if err := httpapi.ValidOrigin(o); err != nil {
			v.add(fmt.Sprintf("console.frame_ancestors[%d]", i), o, err.Error())
		}
	}
	b := c.Console.Brand
	if field, err := httpapi.ValidBrand(httpapi.Brand{Name: b.Name, Accent: b.Accent, LogoURL: b.LogoURL}); err != nil {
		v.add("console.brand."+field, map[string]string{"name": b.Name, "accent": b.Accent, "logo_url": b.LogoURL}[field], err.Error())
	}
	if c.Console.PublicURL != "" {
		if err := httpapi.ValidOrigin(strings.TrimSuffix(c.Console.PublicURL, "/")); err != nil {
			v.add("console.public_url", c.Console.PublicURL, err.Error())
		}
	}
	for _, r := range []struct {
		key string
		d   Duration
	}{{"retention.succeeded", c.Retention.Succeeded}, {"retention.dead", c.Retention.Dead}} {
		if r.d.Duration < c.Ingest.IdempotencyWindow.Duration {
			v.add(r.key, r.d, "must be at least ingest.idempotency_window, so that an idempotency key never outlives its event")
		}
	}
	if i := c.Retention.Interval.Duration; i < time.Second || i > 24*time.Hour {
		v.add("retention.interval", c.Retention.Interval, "must be from 1s to 24h")
	}
	if c.Retention.Tasks.Duration < time.Hour {
		v.add("retention.tasks", c.Retention.Tasks, "must be at least 1h, so that a finished task can be read after it ends")
	}

	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.add("log.level", c.Log.Level, "must be debug, info, warn or error")
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		v.add("log.format", c.Log.Format, "must be text or json")
	}
	return errors.Join(v.errs...)
}

// configProblems collects validation errors.
type configProblems struct {
	name string // the file, for the "config NAME:" prefix
	errs []error
}

// add records that key has a bad value, showing the value as TOML would.
func (p *configProblems) add(key string, value any, reason string) {
	var shown string
	switch value := value.(type) {
	case string:
		shown = strconv.Quote(value)
	case fmt.Stringer: // Duration, ByteSize: TOML strings
		shown = strconv.Quote(value.String())
	default:
		shown = fmt.Sprint(value)
	}
	p.addf("config %s: %s = %s: %s", p.name, key, shown, reason)
}

func (p *configProblems) addf(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

func (p *configProblems) positive(key string, d Duration) {
	if d.Duration <= 0 {
		p.add(key, d, "must be positive")
	}
}

// schedule checks the waits of a retry schedule at key: at most 25, each
// positive.
func (p *configProblems) schedule(key string, waits []Duration) {
	if len(waits) > 25 {
		p.addf("config %s: %s = [%d waits]: must have at most 25 waits", p.name, key, len(waits))
	}
	for i, wait := range waits {
		p.positive(fmt.Sprintf("%s[%d]", key, i), wait)
	}
}

// standardKey names the key that set the standard policy's key (schedule,
// jitter or deadline): retry.policies.standard's when its table sets it
// (mergeStandard copied it into [delivery]), else delivery's.
func (c Config) standardKey(key string) string {
	std := c.Retry.Policies[engine.StandardRetryPolicy]
	if key == "schedule" && std.Schedule != nil || key == "jitter" && std.Jitter != nil || key == "deadline" && std.Deadline != nil {
		return "retry.policies.standard." + key
	}
	return "delivery." + key
}

// validateRetry checks [retry.policies]: the names, and each policy as
// retryPolicies resolves it (the standard one's schedule, jitter and
// deadline are [delivery]'s, checked with it).
func (c Config) validateRetry(v *configProblems) {
	standard, named := c.retryPolicies()
	for _, name := range slices.Sorted(maps.Keys(c.Retry.Policies)) {
		key := "retry.policies." + name
		pc := c.Retry.Policies[name]
		if !engine.ValidRetryPolicyName(name) {
			v.addf("config %s: %s: the name must be 1 to %d lowercase letters, digits, '_' or '-', starting with a letter", v.name, key, engine.MaxRetryPolicyName)
			continue
		}
		seen := map[int]bool{}
		for i, st := range pc.RetryStatuses {
			k := fmt.Sprintf("%s.retry_statuses[%d]", key, i)
			if why := engine.ValidRetryStatus(st); why != "" {
				v.add(k, st, why)
			} else if seen[st] {
				v.add(k, st, "is listed twice")
			}
			seen[st] = true
		}
		if name == engine.StandardRetryPolicy {
			continue
		}
		if name != engine.ExtendedRetryPolicyName {
			if pc.Schedule == nil {
				v.addf("config %s: %s.schedule: must be set: a policy of your own names its schedule and deadline", v.name, key)
			}
			if pc.Deadline == nil {
				v.addf("config %s: %s.deadline: must be set: a policy of your own names its schedule and deadline", v.name, key)
			}
		}
		p := named[name]
		v.schedule(key+".schedule", pc.Schedule)
		if !(p.Jitter >= 0 && p.Jitter < 1) {
			v.add(key+".jitter", p.Jitter, "must be at least 0 and below 1")
		}
		dk := key + ".deadline"
		switch total := totalWait(p.Schedule); {
		case p.Deadline <= 0:
			v.add(dk, Duration{p.Deadline}, "must be positive")
		case p.Deadline < standard.AttemptTimeout:
			v.add(dk, Duration{p.Deadline}, fmt.Sprintf("must be at least delivery.attempt_timeout (%q)", Duration{standard.AttemptTimeout}))
		case p.Deadline < total:
			v.add(dk, Duration{p.Deadline}, fmt.Sprintf("must be at least the schedule's total wait (%s), or its last attempts are never made", total))
		}
	}
}

// totalWait is the sum of a schedule's waits.
func totalWait(waits []time.Duration) time.Duration {
	var total time.Duration
	for _, w := range waits {
		total += w
	}
	return total
}

// retryPolicies returns the standard retry policy and the others by
// name, each key a [retry.policies.NAME] table leaves out taken from its
// base (RetryPolicyConfig). Every policy has [delivery]'s attempt_timeout
// and retry_after_max.
func (c Config) retryPolicies() (engine.RetryPolicy, map[string]engine.RetryPolicy) {
	d := c.Delivery
	standard := engine.RetryPolicy{
		Schedule:       d.waits(),
		Jitter:         d.Jitter,
		Deadline:       d.Deadline.Duration,
		AttemptTimeout: d.AttemptTimeout.Duration,
		RetryAfterMax:  d.RetryAfterMax.Duration,
	}
	if std, ok := c.Retry.Policies[engine.StandardRetryPolicy]; ok && len(std.RetryStatuses) > 0 {
		standard.RetryStatuses = slices.Clone(std.RetryStatuses)
	}
	named := map[string]engine.RetryPolicy{}
	extended, ok := c.Retry.Policies[engine.ExtendedRetryPolicyName]
	if !ok {
		extended = RetryPolicyConfig{} // the built-in one, whole
	}
	for name, pc := range c.Retry.Policies {
		if name == engine.StandardRetryPolicy {
			continue
		}
		named[name] = pc.over(standard, name)
	}
	named[engine.ExtendedRetryPolicyName] = extended.over(standard, engine.ExtendedRetryPolicyName)
	return standard, named
}

// over returns the policy named name that pc describes, over its base:
// the built-in extended policy for extended, else the standard one
// without its retry statuses. AttemptTimeout and RetryAfterMax are the
// standard policy's.
func (pc RetryPolicyConfig) over(standard engine.RetryPolicy, name string) engine.RetryPolicy {
	p := engine.RetryPolicy{Schedule: standard.Schedule, Jitter: standard.Jitter, Deadline: standard.Deadline}
	if name == engine.ExtendedRetryPolicyName {
		p = engine.ExtendedRetryPolicy()
	}
	p.AttemptTimeout, p.RetryAfterMax, p.RetryStatuses = standard.AttemptTimeout, standard.RetryAfterMax, nil
	if pc.Schedule != nil {
		p.Schedule = make([]time.Duration, len(pc.Schedule))
		for i, w := range pc.Schedule {
			p.Schedule[i] = w.Duration
		}
	}
	if pc.Jitter != nil {
		p.Jitter = *pc.Jitter
	}
	if pc.Deadline != nil {
		p.Deadline = pc.Deadline.Duration
	}
	if len(pc.RetryStatuses) > 0 {
		p.RetryStatuses = slices.Clone(pc.RetryStatuses)
	}
	return p
}

// printableASCII reports whether s is all visible ASCII: no whitespace, no
// control characters, nothing a header could mangle.
func printableASCII(s string) bool {
	for i := range len(s) {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// adminTokenFile returns the file that holds the generated admin token:
// api.token_file, or "admin-token" in the database file's directory.
func (c Config) adminTokenFile() string {
	if c.API.TokenFile != "" {
		return c.API.TokenFile
	}
	return filepath.Join(filepath.Dir(c.Storage.Path), "admin-token")
}

// slogLevel returns log.level as a slog.Level; c must be valid.
func (c LogConfig) slogLevel() slog.Level {
	switch c.Level {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// waits returns delivery.schedule as time.Durations.
func (c DeliveryConfig) waits() []time.Duration {
	waits := make([]time.Duration, len(c.Schedule))
	for i, w := range c.Schedule {
		waits[i] = w.Duration
	}
	return waits
}

// Duration is a time.Duration written in TOML as a string in Go's syntax: a
// decimal number with a unit, several allowed: "10ms", "5s", "1.5h",
// "1h15m", "24h". Units are ns, us (or µs), ms, s, m and h; there is no day
// unit. "0" is zero. A bare number other than 0 is an error, so that "10"
// cannot be read as nanoseconds. Negative values parse; validation rejects
// them wherever they make no sense.
type Duration struct {
	time.Duration
}

// UnmarshalText parses a duration such as "5s".
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		return fmt.Errorf(`invalid duration %q: want a number and a unit (ns, us, ms, s, m, h), like "5s", "75m" or "1h30m"`, text)
	}
	d.Duration = v
	return nil
}

// MarshalText returns the duration in Go's syntax, like "1h15m0s".
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(d.Duration.String()), nil
}

// ByteSize is a number of bytes, written in TOML as a bare integer of bytes
// (65536) or a string of a whole number and a unit: "512B", "64KB",
// "256KiB", "1MiB". SI units are powers of 1000 and IEC units powers of
// 1024, as the standards say: KB = 1000, KiB = 1024, MB = 1000², MiB = 1024²,
// GB = 1000³, GiB = 1024³. Units are case-insensitive ("kib" is KiB) and
// follow the number without a space; fractions and negative sizes are
// errors.
type ByteSize int64

// Byte size units.
const (
	KB  ByteSize = 1000
	MB  ByteSize = 1000 * KB
	GB  ByteSize = 1000 * MB
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
)

// byteSizeUnits lists the units largest first, as MarshalText prefers them.
var byteSizeUnits = []struct {
	name string
	size ByteSize
}{
	{"GiB", GiB}, {"GB", GB}, {"MiB", MiB}, {"MB", MB}, {"KiB", KiB}, {"KB", KB}, {"B", 1},
}

// UnmarshalText parses a size such as "256KiB" or "65536".
func (b *ByteSize) UnmarshalText(text []byte) error {
	s := string(text)
	invalid := func(why string) error {
		return fmt.Errorf(`invalid size %q: %s; want bytes or a whole number and a unit (B, KB, KiB, MB, MiB, GB, GiB), like "256KiB"`, s, why)
	}
	end := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(s)
	}
	digits, unit := s[:end], s[end:]
	switch {
	case digits == "":
		return invalid("no whole number")
	case strings.HasPrefix(unit, "."):
		return invalid("not a whole number")
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return invalid("too large")
	}
	mult := ByteSize(0)
	if unit == "" {
		mult = 1
	}
	for _, u := range byteSizeUnits {
		if strings.EqualFold(unit, u.name) {
			mult = u.size
		}
	}
	if mult == 0 {
		return invalid(fmt.Sprintf("unknown unit %q", unit))
	}
	if ByteSize(n) > math.MaxInt64/mult {
		return invalid("too large")
	}
	*b = ByteSize(n) * mult
	return nil
}

// MarshalText returns the size with the largest unit that divides it
// exactly, like "256KiB", "64KB" or "1536B"; UnmarshalText reads it back
// (negative sizes excepted).
func (b ByteSize) MarshalText() ([]byte, error) {
	return []byte(b.String()), nil
}

// String returns the size as MarshalText does.
func (b ByteSize) String() string {
	for _, u := range byteSizeUnits {
		if b != 0 && b%u.size == 0 {
			return strconv.FormatInt(int64(b/u.size), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}
