//go:build !linux

package boltfile

// releaseRange does nothing where the resident set is not trimmed.
func releaseRange([]byte) {}
