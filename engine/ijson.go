package engine

import (
	"bytes"
	"math"
	"strconv"
	"unicode/utf8"
)

// The data of an event is JSON that webhookd signs and sends byte for
// byte, and that receivers parse with whatever their language has. So it
// must be I-JSON (RFC 7493), JSON that every parser reads the same way,
// and it is checked in one place, scanData, by every way an event comes
// in: HTTP ingest, postgres.EnqueueTx and the Go client (through
// PrepareEvent), a catalogue example (PutEventType), and an import of
// stored events (CheckEvent). The rules:
//
//   - JSON (RFC 8259), one value, in UTF-8 (§8.1);
//   - no lone surrogate escape: a \u escape of a UTF-16 surrogate is a
//     high one (\uD800-\uDBFF) followed by a low one (RFC 7493 §2.1);
//   - no noncharacter (U+FDD0-U+FDEF, U+nFFFE, U+nFFFF), raw or escaped,
//     also as a surrogate pair (§2.1: MUST NOT); parsers refuse them or
//     replace them, so the receiver reads other text than was signed;
//   - no name twice in an object, at any depth, however it is escaped
//     (§2.3): parsers differ on which one wins;
//   - no number whose value a double cannot hold: one that, parsed as an
//     IEEE 754 double, overflows to ±Inf (1e400, 1e999999999, an integer
//     of 310 digits) is refused (§2.2); JavaScript reads it as Infinity
//     and Go's encoding/json refuses it. A number a double holds only
//     approximately is taken and kept as sent: precision lost to rounding
//     (2^53+1, 0.1, thirty significant digits) or to underflow (1e-400,
//     read as 0) is the SHOULD NOT of §2.2, which a sender may have
//     reasons for (an ID its receivers read as a string of digits, a
//     decimal library), and refusing 0.1 would refuse most prices;
//   - nesting of at most a given depth (MaxDataDepth for data).
//
// Insignificant whitespace is removed; every other byte is kept as sent.

// scanData appends src, the JSON value sent as field, to dst without its
// insignificant whitespace, as json.Compact writes it, checking it against
// the rules above in the same single pass, and returns the extended
// slice. On an error dst is returned as it was, and the error names field
// and the byte offset within src: CodeInvalidJSON for a break of the
// rules, CodeInvalidField when it nests objects and arrays deeper than
// maxDepth.
func scanData(dst, src []byte, field string, maxDepth int) ([]byte, error) {
	s := dataScan{src: src, out: dst, maxDepth: maxDepth}
	if f := s.scan(); f != nil {
		return dst, Errorf(f.code, field, f.format, append([]any{field}, f.args...)...)
	}
	return s.out, nil
}

// scanFault is an error of a scan before it is told its field, which
// its format takes as argument 1, before args. (Nothing of the field
// passes through the scan, so that its stacks stay on the goroutine's
// stack.)
type scanFault struct {
	code   Code
	format string
	args   []any
}

func fault(code Code, format string, args ...any) *scanFault {
	return &scanFault{code: code, format: format, args: args}
}

// dataScan is the state of one scanData but its stacks, which scan keeps.
type dataScan struct {
	src      []byte
	out      []byte
	maxDepth int
}

// scanFrame is an open object or array.
type scanFrame struct {
	object bool
	names  int // where the object's names start in scan's names
	// seen holds the object's names, unescaped, once it has more than
	// linearNames of them; until then they are in scan's names.
	seen map[string]struct{}
}

// linearNames is how many names an object's new name is compared with one
// by one (by hash first); beyond, a map holds them, so that an object of
// n names costs O(n), not O(n²).
const linearNames = 32

// nameRef is a name, as sent between its quotes, at out[start:end].
type nameRef struct {
	start, end int
	hash       uint32 // FNV-1a of the name unescaped
	escaped    bool   // it holds a backslash
}

