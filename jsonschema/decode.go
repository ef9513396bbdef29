package jsonschema

import (
	"encoding/json"
	"sync"
	"unicode/utf8"
	"unsafe"
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
//
// The value is only lent: its strings and numbers without an escape are
// views of data (no copy), and its maps and slices are the decoder's,
// reused by the next decode once done is called. So the value, and
// anything made of it, must not be kept past done nor data changed
// before: Validate turns the library's error, which holds pieces of the
// value, into words before it calls done. This takes the decode's
// allocations out of each validation, which is most of what ingest
// with a schema costs beyond ingest without (bench: ingest-only
// -schema).
func decode(data []byte) (v any, ok bool, done func()) {
	d := decoders.Get().(*decoder)
	d.data, d.i = data, 0
	v, ok = d.value(0)
	d.space()
	return v, ok && d.i == len(d.data), d.release
}

// maxDecodeDepth bounds decode's recursion; deeper is left to
// UnmarshalJSON (ingest refuses data deeper than engine.MaxDataDepth).
const maxDecodeDepth = 128

// Bounds of what a decoder keeps for reuse: a map or slice larger than
// reuseLen is left to the collector, and so are those beyond reuseCount,
// so that one large value does not keep its memory in the pool.
const (
	reuseLen   = 64
	reuseCount = 256
)

// decoders holds idle decoders with the maps and slices of the values
// they made, cleared (decode).
var decoders = sync.Pool{New: func() any { return &decoder{} }}

type decoder struct {
	data []byte
	i    int

	// maps and slices are those the last value used (in use: the first
	// inUseMaps, inUseSlices) and idle ones, for the next value.
	maps        []map[string]any
	slices      [][]any
	inUseMaps   int
	inUseSlices int
}

// release clears the maps and slices of the value d made, keeps those
// within the bounds for the next decode and puts d back in the pool.
func (d *decoder) release() {
	kept := d.maps[:0]
	for _, m := range d.maps[:d.inUseMaps] {
		if len(m) <= reuseLen && len(kept) < reuseCount {
			clear(m)
			kept = append(kept, m)
		}
	}
	clear(d.maps[len(kept):d.inUseMaps])
	d.maps = append(kept, d.maps[d.inUseMaps:]...)
	keptS := d.slices[:0]
	for _, a := range d.slices[:d.inUseSlices] {
		if cap(a) <= reuseLen && len(keptS) < reuseCount {
			clear(a[:cap(a)])
			keptS = append(keptS, a[:0])
		}
	}
	clear(d.slices[len(keptS):d.inUseSlices])
	d.slices = append(keptS, d.slices[d.inUseSlices:]...)
	d.inUseMaps, d.inUseSlices = 0, 0
	d.data = nil
	decoders.Put(d)
}

// newMap returns an empty map, an idle one when d has one.
func (d *decoder) newMap() map[string]any {
	if d.inUseMaps < len(d.maps) {
		m := d.maps[d.inUseMaps]
		d.inUseMaps++
		return m
	}
	m := map[string]any{}
	d.maps = append(d.maps, m)
	d.inUseMaps++
	return m
}

// newSlice returns an empty slice, an idle one when d has one; done
// stores what was appended to it (its array may have grown).
func (d *decoder) newSlice() (a []any, done func([]any)) {
	n := d.inUseSlices
	if n == len(d.slices) {
		d.slices = append(d.slices, nil)
	}
	d.inUseSlices++
	return d.slices[n][:0], func(a []any) { d.slices[n] = a }
}

// view is b as a string, without a copy (decode: lent, like the value).
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
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
	m := d.newMap()
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
	a, store := d.newSlice()
	d.space()
	if d.i < len(d.data) && d.data[d.i] == ']' {
		d.i++
		if a == nil {
			a = []any{} // an empty array, not null
		}
		store(a)
		return a, true
	}
	for {
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		store(a)
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
				return view(s), true
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
	return json.Number(view(d.data[start:d.i])), true
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
