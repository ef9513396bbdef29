package engine

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"time"
)

// idEncoding is Crockford's base32 alphabet in lower case: it sorts in the
// same order as the bytes it encodes, so IDs made later sort later.
var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewID returns prefix + "_" + 26 characters: 48 bits of milliseconds since
// the Unix epoch and 80 random bits. IDs are unique, roughly time ordered
// and safe in URLs and bbolt keys.
func NewID(prefix string) string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	binary.BigEndian.PutUint16(b[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(b[2:6], uint32(ms))
	if _, err := rand.Read(b[6:]); err != nil {
		panic("engine: crypto/rand failed: " + err.Error()) // never happens on Linux
	}
	return prefix + "_" + idEncoding.EncodeToString(b[:])
}
