package boltfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"
)

// create makes a new database at path, where there was no file: build,
// with nothing to fill, and a hard link to give it the name path — which
// fails rather than replace a file another creator put there meanwhile;
// that one is the database then, and the temporary file goes. made
// reports whether the file at path is this creation's.
func create(path string, opts Options) (made bool, err error) {
	err = build(path, opts, nil, func(tmp string) (bool, error) {
		if err := os.Link(tmp, path); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return false, nil // another creator's database is there: open it
			}
			return false, err
		}
		made = true
		return true, nil
	})
	return made && err == nil, err
}

// Build makes a new database at path and fills it, through fill, before
// it takes the name: in a temporary file beside path (named as
// WriteFileAtomic's, and locked by bbolt while it is built), written
// without an fsync until it is whole, then fsynced once and renamed over
// path — a file there is replaced whole — or, when replace is false,
// linked to path, which must not exist (an error that is fs.ErrExist, and
// the file there stays). The directory is fsynced after. A failure, of fill
// too, leaves path as it was and removes the temporary file; a kill
// leaves it for the next creation or WriteFileAtomic to path to remove.
//
// fill writes through the Backend it is given, and must not close it.
// opts.NoSync skips the one fsync of the file and the directory's.
func Build(path string, opts Options, replace bool, fill func(*Backend) error) error {
	return build(path, opts.withDefaults(), fill, func(tmp string) (bool, error) {
		if replace {
			return true, os.Rename(tmp, path)
		}
		return true, os.Link(tmp, path)
	})
}

// build makes a new database in a temporary file beside path: its meta
// record, what fill writes, an fsync (unless opts.NoSync) — and only then
// calls place, which gives it the name path, while bbolt still holds it:
// no sweep can take it for a dead writer's. placed false says that place
// found another database at path, which is no error. A kill or a full disk
// at any moment leaves no file at path (or the one that was there), or a
// complete database; a temporary file left by a kill is removed by the next
// creation once no process holds it (sweepTemps).
func build(path string, opts Options, fill func(*Backend) error, place func(tmp string) (placed bool, err error)) (err error) {
	dir := filepath.Dir(path)
	sweepTemps(path, time.Now())
	f, err := os.CreateTemp(dir, tempPattern(path))
	if err != nil {
		return errors.Wrapf(err, "boltfile: create %s", path)
	}
	tmp := f.Name()
	var db *bolt.DB
	defer func() {
		if db != nil {
			_ = guard(db.Close) // closes f
		} else {
			_ = f.Close()
		}
		_ = os.Remove(tmp)
	}()
	if err := f.Chmod(opts.Mode); err != nil {
		return errors.Wrapf(err, "boltfile: create %s", path)
	}
	// No fsync while it is built: the one at the end makes all of it
	// durable before it takes its name.
	built := opts
	built.NoSync = true
	bo := boltOptions(built)
	bo.OpenFile = func(string, int, os.FileMode) (*os.File, error) { return f, nil }
	err = guard(func() error {
		var err error
		db, err = bolt.Open(tmp, opts.Mode, bo)
		return err
	})
	if err != nil {
		db = nil // bbolt closed f
		return errors.Wrapf(err, "boltfile: create %s", path)
	}
	err = guard(func() error {
		return db.Update(func(btx *bolt.Tx) error {
			if err := hook("create:meta"); err != nil {
				return err
			}
			m, err := btx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			v, err := encodeMeta(metaRecord{Format: FormatVersion, CreatedBy: "strata", Created: opts.Clock().UnixNano()})
			if err != nil {
				return err
			}
			return m.Put(keyVersion, v)
		})
	})
	if err != nil {
		return errors.Wrapf(err, "boltfile: create %s", path)
	}
	if fill != nil {
		if err := fill(&Backend{path: tmp, opts: built, db: db}); err != nil {
			return err
		}
	}
	if !opts.NoSync {
		if err := f.Sync(); err != nil {
			return errors.Wrapf(err, "boltfile: create %s: fsync", path)
		}
	}
	if err := hook("create:synced"); err != nil {
		return err
	}
	placed, err := place(tmp)
	if err != nil {
		return errors.Wrapf(err, "boltfile: create %s", path)
	}
	if !placed {
		return nil
	}
	// A link leaves the temporary name: it goes while bbolt still holds
	// the file. (If it stays, it is one more name of the database, which a
	// sweep removes.)
	_ = os.Remove(tmp)
	if !opts.NoSync {
		if err := syncDir(dir); err != nil {
			return errors.Wrapf(err, "boltfile: create %s", path)
		}
	}
	return hook("create:linked")
}