// scan reads src whole.
func (s *dataScan) scan() *scanFault {
	var stackBuf [8]scanFrame
	var namesBuf [2 * linearNames]nameRef
	// The open objects and arrays, innermost last, and the names so far
	// of the open objects that have no map yet.
	stack, names := stackBuf[:0], namesBuf[:0]
	src := s.src
	i := skipSpace(src, 0)
	var n nameRef
	var at int
	var err *scanFault
	for {
		// A value starts at i.
		if i >= len(src) {
			return s.eof()
		}
		switch c := src[i]; c {
		case '{', '[':
			if len(stack) >= s.maxDepth {
				return fault(CodeInvalidField, "%[1]s nests objects and arrays more than %[2]d levels deep (byte offset %[3]d)", s.maxDepth, i)
			}
			s.out = append(s.out, c)
			i = skipSpace(src, i+1)
			if i < len(src) && src[i] == c+2 { // '}' or ']'
				s.out = append(s.out, c+2)
				i++
				break
			}
			stack = append(stack, scanFrame{object: c == '{', names: len(names)})
			if c == '{' {
				if at, n, i, err = s.member(i); err != nil {
					return err
				}
				if names, err = addName(s.out, names, &stack[len(stack)-1], at, n); err != nil {
					return err
				}
			}
			continue
		case '"':
			i, _, err = s.str(i)
		case 't':
			i, err = s.literal(i, "true")
		case 'f':
			i, err = s.literal(i, "false")
		case 'n':
			i, err = s.literal(i, "null")
		default:
			if c != '-' && (c < '0' || c > '9') {
				return s.syntax(i, "at the start of a value")
			}
			i, err = s.number(i)
		}
		if err != nil {
			return err
		}
		// A value ends before i: a separator, the end of its container, or
		// the end of src follows.
		for {
			i = skipSpace(src, i)
			if len(stack) == 0 {
				if i < len(src) {
					return fault(CodeInvalidJSON, "%[1]s is not valid JSON: unexpected data after its value, at byte offset %[2]d of %[1]s", i)
				}
				return nil
			}
			if i >= len(src) {
				return s.eof()
			}
			top := &stack[len(stack)-1]
			c := src[i]
			if c == ',' {
				s.out = append(s.out, ',')
				i = skipSpace(src, i+1)
				if top.object {
					if at, n, i, err = s.member(i); err != nil {
						return err
					}
					if names, err = addName(s.out, names, top, at, n); err != nil {
						return err
					}
				}
				break
			}
			if top.object && c != '}' || !top.object && c != ']' {
				if top.object {
					return s.syntax(i, "after an object member (expecting ',' or '}')")
				}
				return s.syntax(i, "after an array element (expecting ',' or ']')")
			}
			s.out = append(s.out, c)
			if top.object {
				names = names[:top.names]
			}
			stack = stack[:len(stack)-1]
			i++
		}
	}
}

// member reads an object member's name and colon at i: it returns the
// name, where it was read, and where the member's value starts.
func (s *dataScan) member(i int) (at int, n nameRef, value int, err *scanFault) {
	src := s.src
	if i >= len(src) {
		return i, n, i, s.eof()
	}
	if src[i] != '"' {
		return i, n, i, s.syntax(i, "where an object member's name should start")
	}
	n.start = len(s.out) + 1
	j, escaped, err := s.str(i)
	if err != nil {
		return i, n, j, err
	}
	n.end, n.escaped = len(s.out)-1, escaped
	j = skipSpace(src, j)
	if j >= len(src) {
		return i, n, j, s.eof()
	}
	if src[j] != ':' {
		return i, n, j, s.syntax(j, "after an object member's name (expecting ':')")
	}
	s.out = append(s.out, ':')
	return i, n, skipSpace(src, j+1), nil
}

// addName adds the name n, read at offset at and now at out[n.start:n.end],
// to those of the innermost object top, which must not have it yet, and
// returns names, the list of the open objects' names, updated.
func addName(out []byte, names []nameRef, top *scanFrame, at int, n nameRef) ([]nameRef, *scanFault) {
	name := out[n.start:n.end]
	if top.seen != nil {
		key := unescapeName(name, n.escaped)
		if _, dup := top.seen[key]; dup {
			return names, duplicateName(at, key)
		}
		top.seen[key] = struct{}{}
		return names, nil
	}
	var unescaped string
	if n.escaped {
		unescaped = unescapeName(name, true)
		n.hash = fnv1a(unescaped)
	} else {
		n.hash = fnv1a(name)
	}
	for _, o := range names[top.names:] {
		if o.hash != n.hash {
			continue
		}
		other := out[o.start:o.end]
		if !n.escaped && !o.escaped && string(name) == string(other) ||
			(n.escaped || o.escaped) && unescapeName(name, n.escaped) == unescapeName(other, o.escaped) {
			return names, duplicateName(at, unescapeName(name, n.escaped))
		}
	}
	names = append(names, n)
	if len(names)-top.names > linearNames {
		top.seen = make(map[string]struct{}, 4*linearNames)
		for _, o := range names[top.names:] {
			top.seen[unescapeName(out[o.start:o.end], o.escaped)] = struct{}{}
		}
		names = names[:top.names]
	}
	return names, nil
}

