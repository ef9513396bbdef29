package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports holds the packages to the layout of STYLE.md. Of ours,
// engine imports only verify (whose signed-content functions its signer
// shares) and, beyond that and the standard library, only x/time/rate;
// nothing engine depends on, however indirectly, is another package of
// ours or infrastructure (a storage driver, the bbolt file format, the
// HTTP router); storage and httpapi do not import each other; sealing
// imports only the standard library and engine, so any store can seal
// secrets without another store's driver; verify depends on the standard
// library alone, so a receiver can use it alone and engine inherits nothing
// through it; and so does client, the Go API client, which an application
// imports without the server; and OpenTelemetry is package tracing's
// alone.
func TestImports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	t.Parallel()
	const mod = "github.com/webhookd/webhookd"
	ours := func(p string) bool { return p == mod || strings.HasPrefix(p, mod+"/") }
	list := func(t *testing.T, format, pkg string, deps bool) []string {
		args := []string{"list", "-f", format}
		if deps {
			args = append(args, "-deps")
		}
		out, err := exec.Command("go", append(args, "./"+pkg)...).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	const nonStd = `{{if not .Standard}}{{.ImportPath}}{{end}}`
	t.Run("engine", func(t *testing.T) {
		for _, p := range list(t, `{{range .Imports}}{{.}} {{end}}`, "engine", false) {
			if strings.Contains(strings.SplitN(p, "/", 2)[0], ".") && p != mod+"/verify" && !strings.HasPrefix(p, "golang.org/x/time/") {
				t.Errorf("engine imports %s", p)
			}
		}
		// Module paths, matched with every package and major version
		// below them (github.com/jackc/pgx/v5/pgxpool).
		infrastructure := []string{"go.etcd.io/bbolt", "github.com/julienschmidt/httprouter", "github.com/jackc/pgx"}
		for _, p := range list(t, nonStd, "engine", true) {
			if ours(p) && p != mod+"/engine" && p != mod+"/verify" {
				t.Errorf("engine depends on %s", p)
			}
			for _, m := range infrastructure {
				if p == m || strings.HasPrefix(p, m+"/") {
					t.Errorf("engine depends on %s", p)
				}
			}
		}
	})
	for _, c := range []struct{ pkg, never string }{{"storage", "httpapi"}, {"httpapi", "storage"}} {
		t.Run(c.pkg, func(t *testing.T) {
			for _, p := range list(t, nonStd, c.pkg, true) {
				if p == mod+"/"+c.never {
					t.Errorf("%s depends on %s", c.pkg, p)
				}
			}
		})
	}
	t.Run("sealing", func(t *testing.T) {
		for _, p := range list(t, `{{range .Imports}}{{.}} {{end}}`, "sealing", false) {
			if strings.Contains(strings.SplitN(p, "/", 2)[0], ".") && p != mod+"/engine" {
				t.Errorf("sealing imports %s", p)
			}
		}
	})
	for _, pkg := range []string{"verify", "client"} {
		t.Run(pkg, func(t *testing.T) {
			for _, p := range list(t, nonStd, pkg, true) {
				if p != mod+"/"+pkg {
					t.Errorf("%s depends on %s", pkg, p)
				}
			}
		})
	}
	// OpenTelemetry stays in package tracing, which main wires: the
	// stores and the API expose hooks (storage.Options.ObserveCommit,
	// engine.Tracer), not spans.
	for _, pkg := range []string{"engine", "storage", "postgres", "httpapi"} {
		t.Run(pkg+"/otel", func(t *testing.T) {
			for _, p := range list(t, nonStd, pkg, true) {
				if strings.HasPrefix(p, "go.opentelemetry.io/") {
					t.Errorf("%s depends on %s", pkg, p)
				}
			}
		})
	}
}
