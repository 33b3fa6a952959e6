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
// creating it when there is none (a file, or strata's tables in a
// PostgreSQL schema).
func openToWrite(path string, opts store.Options) (*store.DB, error) {
	if _, serr := os.Stat(path); errors.Is(serr, fs.ErrNotExist) {
		if err := checkParentDir(path); err != nil {
			return nil, err
		}
	}
	opts.Create = true
	db, err := store.Open(path, opts)
	if err != nil {
		return nil, explainOpen(err)
	}
	return db, nil
}

// closeWritten closes a database openToWrite opened, keeping the first
// error. When the command failed (*err is set) and its open made the
// database, which holds no session — bad input, a missing file, nothing
// recognized — what the open made is removed first (store.DB.DropEmpty:
// the file, while its lock is held; the tables, locked): a failed command
// leaves no new empty database behind, and never removes one that was
// there or that holds anything.
func closeWritten(db *store.DB, err *error) {
	if *err != nil {
		if _, derr := db.DropEmpty(); derr != nil {
			*err = errors.CombineErrors(*err, errors.Wrap(derr, "removing the empty database"))
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
