package e2e

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/webhookd/webhookd/engine"
	"github.com/webhookd/webhookd/verify"
	"github.com/webhookd/webhookd/verify/boltinbox"
)

// receiveSecretEnv holds the receiver's secrets when no -secret is given.
const receiveSecretEnv = "WEBHOOKD_RECEIVE_SECRET"

// receiveProc is one `webhookd receive` process.
type receiveProc struct {
	t      *testing.T
	base   string
	out    *syncBuffer // its stdout: a line per request
	stderr *syncBuffer
	node   *node
}

// startReceive runs `webhookd receive args…` with env (KEY=value) added
// to its environment and waits until it listens (10s at most).
func startReceive(t *testing.T, env []string, args ...string) *receiveProc {
	t.Helper()
	p := &receiveProc{t: t, out: &syncBuffer{}, stderr: &syncBuffer{}}
	p.node = launchEnv(t, env, p.out, p.stderr, 10*time.Second, append([]string{"receive"}, args...)...)
	p.base = p.node.waitListening()
	t.Cleanup(p.stop)
	return p
}

// stop sends the receiver SIGTERM and waits for its clean exit (10s at
// most). Safe to call twice.
func (p *receiveProc) stop() {
	if p.node == nil {
		return
	}
	n := p.node
	p.node = nil
	n.stop()
	if p.t.Failed() {
		p.t.Logf("receive stdout:\n%s\nstderr:\n%s", p.out.String(), p.stderr.String())
	}
}

