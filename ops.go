package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

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

func init() {
	commands["version"] = runVersion
	commands["backup"] = runBackup
	commands["compact"] = runCompact
}

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

func runVersion(_ context.Context, _ []string, _ func(string) string, stdout, _ io.Writer) error {
	_, err := fmt.Fprintln(stdout, versionString())
	return err
}

// runBackup writes a consistent copy of the database to -o. With a running
// webhookd it streams GET /v1/admin/backup (a hot copy); when webhookd is
// stopped (nothing listens, or -db is given) it copies the file directly.
// The copy is written beside the target, fsynced, checked, then renamed
// into place, so -o is never a half-written file.
func runBackup(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("webhookd backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the backup to `file` (required)")
	configPath := fs.String("config", getenv("WEBHOOKD_CONFIG"), "TOML config `file` of the service (for its address, token and database)")
	url := fs.String("url", "", "base `URL` of a running webhookd (default: http:// + [server] listen)")
	token := fs.String("token", getenv("WEBHOOKD_TOKEN"), "admin `token` (default: env WEBHOOKD_TOKEN; see -token-file)")
	tokenFile := fs.String("token-file", "", "read the admin token from `file` (default: a plain token in [api] tokens, else the token file, [api] token_file or admin-token beside the database)")
	dbPath := fs.String("db", "", "copy this stopped database `file` directly instead of asking the service")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("backup: -o FILE is required")
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	tmp := *out + ".partial"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(tmp)
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
	if err := f.Sync(); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := storage.CheckFile(tmp); err != nil {
		return fmt.Errorf("backup: the copy is not sound: %w", err)
	}
	if err := os.Rename(tmp, *out); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if d, err := os.Open(filepath.Dir(*out)); err == nil {
		d.Sync()
		d.Close()
	}
	st, _ := os.Stat(*out)
	fmt.Fprintf(stdout, "backup of %s written to %s (%d bytes)\n", source, *out, st.Size())
	return nil
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

func backupFromService(ctx context.Context, base, token string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/admin/backup", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s answered %s: %s", base, resp.Status, strings.TrimSpace(string(msg)))
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("transfer cut off: %w", err)
	}
	return nil
}

// runCompact writes a compacted copy of a stopped database.
func runCompact(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("webhookd compact", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the compacted copy to `file`, which must not exist (required)")
	configPath := fs.String("config", getenv("WEBHOOKD_CONFIG"), "TOML config `file` (for [storage] path)")
	dbPath := fs.String("db", "", "the stopped database `file` (default: [storage] path)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("compact: -o FILE is required")
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	src := cfg.Storage.Path
	if *dbPath != "" {
		src = *dbPath
	}
	start := time.Now()
	before, after, err := storage.Compact(*out, src, cfg.Storage.LockTimeout.Duration)
	if errors.Is(err, storage.ErrInUse) {
		return fmt.Errorf("compact: %w; stop webhookd first", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "compacted %s (%d bytes) to %s (%d bytes) in %s; stop webhookd, move %s over %s, start it\n",
		src, before, *out, after, time.Since(start).Round(time.Millisecond), *out, src)
	return nil
}
