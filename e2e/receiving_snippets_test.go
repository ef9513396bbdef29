package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/client"
	"github.com/webhookd/webhookd/verify"
)

// snippetsDir holds the receivers docs/receiving.md quotes, one directory
// per language.
var snippetsDir = filepath.Join("..", "docs", "examples", "receiving")

// A snippet is one of docs/receiving.md's receivers and how to run it.
// Each reads the endpoint's secret from WEBHOOK_SECRET and the port from
// PORT, listens on 127.0.0.1, answers 2xx to a request it verified and
// 401 to any other, and prints "verified <webhook-id> …" or
// "rejected…", a line per request, on its stdout.
type snippet struct {
	lang    string // its directory under snippetsDir
	file    string // the file the doc quotes, in that directory
	tool    string // the command that runs it
	install string // how to get the tool
	args    func(port string) []string
	// prepare, when set, checks what the snippet needs beside its tool
	// (node_modules), skipping t (failing it in CI) without it.
	prepare func(t *testing.T, dir string)
}

var snippets = []snippet{
	{
		lang: "node", file: "receiver.mjs", tool: "node",
		install: "install Node 18 or later (Debian: apt-get install nodejs)",
		args:    func(string) []string { return []string{"receiver.mjs"} },
		prepare: func(t *testing.T, dir string) {
			if _, err := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks")); err != nil {
				msg := "docs/examples/receiving/node has no node_modules: run npm ci --prefix docs/examples/receiving/node (.ci/run does)"
				if inCI() {
					t.Fatal(msg)
				}
				t.Skip(msg)
			}
		},
	},
	{
		lang: "python", file: "receiver.py", tool: "python3",
		install: "install Python 3 (Debian: apt-get install python3)",
		args:    func(string) []string { return []string{"receiver.py"} },
	},
	{
		lang: "ruby", file: "receiver.rb", tool: "ruby",
		install: "install Ruby (Debian: apt-get install ruby, which brings webrick)",
		args:    func(string) []string { return []string{"receiver.rb"} },
	},
	{
		lang: "php", file: "receiver.php", tool: "php",
		install: "install PHP (Debian: apt-get install php-cli)",
		args:    func(port string) []string { return []string{"-S", "127.0.0.1:" + port, "receiver.php"} },
	},
	{
		lang: "java", file: "Receiver.java", tool: "java",
		install: "install a JDK 11 or later (Debian: apt-get install openjdk-17-jdk-headless)",
		args:    func(string) []string { return []string{"Receiver.java"} },
	},
}

// runningSnippet is a snippet's process, listening.
type runningSnippet struct {
	url    string
	stdout *syncBuffer
	stop   func()
}

// startSnippet runs s on port with secret and waits, 60 s at most, until
// it accepts connections. It is stopped when t ends, if not before.
func startSnippet(t *testing.T, s snippet, tool, port, secret string) *runningSnippet {
	t.Helper()
	dir := filepath.Join(snippetsDir, s.lang)
	cmd := exec.Command(tool, s.args(port)...)
	cmd.Dir = dir
	cmd.Env = append(childEnv(), "WEBHOOK_SECRET="+secret, "PORT="+port, "PYTHONDONTWRITEBYTECODE=1")
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("%s receiver's stdout:\n%s\nits stderr:\n%s", s.lang, stdout.String(), stderr.String())
		}
	}
	t.Cleanup(stop)
	addr := "127.0.0.1:" + port
	listening := poll(60*time.Second, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	select {
	case <-exited:
		t.Fatalf("the %s receiver exited: %v\n%s%s", s.lang, cmd.ProcessState, stdout.String(), stderr.String())
	default:
	}
	if !listening {
		t.Fatalf("the %s receiver does not listen on %s after 60s\n%s", s.lang, addr, stderr.String())
	}
	return &runningSnippet{url: "http://" + addr + "/webhook", stdout: stdout, stop: stop}
}

