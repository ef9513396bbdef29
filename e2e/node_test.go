package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// config is the content of a webhookd config file: section, key, value.
// A value is what TOML writes: a string (durations too, "5s"), a number,
// a bool or a list.
type config map[string]map[string]any

// set sets key of section to v.
func (c config) set(section, key string, v any) {
	if c[section] == nil {
		c[section] = map[string]any{}
	}
	c[section][key] = v
}

// write writes c to path, replacing the file by a rename so that a node
// reading it never sees half of it.
func (c config) write(t testing.TB, path string) {
	t.Helper()
	f, err := os.CreateTemp(filepath.Dir(path), ".config-*")
	if err != nil {
		t.Fatal(err)
	}
	if err := toml.NewEncoder(f).Encode(map[string]map[string]any(c)); err != nil {
		f.Close()
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		t.Fatal(err)
	}
}

// nodeLog is the file every process of a test logs to; its end is shown
// when the test fails.
func nodeLog(t testing.TB, dir string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "webhookd.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(f.Name())
			if len(b) > 16<<10 {
				b = b[len(b)-16<<10:]
			}
			t.Logf("webhookd's log (the end):\n%s", b)
		}
	})
	return f
}

// childEnv is the environment of the processes a test starts: the
// test's own, without the WEBHOOKD_ variables a node would read
// (WEBHOOKD_CONFIG, WEBHOOKD_SECRET_KEY, ...), so that only the config
// file a test writes decides.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEBHOOKD_") {
			env = append(env, kv)
		}
	}
	return env
}

// node is one webhookd process, started from the built binary.
type node struct {
	t      testing.TB
	cmd    *exec.Cmd
	URL    string        // its base URL, http://127.0.0.1:port, once it listens
	addr   chan string   // the base URL, sent once it listens
	exited chan struct{} // closed once the process is gone
	err    error         // Wait's, once exited
	// within bounds each wait for the process: to listen once started,
	// to exit once sent SIGTERM.
	within time.Duration
}

// launch runs webhookd with args (the service's flags), its stderr going
// to logs, and returns at once: waitListening waits until it listens.
// The process is killed when t ends, if it is still there.
func launch(t testing.TB, logs io.Writer, within time.Duration, args ...string) *node {
	t.Helper()
	return launchEnv(t, nil, nil, logs, within, args...)
}

// launchEnv is launch with env (KEY=value) added to the environment the
// test gives its processes (childEnv) and, when stdout is not nil, each
// line the process prints on its stdout copied there.
func launchEnv(t testing.TB, env []string, stdout, logs io.Writer, within time.Duration, args ...string) *node {
	t.Helper()
	cmd := exec.Command(webhookdBinary(t), args...)
	cmd.Env = append(childEnv(), env...)
	cmd.Stderr = logs
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, cmd: cmd, addr: make(chan string, 1), exited: make(chan struct{}), within: within}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			if stdout != nil {
				fmt.Fprintln(stdout, sc.Text())
			}
			if _, a, ok := strings.Cut(sc.Text(), "listening on "); ok {
				if f := strings.Fields(a); len(f) > 0 {
					n.addr <- f[0]
				}
			}
		}
		n.err = cmd.Wait() // after the last read, as StdoutPipe asks
		close(n.exited)
	}()
	t.Cleanup(n.kill) // a test that fails half-way leaves no process behind
	return n
}

// waitListening returns the node's base URL once it listens, failing its
// test when the process exits first or does not listen within n.within.
func (n *node) waitListening() string {
	n.t.Helper()
	select {
	case n.URL = <-n.addr:
		return n.URL
	case <-n.exited:
		n.t.Fatalf("webhookd exited at start: %v", n.err)
	case <-time.After(n.within):
		n.kill()
		n.t.Fatalf("webhookd did not listen within %s", n.within)
	}
	return ""
}

// startNode runs webhookd -config configPath on a free loopback port,
// its log going to logs, and returns once it listens. It fails t when
// the process exits first or does not listen within a minute.
func startNode(t testing.TB, configPath string, logs io.Writer) *node {
	t.Helper()
	n := launch(t, logs, time.Minute, "-config", configPath, "-listen", "127.0.0.1:0")
	n.waitListening()
	return n
}

// stop sends SIGTERM and waits for a clean exit (n.within at most),
// failing the node's test otherwise.
func (n *node) stop() {
	n.t.Helper()
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		if n.err != nil {
			n.t.Errorf("webhookd exited with %v after SIGTERM, want 0", n.err)
		}
	case <-time.After(n.within):
		n.kill()
		n.t.Errorf("webhookd did not stop within %s of SIGTERM", n.within)
	}
}

// kill sends SIGKILL and waits until the process is gone. Safe to call
// on a process that exited.
func (n *node) kill() {
	select {
	case <-n.exited:
		return
	default:
	}
	n.cmd.Process.Kill()
	<-n.exited
}

// command runs webhookd with args, a command beside serving (backup,
// compact, rotate-key...), and returns what it printed, stdout then
// stderr, and its error: when it failed, an *exec.ExitError wrapped with
// what it printed on stderr, where webhookd says why. It gives the
// command five minutes.
func command(t testing.TB, args ...string) (string, error) {
	t.Helper()
	return commandEnv(t, 5*time.Minute, nil, args...)
}

// commandEnv is command with env (KEY=value) added to the environment
// the test gives its processes (childEnv), killed after within.
func commandEnv(t testing.TB, within time.Duration, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, webhookdBinary(t), args...)
	cmd.Env = append(childEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String() + stderr.String(), err
}
