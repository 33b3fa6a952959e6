package backend

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/cockroachdb/errors"
)

// Errors a backend returns, which package store exports under the same
// names. Each message is prefixed with "store:", the package a user sees:
// cockroachdb/errors compares by message and type, so no other package's
// error is confused with them.
var (
	// ErrLocked: another process holds the database past the lock timeout.
	ErrLocked = errors.New("store: database is held by another process")
	// ErrNotExist: the database — a file, or strata's tables in a
	// PostgreSQL schema — does not exist and was not to be created.
	ErrNotExist = errors.New("store: database does not exist")
	// ErrEmptyFile: the database file is zero bytes long, which is damage,
	// not a new start.
	ErrEmptyFile = errors.New("store: database file is empty")
	// ErrNotStrata: the file or schema is not a strata database.
	ErrNotStrata = errors.New("store: not a strata database")
	// ErrFormatTooNew: the database was written by a newer strata.
	ErrFormatTooNew = errors.New("store: database format is newer than this strata")
	// ErrFormatTooOld: the database was written in a format this strata no
	// longer reads.
	ErrFormatTooOld = errors.New("store: database format is older than this strata reads")
	// ErrCorrupt: a stored record or the backend's own structure is
	// damaged. It is never returned as data: see CorruptError.
	ErrCorrupt = errors.New("store: database is damaged")
	// ErrReadOnly: a write on a database opened read-only.
	ErrReadOnly = errors.New("store: database is open read-only")
	// ErrPoisoned marks a write whose commit failed at the disk (an fsync
	// that failed, an EIO), after which the backend's state is not known.
	ErrPoisoned = errors.New("store: a commit failed at the disk; reopen the database")
)

// CorruptError says where damage was found: the session (if any), the
// table or part of the backend, the key and what is wrong.
// errors.Is(err, ErrCorrupt) holds.
type CorruptError struct {
	Session string
	Bucket  string
	Key     string
	Err     error
}

// Corrupt returns a *CorruptError for damage at key (ShowKey) of bucket in
// session.
func Corrupt(session, bucket string, key []byte, err error) error {
	return &CorruptError{Session: session, Bucket: bucket, Key: ShowKey(key), Err: err}
}

// maxKeyShown is how many bytes of a key a CorruptError shows.
const maxKeyShown = 256

// ShowKey renders a key for an error: an 8-byte key as the big-endian
// number it holds (an id or a seq), any other quoted, and a long one cut.
func ShowKey(key []byte) string {
	switch {
	case len(key) == 0:
		return ""
	case len(key) == 8:
		return fmt.Sprint(binary.BigEndian.Uint64(key))
	case len(key) > maxKeyShown:
		// A damaged element can claim a key of gigabytes: only its start
		// is read, and shown.
		return fmt.Sprintf("%q… (%d bytes)", key[:maxKeyShown], len(key))
	}
	return fmt.Sprintf("%q", key)
}

// Error implements error.
func (e *CorruptError) Error() string {
	where := e.Bucket
	if e.Session != "" {
		where = strings.TrimSpace(fmt.Sprintf("session %q %s", e.Session, e.Bucket))
	}
	if e.Key != "" {
		where += " key " + e.Key
	}
	return fmt.Sprintf("%s: %s: %v", ErrCorrupt.Error(), where, e.Err)
}

// Unwrap returns ErrCorrupt marked on the cause, so that errors.Is matches
// both.
func (e *CorruptError) Unwrap() error { return errors.Mark(e.Err, ErrCorrupt) }

// Is reports whether target is ErrCorrupt: the standard library's
// errors.Is does not see cockroachdb/errors' marks.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Format implements fmt.Formatter through errors.FormatError.
func (e *CorruptError) Format(s fmt.State, verb rune) { errors.FormatError(e, s, verb) }
