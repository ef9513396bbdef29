// Command webhookd is a single-binary outbound webhook service: apps POST
// events to it, and it stores them durably in one bbolt file, signs them,
// delivers them to their subscribers' endpoints, retries, dead-letters and
// replays them.
//
//	webhookd [serve] [-config FILE] [-listen ADDR] [-db PATH] [-dev]
//	webhookd COMMAND [flags]     (see commands)
//
// Without -config (or WEBHOOKD_CONFIG) it runs on the built-in defaults,
// which config.example.toml lists.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/webhookd/webhookd/bench"
	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/jsonschema"
)

func main() {
	if n := extraProc(os.Getenv, runtime.GOMAXPROCS(0)); n > 0 {
		runtime.GOMAXPROCS(n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "webhookd:", err)
		os.Exit(exitCode(err))
	}
}

// exitCode is the status webhookd exits with after err: 2 for a command
// line it cannot take (a usage error: an unknown command or flag, a
// flag's bad value, a missing or extra argument), as the flag package
// and most Unix tools do; 1 for any other failure (a port in use, a
// database locked, a config file's error).
func exitCode(err error) int {
	var u interface{ UsageError() bool }
	if errors.As(err, &u) && u.UsageError() {
		return 2
	}
	return 1
}

// usageError is a command line webhookd cannot take (exitCode 2). A
// package outside main marks its own the same way: an error with a
// UsageError method that returns true (bench.Main's).
type usageError struct{ err error }

func (e usageError) Error() string    { return e.err.Error() }
func (e usageError) Unwrap() error    { return e.err }
func (e usageError) UsageError() bool { return true }

// usagef is a usageError of the formatted message.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// parseFlags parses args into fs: a flag error is a usageError (the flag
// package has already printed it with the flags), -h is flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{err}
}

// extraProc returns the GOMAXPROCS webhookd runs with, one more than the
// runtime's default procs (the CPUs it may use), or 0 to leave it as it
// is: when the GOMAXPROCS environment variable is set, the operator's value
// stands.
//
// Why one more: every commit is two fdatasyncs, and the commit loop's
// thread keeps its P while it waits in one, until the runtime's monitor
// takes the P back (tens of microseconds or more later, each time). At
// thousands of commits a second that leaves a 2-core machine running on
// one P for a large part of the time, and ingest and delivery then queue
// for it. With one spare P, the other CPUs stay busy while the loop's
// thread waits on the disk. On the bench's 2-core machine (sustained, 5 000
// events/s in and out) it took the end-to-end p99 from 0.6-2.4 s to
// 5-10 ms, with less CPU used. Setting it turns off the runtime's own
// updates of GOMAXPROCS to a changed CPU limit; restart after changing one.
func extraProc(getenv func(string) string, procs int) int {
	if getenv("GOMAXPROCS") != "" {
		return 0
	}
	return procs + 1
}

// applyMemoryLimit sets the runtime's memory limit to limit ([server]
// memory_limit) and turns off the collector's proportional pacing, so the
// heap grows to the budget before it is collected; it returns what it did,
// for the log, or "" when it did nothing (limit 0). When the GOMEMLIMIT or
// GOGC environment variable is set, the operator's values stand, as with
// GOMAXPROCS.
//
// Why: the collector is 10-20% of webhookd's CPU under load (ingest and
// delivery allocate per request, and the live heap is small), and its
// assists land on the requests being served. On the bench's 2-core machine
// GOGC=off with GOMEMLIMIT=512MiB took ingest-only's p99 at 64 clients
// from 15.9-20.5 ms to 13.2-18.3 ms and one client's from 2.8-4.7 ms to
// 1.3-1.8 ms over five alternating pairs (docs/performance.md). The budget is not a cap on the
// process: past it the collector runs as often as it must, which is why
// the config refuses a budget under a full backlog's heap.
func applyMemoryLimit(getenv func(string) string, limit ByteSize) string {
	if limit <= 0 {
		return ""
	}
	if getenv("GOMEMLIMIT") != "" || getenv("GOGC") != "" {
		return fmt.Sprintf("GOMEMLIMIT/GOGC set in the environment: [server] memory_limit %s not applied", limit)
	}
	debug.SetMemoryLimit(int64(limit))
	debug.SetGCPercent(-1)
	return fmt.Sprintf("heap collected as it nears %s ([server] memory_limit)", limit)
}

// command is a subcommand: webhookd NAME [flags].
type command func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// subcommand is a command and what it does, in one line for the help.
type subcommand struct {
	run   command
	about string
}

