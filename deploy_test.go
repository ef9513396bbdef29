package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSystemdUnit checks deploy/webhookd.service with systemd's own
// verifier where it exists: the only complaint allowed is that the binary
// is not installed on this machine.
func TestSystemdUnit(t *testing.T) {
	unit, err := os.ReadFile("deploy/webhookd.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/webhookd -config /etc/webhookd/webhookd.toml") {
		t.Error("the unit's ExecStart is not the one the README documents")
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed")
	}
	out, _ := exec.Command("systemd-analyze", "verify", "deploy/webhookd.service").CombinedOutput()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" && !strings.Contains(line, "/usr/local/bin/webhookd is not executable") {
			t.Errorf("systemd-analyze: %s", line)
		}
	}
}
