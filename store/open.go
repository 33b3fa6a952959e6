package store

import (
	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
)

// Open opens the strata database at path: a bbolt file (package boltfile),
// or, when path is a postgres:// or postgresql:// URL, strata's tables in a
// PostgreSQL database (package postgres; the PG* environment variables
// fill in what the URL leaves out, so "postgres://" alone takes them all).
//
// Open finds the backend by path's URL scheme, a path's being
// backend.FileScheme, in package backend's registry, which each backend
// package fills in its init: a program links the backends it opens in by
// importing them, as database/sql's drivers are —
//
//	import _ "github.com/strata-go/strata" // the bbolt file and PostgreSQL backends
//
// or one of them (_ "github.com/strata-go/strata/backend/boltfile"). A
// path of a scheme nobody registered is ErrNoDriver, naming the scheme.
//
// A file: unless opts.Create is set, the file must exist; a zero-length
// file is refused (ErrEmptyFile); a file that another process holds is
// refused after opts.LockTimeout (ErrLocked); a file of another format is
// refused (ErrFormatTooNew, ErrFormatTooOld). Creating a file is atomic: a
// crash or a full disk while it is made leaves no file at path. A write
// whose commit fails at the disk's fsync (or with EIO) poisons the
// returned DB: that write's error is marked ErrPoisoned, every later write
// returns ErrPoisoned, and reads go on. Close it and Open again to write.
//
// PostgreSQL: many processes open the same database at once. Unless
// opts.Create is set, strata's tables must exist (ErrNotExist); Open
// creates or upgrades them by migrations under an advisory lock, waiting
// at most opts.LockTimeout for another process's (ErrLocked); a schema
// newer than this strata's is refused (ErrFormatTooNew). opts.ReadOnly
// runs no migration and writes nothing.
func Open(path string, opts Options) (*DB, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	if path == "" {
		return nil, errors.WithHint(errors.New("store: no database given: the path is empty"),
			"name a database file, or a postgres:// URL")
	}
	d, err := backend.Lookup(path)
	if err != nil {
		return nil, err
	}
	be, err := d.Open(path, backend.Options{Create: opts.Create, ReadOnly: opts.ReadOnly,
		LockTimeout: opts.LockTimeout, NoSync: opts.NoSync, Mode: opts.Mode, Clock: opts.Clock})
	if err != nil {
		return nil, err
	}
	db, err := New(be, opts)
	if err != nil {
		_ = be.Close()
		return nil, err
	}
	return db, nil
}