// commands are the subcommands besides serving: webhookd NAME [flags]
// runs commands[NAME]. This table is the whole list; help prints it.
var commands = map[string]subcommand{
	"backup":     {runBackup, "write a consistent copy of the bbolt database, hot through a running webhookd or from the file"},
	"bench":      {bench.Main, "measure throughput and latency against their ceilings on this machine (-list: the scenarios)"},
	"compact":    {runCompact, "compact a stopped node's bbolt file, into a new file or in place"},
	"migrate":    {runMigrate, "copy a stopped node's bbolt file into PostgreSQL, pending deliveries included"},
	"new-token":  {runNewToken, "print a new random API token (-env live or test) and the form of it a config file may hold"},
	"receive":    {runReceive, "a reference receiver: verifies each request, keeps it once in an inbox, prints a line per request"},
	"rotate-key": {runRotateKey, "re-seal a stopped node's endpoint secrets under a new secret key"},
	"version":    {runVersion, "print the version"},
}

// serveAbout is serve's line in the help.
const serveAbout = "run the service (the default when no command is given)"

// helpAbout is help's line in the help.
const helpAbout = "list the commands, or show what one does and its flags (webhookd help COMMAND)"

// run is the whole program: it returns when ctx is cancelled (SIGINT,
// SIGTERM) and the shutdown is done, or when start-up fails. With a first
// argument that names a subcommand, it runs that instead of the service.
// A help asked for (webhookd help, -h; webhookd help CMD, CMD -h) is
// printed to stdout and is no error.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "help", "-h", "-help", "--help":
			if args[0] == "help" && len(args) > 1 {
				return helpCommand(ctx, args[1], getenv, stdout)
			}
			return help(ctx, getenv, stdout)
		}
		if cmd, ok := commands[args[0]]; ok {
			return helpIsNoError(cmd.run(ctx, args[1:], getenv, stdout, stderr))
		}
		if args[0] == "serve" {
			args = args[1:]
		}
	}
	return helpIsNoError(serve(ctx, args, getenv, stdout, stderr))
}

// helpIsNoError is err, but nil when it is a flag set's -h.
func helpIsNoError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// help prints every command with its line, then the service's flags.
func help(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	fmt.Fprintf(stdout, "webhookd: durable, signed outbound webhooks in one binary.\n\n")
	fmt.Fprintf(stdout, "Usage:\n  webhookd [serve] [flags]     %s\n  webhookd COMMAND [flags]\n  webhookd help COMMAND        a command's flags\n\nCommands:\n", serveAbout)
	names := make([]string, 0, len(commands)+1)
	for name := range commands {
		names = append(names, name)
	}
	slices.Sort(names)
	fmt.Fprintf(stdout, "  %-12s %s\n", "serve", serveAbout)
	fmt.Fprintf(stdout, "  %-12s %s\n", "help", helpAbout)
	for _, name := range names {
		fmt.Fprintf(stdout, "  %-12s %s\n", name, commands[name].about)
	}
	fmt.Fprintf(stdout, "\nThe service's flags (webhookd help serve):\n")
	return helpIsNoError(serve(ctx, []string{"-h"}, getenv, io.Discard, stdout))
}

// helpCommand prints what command name does and its flags.
func helpCommand(ctx context.Context, name string, getenv func(string) string, stdout io.Writer) error {
	if name == "help" {
		fmt.Fprintf(stdout, "webhookd help: %s\n\nUsage:\n  webhookd help           every command, and the service's flags\n  webhookd help COMMAND   what COMMAND does, and its flags (the same as webhookd COMMAND -h)\n", helpAbout)
		return nil
	}
	if name == "serve" {
		fmt.Fprintf(stdout, "webhookd serve: %s\n\n", serveAbout)
		return helpIsNoError(serve(ctx, []string{"-h"}, getenv, io.Discard, stdout))
	}
	cmd, ok := commands[name]
	if !ok {
		return usagef("no command %q: webhookd help lists them", name)
	}
	fmt.Fprintf(stdout, "webhookd %s: %s\n\n", name, cmd.about)
	return helpIsNoError(cmd.run(ctx, []string{"-h"}, getenv, io.Discard, stdout))
}

