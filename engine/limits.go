package engine

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// MaxDataDepth is how deeply the data of an ingested event may nest
// objects and arrays. Deeper data is refused (CodeInvalidField "data"):
// receivers' JSON parsers have limits of their own, often recursive ones,
// and an event no receiver can parse is better refused at ingest.
const MaxDataDepth = 64

// appendData appends data, the JSON value sent as field ("data" at
// ingest, "example" in the catalogue), to dst with the insignificant whitespace
// removed, as json.Compact writes it, and returns the extended slice: every
// other byte is kept as sent (an escape such as \u00e9 stays an escape, a
// raw é stays raw), since the envelope that holds it is what is signed. It
// refuses data that is not valid JSON (CodeInvalidJSON field), not valid
// UTF-8 (the same; RFC 8259 §8.1, and receivers that decode the body as
// text before checking its signature would refuse every delivery) or that
// nests deeper than MaxDataDepth (checkDataDepth's error). On an error dst
// is returned as it was.
func appendData(dst, data []byte, field string) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, data); err != nil {
		return dst, Errorf(CodeInvalidJSON, field, "%s is not valid JSON", field)
	}
	if !utf8.Valid(data) {
		return dst, Errorf(CodeInvalidJSON, field, "%s is not valid UTF-8", field)
	}
	b := buf.Bytes()
	if err := checkDataDepth(b[len(dst):], field); err != nil {
		return dst, err
	}
	return b, nil
}

// checkDataDepth reports a CodeInvalidField error for field when the JSON
// value data nests objects and arrays deeper than MaxDataDepth. data must
// be valid JSON (it is scanned, not parsed).
func checkDataDepth(data []byte, field string) error {
	depth, inString, escaped := 0, false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > MaxDataDepth {
				return Errorf(CodeInvalidField, field, "%s nests objects and arrays more than %d levels deep", field, MaxDataDepth)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}
