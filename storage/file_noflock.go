//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package storage

import (
	"errors"
	"os"
)

// errLocked is lockFile's error when another open file holds the lock.
var errLocked = errors.New("locked by another process")

// lockFile does nothing here: only bbolt's own lock keeps two runs apart.
func lockFile(*os.File) error { return nil }
