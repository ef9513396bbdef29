//go:build !linux

package storage

import bolt "go.etcd.io/bbolt"

// dropMapped does nothing here; see mmap_linux.go.
func dropMapped(*bolt.DB, int64) {}
