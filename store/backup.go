package store

import (
	"io"
	"os"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/backend/boltfile"
)

// Backup writes a consistent copy of the whole database to w, from one read
// transaction: writers go on meanwhile, and the copy is the database as of
// that transaction. It returns the bytes written.
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
func (db *DB) BackupFile(path string) (int64, error) {
	if dst, err := os.Stat(path); err == nil {
		if src, err := os.Stat(db.path); err == nil && os.SameFile(src, dst) {
			return 0, errors.Newf("store: backup: %s is the database itself", path)
		}
	}
	return WriteFileAtomic(path, 0o600, func(w io.Writer) (int64, error) { return db.Backup(w) })
}

// WriteFileAtomic writes path through write into a temporary file beside
// it, fsyncs, renames into place and fsyncs the directory: readers of path
// see the old file or the whole new one, after a crash too. It is
// boltfile.WriteFileAtomic, which documents the temporary files.
func WriteFileAtomic(path string, mode os.FileMode, write func(io.Writer) (int64, error)) (int64, error) {
	return boltfile.WriteFileAtomic(path, mode, write)
}

// WriteTo writes a consistent copy of the whole database, as of this
// snapshot, to w: what Backup does, for a caller that also reads the same
// snapshot (and so knows exactly what the copy holds).
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	c, ok := s.tx.(backend.Snapshotter)
	if !ok {
		return 0, errors.New("store: backup: this backend cannot copy itself")
	}
	n, err := c.WriteTo(w)
	return n, errors.Wrap(err, "store: backup")
}
