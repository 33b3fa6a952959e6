package transcript

import (
	"fmt"

	"github.com/cockroachdb/errors"
)

// Sentinel causes of a *LineError, and of the errors Read and NewDecoder
// return. Compare with errors.Is.
var (
	// ErrUnknownFormat is returned when a format name is not one of
	// Formats().
	ErrUnknownFormat = errors.New("transcript: unknown format")
	// ErrBadJSON is returned when the input is not JSON where JSON is
	// expected: a line of a JSONL file, or a document cut short.
	ErrBadJSON = errors.New("transcript: bad JSON")
	// ErrBadRecord is returned when a top-level JSON value is of a type the
	// format never has there (a number where a message or a list of
	// messages belongs).
	ErrBadRecord = errors.New("transcript: not a record of the format")
	// ErrTooLarge is returned when a line or a JSON value is over
	// Options.MaxRecordBytes.
	ErrTooLarge = errors.New("transcript: record over the size limit")
	// ErrNothingRecognized marks the error of an input in which no record
	// is of a kind the format knows (an empty input, a JSON object holding
	// no list of messages, lines of unknown types): its message names the
	// file and what it holds.
	ErrNothingRecognized = errors.New("transcript: no record of the format found")
)

// LineError is bad input: the file, the line (from 1) where the bad record
// starts, and why. Err wraps one of the sentinels of this package.
type LineError struct {
	File string
	Line int
	Err  error
}

// Error implements error.
func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

// Unwrap returns the cause.
func (e *LineError) Unwrap() error { return e.Err }

// Format implements fmt.Formatter through errors.FormatError.
func (e *LineError) Format(s fmt.State, verb rune) { errors.FormatError(e, s, verb) }