// serve runs the service until ctx ends.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("webhookd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", getenv("WEBHOOKD_CONFIG"), "TOML config `file` (default: built-in defaults; env WEBHOOKD_CONFIG)")
	listen := fs.String("listen", "", "listen `address`, overriding [server] listen")
	dbPath := fs.String("db", "", "database `path`, overriding [storage] path")
	dev := fs.Bool("dev", false, "local development: allow plain http and loopback/private endpoint URLs (as [delivery] allow_http and allow_private_targets); never in production")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *showVersion {
		return runVersion(ctx, nil, getenv, stdout, stderr)
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (webhookd help lists the commands)", fs.Arg(0))
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	if *listen != "" {
		cfg.Server.Listen = *listen
	}
	if *dbPath != "" {
		cfg.Storage.Path = *dbPath
	}
	logger := newLogger(cfg.Log, stderr)
	if gc := applyMemoryLimit(getenv, cfg.Server.MemoryLimit); gc != "" {
		logger.Info("memory budget", "gc", gc)
	}
	if *dev {
		logger.Warn("-dev: endpoints may use plain http and loopback or private addresses; never run a production webhookd with -dev")
	}
	key, err := secretKey(cfg.Storage, getenv)
	if err != nil {
		return err
	}
	// The port first: a start that cannot listen (another webhookd on
	// it) fails before it makes or opens anything on disk, the database
	// file and the admin-token file included.
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Server.Listen, err)
	}
	defer ln.Close() // after Serve, a second Close that does nothing

	m := newMetrics()
	tr, err := startTracing(ctx, cfg.Tracing, logger)
	if err != nil {
		return err
	}
	var tracer engine.Tracer // nil, not a nil *tracing.Tracer, when off
	if tr != nil {
		tracer = tr
		defer func() { // after a start that failed; a stop has flushed already (Shutdown is then a no-op)
			c, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			tr.Shutdown(c)
		}()
		logger.Info("tracing on", "endpoint", cfg.Tracing.Endpoint, "sampler", cfg.Tracing.Sampler, "sampler_ratio", cfg.Tracing.SamplerRatio)
	}
	if p := cfg.Delivery.targetPolicy(false).Proxy; p != nil {
		logger.Info("deliveries go through a proxy", "proxy", p.Redacted()) // its password as xxxxx
	}
	be, err := openBackend(ctx, cfg, key, getenv, m, tr, logger)
	if err != nil {
		return err
	}
	defer be.close()
	if id := be.SecretKeyID(); id != "" {
		logger.Info("endpoint secrets are encrypted at rest", "key_id", id)
	}

	tokens, err := adminTokens(cfg, logger)
	if err != nil {
		return err
	}

	var alerts *engine.AlertOptions
	if cfg.Alerts.URL != "" {
		alerts = &engine.AlertOptions{URL: cfg.Alerts.URL, Secret: cfg.Alerts.Secret}
	}
	standard, policies := cfg.retryPolicies()
	node := engine.NewNode(be.Backend, engine.NodeOptions{
		Logger: logger,
		Dispatcher: engine.DispatcherOptions{
			Scheduler:           be.sched,
			ClaimAhead:          be.claimAhead,
			Policy:              standard,
			Policies:            policies,
			Workers:             cfg.Delivery.Workers,
			EndpointConcurrency: cfg.Delivery.EndpointConcurrency,
			TenantConcurrency:   cfg.Delivery.TenantConcurrency,
			EndpointRate:        cfg.Delivery.EndpointRate,
			OnAttempt:           m.observeAttempt,
			Targets:             cfg.Delivery.targetPolicy(*dev),
			DisableAfter:        cfg.Delivery.DisableAfter.Duration,
			KeepGoneEndpoints:   !cfg.Delivery.DisableOnGone,
		},
		Service: engine.ServiceOptions{
			IdempotencyWindow: cfg.Ingest.IdempotencyWindow.Duration,
			APIVersion:        cfg.Ingest.APIVersion,
			MaxPending:        cfg.Ingest.MaxPending,

			MaxEndpointsPerTenant: cfg.Limits.EndpointsPerTenant,
			MaxPendingPerTenant:   cfg.Limits.PendingPerTenant,
			TenantIngestRate:      cfg.Limits.IngestRatePerTenant,
			TenantIngestBurst:     cfg.Limits.IngestBurstPerTenant,
			Tasks:                 engine.TaskOptions{MaxPerTenant: cfg.Limits.TasksPerTenant, Lease: be.taskLease},

			Targets:                     cfg.Delivery.targetPolicy(*dev),
			DefaultEnvironment:          engine.Environment(cfg.API.DefaultEnvironment),
			RequireEndpointVerification: cfg.Delivery.RequireEndpointVerification,

			Schemas:         jsonschema.Compiler{},
			DeprecatedEvent: m.observeDeprecated,
		},
		Alerts: alerts,
		Janitor: &engine.JanitorOptions{Succeeded: cfg.Retention.Succeeded.Duration, Dead: cfg.Retention.Dead.Duration, Every: cfg.Retention.Interval.Duration,
			Tasks: cfg.Retention.Tasks.Duration},
		Tracer: tracer,
	})
	svc := node.Service
	m.watch(node.Dispatcher, node.Service, be)
	api := httpapi.New(svc, httpapi.Options{
		Tokens:  tokens,
		MaxBody: int64(cfg.Ingest.MaxBody),
		Logger:  logger,
		Backup:  be.Backup(),
		Metrics: m.handler(),

		TestTokens:  cfg.API.TestTokens,
		IngestRate:  cfg.API.IngestRate,
		IngestBurst: cfg.API.IngestBurst,

		TenantTokenTTL: cfg.API.TenantTokenTTL.Duration,
		Console: httpapi.ConsoleOptions{
			SessionTTL:     cfg.Console.SessionTTL.Duration,
			FrameAncestors: cfg.Console.FrameAncestors,
			PublicURL:      strings.TrimSuffix(cfg.Console.PublicURL, "/"),
			Brand:          httpapi.Brand{Name: cfg.Console.Brand.Name, Accent: cfg.Console.Brand.Accent, LogoURL: cfg.Console.Brand.LogoURL},
			Secret:         consoleSecret(key, tokens),
		},

		ObserveRequest: m.observeRequest,
		ObserveIngest:  m.observeIngest,
		Ready: func() error {
			if err := be.Writable(ctx, int(cfg.Ingest.MaxBody)); err != nil {
				return err
			}
			return svc.Ready()
		},
	})

	if err := node.Start(ctx); err != nil {
		return err
	}
	if tr != nil {
		api = tr.Handler(api) // an ingest continues its caller's trace
	}
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// The backup handler moves its own write deadline forward piece by
		// piece (httpapi's handleBackup), so this does not cut it.
		WriteTimeout:   cfg.Server.WriteTimeout.Duration,
		IdleTimeout:    cfg.Server.IdleTimeout.Duration,
		MaxHeaderBytes: httpapi.ServerMaxHeaderBytes, // httpapi answers above httpapi.MaxHeaderBytes
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	logger.Info("webhookd started", "version", versionString(), "listen", ln.Addr().String(), "storage", cfg.Storage.Driver, "db", be.where)
	fmt.Fprintf(stdout, "webhookd listening on http://%s\n", ln.Addr())

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		logger.Error("http server stopped", "err", err)
	}

	// Shutdown order: stop taking requests, let attempts in flight finish
	// and record their outcome, then close the database.
	logger.Info("shutting down", "timeout", cfg.Server.ShutdownTimeout.Duration)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Server.ShutdownTimeout.Duration)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("http shutdown cut short", "err", err)
		srv.Close()
	}
	if err := node.Stop(sctx); err != nil {
		logger.Warn("engine stop cut short", "err", err)
	}
	if err := closeWithin(sctx, be.close, closeGrace); err != nil {
		return fmt.Errorf("close database: %w", err)
	}
	if tr != nil {
		// The last spans (the shutdown's commits among them), within
		// what is left of the timeout.
		if err := tr.Shutdown(sctx); err != nil {
			logger.Warn("tracing: the last spans were not all exported", "err", err)
		}
	}
	logger.Info("stopped")
	return nil
}

