package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestHelp: webhookd help, -h and --help list every command with its
// line and the service's flags; help CMD and CMD -h show a command's
// flags; all of them on stdout (help CMD) and with exit status 0 (run
// returns nil: main exits 1 on its error, which it prints); an unknown
// command says where the list is.
func TestHelp(t *testing.T) {
	t.Parallel()
	runBin := func(args ...string) (string, int) {
		t.Helper()
		var out bytes.Buffer
		if err := run(t.Context(), args, func(string) string { return "" }, &out, &out); err != nil {
			fmt.Fprintln(&out, "webhookd:", err) // as main does
			return out.String(), 1
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
		for _, want := range []string{"serve", "-config", "-listen", "webhookd help COMMAND"} {
			if !strings.Contains(out, want) {
				t.Errorf("webhookd %s lacks %q:\n%s", strings.Join(args, " "), want, out)
			}
		}
	}
	for _, args := range [][]string{{"help", "backup"}, {"backup", "-h"}, {"help", "migrate"}, {"help", "serve"}, {"serve", "-h"}, {"help", "version"}} {
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
		if code == 0 || !strings.Contains(out, "webhookd help") {
			t.Errorf("webhookd %s: exit %d, %q; want an error that points to webhookd help", strings.Join(args, " "), code, out)
		}
	}
}
