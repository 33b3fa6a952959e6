package claudecode

import "github.com/cockroachdb/errors"

var (
	// ErrBadInput is returned by ReadInput when the hook's stdin is not
	// the JSON object Claude Code writes, or lacks a field the event
	// needs.
	ErrBadInput = errors.New("claudecode: bad hook input")
)
