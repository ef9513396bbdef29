package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/webhookd/webhookd/client"
	"github.com/webhookd/webhookd/httpapi"
	"github.com/webhookd/webhookd/storage"
)

// version and commit are set at build time:
//
//	go build -ldflags "-X main.version=1.2.0 -X main.commit=$(git rev-parse --short HEAD)"
var (
	version = "dev"
	commit  = ""
)

// versionString is "webhookd VERSION (commit C, goX)".
func versionString() string {
	c := commit
	if c == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					c = s.Value
				}
			}
		}
	}
	if c == "" {
		c = "unknown"
	}
	return fmt.Sprintf("webhookd %s (commit %s, %s)", version, c, runtime.Version())
}

func runVersion(_ context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("webhookd version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: webhookd version\n\nPrints this binary's version, the commit it was built from and its Go version,\nas one line, like:\n  %s\nIt takes no flags. A running webhookd logs its version in its\n\"webhookd started\" line.\n", versionString())
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("version: unexpected argument %q", fs.Arg(0))
	}
	_, err := fmt.Fprintln(stdout, versionString())
	return err
}

// runBackup writes a consistent copy of the database to -o. With a running
// webhookd it streams GET /v1/admin/backup (a hot copy); when webhookd is
// stopped (nothing listens, or -db is given) it copies the file directly.
// The copy is written to -o + ".partial", fsynced, checked, then renamed
// into place (storage.Replacement), so -o is never a half-written file; a
// .partial left by an interrupted run is replaced, and the output says so.
func runBackup(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("webhookd backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the backup to `file` (required)")
	configPath := fs.String("config", getenv("WEBHOOKD_CONFIG"), "TOML config `file` of the service (for its address, token and database)")
	url := fs.String("url", "", "base `URL` of a running webhookd (default: http:// + [server] listen)")
	token := fs.String("token", getenv("WEBHOOKD_TOKEN"), "admin `token` (default: env WEBHOOKD_TOKEN; see -token-file)")
	tokenFile := fs.String("token-file", "", "read the admin token from `file` (default: a plain token in [api] tokens, else the token file, [api] token_file or admin-token beside the database)")
	dbPath := fs.String("db", "", "copy this stopped database `file` directly instead of asking the service")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usagef("backup: -o FILE is required")
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	if err := bboltOnly(cfg, "backup", *dbPath != ""); err != nil {
		return err
	}
	f, err := storage.NewReplacement(*out, ".partial")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer f.Close()

	source := ""
	if *dbPath == "" {
		base := *url
		if base == "" {
			base = "http://" + cfg.Server.Listen
		}
		tok, err := backupToken(cfg, *token, *tokenFile)
		if err == nil {
			err = backupFromService(ctx, strings.TrimSuffix(base, "/"), tok, f)
		} else if *url == "" && !listening(ctx, cfg.Server.Listen) {
			err = syscall.ECONNREFUSED // no token needed: the file is copied
		}
		switch {
		case err == nil:
			source = base
		case errors.Is(err, syscall.ECONNREFUSED) && *url == "":
			// Not running: copy the file itself.
			*dbPath = cfg.Storage.Path
		default:
			return fmt.Errorf("backup: %w", err)
		}
	}
	if *dbPath != "" {
		if _, err := storage.CopyFile(*dbPath, f, cfg.Storage.LockTimeout.Duration); err != nil {
			if errors.Is(err, storage.ErrInUse) {
				return fmt.Errorf("backup: %w; back up through the running service instead (-url)", err)
			}
			return fmt.Errorf("backup: %w", err)
		}
		source = *dbPath
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	st, _ := os.Stat(*out)
	staleNote(stdout, f.Stale(), f.TempPath())
	fmt.Fprintf(stdout, "backup of %s written to %s (%d bytes)\n", source, *out, st.Size())
	return nil
}

// staleNote says that the temporary file tmp, left by an interrupted run,
// was replaced, when stale.
func staleNote(w io.Writer, stale bool, tmp string) {
	if stale {
		fmt.Fprintf(w, "replaced %s, left by an interrupted run\n", tmp)
	}
}

// backupToken returns the admin token `webhookd backup` sends: flagToken
// (-token, or env WEBHOOKD_TOKEN), else the token in tokenFile
// (-token-file), else the first plain token of [api] tokens, else the
// token in the token file ([api] token_file, or admin-token beside the
// database: where the service keeps the one it generates). A configured
// "sha256:…" entry stands for a token by its hash and is never sent: with
// only hashes and no token from elsewhere it fails, before any request,
// saying what to pass. Errors never show a token or a hash.
func backupToken(cfg Config, flagToken, tokenFile string) (string, error) {
	hashOnly := func(what string) error {
		return fmt.Errorf("%s is a token hash (%s…), which the service cannot take as a token: pass the admin token itself", what, httpapi.TokenHashPrefix)
	}
	switch {
	case flagToken != "" && tokenFile != "":
		return "", errors.New("-token (or WEBHOOKD_TOKEN) and -token-file both give a token: give one")
	case flagToken != "":
		if strings.HasPrefix(flagToken, httpapi.TokenHashPrefix) {
			return "", hashOnly("-token (or WEBHOOKD_TOKEN)")
		}
		return flagToken, nil
	case tokenFile != "":
		tok, err := readTokenFile(tokenFile)
		if err != nil {
			return "", fmt.Errorf("-token-file: %w", err)
		}
		if tok == "" {
			return "", fmt.Errorf("-token-file %s is empty", tokenFile)
		}
		if strings.HasPrefix(tok, httpapi.TokenHashPrefix) {
			return "", hashOnly("the token in -token-file " + tokenFile)
		}
		return tok, nil
	}
	for _, tok := range cfg.API.Tokens {
		if !strings.HasPrefix(tok, httpapi.TokenHashPrefix) {
			return tok, nil
		}
	}
	path := cfg.adminTokenFile()
	tok, err := readTokenFile(path)
	if err == nil && tok != "" && !strings.HasPrefix(tok, httpapi.TokenHashPrefix) {
		return tok, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("token file: %w", err)
	}
	if len(cfg.API.Tokens) > 0 {
		return "", fmt.Errorf("[api] tokens lists the admin tokens only by hash (%s…), which is never sent as a token, and %s holds no token: pass the admin token with -token-file FILE (a file holding it, mode 0600) or in the environment variable WEBHOOKD_TOKEN", httpapi.TokenHashPrefix, path)
	}
	return "", fmt.Errorf("no admin token: %s does not hold one (the service writes it there at its first start); pass the admin token with -token-file FILE or in the environment variable WEBHOOKD_TOKEN", path)
}

// listening reports whether something accepts connections at addr (the
// service's [server] listen).
func listening(ctx context.Context, addr string) bool {
	c, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return !errors.Is(err, syscall.ECONNREFUSED)
	}
	c.Close()
	return true
}