// TestReceiving_Snippets runs each receiver of docs/receiving.md, the
// file the doc quotes, against real deliveries of the webhookd binary:
// varied bodies (the ones a JSON round trip changes among them), then a
// rotation, during which every request carries two signatures and the
// receiver still holds the old secret, then the receiver switched to the
// new one. It must accept every genuine delivery at its first attempt
// and refuse a body changed by one byte, a signature by another key, a
// stale timestamp and a request without signature.
func TestReceiving_Snippets(t *testing.T) {
	t.Parallel()
	// 10 s per attempt, not testConfig's 300 ms: a receiver restarted on
	// the new secret (a JVM, most of all) answers its first request
	// slowly on a busy machine, and the test is about signatures.
	in := startInstance(t, t.TempDir(), configWith(t, testConfig, map[string]any{"delivery.attempt_timeout": "10s"}))
	in.setup()
	a := newAPI(in.base, testToken)
	ctx := context.Background()
	for _, s := range snippets {
		t.Run(s.lang, func(t *testing.T) {
			t.Parallel()
			tool := toolOrSkip(t, s.tool, s.install)
			if s.prepare != nil {
				s.prepare(t, filepath.Join(snippetsDir, s.lang))
			}
			tenant := "snippet-" + s.lang
			if _, _, err := a.PutTenant(ctx, tenant, client.TenantInput{Name: s.lang}); err != nil {
				t.Fatal(err)
			}
			port := fmt.Sprint(freePort(t))
			ep, err := a.CreateEndpoint(ctx, tenant, client.EndpointInput{
				URL: "http://127.0.0.1:" + port + "/webhook", EventTypes: []string{client.AllEventTypes}})
			if err != nil {
				t.Fatal(err)
			}
			rcv := startSnippet(t, s, tool, port, ep.Secret)

			// deliver ingests bodies and checks that each was delivered at
			// its first attempt and that the receiver printed it verified.
			deliver := func(phase string, bodies []string) {
				t.Helper()
				for i, body := range bodies {
					res, err := a.Ingest(ctx, tenant, client.EventInput{Type: "payment.succeeded", Data: json.RawMessage(body)})
					if err != nil {
						t.Fatalf("%s: ingest %s: %v", phase, body, err)
					}
					d := in.waitDeliveryDone(tenant, res.Deliveries[0].ID)
					if d.State != "succeeded" || len(d.Attempts) != 1 {
						t.Fatalf("%s: body %d %s: delivery %s after %d attempts (last status %d, %s)",
							phase, i, body, d.State, len(d.Attempts), d.LastStatus, d.Reason)
					}
					if !poll(5*time.Second, func() bool { return strings.Contains(rcv.stdout.String(), "verified "+res.ID) }) {
						t.Fatalf("%s: the receiver answered 2xx to %s without printing it verified:\n%s", phase, res.ID, rcv.stdout)
					}
				}
			}
			bodies := variedBodies(12, 7)
			deliver("before the rotation", bodies[:6])

			rot, err := a.RotateSecret(ctx, tenant, ep.ID, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			revealed, err := a.RevealSecret(ctx, tenant, ep.ID)
			if err != nil || len(revealed.Previous) != 1 || revealed.Previous[0].Secret != ep.Secret {
				t.Fatalf("after the rotation the endpoint signs with %+v, %v: want the old secret beside the new", revealed.Previous, err)
			}
			deliver("rotated, the receiver on the old secret", bodies[6:9])
			rcv.stop()
			rcv = startSnippet(t, s, tool, port, rot.Secret)
			deliver("rotated, the receiver on the new secret", bodies[9:])

			// Requests that are not webhookd's, signed by the test.
			now := time.Now()
			body := []byte(`{"id":"msg_snippet","type":"payment.succeeded","created":"2026-12-02T14:35:10.123Z","api_version":"v1","data":` + bodies[0] + `}`)
			changed := bytes.Replace(body, []byte(`payment`), []byte(`pAyment`), 1)
			for _, tc := range []struct {
				name      string
				secrets   []string
				at        time.Time
				body      []byte // what is sent; the signature is of body
				unsigned  bool
				wantValid bool
			}{
				{name: "a genuine request", secrets: []string{rot.Secret}, at: now, body: body, wantValid: true},
				{name: "the body changed by one byte", secrets: []string{rot.Secret}, at: now, body: changed},
				{name: "the body with a newline after it", secrets: []string{rot.Secret}, at: now, body: append(body[:len(body):len(body)], '\n')},
				{name: "signed by another key", secrets: []string{"whsec_" + strings.Repeat("A", 43) + "="}, at: now, body: body},
				{name: "a timestamp 10 minutes old", secrets: []string{rot.Secret}, at: now.Add(-10 * time.Minute), body: body},
				{name: "no signature", unsigned: true, at: now, body: body},
			} {
				id := fmt.Sprintf("msg_snippet_%d", time.Now().UnixNano())
				h := http.Header{}
				if !tc.unsigned {
					if h, err = verify.Sign(tc.secrets, id, tc.at, body); err != nil {
						t.Fatal(err)
					}
				}
				req, err := http.NewRequest("POST", rcv.url, bytes.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range h {
					req.Header[k] = v
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if valid := resp.StatusCode/100 == 2; valid != tc.wantValid || !valid && resp.StatusCode != 401 {
					t.Errorf("%s: the receiver answered %d", tc.name, resp.StatusCode)
				}
			}
			// Node writes to a pipe asynchronously: the line may follow the answer.
			if !poll(5*time.Second, func() bool { return strings.Count(rcv.stdout.String(), "rejected") == 5 }) {
				t.Errorf("the receiver printed %d lines rejected, want 5:\n%s", strings.Count(rcv.stdout.String(), "rejected"), rcv.stdout)
			}
		})
	}
}

// waitDeliveryDone polls a delivery of tenant until it is succeeded or
// dead, 15 s at most.
func (in *instance) waitDeliveryDone(tenant, id string) deliveryView {
	in.t.Helper()
	var d deliveryView
	if !poll(15*time.Second, func() bool {
		in.mustCall(200, "GET", "/v1/tenants/"+tenant+"/deliveries/"+id, nil, &d)
		return d.State == "succeeded" || d.State == "dead"
	}) {
		in.t.Fatalf("delivery %s is %s after 15s (%d attempts, %s)", id, d.State, len(d.Attempts), d.Reason)
	}
	return d
}

// TestReceiving_DocQuotesSnippets holds docs/receiving.md's receivers
// equal to the files TestReceiving_Snippets runs: each is quoted in a
// code block right after a line "<!-- quoted from docs/examples/…: a test
// holds the two equal -->".
func TestReceiving_DocQuotesSnippets(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "receiving.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?m)^<!-- quoted from (docs/examples/receiving/[^ ]+): a test holds the two equal -->\n```[a-z]*\n((?s:.*?))```$")
	quoted := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(doc), -1) {
		quoted[m[1]] = m[2]
	}
	for _, s := range snippets {
		name := "docs/examples/receiving/" + s.lang + "/" + s.file
		file, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := quoted[name]
		switch {
		case !ok:
			t.Errorf("docs/receiving.md does not quote %s", name)
		case got != string(file):
			t.Errorf("docs/receiving.md's quote of %s is not the file: copy the file into the doc", name)
		}
		delete(quoted, name)
	}
	for name := range quoted {
		t.Errorf("docs/receiving.md quotes %s, which no test runs", name)
	}
}
