package boltfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"
)

// create makes a new database at path, where there was no file: it builds
// it in a temporary file beside path (named as WriteFileAtomic's, and
// locked by bbolt while it is written), writes the meta record, syncs, and
// only then gives it the name path — with a hard link, which fails rather
// than replace a file another creator put there meanwhile; that one is
// the database then, and the temporary file goes. A kill or a full disk
// at any moment leaves no file at path, or a complete database; a
// temporary file left by a kill is removed by the next creation once no
// process holds it (sweepTemps).
func create(path string, opts Options) (err error) {
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
	bo := boltOptions(opts)
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
	// bbolt synced the file (unless NoSync) at the commit.
	if err := hook("create:synced"); err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // another creator's database is there: open it
		}
		return errors.Wrapf(err, "boltfile: create %s", path)
	}
	// The temporary name goes while bbolt still holds the file: no sweep
	// can take it for a dead writer's. (If it stays, it is one more name
	// of the database, which a sweep removes.)
	_ = os.Remove(tmp)
	if !opts.NoSync {
		if err := syncDir(dir); err != nil {
			return errors.Wrapf(err, "boltfile: create %s", path)
		}
	}
	return hook("create:linked")
}