// fnv1a is the 32-bit FNV-1a hash of s.
func fnv1a[T string | []byte](s T) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// plainByte marks the bytes a string holds as they are: printable ASCII
// but the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads the string that starts with the quote at i, appends it to
// out as it is, and returns the offset after its closing quote and
// whether it holds an escape.
func (s *dataScan) str(i int) (int, bool, *scanFault) {
	src, start, escaped := s.src, i, false
	i++
	for {
		for i < len(src) && plainByte[src[i]] {
			i++
		}
		if i >= len(src) {
			return i, false, s.eof()
		}
		switch c := src[i]; {
		case c == '"':
			s.out = append(s.out, src[start:i+1]...)
			return i + 1, escaped, nil
		case c == '\\':
			n, err := s.escape(i)
			if err != nil {
				return i, false, err
			}
			i, escaped = i+n, true
		case c < 0x20:
			return i, false, s.syntax(i, "in a string (a control character must be escaped)")
		default:
			r, n := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && n == 1 {
				return i, false, fault(CodeInvalidJSON, "%[1]s is not valid UTF-8 at byte offset %[2]d of %[1]s: JSON text must be UTF-8 (RFC 8259 §8.1)", i)
			}
			if isNoncharacter(r) {
				return i, false, s.noncharacter(i, r)
			}
			i += n
		}
	}
}

// escape checks the escape at i and returns its length.
func (s *dataScan) escape(i int) (int, *scanFault) {
	src := s.src
	if i+1 >= len(src) {
		return 0, s.eof()
	}
	switch src[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
	default:
		return 0, s.syntax(i+1, "in an escape (expecting one of \"\\/bfnrtu)")
	}
	r, ok := hex4(src[i+2:])
	if !ok {
		if len(src) < i+6 {
			return 0, s.eof()
		}
		return 0, fault(CodeInvalidJSON, "%[1]s is not valid JSON: a \\u escape needs four hex digits, at byte offset %[2]d of %[1]s", i)
	}
	n := 6
	if 0xD800 <= r && r <= 0xDFFF {
		var lo rune
		if r <= 0xDBFF && len(src) >= i+12 && src[i+6] == '\\' && src[i+7] == 'u' {
			lo, _ = hex4(src[i+8:])
		}
		if lo < 0xDC00 || lo > 0xDFFF {
			return 0, fault(CodeInvalidJSON, "lone surrogate %[2]s at byte offset %[3]d of %[1]s: a \\u escape of a UTF-16 surrogate must be a high one (\\uD800-\\uDBFF) followed by a low one (\\uDC00-\\uDFFF)",
				string(src[i:i+6]), i)
		}
		r, n = 0x10000+(r-0xD800)<<10+(lo-0xDC00), 12
	}
	if isNoncharacter(r) {
		return 0, s.noncharacter(i, r)
	}
	return n, nil
}

// hex4 reads the four hex digits b starts with.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c|0x20 && c|0x20 <= 'f':
			c = c | 0x20 - 'a' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number reads the number at i, appends it to out and returns the offset