// readTokenFile returns the content of the token file at path, trimmed.
func readTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// backupFromService streams the hot backup of the service at base to w,
// through the project's own API client (a 429 or 503 is waited out as
// its Retry-After says, before any byte is written).
func backupFromService(ctx context.Context, base, token string, w io.Writer) error {
	c, err := client.New(base, client.Options{Token: token, UserAgent: "webhookd-backup"})
	if err != nil {
		return err
	}
	_, err = c.Backup(ctx, w)
	return err
}

// runCompact compacts a stopped database: into a new file (-o FILE, which
// must not exist), or in place (-in-place), where the compacted copy takes
// the database's place once complete. Either way the copy is written to a
// temporary file beside its final name (FILE.partial, or the database's
// path + ".compact"), fsynced and checked against the original before it is
// renamed: a run killed at any moment leaves the database as it was and no
// file at -o, or the complete compacted copy.
func runCompact(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("webhookd compact", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the compacted copy to `file`, which must not exist")
	inPlace := fs.Bool("in-place", false, "compact the database itself: the compacted copy replaces it once complete and checked")
	configPath := fs.String("config", getenv("WEBHOOKD_CONFIG"), "TOML config `file` (for [storage] path)")
	dbPath := fs.String("db", "", "the stopped database `file` (default: [storage] path)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if (*out == "") == !*inPlace {
		return usagef("compact: give one of -o FILE (a compacted copy) or -in-place")
	}
	if fs.NArg() > 0 {
		return usagef("compact: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	if err := bboltOnly(cfg, "compact", false); err != nil {
		return err
	}
	src := cfg.Storage.Path
	if *dbPath != "" {
		src = *dbPath
	}
	start := time.Now()
	var res storage.CompactResult
	if *inPlace {
		res, err = storage.CompactInPlace(src, cfg.Storage.LockTimeout.Duration)
	} else {
		res, err = storage.CompactTo(*out, src, cfg.Storage.LockTimeout.Duration)
	}
	if errors.Is(err, storage.ErrInUse) {
		return fmt.Errorf("compact: %w; stop webhookd first", err)
	}
	if err != nil {
		return err
	}
	if *inPlace {
		staleNote(stdout, res.Stale, src+".compact")
	} else {
		staleNote(stdout, res.Stale, *out+".partial")
	}
	took := time.Since(start).Round(time.Millisecond)
	if *inPlace {
		fmt.Fprintf(stdout, "compacted %s in place from %d to %d bytes in %s\n", src, res.Before, res.After, took)
		return nil
	}
	fmt.Fprintf(stdout, "compacted %s (%d bytes) to %s (%d bytes) in %s; or compact it in place: webhookd compact -in-place\n",
		src, res.Before, *out, res.After, took)
	return nil
}

// bboltOnly refuses an offline command of the bbolt file when the config
// runs webhookd on PostgreSQL, and says what to do there instead; a
// command given a file explicitly (fileGiven) works on that file.
func bboltOnly(cfg Config, command string, fileGiven bool) error {
	if cfg.Storage.Driver != "postgres" || fileGiven {
		return nil
	}
	switch command {
	case "backup":
		return fmt.Errorf("backup: with [storage] driver = \"postgres\" the state is in PostgreSQL, not in a file: back it up with the database's own tools, e.g. pg_dump --schema=%s (a consistent snapshot while nodes run), continuous archiving (pg_basebackup and WAL) or your managed service's snapshots; see docs/cluster.md, \"Running a cluster\"", cfg.Storage.Schema)
	case "compact":
		return errors.New("compact: with [storage] driver = \"postgres\" there is no file to compact: PostgreSQL's autovacuum reclaims space (VACUUM FULL, or pg_repack, to give it back to the disk)")
	}
	return fmt.Errorf("%s: works on the bbolt file, not with [storage] driver = \"postgres\"", command)
}
