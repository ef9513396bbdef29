package engine

import (
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

var idPattern = regexp.MustCompile(`^[a-z]{2,4}_[0-9a-z]{26}$`)

// Limits on names and free text. A text's (ValidateText) counts
// characters, Unicode code points, as JSON Schema's maxLength does; the
// others bound ASCII, where a byte is a character.
const (
	MaxTenantIDLen    = 64
	MaxTenantNameLen  = 256
	MaxEventTypeLen   = 128
	MaxDescriptionLen = 1024
	MaxURLLen         = 2048
	MaxAPIVersionLen  = 64
	MaxIdempotencyKey = 255
	MaxOrderingKey    = 255
	MaxEventTypesEach = 256      // subscriptions per endpoint
	MaxExampleLen     = 16 << 10 // an event type's example data, compacted
	MaxChannelLen     = 128      // one channel's name
	MaxChannels       = 10       // channels of one event, and of one endpoint's filter
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
func validTenantID(id string) bool { return validName(id, MaxTenantIDLen, false) }

// validChannel reports whether ch matches ^[A-Za-z0-9_.-]{1,128}$: the
// tenant ID's characters, as Svix takes them in a channel (any of them
// first, so that every Svix channel is one here).
func validChannel(ch string) bool { return validName(ch, MaxChannelLen, true) }

// validName reports whether s is 1 to max ASCII letters, digits, '_',
// '.' and '-', the first a letter or digit unless punctFirst. (A loop
// rather than a regexp: every ingest checks its tenant, and its
// channels.)
func validName(s string, max int, punctFirst bool) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case (i > 0 || punctFirst) && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ValidateChannels reports a CodeInvalidField error unless chs, the
// channels of an event or of an endpoint's filter (field is
// "channels"), are at most MaxChannels distinct names, each 1 to
// MaxChannelLen ASCII letters, digits, '_', '.' and '-' (case counts:
// "Project_1" is not "project_1"). An error about one channel names it
// as field[i].
func ValidateChannels(field string, chs []string) error {
	if len(chs) > MaxChannels {
		return Errorf(CodeInvalidField, field, "%s lists %d channels, at most %d", field, len(chs), MaxChannels)
	}
	for i, ch := range chs {
		f := field + "[" + strconv.Itoa(i) + "]"
		if !validChannel(ch) {
			shown := ch
			if len(shown) > 40 {
				shown = strings.ToValidUTF8(shown[:40], "") + "…"
			}
			return Errorf(CodeInvalidField, f, "%s %q is not a channel: a channel is 1 to %d ASCII letters, digits, '_', '.' or '-', like project_123", f, shown, MaxChannelLen)
		}
		if slices.Contains(chs[:i], ch) {
			return Errorf(CodeInvalidField, f, "channel %q is listed twice", ch)
		}
	}
	return nil
}

// ValidateChannel reports a CodeInvalidField error for field unless ch
// is one channel name (ValidateChannels): a listing's filter.
func ValidateChannel(field, ch string) error {
	if !validChannel(ch) {
		return Errorf(CodeInvalidField, field, "%s must be a channel: 1 to %d ASCII letters, digits, '_', '.' or '-'", field, MaxChannelLen)
	}
	return nil
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
// absolute http or https URL with a host and no user info or fragment,
// that ValidateText takes as identifier-like text.
func ValidateEndpointURL(raw string) error {
	bad := func(why string) error { return Errorf(CodeInvalidField, "url", "%s", why) }
	if raw == "" {
		return bad("url is required")
	}
	if err := ValidateText("url", raw, MaxURLLen, IdentifierText); err != nil {
		return err
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

// TextKind says which characters a text field may hold (ValidateText).
type TextKind bool

const (
	// IdentifierText is every text that names or labels something: an
	// ordering key, an Idempotency-Key, an api_version, a tenant's name,
	// a URL. It is one line of visible characters.
	IdentifierText TextKind = false
	// FreeText is prose written for people (descriptions): it may also
	// hold tab, line feed and carriage return, and the zero-width
	// joiners (U+200C, U+200D) that emoji sequences and some scripts
	// need.
	FreeText TextKind = true
)

// ValidateText reports a CodeInvalidField error for field unless s is at
// most max characters (Unicode code points, which JSON Schema's
// maxLength counts: up to 4*max bytes) of valid UTF-8 holding no character of Unicode category
// Cc (controls: C0, DEL, C1 such as NEL and CSI) or Cf (invisible
// formatting: bidi marks, embeddings, overrides and isolates, zero-width
// characters, the BOM, tags), no line or paragraph separator (U+2028,
// U+2029) and no noncharacter (U+FDD0-U+FDEF, U+nFFFE, U+nFFFF; I-JSON,
// RFC 7493 §2.1), but the few free text may hold (see FreeText). It is
// the one rule for every text the API takes that is not a strict ASCII
// identifier (ValidateTenantID, ValidateEventType and IDs are): such a
// character is invisible or moves text around it wherever the text is
// shown (the console, a log line, a terminal, a receiver's own logs),
// which lets one string pass for another.
func ValidateText(field, s string, max int, kind TextKind) error {
	tooLong := func() error { return Errorf(CodeInvalidField, field, "%s is longer than %d characters", field, max) }
	if len(s) > utf8.UTFMax*max {
		return tooLong()
	}
	for i, chars := 0, 0; i < len(s); chars++ {
		if chars == max {
			return tooLong()
		}
		if c := s[i]; c < utf8.RuneSelf {
			if c < 0x20 && !(kind == FreeText && (c == '\t' || c == '\n' || c == '\r')) || c == 0x7f {
				return badTextChar(field, rune(c), i, kind)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return Errorf(CodeInvalidField, field, "%s is not valid UTF-8 (byte offset %d)", field, i)
		}
		if !textRune(r, kind) {
			return badTextChar(field, r, i, kind)
		}
		i += n
	}
	return nil
}

// textRune reports whether ValidateText takes the character r (not ASCII)
// in a text of kind.
func textRune(r rune, kind TextKind) bool {
	switch {
	case isNoncharacter(r):
		return false
	case r == 0x200C || r == 0x200D: // ZWNJ, ZWJ
		return kind == FreeText
	}
	return !unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// isNoncharacter reports whether r is one of Unicode's 66 noncharacters:
// U+FDD0-U+FDEF and the last two code points of each plane.
func isNoncharacter(r rune) bool {
	return 0xFDD0 <= r && r <= 0xFDEF || r&0xFFFE == 0xFFFE && r <= unicode.MaxRune
}

// badTextChar is ValidateText's error for the character r at byte offset i.
func badTextChar(field string, r rune, i int, kind TextKind) error {
	what := "a control character"
	switch {
	case isNoncharacter(r):
		what = "a Unicode noncharacter"
	case unicode.In(r, unicode.Zl, unicode.Zp):
		what = "a line or paragraph separator"
	case unicode.Is(unicode.Cf, r):
		what = "an invisible formatting character"
	}
	allowed := "visible characters and spaces"
	if kind == FreeText {
		allowed = "visible characters, spaces, tab and line breaks"
	}
	return Errorf(CodeInvalidField, field, "%s holds U+%04X, %s, at byte offset %d: it may hold only %s", field, r, what, i, allowed)
}

// CheckEvent reports the error ingest would give for ev, an event that
// comes in already stored rather than through PrepareEvent (an import
// of another store's events): its type must pass ValidateEventType, its
// api_version and ordering_key ValidateText as identifier-like text, its
// channels ValidateChannels, and
// its body must be I-JSON, as ingest checks data (scanData; the body is
// checked whole, so one level deeper than MaxDataDepth for the envelope
// around data), naming "body". The codes are ingest's: CodeInvalidField
// or CodeInvalidJSON.
func CheckEvent(ev Event) error {
	if err := ValidateEventType("type", ev.Type); err != nil {
		return err
	}
	if err := ValidateText("api_version", ev.APIVersion, MaxAPIVersionLen, IdentifierText); err != nil {
		return err
	}
	if err := ValidateText("ordering_key", ev.OrderingKey, MaxOrderingKey, IdentifierText); err != nil {
		return err
	}
	if err := ValidateChannels("channels", ev.Channels); err != nil {
		return err
	}
	_, err := scanData(make([]byte, 0, len(ev.Body)), ev.Body, "body", MaxDataDepth+1)
	return err
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
