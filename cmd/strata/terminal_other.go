//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package main

import "os"

// isTerminalFile reports whether f is a character device: without
// terminal attributes to ask for, the nearest sign of a terminal.
func isTerminalFile(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
