//go:build !linux

package store

// releaseMapped is a no-op where the resident set is not trimmed.
func releaseMapped(string) {}

// releaseRange is a no-op where the resident set is not trimmed.
func releaseRange([]byte) {}
