package engine

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		status     int
		err        error
		want       Outcome
		wantReason string
	}{
		{200, nil, OutcomeSuccess, ""},
		{204, nil, OutcomeSuccess, ""},
		{299, nil, OutcomeSuccess, ""},
		{408, nil, OutcomeRetry, "HTTP 408"},
		{425, nil, OutcomeRetry, "HTTP 425"},
		{429, nil, OutcomeRetry, "HTTP 429"},
		{500, nil, OutcomeRetry, "HTTP 500"},
		{502, nil, OutcomeRetry, "HTTP 502"},
		{599, nil, OutcomeRetry, "HTTP 599"},
		{301, nil, OutcomePermanent, "check endpoint configuration"},
		{302, nil, OutcomePermanent, "redirects are not followed"},
		{400, nil, OutcomePermanent, "check endpoint configuration"},
		{401, nil, OutcomePermanent, "check endpoint configuration"},
		{404, nil, OutcomePermanent, "HTTP 404"},
		{410, nil, OutcomePermanent, "HTTP 410 Gone"},
		{100, nil, OutcomePermanent, "check endpoint configuration"},
		{0, context.DeadlineExceeded, OutcomeRetry, "timeout"},
		{0, &url.Error{Op: "Post", URL: "http://h/?token=s3cret", Err: syscall.ECONNREFUSED}, OutcomeRetry, "connection error: connection refused"},
		{0, errors.New("connection reset by peer"), OutcomeRetry, "connection error"},
	}
	for _, tt := range tests {
		name := strings.TrimSpace(strconv.Itoa(tt.status) + " " + errString(tt.err))
		t.Run(name, func(t *testing.T) {
			got, reason := classify(tt.status, tt.err, 10*time.Second)
			if got != tt.want {
				t.Errorf("outcome %s, want %s", got, tt.want)
			}
			if !strings.Contains(reason, tt.wantReason) {
				t.Errorf("reason %q, want it to contain %q", reason, tt.wantReason)
			}
			if strings.Contains(reason, "s3cret") {
				t.Errorf("reason %q leaks the URL", reason)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-5", 0},
		{"7", 7 * time.Second},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(time_RFC1123GMT), 90 * time.Second},
		{now.Add(-time.Minute).Format(time_RFC1123GMT), 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

const time_RFC1123GMT = "Mon, 02 Jan 2006 15:04:05 GMT"

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
