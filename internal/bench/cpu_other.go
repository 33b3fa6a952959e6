//go:build !unix

package bench

import "time"

// CPUTime returns 0: this system's CPU time is not read.
func CPUTime() time.Duration { return 0 }
