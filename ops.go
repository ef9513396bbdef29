package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

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
	token := fs.String("token", getenv("WEBHOOKD_TOKEN"), "admin `token` (default: env WEBHOOKD_TOKEN, [api] tokens, or the token file)")
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
		tok := *token
		if tok == "" {
			tok = configuredToken(cfg)
		}
		err = backupFromService(ctx, strings.TrimSuffix(base, "/"), tok, f)
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

// configuredToken is an admin token the service was configured with: the
// first of [api] tokens, or the generated one in the token file.
func configuredToken(cfg Config) string {
	if len(cfg.API.Tokens) > 0 {
		return cfg.API.Tokens[0]
	}
	b, err := os.ReadFile(cfg.adminTokenFile())
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
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
