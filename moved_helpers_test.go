package main

// Helpers of the end-to-end tests that moved to e2e, kept here for those
// that have not moved yet.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/BurntSushi/toml"
)

// configWith returns the TOML config base with the keys of set
// ("section.key") set to their values, so that a test changes only what it
// is about and keeps everything else of testConfig.
func configWith(tb testing.TB, base string, set map[string]any) string {
	tb.Helper()
	var m map[string]any
	if _, err := toml.Decode(base, &m); err != nil {
		tb.Fatal(err)
	}
	for k, v := range set {
		section, key, ok := strings.Cut(k, ".")
		if !ok {
			tb.Fatalf("configWith: key %q is not section.key", k)
		}
		sub, _ := m[section].(map[string]any)
		if sub == nil {
			sub = make(map[string]any)
		}
		sub[key] = v
		m[section] = sub
	}
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(m); err != nil {
		tb.Fatal(err)
	}
	return b.String()
}

// postEvent posts an ingest to acme and returns the whole answer, headers
// included.
func (in *instance) postEvent(body string, header ...string) (*http.Response, []byte) {
	in.t.Helper()
	return in.postEventTo("acme", body, header...)
}

// postEventTo is postEvent for tenant's ingest.
func (in *instance) postEventTo(tenant, body string, header ...string) (*http.Response, []byte) {
	in.t.Helper()
	req, err := http.NewRequest("POST", in.base+"/v1/tenants/"+tenant+"/events", strings.NewReader(body))
	if err != nil {
		in.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return doRequest(in.t, req)
}

// doRequest sends req and returns the answer and its body.
func doRequest(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, raw
}

// get makes an unauthenticated GET and returns the answer and its body.
func (in *instance) get(path string) (*http.Response, []byte) {
	in.t.Helper()
	req, err := http.NewRequest("GET", in.base+path, nil)
	if err != nil {
		in.t.Fatal(err)
	}
	return doRequest(in.t, req)
}

// wantProblem fails the test unless resp is a problem+json with status,
// code and a Retry-After of retryAfter seconds, and returns its detail.
func wantProblem(t *testing.T, resp *http.Response, raw []byte, status int, code, retryAfter string) string {
	t.Helper()
	var p struct {
		Type, Title, Code, Detail string
		Status                    int
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("answer %d %q: %v", resp.StatusCode, raw, err)
	}
	if resp.StatusCode != status || p.Status != status || p.Code != code || p.Type != "urn:webhookd:problem:"+code || p.Detail == "" {
		t.Errorf("answer %d %s, want %d with code %s and a detail", resp.StatusCode, raw, status, code)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	if got := resp.Header.Get("Retry-After"); got != retryAfter {
		t.Errorf("Retry-After %q, want %q", got, retryAfter)
	}
	return p.Detail
}

// testClient is the attempts' client for services wired by hand: plain
// http to loopback receivers, no redirects.
func testClient() *http.Client {
	return &http.Client{
		Transport:     &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// callAs makes a GET with token and returns the status and body.
func (in *instance) callAs(token, method, path string) (int, string) {
	in.t.Helper()
	req, err := http.NewRequest(method, in.base+path, nil)
	if err != nil {
		in.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// scrapeMetrics reads the unlabelled samples of webhookd's /metrics.
func scrapeMetrics(base string) (map[string]float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// built is the webhookd binary that buildWebhookd builds once for every
// test of the run; TestMain removes its directory at the end.
var built struct {
	once sync.Once
	dir  string // the temporary directory holding bin
	bin  string
	skip string // why tests that need it skip
	err  error
}

// buildWebhookd builds this package into a binary in a temporary
// directory, once for all the tests that run it, and returns its path. It
// skips the test when there is no go command to build with.
func buildWebhookd(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			built.skip = "the go command is not on PATH: cannot build a webhookd binary to run"
			return
		}
		if built.dir, built.err = os.MkdirTemp("", "webhookd-test-bin-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "webhookd")
		if out, err := exec.Command(goBin, "build", "-o", built.bin, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.skip != "" {
		t.Skip(built.skip)
	}
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}
