package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pythonClientDir is the Python client's directory (clients/python).
var pythonClientDir = filepath.Join("..", "clients", "python")

// inCI reports whether CI is set (and not "false" or "0"): a test whose
// tool is missing fails then, where elsewhere it skips.
func inCI() bool {
	ci := os.Getenv("CI")
	return ci != "" && ci != "false" && ci != "0"
}

// toolOrSkip returns the path of the command name on PATH. Without it t
// is skipped, or fails in CI (inCI): install says how to get it.
func toolOrSkip(t *testing.T, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := "no " + name + " on PATH: " + install
	if inCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// runTool runs cmd, bounded by limit, and returns its output (stdout and
// stderr together); a failure or a timeout fails t with the output.
func runTool(t *testing.T, limit time.Duration, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(childEnv(), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// TestClientPython runs the Python client's own suite (clients/python:
// python3 -m unittest) against this webhookd, started from the built
// binary on the driver the tests run on: every operation, the errors
// with their code and field, the pages, the feed, replays, dead
// letters, a rotation, the retries of ingest. The suite skips its server
// tests without WEBHOOKD_URL; here every one of them must run.
func TestClientPython(t *testing.T) {
	t.Parallel()
	py := toolOrSkip(t, "python3", "install Python 3.9 or later (Debian: apt-get install python3) to test the Python client")
	in := startInstance(t, t.TempDir(), testConfig)
	out := runTool(t, 5*time.Minute, pythonClientDir,
		[]string{"WEBHOOKD_URL=" + in.base, "WEBHOOKD_TOKEN=" + testToken, "PYTHONDONTWRITEBYTECODE=1"},
		py, "-m", "unittest", "discover", "-s", "tests", "-v")
	if strings.Contains(out, "skipped") {
		t.Errorf("the suite skipped tests with a server to run them on:\n%s", out)
	}
	n := 0
	if m := regexp.MustCompile(`(?m)^Ran (\d+) tests? `).FindStringSubmatch(out); m != nil {
		n, _ = strconv.Atoi(m[1])
	}
	if n == 0 {
		t.Fatalf("the suite ran no test:\n%s", out)
	}
	t.Logf("python3 -m unittest: ran %d tests", n)
}

// TestClientPython_Types checks the Python client's type hints with mypy
// --strict, for Python 3.9 (clients/python/pyproject.toml): the package,
// its tests and the generator. .ci/run installs Debian's mypy.
func TestClientPython_Types(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: mypy runs in the full suite")
	}
	t.Parallel()
	mypy := toolOrSkip(t, "mypy", "install mypy (Debian: apt-get install mypy) to check the Python client's types")
	cache := t.TempDir()
	out := runTool(t, 3*time.Minute, pythonClientDir, nil, mypy, "--cache-dir", cache)
	if !strings.Contains(out, "Success") {
		t.Fatalf("mypy:\n%s", out)
	}
}
