package store

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/tier"
)

// Sentinel errors. Each message is prefixed with the package so that
// cockroachdb/errors, which compares by message and type, never confuses
// them with another package's. The errors of the bytes (a file's lock, its
// format, damage) are the backend package's, under the same names.
var (
	// ErrLocked is returned by Open when another process holds the file's
	// lock past Options.LockTimeout: a writer holds it exclusively, so a
	// second writer or any reader of a live database gets this error.
	ErrLocked = backend.ErrLocked
	// ErrNotExist is returned by Open when the file, or strata's tables in a
	// PostgreSQL schema, do not exist and Options.Create is false.
	ErrNotExist = backend.ErrNotExist
	// ErrEmptyFile is returned by Open when the file is zero bytes long.
	// bbolt would silently make it a fresh database; strata refuses, since an
	// empty file where a database was expected is damage, not a new start.
	ErrEmptyFile = backend.ErrEmptyFile
	// ErrNotStrata is returned by Open when the file is not a strata
	// database (not bbolt at all, or bbolt without strata's meta bucket).
	ErrNotStrata = backend.ErrNotStrata
	// ErrFormatTooNew is returned by Open when the database was written by a
	// newer strata whose format this one does not know.
	ErrFormatTooNew = backend.ErrFormatTooNew
	// ErrFormatTooOld is returned by Open when the database was written in a
	// format this strata no longer reads.
	ErrFormatTooOld = backend.ErrFormatTooOld
	// ErrCorrupt is returned when a stored record or bbolt's own structure is
	// damaged. It is never returned as data: see CorruptError.
	ErrCorrupt = backend.ErrCorrupt
	// ErrReadOnly is returned when a write is attempted on a database opened
	// with Options.ReadOnly.
	ErrReadOnly = backend.ErrReadOnly
	// ErrNoDriver is returned by Open when no backend is linked in for
	// the path's URL scheme, or for a file path (see Open).
	ErrNoDriver = backend.ErrNoDriver
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
	// ErrRefStored is returned by Append (the cause of a *RefError) when an
	// event carries the ref of a source record whose events the session
	// holds already.
	ErrRefStored = errors.New("store: the record is stored already")
	// ErrTooManyEvents is returned by Append for a call of more than
	// MaxAppendEvents events, before anything is read or written: split
	// the events into calls of at most MaxAppendEvents.
	ErrTooManyEvents = errors.New("store: too many events in one append")
	// ErrSessionExists is returned by Snapshot.Copy and CopyFile (the
	// cause of a *SessionExistsError) when the destination holds another
	// session of an id they were to copy.
	ErrSessionExists = errors.New("store: the destination holds another session of the same id")
	// ErrForkMarker is returned by DB.Fork when the marker asked for is no
	// promise to fork at: invalid, its node no longer a root, or no marker
	// at all (Latest of a session without one).
	ErrForkMarker = errors.New("store: no valid marker to fork at")
	// ErrForkParentMissing is the cause of a CorruptError of a fork whose
	// parent session is gone: the fork's raw events up to its fork point
	// are the parent's.
	ErrForkParentMissing = errors.New("store: a fork's parent session is missing")
	// ErrForkHeld is returned by Prune (the cause of a *HeldError) when a
	// session asked for by id has forks that read its raw log.
	ErrForkHeld = errors.New("store: the session has forks that depend on it")
	// ErrDestination marks an error of Snapshot.Copy and CopyFile that is
	// the destination's — reading or writing it, damage in it — and not the
	// snapshot's: errors.Is(err, ErrDestination) says which of the two
	// databases an error (ErrCorrupt, say) is about. It adds nothing to the
	// error's message.
	ErrDestination = errors.New("store: the copy's destination")
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
	ErrPoisoned = backend.ErrPoisoned
)

// CorruptError says where damage was found: the session (if any), the
// bucket (a table, "l0" for the raw log, "state", or a part of the
// backend), the key and what is wrong. errors.Is(err, ErrCorrupt) holds.
type CorruptError = backend.CorruptError

// RefError is the cause of an Append refused because an event carries the
// ref (tier.Event.Ref) of a source record whose events are stored already:
// the session, the ref, and the seqs First..Last that hold them — in the
// session, or earlier in the same Append when its events of one ref are
// not consecutive. It is the Err of a *tier.EventError naming the event;
// errors.Is(err, ErrRefStored) holds.
type RefError struct {
	Session     string
	Ref         string
	First, Last uint64
}

// Error implements error.
func (e *RefError) Error() string {
	seqs := fmt.Sprintf("seq %d", e.First)
	if e.Last > e.First {
		seqs = fmt.Sprintf("seq %d..%d", e.First, e.Last)
	}
	return fmt.Sprintf("%s: session %q record %q, at %s", ErrRefStored.Error(),
		tier.TruncateUTF8(e.Session, 128), tier.TruncateUTF8(e.Ref, 128), seqs)
}

// Unwrap returns ErrRefStored.
func (e *RefError) Unwrap() error { return ErrRefStored }

// Format implements fmt.Formatter through errors.FormatError.
func (e *RefError) Format(s fmt.State, verb rune) { errors.FormatError(e, s, verb) }

// ForkMarkerError is returned by DB.Fork when the marker asked for is no
// promise to fork at: Marker of Session (0: Latest, and the session has
// none) is not valid, for Reason. errors.Is(err, ErrForkMarker) holds.
type ForkMarkerError struct {
	Session string
	Marker  uint64
	Reason  string
}

// Error implements error.
func (e *ForkMarkerError) Error() string {
	if e.Marker == 0 {
		return fmt.Sprintf("%s: session %q: %s", ErrForkMarker.Error(), tier.TruncateUTF8(e.Session, 128), e.Reason)
	}
	return fmt.Sprintf("%s: session %q marker %d: %s", ErrForkMarker.Error(), tier.TruncateUTF8(e.Session, 128), e.Marker, e.Reason)
}

// Unwrap returns ErrForkMarker.
func (e *ForkMarkerError) Unwrap() error { return ErrForkMarker }

// Format implements fmt.Formatter through errors.FormatError.
func (e *ForkMarkerError) Format(s fmt.State, verb rune) { errors.FormatError(e, s, verb) }

// SessionExistsError is the error of a copy refused before it wrote
// anything: the destination holds sessions of ids it was to copy, IDs, in
// byte order. errors.Is(err, ErrSessionExists) holds.
type SessionExistsError struct {
	IDs []string
}

// maxIDsShown is how many ids a SessionExistsError's message names.
const maxIDsShown = 10

// Error implements error.
func (e *SessionExistsError) Error() string {
	var b strings.Builder
	b.WriteString(ErrSessionExists.Error())
	for i, id := range e.IDs {
		if i == maxIDsShown {
			fmt.Fprintf(&b, " and %d more", len(e.IDs)-i)
			break
		}
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%q", sep, id)
	}
	return b.String()
}

// Unwrap returns ErrSessionExists.
func (e *SessionExistsError) Unwrap() error { return ErrSessionExists }

// Format implements fmt.Formatter through errors.FormatError.
func (e *SessionExistsError) Format(s fmt.State, verb rune) { errors.FormatError(e, s, verb) }
