package engine

import (
	"slices"
	"testing"
)

// TestNewID_SortsInCreationOrder makes many IDs, most of them in the same
// millisecond, and requires them unique and sorted as made.
func TestNewID_SortsInCreationOrder(t *testing.T) {
	ids := make([]string, 20000)
	for i := range ids {
		ids[i] = NewID("evt")
	}
	if !slices.IsSorted(ids) {
		t.Fatal("IDs do not sort in the order they were made")
	}
	if len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Fatal("duplicate IDs")
	}
	if !validID(ids[0]) {
		t.Errorf("%q does not look like an ID", ids[0])
	}
}