// after it.
func (s *dataScan) number(i int) (int, *scanFault) {
	src, start := s.src, i
	if src[i] == '-' {
		i++
	}
	if i >= len(src) {
		return i, s.eof()
	}
	intStart := i
	switch c := src[i]; {
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		i = skipDigits(src, i+1)
	default:
		return i, s.syntax(i, "in a number")
	}
	// lead is the power of ten of the first significant digit, before
	// the exponent; nonzero is whether there is one.
	nonzero, lead := src[intStart] != '0', i-intStart-1
	if i < len(src) && src[i] == '.' {
		frac := i + 1
		if i = skipDigits(src, frac); i == frac {
			return s.digitsExpected(i, "after a decimal point")
		}
		if !nonzero {
			if k := bytes.IndexFunc(src[frac:i], func(r rune) bool { return r != '0' }); k >= 0 {
				nonzero, lead = true, -k-1
			}
		}
	}
	exp := 0
	if i < len(src) && src[i]|0x20 == 'e' {
		i++
		neg := i < len(src) && src[i] == '-'
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		digits := i
		for ; i < len(src) && '0' <= src[i] && src[i] <= '9'; i++ {
			if exp < 1e6 { // beyond, the number is 0 or out of range either way
				exp = exp*10 + int(src[i]-'0')
			}
		}
		if i == digits {
			return s.digitsExpected(i, "in an exponent")
		}
		if neg {
			exp = -exp
		}
	}
	// Below 1e308 a double holds it; from 1e309 on it does not; between,
	// the parse decides (the largest double is 1.7976931348623157e308).
	if nonzero && lead+exp >= 308 {
		if f, _ := strconv.ParseFloat(string(src[start:i]), 64); lead+exp > 308 || math.IsInf(f, 0) {
			return i, fault(CodeInvalidJSON, "number %[2]s at byte offset %[3]d of %[1]s is beyond what an IEEE 754 double holds (±1.8e308): receivers' JSON parsers cannot read it (RFC 7493 §2.2)",
				clipText(src[start:i]), start)
		}
	}
	s.out = append(s.out, src[start:i]...)
	return i, nil
}

// skipDigits returns the offset of the first byte from i on that is not a
// decimal digit.
func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// digitsExpected is the error for a number without the digits that
// should be at i.
func (s *dataScan) digitsExpected(i int, where string) (int, *scanFault) {
	if i >= len(s.src) {
		return i, s.eof()
	}
	return i, s.syntax(i, "in a number (a digit must come "+where+")")
}

// literal reads the literal word (true, false, null) at i.
func (s *dataScan) literal(i int, word string) (int, *scanFault) {
	for k := range len(word) {
		if i+k >= len(s.src) {
			return i + k, s.eof()
		}
		if s.src[i+k] != word[k] {
			return i + k, s.syntax(i+k, "in literal "+word)
		}
	}
	s.out = append(s.out, word...)
	return i + len(word), nil
}

// skipSpace returns the offset of the first byte from i on that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// syntax is the error for the unexpected character at i.
func (s *dataScan) syntax(i int, where string) *scanFault {
	what := "byte 0x" + strconv.FormatUint(uint64(s.src[i]), 16)
	if r, _ := utf8.DecodeRune(s.src[i:]); r != utf8.RuneError {
		what = strconv.QuoteRune(r)
	}
	return fault(CodeInvalidJSON, "%[1]s is not valid JSON: invalid character %[2]s %[3]s, at byte offset %[4]d of %[1]s", what, where, i)
}

// eof is the error for src ending before its value does.
func (s *dataScan) eof() *scanFault {
	return fault(CodeInvalidJSON, "%[1]s is not valid JSON: it ends at byte offset %[2]d in the middle of a value", len(s.src))
}

func duplicateName(at int, name string) *scanFault {
	return fault(CodeInvalidJSON, "duplicate name %[2]q at byte offset %[3]d of %[1]s: a name may appear once in an object (RFC 7493 §2.3)", clipText([]byte(name)), at)
}

func (s *dataScan) noncharacter(at int, r rune) *scanFault {
	return fault(CodeInvalidJSON, "noncharacter U+%04[2]X at byte offset %[3]d of %[1]s: I-JSON text must not hold Unicode noncharacters (RFC 7493 §2.1), which receivers' parsers refuse or replace", r, at)
}

// maxTextInError bounds how much of a client's name or number an error
// repeats.
const maxTextInError = 40

// clipText returns b, or its first maxTextInError bytes (whole
// characters) and "…".
func clipText(b []byte) string {
	if len(b) <= maxTextInError {
		return string(b)
	}
	n := maxTextInError
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n]) + "…"
}

// unescapeName returns the text of a name as sent between its quotes,
// with its escapes decoded when escaped; it must have passed str.
func unescapeName(b []byte, escaped bool) string {
	if !escaped {
		return string(b)
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			out = append(out, b[i])
			continue
		}
		i++
		switch c := b[i]; c {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := hex4(b[i+1:])
			i += 4
			if 0xD800 <= r && r <= 0xDBFF {
				lo, _ := hex4(b[i+3:])
				r, i = 0x10000+(r-0xD800)<<10+(lo-0xDC00), i+6
			}
			out = utf8.AppendRune(out, r)
		default: // '"', '\\', '/'
			out = append(out, c)
		}
	}
	return string(out)
}
