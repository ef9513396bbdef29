package engine

// MaxDataDepth is how deeply the data of an ingested event may nest
// objects and arrays. Deeper data is refused (CodeInvalidField "data"):
// receivers' JSON parsers have limits of their own, often recursive ones,
// and an event no receiver can parse is better refused at ingest.
const MaxDataDepth = 64

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
