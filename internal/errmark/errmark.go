// Package errmark marks an error with a sentinel so that both the
// standard library's errors.Is and cockroachdb/errors.Is match it.
//
// cockroachdb/errors.Mark alone is invisible to the standard library's
// errors.Is, which a user of strata's packages will reach for first.
package errmark

import (
	"fmt"

	"github.com/cockroachdb/errors"
)

// Mark returns err marked with sentinel: errors.Is(result, sentinel)
// holds with either errors package, and so does errors.Is(result, x) for
// anything err wraps. The message is err's.
func Mark(err, sentinel error) error {
	if err == nil {
		return nil
	}
	return &marked{cause: errors.Mark(err, sentinel), sentinel: sentinel}
}

type marked struct {
	cause    error
	sentinel error
}

func (m *marked) Error() string { return m.cause.Error() }

// Unwrap returns the cause, marked for cockroachdb/errors.
func (m *marked) Unwrap() error { return m.cause }

// Is reports whether target is the sentinel, for the standard library.
func (m *marked) Is(target error) bool { return target == m.sentinel }

// Format prints the error as cockroachdb/errors does its own: %+v shows
// the cause's details and stack.
func (m *marked) Format(s fmt.State, verb rune) { errors.FormatError(m, s, verb) }

// FormatError adds nothing of its own: the cause says it all.
func (m *marked) FormatError(errors.Printer) error { return m.cause }
