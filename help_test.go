package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelp: webhookd help, -h and --help list every command with its
// line and the service's flags; help CMD and CMD -h show a command's
// flags; all of them on stdout (help CMD) and with exit status 0 (run
// returns nil); an unknown command says where the list is, with exit
// status 2 (exitCode: a usage error).
func TestHelp(t *testing.T) {
	t.Parallel()
	runBin := func(args ...string) (string, int) {
		t.Helper()
		var out bytes.Buffer
		if err := run(t.Context(), args, func(string) string { return "" }, &out, &out); err != nil {
			fmt.Fprintln(&out, "webhookd:", err) // as main does
			return out.String(), exitCode(err)
		}
		return out.String(), 0
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		out, code := runBin(args...)
		if code != 0 {
			t.Errorf("webhookd %s: exit %d, want 0", strings.Join(args, " "), code)
		}
		for name, c := range commands {
			if !strings.Contains(out, name) || !strings.Contains(out, c.about) {
				t.Errorf("webhookd %s does not list %s with its line %q:\n%s", strings.Join(args, " "), name, c.about, out)
			}
		}
		for _, want := range []string{"serve", "help", "-config", "-listen", "webhookd help COMMAND"} {
			if !strings.Contains(out, want) {
				t.Errorf("webhookd %s lacks %q:\n%s", strings.Join(args, " "), want, out)
			}
		}
	}
	for _, args := range [][]string{{"help", "backup"}, {"backup", "-h"}, {"help", "migrate"}, {"help", "serve"}, {"serve", "-h"}} {
		out, code := runBin(args...)
		if code != 0 {
			t.Errorf("webhookd %s: exit %d, want 0:\n%s", strings.Join(args, " "), code, out)
		}
		if !strings.Contains(out, "Usage of webhookd") {
			t.Errorf("webhookd %s shows no flags:\n%s", strings.Join(args, " "), out)
		}
	}
	if out, _ := runBin("help", "backup"); !strings.Contains(out, "-o file") || !strings.Contains(out, commands["backup"].about) {
		t.Errorf("webhookd help backup lacks its line or its -o flag:\n%s", out)
	}
	for _, args := range [][]string{{"help", "nosuch"}, {"nosuch"}} {
		out, code := runBin(args...)
		if code != 2 || !strings.Contains(out, "webhookd help") {
			t.Errorf("webhookd %s: exit %d, %q; want 2 and an error that points to webhookd help", strings.Join(args, " "), code, out)
		}
	}
	// help of help, and of a command without flags, say what they do.
	for args, want := range map[string][]string{
		"help help":    {"webhookd help COMMAND", "what COMMAND does"},
		"version -h":   {"Usage: webhookd version", "no flags", "commit"},
		"help version": {"Usage: webhookd version", commands["version"].about},
	} {
		out, code := runBin(strings.Fields(args)...)
		if code != 0 {
			t.Errorf("webhookd %s: exit %d, want 0:\n%s", args, code, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("webhookd %s lacks %q:\n%s", args, w, out)
			}
		}
	}
}

// TestExitCode: a command line webhookd cannot take exits 2 (as the flag
// package and most Unix tools do), any other failure 1.
func TestExitCode(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"nosuch"}, {"-bogus"}, {"serve", "extra"}, {"help", "nosuch"},
		{"backup"}, {"backup", "-bogus"}, {"compact"}, {"migrate"}, {"rotate-key"},
		{"new-token", "-env", "prod"}, {"version", "extra"}, {"receive", "-bogus"},
		{"bench", "-bogus"}, {"bench", "-scenario", "nosuch"}, {"serve", "-listen"},
	} {
		err := run(t.Context(), args, func(string) string { return "" }, io.Discard, io.Discard)
		if code := exitCode(err); err == nil || code != 2 {
			t.Errorf("webhookd %s: %v, exit %d; want a usage error, exit 2", strings.Join(args, " "), err, code)
		}
	}
	err := run(t.Context(), []string{"-config", filepath.Join(t.TempDir(), "missing.toml")}, func(string) string { return "" }, io.Discard, io.Discard)
	if code := exitCode(err); err == nil || code != 1 {
		t.Errorf("webhookd -config missing.toml: %v, exit %d; want a failure, exit 1", err, code)
	}
}

// TestServe_PortInUseLeavesNothing: a start that cannot listen (another
// process has the port) fails with exit status 1 before it makes
// anything on disk: no database file, no admin-token file beside it.
func TestServe_PortInUseLeavesNothing(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	err = run(t.Context(), []string{"-listen", taken.Addr().String(), "-db", filepath.Join(dir, "webhookd.db")}, func(string) string { return "" }, io.Discard, io.Discard)
	if code := exitCode(err); err == nil || code != 1 || !strings.Contains(err.Error(), "listen on") {
		t.Fatalf("serve on a port in use: %v, exit %d; want a listen error, exit 1", err, code)
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Errorf("a start that could not listen left %s in the database's directory", f.Name())
	}
}
