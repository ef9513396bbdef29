package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// typeScriptClient is the TypeScript client's directory.
var typeScriptClient = filepath.Join("..", "clients", "typescript")

// nodeFor returns the node binary that runs the suite of the client in
// dir, after checking that tool (a script under dir/node_modules, from
// npm ci) is installed. Without node or the tool the test is skipped,
// saying how to get them, or fails when CI is set (and not "false" or
// "0"; .ci/run installs them), like the browser test.
func nodeFor(t *testing.T, dir, tool string) string {
	t.Helper()
	var msg string
	node, err := exec.LookPath("node")
	switch {
	case err != nil:
		msg = "no node on PATH: install Node 18 or later to run the TypeScript client's suite"
	default:
		if _, err := os.Stat(filepath.Join(dir, tool)); err != nil {
			msg = "the TypeScript client's dependencies are not installed: run npm ci --prefix " + filepath.ToSlash(filepath.Clean(dir))
		}
	}
	if msg == "" {
		return node
	}
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// TestClientTypeScript runs the TypeScript client's own suite against the
// real webhookd: it starts the binary on a loopback port with a fresh
// database (on the driver the tests run on), compiles the client, its
// tests and its examples with the client's pinned tsc (strict, with
// exactOptionalPropertyTypes: a type error fails here), and runs node
// --test on them with the server's URL and admin token in WEBHOOKD_URL
// and WEBHOOKD_TOKEN. It fails with the suite's output when the suite
// fails.
func TestClientTypeScript(t *testing.T) {
	if testing.Short() {
		t.Skip("the TypeScript client's suite runs in the full suite (go test ./...), not with -short")
	}
	dir := typeScriptClient
	node := nodeFor(t, dir, filepath.Join("node_modules", "typescript", "bin", "tsc"))
	t.Parallel()
	in := startInstance(t, t.TempDir(), testConfig)

	// Its own build directory: the bbolt and postgres passes of CI run
	// at once, from one checkout.
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	runNode(ctx, t, dir, nil, node, filepath.Join("node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.test.json", "--outDir", out)
	// Outside the package, node takes .js for CommonJS unless told.
	if err := os.WriteFile(filepath.Join(out, "package.json"), []byte(`{"type": "module"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(out, "test", "*.test.js"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files compiled into %s: %v", out, err)
	}
	output := runNode(ctx, t, dir, []string{"WEBHOOKD_URL=" + in.base, "WEBHOOKD_TOKEN=" + testToken}, node, append([]string{"--test"}, files...)...)
	// The runner's closing counts: a suite that ran nothing, or skipped
	// the server's tests, has not tested the client.
	counts := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^# (tests|pass|fail|skipped) (\d+)$`).FindAllStringSubmatch(output, -1) {
		counts[m[1]] = m[2]
	}
	if counts["fail"] != "0" || counts["skipped"] != "0" || counts["pass"] == "" || counts["pass"] == "0" {
		t.Fatalf("node --test: %v, want passes and nothing failed or skipped:\n%s", counts, output)
	}
	t.Logf("node --test: %s tests, %s passed", counts["tests"], counts["pass"])
}

// TestClientTypeScript_TypesGenerated fails when the TypeScript client's
// generated types (clients/typescript/src/openapi.ts) are not what its
// pinned openapi-typescript makes of httpapi/openapi.json now: a change
// of the document wants npm run generate there, and the file committed.
// .ci/run checks the same with git diff.
func TestClientTypeScript_TypesGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("the TypeScript client's checks run in the full suite (go test ./...), not with -short")
	}
	dir := typeScriptClient
	cli := filepath.Join("node_modules", "openapi-typescript", "bin", "cli.js")
	node := nodeFor(t, dir, cli)
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "openapi.ts")
	runNode(ctx, t, dir, nil, node, cli, filepath.Join("..", "..", "httpapi", "openapi.json"), "--output", out)
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join(dir, "src", "openapi.ts"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(committed) {
		t.Fatalf("clients/typescript/src/openapi.ts is not what httpapi/openapi.json generates: run npm run generate in clients/typescript and commit it")
	}
}

// runNode runs node with args in dir, with env added to the test's
// (childEnv), and returns what it printed; it fails t with that output
// when node fails.
func runNode(ctx context.Context, t *testing.T, dir string, env []string, node string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = append(childEnv(), env...)
	cmd.WaitDelay = 10 * time.Second
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return string(b)
}
