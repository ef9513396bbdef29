package engine

// unknownEventType is the CodeUnknownEventType error for name in field:
// the catalogue entry it is closest to, when one is near (a typo), else
// how to add it.
func unknownEventType(field, name string, catalogue []EventType) *Error {
	names := make([]string, len(catalogue))
	for i, et := range catalogue {
		names[i] = et.Name
	}
	if near := closest(name, names); near != "" {
		return Errorf(CodeUnknownEventType, field, "event type %q is not in the catalogue; did you mean %q? (a new type is added with PUT /v1/event-types/%s)", name, near, name)
	}
	e := UnknownEventType(name)
	e.Field = field
	return e
}

// closest returns the candidate nearest to s by edit distance when it is
// near enough to be a typo of it (at most 2 edits, and at most a third of
// s's length), the first such in candidates' order on a tie; "" when
// none is.
func closest(s string, candidates []string) string {
	best, bestD := "", 0
	for _, c := range candidates {
		d := editDistance(s, c)
		if d == 0 || d > 2 || 3*d > len(s) {
			continue
		}
		if best == "" || d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes
// (event type names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
