package store

import (
	"fmt"

	"github.com/cockroachdb/errors"
)

// Sentinel errors. Each message is prefixed with the package so that
// cockroachdb/errors, which compares by message and type, never confuses
// them with another package's.
var (
	// ErrLocked is returned by Open when another process holds the file's
	// lock past Options.LockTimeout: a writer holds it exclusively, so a
	// second writer or any reader of a live database gets this error.
	ErrLocked = errors.New("store: database is held by another process")
	// ErrNotExist is returned by Open when the file does not exist and
	// Options.Create is false.
	ErrNotExist = errors.New("store: database file does not exist")
	// ErrEmptyFile is returned by Open when the file is zero bytes long.
	// bbolt would silently make it a fresh database; strata refuses, since an
	// empty file where a database was expected is damage, not a new start.
	ErrEmptyFile = errors.New("store: database file is empty")
	// ErrNotStrata is returned by Open when the file is not a strata
	// database (not bbolt at all, or bbolt without strata's meta bucket).
	ErrNotStrata = errors.New("store: not a strata database")
	// ErrFormatTooNew is returned by Open when the database was written by a
	// newer strata whose format this one does not know.
	ErrFormatTooNew = errors.New("store: database format is newer than this strata")
	// ErrCorrupt is returned when a stored record or bbolt's own structure is
	// damaged. It is never returned as data: see CorruptError.
	ErrCorrupt = errors.New("store: database is damaged")
	// ErrReadOnly is returned when a write is attempted on a database opened
	// with Options.ReadOnly.
	ErrReadOnly = errors.New("store: database is open read-only")
	// ErrClosed is returned by operations on a closed DB.
	ErrClosed = errors.New("store: database is closed")
	// ErrSessionNotFound is returned when a session does not exist.
	ErrSessionNotFound = errors.New("store: session not found")
	// ErrBadSession is returned when a session id is empty, too long, not
	// UTF-8 or holds control characters.
	ErrBadSession = errors.New("store: bad session id")
	// ErrNothingToCompact is returned by the Plan functions when the policy
	// finds no span to compact.
	ErrNothingToCompact = errors.New("store: nothing to compact")
	// ErrConflict is returned by Commit when the frame changed since the plan
	// was made (another compaction committed first). It is retryable: plan
	// again.
	ErrConflict = errors.New("store: frame changed since the plan; plan again")
	// ErrSpanChanged is returned by Commit when the raw span is no longer
	// resident or no longer hashes as it did at plan time.
	ErrSpanChanged = errors.New("store: raw span changed since the plan")
	// ErrNotFound is returned when a node, marker or checkpoint asked for by
	// id does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrBadOptions is returned by Open for contradictory options.
	ErrBadOptions = errors.New("store: bad options")
	// ErrPoisoned marks a write whose commit failed at the disk — an fsync
	// (fdatasync) that failed, or an EIO — and is returned by every later
	// write on the same DB. After a failed fsync the file's state is not
	// known: bbolt may already have written the new meta page, so the
	// failed write can be visible to readers of this DB and after a reopen,
	// and the kernel may have dropped pages it could not write. Reads go
	// on; to write again, close the DB and reopen it (Verify, or read back
	// what the failed write was to store). Errors at write time, before
	// any sync — a full disk (ENOSPC) — do not poison the DB.
	ErrPoisoned = errors.New("store: a commit failed at the disk; reopen the database")
)

// CorruptError says where damage was found: the session (if any), the
// bucket, the key and what is wrong. errors.Is(err, ErrCorrupt) holds.
type CorruptError struct {
	Session string
	Bucket  string
	Key     string
	Err     error
}

// Error implements error.
func (e *CorruptError) Error() string {
	where := e.Bucket
	if e.Session != "" {
		where = fmt.Sprintf("session %q %s", e.Session, e.Bucket)
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
