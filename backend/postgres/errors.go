package postgres

import "github.com/cockroachdb/errors"

// Errors of this package; the others it returns are package backend's
// (backend.ErrNotExist, ErrFormatTooNew, ErrLocked, ErrCorrupt, …).
var (
	// ErrCommitUnknown marks the error of a write whose COMMIT was sent
	// and whose outcome is not known: the connection failed before the
	// server answered. The write may or may not be stored; a later read
	// tells. It is not run again.
	ErrCommitUnknown = errors.New("postgres: the connection failed during COMMIT; the write may or may not be stored")

	// errLockOrder rolls back a write transaction that needed a session's
	// lock out of order while another transaction held it (tx.lock): its
	// retry takes every lock it needed in order.
	errLockOrder = errors.New("postgres: a session's lock is held by another writer")
)
