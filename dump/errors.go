package dump

import (
	"fmt"

	"github.com/cockroachdb/errors"
)

// ErrPastHead is the cause of a *RangeError: a seq range that starts past
// the head of the session it is of, so that it holds nothing.
var ErrPastHead = errors.New("dump: seq range starts past the session's head")

// RangeError is a seq range (Options.From, Options.To) of a session that
// holds no event of it: From is past Head.
type RangeError struct {
	Session  string
	From, To uint64 // To 0: up to the head
	Head     uint64
}

// Error implements error.
func (e *RangeError) Error() string {
	to := "head"
	if e.To != 0 {
		to = fmt.Sprint(e.To)
	}
	return fmt.Sprintf("%v: seq %d..%s of session %q, whose head is seq %d", ErrPastHead, e.From, to, e.Session, e.Head)
}

// Unwrap returns ErrPastHead.
func (e *RangeError) Unwrap() error { return ErrPastHead }

// Format implements fmt.Formatter through errors.FormatError.
func (e *RangeError) Format(s fmt.State, verb rune) { errors.FormatError(e, s, verb) }
