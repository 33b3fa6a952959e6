package companion

import "github.com/cockroachdb/errors"

// ErrOutside is returned by IgnoreFiles for a file outside the project.
var ErrOutside = errors.New("companion: a file outside the project")

// ErrBadInput is returned by ReadInput when the hook's stdin is not the
// JSON object the agent writes, or lacks a field the event needs.
var ErrBadInput = errors.New("companion: bad hook input")
