package engine

import (
	"math"
	"net/url"
	"regexp"
	"strings"
	"time"
)

var idPattern = regexp.MustCompile(`^[a-z]{2,4}_[0-9a-z]{26}$`)

// Limits on names and free text.
const (
	MaxEventTypeLen   = 128
	MaxDescriptionLen = 1024
	MaxURLLen         = 2048
	MaxAPIVersionLen  = 64
	MaxIdempotencyKey = 255
	MaxOrderingKey    = 255
	MaxEventTypesEach = 256      // subscriptions per endpoint
	MaxExampleLen     = 16 << 10 // an event type's example data, compacted
)

// ValidateTenantID reports a CodeInvalidField error unless id is 1-64 of
// letters, digits, '_', '.', '-', starting with a letter or digit.
func ValidateTenantID(id string) error {
	if !validTenantID(id) {
		return Errorf(CodeInvalidField, "tenant", "tenant id must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit")
	}
	return nil
}

// ValidateEventType reports a CodeInvalidField error unless name has the
// form resource.action: lowercase words of letters, digits and '_', joined
// by dots (payment.succeeded, invoice.line_item.updated).
func ValidateEventType(field, name string) error {
	if len(name) > MaxEventTypeLen || !validEventType(name) {
		return Errorf(CodeInvalidField, field, "event type must look like resource.action: lowercase letters, digits and '_' joined by dots, at most %d characters", MaxEventTypeLen)
	}
	return nil
}

// validTenantID reports whether id matches ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$.
// (A loop rather than a regexp: every ingest checks its tenant.)
func validTenantID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// validEventType reports whether name matches
// ^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$: two or more words joined by dots,
// each a lowercase letter then lowercase letters, digits and '_'.
func validEventType(name string) bool {
	dots := 0
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z':
		case i == 0 || name[i-1] == '.':
			return false // a word starts with a letter
		case '0' <= c && c <= '9', c == '_':
		case c == '.':
			dots++
		default:
			return false
		}
	}
	return dots > 0 && name[len(name)-1] != '.'
}

// validID reports whether id looks like one NewID made.
func validID(id string) bool { return idPattern.MatchString(id) }

// ValidateEndpointURL reports a CodeInvalidField error unless raw is an
// absolute http or https URL with a host and no user info or fragment.
func ValidateEndpointURL(raw string) error {
	bad := func(why string) error { return Errorf(CodeInvalidField, "url", "%s", why) }
	if raw == "" {
		return bad("url is required")
	}
	if len(raw) > MaxURLLen {
		return bad("url is longer than 2048 characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("url does not parse")
	}
	if u.Scheme == "" || u.Opaque != "" && !strings.Contains(raw, "://") {
		// "hooks.example.com/in" has no scheme; "localhost:8080/in" reads
		// as the scheme "localhost".
		return bad("url has no scheme: write it whole, like https://" + strings.TrimPrefix(raw, "//"))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad("url scheme must be http or https")
	}
	if u.Host == "" || u.Hostname() == "" {
		return bad("url must have a host")
	}
	if u.User != nil {
		return bad("url must not carry user info")
	}
	if u.Fragment != "" || strings.HasSuffix(raw, "#") {
		return bad("url must not have a fragment")
	}
	return nil
}

func validText(field, s string, max int) error {
	if len(s) > max {
		return Errorf(CodeInvalidField, field, "%s is longer than %d bytes", field, max)
	}
	for _, r := range s {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return Errorf(CodeInvalidField, field, "%s contains a control character", field)
		}
	}
	return nil
}

// durationInput reads a duration a request body may give either way: as
// name, in Go's duration syntax ("24h"; like names examples of it), or
// as name_seconds, a whole number of seconds. It returns the duration,
// the field it came from (for an error about its value), and whether
// either was given; both at once is an error.
func durationInput(name, text string, seconds *int64, like string) (time.Duration, string, bool, error) {
	secondsName := name + "_seconds"
	switch {
	case text != "" && seconds != nil:
		return 0, name, false, Errorf(CodeInvalidField, secondsName, "give %s or %s, not both", name, secondsName)
	case seconds != nil:
		if *seconds < 0 || *seconds > math.MaxInt64/int64(time.Second) {
			return 0, secondsName, false, Errorf(CodeInvalidField, secondsName, "%s must be a whole number of seconds, 0 or more", secondsName)
		}
		return time.Duration(*seconds) * time.Second, secondsName, true, nil
	case text != "":
		d, err := time.ParseDuration(text)
		if err != nil {
			return 0, name, false, Errorf(CodeInvalidField, name, "%s must be a duration like %s, or give %s", name, like, secondsName)
		}
		return d, name, true, nil
	}
	return 0, name, false, nil
}
