package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// writeConfig writes text to webhookd.toml in a fresh directory and returns
// its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "webhookd.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigExample_MatchesDefaults(t *testing.T) {
	got, err := loadConfig("config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	if want := defaultConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("config.example.toml and defaultConfig differ: change both together\n got: %+v\nwant: %+v", got, want)
	}
}

// TestConfigExample_ListsEveryKey keeps the example complete: a key left out
// of it would still match its default.
func TestConfigExample_ListsEveryKey(t *testing.T) {
	var raw map[string]any
	md, err := toml.DecodeFile("config.example.toml", &raw)
	if err != nil {
		t.Fatal(err)
	}
	for key := range configKeys() {
		if key == "tracing.headers.*" {
			continue // the operator's own header names: none by default, the table is listed empty
		}
		// A named table ([retry.policies.NAME]) is listed with the
		// built-in extended policy.
		key = strings.ReplaceAll(key, "*", "extended")
		if !md.IsDefined(strings.Split(key, ".")...) {
			t.Errorf("config.example.toml lacks %s", key)
		}
	}
}

func TestLoadConfig_Defaults(t *testing.T) {
	got, err := loadConfig("")
	if err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if want := defaultConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestLoadConfig_Partial(t *testing.T) {
	tests := []struct {
		name string
		toml string
		want func(*Config)
	}{
		{"empty file", "", func(*Config) {}},
		{"comments only", "# nothing\n", func(*Config) {}},
		{"one key", "[delivery]\nworkers = 3\n", func(c *Config) { c.Delivery.Workers = 3 }},
		{
			"milliseconds",
			"[delivery]\nschedule = [\"10ms\", \"20ms\"]\ndeadline = \"500ms\"\nattempt_timeout = \"100ms\"\n",
			func(c *Config) {
				c.Delivery.Schedule = []Duration{{10 * time.Millisecond}, {20 * time.Millisecond}}
				c.Delivery.Deadline = Duration{500 * time.Millisecond}
				c.Delivery.AttemptTimeout = Duration{100 * time.Millisecond}
			},
		},
		{
			"longer schedule",
			"[delivery]\nschedule = [\"1s\", \"2s\", \"3s\", \"4s\", \"5s\", \"6s\"]\n",
			func(c *Config) {
				c.Delivery.Schedule = []Duration{{1 * time.Second}, {2 * time.Second}, {3 * time.Second}, {4 * time.Second}, {5 * time.Second}, {6 * time.Second}}
			},
		},
		{"empty schedule: one attempt", "[delivery]\nschedule = []\n", func(c *Config) { c.Delivery.Schedule = []Duration{} }},
		{
			"dotted keys and several sections",
			"server.listen = \":0\"\nlog.format = \"json\"\n[ingest]\nmax_body = 1048576\n",
			func(c *Config) {
				c.Server.Listen = ":0"
				c.Log.Format = "json"
				c.Ingest.MaxBody = MiB
			},
		},
		{"integer jitter", "[delivery]\njitter = 0\n", func(c *Config) { c.Delivery.Jitter = 0 }},
		{"no backlog bound", "[ingest]\nmax_pending = 0\n", func(c *Config) { c.Ingest.MaxPending = 0 }},
		{"backlog bound", "[ingest]\nmax_pending = 5000\n", func(c *Config) { c.Ingest.MaxPending = 5000 }},
		{
			"tokens",
			"[api]\ntokens = [\"0123456789abcdef\", \"fedcba9876543210-x\"]\ntoken_file = \"/run/webhookd/token\"\n",
			func(c *Config) {
				c.API.Tokens = []string{"0123456789abcdef", "fedcba9876543210-x"}
				c.API.TokenFile = "/run/webhookd/token"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loadConfig(writeConfig(t, tt.toml))
			if err != nil {
				t.Fatal(err)
			}
			want := defaultConfig()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestLoadConfig_UnknownKey(t *testing.T) {
	tests := []struct {
		name string
		toml string
		want string
	}{
		{"top level", "bogus = 1\n", "unknown key bogus"},
		{"nested", "[delivery]\njiter = 0.1\n", "unknown key delivery.jiter"},
		{"dotted", "delivery.jiter = 0.1\n", "unknown key delivery.jiter"},
		{"unknown table, named once", "[bogus]\nx = 1\ny = 2\n", "unknown key bogus"},
		{"several", "[server]\nlisten = \":0\"\nlsiten = \":1\"\n[log]\nlevle = \"debug\"\n", "unknown keys server.lsiten, log.levle"},
		{"wrong case", "[delivery]\nWorkers = 3\n", "unknown key delivery.Workers (keys are lower case)"},
		{"wrong case table", "[Delivery]\nworkers = 3\n", "unknown key Delivery (keys are lower case)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.toml)
			_, err := loadConfig(path)
			if err == nil {
				t.Fatal("no error")
			}
			if got, want := err.Error(), "config "+path+": "+tt.want; got != want {
				t.Errorf("got  %q\nwant %q", got, want)
			}
		})
	}
}

func TestLoadConfig_Invalid(t *testing.T) {
	tests := []struct {
		name string
		toml string
		want string // the whole error after "config PATH: "
	}{
		{"listen empty", "[server]\nlisten = \"\"", `server.listen = "": must be host:port`},
		{"listen no port", "[server]\nlisten = \"localhost\"", `server.listen = "localhost": must be host:port`},
		{"listen empty port", "[server]\nlisten = \"localhost:\"", `server.listen = "localhost:": must be host:port`},
		{"shutdown_timeout negative", "[server]\nshutdown_timeout = \"-1s\"", `server.shutdown_timeout = "-1s": must not be negative`},
		{"path empty", "[storage]\npath = \"\"", `storage.path = "": must name the database file`},
		{"lock_timeout zero", "[storage]\nlock_timeout = \"0s\"", `storage.lock_timeout = "0s": must be positive`},
		{"lock_timeout negative", "[storage]\nlock_timeout = \"-1s\"", `storage.lock_timeout = "-1s": must be positive`},
		{"token short", "[api]\ntokens = [\"0123456789abcdef\", \"short\"]", `api.tokens[1]: must be at least 16 characters of printable ASCII with no whitespace`},
		{"token whitespace", "[api]\ntokens = [\"0123456789 abcdef\"]", `api.tokens[0]: must be at least 16 characters`},
		{"token non-ASCII", "[api]\ntokens = [\"0123456789abcdéf\"]", `api.tokens[0]: must be at least 16 characters`},
		{"tenant_token_ttl zero", "[api]\ntenant_token_ttl = \"0s\"", `api.tenant_token_ttl = "0s": must be more than 0s and at most 720h (30 days)`},
		{"tenant_token_ttl over 30 days", "[api]\ntenant_token_ttl = \"721h\"", `api.tenant_token_ttl = "721h0m0s": must be more than 0s and at most 720h`},
		{"console session_ttl zero", "[console]\nsession_ttl = \"0s\"", `console.session_ttl = "0s": must be more than 0s and at most 720h (30 days)`},
		{"console frame_ancestors with a path", "[console]\nframe_ancestors = [\"https://app.example.com/embed\"]", `console.frame_ancestors[0] = "https://app.example.com/embed": must be an origin like`},
		{"console frame_ancestors injecting a CSP directive", "[console]\nframe_ancestors = [\"https://a.example; script-src *\"]", `console.frame_ancestors[0] = "https://a.example; script-src *": must be an origin like`},
		{"console frame_ancestors wildcard", "[console]\nframe_ancestors = [\"*\"]", `console.frame_ancestors[0] = "*": must be an origin like`},
		{"console brand accent", "[console.brand]\naccent = \"red; } body { display: none\"", `console.brand.accent = "red; } body { display: none": must be a colour like "#2456c7"`},
		{"console brand logo", "[console.brand]\nlogo_url = \"javascript:alert(1)\"", `console.brand.logo_url = "javascript:alert(1)": must be an absolute http or https URL of an image`},
		{"console public_url not a URL", "[console]\npublic_url = \"hooks.example.com\"", `console.public_url = "hooks.example.com": must be an origin like`},
		{"max_body too small", "[ingest]\nmax_body = \"1023B\"", `ingest.max_body = "1023B": must be between 1KiB and 64MiB`},
		{"max_body too large", "[ingest]\nmax_body = 67108865", `ingest.max_body = "67108865B": must be between 1KiB and 64MiB`},
		{"max_body zero", "[ingest]\nmax_body = 0", `ingest.max_body = "0B": must be between 1KiB and 64MiB`},
		{"idempotency_window zero", "[ingest]\nidempotency_window = \"0\"", `ingest.idempotency_window = "0s": must be positive`},
		{"api_version empty", "[ingest]\napi_version = \"\"", `ingest.api_version = "": must be 1 to 64 characters`},
		{"retention interval under a second", "[retention]\ninterval = \"500ms\"", `retention.interval = "500ms": must be from 1s to 24h`},
		{"retention interval over a day", "[retention]\ninterval = \"25h\"", `retention.interval = "25h0m0s": must be from 1s to 24h`},
		{"tasks kept under an hour", "[retention]\ntasks = \"30m\"", `retention.tasks = "30m0s": must be at least 1h`},
		{"negative tasks per tenant", "[limits]\ntasks_per_tenant = -1", `limits.tasks_per_tenant = -1: must be 0 to 1000 (0: no limit)`},
		{"api_version long", "[ingest]\napi_version = \"" + strings.Repeat("v", 65) + "\"", `ingest.api_version = "vvvv`},
		{"max_pending negative", "[ingest]\nmax_pending = -1", `ingest.max_pending = -1: must be at least 0 (0: no bound)`},
		{"memory_limit under the default backlog's heap", "[server]\nmemory_limit = \"256MiB\"", `server.memory_limit = "256MiB": must be 0 (Go's defaults) or at least 434MiB with ingest.max_pending 1000000`},
		{"memory_limit under 128MiB without a backlog bound", "[server]\nmemory_limit = \"100MiB\"\n[ingest]\nmax_pending = 0", `server.memory_limit = "100MiB": must be 0 (Go's defaults) or at least 128MiB with ingest.max_pending 0`},
		{"schedule too long", "[delivery]\nschedule = [" + strings.Repeat("\"1s\", ", 26) + "]", `delivery.schedule = [26 waits]: must have at most 25 waits`},
		{"schedule zero wait", "[delivery]\nschedule = [\"1s\", \"0s\"]", `delivery.schedule[1] = "0s": must be positive`},
		{"schedule negative wait", "[delivery]\nschedule = [\"-5s\"]", `delivery.schedule[0] = "-5s": must be positive`},
		{"jitter 1", "[delivery]\njitter = 1", `delivery.jitter = 1: must be at least 0 and below 1`},
		{"jitter 1.5", "[delivery]\njitter = 1.5", `delivery.jitter = 1.5: must be at least 0 and below 1`},
		{"jitter negative", "[delivery]\njitter = -0.1", `delivery.jitter = -0.1: must be at least 0 and below 1`},
		{"jitter nan", "[delivery]\njitter = nan", `delivery.jitter = NaN: must be at least 0 and below 1`},
		{"deadline zero", "[delivery]\ndeadline = \"0s\"", `delivery.deadline = "0s": must be positive`},
		{"attempt_timeout zero", "[delivery]\nattempt_timeout = \"0s\"", `delivery.attempt_timeout = "0s": must be positive`},
		{"attempt_timeout over deadline", "[delivery]\ndeadline = \"1m\"\nattempt_timeout = \"61s\"", `delivery.attempt_timeout = "1m1s": must not exceed delivery.deadline ("1m0s")`},
		{"workers zero", "[delivery]\nworkers = 0", `delivery.workers = 0: must be 1 to 4096`},
		{"workers too many", "[delivery]\nworkers = 4097", `delivery.workers = 4097: must be 1 to 4096`},
		{"endpoint_concurrency zero", "[delivery]\nendpoint_concurrency = 0", `delivery.endpoint_concurrency = 0: must be 1 to 4096`},
		{"endpoint_concurrency too many", "[delivery]\nendpoint_concurrency = 5000", `delivery.endpoint_concurrency = 5000: must be 1 to 4096`},
		{"endpoint_rate negative", "[delivery]\nendpoint_rate = -1", `delivery.endpoint_rate = -1: must be a finite number, at least 0`},
		{"endpoint_rate inf", "[delivery]\nendpoint_rate = inf", `delivery.endpoint_rate = +Inf: must be a finite number, at least 0`},
		{"retry_after_max zero", "[delivery]\nretry_after_max = \"0s\"", `delivery.retry_after_max = "0s": must be positive`},
		{"level", "[log]\nlevel = \"verbose\"", `log.level = "verbose": must be debug, info, warn or error`},
		{"level upper case", "[log]\nlevel = \"INFO\"", `log.level = "INFO": must be debug`},
		{"format", "[log]\nformat = \"xml\"", `log.format = "xml": must be text or json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.toml+"\n")
			_, err := loadConfig(path)
			if err == nil {
				t.Fatal("no error")
			}
			if got, want := err.Error(), "config "+path+": "+tt.want; !strings.HasPrefix(got, want) {
				t.Errorf("got  %q\nwant %q...", got, want)
			}
		})
	}
}

func TestLoadConfig_TokenNotShown(t *testing.T) {
	secret := "hunter2 hunter2 hunter2"
	_, err := loadConfig(writeConfig(t, "[api]\ntokens = [\""+secret+"\"]\n"))
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error shows the token: %v", err)
	}
}

func TestLoadConfig_EveryProblem(t *testing.T) {
	path := writeConfig(t, "[delivery]\nworkers = 0\n[log]\nformat = \"xml\"\n")
	_, err := loadConfig(path)
	if err == nil {
		t.Fatal("no error")
	}
	got := err.Error()
	want := "config " + path + `: delivery.workers = 0: must be 1 to 4096` + "\n" +
		"config " + path + `: log.format = "xml": must be text or json`
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestLoadConfig_Bounds checks that the edges of each allowed range are in it.
func TestLoadConfig_Bounds(t *testing.T) {
	tests := []struct {
		name string
		toml string
	}{
		{"listen any interface", "[server]\nlisten = \":0\""},
		{"listen IPv6", "[server]\nlisten = \"[::1]:8080\""},
		{"shutdown_timeout zero", "[server]\nshutdown_timeout = \"0s\""},
		{"max_body 1KiB", "[ingest]\nmax_body = \"1KiB\""},
		{"max_body 64MiB", "[ingest]\nmax_body = \"64MiB\""},
		{"api_version 64", "[ingest]\napi_version = \"" + strings.Repeat("v", 64) + "\""},
		{"schedule 25 waits", "[delivery]\nschedule = [" + strings.Repeat("\"1ms\", ", 25) + "]"},
		{"jitter 0", "[delivery]\njitter = 0.0"},
		{"jitter 0.99", "[delivery]\njitter = 0.99"},
		{"attempt_timeout equals deadline", "[delivery]\ndeadline = \"10s\"\nattempt_timeout = \"10s\""},
		{"workers 1", "[delivery]\nworkers = 1"},
		{"workers 4096", "[delivery]\nworkers = 4096\nendpoint_concurrency = 4096"},
		{"endpoint_rate fraction", "[delivery]\nendpoint_rate = 0.5"},
		{"token 16", "[api]\ntokens = [\"!#$%&'()*+,-./:;\"]"},
		{"tenant_token_ttl 720h", "[api]\ntenant_token_ttl = \"720h\""},
		{"tenant_token_ttl 1s", "[api]\ntenant_token_ttl = \"1s\""},
		{"console embedding", "[console]\nsession_ttl = \"8h\"\nframe_ancestors = [\"https://app.example.com\", \"http://localhost:3000\"]\npublic_url = \"https://hooks.example.com/\"\n[console.brand]\nname = \"Acme Webhooks\"\naccent = \"#0A7cff\"\nlogo_url = \"https://cdn.example.com/logo.svg\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := loadConfig(writeConfig(t, tt.toml+"\n")); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestLoadConfig_DecodeError(t *testing.T) {
	tests := []struct {
		name string
		toml string
		want string // the error after "config PATH: "
	}{
		{"syntax", "[server]\nlisten = \"127.0.0.1:8080\"\nshutdown_timeout = 10s\n", "line 3: "},
		{"unterminated string", "[server]\nlisten = \"127.0.0.1:8080\n", "line 2: "},
		{"duplicate key", "[log]\nlevel = \"info\"\n\nlevel = \"debug\"\n", "line 4: "},
		{"bad duration", "[delivery]\nworkers = 2\ndeadline = \"5x\"\n", `line 3: delivery.deadline: invalid duration "5x"`},
		{"duration without unit", "[server]\nshutdown_timeout = 10\n", `line 2: server.shutdown_timeout: invalid duration "10"`},
		{"bad size", "[ingest]\nmax_body = \"1.5MiB\"\n", `line 2: ingest.max_body: invalid size "1.5MiB"`},
		{"wrong type", "[delivery]\nworkers = \"many\"\n", `line 2 (last key "delivery.workers"): incompatible types`},
		{"section not a table", "server = 1\n", `line 1 (last key "server"): type mismatch`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.toml)
			_, err := loadConfig(path)
			if err == nil {
				t.Fatal("no error")
			}
			if got, want := err.Error(), "config "+path+": "+tt.want; !strings.HasPrefix(got, want) {
				t.Errorf("got  %q\nwant %q...", got, want)
			}
		})
	}
}

func TestLoadConfig_MissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.toml")
	_, err := loadConfig(path)
	if err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v, want a not-exist error naming %s", err, path)
	}
}

// TestConfig_EncodeRoundTrip checks the MarshalText methods: an encoded
// configuration loads back unchanged.
func TestConfig_EncodeRoundTrip(t *testing.T) {
	want := defaultConfig()
	want.API.Tokens = []string{"0123456789abcdef"}
	want.Ingest.MaxBody = 64 * KB
	want.Delivery.Schedule = []Duration{{10 * time.Millisecond}, {90 * time.Minute}}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(want); err != nil {
		t.Fatal(err)
	}
	got, err := loadConfig(writeConfig(t, buf.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v\nfrom:\n%s", got, want, buf.String())
	}
}

func TestConfig_adminTokenFile(t *testing.T) {
	tests := []struct {
		path, tokenFile, want string
	}{
		{"data/webhookd.db", "", filepath.Join("data", "admin-token")},
		{"webhookd.db", "", "admin-token"},
		{"/var/lib/webhookd/db", "", filepath.Join("/var/lib/webhookd", "admin-token")},
		{"data/webhookd.db", "/run/token", "/run/token"},
	}
	for _, tt := range tests {
		t.Run(tt.path+"|"+tt.tokenFile, func(t *testing.T) {
			c := defaultConfig()
			c.Storage.Path, c.API.TokenFile = tt.path, tt.tokenFile
			if got := c.adminTokenFile(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDuration_UnmarshalText(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"5s", 5 * time.Second, false},
		{"10ms", 10 * time.Millisecond, false},
		{"75m", 75 * time.Minute, false},
		{"24h", 24 * time.Hour, false},
		{"1h30m", 90 * time.Minute, false},
		{"1.5h", 90 * time.Minute, false},
		{"250us", 250 * time.Microsecond, false},
		{"250µs", 250 * time.Microsecond, false},
		{"1ns", 1, false},
		{"0", 0, false},
		{"0s", 0, false},
		{"-5s", -5 * time.Second, false}, // parses; validation rejects
		{"", 0, true},
		{"10", 0, true}, // no unit
		{"5", 0, true},
		{"1d", 0, true}, // no day unit
		{"5 s", 0, true},
		{" 5s", 0, true},
		{"5S", 0, true},
		{"s", 0, true},
		{"5x", 0, true},
		{"1.500000", 0, true}, // a TOML float, as the decoder passes it
		{"9999999999h", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var d Duration
			err := d.UnmarshalText([]byte(tt.in))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got %v, want an error", d.Duration)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.in)) {
					t.Errorf("error %q does not show the value", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Duration; got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDuration_MarshalText(t *testing.T) {
	for _, d := range []time.Duration{0, time.Nanosecond, 10 * time.Millisecond, 5 * time.Second, 75 * time.Minute, 24 * time.Hour, -time.Second} {
		text, err := Duration{d}.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var got Duration
		if err := got.UnmarshalText(text); err != nil || got.Duration != d {
			t.Errorf("%v: MarshalText %q reads back as %v, %v", d, text, got.Duration, err)
		}
	}
}

func TestByteSize_UnmarshalText(t *testing.T) {
	tests := []struct {
		in      string
		want    ByteSize
		wantErr bool
	}{
		{"0", 0, false},
		{"1", 1, false},
		{"65536", 65536, false},
		{"512B", 512, false},
		{"1KB", 1000, false},
		{"64KB", 64000, false},
		{"1KiB", 1024, false},
		{"256KiB", 256 * 1024, false},
		{"1MB", 1000 * 1000, false},
		{"1MiB", 1 << 20, false},
		{"64MiB", 64 << 20, false},
		{"2GB", 2e9, false},
		{"2GiB", 2 << 30, false},
		{"256kib", 256 * 1024, false}, // units ignore case
		{"1kB", 1000, false},
		{"1mib", 1 << 20, false},
		{"0KiB", 0, false},
		{"007B", 7, false},
		{"9223372036854775807", math.MaxInt64, false},
		{"8589934591GiB", 8589934591 << 30, false}, // the largest whole GiB
		{"", 0, true},
		{"KiB", 0, true},
		{"B", 0, true},
		{"-1", 0, true},
		{"-1KiB", 0, true},
		{"+1KiB", 0, true},
		{"1.5MiB", 0, true},
		{"1.000000", 0, true}, // a TOML float, as the decoder passes it
		{"1 KiB", 0, true},
		{" 1KiB", 0, true},
		{"1KiB ", 0, true},
		{"1K", 0, true},
		{"1Ki", 0, true},
		{"1TB", 0, true},
		{"1KiBB", 0, true},
		{"1_024", 0, true},
		{"0x400", 0, true},
		{"1e3", 0, true},
		{"9223372036854775808", 0, true}, // overflows int64
		{"8589934592GiB", 0, true},       // overflows after the unit
		{"99999999999999999999KB", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var got ByteSize
			err := got.UnmarshalText([]byte(tt.in))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got %d, want an error", got)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.in)) {
					t.Errorf("error %q does not show the value", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestByteSize_MarshalText(t *testing.T) {
	tests := []struct {
		in   ByteSize
		want string
	}{
		{0, "0B"},
		{1, "1B"},
		{512, "512B"},
		{1000, "1KB"},
		{1024, "1KiB"},
		{1536, "1536B"},
		{64 * KB, "64KB"},
		{256 * KiB, "256KiB"},
		{1000 * KiB, "1000KiB"},
		{MiB, "1MiB"},
		{64 * MiB, "64MiB"},
		{GB, "1GB"},
		{3 * GiB, "3GiB"},
		{math.MaxInt64, "9223372036854775807B"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			text, err := tt.in.MarshalText()
			if err != nil {
				t.Fatal(err)
			}
			if got := string(text); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			var back ByteSize
			if err := back.UnmarshalText(text); err != nil || back != tt.in {
				t.Errorf("%q reads back as %d, %v", text, back, err)
			}
		})
	}
}

func FuzzByteSize_UnmarshalText(f *testing.F) {
	for _, s := range []string{"0", "512B", "64KB", "256KiB", "1MiB", "2GiB", "1.5MiB", "-1", "9223372036854775807", "8589934592GiB", "kib"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b ByteSize
		if err := b.UnmarshalText([]byte(s)); err != nil {
			return
		}
		if b < 0 {
			t.Fatalf("%q parsed as negative %d", s, b)
		}
		text, err := b.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back ByteSize
		if err := back.UnmarshalText(text); err != nil || back != b {
			t.Fatalf("%q = %d marshals as %q, which reads back as %d, %v", s, b, text, back, err)
		}
	})
}

func FuzzDuration_UnmarshalText(f *testing.F) {
	for _, s := range []string{"0", "10ms", "5s", "75m", "1h30m", "-5s", "10", "1d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var d Duration
		if err := d.UnmarshalText([]byte(s)); err != nil {
			return
		}
		text, err := d.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := back.UnmarshalText(text); err != nil || back != d {
			t.Fatalf("%q = %v marshals as %q, which reads back as %v, %v", s, d.Duration, text, back.Duration, err)
		}
	})
}

// TestApplyMemoryLimit: [server] memory_limit becomes the runtime's
// memory limit with proportional pacing off; 0 leaves Go's defaults, and
// GOMEMLIMIT or GOGC in the environment stand over it.
func TestApplyMemoryLimit(t *testing.T) {
	before, gcPercent := debug.SetMemoryLimit(-1), debug.SetGCPercent(100)
	t.Cleanup(func() {
		debug.SetMemoryLimit(before)
		debug.SetGCPercent(gcPercent)
	})
	noEnv := func(string) string { return "" }
	if got := applyMemoryLimit(noEnv, 0); got != "" || debug.SetMemoryLimit(-1) != before {
		t.Errorf("limit 0: %q, runtime limit %d; want nothing done", got, debug.SetMemoryLimit(-1))
	}
	for _, env := range []string{"GOMEMLIMIT", "GOGC"} {
		set := func(k string) string {
			if k == env {
				return "1"
			}
			return ""
		}
		if got := applyMemoryLimit(set, 512*MiB); !strings.Contains(got, "not applied") || debug.SetMemoryLimit(-1) != before {
			t.Errorf("with %s set: %q, runtime limit %d; want the environment to stand", env, got, debug.SetMemoryLimit(-1))
		}
	}
	if got := applyMemoryLimit(noEnv, 512*MiB); !strings.Contains(got, "512MiB") {
		t.Errorf("applied: %q", got)
	}
	if got := debug.SetMemoryLimit(-1); got != int64(512*MiB) {
		t.Errorf("runtime memory limit %d, want %d", got, 512*MiB)
	}
	if got := debug.SetGCPercent(100); got != -1 {
		t.Errorf("GOGC was %d after applying the budget, want off (-1)", got)
	}
}

// TestLoadConfig_Tracing: [tracing] loads with the operator's header
// names as they are spelled, and refuses what the exporter cannot use,
// naming the key and never a header's value.
func TestLoadConfig_Tracing(t *testing.T) {
	got, err := loadConfig(writeConfig(t, "[tracing]\nenabled = true\nendpoint = \"https://otel.example.com:4318/v1/traces\"\nsampler = \"traceidratio\"\nsampler_ratio = 0.25\nservice_name = \"hooks-eu\"\n[tracing.headers]\n\"X-Api-Key\" = \"key-value-secret\"\nauthorization = \"Basic abc\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := TracingConfig{Enabled: true, Endpoint: "https://otel.example.com:4318/v1/traces", Sampler: "traceidratio", SamplerRatio: 0.25, ServiceName: "hooks-eu",
		Headers: map[string]string{"X-Api-Key": "key-value-secret", "authorization": "Basic abc"}}
	if !reflect.DeepEqual(got.Tracing, want) {
		t.Errorf("got %+v, want %+v", got.Tracing, want)
	}
	// Turned on with nothing else, it samples a tenth of the events
	// (DefaultTracingRatio says why), following callers' traces.
	on, err := loadConfig(writeConfig(t, "[tracing]\nenabled = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if on.Tracing.Sampler != "parentbased_traceidratio" || on.Tracing.SamplerRatio != 0.1 {
		t.Errorf("the default sampler is %s at %v, want parentbased_traceidratio at 0.1", on.Tracing.Sampler, on.Tracing.SamplerRatio)
	}
	for _, tt := range []struct {
		name, toml, want string
	}{
		{"endpoint not a URL", "[tracing]\nendpoint = \"localhost:4318\"", `tracing.endpoint = "localhost:4318": must be an http or https URL`},
		{"endpoint with user info", "[tracing]\nendpoint = \"https://user:pw-secret@otel.example.com/v1/traces\"", `tracing.endpoint: must not hold user info: put credentials in [tracing.headers]`},
		{"header name", "[tracing.headers]\n\"X Key\" = \"hv-secret\"", `tracing.headers: "X Key" is not a header name`},
		{"header value on two lines", "[tracing.headers]\nX-Key = \"a\\nhv-secret\"", `tracing.headers.X-Key: the value must be one line`},
		{"sampler", "[tracing]\nsampler = \"sometimes\"", `tracing.sampler = "sometimes": must be one of parentbased_traceidratio, `},
		{"ratio", "[tracing]\nsampler_ratio = 1.5", `tracing.sampler_ratio = 1.5: must be from 0 to 1`},
		{"service name", "[tracing]\nservice_name = \" \"", `tracing.service_name = " ": must name the service`},
		{"unknown key", "[tracing]\nurl = \"http://x\"", `unknown key tracing.url`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.toml+"\n")
			_, err := loadConfig(path)
			if err == nil {
				t.Fatal("no error")
			}
			if got, want := err.Error(), "config "+path+": "+tt.want; !strings.HasPrefix(got, want) {
				t.Errorf("got  %q\nwant %q...", got, want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows a secret: %v", err)
			}
		})
	}
}

// TestLoadConfig_Proxy: [delivery] proxy becomes the target policy's
// proxy, credentials included; what is not a proxy URL is refused,
// naming the key and never the value (it may hold a password).
func TestLoadConfig_Proxy(t *testing.T) {
	got, err := loadConfig(writeConfig(t, "[delivery]\nproxy = \"http://egress:pw-secret-7f3a@proxy.internal:3128\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := got.Delivery.targetPolicy(false).Proxy
	if p == nil || p.Host != "proxy.internal:3128" || p.User.Username() != "egress" {
		t.Fatalf("proxy %v, want http://egress:…@proxy.internal:3128", p)
	}
	if def, err := loadConfig(writeConfig(t, "")); err != nil || def.Delivery.targetPolicy(false).Proxy != nil {
		t.Errorf("by default: proxy %v, %v; want none", def.Delivery.targetPolicy(false).Proxy, err)
	}
	for _, tt := range []struct{ value, want string }{
		{"proxy.internal:3128", "must be an http://, https:// or socks5:// URL"},
		{"ftp://u:pw-secret-7f3a@proxy.internal:21", "must be an http://, https:// or socks5:// URL"},
		{"http://u:pw-secret-7f3a@proxy.internal", "must name the proxy's host and port"},
		{"http://u:pw-secret-7f3a@proxy.internal:3128/path", "no path, query or fragment"},
		{"http://u:pw-secret-7f3a@proxy.internal:3128/?x=1", "no path, query or fragment"},
		{"http://u:pw-secret-7f3a@[::1", "it does not parse"},
	} {
		_, err := loadConfig(writeConfig(t, "[delivery]\nproxy = \""+tt.value+"\"\n"))
		if err == nil || !strings.Contains(err.Error(), "delivery.proxy") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("proxy %q: %v, want delivery.proxy %s", tt.value, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw-secret") {
			t.Errorf("proxy %q: the error shows the password: %v", tt.value, err)
		}
	}
}
