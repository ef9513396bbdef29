package engine

// MaxDataDepth is how deeply the data of an ingested event may nest
// objects and arrays. Deeper data is refused (CodeInvalidField "data"):
// receivers' JSON parsers have limits of their own, often recursive ones,
// and an event no receiver can parse is better refused at ingest.
const MaxDataDepth = 64

// appendData appends data, the JSON value sent as field ("data" at
// ingest, "example" in the catalogue), to dst with the insignificant
// whitespace removed, as json.Compact writes it, and returns the extended
// slice: every other byte is kept as sent (an escape such as \u00e9 stays
// an escape, a raw é stays raw), since the envelope that holds it is what
// is signed. It refuses data that is not I-JSON (CodeInvalidJSON field;
// see scanData for the rules and why) or that nests deeper than
// MaxDataDepth (CodeInvalidField field), naming the byte offset in data.
// On an error dst is returned as it was.
func appendData(dst, data []byte, field string) ([]byte, error) {
	return scanData(dst, data, field, MaxDataDepth)
}
