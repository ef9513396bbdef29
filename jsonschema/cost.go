package jsonschema

import (
	"fmt"
	"slices"

	sjs "github.com/santhosh-tekuri/jsonschema/v6"
)

// MaxEvaluations bounds how many subschemas one value of an event's
// data may be evaluated against, in the worst case over every value
// (cost). The validator evaluates each subschema that applies, with no
// clock and no budget of its own, and applicators that nest multiply:
// a chain of n anyOf of two $ref to the next link, a schema of a few
// hundred bytes, has 2^n paths, and each ingest of a value that fails
// them all walks every one (n=22, 1.4 KB: 15 s per ingest, on the
// ingest's goroutine, and inside the append's write when the schema
// changed meanwhile). Real schemas stay far below: a schema of hundreds
// of properties, $defs reused by $ref, a recursive tree, each evaluates
// a value against a handful of subschemas; 1000 leaves room for
// allOf/anyOf compositions and bounds a validation to milliseconds per
// value.
const MaxEvaluations = 1000

// costMaxDepth is the depth of data cost considers: ingest refuses
// deeper data (engine.MaxDataDepth).
const costMaxDepth = 64

// cost returns an upper bound of how many subschemas any one value
// within data (of depth at most costMaxDepth) is evaluated against when
// data is validated with s, saturated just above MaxEvaluations. Of a
// subschema, what applies to the value itself ($ref, $dynamicRef,
// allOf, anyOf, oneOf, not, if/then/else, dependentSchemas) adds up;
// what applies to a member or an item adds up among those that may
// apply to the same one (every patternProperties, additionalProperties,
// unevaluatedProperties, the largest of properties; items, contains,
// unevaluatedItems, the largest of prefixItems), the larger of an
// object's and an array's counting. A subschema met again at the same
// value through its own in-place applicators counts once (the validator
// refuses such a loop).
func cost(s *sjs.Schema) int {
	c := coster{memo: map[costKey]int{}, busy: map[costKey]bool{}, dynamic: map[string][]*sjs.Schema{}}
	c.collect(s, map[*sjs.Schema]bool{})
	return c.at(s, costMaxDepth)
}

type costKey struct {
	s *sjs.Schema
	d int
}

type coster struct {
	memo      map[costKey]int
	busy      map[costKey]bool
	dynamic   map[string][]*sjs.Schema // $dynamicAnchor: the subschemas that declare it
	recursive []*sjs.Schema            // $recursiveAnchor: true
}

// limit is where sums saturate.
const limit = MaxEvaluations + 1

func add(a, b int) int { return min(a+b, limit) }

// inPlace returns the subschemas s applies to the value itself.
func (c *coster) inPlace(s *sjs.Schema) []*sjs.Schema {
	var out []*sjs.Schema
	one := func(x *sjs.Schema) {
		if x != nil {
			out = append(out, x)
		}
	}
	one(s.Ref)
	// A dynamic reference resolves, at each validation, to one of its
	// candidates: each counts (once: the validator takes one).
	if s.DynamicRef != nil {
		out = appendNew(out, s.DynamicRef.Ref)
		if s.DynamicRef.Anchor != "" {
			out = appendNew(out, c.dynamic[s.DynamicRef.Anchor]...)
		}
	}
	if s.RecursiveRef != nil {
		out = appendNew(out, s.RecursiveRef)
		out = appendNew(out, c.recursive...)
	}
	one(s.Not)
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	one(s.If)
	one(s.Then)
	one(s.Else)
	one(s.ContentSchema)
	for _, x := range s.DependentSchemas {
		one(x)
	}
	for _, x := range s.Dependencies {
		if x, ok := x.(*sjs.Schema); ok {
			one(x)
		}
	}
	return out
}

// appendNew appends to out those of xs that are neither nil nor in it.
func appendNew(out []*sjs.Schema, xs ...*sjs.Schema) []*sjs.Schema {
	for _, x := range xs {
		if x != nil && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// children calls f with each subschema s applies to a member, an item
// or a property name, and with whether it is one of a set of which
// only one applies to a given member or item (properties,
// prefixItems, a list of items).
func children(s *sjs.Schema, f func(x *sjs.Schema, object, alternative bool)) {
	for _, x := range s.Properties {
		f(x, true, true)
	}
	for _, x := range s.PatternProperties {
		f(x, true, false)
	}
	if x, ok := s.AdditionalProperties.(*sjs.Schema); ok {
		f(x, true, false)
	}
	if s.UnevaluatedProperties != nil {
		f(s.UnevaluatedProperties, true, false)
	}
	if s.PropertyNames != nil {
		f(s.PropertyNames, true, false)
	}
	for _, x := range s.PrefixItems {
		f(x, false, true)
	}
	switch x := s.Items.(type) {
	case *sjs.Schema:
		f(x, false, false)
	case []*sjs.Schema:
		for _, x := range x {
			f(x, false, true)
		}
	}
	if x, ok := s.AdditionalItems.(*sjs.Schema); ok {
		f(x, false, false)
	}
	for _, x := range []*sjs.Schema{s.Items2020, s.Contains, s.UnevaluatedItems} {
		if x != nil {
			f(x, false, false)
		}
	}
}

// collect walks every subschema reachable from s once, noting the
// dynamic and recursive anchors.
func (c *coster) collect(s *sjs.Schema, seen map[*sjs.Schema]bool) {
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	if s.DynamicAnchor != "" {
		c.dynamic[s.DynamicAnchor] = append(c.dynamic[s.DynamicAnchor], s)
	}
	if s.RecursiveAnchor {
		c.recursive = append(c.recursive, s)
	}
	for _, x := range c.inPlace(s) {
		c.collect(x, seen)
	}
	if s.DynamicRef != nil {
		c.collect(s.DynamicRef.Ref, seen)
	}
	children(s, func(x *sjs.Schema, _, _ bool) { c.collect(x, seen) })
}

// at is cost of s for data of depth at most d.
func (c *coster) at(s *sjs.Schema, d int) int {
	k := costKey{s, d}
	if n, ok := c.memo[k]; ok {
		return n
	}
	if c.busy[k] {
		return 1 // a loop at one value: the validator stops it
	}
	c.busy[k] = true
	n := 1
	for _, x := range c.inPlace(s) {
		n = add(n, c.at(x, d))
	}
	if d > 0 {
		var sum, best [2]int // [object, array]
		children(s, func(x *sjs.Schema, object, alternative bool) {
			i := 1
			if object {
				i = 0
			}
			if alternative {
				best[i] = max(best[i], c.at(x, d-1))
			} else {
				sum[i] = add(sum[i], c.at(x, d-1))
			}
		})
		n = add(n, max(add(sum[0], best[0]), add(sum[1], best[1])))
	}
	delete(c.busy, k)
	c.memo[k] = n
	return n
}

// costError is the error for a schema whose cost is over MaxEvaluations.
func costError() error {
	return fmt.Errorf("one value may be evaluated against more than %d of its subschemas (applicators such as anyOf, oneOf, allOf and $ref that nest multiply the paths): it would make ingest slow; share less, or nest fewer alternatives", MaxEvaluations)
}
