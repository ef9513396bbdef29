package main

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/httpapi"
)

// TestBackup_HashOnlyConfig runs `webhookd backup -config FILE` against a
// service whose config lists its admin token only by hash: the hash is
// never sent as a token; without a token to send, the command fails before
// any request and says what to pass; -token-file, WEBHOOKD_TOKEN and the
// token file beside the database each work.
func TestBackup_HashOnlyConfig(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "webhookd.db")
	sum := httpapi.TokenHash(testToken)
	hashed := httpapi.TokenHashPrefix + hex.EncodeToString(sum[:])
	cfg := configWith(t, testConfig, map[string]any{
		"api.tokens":    []string{hashed},
		"storage.path":  dbPath,
		"server.listen": closedPort(t), // the instance listens elsewhere (-listen)
	})
	in := startInstance(t, dir, cfg)
	in.setup()
	in.ingest("invoice.paid", `{"n":1}`)
	cfgPath := filepath.Join(dir, "webhookd.toml")

	backup := func(env map[string]string, args ...string) (string, error) {
		var out, errs syncBuffer
		args = append([]string{"backup", "-config", cfgPath}, args...)
		if in.cancel != nil { // running
			args = append(args, "-url", in.base)
		}
		err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errs)
		return out.String() + errs.String(), err
	}
	backupRequests := func() string {
		resp, err := http.Get(in.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "webhookd_http_requests_total{") && strings.Contains(l, `route="/v1/admin/backup"`) {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	}

	out := filepath.Join(t.TempDir(), "b.db")
	msg, err := backup(nil, "-o", out)
	if err == nil {
		t.Fatalf("backup with only a token hash configured succeeded: %s", msg)
	}
	for _, want := range []string{"-token-file", "WEBHOOKD_TOKEN", "sha256:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("backup without a token: %q, want it to name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), hashed[len("sha256:"):]) {
		t.Errorf("the error shows the configured hash: %q", err)
	}
	if got := backupRequests(); got != "" {
		t.Errorf("backup without a token made a request:\n%s", got)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s exists after a failed backup", out)
	}

	tokenFile := filepath.Join(t.TempDir(), "backup-token")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if msg, err := backup(nil, "-o", out, "-token-file", tokenFile); err != nil {
		t.Errorf("backup -token-file: %v %s", err, msg)
	}
	if msg, err := backup(map[string]string{"WEBHOOKD_TOKEN": testToken}, "-o", out); err != nil {
		t.Errorf("backup with WEBHOOKD_TOKEN: %v %s", err, msg)
	}
	if msg, err := backup(nil, "-o", out, "-token", hashed); err == nil || !strings.Contains(err.Error(), "hash") {
		t.Errorf("backup -token sha256:…: %v %s, want a refusal saying it is a hash", err, msg)
	}
	// The token file beside the database, as the service keeps a generated
	// one: read when it holds a token, not a hash.
	if err := os.WriteFile(filepath.Join(dir, "admin-token"), []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if msg, err := backup(nil, "-o", out); err != nil {
		t.Errorf("backup with the token in %s: %v %s", filepath.Join(dir, "admin-token"), err, msg)
	}
	if got := backupRequests(); strings.Contains(got, `code="401"`) {
		t.Errorf("a backup was refused:\n%s", got)
	}

	// Stopped, with no token anywhere: nothing listens at [server] listen,
	// so the file is copied, which needs no token.
	os.Remove(filepath.Join(dir, "admin-token"))
	in.stop()
	if msg, err := backup(nil, "-o", out); err != nil || !strings.Contains(msg, "backup of "+dbPath) {
		t.Errorf("backup of the stopped service without a token: %v %s, want a copy of the file", err, msg)
	}
}

// closedPort returns a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
