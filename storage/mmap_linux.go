//go:build linux

package storage

import (
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// dropMapped tells the kernel that this process no longer needs the pages
// of bbolt's memory map that it has touched (madvise MADV_DONTNEED over
// the first size bytes of the map). The pages stay in the page cache, and
// the next read of one maps it again, with the same bytes: the map is
// shared, read-only and file-backed, so nothing is lost. What goes is the
// process's hold on them, which RSS counts: reading a bucket through the
// map (and the kernel's fault-around, which maps up to 64 KiB of cached
// neighbours with every page) leaves hundreds of MB of other buckets'
// pages mapped after a walk of a large retry index.
//
// It must be called inside a transaction of db, which keeps bbolt from
// remapping the file meanwhile; size is that transaction's tx.Size().
func dropMapped(db *bolt.DB, size int64) {
	if size <= 0 {
		return
	}
	info := db.Info()
	// Best effort: an error leaves the pages mapped, which is only memory.
	syscall.Syscall(syscall.SYS_MADVISE, info.Data, uintptr(size), syscall.MADV_DONTNEED)
}
