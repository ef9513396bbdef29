package jsonschema

import (
	"encoding/json"
	"unicode/utf8"
)

// decode returns data, one JSON value, as the validator takes it:
// objects map[string]any, arrays []any, numbers json.Number (exact, as
// sent), strings, booleans, nil; ok is false when data is anything it
// does not read, and then the caller decodes it with the library's
// UnmarshalJSON. It is that function's result, made without its
// reader, buffer and scanner: what ingest validates is compacted I-JSON
// already checked (engine.PrepareEvent), and the decode was half the
// cost of a validation (BenchmarkCompiledSchema_Validate). A string
// with an escape is read by encoding/json; FuzzDecode holds decode to
// UnmarshalJSON's result on every input.
func decode(data []byte) (v any, ok bool) {
	d := decoder{data: data}
	v, ok = d.value(0)
	d.space()
	return v, ok && d.i == len(d.data)
}

// maxDecodeDepth bounds decode's recursion; deeper is left to
// UnmarshalJSON (ingest refuses data deeper than engine.MaxDataDepth).
const maxDecodeDepth = 128

type decoder struct {
	data []byte
	i    int
}

func (d *decoder) space() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, bool) {
	d.space()
	if d.i >= len(d.data) || depth > maxDecodeDepth {
		return nil, false
	}
	switch c := d.data[d.i]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		s, ok := d.string()
		return s, ok
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	}
	return nil, false
}

func (d *decoder) literal(lit string) bool {
	if len(d.data)-d.i < len(lit) || string(d.data[d.i:d.i+len(lit)]) != lit {
		return false
	}
	d.i += len(lit)
	return true
}

func (d *decoder) object(depth int) (any, bool) {
	d.i++ // {
	m := map[string]any{}
	d.space()
	if d.i < len(d.data) && d.data[d.i] == '}' {
		d.i++
		return m, true
	}
	for {
		d.space()
		if d.i >= len(d.data) || d.data[d.i] != '"' {
			return nil, false
		}
		k, ok := d.string()
		if !ok {
			return nil, false
		}
		d.space()
		if d.i >= len(d.data) || d.data[d.i] != ':' {
			return nil, false
		}
		d.i++
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		m[k] = v // a name twice: the last, as encoding/json (ingest refuses it)
		d.space()
		if d.i >= len(d.data) {
			return nil, false
		}
		switch d.data[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return m, true
		default:
			return nil, false
		}
	}
}

func (d *decoder) array(depth int) (any, bool) {
	d.i++ // [
	a := []any{}
	d.space()
	if d.i < len(d.data) && d.data[d.i] == ']' {
		d.i++
		return a, true
	}
	for {
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		d.space()
		if d.i >= len(d.data) {
			return nil, false
		}
		switch d.data[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return a, true
		default:
			return nil, false
		}
	}
}

// string reads the string at d.i (its opening quote): at once when it
// has no escape and is valid UTF-8 without control characters, through
// encoding/json when it has an escape.
func (d *decoder) string() (string, bool) {
	start := d.i
	d.i++
	plain := true
	for d.i < len(d.data) {
		switch c := d.data[d.i]; {
		case c == '"':
			d.i++
			if plain {
				s := d.data[start+1 : d.i-1]
				if !utf8.Valid(s) {
					return "", false
				}
				return string(s), true
			}
			var s string
			if json.Unmarshal(d.data[start:d.i], &s) != nil {
				return "", false
			}
			return s, true
		case c == '\\':
			plain = false
			d.i += 2 // the escaped byte is never the closing quote
		case c < 0x20:
			return "", false
		default:
			d.i++
		}
	}
	return "", false
}

// number reads the number at d.i, by JSON's grammar, as json.Number.
func (d *decoder) number() (any, bool) {
	start := d.i
	if d.data[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.data) && d.data[d.i] == '0':
		d.i++
	case d.digits() == 0:
		return nil, false
	}
	if d.i < len(d.data) && d.data[d.i] == '.' {
		d.i++
		if d.digits() == 0 {
			return nil, false
		}
	}
	if d.i < len(d.data) && (d.data[d.i] == 'e' || d.data[d.i] == 'E') {
		d.i++
		if d.i < len(d.data) && (d.data[d.i] == '+' || d.data[d.i] == '-') {
			d.i++
		}
		if d.digits() == 0 {
			return nil, false
		}
	}
	return json.Number(d.data[start:d.i]), true
}

// digits skips the digits at d.i and returns how many there were.
func (d *decoder) digits() int {
	n := 0
	for d.i < len(d.data) && '0' <= d.data[d.i] && d.data[d.i] <= '9' {
		d.i++
		n++
	}
	return n
}
