package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/engine"
)

// TestLoadConfig_RetryPolicies: the files that set retry policies and
// are taken, and those that are refused with an error naming the key.
func TestLoadConfig_RetryPolicies(t *testing.T) {
	valid := []string{
		"[retry.policies.extended]\njitter = 0.1\n",
		"[retry.policies.standard]\nretry_statuses = [404, 409]\n",
		"[retry.policies.standard]\nschedule = [\"1s\"]\ndeadline = \"1m\"\n",
		"[delivery]\nschedule = [\"1s\"]\n[retry.policies.standard]\nschedule = [\"1s\"]\n", // equal: no conflict
		"[retry.policies.deploys]\nschedule = [\"1m\", \"5m\"]\ndeadline = \"6m\"\nretry_statuses = [404, 302, 499, 300]\n",
		"[retry.policies.one-shot]\nschedule = []\ndeadline = \"10s\"\n",
		"[retry.policies." + strings.Repeat("p", 32) + "]\nschedule = [\"1s\"]\ndeadline = \"10s\"\n",
	}
	for _, text := range valid {
		if _, err := loadConfig(writeConfig(t, text)); err != nil {
			t.Errorf("%s: %v", text, err)
		}
	}
	invalid := []struct {
		name string
		toml string
		want string // the error after "config PATH: "
	}{
		{"conflicting schedule", "[delivery]\nschedule = [\"1s\"]\n[retry.policies.standard]\nschedule = [\"2s\"]",
			`retry.policies.standard.schedule = ["2s"] conflicts with delivery.schedule = ["1s"]: both set the standard policy's schedule; set it in one place`},
		{"conflicting jitter", "[delivery]\njitter = 0.1\n[retry.policies.standard]\njitter = 0.3",
			`retry.policies.standard.jitter = 0.3 conflicts with delivery.jitter = 0.1`},
		{"conflicting deadline", "[delivery]\ndeadline = \"1h\"\n[retry.policies.standard]\ndeadline = \"2h\"",
			`retry.policies.standard.deadline = "2h0m0s" conflicts with delivery.deadline = "1h0m0s"`},
		{"standard's bad deadline named where it is set", "[retry.policies.standard]\ndeadline = \"-1s\"",
			`retry.policies.standard.deadline = "-1s": must be positive`},
		{"standard's bad jitter", "[retry.policies.standard]\njitter = 1",
			`retry.policies.standard.jitter = 1: must be at least 0 and below 1`},
		{"name upper case", "[retry.policies.Nightly]\nschedule = [\"1s\"]\ndeadline = \"1m\"",
			`retry.policies.Nightly: the name must be 1 to 32 lowercase letters`},
		{"name too long", "[retry.policies." + strings.Repeat("p", 33) + "]\nschedule = [\"1s\"]\ndeadline = \"1m\"",
			`retry.policies.` + strings.Repeat("p", 33) + `: the name must be`},
		{"unknown key in a policy", "[retry.policies.extended]\nschedul = [\"1s\"]", `unknown key retry.policies.extended.schedul`},
		{"own policy without schedule", "[retry.policies.deploys]\ndeadline = \"1h\"", `retry.policies.deploys.schedule: must be set`},
		{"own policy without deadline", "[retry.policies.deploys]\nschedule = [\"1m\"]", `retry.policies.deploys.deadline: must be set`},
		{"wait not positive", "[retry.policies.extended]\nschedule = [\"5s\", \"0s\"]", `retry.policies.extended.schedule[1] = "0s": must be positive`},
		{"too many waits", "[retry.policies.extended]\nschedule = [" + strings.Repeat("\"1s\", ", 26) + "]", `retry.policies.extended.schedule = [26 waits]: must have at most 25 waits`},
		{"jitter", "[retry.policies.extended]\njitter = -0.5", `retry.policies.extended.jitter = -0.5: must be at least 0 and below 1`},
		{"deadline under the schedule", "[retry.policies.extended]\ndeadline = \"1h\"",
			`retry.policies.extended.deadline = "1h0m0s": must be at least the schedule's total wait (27h35m5s)`},
		{"deadline under attempt_timeout", "[retry.policies.deploys]\nschedule = []\ndeadline = \"5s\"",
			`retry.policies.deploys.deadline = "5s": must be at least delivery.attempt_timeout ("10s")`},
		{"status 2xx", "[retry.policies.extended]\nretry_statuses = [200]", `retry.policies.extended.retry_statuses[0] = 200: must be a 3xx or 4xx status`},
		{"status 5xx", "[retry.policies.extended]\nretry_statuses = [404, 503]", `retry.policies.extended.retry_statuses[1] = 503: must be a 3xx or 4xx status`},
		{"status always retried", "[retry.policies.standard]\nretry_statuses = [429]", `retry.policies.standard.retry_statuses[0] = 429: is retried by every policy; leave it out`},
		{"status twice", "[retry.policies.extended]\nretry_statuses = [404, 404]", `retry.policies.extended.retry_statuses[1] = 404: is listed twice`},
		{"policies not a table", "[retry]\npolicies = 1", `retry.policies: must be a table of policies, [retry.policies.NAME]`},
		{"a policy not a table", "[retry.policies]\nnightly = \"1h\"", `retry.policies.nightly: must be a table, [retry.policies.nightly]`},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.toml+"\n")
			_, err := loadConfig(path)
			if err == nil {
				t.Fatal("no error")
			}
			if got, want := err.Error(), "config "+path+": "+tt.want; !strings.HasPrefix(got, want) {
				t.Errorf("got  %q\nwant %q...", got, want)
			}
		})
	}
}

