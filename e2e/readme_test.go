package e2e

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webhookd/webhookd/httpapi/contracttest"
)

// TestREADME_WalkThrough pastes the shell blocks of the README's "Try
// it: one event, end to end" in order into bash, as a newcomer would,
// against a fresh webhookd -dev started as it says, in an empty
// directory: every command must succeed, and the receiver they start
// must print the event verified, then its replay as a duplicate. Only
// the addresses (free ports instead of 8080 and 9000) and `go run .`
// (the built binary) are changed. The walk-through talks to webhookd
// through a proxy that checks every exchange against
// httpapi/openapi.json (contractProxy).
func TestREADME_WalkThrough(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walk-through needs %s, which is not on PATH", tool)
		}
	}
	bin := webhookdBinary(t)
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Try it: one event, end to end\n")
	if !ok {
		t.Fatal(`README.md has no "## Try it: one event, end to end"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	for rest := section; ; {
		var block string
		var found bool
		if _, rest, found = strings.Cut(rest, "```sh\n"); !found {
			break
		}
		block, rest, _ = strings.Cut(rest, "```\n")
		script.WriteString(block)
	}
	if !strings.Contains(script.String(), "go run . receive") {
		t.Fatalf("the walk-through's shell blocks start no receiver:\n%s", script.String())
	}
	listen, hooks := freeAddr(t), freeAddr(t)
	api := contractProxy(t, listen)
	s := script.String()
	s = strings.ReplaceAll(s, "go run . receive", bin+" receive -listen "+hooks)
	s = strings.ReplaceAll(s, "go run .", bin)
	s = strings.ReplaceAll(s, "127.0.0.1:8080", api)
	s = strings.ReplaceAll(s, "127.0.0.1:9000", hooks)

	dir := t.TempDir()
	server := exec.Command(bin, "-dev", "-listen", listen)
	server.Dir = dir
	var serverOut syncBuffer
	server.Stdout, server.Stderr = &serverOut, &serverOut
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		server.Process.Signal(syscall.SIGTERM)
		server.Wait()
	})
	if !poll(15*time.Second, func() bool {
		resp, err := http.Get("http://" + listen + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		_, terr := os.Stat(filepath.Join(dir, "data", "admin-token"))
		return err == nil && resp.StatusCode == 200 && terr == nil
	}) {
		t.Fatalf("webhookd -dev did not start:\n%s", serverOut.String())
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", s)
	sh.Dir = dir
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the receiver it starts is in its group
	// A file, not a pipe: the receiver the script leaves running keeps
	// its output open, and Wait would wait for it.
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	sh.Stdout, sh.Stderr = out, out
	output := func() string {
		b, _ := os.ReadFile(out.Name())
		return string(b)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-sh.Process.Pid, syscall.SIGTERM) })
	if err := sh.Wait(); err != nil {
		t.Fatalf("the walk-through failed: %v\n--- script\n%s\n--- output\n%s\n--- webhookd\n%s", err, s, output(), serverOut.String())
	}
	if !poll(20*time.Second, func() bool {
		o := output()
		return strings.Contains(o, "payment.succeeded verified new") && strings.Contains(o, "payment.succeeded verified duplicate")
	}) {
		t.Errorf("the receiver did not print the event verified, then its replay as a duplicate:\n%s", output())
	}
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// contractProxy puts a contracttest.Proxy in front of the webhookd at
// target: every call the README's walk-through makes, and every answer
// it gets, must be what httpapi/openapi.json describes, so the README's
// examples cannot drift from the document.
func contractProxy(t *testing.T, target string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "httpapi", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, v, err := contracttest.Load(raw)
	if err != nil {
		t.Fatalf("httpapi/openapi.json: %v", err)
	}
	p := contracttest.NewProxy(v, &url.URL{Scheme: "http", Host: target})
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		srv.Close()
		violations, n := p.Violations()
		if n == 0 {
			t.Error("no call of the walk-through went through the checking proxy")
		}
		for _, v := range violations {
			t.Errorf("the README's walk-through breaks httpapi/openapi.json: %s", v)
		}
		t.Logf("%d exchanges of the walk-through checked against httpapi/openapi.json", n)
	})
	return srv.Listener.Addr().String()
}
