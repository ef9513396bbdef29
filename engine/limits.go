package engine

import (
	"bytes"
	"encoding/json"
)

// MaxDataDepth is how deeply the data of an ingested event may nest
// objects and arrays. Deeper data is refused (CodeInvalidField "data"):
// receivers' JSON parsers have limits of their own, often recursive ones,
// and an event no receiver can parse is better refused at ingest.
const MaxDataDepth = 64

// appendData appends data to dst with the insignificant whitespace
// removed, as json.Compact writes it, and returns the extended slice. It
// refuses data that is not valid JSON (CodeInvalidJSON "data") or that
// nests deeper than MaxDataDepth (checkDataDepth's error). On an error dst
// is returned as it was.
func appendData(dst, data []byte) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, data); err != nil {
		return dst, Errorf(CodeInvalidJSON, "data", "data is not valid JSON")
	}
	b := buf.Bytes()
	if err := checkDataDepth(b[len(dst):]); err != nil {
		return dst, err
	}
	return b, nil
}

// checkDataDepth reports a CodeInvalidField error for "data" when the JSON
// value data nests objects and arrays deeper than MaxDataDepth. data must
// be valid JSON (it is scanned, not parsed).
func checkDataDepth(data []byte) error {
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
				return Errorf(CodeInvalidField, "data", "data nests objects and arrays more than %d levels deep", MaxDataDepth)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}
