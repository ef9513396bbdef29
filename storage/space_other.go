//go:build !(linux || darwin || freebsd)

package storage

// freeSpace cannot tell here.
func freeSpace(string) (uint64, bool) { return 0, false }
