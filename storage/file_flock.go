//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package storage

import (
	"errors"
	"os"
	"syscall"
)

// errLocked is lockFile's error when another open file holds the lock.
var errLocked = errors.New("locked by another process")

// lockFile takes an exclusive flock on f without waiting. The lock goes
// with f's open file (bbolt's lock on the same file, through f, is the
// same lock).
func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}