// TestConfig_retryPolicies: the policies a configuration gives the
// dispatcher: standard from [delivery] (or its own table), extended
// built in with what its table changes, and the operator's own with
// delivery.jitter unless set; every one with [delivery]'s attempt
// timeout and Retry-After cap.
func TestConfig_retryPolicies(t *testing.T) {
	cfg, err := loadConfig(writeConfig(t, `
[delivery]
jitter = 0.1
attempt_timeout = "5s"
retry_after_max = "1m"
[retry.policies.standard]
deadline = "80m"
retry_statuses = [409]
[retry.policies.extended]
schedule = ["1m", "1h"]
deadline = "2h"
[retry.policies.deploys]
schedule = ["1m", "5m"]
deadline = "10m"
retry_statuses = [404]
`))
	if err != nil {
		t.Fatal(err)
	}
	standard, named := cfg.retryPolicies()
	def := engine.DefaultRetryPolicy()
	want := engine.RetryPolicy{Schedule: def.Schedule, Jitter: 0.1, Deadline: 80 * time.Minute, AttemptTimeout: 5 * time.Second, RetryAfterMax: time.Minute, RetryStatuses: []int{409}}
	if !reflect.DeepEqual(standard, want) {
		t.Errorf("standard = %+v\nwant %+v", standard, want)
	}
	wantNamed := map[string]engine.RetryPolicy{
		"extended": {Schedule: []time.Duration{time.Minute, time.Hour}, Jitter: 0.2, Deadline: 2 * time.Hour, AttemptTimeout: 5 * time.Second, RetryAfterMax: time.Minute},
		"deploys":  {Schedule: []time.Duration{time.Minute, 5 * time.Minute}, Jitter: 0.1, Deadline: 10 * time.Minute, AttemptTimeout: 5 * time.Second, RetryAfterMax: time.Minute, RetryStatuses: []int{404}},
	}
	if !reflect.DeepEqual(named, wantNamed) {
		t.Errorf("named = %+v\nwant %+v", named, wantNamed)
	}

	// The defaults: standard is webhookd's default, extended the
	// built-in one.
	standard, named = defaultConfig().retryPolicies()
	if !reflect.DeepEqual(standard, engine.DefaultRetryPolicy()) {
		t.Errorf("default standard = %+v, want %+v", standard, engine.DefaultRetryPolicy())
	}
	if len(named) != 1 || !reflect.DeepEqual(named["extended"], engine.ExtendedRetryPolicy()) {
		t.Errorf("default named = %+v, want extended only, %+v", named, engine.ExtendedRetryPolicy())
	}
	// A file that sets the standard policy in its own table keeps
	// working when encoded and loaded again (both places hold it).
	cfg, err = loadConfig(writeConfig(t, "[retry.policies.standard]\nschedule = [\"1s\", \"2s\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Delivery.Schedule; len(got) != 2 || got[1].Duration != 2*time.Second {
		t.Errorf("delivery.schedule = %v, want the standard table's", got)
	}
}