// closeGrace is how long closing the database may take past the
// shutdown deadline.
const closeGrace = 2 * time.Second

// closeWithin calls close and returns its error, or gives up on it when
// ctx has ended and grace more has passed: a write hung on the disk holds
// bbolt's Close for as long as the disk does, and a process told to stop
// must stop. Giving up loses nothing acknowledged (every acknowledgement
// waited for its fsync); the write in progress did not commit, and its
// delivery is attempted again at the next start. close goes on in the
// background until the process exits.
func closeWithin(ctx context.Context, close func() error, grace time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- close() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("not closed %s after the shutdown timeout: a write is still in progress (a hung disk?); what was acknowledged is on disk", grace)
	}
}

func newLogger(c LogConfig, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.slogLevel()}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// adminTokens returns the configured admin tokens, or the one kept in the
// token file, made on first start: "whk_live_" + 32 random bytes in base64url,
// written with mode 0600. The token itself is never logged.
func adminTokens(cfg Config, logger *slog.Logger) ([]string, error) {
	if len(cfg.API.Tokens) > 0 {
		return cfg.API.Tokens, nil
	}
	path := cfg.adminTokenFile()
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return nil, fmt.Errorf("admin token file %s is empty", path)
		}
		logger.Info("admin token read from file", "path", path)
		return []string{tok}, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("read admin token: %w", err)
	}
	if cfg.Storage.Driver == "postgres" {
		// Every node of a cluster must accept the same tokens: one made
		// here would be this node's alone.
		return nil, fmt.Errorf("no admin token: with [storage] driver = \"postgres\" set [api] tokens (the same on every node) or put one in %s", path)
	}
	var raw [32]byte
	rand.Read(raw[:]) // never returns an error: it crashes the program instead (Go 1.24)
	tok := liveTokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("write admin token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return nil, fmt.Errorf("write admin token: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("write admin token: %w", err)
	}
	logger.Warn("no admin token configured: made one and saved it; use it as 'Authorization: Bearer <token>'", "path", path)
	return []string{tok}, nil
}
