//go:build !linux

package store

// releaseMapped is a no-op where the resident set is not trimmed.
func releaseMapped(string) {}
