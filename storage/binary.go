package storage

import (
	"encoding/binary"
	"errors"
	"time"
)

// The binary record format (formatV2) is a sequence of fields, each
// written by one of the append functions below and read back, in the same
// order, by a reader:
//
//	string    uvarint(length) ‖ bytes (kept byte for byte, valid UTF-8 or not)
//	int       varint
//	time      varint(Unix seconds) ‖ uvarint(nanoseconds, < 1e9); the zero
//	          time is the seconds of year 1 and reads back as time.Time{}
//	count     uvarint(n+1), or 0 for a nil slice (nil and empty differ)
//
// Times are read back in UTC without a monotonic reading. It replaced JSON
// for the records the dispatch path reads and writes on every attempt
// (deliveries, event headers): decoding a delivery's JSON was a fifth of
// the CPU of one attempt.

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendInt(b []byte, n int64) []byte { return binary.AppendVarint(b, n) }

func appendTime(b []byte, t time.Time) []byte {
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

// appendCount writes the length of a slice that is nil when isNil.
func appendCount(b []byte, n int, isNil bool) []byte {
	if isNil {
		return append(b, 0)
	}
	return binary.AppendUvarint(b, uint64(n)+1)
}

// errShort is the error of a binary record that ends inside a field or
// holds a field out of range.
var errShort = errors.New("truncated or malformed record")

// reader reads the fields of a binary record in order. The first problem
// sticks: later reads return zero values and err stays set, so a decoder
// reads every field and checks err once.
type reader struct {
	b   []byte
	err error
	// src, when set, is a copy of the record as string, n bytes long
	// like b at the start: string then returns pieces of it, so that a
	// record's strings cost one allocation together (sharedReader).
	src string
	n   int
}

// sharedReader returns a reader of data whose strings are pieces of one
// copy of it. Any of them keeps the whole copy alive: for records whose
// decoded strings live as long as the record (a delivery).
func sharedReader(data []byte) reader {
	return reader{b: data, src: string(data), n: len(data)}
}

func (r *reader) fail() { r.err, r.b = errShort, nil }

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// field returns the next length-prefixed field, still in the record's
// memory (which may be bbolt's memory-mapped page), or nil on error.
func (r *reader) field() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	f := r.b[:n]
	r.b = r.b[n:]
	return f
}

// string copies the next string out of the record (or, of a
// sharedReader, returns it from the record's copy).
func (r *reader) string() string {
	f := r.field()
	if r.src == "" || len(f) == 0 {
		return string(f)
	}
	end := r.n - len(r.b)
	return r.src[end-len(f) : end]
}

// skipString passes over a string without copying it.
func (r *reader) skipString() { r.field() }

func (r *reader) time() time.Time {
	sec, nsec := r.int(), r.uvarint()
	if r.err != nil {
		return time.Time{}
	}
	if nsec >= 1e9 {
		r.fail()
		return time.Time{}
	}
	t := time.Unix(sec, int64(nsec)).UTC()
	if t.Unix() != sec { // out of time.Time's range
		r.fail()
		return time.Time{}
	}
	return t
}

// count reads a slice length written by appendCount: -1 for nil. A count
// that cannot fit in what is left of the record (each element takes at
// least min bytes) is an error, so a corrupt count cannot make the caller
// allocate a huge slice.
func (r *reader) count(min int) int {
	v := r.uvarint()
	if r.err != nil {
		return 0
	}
	if v == 0 {
		return -1
	}
	if v-1 > uint64(len(r.b)/min) {
		r.fail()
		return 0
	}
	return int(v - 1)
}

// end reports the reader's error, or errShort when bytes are left over.
func (r *reader) end() error {
	if r.err == nil && len(r.b) != 0 {
		return errors.New("unexpected data after the record")
	}
	return r.err
}
