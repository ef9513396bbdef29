package client

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"1", time.Second},
		{"120", 2 * time.Minute},
		{"-5", 0},
		{"soon", 0},
		{"Thu, 03 Dec 2026 14:00:30 GMT", 30 * time.Second},
		{"Thu, 03 Dec 2026 13:00:00 GMT", 0}, // in the past
		{"99999999999999999999", 0},          // not an int64
		{"9999999999999", 1 << 31 * time.Second},
	} {
		if got := retryAfter(c.in, now); got != c.want {
			t.Errorf("retryAfter(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestImports: the client depends on the standard library alone, so a
// program can use it without the server's packages or their modules.
func TestImports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/webhookd/webhookd/client" {
			t.Errorf("client depends on %s", p)
		}
	}
}

func TestNew_BaseURL(t *testing.T) {
	for _, base := range []string{"127.0.0.1:8080", "ftp://host", "http://", "http://h/?q=1", "::"} {
		if _, err := New(base, Options{}); err == nil {
			t.Errorf("New(%q) accepted it", base)
		}
	}
	c, err := New("http://127.0.0.1:8080/prefix/", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.base != "http://127.0.0.1:8080/prefix" || c.maxAttempts != DefaultMaxAttempts || c.maxRetryWait != DefaultMaxRetryWait || c.userAgent != DefaultUserAgent {
		t.Errorf("New = %+v, want the defaults", c)
	}
}
