package backend_test

import (
	"testing"

	"github.com/strata-go/strata/backend"
)

// A URL's scheme picks its driver, case aside; anything else is a path,
// Windows' drive letters and a "://" after a slash included.
func TestScheme(t *testing.T) {
	for name, want := range map[string]string{
		"postgres://u@h/db":   "postgres",
		"PostgreSQL://h/db":   "postgresql",
		"mem://x":             "mem",
		"agent.db":            backend.FileScheme,
		"/tmp/a://b.db":       backend.FileScheme,
		`C:\agent.db`:         backend.FileScheme,
		"://x":                backend.FileScheme,
		"1abc://x":            backend.FileScheme,
		"git+ssh://h/repo.db": "git+ssh",
	} {
		if got := backend.Scheme(name); got != want {
			t.Errorf("Scheme(%q) = %q, want %q", name, got, want)
		}
	}
}
