package engine

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"sync"
	"time"
)

// idEncoding is Crockford's base32 alphabet in lower case: it sorts in the
// same order as the bytes it encodes, so IDs made later sort later.
var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// lastID is the previous ID's bytes, so that IDs made in one millisecond
// still sort in the order they were made.
var lastID struct {
	sync.Mutex
	b [16]byte
}

// NewID returns prefix + "_" + 26 characters: 48 bits of milliseconds since
// the Unix epoch and 80 bits that are random for the first ID of a
// millisecond and one more than the previous ID's for the next ones. IDs
// are unique, safe in URLs and bbolt keys, and sort in the order this
// process made them (listings in creation order rely on it).
func NewID(prefix string) string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	binary.BigEndian.PutUint16(b[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(b[2:6], uint32(ms))
	lastID.Lock()
	if string(b[:6]) <= string(lastID.b[:6]) {
		// Same millisecond (or the clock went back): the previous ID + 1.
		b = lastID.b
		for i := 15; i >= 0; i-- {
			if b[i]++; b[i] != 0 {
				break
			}
		}
	} else {
		rand.Read(b[6:]) // never returns an error (see newAccessTokenValue)
	}
	lastID.b = b
	lastID.Unlock()
	return prefix + "_" + idEncoding.EncodeToString(b[:])
}