// post sends body with header h and returns the status.
func (p *receiveProc) post(method string, h http.Header, body string) int {
	p.t.Helper()
	req, err := http.NewRequest(method, p.base+"/hooks", strings.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitLine waits until stdout holds a line matching re after the first
// `from` lines, and returns that line's index.
func (p *receiveProc) waitLine(from int, re string) int {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(10 * time.Second)
	for {
		out, written := p.out.next()
		lines := strings.Split(out, "\n")
		for i := from; i < len(lines); i++ {
			if rx.MatchString(lines[i]) {
				return i
			}
		}
		select {
		case <-written:
		case <-timeout:
			p.t.Fatalf("no line after line %d matches %q; stdout:\n%s", from, re, p.out.String())
		}
	}
}

func envelopeBody(id, typ string) string {
	return `{"id":"` + id + `","type":"` + typ + `","created":"2026-12-02T14:35:10.123Z","api_version":"v1","data":{"amount":4200}}`
}

func signed(t *testing.T, secrets []string, id string, at time.Time, body string) http.Header {
	t.Helper()
	h, err := verify.Sign(secrets, id, at, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

const lineTime = `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ `

func TestReceive_Lines(t *testing.T) {
	t.Parallel()
	newSecret, oldSecret, otherSecret := engine.NewSecret(), engine.NewSecret(), engine.NewSecret()
	inbox := filepath.Join(t.TempDir(), "sub", "inbox.db") // the directory is made
	p := startReceive(t, nil, "-listen", "127.0.0.1:0", "-inbox", inbox, "-secret", newSecret+","+oldSecret)
	if !strings.Contains(p.out.String(), "(inbox "+inbox+", 2 secrets)") {
		t.Errorf("start line %q does not name the inbox and the number of secrets", p.out.String())
	}
	var sent []http.Header
	send := func(method string, h http.Header, body string) int {
		sent = append(sent, h)
		return p.post(method, h, body)
	}
	// sign signs an event as it is sent, dated offset from then.
	sign := func(secret, id string, offset time.Duration, body string) func() http.Header {
		return func() http.Header { return signed(t, []string{secret}, id, time.Now().Add(offset), body) }
	}
	unsigned := func() http.Header { return http.Header{} }
	// The "too old" line says how far behind the clock the timestamp is,
	// truncated to seconds, and webhook-timestamp is whole seconds: signed
	// at the start of a second, it reads 10m0s for the whole second.
	tooOld := func() http.Header {
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
		return sign(newSecret, "evt_3", -10*time.Minute, envelopeBody("evt_3", "payment.succeeded"))()
	}

	tests := []struct {
		name   string
		method string
		header func() http.Header
		body   string
		status int
		line   string // regexp after the timestamp
	}{
		{"new", "POST", sign(newSecret, "evt_1", 0, envelopeBody("evt_1", "payment.succeeded")), envelopeBody("evt_1", "payment.succeeded"),
			200, `evt_1 payment\.succeeded verified new$`},
		{"duplicate, signed afresh", "POST", sign(newSecret, "evt_1", time.Second, envelopeBody("evt_1", "payment.succeeded")), envelopeBody("evt_1", "payment.succeeded"),
			200, `evt_1 payment\.succeeded verified duplicate$`},
		{"old secret during rotation", "POST", sign(oldSecret, "evt_2", 0, envelopeBody("evt_2", "invoice.paid")), envelopeBody("evt_2", "invoice.paid"),
			200, `evt_2 invoice\.paid verified new$`},
		{"timestamp too old", "POST", tooOld, envelopeBody("evt_3", "payment.succeeded"),
			401, `evt_3 payment\.succeeded rejected \(401\): invalid signature \(timestamp too old: 10m0s behind the clock, tolerance 5m0s\)$`},
		{"unknown secret", "POST", sign(otherSecret, "evt_4", 0, envelopeBody("evt_4", "payment.succeeded")), envelopeBody("evt_4", "payment.succeeded"),
			401, `evt_4 payment\.succeeded rejected \(401\): invalid signature \(no signature matches \(webhook-signature\)\)$`},
		{"body changed", "POST", sign(newSecret, "evt_5", 0, envelopeBody("evt_5", "payment.succeeded")), envelopeBody("evt_5", "payment.failed"),
			401, `evt_5 payment\.failed rejected \(401\): invalid signature \(no signature matches \(webhook-signature\)\)$`},
		{"unsigned", "POST", unsigned, envelopeBody("evt_6", "payment.succeeded"),
			401, `evt_6 payment\.succeeded rejected \(401\): invalid signature \(no signature header\)$`},
		{"envelope id differs from the signed id", "POST", sign(newSecret, "evt_7", 0, envelopeBody("evt_8", "payment.succeeded")), envelopeBody("evt_8", "payment.succeeded"),
			400, `evt_7 payment\.succeeded verified refused \(400\): envelope id differs from webhook-id$`},
		{"not a POST", "GET", unsigned, "",
			405, `- - rejected \(405\): method not allowed$`},
	}
	for i, tt := range tests {
		if got := send(tt.method, tt.header(), tt.body); got != tt.status {
			t.Errorf("%s: status %d, want %d", tt.name, got, tt.status)
		}
		// Lines come in request order: one request at a time.
		p.waitLine(1+i, lineTime+tt.line)
	}

	// Endpoint verification: answered with the first (newest) secret.
	req, _ := http.NewRequest("POST", p.base+"/hooks", nil)
	req.Header.Set(verify.HeaderChallenge, "Y2hhbGxlbmdlLTEyMzQ1Njc4OTAxMjM0NTY3ODkw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want, _ := verify.ChallengeResponse(newSecret, "Y2hhbGxlbmdlLTEyMzQ1Njc4OTAxMjM0NTY3ODkw")
	if got := resp.Header.Get(verify.HeaderChallengeResponse); resp.StatusCode != 200 || got != want {
		t.Errorf("challenge answered %d %q, want 200 %q", resp.StatusCode, got, want)
	}
	p.waitLine(1+len(tests), lineTime+`- - endpoint verification challenge answered$`)
	if n := strings.Count(p.out.String(), "\n"); n != 2+len(tests) {
		t.Errorf("%d lines for %d requests and a challenge (plus the start line):\n%s", n, len(tests), p.out.String())
	}

	out := p.out.String() + p.stderr.String()
	for _, s := range []string{newSecret, oldSecret, otherSecret, strings.TrimPrefix(newSecret, "whsec_")} {
		if strings.Contains(out, s) {
			t.Errorf("output shows a secret:\n%s", out)
		}
	}
	for _, h := range sent {
		for _, name := range []string{verify.HeaderSignature, verify.HeaderStripeSignature} {
			for _, v := range h.Values(name) {
				for _, part := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' || r == '=' }) {
					if len(part) > 16 && strings.Contains(out, part) {
						t.Errorf("output shows a signature %q", part)
					}
				}
			}
		}
	}

	// The inbox is durable: after a restart, evt_1 is still a duplicate.
	p.stop()
	p = startReceive(t, []string{receiveSecretEnv + "=" + newSecret}, "-listen", "127.0.0.1:0", "-inbox", inbox)
	if got := p.post("POST", signed(t, []string{newSecret}, "evt_1", time.Now(), envelopeBody("evt_1", "payment.succeeded")), envelopeBody("evt_1", "payment.succeeded")); got != 200 {
		t.Errorf("evt_1 after restart: status %d", got)
	}
	p.waitLine(1, lineTime+`evt_1 payment\.succeeded verified duplicate$`)
}

// TestReceive_FailRate checks that a failed business write leaves nothing
// behind: the same event is new to the next receiver on the inbox.
func TestReceive_FailRate(t *testing.T) {
	t.Parallel()
	secret := engine.NewSecret()
	inbox := filepath.Join(t.TempDir(), "inbox.db")
	body := envelopeBody("evt_1", "payment.succeeded")
	p := startReceive(t, nil, "-listen", "127.0.0.1:0", "-inbox", inbox, "-secret", secret, "-fail-rate", "1")
	if got := p.post("POST", signed(t, []string{secret}, "evt_1", time.Now(), body), body); got != 500 {
		t.Errorf("status %d, want 500", got)
	}
	p.waitLine(1, lineTime+`evt_1 payment\.succeeded verified failed \(500\): simulated failure \(-fail-rate\): write rolled back; webhookd retries$`)
	p.stop()

	p = startReceive(t, nil, "-listen", "127.0.0.1:0", "-inbox", inbox, "-secret", secret)
	if got := p.post("POST", signed(t, []string{secret}, "evt_1", time.Now(), body), body); got != 200 {
		t.Errorf("status %d, want 200", got)
	}
	p.waitLine(1, lineTime+`evt_1 payment\.succeeded verified new$`)
}

func TestReceive_ConfigFile(t *testing.T) {
	t.Parallel()
	fileSecret, envSecret := engine.NewSecret(), engine.NewSecret()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "receive.toml")
	text := `listen = "127.0.0.1:0"
secrets = ["` + fileSecret + `"]
inbox = "` + filepath.Join(dir, "inbox.db") + `"
tolerance = "1m"
`
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("the file alone", func(t *testing.T) {
		p := startReceive(t, nil, "-config", cfg)
		body := envelopeBody("evt_1", "invoice.paid")
		p.post("POST", signed(t, []string{fileSecret}, "evt_1", time.Now(), body), body)
		p.waitLine(1, `evt_1 invoice\.paid verified new$`)
		// tolerance = "1m" from the file
		// The signature's time is in whole seconds: the receiver may read
		// its clock in the second after the one it was made in.
		p.post("POST", signed(t, []string{fileSecret}, "evt_2", time.Now().Add(-2*time.Minute), body), body)
		p.waitLine(2, `evt_2 invoice\.paid rejected \(401\): invalid signature \(timestamp too old: 2m[01]s behind the clock, tolerance 1m0s\)$`)
	})
	t.Run("the environment overrides the file's secrets, flags its other keys", func(t *testing.T) {
		p := startReceive(t, []string{receiveSecretEnv + "=" + envSecret}, "-config", cfg, "-tolerance", "10m")
		body := envelopeBody("evt_3", "invoice.paid")
		p.post("POST", signed(t, []string{fileSecret}, "evt_3", time.Now(), body), body)
		p.waitLine(1, `evt_3 invoice\.paid rejected \(401\): invalid signature`)
		p.post("POST", signed(t, []string{envSecret}, "evt_3", time.Now().Add(-2*time.Minute), body), body)
		p.waitLine(2, `evt_3 invoice\.paid verified new$`)
	})
}

func TestReceive_StartErrors(t *testing.T) {
	secret := engine.NewSecret()
	dir := t.TempDir()
	badConfig := filepath.Join(dir, "bad.toml")
	os.WriteFile(badConfig, []byte("listen = \"127.0.0.1:0\"\nsecret = \"x\"\n"), 0o600)
	notBase64 := "whsec_this is not base64!"
	tests := []struct {
		name string
		args []string
		want string // in the error
	}{
		{"no secret", []string{}, "no secret: give the endpoint's signing secret with -secret"},
		{"secret not base64", []string{"-secret", secret + "," + notBase64}, "secret 2 of 2 is not whsec_ + base64"},
		{"fail rate above 1", []string{"-secret", secret, "-fail-rate", "1.5"}, "fail rate 1.5: must be from 0 to 1"},
		{"tolerance zero", []string{"-secret", secret, "-tolerance", "0s"}, "tolerance 0s: must be positive"},
		{"listen without port", []string{"-secret", secret, "-listen", "localhost"}, `listen "localhost": must be host:port`},
		{"unknown config key", []string{"-config", badConfig}, "unknown key secret (known: listen, secrets, inbox, tolerance, fail_rate, ordered)"},
		{"stray argument", []string{"-secret", secret, "now"}, `unexpected argument "now"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"receive", "-listen", "127.0.0.1:0", "-inbox", filepath.Join(dir, "inbox.db")}, tt.args...)
			out, err := commandEnv(t, 10*time.Second, nil, args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			for _, s := range []string{secret, notBase64} {
				if strings.Contains(err.Error()+out, s) {
					t.Errorf("the error or output shows a secret: %v", err)
				}
			}
		})
	}
}

// TestReceive_WithWebhookd is the README walk-through: webhookd delivers
// an event to `webhookd receive`, and a replay of it is a duplicate; also
// when webhookd first challenges the endpoint to prove it holds the secret.
func TestReceive_WithWebhookd(t *testing.T) {
	t.Parallel()
	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		receiveWithWebhookd(t, testConfig, false)
	})
	t.Run("endpoint verification required", func(t *testing.T) {
		t.Parallel()
		cfg := strings.Replace(testConfig, "[delivery]\n", "[delivery]\nrequire_endpoint_verification = true\n", 1)
		receiveWithWebhookd(t, cfg, true)
	})
}

func receiveWithWebhookd(t *testing.T, config string, challenged bool) {
	in := startInstance(t, t.TempDir(), config)
	in.setup()
	ep := in.createEndpoint("http://127.0.0.1:1/hooks", "payment.succeeded") // the receiver's URL comes next
	p := startReceive(t, []string{receiveSecretEnv + "=" + ep.Secret},
		"-listen", "127.0.0.1:0", "-inbox", filepath.Join(t.TempDir(), "receiver-inbox.db"))
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+ep.ID, map[string]string{"url": p.base + "/hooks"}, nil)

	ev := in.ingest("payment.succeeded", `{"amount":4200,"currency":"eur"}`, "Idempotency-Key", "order-1001")
	dlv := ev.Deliveries[0].ID
	in.waitState(dlv, "succeeded")
	first := 1
	if challenged {
		first = 1 + p.waitLine(1, lineTime+`- - endpoint verification challenge answered$`)
	}
	first = 1 + p.waitLine(first, lineTime+regexp.QuoteMeta(ev.ID)+` payment\.succeeded verified new$`)

	in.mustCall(202, "POST", "/v1/tenants/acme/deliveries/"+dlv+"/replay", nil, nil)
	p.waitLine(first, lineTime+regexp.QuoteMeta(ev.ID)+` payment\.succeeded verified duplicate$`)
	d := in.waitState(dlv, "succeeded")
	if n := len(d.Attempts); n != 2 || d.Attempts[1].Status != 200 {
		t.Errorf("attempts %+v, want the first and the replay's, both 200", d.Attempts)
	}
}

// TestReceive_Ordered: webhookd delivers keyed events to an endpoint of
// ordering none, in parallel and with retries (the receiver fails one in
// four on purpose), to `webhookd receive -ordered`: the receiver
// processes every event once and each key's events in sequence order,
// answering 425 to those that came before their previous event, which
// webhookd then retries.
func TestReceive_Ordered(t *testing.T) {
	t.Parallel()
	// A key's events wait for each other, each out-of-order one a retry
	// delay: many short retries, so that none runs out of attempts.
	cfg := strings.Replace(testConfig, `schedule = ["20ms", "40ms", "80ms"]`,
		`schedule = ["20ms", "40ms"`+strings.Repeat(`, "300ms"`, 23)+`]`, 1)
	in := startInstance(t, t.TempDir(), cfg)
	in.setup()
	ep := in.createEndpoint("http://127.0.0.1:1/hooks", "payment.succeeded")
	inboxPath := filepath.Join(t.TempDir(), "receiver-inbox.db")
	p := startReceive(t, []string{receiveSecretEnv + "=" + ep.Secret},
		"-listen", "127.0.0.1:0", "-inbox", inboxPath, "-ordered", "-fail-rate", "0.25")
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+ep.ID, map[string]string{"url": p.base + "/hooks"}, nil)

	// A first keyed event sets the receiver's floor below the load's: the
	// load is ordered from its first event on.
	var first ingestResponse // sets the receiver's floor
	in.mustCall(202, "POST", "/v1/tenants/acme/events", `{"type":"payment.succeeded","ordering_key":"warm-up","data":{}}`, &first)
	in.waitState(first.Deliveries[0].ID, "succeeded")

	// The load is held while the endpoint is disabled and then sent all
	// at once: later events of a key then reach the receiver before their
	// predecessors whatever the pace of ingest (one at a time, a key's
	// events would rarely overtake each other).
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+ep.ID, `{"disabled": true}`, nil)
	keys := []string{"order_1", "order_2", "order_3", "order_4", "order_5", "order_6"}
	n := 60
	if testing.Short() {
		n = 30
	}
	type sent struct {
		key string
		i   int // its place among its key's events
		dlv string
	}
	byID := map[string]sent{}
	for i := range n {
		key := keys[i%len(keys)]
		var res ingestResponse
		in.mustCall(202, "POST", "/v1/tenants/acme/events", fmt.Sprintf(`{"type":"payment.succeeded","ordering_key":%q,"data":{"i":%d}}`, key, i), &res)
		byID[res.ID] = sent{key, i / len(keys), res.Deliveries[0].ID}
	}
	in.mustCall(200, "PATCH", "/v1/tenants/acme/endpoints/"+ep.ID, `{"disabled": false, "deliver_held": true}`, nil)
	for _, s := range byID {
		in.waitState(s.dlv, "succeeded")
	}

	// The order of processing is the order of the inbox's commits, which
	// record when each ran (verify/boltinbox/doc.go: verify.events holds
	// 0x01 ‖ receivedAt ‖ sha256 under len(sender) ‖ sender ‖ len(id) ‖
	// id); the printed lines may come out in another order.
	out := p.out.String()
	p.stop()
	type processed struct {
		at int64
		id string
	}
	var done []processed
	ib, err := boltinbox.Open(inboxPath)
	if err != nil {
		t.Fatal(err)
	}
	err = ib.DB().View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("verify.events")).ForEach(func(k, v []byte) error {
			if len(k) < 4 || len(v) < 9 {
				return fmt.Errorf("inbox record %x: %x", k, v)
			}
			done = append(done, processed{int64(binary.BigEndian.Uint64(v[1:9])), string(k[4:])})
			return nil
		})
	})
	ib.Close()
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(done, func(a, b processed) int { return cmp.Compare(a.at, b.at) })
	next := map[string]int{}
	for _, d := range done {
		s, ok := byID[d.id]
		if !ok {
			continue // the warm-up
		}
		if s.i != next[s.key] {
			t.Errorf("event %d of %s processed when %d was next", s.i, s.key, next[s.key])
		}
		next[s.key] = s.i + 1
	}
	for _, k := range keys {
		if want := n / len(keys); next[k] != want {
			t.Errorf("%s: %d events processed in order, want %d", k, next[k], want)
		}
	}
	early := strings.Count(out, " verified early (425): ")
	if early == 0 {
		t.Error("no event came before its previous one: the test did not exercise the check")
	}
	t.Logf("%d events, %d answered 425", n, early)
}
