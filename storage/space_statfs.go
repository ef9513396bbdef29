//go:build linux || darwin || freebsd

package storage

import "syscall"

// freeSpace returns the bytes an unprivileged process may still write on
// the file system of dir, and whether it could tell.
func freeSpace(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return uint64(st.Bavail) * uint64(st.Bsize), true
}
