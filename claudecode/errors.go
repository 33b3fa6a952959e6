package claudecode

import "github.com/cockroachdb/errors"

var (
	// ErrBadInput is returned by ReadInput when the hook's stdin is not
	// the JSON object Claude Code writes, or lacks a field the event
	// needs.
	ErrBadInput = errors.New("claudecode: bad hook input")

	// ErrNoBoundary is returned by a SessionStart(compact) hook when the
	// store does not hold the compact_boundary record it found in the
	// transcript. A transcript without one is no error
	// (Result.NoBoundary).
	ErrNoBoundary = errors.New("claudecode: no compaction boundary")
)
