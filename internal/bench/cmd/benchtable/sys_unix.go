//go:build unix

package main

import (
	"os"
	"syscall"
)

// syncDisks flushes every file system's dirty pages (sync(2)).
func syncDisks() { syscall.Sync() }

// maxRSS is the peak resident memory of an ended process, as getrusage(2)
// reports it (KiB on Linux).
func maxRSS(ps *os.ProcessState) int64 { return ps.SysUsage().(*syscall.Rusage).Maxrss }
