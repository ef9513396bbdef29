package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/webhookd/webhookd/verify"
	"github.com/webhookd/webhookd/verify/boltinbox"
)

// receiveSecretEnv holds the receiver's secrets when no -secret is given,
// comma-separated: an environment variable does not show in ps like a flag.
const receiveSecretEnv = "WEBHOOKD_RECEIVE_SECRET"

// receiveConfig is what `webhookd receive` runs with: the flags, or the
// TOML file named by -config with the same keys (all optional):
//
//	listen    = "127.0.0.1:9000"
//	secrets   = ["whsec_…"]        # every active secret: two while rotating
//	inbox     = "data/receiver-inbox.db"
//	tolerance = "5m"
//	fail_rate = 0.0
//	ordered   = false
//
// A flag overrides the file; -secret overrides WEBHOOKD_RECEIVE_SECRET,
// which overrides secrets in the file.
type receiveConfig struct {
	// Listen is the host:port to listen on; port 0 picks a free one.
	Listen string `toml:"listen"`
	// Secrets are the endpoint's signing secrets, "whsec_" + base64. A
	// request verifies if it is signed with any of them. Never printed.
	Secrets []string `toml:"secrets"`
	// Inbox is the bbolt file that records which events were processed.
	// Its directory is created if missing.
	Inbox string `toml:"inbox"`
	// Tolerance is the largest accepted distance between a signature's
	// timestamp and the clock. Must be positive.
	Tolerance Duration `toml:"tolerance"`
	// FailRate is the fraction of new events whose processing fails on
	// purpose, from 0 to 1: their write is rolled back and the answer is
	// 500, so webhookd retries them. Zero: none fail.
	FailRate float64 `toml:"fail_rate"`
	// Ordered refuses, with 425, an event whose previous event in its
	// ordering key (webhook-previous-sequence) the inbox has not
	// processed yet, so webhookd retries it after that one: the
	// receiver processes each key's events in sequence order
	// (verify.Receiver.Ordered).
	Ordered bool `toml:"ordered"`
}

func defaultReceiveConfig() receiveConfig {
	return receiveConfig{
		Listen:    "127.0.0.1:9000",
		Inbox:     "data/receiver-inbox.db",
		Tolerance: Duration{verify.DefaultTolerance},
	}
}

