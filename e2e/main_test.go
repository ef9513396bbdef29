package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// built is the webhookd binary TestMain built for every test of the run.
var built struct {
	path string // "" when it was not built
	dir  string // the temporary directory holding it
	why  string // why it was not built: tests that need it skip (fail in CI)
}

// TestMain builds webhookd once into a temporary directory, runs the
// tests, and removes it. Under -short every test here skips, so nothing
// is built.
//
// Unless -test.parallel is given, the parallel tests run 4 per CPU
// rather than go test's 1: most of their time goes to waiting for retry
// schedules, receivers and webhookd processes, not to computing, and
// with one per CPU the longest of them (the kill tests) often start
// last.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(4*runtime.GOMAXPROCS(0)))
	}
	if testing.Short() {
		built.why = "-short: the end-to-end tests run the webhookd binary"
	} else if err := build(); err != nil {
		built.why = err.Error()
	}
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// build runs go build of the module's main package into built.path.
func build() error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("no go command on PATH to build webhookd with: %w", err)
	}
	if built.dir, err = os.MkdirTemp("", "webhookd-e2e-"); err != nil {
		return err
	}
	path := filepath.Join(built.dir, "webhookd")
	if out, err := exec.Command(goBin, "build", "-o", path, "github.com/webhookd/webhookd").CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	built.path = path
	return nil
}

// webhookdBinary returns the built binary's path, or skips t without one
// (-short, no go command); a failed build fails t, and so does a missing
// binary in CI (CI set).
func webhookdBinary(t testing.TB) string {
	t.Helper()
	if built.path == "" {
		if testing.Short() {
			t.Skip(built.why)
		}
		if os.Getenv("CI") != "" || built.dir != "" {
			t.Fatal(built.why)
		}
		t.Skip(built.why)
	}
	return built.path
}
