package store

import (
	"github.com/strata-go/strata/backend/boltfile"
)

// Open opens the strata database in the bbolt file at path (package
// boltfile). Unless opts.Create is set, the file must exist; a zero-length
// file is refused (ErrEmptyFile); a file that another process holds is
// refused after opts.LockTimeout (ErrLocked); a file of another format is
// refused (ErrFormatTooNew, ErrFormatTooOld). Creating a file is atomic: a
// crash or a full disk while it is made leaves no file at path.
//
// A write whose commit fails at the disk's fsync (or with EIO) poisons the
// returned DB: that write's error is marked ErrPoisoned, every later write
// returns ErrPoisoned, and reads go on. Close it and Open again to write.
func Open(path string, opts Options) (*DB, error) {
	opts = opts.withDefaults()
	if err := opts.check(); err != nil {
		return nil, err
	}
	be, err := boltfile.Open(path, boltfile.Options{Create: opts.Create, ReadOnly: opts.ReadOnly,
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