// runReceive is `webhookd receive`: a reference receiver. It verifies each
// request with verify.Handler, records it in a bbolt inbox (processing it
// at most once, by writing its body to the bucket receive.events in the
// inbox's transaction) and prints one line per request to stdout:
//
//	2026-12-02T14:35:10Z evt_… payment.succeeded verified new
//	2026-12-02T14:35:11Z evt_… payment.succeeded verified duplicate
//	2026-12-02T14:35:12Z evt_… payment.succeeded rejected (401): invalid signature (timestamp too old: …)
//
// It answers a Standard Webhooks endpoint-verification challenge
// (webhook-challenge) with the first secret. It never prints a secret or a
// signature. It stops when ctx ends.
func runReceive(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	def := defaultReceiveConfig()
	fs := flag.NewFlagSet("webhookd receive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "TOML `file` with listen, secrets, inbox, tolerance, fail_rate and ordered (flags override it)")
	listen := fs.String("listen", def.Listen, "listen `address`")
	var secrets []string
	fs.Func("secret", "the endpoint's signing `secret` (whsec_…); repeat it, or separate with commas, to accept new and old while rotating, newest first (default: env "+receiveSecretEnv+")", func(s string) error {
		secrets = append(secrets, splitList(s)...)
		return nil
	})
	inbox := fs.String("inbox", def.Inbox, "bbolt inbox `file`: the events already processed")
	tolerance := fs.Duration("tolerance", def.Tolerance.Duration, "largest accepted distance between a signature's timestamp and the clock")
	failRate := fs.Float64("fail-rate", 0, "fraction of new events whose processing fails (answered 500, so webhookd retries), 0 to 1")
	ordered := fs.Bool("ordered", false, "process each ordering key's events in sequence order: answer 425 (webhookd retries) to one whose previous event is not processed yet")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("receive: unexpected argument %q", fs.Arg(0))
	}

	cfg := def
	if *configPath != "" {
		var err error
		if cfg, err = loadReceiveConfig(*configPath); err != nil {
			return err
		}
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "listen":
			cfg.Listen = *listen
		case "inbox":
			cfg.Inbox = *inbox
		case "tolerance":
			cfg.Tolerance.Duration = *tolerance
		case "fail-rate":
			cfg.FailRate = *failRate
		case "ordered":
			cfg.Ordered = *ordered
		}
	})
	switch env := getenv(receiveSecretEnv); {
	case len(secrets) > 0:
		cfg.Secrets = secrets
	case env != "":
		cfg.Secrets = splitList(env)
	}
	if err := cfg.validate(); err != nil {
		return err
	}

	if err := os.MkdirAll(filepath.Dir(cfg.Inbox), 0o700); err != nil {
		return fmt.Errorf("receive: inbox: %w", err)
	}
	ib, err := boltinbox.Open(cfg.Inbox)
	if errors.Is(err, berrors.ErrTimeout) {
		return fmt.Errorf("receive: inbox %s is in use by another process", cfg.Inbox)
	}
	if err != nil {
		return fmt.Errorf("receive: %w", err)
	}
	defer ib.Close()

	rs := newReceiveServer(cfg, ib, stdout, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("receive: listen on %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{
		Handler:           rs,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(rs.log.Handler(), slog.LevelError),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	inOrder := ""
	if cfg.Ordered {
		inOrder = ", each ordering key in sequence order"
	}
	rs.printf("webhookd receive listening on http://%s (inbox %s, %d %s%s)\n",
		ln.Addr(), cfg.Inbox, len(cfg.Secrets), plural(len(cfg.Secrets), "secret", "secrets"), inOrder)

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("receive: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := ib.Close(); err != nil {
		return fmt.Errorf("receive: close inbox: %w", err)
	}
	return nil
}

// loadReceiveConfig reads a receiver's TOML file on top of the defaults.
// Unknown keys are errors.
func loadReceiveConfig(path string) (receiveConfig, error) {
	cfg := defaultReceiveConfig()
	md, err := toml.DecodeFile(path, &cfg)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return receiveConfig{}, fmt.Errorf("receive config %s: line %d: %s", path, perr.Position.Line, perr.Message)
		}
		return receiveConfig{}, fmt.Errorf("receive config %s: %s", path, strings.TrimPrefix(err.Error(), "toml: "))
	}
	known := []string{"listen", "secrets", "inbox", "tolerance", "fail_rate", "ordered"}
	var unknown []string
	for _, k := range md.Keys() {
		if !slices.Contains(known, k.String()) {
			unknown = append(unknown, k.String())
		}
	}
	if len(unknown) > 0 {
		return receiveConfig{}, fmt.Errorf("receive config %s: unknown %s %s (known: %s)", path,
			plural(len(unknown), "key", "keys"), strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	return cfg, nil
}

// validate reports what the receiver cannot run with. A secret is named
// by its position, never shown.
func (c receiveConfig) validate() error {
	var errs []error
	if _, port, err := net.SplitHostPort(c.Listen); err != nil || port == "" {
		errs = append(errs, fmt.Errorf("receive: listen %q: must be host:port, like 127.0.0.1:9000", c.Listen))
	}
	if len(c.Secrets) == 0 {
		errs = append(errs, errors.New("receive: no secret: give the endpoint's signing secret with -secret whsec_… (or env "+receiveSecretEnv+")"))
	}
	for i, s := range c.Secrets {
		if _, err := verify.StandardKey(s); err != nil {
			errs = append(errs, fmt.Errorf("receive: secret %d of %d is not whsec_ + base64, as webhookd shows it when it creates the endpoint", i+1, len(c.Secrets)))
		}
	}
	if c.Inbox == "" {
		errs = append(errs, errors.New("receive: inbox: must name a file"))
	}
	if c.Tolerance.Duration <= 0 {
		errs = append(errs, fmt.Errorf("receive: tolerance %s: must be positive", c.Tolerance.Duration))
	}
	if !(c.FailRate >= 0 && c.FailRate <= 1) { // also rejects NaN
		errs = append(errs, fmt.Errorf("receive: fail rate %v: must be from 0 to 1", c.FailRate))
	}
	return errors.Join(errs...)
}

// receiveServer wraps verify's handler to print one line per request.
type receiveServer struct {
	handler  *verify.Receiver
	verifier verify.Verifier // the handler's, to say why a request was rejected
	failRate float64
	log      *slog.Logger

	mu  sync.Mutex // serializes lines
	out io.Writer
}

// errSimulated is the failure -fail-rate injects.
var errSimulated = errors.New("simulated failure (-fail-rate): write rolled back")

// receiveEventsBucket holds the body of every event processed: the
// receiver's business write, atomic with the inbox record.
var receiveEventsBucket = []byte("receive.events")

func newReceiveServer(cfg receiveConfig, ib *boltinbox.Inbox, out io.Writer, log *slog.Logger) *receiveServer {
	rs := &receiveServer{failRate: cfg.FailRate, log: log, out: out}
	rs.handler = verify.Handler(cfg.Secrets, ib, rs.handle)
	rs.handler.Verifier.Tolerance = cfg.Tolerance.Duration
	rs.handler.Logger = log
	rs.handler.Ordered = cfg.Ordered
	rs.verifier = rs.handler.Verifier
	return rs
}

// requestNote is what handle tells ServeHTTP about one request.
type requestNote struct {
	ran bool  // handle ran and returned nil: the event is new
	err error // handle failed
}

type requestNoteKey struct{}

// handle is the receiver's business code, run once per event inside the
// inbox transaction.
func (rs *receiveServer) handle(ctx context.Context, tx verify.Tx, m verify.Message) error {
	note, _ := ctx.Value(requestNoteKey{}).(*requestNote)
	err := func() error {
		b, err := tx.(*boltinbox.Tx).Bolt().CreateBucketIfNotExists(receiveEventsBucket)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(m.ID), m.Body); err != nil {
			return err
		}
		if rs.failRate > 0 && rand.Float64() < rs.failRate {
			return errSimulated
		}
		return nil
	}()
	if note != nil {
		note.ran, note.err = err == nil, err
	}
	return err
}

