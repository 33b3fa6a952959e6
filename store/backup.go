package store

import (
	"context"
	"io"
	"os"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
)

// Backup writes a consistent copy of the whole database to w, from one read
// transaction: writers go on meanwhile, and the copy is the database as of
// that transaction. It returns the bytes written. It copies a bbolt file; a
// database that is not one (PostgreSQL) has no file to copy, and BackupFile
// writes one of it.
func (db *DB) Backup(w io.Writer) (n int64, err error) {
	if err := db.acquire(); err != nil {
		return 0, err
	}
	defer db.release()
	err = db.view(func(tx backend.Tx) error {
		n, err = (&Snapshot{tx: tx, db: db}).WriteTo(w)
		return err
	})
	return n, err
}

// BackupFile writes a consistent copy of the database to path, never leaving
// a half-written file there: it writes a temporary file in path's directory,
// fsyncs it, renames it into place and fsyncs the directory. (bbolt's
// CopyFile does none of this.) A failure leaves path as it was. A path that
// is the database's own file is refused: the copy would replace the file
// under the open database, whose later writes would go to the unlinked old
// one and be lost.
//
// A bbolt file is copied whole, as Backup copies it. A database that is not
// a file (PostgreSQL) is written into a new bbolt file, every session
// copied from one snapshot as Snapshot.CopyFile copies them; the result
// verifies and resumes as the source does. n is the file's size.
func (db *DB) BackupFile(path string) (n int64, err error) {
	if err := db.refuseItself("backup", path); err != nil {
		return 0, err
	}
	err = db.View(func(s *Snapshot) error {
		if s.IsFile() {
			n, err = WriteFileAtomic(path, 0o600, s.WriteTo)
			return err
		}
		if _, err := s.CopyFile(context.Background(), path, true, CopyOptions{}); err != nil {
			return err
		}
		fi, err := os.Stat(path)
		if err != nil {
			return errors.Wrap(err, "store: backup")
		}
		n = fi.Size()
		return nil
	})
	return n, err
}

// refuseItself returns an error, of op, when path names the database's own
// file (os.SameFile): a file renamed over it would replace it under the
// open database, whose later writes would go to the unlinked old one and
// be lost. A database that is not a file has none.
func (db *DB) refuseItself(op, path string) error {
	if db.path == "" {
		return nil
	}
	dst, err := os.Stat(path)
	if err != nil {
		return nil // no file there: nothing to replace
	}
	if src, err := os.Stat(db.path); err == nil && os.SameFile(src, dst) {
		return errors.Newf("store: %s: %s is the database itself", op, path)
	}
	return nil
}

// WriteFileAtomic writes path through write into a temporary file beside
// it, fsyncs, renames into place and fsyncs the directory: readers of path
// see the old file or the whole new one, after a crash too. It is the file
// backend's (backend.AtomicWriter: boltfile.WriteFileAtomic, which
// documents the temporary files).
func WriteFileAtomic(path string, mode os.FileMode, write func(io.Writer) (int64, error)) (int64, error) {
	w, err := fileDriver[backend.AtomicWriter]("write", path)
	if err != nil {
		return 0, err
	}
	return w.WriteFileAtomic(path, mode, write)
}

// fileDriver returns the driver of path's backend (a file's, unless path
// is a URL) as the capability T that op needs: writing a file whole
// (backend.AtomicWriter), building a new database (backend.Builder).
func fileDriver[T any](op, path string) (T, error) {
	var none T
	d, err := backend.Lookup(path)
	if err != nil {
		return none, errors.Wrapf(err, "store: %s %s", op, path)
	}
	c, ok := d.(T)
	if !ok {
		return none, errors.Newf("store: %s %s: the %s backend writes no new file there", op, path, backend.Scheme(path))
	}
	return c, nil
}

// IsFile reports whether the database is a bbolt file, which WriteTo
// copies as it is (Size bytes). A database that is not one (PostgreSQL)
// has no file to copy: CopyFile writes a new file of it, the backup
// BackupFile writes.
func (s *Snapshot) IsFile() bool {
	_, ok := s.tx.(backend.Snapshotter)
	return ok
}

// WriteTo writes a consistent copy of the whole database, as of this
// snapshot, to w: what Backup does, for a caller that also reads the same
// snapshot (and so knows exactly what the copy holds).
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	c, ok := s.tx.(backend.Snapshotter)
	if !ok {
		return 0, errors.New("store: backup: the database is not a file to copy: write a new file of it with BackupFile or Snapshot.CopyFile")
	}
	n, err := c.WriteTo(w)
	return n, errors.Wrap(err, "store: backup")
}
