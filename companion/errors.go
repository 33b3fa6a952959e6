package companion

import "github.com/cockroachdb/errors"

// ErrOutside is returned by IgnoreFiles for a file outside the project.
var ErrOutside = errors.New("companion: a file outside the project")