// Standard Webhooks endpoint verification: webhookd may prove that the
// receiver holds the endpoint's secret before it delivers to it.
const (
	headerChallenge         = "webhook-challenge"
	headerChallengeResponse = "webhook-challenge-response"
)

func (rs *receiveServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	if c := r.Header.Get(headerChallenge); c != "" && r.Method == http.MethodPost {
		rs.answerChallenge(at, w, c)
		return
	}
	// Read the body here too, to name the event and say why a request was
	// rejected; the handler reads it again, with its own limit.
	body, _ := io.ReadAll(io.LimitReader(r.Body, verify.DefaultMaxBodyBytes+1))
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	note := &requestNote{}
	sw := &statusWriter{ResponseWriter: w}
	rs.handler.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), requestNoteKey{}, note)))

	var env struct{ ID, Type string }
	_ = json.Unmarshal(body, &env)
	id := r.Header.Get(verify.HeaderID)
	if id == "" {
		id = env.ID
	}
	rs.printf("%s %s %s %s\n", at.UTC().Format(time.RFC3339), lineField(id), lineField(env.Type), rs.verdict(r, body, sw, note))
}

// answerChallenge answers an endpoint-verification challenge with the
// first secret: the newest, when old and new are listed in that order
// during a rotation (webhookd accepts any key it currently signs with).
func (rs *receiveServer) answerChallenge(at time.Time, w http.ResponseWriter, challenge string) {
	resp, err := verify.ChallengeResponse(rs.verifier.Secrets[0], challenge)
	if err != nil { // validate checked the secrets
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set(headerChallengeResponse, resp)
	w.WriteHeader(http.StatusOK)
	rs.printf("%s - - endpoint verification challenge answered\n", at.UTC().Format(time.RFC3339))
}

// verdict says what became of a request: "verified new", "verified
// duplicate", "verified failed (500): …", "rejected (401): invalid
// signature (…)".
func (rs *receiveServer) verdict(r *http.Request, body []byte, sw *statusWriter, note *requestNote) string {
	code := sw.code()
	answer := strings.TrimSpace(sw.excerpt.String())
	switch {
	case code == http.StatusOK && note.ran:
		return "verified new"
	case code == http.StatusOK:
		return "verified duplicate"
	case r.Method != http.MethodPost || code == http.StatusRequestEntityTooLarge:
		return fmt.Sprintf("rejected (%d): %s", code, answer)
	}
	_, verr := rs.verifier.Verify(r.Header, body)
	switch {
	case code == http.StatusUnauthorized && verr != nil:
		return fmt.Sprintf("rejected (%d): invalid signature (%s)", code, strings.TrimPrefix(verr.Error(), "verify: "))
	case verr != nil:
		return fmt.Sprintf("rejected (%d): %s", code, answer)
	case code == http.StatusTooEarly:
		return fmt.Sprintf("verified early (%d): %s; webhookd retries", code, strings.TrimPrefix(answer, "verify: "))
	case note.err != nil:
		return fmt.Sprintf("verified failed (%d): %s; webhookd retries", code, note.err)
	case code >= 500:
		return fmt.Sprintf("verified failed (%d): %s; webhookd retries", code, answer)
	}
	return fmt.Sprintf("verified refused (%d): %s", code, answer)
}

func (rs *receiveServer) printf(format string, args ...any) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	fmt.Fprintf(rs.out, format, args...)
}

// statusWriter records the status and the start of the body written.
type statusWriter struct {
	http.ResponseWriter
	status  int
	excerpt bytes.Buffer
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if n := 200 - w.excerpt.Len(); n > 0 {
		w.excerpt.Write(p[:min(n, len(p))])
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// lineField makes a value the sender chose safe to print as one field:
// "-" when empty, quoted when it holds a space or anything but printable
// ASCII, cut at 100 bytes.
func lineField(s string) string {
	if s == "" {
		return "-"
	}
	cut := len(s) > 100
	if cut {
		s = s[:100]
	}
	if !printableASCII(s) {
		s = strconv.QuoteToASCII(s)
	}
	if cut {
		s += "…"
	}
	return s
}

// splitList splits a comma-separated list, dropping empty entries and
// surrounding spaces.
func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
