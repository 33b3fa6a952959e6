package main

import (
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/store"
)

// openToWrite opens the database at path for a command that writes to it,
// creating it when there is no file there; fresh reports that there was
// none before.
func openToWrite(path string, opts store.Options) (db *store.DB, fresh bool, err error) {
	_, serr := os.Stat(path)
	fresh = errors.Is(serr, fs.ErrNotExist)
	if fresh {
		if err := checkParentDir(path); err != nil {
			return nil, false, err
		}
	}
	opts.Create = true
	db, err = store.Open(path, opts)
	if err != nil {
		return nil, false, explainOpen(err)
	}
	return db, fresh, nil
}

// closeWritten closes a database openToWrite opened, keeping the first
// error. When the command failed (*err is set), the file was fresh and it
// holds no session — bad input, a missing file, nothing recognized — the
// file is removed first, while the lock is still held: a failed command
// leaves no new empty database behind, and never removes one that was
// there or that holds anything. (An Open that waited for the lock finds
// the file gone and looks again.)
func closeWritten(db *store.DB, fresh bool, err *error) {
	if *err != nil && fresh {
		if ids, serr := db.Sessions(); serr == nil && len(ids) == 0 {
			if rerr := os.Remove(db.Path()); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				*err = errors.CombineErrors(*err, errors.Wrap(rerr, "removing the empty database"))
			}
		}
	}
	closeDB(db, err)
}

// checkParentDir returns an error, with a hint naming the mkdir that makes
// it, when the database file at path, which a command is to create, would
// be in a directory that does not exist: a command creates the file, never
// the directory, which a typo in the path would make too.
func checkParentDir(path string) error {
	if postgres.IsURL(path) {
		return nil
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return errors.WithHintf(errors.Newf("%s: the directory %s does not exist", path, dir),
		"create it first: mkdir -p %s", shellQuote(dir))
}
