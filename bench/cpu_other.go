//go:build !unix

package bench

import "time"

// cpuTime returns 0: the CPU time is not measured on this platform.
func cpuTime() time.Duration { return 0 }
