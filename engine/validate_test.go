package engine

import (
	"regexp"
	"strings"
	"testing"
)

// The patterns validTenantID and validEventType implement.
var (
	tenantIDPattern  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	eventTypePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)
)

func TestValidTenantID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"acme", true},
		{"A", true},
		{"9lives", true},
		{"acme_eu-1.prod", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{"_acme", false},
		{".acme", false},
		{"-acme", false},
		{"ac me", false},
		{"acme/x", false},
		{"acmé", false},
		{"acme\n", false},
		{"acme\x00", false},
		{"\xff", false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			if got := validTenantID(tt.id); got != tt.want {
				t.Errorf("validTenantID(%q) = %v, want %v", tt.id, got, tt.want)
			}
			if got := tenantIDPattern.MatchString(tt.id); got != tt.want {
				t.Errorf("the pattern says %v", got)
			}
		})
	}
}

func TestValidEventType(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"payment.succeeded", true},
		{"invoice.line_item.updated", true},
		{"a.b", true},
		{"v2.x9_", true},
		{"a_.b_", true},
		{"payment", false},
		{"", false},
		{".", false},
		{"a.", false},
		{".a", false},
		{"a..b", false},
		{"a.1b", false},
		{"1a.b", false},
		{"_a.b", false},
		{"a._b", false},
		{"Payment.succeeded", false},
		{"payment.Succeeded", false},
		{"payment-succeeded.x", false},
		{"payment.succeeded\n", false},
		{"pay ment.succeeded", false},
		{"paymént.succeeded", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := validEventType(tt.name); got != tt.want {
				t.Errorf("validEventType(%q) = %v, want %v", tt.name, got, tt.want)
			}
			if got := eventTypePattern.MatchString(tt.name); got != tt.want {
				t.Errorf("the pattern says %v", got)
			}
		})
	}
}

// FuzzValidNames checks the hand-written validators against the patterns.
func FuzzValidNames(f *testing.F) {
	for _, s := range []string{"acme", "payment.succeeded", "a..b", "a.", "_x", "acme-1.eu", "\xffa.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validTenantID(s), tenantIDPattern.MatchString(s); got != want {
			t.Errorf("validTenantID(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := validEventType(s), eventTypePattern.MatchString(s); got != want {
			t.Errorf("validEventType(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}
