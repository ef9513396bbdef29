package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports holds the packages to the layout of STYLE.md. Of ours,
// engine imports only verify (whose signed-content functions its signer
// shares) and, beyond that and the standard library, only x/time/rate;
// nothing engine depends on, however indirectly, is storage or httpapi;
// storage and httpapi do not import each other; verify imports nothing of
// ours, so a receiver can use it alone.
func TestImports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
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
		for _, p := range list(t, nonStd, "engine", true) {
			if p == mod+"/storage" || p == mod+"/httpapi" {
				t.Errorf("engine depends on %s", p)
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
	t.Run("verify", func(t *testing.T) {
		for _, p := range list(t, nonStd, "verify", true) {
			if ours(p) && p != mod+"/verify" {
				t.Errorf("verify depends on %s", p)
			}
		}
	})
}
