package companion

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/cockroachdb/errors"
)

// ErrOutside is returned by IgnoreFiles for a file outside the project.
var ErrOutside = errors.New("companion: a file outside the project")

// ErrBadInput is returned by ReadInput when the hook's stdin is not the
// JSON object the agent writes, or lacks a field the event needs.
var ErrBadInput = errors.New("companion: bad hook input")

// SyntaxError is a settings text that does not parse, or a value of it of
// another kind than the agent reads there: at Line and Col (from 1, the
// column in characters) of File.
type SyntaxError struct {
	File      string
	Line, Col int
	Msg       string
}

// Error implements error.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// syntaxErrorAt returns a SyntaxError at byte offset off of text.
func syntaxErrorAt(file string, text []byte, off int, format string, args ...any) *SyntaxError {
	off = max(0, min(off, len(text)))
	line := 1 + bytes.Count(text[:off], []byte("\n"))
	col := 1 + utf8.RuneCount(text[bytes.LastIndexByte(text[:off], '\n')+1:off])
	return &SyntaxError{File: file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}
